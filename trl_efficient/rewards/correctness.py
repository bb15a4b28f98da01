r"""
Correctness and format rewards on top of the shared checker in `trl_efficient/core/answers.py`.

Unlike TRL's `accuracy_reward` and `think_format_reward`, these accept both plain-string and conversational
completions.
"""

from __future__ import annotations

from typing import Any

from ..core.answers import is_correct
from ..core.lengths import THINK_CLOSE, completion_text

__all__ = ["correctness_reward", "get_correctness_reward", "think_format_reward"]

_THINK_OPEN = "<think>"


def correctness_reward(completions: list, solution: list, **kwargs) -> list[float | None]:
    r"""
    Binary correctness of the final answer, checked with math-verify: the rule-based accuracy reward of
    DeepSeek-R1 (arXiv 2501.12948, §2.2.2).

    $$ r_i = \mathbb{1}[\text{answer}(o_i) \equiv \text{gold}] $$

    The answer is read after the last `</think>` when there is one (otherwise from the whole text) and must be
    boxed or anchored ("The answer is 18."). Gold and answer are normalised first (`normalize_answer`: escaped
    dollars, thin-space thousands, shorthand `\frac43`/`\sqrt2`, degrees), and a boxed answer equal to the gold as a
    normalised string counts when math-verify says no. Returns `None` for a row whose gold answer cannot be parsed
    (no signal; TRL skips the row for this reward). Use `get_correctness_reward` for other values or options.

    Args:
        completions (`list[str]` or `list[list[dict]]`): Plain or conversational completions.
        solution (`list`): Gold answers (GSM8K `#### n`, MATH solutions with `\boxed{}`, bare numbers or LaTeX).

    >>> correctness_reward(["<think>hm</think> \\boxed{42}", "The answer is 41.", "\\boxed{1}"], ["42", "42", ""])
    [1.0, 0.0, None]
    >>> correctness_reward([r"\boxed{\frac{4}{3}}", r"\boxed{36}", r"\boxed{\frac34}"],
    ...                    [r"\frac43", r"\$36", r"\frac43"])
    [1.0, 1.0, 0.0]
    """
    return _CorrectnessReward(answer_after_think=True, require_think_close=False)(completions, solution, **kwargs)


def get_correctness_reward(
    answer_after_think: bool = True,
    require_think_close: bool = False,
    correct_value: float = 1.0,
    wrong_value: float = 0.0,
) -> _CorrectnessReward:
    r"""
    Build a correctness reward with configurable values and answer-region options.

    $$ r_i = \begin{cases} \texttt{correct\_value} & \text{answer}(o_i) \equiv \text{gold} \\
    \texttt{wrong\_value} & \text{otherwise} \end{cases} $$

    Args:
        answer_after_think (`bool`, *optional*, defaults to `True`):
            Read the answer after the last `</think>` when there is one.
        require_think_close (`bool`, *optional*, defaults to `False`):
            A completion without `</think>` (e.g. truncated while thinking) is wrong.
        correct_value (`float`, *optional*, defaults to `1.0`): Reward of a correct completion.
        wrong_value (`float`, *optional*, defaults to `0.0`): Reward of a wrong, empty or unformatted completion.

    Returns a picklable callable named `correctness_reward`. It gives `None` where the gold cannot be parsed.

    >>> reward = get_correctness_reward(require_think_close=True, wrong_value=-1.0)
    >>> reward(completions=["<think>x</think>\\boxed{2}", "\\boxed{2}"], solution=["2", "2"])
    [1.0, -1.0]
    """
    for name, value in (("answer_after_think", answer_after_think), ("require_think_close", require_think_close)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be a bool, got {value!r}.")
    for name, value in (("correct_value", correct_value), ("wrong_value", wrong_value)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{name} must be a number, got {value!r}.")
    return _CorrectnessReward(answer_after_think, require_think_close, float(correct_value), float(wrong_value))


class _CorrectnessReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "correctness_reward"  # stable metric key: rewards/correctness_reward/mean

    def __init__(
        self,
        answer_after_think: bool = True,
        require_think_close: bool = False,
        correct_value: float = 1.0,
        wrong_value: float = 0.0,
    ) -> None:
        self.answer_after_think = answer_after_think
        self.require_think_close = require_think_close
        self.correct_value = correct_value
        self.wrong_value = wrong_value

    def __call__(self, completions: list, solution: list, **kwargs) -> list[float | None]:
        rewards: list[float | None] = []
        for completion, gold in zip(completions, solution, strict=True):
            correct = is_correct(completion, gold, self.answer_after_think, self.require_think_close)
            rewards.append(None if correct is None else (self.correct_value if correct else self.wrong_value))
        return rewards


def _think_format_ok(text: str) -> bool:
    if text.count(THINK_CLOSE) != 1:
        return False
    thinking, answer = text.split(THINK_CLOSE)
    thinking = thinking.strip()
    if thinking.startswith(_THINK_OPEN):
        thinking = thinking[len(_THINK_OPEN) :].strip()
    return bool(thinking) and _THINK_OPEN not in thinking and bool(answer.strip())


def think_format_reward(completions: list, **kwargs: Any) -> list[float]:
    r"""
    Thinking-format reward: 1.0 when the completion closes a non-empty thinking part with exactly one `</think>`
    and then gives a non-empty answer, else 0.0 (the format reward of DeepSeek-R1, arXiv 2501.12948, §2.2.2).

    $$ r_i = \mathbb{1}[\,o_i = [\texttt{<think>}]\,t\,\texttt{</think>}\,a,\ t \ne \varnothing,\ a \ne \varnothing,\
    \texttt{</think>} \notin t a\,] $$

    The opening `<think>` is optional because chat templates (R1-distill, Qwen3) and prefills often put it in the
    prompt; when present it must lead the completion (a second `<think>` fails). Whitespace-only parts count as
    empty. Unlike TRL's `think_format_reward`, this accepts plain strings and a template-opened `<think>`, and it
    requires an answer after the thinking. Never `None`.

    >>> think_format_reward(["<think>plan</think> 42", "plan</think> 42", "<think>plan 42", "</think> 42",
    ...                      [{"role": "assistant", "content": "plan</think>a</think>b"}]])
    [1.0, 1.0, 0.0, 0.0, 0.0]
    """
    return [1.0 if _think_format_ok(completion_text(completion)) else 0.0 for completion in completions]
