r"""
Budget-aware rewards: HBPO's budget-aware cosine reward and SABER's tier-aware thinking-length reward.

Both score each completion on its own (no group statistics), so they are plain TRL reward functions. The budget of
a row comes from a per-row column, never from a regex on the text:

- HBPO reads `budget` (tokens) and `budget_statement` (the text that stated it), which `BudgetRolloutPlan` adds to
  every rollout (`rollout_plan="budget"`). HBPO's group-level half, the per-subgroup advantage term, lives in
  `trl_efficient.methods.hbpo`.
- SABER reads `saber_mode`, `saber_budget`, `saber_base_tokens` and `saber_penalize`, which
  `trl_efficient.methods.saber.prepare_dataset` adds to every example from the base model's profile.

Both return `None` for a row whose gold answer cannot be parsed (no signal; TRL skips the row for this reward).
"""

from __future__ import annotations

import math
from typing import Any

from ..core.answers import extract_answer_region, has_boxed, is_correct
from ..core.checks import check_number as _check_number
from ..core.checks import check_positive_int as _check_positive_int
from ..core.checks import column as _column
from ..core.checks import ids_or_none as _ids_or_none
from ..core.lengths import THINK_CLOSE, LengthMeter, ThinkCloseMonitor, completion_text

__all__ = [
    "HBPO_ALPHA",
    "HBPO_BETA",
    "HBPO_L_MAX",
    "HBPO_VARIANTS",
    "SABER_MODES",
    "SABER_REWARD_PROPOSED_DEFAULTS",
    "get_hbpo_reward",
    "get_saber_reward",
    "hbpo_budget_ceiling",
]

# HBPO constants of the released code (methods.md §2): R = 4 cos(pi L / 8192) - |b - L| / 4096, i.e. beta = 4,
# L_max = 4096 (the cosine reaches 0 at L = L_max), alpha = 1/4096.
HBPO_BETA = 4.0
HBPO_ALPHA = 1.0 / 4096
HBPO_L_MAX = 4096
# "paper": piecewise f1/f2 reward and A = A_inter + A_intra (arXiv 2507.15844, §3).
# "released_code": min(f1, f2) reward and A = A_inter + 2 A_intra (ZJU-REAL/HBPO adds A_intra twice).
HBPO_VARIANTS = ("paper", "released_code")

# SABER row modes written by `trl_efficient.methods.saber.prepare_dataset` (column `saber_mode`).
SABER_MODES = ("budget", "unlimited", "nothink")
# The reward's defaults are ours (methods.md §3, "Proposed defaults"); model cards list these lines.
SABER_REWARD_PROPOSED_DEFAULTS = (
    "SABER reward (the paper's is not published): R = c (1 - 0.5 min(1, max(0, t - B) / B)) on base-correct "
    "budgeted examples, R = c otherwise; t = thinking tokens; no </think> -> 0",
    "SABER length-proportion guard: reward capped at 0.5 when t < 0.1 min(t_base, B)",
    "SABER NoThink examples: reward c when thinking <= 16 tokens, else 0.5 c",
)


def _formatted(text: str) -> bool:
    """A closed thinking part followed by a `\\boxed{}` answer (HBPO's "extractable answer")."""
    return THINK_CLOSE in text and has_boxed(extract_answer_region(text))


def hbpo_budget_ceiling(budget: float, beta: float = HBPO_BETA, l_max: float = HBPO_L_MAX) -> float:
    r"""
    HBPO's reward of a correct answer within budget `b` (arXiv 2507.15844, §3.2, $f_2$):
    $$ f_2(b) = \beta \cos\!\Bigl(\frac{\pi b}{2 L_{\max}}\Bigr) $$
    It is also the highest reward any rollout of budget `b` can earn, which the advantage's subgroup term
    $A_{\text{intra}} = \mu_b - f_2(b)$ subtracts.

    >>> [round(hbpo_budget_ceiling(b), 2) for b in (512, 1024, 2048, 2560)]  # methods.md §2
    [3.92, 3.7, 2.83, 2.22]
    """
    return beta * math.cos(math.pi * budget / (2.0 * l_max))


def get_hbpo_reward(
    beta: float = HBPO_BETA,
    alpha: float = HBPO_ALPHA,
    l_max: int = HBPO_L_MAX,
    variant: str = "paper",
    count_prefill: bool = True,
    format_reward: float = -1.0,
    wrong_reward: float = 0.0,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _HBPOReward:
    r"""
    HBPO budget-aware reward (Lyu et al., "Hierarchical Budget Policy Optimization", arXiv 2507.15844, §3.2;
    constants and the format/overlength branches from the released code, `ZJU-REAL/HBPO`
    `rllm/rewards/math_reward.py`; methods.md §2).

    With $L$ the length of the response **including the budget prefill** and $b$ the row's budget:
    $$ R = \begin{cases}
    \texttt{format\_reward} & \text{no } \texttt{</think>} \text{ or no } \texttt{\textbackslash boxed\{\}}
        \text{ after it} \\
    \texttt{wrong\_reward} & \text{wrong, or } L > L_{\max} \\
    f_1(L, b) = \beta\cos\bigl(\tfrac{\pi L}{2L_{\max}}\bigr) - \alpha\,|L - b| & \text{correct}, L > b \\
    f_2(b) = \beta\cos\bigl(\tfrac{\pi b}{2L_{\max}}\bigr) & \text{correct}, L \le b
    \end{cases} $$
    `variant="released_code"`: the code's $\min(f_1(L, b), f_2(b))$ for every correct answer. A row without a
    budget gets the code's budget-free $\beta\cos(\pi L / 2L_{\max})$ when correct (unrounded). $L$ adds the row's
    `budget_statement` prefill (policy `tokenizer`, no special tokens; chars with `length_unit="chars"`, nothing with
    `length_scope="answer"`) unless `count_prefill=False`. Kept pitfall: a long correct answer ($L \gtrsim 3600$)
    scores below a wrong one (methods.md, cross-cutting note 5). Details: docs/budget-methods.md, "HBPO".

    Args:
        beta (`float`, *optional*, defaults to `4.0`):
            $\beta$, the cosine's amplitude (the reward of a correct, zero-length answer).
        alpha (`float`, *optional*, defaults to `1/4096`): $\alpha$, penalty per token of overshoot beyond the budget.
        l_max (`int`, *optional*, defaults to `4096`):
            $L_{\max}$ in tokens: the cosine reaches 0 there, and a longer correct answer scores `wrong_reward`.
        variant (`str`, *optional*, defaults to `"paper"`):
            `"paper"` (piecewise $f_1/f_2$) or `"released_code"` ($\min(f_1, f_2)$).
        count_prefill (`bool`, *optional*, defaults to `True`): Add the length of the row's `budget_statement` to $L$.
        format_reward (`float`, *optional*, defaults to `-1.0`):
            Reward of a response without `</think>` or without a boxed answer after it (truncated ones included).
        wrong_reward (`float`, *optional*, defaults to `0.0`): Reward of a wrong answer.
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`. `tokenizer` is required
            to count the prefill in tokens.

    Returns a picklable callable named `hbpo_reward`; `None` for rows whose gold cannot be parsed. Logs
    `trl_efficient/no_think_close_fraction` and warns once when no completion has `</think>` (`ThinkCloseMonitor`).

    >>> reward = get_hbpo_reward(count_prefill=False)
    >>> out = reward(completions=[r"a</think>\boxed{4}", r"a</think>\boxed{4}", r"a</think>\boxed{5}", r"a \boxed{4}"],
    ...              solution=["4"] * 4, completion_ids=[[0] * 300, [0] * 1000, [0] * 300, [0] * 300],
    ...              budget=[512] * 4)
    >>> [round(r, 4) for r in out]  # f2(512) = 4 cos(pi/16); f1 = 4 cos(pi 1000/8192) - 488/4096; wrong; format
    [3.9231, 3.5903, 0.0, -1.0]
    """
    beta = _check_number("beta", beta, 0.0, low_open=True)
    alpha = _check_number("alpha", alpha, 0.0)
    l_max = _check_positive_int("l_max", l_max)
    if variant not in HBPO_VARIANTS:
        raise ValueError(f"variant must be one of {HBPO_VARIANTS}, got {variant!r}.")
    if not isinstance(count_prefill, bool):
        raise ValueError(f"count_prefill must be a bool, got {count_prefill!r}.")
    format_reward = _check_number("format_reward", format_reward)
    wrong_reward = _check_number("wrong_reward", wrong_reward)
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    if count_prefill and length_unit == "tokens" and tokenizer is None:
        raise ValueError(
            "count_prefill=True counts the budget prefill in policy tokens and needs tokenizer=...; pass the policy "
            "tokenizer, or count_prefill=False when the budget statement is not an assistant prefill."
        )
    return _HBPOReward(beta, alpha, l_max, variant, count_prefill, format_reward, wrong_reward, meter)


class _HBPOReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "hbpo_reward"

    def __init__(self, beta, alpha, l_max, variant, count_prefill, format_reward, wrong_reward, meter) -> None:
        self.beta = beta
        self.alpha = alpha
        self.l_max = l_max
        self.variant = variant
        self.count_prefill = count_prefill
        self.format_reward = format_reward
        self.wrong_reward = wrong_reward
        self.meter = meter
        self._prefill_lengths: dict[str, int] = {}
        self.think_close = ThinkCloseMonitor(self.__name__, f"format_reward={format_reward}")

    def prefill_length(self, statement: str | None) -> int:
        """Length of the budget prefill in the meter's unit (0 when not counted)."""
        if not self.count_prefill or not statement or self.meter.scope == "answer":
            return 0
        if statement not in self._prefill_lengths:
            if self.meter.unit == "chars":
                self._prefill_lengths[statement] = len(statement)
            else:
                ids = self.meter.tokenizer(statement, add_special_tokens=False)["input_ids"]
                self._prefill_lengths[statement] = len(ids)
        return self._prefill_lengths[statement]

    def score(self, correct: bool, length: float, budget: float | None) -> float:
        """Reward of a well-formatted response of `length` (prefill included) under `budget` (`None`: none)."""
        if not correct or length > self.l_max:
            return self.wrong_reward
        cosine = self.beta * math.cos(math.pi * length / (2.0 * self.l_max))
        if budget is None:
            return cosine
        ceiling = hbpo_budget_ceiling(budget, self.beta, self.l_max)
        overshoot = cosine - self.alpha * abs(length - budget)
        if self.variant == "released_code":
            return min(overshoot, ceiling)
        return overshoot if length > budget else ceiling

    def __call__(
        self, completions: list, solution: list, completion_ids: list | None = None, **kwargs
    ) -> list[float | None]:
        n = len(completions)
        budgets = _column(kwargs, "budget", n) or [None] * n
        statements = _column(kwargs, "budget_statement", n) or [None] * n
        ids_list = _ids_or_none(completion_ids, n)
        texts = [completion_text(completion) for completion in completions]
        self.think_close(texts, kwargs.get("log_metric"))  # no </think> anywhere: all -1, no signal (warned once)
        rewards: list[float | None] = []
        for completion, text, gold, ids, budget, statement in zip(
            completions, texts, solution, ids_list, budgets, statements, strict=True
        ):
            correct = is_correct(completion, gold, answer_after_think=True, require_think_close=True)
            if correct is None:
                rewards.append(None)
                continue
            if not _formatted(text):
                rewards.append(self.format_reward)
                continue
            length = self.meter(text, ids) + self.prefill_length(statement)
            rewards.append(float(self.score(correct, length, budget)))
        return rewards


def get_saber_reward(
    penalty: float = 0.5,
    guard_ratio: float = 0.1,
    guard_cap: float = 0.5,
    no_think_max_tokens: int = 16,
    no_think_factor: float = 0.5,
    length_unit: str = "tokens",
    tokenizer: Any = None,
) -> _SaberReward:
    r"""
    SABER tier-aware thinking-length reward (Zhao et al., "SABER: Switchable and Balanced Training for Efficient
    LLM Reasoning", arXiv 2508.10026). **The paper's reward is not published**: this implements the documented
    *proposed default* of methods.md §3, not the authors' formula.

    With $t$ the **thinking** length (tokens up to and including the last `</think>`, as the profile measures
    $t_{\text{base}}$), $c$ correctness, $B$ the row's tier budget and $t_{\text{base}}$ the base model's thinking
    length on the example:
    $$ R = \begin{cases}
    0 & \text{no } \texttt{</think>} \text{ (missing or unclosed thinking)} \\
    c \cdot \bigl(1 - p \cdot \min(1, \max(0, t - B) / B)\bigr) & \text{budgeted row, base model correct} \\
    c & \text{budgeted row, base model wrong; or unlimited row} \\
    c \text{ if } t \le T_{\text{nothink}} \text{ else } f \cdot c & \text{NoThink row}
    \end{cases} $$
    then the guard: if $t < g \cdot \min(t_{\text{base}}, B)$ ($B = \infty$ unlimited; $t_{\text{base}}$ known),
    $R \leftarrow \min(R, \texttt{guard\_cap})$. Columns (`methods.saber.prepare_dataset`): `saber_mode`,
    `saber_budget`, `saber_base_tokens` (negative = unknown), `saber_penalize`; docs/budget-methods.md, "SABER".

    Args:
        penalty (`float`, *optional*, defaults to `0.5`):
            $p$, the largest fraction of a correct answer's reward lost for overshooting the budget (reached at
            $t \ge 2B$). Proposed default.
        guard_ratio (`float`, *optional*, defaults to `0.1`):
            $g$, the length-proportion guard threshold as a fraction of $\min(t_{\text{base}}, B)$. Proposed default.
        guard_cap (`float`, *optional*, defaults to `0.5`):
            Cap on the reward of a trace shorter than the guard threshold. Proposed default.
        no_think_max_tokens (`int`, *optional*, defaults to `16`):
            $T_{\text{nothink}}$, the thinking length a NoThink row may use (tokens). Proposed default.
        no_think_factor (`float`, *optional*, defaults to `0.5`):
            $f$, the multiplier of a NoThink row that thinks longer. Proposed default.
        length_unit (`str`, *optional*, defaults to `"tokens"`):
            `"tokens"` (needs `tokenizer` to find the `</think>` token boundary) or `"chars"`.
        tokenizer (*optional*): The policy tokenizer.

    Returns a picklable callable named `saber_reward`; `None` for rows whose gold cannot be parsed. Logs
    `trl_efficient/no_think_close_fraction` and warns once when no completion has `</think>` (`ThinkCloseMonitor`).

    >>> reward = get_saber_reward(length_unit="chars")
    >>> think = lambda n: "x" * (n - len("</think>")) + r"</think>\boxed{4}"   # n thinking characters
    >>> reward(completions=[think(100), think(150), think(300), think(9), think(40), r"x \boxed{4}"],
    ...        solution=["4"] * 6, saber_mode=["budget"] * 4 + ["nothink", "budget"],
    ...        saber_budget=[100, 100, 100, 100, 0, 100], saber_base_tokens=[90, 90, 90, 200, -1, 90],
    ...        saber_penalize=[True] * 6)
    [1.0, 0.75, 0.5, 0.5, 0.5, 0.0]
    """
    penalty = _check_number("penalty", penalty, 0.0, 1.0)
    guard_ratio = _check_number("guard_ratio", guard_ratio, 0.0, 1.0)
    guard_cap = _check_number("guard_cap", guard_cap)
    no_think_max_tokens = _check_positive_int("no_think_max_tokens", no_think_max_tokens)
    no_think_factor = _check_number("no_think_factor", no_think_factor, 0.0, 1.0)
    meter = LengthMeter(length_unit, "thinking", tokenizer)
    return _SaberReward(penalty, guard_ratio, guard_cap, no_think_max_tokens, no_think_factor, meter)


class _SaberReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "saber_reward"
    proposed_defaults = SABER_REWARD_PROPOSED_DEFAULTS  # printed in the model card

    def __init__(self, penalty, guard_ratio, guard_cap, no_think_max_tokens, no_think_factor, meter) -> None:
        self.penalty = penalty
        self.guard_ratio = guard_ratio
        self.guard_cap = guard_cap
        self.no_think_max_tokens = no_think_max_tokens
        self.no_think_factor = no_think_factor
        self.meter = meter
        self.think_close = ThinkCloseMonitor(self.__name__, "0")

    def score(self, correct: bool, thinking: int, mode: str, budget: int, base_tokens: int, penalize: bool) -> float:
        """Reward of a response whose thinking closed after `thinking` units (see the factory's formula)."""
        c = 1.0 if correct else 0.0
        if mode == "nothink":
            return c if thinking <= self.no_think_max_tokens else self.no_think_factor * c
        reward = c
        if mode == "budget" and penalize:
            reward = c * (1.0 - self.penalty * min(1.0, max(0.0, thinking - budget) / budget))
        # length-proportion guard against t_base and B (each only when known; B is infinite on unlimited rows)
        reference = min(base_tokens if base_tokens > 0 else math.inf, budget if mode == "budget" else math.inf)
        if reference < math.inf and thinking < self.guard_ratio * reference:
            reward = min(reward, self.guard_cap)
        return reward

    def __call__(
        self, completions: list, solution: list, completion_ids: list | None = None, **kwargs
    ) -> list[float | None]:
        n = len(completions)
        modes = _column(kwargs, "saber_mode", n)
        if modes is None:
            raise ValueError(
                "saber_reward needs the per-row SABER columns (saber_mode, saber_budget, saber_base_tokens, "
                "saber_penalize): build the dataset with trl_efficient.methods.saber.prepare_dataset."
            )
        budgets = _column(kwargs, "saber_budget", n) or [0] * n
        base = _column(kwargs, "saber_base_tokens", n) or [-1] * n
        penalize = _column(kwargs, "saber_penalize", n) or [True] * n
        ids_list = _ids_or_none(completion_ids, n)
        self.think_close([completion_text(c) for c in completions], kwargs.get("log_metric"))  # no </think>: 0
        rewards: list[float | None] = []
        for completion, gold, ids, mode, budget, base_tokens, pen in zip(
            completions, solution, ids_list, modes, budgets, base, penalize, strict=True
        ):
            if mode not in SABER_MODES:
                raise ValueError(f"saber_mode must be one of {SABER_MODES}, got {mode!r}.")
            if mode == "budget" and (isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0):
                raise ValueError(f"saber_budget must be a positive int on 'budget' rows, got {budget!r}.")
            correct = is_correct(completion, gold, answer_after_think=True, require_think_close=True)
            if correct is None:
                rewards.append(None)
                continue
            text = completion_text(completion)
            if THINK_CLOSE not in text:
                rewards.append(0.0)
                continue
            thinking = self.meter(text, ids)
            rewards.append(float(self.score(correct, thinking, mode, budget, int(base_tokens), bool(pen))))
        return rewards
