r"""
Per-completion length rewards: each completion is scored on its own, so these are plain TRL reward functions
(no group statistics, safe on any process layout).

Every factory measures length with a `LengthMeter` (`length_unit="tokens"` and `length_scope="total"` by
default: the whole completion in policy tokens, as the papers do), and every correctness-dependent reward uses the
shared checker `trl_efficient.core.answers.is_correct` and returns `None` for a row whose gold answer cannot be parsed.
"""

from __future__ import annotations

from typing import Any

from trl.rewards import get_cosine_scaled_reward, get_soft_overlong_punishment

from ..core.answers import extract_answer_region, has_boxed, is_correct
from ..core.checks import check_bool as _check_bool
from ..core.checks import check_number as _check_number
from ..core.checks import check_positive_int as _check_positive_int
from ..core.checks import column as _column
from ..core.checks import ids_or_none as _ids_or_none
from ..core.checks import renamed_argument
from ..core.lengths import (
    THINK_CLOSE,
    LengthMeter,
    ThinkCloseMonitor,
    completion_eos_token_ids,
    completion_finished,
    completion_text,
)

__all__ = [
    "L1_MODES",
    "get_cosine_length_reward",
    "get_dler_truncation_reward",
    "get_l1_reward",
    "get_laser_reward",
    "get_soft_overlong_reward",
]

L1_MODES = ("exact", "max")
_L1_DEFAULT_ALPHA = {"exact": 0.0003, "max": 0.001}
# Yeo et al. treat a completion within this many tokens of the cap as over length (paper scripts: L + 16 >= L_max).
_COSINE_EXCEED_MARGIN = 16
# Completions that TRL's accuracy_reward scores correct / wrong against the gold "1".
_CANONICAL = {True: r"\boxed{1}", False: r"\boxed{0}"}


def get_cosine_length_reward(
    max_completion_length: int | None = None,
    min_value_wrong: float = -10.0,
    max_value_wrong: float = 0.0,
    min_value_correct: float = 1.0,
    max_value_correct: float = 2.0,
    exceed_penalty: float | None = -10.0,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
    max_len: int | None = None,
) -> _CosineLengthReward:
    r"""
    Cosine length reward of Yeo et al., "Demystifying Long Chain-of-Thought Reasoning in LLMs" (arXiv 2502.03373,
    App. C.1), with the paper scripts' defaults and over-length branch.

    $$ r(L) = \begin{cases} \texttt{exceed\_penalty} & L + 16 \ge L_{\max} \\
    v_{\min} + \tfrac12 (v_{\max} - v_{\min})\bigl(1 + \cos(\pi \min(L / L_{\max}, 1))\bigr) & \text{otherwise}
    \end{cases} $$

    A correct answer goes from `max_value_correct` at $L = 0$ to `min_value_correct` at $L_{\max}$ (short is
    better); a wrong one from `min_value_wrong` at $L = 0$ to `max_value_wrong` at $L_{\max}$ (short wrong answers
    are punished more, which keeps exploration alive). The cosine itself is TRL's `get_cosine_scaled_reward`
    (progress clamped at 1); this adds the correctness checker, plain-string support, length options and the
    paper's over-length branch. Defaults: correct 2 -> 1, wrong -10 -> 0, over length -10 (paper scripts; TRL's
    own defaults differ).

    Args:
        max_completion_length (`int`):
            $L_{\max}$ in `length_unit` (tokens by default): normally the generation cap `max_completion_length`
            (the one name of the cap in every factory; `max_len` is its deprecated alias, removed in 0.3.0).
        min_value_wrong, max_value_wrong (`float`, *optional*, default `-10.0`, `0.0`):
            Reward of a wrong answer at length 0 and at `max_completion_length`.
        min_value_correct, max_value_correct (`float`, *optional*, default `1.0`, `2.0`):
            Reward of a correct answer at `max_completion_length` and at length 0.
        exceed_penalty (`float` or `None`, *optional*, defaults to `-10.0`):
            Reward when $L + 16 \ge L_{\max}$, whatever the correctness. `None` disables the branch.
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `cosine_length_reward`; `None` for rows whose gold cannot be parsed.

    >>> reward = get_cosine_length_reward(max_completion_length=100)
    >>> reward(completions=[r"\boxed{1}", r"\boxed{2}", r"\boxed{1}"], solution=["1", "1", "1"],
    ...        completion_ids=[[0] * 50, [0] * 50, [0] * 90])
    [1.5, -5.0, -10.0]
    """
    max_len = renamed_argument("max_completion_length", max_completion_length, "max_len", max_len)
    _check_positive_int("max_completion_length", max_len)
    for name, value in (
        ("min_value_wrong", min_value_wrong),
        ("max_value_wrong", max_value_wrong),
        ("min_value_correct", min_value_correct),
        ("max_value_correct", max_value_correct),
    ):
        _check_number(name, value)
    _check_number("exceed_penalty", exceed_penalty, allow_none=True)
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _CosineLengthReward(
        max_len, min_value_wrong, max_value_wrong, min_value_correct, max_value_correct, exceed_penalty, meter
    )


class _CosineLengthReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "cosine_length_reward"

    def __init__(
        self, max_len, min_value_wrong, max_value_wrong, min_value_correct, max_value_correct, exceed_penalty, meter
    ) -> None:
        self.max_len = max_len
        self.exceed_penalty = exceed_penalty
        self.meter = meter
        # TRL's picklable _CosineScaledReward holds the formula; we feed it canonical inputs (below).
        self._cosine = get_cosine_scaled_reward(
            max_len=max_len,
            min_value_wrong=min_value_wrong,
            max_value_wrong=max_value_wrong,
            min_value_correct=min_value_correct,
            max_value_correct=max_value_correct,
        )

    def __call__(
        self, completions: list, solution: list, completion_ids: list | None = None, **kwargs
    ) -> list[float | None]:
        ids_list = _ids_or_none(completion_ids, len(completions))
        rewards: list[float | None] = [None] * len(completions)
        pending: list[tuple[int, bool, int]] = []
        for i, (completion, gold, ids) in enumerate(zip(completions, solution, ids_list, strict=True)):
            correct = is_correct(completion, gold)
            if correct is None:
                continue
            length = self.meter(completion_text(completion), ids)
            if self.exceed_penalty is not None and length + _COSINE_EXCEED_MARGIN >= self.max_len:
                rewards[i] = float(self.exceed_penalty)
            else:
                pending.append((i, correct, length))
        if pending:
            # TRL's formula, evaluated once per distinct (correct, length) pair and memoised (a pure function of the
            # pair), on canonical conversational inputs whose correctness TRL's accuracy_reward decides as we did,
            # with dummy ids of our measured length.
            memo = self.__dict__.setdefault("_memo", {})
            missing = sorted({(c, length) for _, c, length in pending} - memo.keys())
            if missing:
                values = self._cosine(
                    completions=[[{"role": "assistant", "content": _CANONICAL[c]}] for c, _ in missing],
                    solution=["1"] * len(missing),
                    completion_ids=[[0] * length for _, length in missing],
                )
                memo.update(zip(missing, values, strict=True))
            for i, c, length in pending:
                rewards[i] = memo[(c, length)]
        return rewards


def get_soft_overlong_reward(
    max_completion_length: int | None = None,
    soft_punish_cache: int | None = None,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
    max_completion_len: int | None = None,
) -> _SoftOverlongReward:
    r"""
    DAPO soft overlong punishment (Yu et al., arXiv 2503.14476, §3.4, Eq. 13), TRL's
    `get_soft_overlong_punishment` measured with a `LengthMeter`.

    $$ r(L) = \begin{cases} 0 & L \le L_{\max} - L_{\text{cache}} \\
    \dfrac{(L_{\max} - L_{\text{cache}}) - L}{L_{\text{cache}}} & L_{\max} - L_{\text{cache}} < L \le L_{\max} \\
    -1 & L > L_{\max} \end{cases} $$

    Args:
        max_completion_length (`int`):
            $L_{\max}$ in `length_unit` (tokens by default). TRL stops generation at `max_completion_length`; if you
            pass that same value, the -1 branch is unreachable and truncated outputs get about -1 from the ramp.
            (`max_completion_len`, TRL's name, is a deprecated alias, removed in 0.3.0.)
        soft_punish_cache (`int`):
            $L_{\text{cache}}$, the width of the linear ramp, in the same unit (DAPO: 4096 of 20480).
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `soft_overlong_reward`. It needs no gold answer and never returns `None`.

    >>> reward = get_soft_overlong_reward(max_completion_length=100, soft_punish_cache=20)
    >>> reward(completions=["a", "b", "c"], completion_ids=[[0] * 70, [0] * 90, [0] * 110])
    [0.0, -0.5, -1.0]
    """
    max_completion_len = renamed_argument(
        "max_completion_length", max_completion_length, "max_completion_len", max_completion_len
    )
    _check_positive_int("max_completion_length", max_completion_len)
    if (
        isinstance(soft_punish_cache, bool)
        or not isinstance(soft_punish_cache, int)
        or not (0 <= soft_punish_cache <= max_completion_len)
    ):
        raise ValueError(
            f"soft_punish_cache must be an int in [0, max_completion_length={max_completion_len}], "
            f"got {soft_punish_cache!r}."
        )
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _SoftOverlongReward(max_completion_len, soft_punish_cache, meter)


class _SoftOverlongReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "soft_overlong_reward"

    def __init__(self, max_completion_len: int, soft_punish_cache: int, meter: LengthMeter) -> None:
        self.max_completion_len = max_completion_len
        self.soft_punish_cache = soft_punish_cache
        self.meter = meter
        self._punishment = get_soft_overlong_punishment(max_completion_len, soft_punish_cache)

    def __call__(self, completions: list, completion_ids: list | None = None, **kwargs) -> list[float]:
        ids_list = _ids_or_none(completion_ids, len(completions))
        lengths = [self.meter(completion_text(c), ids) for c, ids in zip(completions, ids_list, strict=True)]
        return [float(r) for r in self._punishment(completion_ids=[[0] * length for length in lengths])]


def get_l1_reward(
    mode: str = "exact",
    alpha: float | None = None,
    delta: float = 0.5,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _L1ExactReward | _L1MaxReward:
    r"""
    L1 / LCPO length-controlled reward (Aggarwal & Welleck, arXiv 2503.04697, method section: LCPO-Exact and
    LCPO-Max; constants from the original `cmu-l3/l1` code).

    $$ r_{\text{exact}} = \mathbb{1}[\text{correct}] - \alpha\,|N - n| \qquad
    r_{\max} = \mathbb{1}[\text{correct}] \cdot \mathrm{clip}\bigl(\alpha (N - n) + \delta,\ 0,\ 1\bigr) $$

    $N$ is the row's target length (dataset or rollout-plan column `target_length`) and $n$ the completion length,
    both in `length_unit` (tokens by default: the whole response, thinking and answer, as in the paper). Exact
    gives a wrong or malformed answer $-\alpha |N - n|$ (original code). Max uses $\alpha = 0.001$,
    $\delta = 0.5$, i.e. the original code's `(clip((N - n)/500, -1, 1) + 1)/2`.

    A per-row `length_mode` column (`"exact"`/`"max"`) overrides `mode` for that row: L1-Max training mixes
    Exact and Max prompts 50/50, and Exact prompts keep the Exact reward. Rows switched to the other mode use that
    mode's paper default for alpha.

    Args:
        mode (`str`, *optional*, defaults to `"exact"`): `"exact"` or `"max"`; also picks the metric name.
        alpha (`float`, *optional*): Penalty slope per token of distance; defaults to 0.0003 (exact) or 0.001 (max).
        delta (`float`, *optional*, defaults to `0.5`):
            Max-mode offset: the reward of a correct answer exactly at the target.
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `l1_exact_reward` or `l1_max_reward`; `None` for rows whose gold cannot be
    parsed. Calling it without a `target_length` column raises `ValueError`.

    >>> exact = get_l1_reward(alpha=0.01)
    >>> out = exact(completions=[r"\boxed{4}", r"\boxed{5}"], solution=["4", "4"],
    ...             completion_ids=[[0] * 90, [0] * 130], target_length=[100, 100])
    >>> [round(r, 6) for r in out]  # 1 - 0.01*10 ; 0 - 0.01*30
    [0.9, -0.3]
    >>> maxed = get_l1_reward(mode="max")
    >>> out = maxed(completions=[r"\boxed{4}"] * 2, solution=["4"] * 2,
    ...             completion_ids=[[0] * 800, [0] * 1800], target_length=[1000, 1000])
    >>> [round(r, 6) for r in out]  # clip(0.001*200 + 0.5) ; clip(0.001*(-800) + 0.5) = clip(-0.3)
    [0.7, 0.0]
    """
    if mode not in L1_MODES:
        raise ValueError(f"mode must be one of {L1_MODES}, got {mode!r}.")
    _check_number("alpha", alpha, allow_none=True)
    if alpha is not None and alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha!r}.")
    _check_number("delta", delta)
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    alphas = dict(_L1_DEFAULT_ALPHA)
    if alpha is not None:
        alphas[mode] = float(alpha)
    cls = _L1ExactReward if mode == "exact" else _L1MaxReward
    return cls(mode, alphas["exact"], alphas["max"], float(delta), meter)


class _L1Reward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "l1_reward"

    def __init__(self, mode: str, alpha_exact: float, alpha_max: float, delta: float, meter: LengthMeter) -> None:
        self.mode = mode
        self.alpha_exact = alpha_exact
        self.alpha_max = alpha_max
        self.delta = delta
        self.meter = meter

    def __call__(
        self, completions: list, solution: list, completion_ids: list | None = None, **kwargs
    ) -> list[float | None]:
        n = len(completions)
        targets = _column(kwargs, "target_length", n)
        if targets is None:
            raise ValueError(
                f"{self.__name__} needs a per-row 'target_length' column (the target N in "
                f"{self.meter.unit}): add it to the dataset or to the rollout plan."
            )
        modes = _column(kwargs, "length_mode", n) or [None] * n
        ids_list = _ids_or_none(completion_ids, n)
        rewards: list[float | None] = []
        rows = zip(completions, solution, ids_list, targets, modes, strict=True)
        for completion, gold, ids, target, row_mode in rows:
            if target is None or isinstance(target, bool) or not isinstance(target, (int, float)) or target < 0:
                raise ValueError(f"target_length must be a non-negative number for every row, got {target!r}.")
            row_mode = self.mode if row_mode is None else row_mode
            if row_mode not in L1_MODES:
                raise ValueError(f"length_mode must be one of {L1_MODES} (or None), got {row_mode!r}.")
            correct = is_correct(completion, gold)
            if correct is None:
                rewards.append(None)
                continue
            length = self.meter(completion_text(completion), ids)
            if row_mode == "exact":
                rewards.append(float(correct) - self.alpha_exact * abs(target - length))
            else:
                rewards.append(float(correct) * min(1.0, max(0.0, self.alpha_max * (target - length) + self.delta)))
        return rewards


class _L1ExactReward(_L1Reward):
    __name__ = "l1_exact_reward"


class _L1MaxReward(_L1Reward):
    __name__ = "l1_max_reward"


def get_laser_reward(
    target_length: int = 2048,
    alpha: float = 0.5,
    correct_reward: float = 1.0,
    wrong_reward: float = -0.5,
    format_reward: float = -1.0,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _LaserReward:
    r"""
    LASER step length reward (Liu et al., "Learn to Reason Efficiently with Adaptive Length-based Reward
    Shaping", arXiv 2505.15612, method section "LASER"; values from the code, `hkust-nlp/Laser`).

    $$ r = \begin{cases} \texttt{format\_reward} & \text{no } \texttt{</think>}
    \text{ or no } \texttt{\textbackslash boxed} \text{ after it (incl. truncated)} \\
    \texttt{correct\_reward} + \alpha\,\mathbb{1}[L \le L_T] & \text{correct} \\
    \texttt{wrong\_reward} & \text{wrong} \end{cases} $$

    A step function, not a penalty: a correct answer no longer than $L_T$ earns the bonus $\alpha$. The boxed answer
    must come after the last `</think>`; the opening `<think>` is not required because chat templates often put it
    in the prompt. LASER-D sets $L_T$ per difficulty bucket: a per-row `target_length` column, when present (and
    not `None` for the row), overrides the factory's `target_length`.

    Args:
        target_length (`int`, *optional*, defaults to `2048`):
            $L_T$ in `length_unit` (tokens by default; the paper uses 2048, 4096 or 8192 with a 16384 context).
        alpha (`float`, *optional*, defaults to `0.5`): Bonus for a correct answer within $L_T$.
        correct_reward, wrong_reward, format_reward (`float`, *optional*, defaults `1.0`, `-0.5`, `-1.0`): Base rewards.
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `laser_reward`; `None` for rows whose gold cannot be parsed. The fraction of
    completions without `</think>` (all `format_reward`) is logged as `trl_efficient/no_think_close_fraction`, with
    one warning the first time no completion of a call has one (`core.lengths.ThinkCloseMonitor`).

    >>> reward = get_laser_reward(target_length=4)
    >>> reward(completions=[r"a</think>\boxed{3}", r"a</think>\boxed{3}", r"a</think>\boxed{2}", r"\boxed{3}"],
    ...        solution=["3"] * 4, completion_ids=[[0] * 4, [0] * 5, [0] * 4, [0] * 4])
    [1.5, 1.0, -0.5, -1.0]
    """
    _check_positive_int("target_length", target_length)
    for name, value in (
        ("alpha", alpha),
        ("correct_reward", correct_reward),
        ("wrong_reward", wrong_reward),
        ("format_reward", format_reward),
    ):
        _check_number(name, value)
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _LaserReward(
        target_length, float(alpha), float(correct_reward), float(wrong_reward), float(format_reward), meter
    )


def laser_formatted(text: str) -> bool:
    r"""LASER's format rule (hkust-nlp/Laser `length_penalty.py`): a `</think>` with a `\boxed{}` after it; a
    truncated output fails it.

    >>> laser_formatted(r"a</think>\boxed{3}"), laser_formatted(r"\boxed{3}")
    (True, False)
    """
    return THINK_CLOSE in text and has_boxed(extract_answer_region(text))


def laser_step(correct: bool, formatted: bool, length: float, limit: float, alpha: float, correct_reward: float,
               wrong_reward: float, format_reward: float) -> float:  # fmt: skip
    """LASER's step reward of one scorable row (the equation of `get_laser_reward`); LASER-D passes its bucket's
    $L_k$ as `limit`.

    >>> laser_step(True, True, 4, 4, 0.5, 1.0, -0.5, -1.0), laser_step(False, True, 4, 4, 0.5, 1.0, -0.5, -1.0)
    (1.5, -0.5)
    """
    if not formatted:
        return format_reward
    if correct:
        return correct_reward + (alpha if length <= limit else 0.0)
    return wrong_reward


class _LaserReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "laser_reward"

    def __init__(self, target_length, alpha, correct_reward, wrong_reward, format_reward, meter) -> None:
        self.target_length = target_length
        self.alpha = alpha
        self.correct_reward = correct_reward
        self.wrong_reward = wrong_reward
        self.format_reward = format_reward
        self.meter = meter
        self.think_close = ThinkCloseMonitor(self.__name__, f"format_reward={format_reward}")

    def __call__(
        self, completions: list, solution: list, completion_ids: list | None = None, **kwargs
    ) -> list[float | None]:
        n = len(completions)
        targets = _column(kwargs, "target_length", n) or [None] * n
        ids_list = _ids_or_none(completion_ids, n)
        self.think_close([completion_text(c) for c in completions], kwargs.get("log_metric"))  # no </think>: format
        rewards: list[float | None] = []
        for completion, gold, ids, target in zip(completions, solution, ids_list, targets, strict=True):
            correct = is_correct(completion, gold, answer_after_think=True, require_think_close=True)
            if correct is None:
                rewards.append(None)
                continue
            text = completion_text(completion)
            limit = self.target_length if target is None else target
            rewards.append(laser_step(bool(correct), laser_formatted(text), self.meter(text, ids), limit, self.alpha,
                                      self.correct_reward, self.wrong_reward, self.format_reward))  # fmt: skip
        return rewards


def get_dler_truncation_reward(
    max_completion_length: int,
    eos_token_id: int | list[int] | None = None,
    stop_factor: float = 0.1,
    require_think_close: bool = True,
    require_boxed: bool = True,
    tokenizer: Any = None,
) -> _DlerTruncationReward:
    r"""
    DLER truncation reward (Liu et al., "DLER: Doing Length pEnalty Right", arXiv 2510.15110, method section;
    the ×0.1 stop scaling is from the released code, `NVlabs/DLER` reward manager): correctness under a short
    generation cap, scaled down when the response did not stop.

    $$ r = \mathbb{1}[\text{correct}] \cdot \begin{cases} 1 & \text{stopped (ends with EOS)} \\
    \texttt{stop\_factor} & \text{truncated} \end{cases} $$

    The length penalty is the truncation itself (`max_completion_length=4000` in the paper). Correct = a boxed answer
    after `</think>` that math-verify accepts (both configurable). Stopped = the last id is one of the ids generation
    stops on (DLER's `finish_reason == "stop"`; TRL 1.16 stops on several EOS ids): the row keyword `finished`
    (`core.lengths.completion_finished`) under `EfficientGRPOTrainer`, else the EOS set from
    `set_eos_token_ids(...)`, then `eos_token_id`, then TRL's rule on `tokenizer` and its saved generation config
    (`completion_eos_token_ids`), else length `>= max_completion_length` counts as truncated. Pitfall (methods.md
    §4): the ×`stop_factor` is a penalty only on a non-negative reward. Keep `mask_truncated_completions=False`.
    Details: docs/advantage-methods.md, "DLER".

    Args:
        max_completion_length (`int`): The generation cap in tokens (used only when `eos_token_id` is `None`).
        eos_token_id (`int` or `list[int]`, *optional*): Stop token id(s); pass all the ids generation stops on.
        tokenizer (*optional*):
            When `eos_token_id` is None: derive the stop ids as TRL does from this tokenizer and the generation
            config saved with it (recipe builder `dler_truncation`).
        stop_factor (`float`, *optional*, defaults to `0.1`): Multiplier for responses that did not stop, in [0, 1].
        require_think_close (`bool`, *optional*, defaults to `True`):
            A response without `</think>` is wrong (logged as `trl_efficient/no_think_close_fraction`, one warning
            when none has it: `ThinkCloseMonitor`). Set it to `False` for a model that does not think in tags.
        require_boxed (`bool`, *optional*, defaults to `True`): The answer after `</think>` must be in `\boxed{}`.

    Returns a picklable callable named `dler_truncation_reward`; `None` for rows whose gold cannot be parsed.

    >>> reward = get_dler_truncation_reward(max_completion_length=8, eos_token_id=2)
    >>> reward(completions=[r"a</think>\boxed{3}", r"a</think>\boxed{3}", r"\boxed{3}"], solution=["3"] * 3,
    ...        completion_ids=[[5, 5, 2], [5, 5, 5], [5, 2]])
    [1.0, 0.1, 0.0]
    """
    _check_positive_int("max_completion_length", max_completion_length)
    if eos_token_id is None and tokenizer is not None:
        eos_token_id = completion_eos_token_ids(_saved_generation_config(tokenizer), tokenizer) or None
    if eos_token_id is None:
        eos_ids = None
    else:
        ids = [eos_token_id] if isinstance(eos_token_id, int) and not isinstance(eos_token_id, bool) else eos_token_id
        try:
            eos_ids = tuple(ids)
        except TypeError:
            eos_ids = ()
        if not eos_ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in eos_ids):
            raise ValueError(f"eos_token_id must be an int, a non-empty list of ints or None, got {eos_token_id!r}.")
    _check_number("stop_factor", stop_factor)
    if not 0.0 <= stop_factor <= 1.0:
        raise ValueError(f"stop_factor must be in [0, 1], got {stop_factor!r}.")
    _check_bool("require_think_close", require_think_close)
    _check_bool("require_boxed", require_boxed)
    return _DlerTruncationReward(max_completion_length, eos_ids, float(stop_factor), require_think_close, require_boxed)


def _saved_generation_config(tokenizer):
    """The generation config a model saved next to `tokenizer` would load (`generation_config.json`, else derived
    from `config.json` as transformers does), or None."""
    from transformers import AutoConfig, GenerationConfig

    path = getattr(tokenizer, "name_or_path", None)
    if not path:
        return None
    try:
        return GenerationConfig.from_pretrained(path)
    except (OSError, ValueError):
        pass
    try:
        return GenerationConfig.from_model_config(AutoConfig.from_pretrained(path))
    except (OSError, ValueError, KeyError):
        return None


class _DlerTruncationReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "dler_truncation_reward"

    def __init__(self, max_completion_length, eos_ids, stop_factor, require_think_close, require_boxed) -> None:
        self.max_completion_length = max_completion_length
        self.eos_ids = eos_ids
        self.stop_factor = stop_factor
        self.require_think_close = require_think_close
        self.require_boxed = require_boxed
        self.think_close = ThinkCloseMonitor(self.__name__, "0 (wrong), even with a right answer")

    def set_eos_token_ids(self, ids) -> None:
        """Use the trainer's EOS set (`GRPOTrainer.eos_token_ids`); `EfficientGRPOTrainer` calls this."""
        self.eos_ids = tuple(int(i) for i in ids) or None

    def _stopped(self, ids: list[int]) -> bool:
        if self.eos_ids is not None:
            return completion_finished(ids, self.eos_ids)
        return len(ids) < self.max_completion_length

    def __call__(
        self, completions: list, solution: list, completion_ids: list, finished: list | None = None, **kwargs
    ) -> list[float | None]:
        if self.require_think_close:  # no </think>: 0 even when right, the same for all (warned once)
            self.think_close([completion_text(c) for c in completions], kwargs.get("log_metric"))
        # `finished`: the trainer's column (EfficientGRPOTrainer, the same rule); a plain GRPOTrainer passes none
        stopped = [self._stopped(ids) for ids in completion_ids] if finished is None else [bool(f) for f in finished]
        rewards: list[float | None] = []
        for completion, gold, done in zip(completions, solution, stopped, strict=True):
            correct = is_correct(completion, gold, require_think_close=self.require_think_close)
            if correct is None:
                rewards.append(None)
                continue
            if correct and self.require_boxed:
                correct = has_boxed(extract_answer_region(completion_text(completion)))
            reward = 1.0 if correct else 0.0
            rewards.append(reward if done else reward * self.stop_factor)
        return rewards
