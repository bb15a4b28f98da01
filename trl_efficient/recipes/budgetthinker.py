"""BudgetThinker recipe (arXiv 2508.17196, methods.md §23): budget prompts on an epoch curriculum, control tokens
forced after every ⌊B/8⌋ + 1 free generated tokens (transformers generation), reward 0.7 acc + 0.15 format + 0.15 len.

Reward builder `budgetthinker`: `get_budgetthinker_reward`, reading the plan's `budget` column.
"""

from __future__ import annotations

from ..prompts import BUDGETTHINKER_INSTRUCTION
from ..rewards.budgetthinker import get_budgetthinker_reward
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder
from .scale import PaperLength, RecipeScale, Reference, scale_length

reward_builder(
    "budgetthinker",
    get_budgetthinker_reward,
    "BudgetThinker, arXiv:2508.17196 (0.7 correctness + 0.15 **Final Answer**\\boxed{} format + 0.15 length "
    "vs the budget B)",
    needs=("solution", "budget"),
    receives=("length",),
)


# ---------------------------------------------------------- testbed scale (applied by testbed/trl_efficient_testbed/scaling.py)


BUDGETTHINKER_REFERENCE = Reference(10000, "cap", "methods.md §23: max response 10000")


def _budgetthinker_scale(cap: int, steps: int) -> RecipeScale:
    # methods.md §23: max response 10000 (budgets up to 6000), 8 epochs (6 curriculum budgets, then 2 of random
    # choices). A testbed run is a fraction of one data epoch (4 prompts a step over 1024 tasks), so the curriculum's
    # epochs are counted in steps instead (`epoch_steps`): the run goes through all 8 of them, as the paper's does.
    paper, epochs = 10000, 8
    by_epoch = [scale_length(b, cap, paper) for b in (6000, 4000, 3500, 3000, 2500, 2000)]
    choices = [scale_length(b, cap, paper) for b in (2000, 4000, 6000)]
    epoch_steps = max(1, steps // epochs)
    return RecipeScale(
        "budgetthinker",
        f"budgets x cap/{paper}: {by_epoch}, then one of {choices}; the paper's {epochs} epochs compressed into the "
        f"run (one curriculum epoch = steps/{epochs} = {epoch_steps} steps); the 1500-token threshold -> "
        f"{scale_length(1500, cap, paper)}",
        config={
            "rollout_plan_kwargs": {"budgets_by_epoch": by_epoch, "final_choices": choices, "epoch_steps": epoch_steps}
        },
        reward_kwargs={"budgetthinker": {"long_budget": scale_length(1500, cap, paper)}},
    )


register_recipe(
    Recipe(
        name="budgetthinker",
        testbed_check="budgetthinker",
        section=Section(23, "BudgetThinker", ("MobileLLM/BudgetThinker",)),
        family="budget / prompted",
        testbed_scale=_budgetthinker_scale,
        paper_lengths=(
            PaperLength(
                "budgets by epoch",
                (6000, 4000, 3500, 3000, 2500, 2000),
                "length",
                BUDGETTHINKER_REFERENCE,
                "methods.md §23",
                "config.rollout_plan_kwargs.budgets_by_epoch",
            ),
            PaperLength(
                "final budget choices",
                (2000, 4000, 6000),
                "length",
                BUDGETTHINKER_REFERENCE,
                "methods.md §23",
                "config.rollout_plan_kwargs.final_choices",
            ),
            PaperLength(
                "long-budget threshold",
                1500,
                "length",
                BUDGETTHINKER_REFERENCE,
                "methods.md §23",
                "reward_kwargs.budgetthinker.long_budget",
            ),
        ),
        method="BudgetThinker (forced budget control tokens)",
        description=(
            "The prompt states a budget B (6000, 4000, 3500, 3000, 2500, 2000 tokens in epochs 1-6, then one of "
            "2000/4000/6000); control tokens <remaining>7/8 ... 1/8 are forced after every floor(B/8)+1 free generated "
            "tokens and masked out of the loss; r = 0.7 acc + 0.15 format + 0.15 len (§23)."
        ),
        rewards=(
            RewardSpec(
                "budgetthinker",
                kwargs={
                    "accuracy_weight": 0.7,  # [paper]
                    "format_weight": 0.15,  # [paper]
                    "length_weight": 0.15,  # [paper]
                    "long_budget": 1500,  # [code] mild penalty under B from this budget on
                },
            ),
            # zero weight: accuracy metrics (overall and per budget) only
            RewardSpec("correctness", weight=0.0),
        ),
        papers=("2508.17196",),
        trainer_class="trl_efficient.methods.budgetthinker:BudgetThinkerTrainer",
        config_overrides={
            "rollout_plan": "budgetthinker",
            # [code] easyr1/examples/8ratio_v1.yaml: the epoch curriculum
            "rollout_plan_kwargs": {
                "budgets_by_epoch": [6000, 4000, 3500, 3000, 2500, 2000],
                "final_choices": [2000, 4000, 6000],
            },
            "use_vllm": False,  # forcing is a transformers LogitsProcessor in this version
        },
        proposed_defaults=(
            "budgetthinker: one budget per row (the released vLLM patch forces a whole batch at its first prompt's "
            "budget); the k-th control token is the (k * (floor(B/8) + 2))-th generated token, as the released "
            "patch's loop places it",
            "budgetthinker: control tokens the model generates itself are suppressed outside the forced positions",
            "budgetthinker: epochs after the 8th keep the random choice among 2000/4000/6000; a row without a budget "
            "gets length term 0",
            "budgetthinker: no SFT stage (the paper's SFT on control-token data comes first)",
        ),
        usage=(
            "Append the budget instruction to the question: "
            f'"{BUDGETTHINKER_INSTRUCTION.format(budget="{B}").strip()}" and generate with the control tokens forced '
            "(trl-efficient eval --modes budgetthinker:B)."
        ),
    )
)
