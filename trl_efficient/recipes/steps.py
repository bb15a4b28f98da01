"""Recipes that count reasoning steps rather than tokens (Step Pruner, GRSP); Dr. GRPO is with GRPO in `registry.py`.

Reward builders `step_pruner` and `grsp` (`trl_efficient.rewards.steps`): each returns the difference from
correctness (`as_penalty=True`), so the recipes pair it with the `correctness` reward (weight 1 each) and the sum is
the paper's reward while the trainer's accuracy metrics keep reading plain correctness. Segments are measured in the
policy's tokens (the trainer's tokenizer). Values taken from a paper or its code cite methods.md; our own choices are
listed in `proposed_defaults`.
"""

from __future__ import annotations

from ..rewards.steps import get_grsp_reward, get_step_pruner_reward
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder

# Step Pruner (methods.md §19): the group size comes from the trainer's `group_size` column, the stop rule's
# callback is registered by the reward's `attach`.
reward_builder(
    "step_pruner",
    get_step_pruner_reward,
    "Step Pruner, arXiv:2510.03805 (fewer steps than the group's fewest correct earn more; over-long step -> 0; "
    "stop rule)",
    whole_groups=True,
    receives=("length",),
)
reward_builder(  # GRSP's group-relative segment penalty (methods.md §27)
    "grsp",
    get_grsp_reward,
    "GRSP, arXiv:2510.09535 (group z-scores of segment counts per length bucket, descending weights)",
    whole_groups=True,
    receives=("length",),
)


register_recipe(
    Recipe(
        name="step-pruner",
        section=Section(19, "Step Pruner", (), papers=("2510.03805",)),
        method="Step Pruner (step-aware reward, proposed)",
        description="Correct answers earn 1 - 0.5 min(1, (S - S_min)/S_min) in steps S (blank-line paragraphs), "
        "wrong 0, a step over 512 tokens 0; training stops when the length stops falling (§19).",
        rewards=(RewardSpec("correctness"), RewardSpec("step_pruner")),
        proposed_defaults=(
            "Step Pruner reward c (1 - 0.5 min(1, (S - S_min)/S_min)), S_min over the group's correct answers",
            "Step Pruner steps = blank-line separated paragraphs of the thinking part (at least 1)",
            "Step Pruner guard: a step over 512 tokens -> reward 0 (and not a reference for S_min)",
            "Step Pruner stop: 50-batch moving average of the mean length checked every 10 batches, stop after 3 "
            "checks without a new low",
        ),
    )
)
register_recipe(
    Recipe(
        name="grsp",
        section=Section(27, "GRSP: group relative segment penalization", (), papers=("2510.09535",)),
        method="GRSP (group relative segment penalty, proposed)",
        description="Correct answers lose 0.1 max(0, sum_k w_k z_k), z_k the group z-score of the segment count in "
        "length bucket k (< 32 / 32-128 / > 128 tokens, w = 0.5/0.3/0.2) (§27).",
        rewards=(RewardSpec("correctness"), RewardSpec("grsp")),
        proposed_defaults=(
            "GRSP segments: blank lines plus lines opening with Wait / Alternatively / But / Hmm / Let me / Actually",
            "GRSP buckets < 32 / 32-128 / > 128 tokens, weights 0.5 / 0.3 / 0.2, coefficient 0.1",
            "GRSP penalty R = c - 0.1 c max(0, P) on correct answers, z-scores over the whole group",
        ),
    )
)
