"""Curriculum length control, "Train Long, Think Short" (arXiv 2508.08940; methods.md §22): the budget rollout plan.

Every rollout of step `t` is told the current budget `B(t)`: the plan appends
`CURRICULUM_BUDGET_INSTRUCTION` (" IMPORTANT: You should use exactly {B} tokens in your response.",
`trl_efficient.prompts`) to the last user message and emits the per-row column `budget`, which
`trl_efficient.rewards.get_curriculum_reward` reads, so plan and reward use the same budget. `B(t)` is
`trl_efficient.rewards.curriculum.CurriculumSchedule` (the one home of the schedule) over the run's `max_steps`.

Checkpointed state: none of its own. The schedule is a pure function of the global step, which the HF Trainer saves
in every checkpoint (`trainer_state.json`) and restores on resume, so a run resumed at step `k` prompts `B(k)`.

Settings (`rollout_plan_kwargs`): `initial_budget` (256), `final_budget` (87), `decay_points` (3), `schedule`
(`"step"` or `"linear"`): the paper's main setting. All G rollouts of a step share the prompt (K = 1).
"""

from __future__ import annotations

from ..prompts import CURRICULUM_BUDGET_INSTRUCTION
from ..rewards.curriculum import CurriculumSchedule
from ..trainer.rollout import ROLLOUT_PLANS, RolloutAssignment, RolloutPlan

__all__ = ["CurriculumRolloutPlan", "curriculum_schedule"]

SCHEDULE_KEYS = ("initial_budget", "final_budget", "decay_points", "schedule")


def curriculum_schedule(args) -> CurriculumSchedule:
    """The schedule named by `args.rollout_plan_kwargs` (keys `SCHEDULE_KEYS`; unknown keys raise).

    >>> curriculum_schedule(None).settings()
    {'initial_budget': 256, 'final_budget': 87, 'decay_points': 3, 'schedule': 'step'}
    """
    kwargs = dict(getattr(args, "rollout_plan_kwargs", None) or {})
    unknown = sorted(set(kwargs) - set(SCHEDULE_KEYS))
    if unknown:
        raise ValueError(
            f"rollout_plan_kwargs {unknown} unknown to rollout_plan='curriculum' (it takes {list(SCHEDULE_KEYS)})."
        )
    kind = kwargs.pop("schedule", "step")
    try:
        return CurriculumSchedule(**kwargs, kind=kind)
    except ValueError as err:
        raise ValueError(f"rollout_plan_kwargs: {err}") from err


@ROLLOUT_PLANS.register("curriculum")
class CurriculumRolloutPlan(RolloutPlan):
    """State the budget `B(step)` in the user message.

    >>> plan = CurriculumRolloutPlan(CurriculumSchedule(256, 87, 3), max_steps=600)
    >>> a = plan.assign({}, 0, 8, 0, step=150)
    >>> a.user_suffix, a.metadata
    (' IMPORTANT: You should use exactly 179 tokens in your response.', {'budget': 179})
    """

    name = "curriculum"
    metadata_keys = ("budget",)

    def __init__(self, schedule: CurriculumSchedule, max_steps: int) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps <= 0:
            raise ValueError(
                "rollout_plan='curriculum' spreads its decay points over max_steps: set max_steps > 0 "
                f"(got {max_steps!r})."
            )
        self.schedule, self.max_steps = schedule, max_steps

    @classmethod
    def from_config(cls, args) -> CurriculumRolloutPlan:
        """From `rollout_plan_kwargs` (the schedule) and `max_steps`."""
        return cls(curriculum_schedule(args), args.max_steps)

    def num_prompt_subgroups(self, group_size: int) -> int:
        return 1

    def token_lengths(self) -> dict[str, list[int]]:
        return {"rollout_plan_kwargs initial_budget/final_budget": [self.schedule.initial, self.schedule.final]}

    def budget(self, step: int) -> int:
        return self.schedule.budget(step, self.max_steps)

    def assign(self, row, group_pos, group_size, group_id, step) -> RolloutAssignment:
        budget = self.budget(step)
        return RolloutAssignment(
            user_suffix=CURRICULUM_BUDGET_INSTRUCTION.format(budget=budget), metadata={"budget": budget}
        )
