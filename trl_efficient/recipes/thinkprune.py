"""ThinkPrune recipe (arXiv 2504.01296, methods.md §35): correctness under a hard token limit that shrinks over the run.

Reward builder `thinkprune`: `get_thinkprune_reward`, which reads the limit from the rollout plan `thinkprune`'s
`budget` column (the plan, `trl_efficient.methods.thinkprune`, states the limit in the system message and caps each
rollout at it); the schedule 4000 -> 3000 -> 2000 tokens is the plan's `rollout_plan_kwargs`.
"""

from __future__ import annotations

from .. import rewards as R
from ..rewards.thinkprune import THINKPRUNE_LIMIT_INSTRUCTION
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder

reward_builder(
    "thinkprune",
    R.get_thinkprune_reward,
    "ThinkPrune, arXiv:2504.01296 (correct, finished and within the shrinking limit)",
    needs=("solution", "budget"),  # `budget`: the plan's (optional); `finished` is the trainer's: never listed
    receives=("length",),
)

register_recipe(
    Recipe(
        name="thinkprune",
        section=Section(35, "ThinkPrune", ("UCSB-NLP-Chang/ThinkPrune",), papers=("2504.01296",)),
        method="ThinkPrune (iterative length pruning under a hard token limit)",
        description=(
            "r = 1 if the answer is correct and the completion finished within the limit B(t), else 0; the prompt "
            "states B(t), generation is cut at it, and it shrinks 4000 -> 3000 -> 2000 tokens over the run (§35)."
        ),
        rewards=(
            RewardSpec("thinkprune"),
            # zero weight: accuracy metrics only
            RewardSpec("correctness", weight=0.0),
        ),
        config_overrides={
            "rollout_plan": "thinkprune",
            # [paper] rounds 4000 -> 3000 -> 2000 tokens (local_scripts/multi_node_run_4k.sh, _3k_from4k.sh), here
            # one run with equal rounds (proposed default)
            "rollout_plan_kwargs": {
                "initial_budget": 4000,
                "final_budget": 2000,
                "decay_points": 2,
                "schedule": "linear",
            },
            # [code] truncated responses keep their zero reward in the loss (verl masks nothing)
            "mask_truncated_completions": False,
        },
        proposed_defaults=(
            "thinkprune: the paper's three rounds (separate runs, each from the previous round's checkpoint) as one "
            "run, the limit dropping 4000 -> 3000 -> 2000 at max_steps/3 and 2 max_steps/3",
        ),
        usage=(
            "Add to the system message the limit the model was pruned to: "
            f'"{THINKPRUNE_LIMIT_INSTRUCTION.format(limit=2000)}"; ask for the final answer in \\boxed{{}}.'
        ),
    )
)
