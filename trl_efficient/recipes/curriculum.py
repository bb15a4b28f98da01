"""Curriculum length control recipe, "Train Long, Think Short" (arXiv 2508.08940, methods.md §22).

Reward builder `curriculum`: `get_curriculum_reward` with the schedule read from `rollout_plan_kwargs` (its one home,
shared with `CurriculumRolloutPlan`); under the plan the reward reads the plan's `budget` column.
"""

from __future__ import annotations

from collections.abc import Callable

from ..prompts import CURRICULUM_BUDGET_INSTRUCTION
from ..rewards.curriculum import get_curriculum_reward
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder
from .scale import PaperLength, RecipeScale, Reference


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


# ---------------------------------------------------------- testbed scale (applied by testbed/trl_efficient_testbed/scaling.py)


CURRICULUM_REFERENCE = Reference(258.4, "base mean", "methods.md §22: the base model scores 83.55% at 258.4 tokens "
                                 "on GSM8K, its training set")  # fmt: skip


def _curriculum_scale(cap: int, steps: int) -> RecipeScale:
    # methods.md §22 states no cap; its two budgets are anchored to the task: the start (256) is about the base
    # model's GSM8K length (258.4 tokens) and the end (87) about what GSM8K needs (the trained model: 86.2% at 88.8
    # tokens). The testbed keeps both anchors: the start at its base model's length (testbed:v2 writes 161 tokens at
    # the 384-token cap: 0.42 x cap) and the end at what its tasks need (cap/2 x 87/256 = 65 at cap 384, about the
    # tasks' mean floor of 62). Until 2026-12-02 the start was cap/2 = 192, above what the base writes, so the first
    # quarter of a 40-step run paid for *longer* answers and the recipe ended no shorter than GRPO (docs/testbed.md,
    # the comparison). (World v1's base was only ~25% over its floor, so the two anchors could not both hold there.
    # An end at 87 x cap / 256 = 130 tokens, twice the floor, had the triangular reward pay for answers *longer* than
    # GRPO's: 25 tokens longer in the first v2 comparison.)
    start = max(1, round(cap * 161 / 384))
    final = max(1, round(cap / 2 * 87 / 256))
    budgets = {"initial_budget": start, "final_budget": final}
    return RecipeScale(
        "curriculum",
        f"budgets anchored as in the paper (start at the base model's length, end at what the tasks need): 256 -> 87 "
        f"becomes {start} (0.42 x cap: testbed:v2 writes 161 at cap 384) -> {final} (cap/2 x 87/256; the tasks' mean "
        "floor is 62); n = 3 decay points over the run",
        config={"rollout_plan_kwargs": budgets},
    )


register_recipe(
    Recipe(
        name="curriculum",
        section=Section(22, "Curriculum length control (Train Long, Think Short)", ()),
        family="budget / prompted",
        testbed_scale=_curriculum_scale,
        paper_lengths=(
            PaperLength(
                "initial budget",
                256,
                "length",
                CURRICULUM_REFERENCE,
                "methods.md §22",
                "config.rollout_plan_kwargs.initial_budget",
                exception="the start is the base's own mean, round(cap x 161/384), as the paper's 256 is "
                "its base's 258.4",
            ),
            PaperLength(
                "final budget",
                87,
                "length",
                CURRICULUM_REFERENCE,
                "methods.md §22",
                "config.rollout_plan_kwargs.final_budget",
                exception="cap/2 x 87/256 = 65, about the testbed tasks' mean floor (62): the paper's 87 is "
                "what GSM8K needs, and the rule's 54 is below the testbed's floor",
                keep="the rule's 54 is below the testbed tasks' mean floor (62 tokens, the shortest correct trace): "
                "a final budget no average task can meet; 65 (cap/2 x 87/256) sits at the floor, as the paper's 87 "
                "sits at what GSM8K needs",
            ),
        ),
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
        papers=("2508.08940",),
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
