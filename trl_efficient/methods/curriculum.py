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

from typing import ClassVar

from ..prompts import CURRICULUM_BUDGET_INSTRUCTION
from ..rewards.curriculum import SCHEDULE_KEYS, CurriculumSchedule
from ..trainer.rollout import ROLLOUT_PLANS, RolloutAssignment, RolloutPlan

__all__ = ["SCHEDULE_KEYS", "CurriculumRolloutPlan", "curriculum_schedule"]


def curriculum_schedule(
    args, field: str = "rollout_plan_kwargs", used_by: str = "rollout_plan='curriculum'"
) -> CurriculumSchedule:
    """The schedule that the dict field `field` of the config `args` describes (keys `SCHEDULE_KEYS`; unknown keys
    raise), for `used_by`, which every error names. A `CurriculumRolloutPlan` subclass reads its own with
    `schedule_from_config` (over its `default_schedule`); another rollout plan reuses this with its own name
    (`used_by="rollout_plan='mine'"`); a reward whose settings are its own keyword arguments calls
    `CurriculumSchedule.from_settings(kwargs, "reward_kwargs['<builder>']", "reward `<builder>`")` instead.

    >>> curriculum_schedule(None).settings()
    {'initial_budget': 256, 'final_budget': 87, 'decay_points': 3, 'schedule': 'step'}
    >>> curriculum_schedule(None).used_by
    "rollout_plan='curriculum'"
    """
    return CurriculumSchedule.from_settings(getattr(args, field, None), field, used_by)


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
    # The schedule for the keys `rollout_plan_kwargs` leaves out (all of them when it is empty): a subclass sets its
    # paper's here and needs no `from_config` of its own.
    default_schedule: ClassVar[dict] = {
        "initial_budget": 256,
        "final_budget": 87,
        "decay_points": 3,
        "schedule": "step",
    }

    def __init__(self, schedule: CurriculumSchedule, max_steps: int) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps <= 0:
            raise ValueError(
                f"rollout_plan={self.name!r} spreads its decay points over max_steps: set max_steps > 0 "
                f"(got {max_steps!r})."
            )
        self.schedule, self.max_steps = schedule, max_steps

    @classmethod
    def schedule_from_config(cls, args) -> CurriculumSchedule:
        """The schedule `rollout_plan_kwargs` describes, key by key over `default_schedule`; errors name
        `rollout_plan=<name>` (a subclass's own name). A reward builder that must follow the plan's schedule reads it
        here (`.settings()`).

        >>> from types import SimpleNamespace as NS
        >>> class Mine(CurriculumRolloutPlan):
        ...     name, default_schedule = "mine", {"initial_budget": 4000, "final_budget": 2000, "decay_points": 2}
        >>> Mine.schedule_from_config(NS(rollout_plan_kwargs=None)).settings()
        {'initial_budget': 4000, 'final_budget': 2000, 'decay_points': 2, 'schedule': 'step'}
        >>> Mine.schedule_from_config(NS(rollout_plan_kwargs={"final_budget": 1000})).settings()["final_budget"]
        1000
        """
        settings = {**cls.default_schedule, **(getattr(args, "rollout_plan_kwargs", None) or {})}
        return CurriculumSchedule.from_settings(settings, "rollout_plan_kwargs", f"rollout_plan={cls.name!r}")

    @classmethod
    def from_config(cls, args) -> CurriculumRolloutPlan:
        """From `rollout_plan_kwargs` over `default_schedule` (`schedule_from_config`) and `max_steps`."""
        return cls(cls.schedule_from_config(args), args.max_steps)

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
