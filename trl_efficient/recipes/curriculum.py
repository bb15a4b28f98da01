"""Curriculum length control recipe, "Train Long, Think Short" (arXiv 2508.08940, methods.md §22).

Reward builder `curriculum`: `get_curriculum_reward` with the schedule read from `rollout_plan_kwargs` (its one home,
shared with `CurriculumRolloutPlan`); under the plan the reward reads the plan's `budget` column.
"""

from __future__ import annotations

from collections.abc import Callable

from ..prompts import CURRICULUM_BUDGET_INSTRUCTION
from ..rewards.curriculum import get_curriculum_reward
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder


@reward_builder(
    "curriculum",
    get_curriculum_reward,
    "Train Long, Think Short, arXiv:2508.08940 (correctness + triangular length reward around B(t) + format)",
    needs=("solution", "budget"),
    receives=("length",),
)
def build_curriculum_reward(args, **kwargs) -> Callable:
    """`curriculum` reward builder: weights from the recipe kwargs, schedule from `rollout_plan_kwargs`."""
    from ..methods.curriculum import curriculum_schedule

    settings = curriculum_schedule(args).settings()
    clash = sorted(set(kwargs) & set(settings))
    if clash:
        raise ValueError(f"curriculum schedule settings {clash} belong in rollout_plan_kwargs (shared with the plan).")
    return get_curriculum_reward(**settings, **kwargs)


register_recipe(
    Recipe(
        name="curriculum",
        section=Section(22, "Curriculum length control (Train Long, Think Short)", (), papers=("2508.08940",)),
        method="Curriculum length control (Train Long, Think Short)",
        description=(
            "The prompt states a budget B(t) that shrinks 256 -> 179 -> 125 -> 87 tokens at 3 evenly spaced steps; "
            "r = 0.6 correct + 0.3 triangular length reward around B(t) + 0.1 format (§22)."
        ),
        rewards=(
            RewardSpec(
                "curriculum",
                kwargs={
                    "lambda_correct": 0.6,  # [paper] correctness-heavy setting
                    "lambda_length": 0.3,  # [paper]
                    "lambda_format": 0.1,  # proposed default
                    "r_correct": 1.0,  # proposed default
                    "r_max": 1.0,  # proposed default
                    "alpha_think": 0.5,  # proposed default
                    "alpha_answer": 0.5,  # proposed default
                },
            ),
            # zero weight: accuracy metrics (overall and per budget) only
            RewardSpec("correctness", weight=0.0),
        ),
        config_overrides={
            "rollout_plan": "curriculum",
            # [paper] main setting: 256 -> 87 tokens, n = 3 step-wise decay points over the run
            "rollout_plan_kwargs": {"initial_budget": 256, "final_budget": 87, "decay_points": 3, "schedule": "step"},
        },
        proposed_defaults=(
            "curriculum: R_cor = R_max = 1, lambda_f = 0.1, alpha_think = alpha_answer = 0.5 (unpublished)",
            "curriculum: format indicators on our format (a well-formed think block; a \\boxed{} answer after "
            "</think>) instead of the paper's <think>/<answer> tags",
            "curriculum: budgets rounded to whole tokens; the linear variant drops by equal steps at the same points",
        ),
        usage=(
            "Append the budget instruction to the question: "
            f'"{CURRICULUM_BUDGET_INSTRUCTION.format(budget="{B}").strip()}" (the model was trained down to 87).'
        ),
    )
)

__all__ = ["build_curriculum_reward"]
