r"""
The one shared answer checker used by every correctness-dependent reward in `trl_efficient`.

It wraps math-verify (`parse`/`verify`, **gold first** in `verify`) the way TRL's `accuracy_reward` does, with
three additions: gold normalisation (GSM8K `#### 1,234`, MATH solutions with `\boxed{}`, bare numbers and LaTeX),
an answer region (the text after the last `</think>`, bounded to its last 2000 characters), and
`ExprExtractionConfig` with an anchor so that "The answer is 18." is accepted while stray numbers are not.

`is_correct` returns `None` **only** when the gold answer cannot be parsed: that row carries no signal, and every
reward built on it returns `None` for it (TRL then skips that reward for that row).

>>> is_correct(r"<think>maybe \boxed{3}</think> So the answer is \boxed{4}.", "#### 4")
True
>>> is_correct("The answer is 18.", "18"), is_correct("I got 18 apples.", "18"), is_correct("18", "")
(True, False, None)
"""

from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache
from typing import Any

from latex2sympy2_extended import NormalizationConfig
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from ..lengths import THINK_CLOSE, completion_text


__all__ = ["ANSWER_REGION_CHARS", "extract_answer_region", "has_boxed", "is_correct", "parse_gold"]

logger = logging.getLogger(__name__)

# The answer is looked for only in the last ANSWER_REGION_CHARS characters of the answer region. Final answers sit
# at the end, and math-verify's regex extraction plus sympy conversion can take seconds on pathological, very long
# garbage (degenerate RL rollouts of tens of thousands of characters); bounding the input keeps scoring fast.
ANSWER_REGION_CHARS = 2000

# Same timeouts as TRL's accuracy_reward (seconds). math-verify enforces them with signal.alarm, which only works in
# the main thread, so off the main thread they are disabled (as TRL does).
_PARSING_TIMEOUT = 10
_VERIFY_TIMEOUT = 5

_PRED_EXTRACTION = (
    LatexExtractionConfig(
        boxed_match_priority=0,  # a \boxed{} answer wins over other LaTeX in the region
        try_extract_without_anchor=False,  # require "\boxed{..}" or an anchor such as "The answer is $..$"
        normalization_config=NormalizationConfig(units=True),
    ),
    ExprExtractionConfig(try_extract_without_anchor=False),  # "The answer is 18." but not stray numbers
)

_GSM8K_MARK = "####"
_MATH_DELIMITERS = ("$", "\\(", "\\[")


def _timeouts() -> tuple[int | None, int | None]:
    if threading.current_thread() is threading.main_thread():
        return _PARSING_TIMEOUT, _VERIFY_TIMEOUT
    # Silence math-verify's "timeout is disabled" warnings when we disable them on purpose, as TRL does.
    logging.getLogger("math_verify.parser").setLevel(logging.ERROR)
    logging.getLogger("math_verify.grader").setLevel(logging.ERROR)
    return None, None


def _gold_text(gold: Any) -> str:
    if gold is None or isinstance(gold, bool):
        return ""
    if isinstance(gold, (int, float)):
        return repr(gold) if isinstance(gold, float) else str(gold)
    text = str(gold).strip()
    if _GSM8K_MARK in text:
        # GSM8K: "<rationale> #### 1,234" -> "1234" (thousands separators are not decimal commas here).
        text = text.rsplit(_GSM8K_MARK, 1)[1].strip().replace(",", "")
        return f"${text}$" if text else ""
    if not text or "\\boxed" in text or "\\fbox" in text or any(d in text for d in _MATH_DELIMITERS):
        # MATH solutions: math-verify extracts the last \boxed{} (or the delimited LaTeX) itself.
        return text
    # Bare numbers and LaTeX ("18", "\frac{1}{3}", "x^2+2x+1"): without delimiters math-verify rejects bare LaTeX
    # with implicit multiplication, so wrap them.
    return f"${text}$"


@lru_cache(maxsize=65536)
def _parse_gold_text(text: str, parsing_timeout: int | None) -> tuple | None:
    try:
        parsed = parse(text, parsing_timeout=parsing_timeout)
    except Exception:  # math-verify should not raise, but a bad gold must never crash a training step
        logger.debug("math-verify failed to parse gold %r", text, exc_info=True)
        return None
    # A result holding only strings (e.g. "$-$" -> ['-']) has no mathematical content to verify against.
    if not parsed or all(isinstance(item, str) for item in parsed):
        return None
    return tuple(parsed)


def parse_gold(gold: Any) -> list | None:
    r"""
    Parse a gold answer with math-verify, or return `None` when it cannot be parsed.

    Accepted forms: GSM8K answers (`"... #### 1,234"` -> 1234), MATH solutions (the last `\boxed{}` is used),
    bare numbers or LaTeX (`"18"`, `"\frac{1}{3}"`, `"0.5"`, also `int`/`float`), which are wrapped in `$...$`
    before parsing. `None`, empty strings and golds without mathematical content give `None`. Results are cached
    (golds repeat `G` times per step); do not mutate the returned list.

    >>> parse_gold("Natalia sold 48 + 24 = 72 clips. #### 1,272")[0]
    1272
    >>> parse_gold(r"So the total is $2+3=\boxed{5}$.")[0], parse_gold(r"\frac{1}{3}")[0], parse_gold(7)[0]
    (5, 1/3, 7)
    >>> parse_gold(""), parse_gold(None), parse_gold(r"\boxed{}")
    (None, None, None)
    """
    text = _gold_text(gold)
    if not text:
        return None
    parsed = _parse_gold_text(text, _timeouts()[0])
    return None if parsed is None else list(parsed)


def extract_answer_region(text: str, answer_after_think: bool = True) -> str:
    r"""
    Return the part of a completion in which the final answer is looked for.

    With `answer_after_think=True` and a `</think>` present, that is the text after the **last** `</think>`
    (answers written while thinking do not count); otherwise the whole text. Only the last
    `ANSWER_REGION_CHARS` (2000) characters are kept: final answers sit at the end, and parsing pathological
    long garbage could otherwise take seconds.

    >>> extract_answer_region(r"<think>\boxed{1}</think> \boxed{2}")
    ' \\boxed{2}'
    >>> len(extract_answer_region("x" * 5000))
    2000
    """
    text = text or ""
    if answer_after_think:
        index = text.rfind(THINK_CLOSE)
        if index >= 0:
            text = text[index + len(THINK_CLOSE) :]
    return text[-ANSWER_REGION_CHARS:]


def is_correct(
    completion: Any,
    gold: Any,
    answer_after_think: bool = True,
    require_think_close: bool = False,
) -> bool | None:
    r"""
    Check a completion's final answer against a gold answer with math-verify.

    Args:
        completion (`str` or conversational `list[dict]`):
            The completion.
        gold (`str`, `int`, `float` or `None`):
            The gold answer, in any form `parse_gold` accepts.
        answer_after_think (`bool`, *optional*, defaults to `True`):
            Look for the answer after the last `</think>` when there is one.
        require_think_close (`bool`, *optional*, defaults to `False`):
            A completion without `</think>` (unfinished thinking, e.g. truncated) is wrong.

    Returns:
        `None` iff the gold answer cannot be parsed; otherwise `True`/`False`. Empty or garbage text, a missing
        answer, or any math-verify error give `False`; this function never raises on bad text.

    The prediction must be boxed (`\boxed{}` is preferred) or anchored ("The answer is 18."); a bare number
    somewhere in the text does not count.

    >>> is_correct([{"role": "assistant", "content": r"\boxed{0.5}"}], "1/2")
    True
    >>> is_correct(r"\boxed{5}", "5", require_think_close=True)
    False
    """
    gold_text = _gold_text(gold)
    if not gold_text or _parse_gold_text(gold_text, _timeouts()[0]) is None:
        return None
    text = completion_text(completion)
    if require_think_close and THINK_CLOSE not in text:
        return False
    region = extract_answer_region(text, answer_after_think)
    if not region.strip():
        return False
    return _region_matches(region, gold_text, *_timeouts())


def clear_answer_cache() -> None:
    """Forget cached answer verdicts (benchmarks use it to time a step's first reward on new completions)."""
    _region_matches.cache_clear()


# Several rewards of one recipe (correctness, Kimi, ShorterBetter, ...) check the same completions in the same step:
# the verdict is cached per (answer region, gold), so math-verify parses each completion once.
@lru_cache(maxsize=8192)
def _region_matches(region: str, gold_text: str, parsing_timeout: int | None, verify_timeout: int | None) -> bool:
    gold_parsed = _parse_gold_text(gold_text, parsing_timeout)
    try:
        answer = parse(
            region,
            extraction_config=list(_PRED_EXTRACTION),
            extraction_mode="first_match",
            parsing_timeout=parsing_timeout,
        )
        if not answer:
            return False
        return bool(verify(list(gold_parsed), answer, timeout_seconds=verify_timeout))
    except Exception:
        logger.debug("math-verify failed on completion region %r", region[-200:], exc_info=True)
        return False


_BOXED = re.compile(r"\\(boxed|fbox)\s*\{")


def has_boxed(text: str) -> bool:
    r"""Whether `text` contains a `\boxed{` (or `\fbox{`).

    >>> has_boxed(r"so \boxed{3}"), has_boxed("so 3")
    (True, False)
    """
    return bool(_BOXED.search(text or ""))
