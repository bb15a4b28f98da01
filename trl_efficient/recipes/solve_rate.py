"""Solve-rate-gated length recipes: ALP (group solve rate scales a per-token price), GRPO-λ (a batch ranking of
groups by correctness ratio switches the length penalty on for the top λ) and ASRR (no-think prefill plus an
accuracy-gated overlong penalty).

Reward builders (whole-group rewards, `trl_efficient/rewards/solve_rate.py`):
- `alp`: `get_alp_reward` with `N = max_completion_length` (proposed default);
- `grpo_lambda`: `get_grpo_lambda_reward`;
- `asrr`: `get_asrr_reward`; the length is the generated completion (the prefix is a prompt prefill).
"""

from __future__ import annotations

from collections.abc import Callable

from ..prompts import ASRR_NO_THINK_PREFIX
from ..rewards.solve_rate import (
    ALP_PROPOSED_DEFAULTS,
    ASRR_PROPOSED_DEFAULTS,
    GRPO_LAMBDA_PROPOSED_DEFAULTS,
    get_alp_reward,
    get_asrr_reward,
    get_grpo_lambda_reward,
)
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder


@reward_builder(
    "alp",
    get_alp_reward,
    "ALP, arXiv:2506.05256 (per-token price x group solve rate)",
    whole_groups=True,
    receives=("length",),
)
def build_alp_reward(args, **kwargs) -> Callable:
    """`alp` reward builder: `N = max_completion_length` unless the recipe passes `max_length`."""
    return get_alp_reward(**{"max_length": args.max_completion_length, **kwargs})


reward_builder(
    "grpo_lambda",
    get_grpo_lambda_reward,
    "GRPO-λ, arXiv:2505.18086 (length penalty only in the batch's top-λ groups by accuracy)",
    whole_groups=True,
    receives=("length",),
)
reward_builder(
    "asrr",
    get_asrr_reward,
    "ASRR, arXiv:2505.15400 (accuracy-gated overlong penalty vs the shortest correct length)",
    whole_groups=True,
    receives=("length",),
)


register_recipe(
    Recipe(
        name="alp",
        section=Section(14, "ALP: adaptive length penalty", (), papers=("2506.05256",)),
        method="ALP (adaptive length penalty)",
        description="r = 1[correct] - (beta/N) max(p_solved, 1/K) |y|, p_solved the group's solve rate, "
        "beta 0.5, N = max_completion_length, no std scaling (§14).",
        rewards=(RewardSpec("alp"),),
        # methods.md §14 / cross-cutting note 2: under group std normalisation an all-correct group is ranked by
        # length alone whatever beta is; without std scaling beta is the real price of a token.
        config_overrides={"scale_rewards": "none"},
        proposed_defaults=(
            *ALP_PROPOSED_DEFAULTS,
            'ALP advantages without std scaling (scale_rewards="none") so beta acts as a real scale',
        ),
    )
)
register_recipe(
    Recipe(
        name="grpo-lambda",
        section=Section(17, "GRPO-λ: length-penalised RL with a batch switch", (), papers=("2505.18086",)),
        method="GRPO-λ (batch-level switch to a length penalty)",
        description="Top 20% of the batch's groups by correctness ratio: correct 1 - 0.6 sigmoid(z-scored length "
        "among correct), wrong 0; other groups 0/1 (§17).",
        rewards=(RewardSpec("grpo_lambda"),),
        proposed_defaults=GRPO_LAMBDA_PROPOSED_DEFAULTS,
    )
)
register_recipe(
    Recipe(
        name="asrr",
        section=Section(24, "ASRR: adaptive self-recovery reasoning", (), papers=("2505.15400",)),
        method="ASRR (no-think prefix + accuracy-gated overlong penalty)",
        description="Every rollout prefilled with a closed think block; R = 1[correct] - alpha clip((L - L_shortest "
        "correct)/2048, 0, 1), alpha = 0.5 only in all-correct groups (tau = 100%) (§24).",
        rewards=(RewardSpec("asrr"),),
        config_overrides={"rollout_plan": "asrr", "beta": 0.0},  # KL 0 [paper App. A.2]
        proposed_defaults=(
            *ASRR_PROPOSED_DEFAULTS,
            "ASRR wrong answers are penalised too (the paper's formula does not gate O_i on correctness)",
        ),
        usage=(
            f'Prompt as in training and start the assistant turn with "{ASRR_NO_THINK_PREFIX}" (`trl-efficient eval '
            "--modes asrr`); the model answers directly and continues reasoning only where it needs to."
        ),
    )
)

__all__ = ["build_alp_reward"]
