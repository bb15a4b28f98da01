r"""
GRPO-LEAD reward (Johns Hopkins, arXiv 2504.09696, EMNLP 2025; methods.md §15): a length-dependent accuracy reward
with an explicit wrong-answer penalty, scored on **whole groups** (the shaping of a correct answer uses the lengths of
the group's other correct answers, so the reward gathers rows across processes with `gather_rows`, like the Kimi and
ShorterBetter rewards).

Outcome of each completion (`lead_outcome`, after `aeroplanepaper/GRPO-LEAD`, `deepscaler/rewards/math_reward.py`):
`"format"` when there is no `</think>` or no `\boxed{}` answer after it, `"degenerate"` when such a format failure
is also degenerate text (`is_degenerate`), else `"correct"` or `"wrong"` by math-verify.

Reward (`main_ppo.py`, `RewardManager.get_reweight_rewards`), per group of `G`:

$$ R_i = \begin{cases} \exp(-\alpha z_i), \; z_i = \frac{L_i - \mu_c}{\sigma_c + 10^{-6}} & \text{correct} \\
-1 & \text{wrong} \\ -1 \;(\text{repository: } 0) & \text{format failure} \\ -2 & \text{degenerate} \end{cases} $$

with $\mu_c, \sigma_c$ the mean and sample std of the correct lengths of the group ($\sigma_c = 1$ when at most one
is correct). The difficulty-aware advantage reweighting is the `"grpo_lead"` estimator
(`trl_efficient.methods.lead`); in a plain TRL `GRPOTrainer` this reward still works (pass `num_generations`).
"""

from __future__ import annotations

import math
from typing import Any

from ..core.answers import extract_answer_region, has_boxed, is_correct, parse_gold
from ..core.checks import check_number as _check_number
from ..core.lengths import THINK_CLOSE, LengthMeter, completion_text
from .group import gather_rows, resolve_group_size

__all__ = ["LEAD_OUTCOMES", "get_lead_reward", "is_degenerate", "lead_outcome"]

LEAD_OUTCOMES = ("correct", "wrong", "format", "degenerate")


def is_degenerate(text: str, min_repeats: int = 10, max_ngram: int = 30, max_word_chars: int = 120) -> bool:
    """GRPO-LEAD's degenerate-output test: some n-gram of whitespace-separated words (n <= `max_ngram`) repeats at
    least `min_repeats` times in a row when the words are cut into consecutive chunks of n (as the repository's
    `max_continuous_ngram`), or some "word" has at least `max_word_chars` characters.

    >>> is_degenerate("so " * 10), is_degenerate("so " * 9), is_degenerate("x" * 120), is_degenerate("a b " * 10)
    (True, False, True, True)
    """
    words = (text or "").split()
    if any(len(w) >= max_word_chars for w in words):
        return True
    for n in range(1, max_ngram + 1):
        if len(words) < n * min_repeats:
            break
        chunks = [tuple(words[i : i + n]) for i in range(0, len(words) - n + 1, n)]
        run = 1
        for prev, cur in zip(chunks, chunks[1:], strict=False):
            run = run + 1 if cur == prev else 1
            if run >= min_repeats:
                return True
    return False


def lead_outcome(completion: Any, gold: Any) -> str | None:
    r"""`"correct"`, `"wrong"`, `"format"`, `"degenerate"`, or `None` when the gold answer cannot be parsed.

    >>> lead_outcome(r"a</think>\boxed{3}", "3"), lead_outcome(r"a</think>\boxed{4}", "3"), lead_outcome("a", "3")
    ('correct', 'wrong', 'format')
    >>> lead_outcome("go " * 12, "3"), lead_outcome(r"a</think>\boxed{3}", "")
    ('degenerate', None)
    """
    if parse_gold(gold) is None:
        return None
    text = completion_text(completion)
    if THINK_CLOSE not in text or not has_boxed(extract_answer_region(text)):
        return "degenerate" if is_degenerate(text) else "format"
    return "correct" if is_correct(text, gold, answer_after_think=True, require_think_close=True) else "wrong"


def get_lead_reward(
    num_generations: int | None = None,
    alpha: float = 0.05,
    wrong_reward: float = -1.0,
    format_failure_reward: float = -1.0,
    degenerate_reward: float = -2.0,
    length_gate: int | None = None,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _LeadReward:
    r"""
    GRPO-LEAD's length-dependent accuracy reward with wrong-answer penalty (module docstring), on whole groups.

    Args:
        num_generations (`int`, *optional*):
            Group size `G`. Leave `None` under `EfficientGRPOTrainer` (it passes a `group_size` column).
        alpha (`float`, *optional*, defaults to `0.05`):
            Length-shaping strength (repository value; TRL PR #6222 proposes 0.5).
        wrong_reward (`float`, *optional*, defaults to `-1.0`): Reward of a well-formatted wrong answer.
        format_failure_reward (`float`, *optional*, defaults to `-1.0`):
            Reward of a format failure (no `</think>` or no boxed answer, e.g. truncated while thinking). **Proposed
            default** -1 so that not answering never beats a wrong answer; the repository maps it to 0.
        degenerate_reward (`float`, *optional*, defaults to `-2.0`):
            Reward of a degenerate format failure (repository value, code only).
        length_gate (`int`, *optional*):
            The repository's code-only gate: skip the shaping (correct answers get 1.0) for a group whose 3 shortest
            completions average at most this many length units. `None` (default, proposed) shapes every group.
        length_unit, length_scope, tokenizer:
            See `trl_efficient.core.lengths.LengthMeter` (tokens of the whole completion by default, as the repository).

    Returns a picklable callable named `lead_reward`; `None` for rows whose gold cannot be parsed.

    >>> reward = get_lead_reward(num_generations=4)
    >>> out = reward(completions=[r"a</think>\boxed{3}", r"a</think>\boxed{3}", r"a</think>\boxed{5}", "a"],
    ...              solution=["3"] * 4, completion_ids=[[0] * 10, [0] * 30, [0] * 5, [0] * 50])
    >>> [round(x, 4) for x in out]  # correct lengths 10, 30: mean 20, std 14.142 -> z = -/+0.7071
    [1.036, 0.9653, -1.0, -1.0]
    """
    if num_generations is not None and (
        isinstance(num_generations, bool) or not isinstance(num_generations, int) or num_generations < 1
    ):
        raise ValueError(f"num_generations must be a positive int or None, got {num_generations!r}.")
    _check_number("alpha", alpha, 0.0)
    for name, value in (
        ("wrong_reward", wrong_reward),
        ("format_failure_reward", format_failure_reward),
        ("degenerate_reward", degenerate_reward),
    ):
        _check_number(name, value)
    if length_gate is not None:
        _check_number("length_gate", length_gate, 0)
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _LeadReward(
        num_generations,
        float(alpha),
        float(wrong_reward),
        float(format_failure_reward),
        float(degenerate_reward),
        length_gate,
        meter,
    )


class _LeadReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "lead_reward"
    proposed_defaults = ("GRPO-LEAD format failure -> -1 (repository: 0)", "GRPO-LEAD 4000-token shaping gate off")

    def __init__(
        self, num_generations, alpha, wrong_reward, format_failure_reward, degenerate_reward, length_gate, meter
    ) -> None:
        self.num_generations = num_generations
        self.alpha = alpha
        self.values = {"wrong": wrong_reward, "format": format_failure_reward, "degenerate": degenerate_reward}
        self.length_gate = length_gate
        self.meter = meter

    def score_group(self, rows: list[tuple[str | None, int]]) -> list[float | None]:
        """Rewards of one group from `(outcome, length)` pairs."""
        correct = [length for outcome, length in rows if outcome == "correct"]
        shape = True
        if self.length_gate is not None:
            shortest = sorted(length for _, length in rows)[:3]
            shape = sum(shortest) / len(shortest) > self.length_gate
        mean = sum(correct) / len(correct) if correct else 0.0
        std = 1.0
        if len(correct) > 1:
            std = math.sqrt(sum((x - mean) ** 2 for x in correct) / (len(correct) - 1))
        rewards: list[float | None] = []
        for outcome, length in rows:
            if outcome is None:
                rewards.append(None)
            elif outcome == "correct":
                rewards.append(math.exp(-self.alpha * (length - mean) / (std + 1e-6)) if shape else 1.0)
            else:
                rewards.append(self.values[outcome])
        return rewards

    def __call__(
        self, completions: list, solution: list, completion_ids: list | None = None, **kwargs
    ) -> list[float | None]:
        n = len(completions)
        group_size = resolve_group_size(self.num_generations, kwargs, "get_lead_reward()")
        ids_list = [None] * n if completion_ids is None else completion_ids
        local = [
            (lead_outcome(completion, gold), self.meter(completion_text(completion), ids))
            for completion, gold, ids in zip(completions, solution, ids_list, strict=True)
        ]
        rows, offset = gather_rows(local)  # collective: every rank reaches it
        if len(rows) % group_size != 0:
            raise ValueError(
                f"lead_reward got {len(rows)} rows in total (all processes), which is not a multiple of the group size "
                f"{group_size}: it needs every rollout of each prompt, consecutive."
            )
        rewards: list[float | None] = []
        for start in range(0, len(rows), group_size):
            rewards.extend(self.score_group(rows[start : start + group_size]))
        return rewards[offset : offset + n]
