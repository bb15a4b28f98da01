r"""
Curriculum length control, "Train Long, Think Short" (KAUST/MIT/Princeton, arXiv 2508.08940; methods.md §22): the
shrinking budget schedule and the three-part reward.

Schedule (one home, shared by the rollout plan `trl_efficient.methods.curriculum.CurriculumRolloutPlan` and this
reward): `n` decay points at the interval `T = T_total/(n+1)` and

$$ B(t) = \max\big(1,\ B_0\,\gamma^{\lfloor t/T \rfloor}\big),\qquad \gamma = (S_f/S_0)^{1/n} $$

("step", the paper's step-wise decay; 256 -> 179 -> 125 -> 87 at n = 3), or equal drops of `(S_0 - S_f)/n` at the same
points ("linear", the paper's linear variant, "about 3 equal drops"). Budgets are rounded to whole tokens.
`T_total` is the run's `max_steps`. The schedule is a pure function of the global step, so its checkpointed state is
the global step that the HF Trainer saves in `trainer_state.json` and restores on resume: a resumed run at step `k`
gets `B(k)`, with no state of its own.

Reward:

$$ r = \lambda_c R_{cor}\,c + \lambda_\ell R_{len}(\ell) + \lambda_f(\alpha_{think} I_{think} + \alpha_{answer}
I_{answer}),\qquad R_{len}(\ell) = \begin{cases} R_{max}\,\ell/L & \ell \le L \\ R_{max}(1 - (\ell - L)/L) &
L < \ell \le 2L \\ 0 & \ell > 2L \end{cases} $$

with `L = B(t)`, `c` the answer's correctness (`trl_efficient.core.answers.is_correct`, the answer after `</think>`)
and `\ell` the completion length in policy tokens. The paper publishes `\lambda_c = 0.6, \lambda_\ell = 0.3` (its
correctness-heavy setting) and nothing else: `R_cor = R_max = 1`, `\lambda_f = 0.1` and `\alpha_think = \alpha_answer
= 0.5` are proposed defaults (methods.md §22).

Format indicators, adapted to our data: the paper checks `<think>`/`<answer>` tags; our completions put a `\boxed{}`
answer after `</think>` (the chat template may open the think block in the prompt, so `<think>` is optional):
- `I_think = 1` iff the completion has exactly one `</think>`, at most one `<think>`, and any `<think>` comes before
  the `</think>` (a well-formed, non-overlapping think block);
- `I_answer = 1` iff the text after the last `</think>` holds a complete `\boxed{...}` (no `</think>`: 0).

The budget of a row is the plan's `budget` column (so plan and reward never disagree); without it (called outside
the plan), `B(trainer_state.global_step)` over `trainer_state.max_steps`; with neither, a `ValueError`.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.answers import extract_boxed, is_correct
from ..core.checks import check_number, ids_or_none
from ..core.lengths import LengthMeter, completion_text, split_thinking

__all__ = [
    "CURRICULUM_SCHEDULES",
    "SCHEDULE_KEYS",
    "CurriculumSchedule",
    "curriculum_format_indicators",
    "get_curriculum_reward",
    "triangular_length_reward",
]

CURRICULUM_SCHEDULES = ("step", "linear")
# The schedule's settings as a dict field of the config holds them (`CurriculumSchedule.from_settings`).
SCHEDULE_KEYS = ("initial_budget", "final_budget", "decay_points", "schedule")


class CurriculumSchedule:
    """The budget `B(t)` of a run of `total_steps` steps (module docstring). Pure: no state besides its settings.

    Reusable by any method whose limit shrinks over the run (a rollout plan's budget, a reward's hard length limit):
    `used_by` names the field or component that uses it, and every error says so (the curriculum's plan passes
    `"rollout_plan='curriculum'"`); `from_settings` reads it from a dict field of the config, `budget_at` from TRL's
    `trainer_state` (the step counter every reward receives).

    >>> s = CurriculumSchedule(256, 87, decay_points=3, kind="step")
    >>> [s.budget(t, 600) for t in (0, 149, 150, 300, 450, 599)]
    [256, 256, 179, 125, 87, 87]
    >>> [CurriculumSchedule(256, 87, 3, "linear").budget(t, 600) for t in (0, 150, 300, 450)]
    [256, 200, 143, 87]
    >>> CurriculumSchedule(4000, 2000, 2, used_by="reward `thinkprune`").budget(0, 0)
    Traceback (most recent call last):
    ...
    ValueError: reward `thinkprune` spreads its decay points over the run's max_steps: set max_steps > 0 (got 0).
    """

    def __init__(
        self,
        initial_budget: int = 256,
        final_budget: int = 87,
        decay_points: int = 3,
        kind: str = "step",
        used_by: str = "the curriculum schedule",
    ) -> None:
        check_number("initial_budget", initial_budget, 1, integer=True)
        check_number("final_budget", final_budget, 1, integer=True)
        check_number("decay_points", decay_points, 1, integer=True)
        if kind not in CURRICULUM_SCHEDULES:
            raise ValueError(f"schedule must be one of {list(CURRICULUM_SCHEDULES)}, got {kind!r}.")
        self.initial, self.final, self.n, self.kind = int(initial_budget), int(final_budget), int(decay_points), kind
        self.used_by = used_by

    @classmethod
    def from_settings(cls, settings: dict | None, field: str, used_by: str) -> CurriculumSchedule:
        """The schedule that the dict `settings` (keys `SCHEDULE_KEYS`, the config field `field`) describes for
        `used_by`; an unknown key or a bad value raises a `ValueError` naming both.

        >>> CurriculumSchedule.from_settings({"final_budget": 2000, "initial_budget": 4000, "decay_points": 2},
        ...                                  "reward_kwargs['thinkprune']", "reward `thinkprune`").settings()
        {'initial_budget': 4000, 'final_budget': 2000, 'decay_points': 2, 'schedule': 'step'}
        >>> CurriculumSchedule.from_settings({"limit": 9}, "reward_kwargs['thinkprune']", "reward `thinkprune`")
        Traceback (most recent call last):
        ...
        ValueError: reward_kwargs['thinkprune'] ['limit'] unknown to reward `thinkprune` (it takes ['initial_budget', \
'final_budget', 'decay_points', 'schedule']).
        """
        kwargs = dict(settings or {})
        unknown = sorted(set(kwargs) - set(SCHEDULE_KEYS))
        if unknown:
            raise ValueError(f"{field} {unknown} unknown to {used_by} (it takes {list(SCHEDULE_KEYS)}).")
        kind = kwargs.pop("schedule", "step")
        try:
            return cls(**kwargs, kind=kind, used_by=used_by)
        except ValueError as err:
            raise ValueError(f"{field}: {err} ({used_by})") from err

    @property
    def decay(self) -> float:
        """The step-wise factor `gamma = (S_f / S_0)^(1/n)`."""
        return (self.final / self.initial) ** (1.0 / self.n)

    def drops(self, step: int, total_steps: int) -> int:
        """Number of decay points passed at `step`: `floor(step / T)`, `T = total_steps / (n + 1)`, at most `n`."""
        if not isinstance(total_steps, (int, float)) or total_steps <= 0:
            raise ValueError(
                f"{self.used_by} spreads its decay points over the run's max_steps: set max_steps > 0 "
                f"(got {total_steps!r})."
            )
        return min(self.n, max(0, math.floor(step * (self.n + 1) / total_steps)))

    def budget(self, step: int, total_steps: int) -> int:
        k = self.drops(step, total_steps)
        if self.kind == "step":
            value = self.initial * self.decay**k
        else:
            value = self.initial - (self.initial - self.final) * k / self.n
        return max(1, round(value))

    def budget_at(self, trainer_state) -> int:
        """`B(t)` at TRL's `trainer_state` (the reward keyword: `global_step` over `max_steps`), for a reward that
        follows the schedule without a rollout plan's column.

        >>> from types import SimpleNamespace as NS
        >>> CurriculumSchedule(4000, 2000, 2).budget_at(NS(global_step=40, max_steps=90))  # 40 // 30 = 1 drop
        2828
        """
        if trainer_state is None:
            raise ValueError(f"{self.used_by} needs TRL's trainer_state (the step counter) to compute B(t).")
        return self.budget(trainer_state.global_step, trainer_state.max_steps)

    def settings(self) -> dict:
        return {
            "initial_budget": self.initial,
            "final_budget": self.final,
            "decay_points": self.n,
            "schedule": self.kind,
        }


def triangular_length_reward(length: float, budget: float, r_max: float = 1.0) -> float:
    """`R_len`: rises linearly to `r_max` at the budget, falls linearly to 0 at twice the budget, 0 beyond.

    >>> [triangular_length_reward(n, 100) for n in (0, 50, 100, 150, 200, 250)]
    [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    """
    if length <= budget:
        return r_max * length / budget
    if length <= 2 * budget:
        return r_max * (1.0 - (length - budget) / budget)
    return 0.0


def curriculum_format_indicators(text: str) -> tuple[int, int]:
    r"""`(I_think, I_answer)` of a completion (module docstring).

    >>> [curriculum_format_indicators(t) for t in (r"<think>a</think> \boxed{4}", r"a</think>\boxed{4}")]
    [(1, 1), (1, 1)]
    >>> [curriculum_format_indicators(t) for t in (r"<think>a</think>b</think>\boxed{4}", r"\boxed{4}")]
    [(0, 1), (0, 0)]
    """
    closes, opens = text.count("</think>"), text.count("<think>")
    think = int(closes == 1 and opens <= 1 and (opens == 0 or text.index("<think>") < text.index("</think>")))
    _, answer, closed = split_thinking(text)
    return think, int(closed and extract_boxed(answer) is not None)


def get_curriculum_reward(
    lambda_correct: float = 0.6,
    lambda_length: float = 0.3,
    lambda_format: float = 0.1,
    r_correct: float = 1.0,
    r_max: float = 1.0,
    alpha_think: float = 0.5,
    alpha_answer: float = 0.5,
    initial_budget: int = 256,
    final_budget: int = 87,
    decay_points: int = 3,
    schedule: str = "step",
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _CurriculumReward:
    r"""
    "Train Long, Think Short" reward (arXiv 2508.08940, methods.md §22); formula and format indicators in the module
    docstring.

    Args:
        lambda_correct, lambda_length (`float`, defaults `0.6`, `0.3`): the paper's correctness-heavy weights.
        lambda_format (`float`, defaults `0.1`), r_correct, r_max (`float`, default `1`), alpha_think, alpha_answer
            (`float`, default `0.5`): proposed defaults (unpublished).
        initial_budget, final_budget, decay_points, schedule: the budget schedule (`CurriculumSchedule`), used only
            when no `budget` column is given (the plan's settings, passed by the recipe's builder).
        length_unit, length_scope, tokenizer: see `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `curriculum_reward`.

    >>> reward = get_curriculum_reward()
    >>> reward(completions=[r"<think>x</think>\boxed{4}", r"<think>x</think>\boxed{5}"], solution=["4", "4"],
    ...        completion_ids=[[0] * 50, [0] * 150], budget=[100, 100])  # 0.6 + 0.3 * 0.5 + 0.1 ; 0.3 * 0.5 + 0.1
    [0.85, 0.25]
    """
    for name, value in (
        ("lambda_correct", lambda_correct),
        ("lambda_length", lambda_length),
        ("lambda_format", lambda_format),
        ("r_correct", r_correct),
        ("r_max", r_max),
        ("alpha_think", alpha_think),
        ("alpha_answer", alpha_answer),
    ):
        check_number(name, value)
    sched = CurriculumSchedule(initial_budget, final_budget, decay_points, schedule)
    weights = tuple(float(v) for v in (lambda_correct, lambda_length, lambda_format, r_correct, r_max))
    return _CurriculumReward(
        weights, (float(alpha_think), float(alpha_answer)), sched, LengthMeter(length_unit, length_scope, tokenizer)
    )


class _CurriculumReward:
    __name__ = "curriculum_reward"

    def __init__(self, weights, alphas, schedule: CurriculumSchedule, meter: LengthMeter) -> None:
        self.lambda_correct, self.lambda_length, self.lambda_format, self.r_correct, self.r_max = weights
        self.alpha_think, self.alpha_answer = alphas
        self.schedule = schedule
        self.meter = meter

    def _budgets(self, n: int, kwargs: dict) -> list[int]:
        column = kwargs.get("budget")
        if column is not None:
            return [int(b) for b in column]
        state = kwargs.get("trainer_state")
        if state is None or not (getattr(state, "max_steps", 0) or 0) > 0:
            raise ValueError(
                "curriculum_reward needs the row's `budget` (rollout_plan='curriculum') or a trainer_state with "
                "max_steps to compute B(t)."
            )
        return [self.schedule.budget(state.global_step, state.max_steps)] * n

    def __call__(self, completions: list, solution: list, completion_ids: list | None = None, **kwargs) -> list:
        n = len(completions)
        ids = ids_or_none(completion_ids, n)
        budgets = self._budgets(n, kwargs)
        out: list[float | None] = []
        for completion, gold, row_ids, budget in zip(completions, solution, ids, budgets, strict=True):
            text = completion_text(completion)
            correct = is_correct(text, gold)
            if correct is None:
                out.append(None)
                continue
            think, answer = curriculum_format_indicators(text)
            length = self.meter(text, row_ids)
            out.append(
                self.lambda_correct * self.r_correct * float(correct)
                + self.lambda_length * triangular_length_reward(length, budget, self.r_max)
                + self.lambda_format * (self.alpha_think * think + self.alpha_answer * answer)
            )
        return out
