"""Recipes of the DLER family: DLER (truncation penalty, group-centre + batch whitening, dynamic sampling with
refill) and DA-DLER (difficulty-aware truncation of easy prompts' correct samples). The reward builder
`dler_truncation` is registered with the core rewards in `registry.py`; the trainer, estimators and filter are in
`trl_efficient.methods.dler`. User guide: `docs/advantage-methods.md`; reference: docs/methods.md §4.
"""

from __future__ import annotations

from .registry import Recipe, RewardSpec, Section, register_recipe
from .scale import PaperLength, RecipeScale, Reference, scale_length

# methods.md §4, Table 1: the base model's mean output on MATH (the benchmark nearest the testbed's arithmetic)
DLER_REFERENCE = Reference(5500, "base mean", "methods.md §4, Table 1: DeepSeek-R1-1.5B, MATH 84.31% at 5500 tokens")
DLER_TRUNCATION = 4000  # methods.md §4 [code]: max_response_length = 4000


def _truncation(exception: str) -> PaperLength:
    """DLER's 4000-token truncation (shared by dler and da-dler), with the recipe's own reason for its testbed value."""
    return PaperLength("truncation (max_response_length)", DLER_TRUNCATION, "length", DLER_REFERENCE,
                       "methods.md §4 [code]", "config.max_completion_length", exception=exception)  # fmt: skip


def _dler_scale(cap: int, steps: int) -> RecipeScale:
    # DLER's length penalty IS the truncation (methods.md §4), and the paper's 4000 tokens bind: they are 0.73x its
    # base model's mean output on MATH (R1-Distill-Qwen-1.5B, 5,500 tokens) and 0.38x over its five benchmarks. At the
    # testbed's cap (384, 2.4x testbed:v2's mean of 161 tokens) the base is never truncated and DLER would be GRPO
    # with batch whitening. Training truncates at cap/2 instead (192: 35% of the base's answers, the hard tasks' most;
    # DA-DLER's cut and the check's tight cap); looser than the paper's ratio (0.73 x 161 = 117 tokens would leave the
    # 8-op tasks, floor 100, no room to check). Evaluation keeps the comparison's cap, as for FrugalRL.
    train_cap = cap // 2
    return RecipeScale(
        "dler",
        f"truncation at the training cap {train_cap} (cap/2; the paper's 4000 is 0.73x its base model's mean output "
        f"on MATH; at the cap testbed:v2 is never truncated, at {train_cap} 35% of its answers are)",
        config={"max_completion_length": train_cap},
    )


def _da_dler_scale(cap: int, steps: int) -> RecipeScale:
    paper = 4000
    cut = scale_length(2000, cap, paper)
    return RecipeScale(
        "da-dler",
        f"lengths x cap/{paper}: max_completion_length {paper} -> {cap}, truncate_to 2000 -> {cut}",
        config={"max_completion_length": cap, "advantage_kwargs": {"truncate_to": cut}},
    )


DLER_SECTION = Section(
    4, "DLER: doing length penalty right (and DA-DLER)", ("NVlabs/DLER",)
)  # methods.md §4, shared by dler, da-dler

register_recipe(
    Recipe(
        name="dler",
        testbed_check="dler",
        section=DLER_SECTION,
        testbed_scale=_dler_scale,
        paper_lengths=(
            _truncation(
                "cap/2: the rule's 117 (the paper's 0.73x its base's mean) leaves the 8-op tasks (floor 100 tokens) "
                "no room to check; 192 truncates 35% of the base's answers"
            ),
        ),
        method="DLER (truncation penalty + batch-normalised advantages)",
        description="Correctness x0.1 when truncated, group-centre + batch whitening, clip-higher, dynamic sampling "
        "with refill (§4).",
        rewards=(RewardSpec("dler_truncation"),),
        papers=("2510.15110",),
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
        testbed_check="dler",
        section=DLER_SECTION,
        family="adaptive / history",
        testbed_scale=_da_dler_scale,
        paper_lengths=(
            _truncation(
                "x cap/4000 (the paper's cap as the reference): 4000 -> the cap, where the base (mean 161) is never "
                "truncated, so only the easy groups' cut binds; DLER trains at 192"
            ),
            PaperLength(
                "easy groups' cut (truncate_to)",
                2000,
                "length",
                DLER_REFERENCE,
                "methods.md §4, proposed default (DA-DLER is not published)",
                "config.advantage_kwargs.truncate_to",
                exception="x cap/4000 (the paper's cap as the reference), = DLER's training cap 192",
            ),
        ),
        method="DA-DLER (difficulty-aware truncation, proposed)",
        description="DLER with dynamic-sampling refill; groups solved >= 75% are cut to 2000 tokens, re-scored (§4).",
        rewards=(RewardSpec("dler_truncation"),),
        papers=("2510.15110",),
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
