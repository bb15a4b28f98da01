"""BudgetThinker recipe (arXiv 2508.17196, methods.md §23): budget prompts on an epoch curriculum, control tokens
forced after every ⌊B/8⌋ + 1 free generated tokens (transformers generation), reward 0.7 acc + 0.15 format + 0.15 len.

Reward builder `budgetthinker`: `get_budgetthinker_reward`, reading the plan's `budget` column.
"""

from __future__ import annotations

from ..prompts import BUDGETTHINKER_INSTRUCTION
from ..rewards.budgetthinker import get_budgetthinker_reward
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder

reward_builder(
    "budgetthinker",
    get_budgetthinker_reward,
    "BudgetThinker, arXiv:2508.17196 (0.7 correctness + 0.15 **Final Answer**\\boxed{} format + 0.15 length "
    "vs the budget B)",
    needs=("solution", "budget"),
    receives=("length",),
)


register_recipe(
    Recipe(
        name="budgetthinker",
        section=Section(23, "BudgetThinker", ("MobileLLM/BudgetThinker",), papers=("2508.17196",)),
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
