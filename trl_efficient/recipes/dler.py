"""Recipes of the DLER family: DLER (truncation penalty, group-centre + batch whitening, dynamic sampling with
refill) and DA-DLER (difficulty-aware truncation of easy prompts' correct samples). The reward builder
`dler_truncation` is registered with the core rewards in `registry.py`; the trainer, estimators and filter are in
`trl_efficient.methods.dler`. User guide: `docs/advantage-methods.md`; reference: docs/methods.md §4.
"""

from __future__ import annotations

from .registry import Recipe, RewardSpec, Section, register_recipe

DLER_SECTION = Section(
    4, "DLER: doing length penalty right (and DA-DLER)", ("NVlabs/DLER",), papers=("2510.15110",)
)  # methods.md §4, shared by dler, da-dler

register_recipe(
    Recipe(
        name="dler",
        section=DLER_SECTION,
        method="DLER (truncation penalty + batch-normalised advantages)",
        description="Correctness x0.1 when truncated, group-centre + batch whitening, clip-higher, dynamic sampling "
        "with refill (§4).",
        rewards=(RewardSpec("dler_truncation"),),
        config_overrides={
            "advantage_estimator": "dler",
            "advantage_kwargs": {"correct_boost": 0.1},  # NVlabs/DLER dler_slurm.sh (methods.md §4)
            "completion_filter": "dynamic_sampling",
            "filter_kwargs": {"max_generation_batches": 4},
            "correctness_reward": "dler_truncation_reward",
            "epsilon_high": 0.28,
            "loss_type": "dapo",
            "mask_truncated_completions": False,
        },
        proposed_defaults=(
            "dynamic sampling refill from an independent seeded pass over the data, at most 4 generation batches",
        ),
        trainer_class="trl_efficient.methods.dler:DLERTrainer",
    )
)
register_recipe(
    Recipe(
        name="da-dler",
        section=DLER_SECTION,
        method="DA-DLER (difficulty-aware truncation, proposed)",
        description="DLER with dynamic-sampling refill; groups solved >= 75% are cut to 2000 tokens, re-scored (§4).",
        rewards=(RewardSpec("dler_truncation"),),
        config_overrides={
            "advantage_estimator": "da_dler",
            # correct_boost 0.1: DLER's released script (dler_slurm.sh, methods.md §4); DA-DLER builds on it
            "advantage_kwargs": {"solve_rate_threshold": 0.75, "truncate_to": 2000, "correct_boost": 0.1},
            "completion_filter": "dynamic_sampling",
            "filter_kwargs": {
                "max_generation_batches": 4,
                "on_shortfall": "mask",
            },  # proposed (DLER's script: no limit)
            "correctness_reward": "dler_truncation_reward",
            "max_completion_length": 4000,  # §4 [code]: truncation at 4000 for every group that is not cut to 2000
            "epsilon_high": 0.28,
            "loss_type": "dapo",
            "mask_truncated_completions": False,
        },
        proposed_defaults=(
            "DA-DLER schedule: groups with solve rate >= 0.75 truncated to 2000 tokens and re-scored (not published)",
            "dynamic sampling refill from an independent seeded pass over the data, at most 4 generation batches",
        ),
        trainer_class="trl_efficient.methods.dler:DLERTrainer",
    )
)
