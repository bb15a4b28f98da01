"""ThinkPrune's rollout plan: the limit B(t) stated in the system message and enforced as a cap (methods.md §35).

ThinkPrune (arXiv 2504.01296) is RL under a hard token limit that shrinks over the run.

Every rollout of step `t` is told the current limit `B(t)` in the system message, with the released preprocessing's
sentence (`trl_efficient.rewards.thinkprune.THINKPRUNE_LIMIT_INSTRUCTION`, "The output of the assistant should be
within {L} tokens.", `UCSB-NLP-Chang/ThinkPrune` `examples/data_preprocess/preprocess_past_aime_amc.py`), is cut at
`B(t)` tokens (the per-row cap `max_tokens`: the released scripts set `data.max_response_length=${LENGTH}`), and gets
the per-row column `budget`, which `trl_efficient.rewards.get_thinkprune_reward` reads as its limit, so plan and
reward use the same limit and "finished" (the trainer's `finished` keyword) is exactly "EOS within `B(t)` tokens".

`B(t)` is `trl_efficient.rewards.curriculum.CurriculumSchedule` over the run's `max_steps`: by default 4000 -> 3000 ->
2000 tokens in equal steps at `max_steps/3` and `2 max_steps/3` (the paper's rounds, run as one run). Checkpointed
state: none of its own (the schedule is a pure function of the global step, restored on resume by the HF Trainer).

Settings (`rollout_plan_kwargs`): `initial_budget` (4000), `final_budget` (2000), `decay_points` (2), `schedule`
(`"linear"`). All G rollouts of a step share the prompt (K = 1).
"""

from __future__ import annotations

from ..rewards.thinkprune import THINKPRUNE_LIMIT_INSTRUCTION
from ..trainer.rollout import ROLLOUT_PLANS, RolloutAssignment
from .curriculum import CurriculumRolloutPlan

__all__ = ["ThinkPruneRolloutPlan"]

# The paper's rounds, 4000 -> 3000 -> 2000 tokens (for the keys rollout_plan_kwargs leaves out).
THINKPRUNE_SCHEDULE = {"initial_budget": 4000, "final_budget": 2000, "decay_points": 2, "schedule": "linear"}


@ROLLOUT_PLANS.register("thinkprune")
class ThinkPruneRolloutPlan(CurriculumRolloutPlan):
    """State the limit `B(step)` in the system message and cap the rollout at it.

    >>> from types import SimpleNamespace as NS
    >>> plan = ThinkPruneRolloutPlan.from_config(NS(rollout_plan_kwargs=None, max_steps=90))  # THINKPRUNE_SCHEDULE
    >>> a = plan.assign({}, 0, 8, 0, step=30)  # floor(30 * 3 / 90) = 1 drop: 4000 - 2000 * 1/2 = 3000
    >>> a.system, a.max_tokens, a.metadata
    ('The output of the assistant should be within 3000 tokens.', 3000, {'budget': 3000})
    >>> [plan.assign({}, 0, 8, 0, step=s).max_tokens for s in (0, 29, 60, 89)]  # 0, 0, 2, 2 drops
    [4000, 4000, 2000, 2000]
    """

    name = "thinkprune"
    default_schedule = THINKPRUNE_SCHEDULE  # `from_config` (inherited) reads rollout_plan_kwargs over it

    def assign(self, row, group_pos, group_size, group_id, step) -> RolloutAssignment:
        limit = self.budget(step)
        return RolloutAssignment(
            system=THINKPRUNE_LIMIT_INSTRUCTION.format(limit=limit), max_tokens=limit, metadata={"budget": limit}
        )
