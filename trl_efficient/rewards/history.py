r"""
History-aware length rewards: HAPO (Huang, Zhang, Cardie, arXiv 2505.11225; methods.md §12).

The per-prompt history (the shortest correct length seen so far, across steps and epochs) is **kept by the trainer,
not by the reward**: `EfficientGRPOTrainer` with `track_prompt_history=True` holds a `PromptHistory`
(`trl_efficient/trainer/state.py`), updates it once per generation batch from the **gathered** batch, in training
only, and feeds it back before generation as the per-row column `history_best_length` (`-1`: no correct answer yet).
Because every rank updates its copy from the same gathered rows, the ranks hold identical histories: this replaces
HAPO's per-process tables that are "gathered and reduced with min" before use (HCY123902/HAPO `grpo_trainer.py`,
`HistroyTracker`). The history is saved with every checkpoint (`trl_efficient_state.json`, key `prompt_history`).

The reward here only reads the column, so it is a pure per-row function of `(correct, L, h)`:

>>> reward = get_hapo_length_reward()
>>> reward(completions=[r"\boxed{1}", r"\boxed{1}", r"\boxed{2}", r"\boxed{1}"], solution=["1"] * 4,
...        completion_ids=[[0] * 5, [0] * 20, [0] * 5, [0] * 7], history_best_length=[10, 10, 10, -1])
[0.7071067811865476, -0.7, 0.0, 0.0]
"""

from __future__ import annotations

import math
from typing import Any

from ..core.answers import is_correct
from ..core.checks import check_number as _check_number
from ..core.checks import column as _column
from ..core.checks import ids_or_none as _ids_or_none
from ..core.lengths import LengthMeter, completion_text

__all__ = ["HAPO_VARIANTS", "get_hapo_length_reward", "hapo_length_term"]

HAPO_VARIANTS = ("cosine", "linear")


def hapo_length_term(
    correct: bool,
    length: float,
    best: float | None,
    variant: str = "cosine",
    correct_floor: float = -0.7,
    wrong_floor: float = -1.0,
    tolerance: float = 0.1,
) -> float:
    r"""
    HAPO's length term $r_{len}$ of one completion (HCY123902/HAPO `utils.py`, `compute_len_reward` (cosine) and
    `compute_len_reward_linear`; methods.md §12).

    With $h$ the prompt's shortest correct length so far ($r_{len} = 0$ when there is none, `best` `None` or
    $\le 0$) and $x = L/h$:

    cosine: $$ c = \begin{cases} \cos(x\pi/2) & x < 2 \\ -1 & x \ge 2 \end{cases}, \qquad
    r_{len} = \begin{cases} \max(-0.7, c) & \text{correct} \\ \min(0, c) & \text{wrong} \end{cases} $$

    linear ($\tau$ = `tolerance` = 0.1): correct $$ r_{len} = \begin{cases} 1 - x & L < h \\ 0 & h \le L < (1+\tau)h
    \\ \max(-0.7, -(L - (1+\tau)h)/h) & \text{else} \end{cases} $$, wrong $$ r_{len} = \begin{cases} 0 & L <
    (1+\tau)h \\ \max(-1, -(L - (1+\tau)h)/h) & \text{else} \end{cases} $$

    `correct_floor` is the −0.7 of both variants; `wrong_floor` the −1 of the linear variant (the cosine's wrong
    branch is bounded by $c \ge -1$ already).

    >>> hapo_length_term(True, 5, 10), round(hapo_length_term(True, 10, 10), 12), hapo_length_term(True, 30, 10)
    (0.7071067811865476, 0.0, -0.7)
    >>> hapo_length_term(False, 5, 10), hapo_length_term(True, 5, None)
    (0.0, 0.0)
    >>> hapo_length_term(True, 5, 10, "linear"), hapo_length_term(False, 13, 10, "linear")
    (0.5, -0.2)
    """
    if best is None or best <= 0:  # first visit / no correct answer yet (HAPO's null sentinel): no length reward
        return 0.0
    x = length / best
    if variant == "cosine":
        c = math.cos(x * math.pi / 2) if x < 2 else -1.0
        return max(correct_floor, c) if correct else min(0.0, c)
    if variant == "linear":
        over = (best + tolerance * best - length) / best  # -(L - (1+tau)h)/h, > 0 below the tolerance band
        if correct:
            if length < best:
                return 1.0 - x
            return 0.0 if over > 0 else max(correct_floor, over)
        return 0.0 if over > 0 else max(wrong_floor, over)
    raise ValueError(f"variant must be one of {list(HAPO_VARIANTS)}, got {variant!r}.")


def get_hapo_length_reward(
    variant: str = "cosine",
    w_lr: float = 1.0,
    correct_floor: float = -0.7,
    wrong_floor: float = -1.0,
    tolerance: float = 0.1,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _HapoLengthReward:
    r"""
    HAPO length reward (Huang, Zhang, Cardie, arXiv 2505.11225, §3; methods.md §12; HCY123902/HAPO `utils.py`
    `compute_len_reward` / `compute_len_reward_linear`, `grpo_trainer.py` `combined_reward_func`): returns
    $w_{lr} \cdot r_{len}$ (see `hapo_length_term`), to be **added to a separate correctness reward** of weight 1,
    so the total is HAPO's

    $$ R = \mathbb{1}[\text{correct}] + w_{lr}\, r_{len}(L, h) $$

    (the repetition penalty $r_{rep}$ is off by default in HAPO and not reproduced). Correctness stays a separate
    reward: it is the correctness column the history update reads (a correct answer at the −0.7 floor would total 0.3).
    $h$ is the column `history_best_length` from the trainer's `PromptHistory` (`track_prompt_history=True`; "min"
    mode, gathered, training only; checked at `attach`); `h = -1` (first visit, no correct answer yet) gives 0; in
    evaluation the term is 0 (proposed default; HAPO offsets eval indices instead). Lengths are policy tokens, EOS
    included (HAPO re-tokenises without it): only `length_unit="tokens"`, `length_scope="total"`. An unparsable gold
    gets `None`. Details: docs/adaptive-methods.md, "HAPO".

    Args:
        variant (`str`, *optional*, defaults to `"cosine"`): `"cosine"` (HAPO's default) or `"linear"`.
        w_lr (`float`, *optional*, defaults to `1.0`): weight of the length term, in [0, 1] so any correct answer
            outscores any wrong one (HAPO's `w_lr = 1`).
        correct_floor (`float`, *optional*, defaults to `-0.7`): floor of a correct answer's term, in [-1, 0].
        wrong_floor (`float`, *optional*, defaults to `-1.0`): floor of a wrong answer's term (linear), in [-1, 0].
        tolerance (`float`, *optional*, defaults to `0.1`): the linear variant's band above $h$, >= 0.
        length_unit, length_scope, tokenizer: must be `"tokens"`/`"total"` (see above).

    Returns a picklable callable named `hapo_length_reward`.

    >>> reward = get_hapo_length_reward(variant="linear", w_lr=0.5)
    >>> reward(completions=[r"\boxed{1}", r"\boxed{2}"], solution=["1", "1"], completion_ids=[[0] * 5, [0] * 15],
    ...        history_best_length=[10, 10])  # 0.5 * (1 - 5/10) ; 0.5 * max(-1, -(15 - 11)/10)
    [0.25, -0.2]
    """
    if variant not in HAPO_VARIANTS:
        raise ValueError(f"variant must be one of {list(HAPO_VARIANTS)}, got {variant!r}.")
    _check_number("w_lr", w_lr, 0.0, 1.0)
    _check_number("correct_floor", correct_floor, -1.0, 0.0)
    _check_number("wrong_floor", wrong_floor, -1.0, 0.0)
    _check_number("tolerance", tolerance, 0.0)
    if length_unit != "tokens" or length_scope != "total":
        raise ValueError(
            f"get_hapo_length_reward needs length_unit='tokens' and length_scope='total' (the unit of the trainer's "
            f"prompt history), got length_unit={length_unit!r}, length_scope={length_scope!r}."
        )
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _HapoLengthReward(variant, float(w_lr), float(correct_floor), float(wrong_floor), float(tolerance), meter)


class _HapoLengthReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker (the trainer reference is dropped).
    __name__ = "hapo_length_reward"
    needs_columns = ("idx",)  # through the trainer's PromptHistory, which keys the history by it

    def __init__(self, variant, w_lr, correct_floor, wrong_floor, tolerance, meter: LengthMeter) -> None:
        self.variant = variant
        self.w_lr = w_lr
        self.correct_floor = correct_floor
        self.wrong_floor = wrong_floor
        self.tolerance = tolerance
        self.meter = meter
        self._trainer = None

    def attach(self, trainer) -> None:
        if not getattr(trainer.args, "track_prompt_history", False):
            raise ValueError(
                "hapo_length_reward reads the per-prompt history: set track_prompt_history=True (the `hapo` recipe "
                "does) and give the training dataset an `idx` column."
            )
        self._trainer = trainer

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_trainer": None}

    def _training(self) -> bool:
        model = getattr(self._trainer, "model", None)
        return True if model is None else bool(model.training)

    def __call__(
        self, completions: list, solution: list, completion_ids: list | None = None, **kwargs
    ) -> list[float | None]:
        n = len(completions)
        best = _column(kwargs, "history_best_length", n)
        if best is None:
            raise ValueError(
                "hapo_length_reward needs the `history_best_length` column: train with EfficientGRPOTrainer and "
                "track_prompt_history=True, or pass history_best_length=[...] (-1 for no correct answer yet)."
            )
        training = self._training()
        out: list[float | None] = []
        for completion, gold, ids, h in zip(completions, solution, _ids_or_none(completion_ids, n), best, strict=True):
            correct = is_correct(completion, gold)
            if correct is None:
                out.append(None)
                continue
            if not training:
                out.append(0.0)
                continue
            length = self.meter(completion_text(completion), ids)
            h = None if h is None or h < 0 else h
            term = hapo_length_term(
                correct, length, h, self.variant, self.correct_floor, self.wrong_floor, self.tolerance
            )
            out.append(self.w_lr * term)
        return out
