r"""
The one shared answer checker used by every correctness-dependent reward in `trl_efficient`.

It wraps math-verify (`parse`/`verify`, **gold first** in `verify`) the way TRL's `accuracy_reward` does, with
these additions: gold normalisation (GSM8K `#### 1,234`, MATH solutions with `\boxed{}`, bare numbers and LaTeX),
an answer region (the text after the last `</think>`, bounded to 2000 characters that hold its last `\boxed{}`
wherever it stands, else to its last 2000 characters),
`ExprExtractionConfig` with an anchor so that "The answer is 18." is accepted while stray numbers are not,
`normalize_answer` (escaped dollars, thin spaces in numbers, shorthand `\frac43`/`\sqrt2`, ...) applied to gold and
answer before math-verify, and a normalised-string comparison of the boxed answer with the gold when math-verify
says no (`answers_match_as_strings`).

Which answer counts (`extract_prediction`): the last box, else the last answer statement, else math-verify's weaker
anchors (issue 36 item 6; decided against math-verify 0.9 `math_verify/parser.py` `extract_target_from_pred`,
Qwen2.5-Math's `evaluation/parser.py` `extract_answer` and GSM8K's `grade_school_math/dataset.py` `extract_answer`;
the reasoning for each: docs/evaluation.md, "Which answer of a completion counts"):

- (a) an empty `\boxed{}` is no answer (dropped in `normalize_answer`, as math-verify's `any_match` skips it);
- (b) the last answer statement wins, whatever its wording ("final answer ... is X", "answer is X", "answer: X",
  "answer = X", "#### X"); the weakest anchor ("answer" + any value within 50 characters) only when no statement
  holds a value; a box beats every statement (`boxed_match_priority=0`);
- (c) a completion's "#### 27" is a statement, read as GSM8K's grader reads it (commas removed), only when the number
  ends its line; the last one counts (GSM8K's grader takes the first).

`is_correct` returns `None` **only** when the gold answer cannot be parsed, i.e. math-verify extracts nothing from it
(the test TRL's `accuracy_reward` applies): that row carries no signal, and every reward built on it returns `None`
for it (TRL then skips that reward for that row). A gold that math-verify reads only as a string (e.g.
`$$x = \frac{-1 \pm \sqrt{13}}{4}$$`) is scored: math-verify's `verify` compares strings with strings.

>>> is_correct(r"<think>maybe \boxed{3}</think> So the answer is \boxed{4}.", "#### 4")
True
>>> is_correct("The answer is 18.", "18"), is_correct("I got 18 apples.", "18"), is_correct("18", "")
(True, False, None)
>>> is_correct(r"Please put your final answer within \boxed{}. $\frac{54}{2} = 27$. The answer is 27.", "27")
True
>>> is_correct("My final answer is 24. Wait, 3 x 9 = 27. The answer is 27.", "27"), is_correct("#### 1,234", "1234")
(True, True)
"""

from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache
from typing import Any

from latex2sympy2_extended import NormalizationConfig
from latex2sympy2_extended.math_normalization import normalize_latex
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from .lengths import THINK_CLOSE, completion_text

__all__ = [
    "ANSWER_REGION_CHARS",
    "drop_empty_boxes",
    "extract_boxed",
    "extract_prediction",
    "answers_match_as_strings",
    "extract_answer_region",
    "has_boxed",
    "integer_verdict",
    "is_correct",
    "normalize_answer",
    "parse_gold",
]

logger = logging.getLogger(__name__)

# math-verify sees at most ANSWER_REGION_CHARS characters of the answer region: its regex extraction plus sympy
# conversion can take seconds on pathological, very long garbage (degenerate RL rollouts of tens of thousands of
# characters). The window starts at the region's last \boxed (found by one reverse scan) when that box stands
# further back (a long note may follow the answer), else it is the region's last ANSWER_REGION_CHARS characters.
ANSWER_REGION_CHARS = 2000

# Same timeouts as TRL's accuracy_reward (seconds). math-verify enforces them with signal.alarm, which only works in
# the main thread, so off the main thread they are disabled (as TRL does).
_PARSING_TIMEOUT = 10
_VERIFY_TIMEOUT = 5

# math-verify's own full LaTeX normalisation: the defaults of `LatexExtractionConfig()`, which `parse` uses for the
# gold. Spelled out because `NormalizationConfig(...)`'s dataclass defaults switch `malformed_operators` (`\frac43`,
# `\sqrt2`) and `nits` off: predictions would then be normalised less than golds.
_NORMALIZATION = NormalizationConfig(basic_latex=True, units=True, malformed_operators=True, nits=True, boxed="all")

_PRED_EXTRACTION = (
    LatexExtractionConfig(
        boxed_match_priority=0,  # a \boxed{} answer wins over other LaTeX in the region
        try_extract_without_anchor=False,  # require "\boxed{..}" or an anchor such as "The answer is $..$"
        normalization_config=_NORMALIZATION,
    ),
    ExprExtractionConfig(try_extract_without_anchor=False),  # "The answer is 18." but not stray numbers
)

_GSM8K_MARK = "####"
_MATH_DELIMITERS = ("$", "\\(", "\\[")
# One number in math-verify's own number grammar (math_verify 0.9.0, `parser.lazy_expr_regex`, `number_re` formats
# 1-4, without the percent suffix): thousands groups ("1,234.5", "1 234"), a decimal point or comma ("1.22",
# "1,22"), ".5", "123". math-verify reads such a gold bare, without math delimiters, as TRL's accuracy_reward passes it.
_THOUSANDS_NUMBER = re.compile(r"-?[1-9]\d{0,2}(?:[ ,]\d{3})+(?:\.\d+)?")  # format 1
_BARE_NUMBER = re.compile(rf"{_THOUSANDS_NUMBER.pattern}|-?\d+(?:[.,]\d+)?|\.\d+")
# Format 2 with a comma: math-verify's decimal comma ("1,22" -> 1.22), but also a list in MATH-style golds ("-2,1",
# the roots -2 and 1, which LaTeX reads as the set {-2, 1}).
_DECIMAL_COMMA = re.compile(r"-?\d+,\d+")


# Normalisation (before math-verify, on gold and answer alike)

_ESCAPED_DOLLAR = re.compile(r"\\\$")
# A spacing macro between digit groups is a thousands separator: 1\,000 -> 1000 (math-verify reads "1\,000" as 1*0).
_THOUSANDS_SPACE = re.compile(r"(?<=\d)\\[,;: ]\s*(?=\d{3}(?!\d))")
_SPACING = re.compile(r"\\(?:[,;:]|q?quad(?![a-zA-Z]))|~")
_DEGREES = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![a-zA-Z])|°")
# A period closing a number at the end of a box or of the text ("\boxed{5.}", "18.") is punctuation, not a decimal.
_TRAILING_PERIOD = re.compile(r"(?<=\d)\.(?=\s*(?:\}|$))")
# Operators whose arguments TeX takes as single tokens when not braced: \frac43 = \frac{4}{3}, \sqrt2 = \sqrt{2}.
_SHORTHAND_OPERATOR = re.compile(r"\\(?:[dtc]?frac|[dt]?binom|sqrt)(?![a-zA-Z])")
_CONTROL_WORD = re.compile(r"\\[a-zA-Z]+")
# An empty box (the instruction "put your final answer within \boxed{}" echoed), with math delimiters that hold only
# it, so that no bare "$$" is left to open display math: it holds no answer (issue 36 item 6a).
_EMPTY_BOX_CORE = r"\\(?:boxed|fbox)\s*\{\s*\}"
_EMPTY_BOX = re.compile(
    rf"\$\$\s*{_EMPTY_BOX_CORE}\s*\$\$|\$\s*{_EMPTY_BOX_CORE}\s*\$|\\\(\s*{_EMPTY_BOX_CORE}\s*\\\)"
    rf"|\\\[\s*{_EMPTY_BOX_CORE}\s*\\\]|{_EMPTY_BOX_CORE}"
)
_EMPTY_BOX_AT = re.compile(_EMPTY_BOX_CORE)


def _braced_arguments(text: str) -> str:
    # TeX's argument rule: an unbraced argument is one token, i.e. one character or one control word.
    out, pos = [], 0
    for match in _SHORTHAND_OPERATOR.finditer(text):
        if match.start() < pos:
            continue
        out.append(text[pos : match.end()])
        i = match.end()
        n_args = 1 if match.group().startswith("\\sqrt") else 2
        if n_args == 1:  # \sqrt[n]x: keep the optional index as written
            j = i
            while j < len(text) and text[j].isspace():
                j += 1
            if j < len(text) and text[j] == "[":
                close = text.find("]", j)
                if close < 0:
                    break
                out.append(text[i : close + 1])
                i = close + 1
        for _ in range(n_args):
            j = i
            while j < len(text) and text[j].isspace():
                j += 1
            if j >= len(text):
                break
            if text[j] == "{":  # braced: skip the balanced group
                depth, k = 0, j
                while k < len(text):
                    depth += {"{": 1, "}": -1}.get(text[k], 0)
                    if depth == 0:
                        break
                    k += 1
                out.append(text[i : k + 1])
                i = k + 1
                continue
            control = _CONTROL_WORD.match(text, j)
            if control:
                token = control.group()
            elif text[j].isalnum():
                token = text[j]
            else:  # "}", "$", an operator...: not an argument, leave the text as it is
                break
            out.append("{" + token + "}")
            i = j + len(token)
        pos = i
    out.append(text[pos:])
    return "".join(out)


def normalize_answer(text: str) -> str:
    r"""
    Normalise LaTeX that math-verify misreads, before it parses a gold answer or a completion.

    - escaped dollar signs (currency) are dropped: `\$18.90` -> `18.90`;
    - a spacing macro between digit groups is a thousands separator: `1\,000` -> `1000`; other `\,` `\;` `\:`
      `\quad` `~` become spaces;
    - degree signs are dropped: `90^\circ`, `90^{\circ}`, `90°` -> `90`;
    - a period after a number at the end of a box or of the text is punctuation: `\boxed{5.}` -> `\boxed{5}`;
    - an empty box, `\boxed{}` (or `\fbox{}`, spaces inside allowed), is dropped with math delimiters that hold only
      it: it holds no answer, and a model that echoes the instruction "put your final answer within \boxed{}" has
      not answered with it (issue 36 item 6a, see the module docstring);
    - unbraced arguments of `\frac`, `\dfrac`, `\tfrac`, `\binom`, `\sqrt` are braced by TeX's rule (one
      character or one control word each): `\frac43` -> `\frac{4}{3}`, `\frac{270}7` -> `\frac{270}{7}`,
      `11\sqrt2` -> `11\sqrt{2}`, `\frac\pi2` -> `\frac{\pi}{2}`.

    Everything else (`\dfrac` -> `\frac`, `\left`, `\!`, `\text{ degrees}` and other units, percentages) is left to
    math-verify's own normalisation.

    >>> normalize_answer(r"\$32,\!348"), normalize_answer(r"1\,000"), normalize_answer(r"\boxed{90^\circ.}")
    ('32,\\!348', '1000', '\\boxed{90}')
    >>> normalize_answer(r"\frac43 + \frac 59 - 11\sqrt2 + \frac{270}7 + \sqrt[3]x")
    '\\frac{4}{3} + \\frac{5}{9} - 11\\sqrt{2} + \\frac{270}{7} + \\sqrt[3]{x}'
    >>> normalize_answer(r"put your final answer within $\boxed{}$. So \boxed{27}.")
    'put your final answer within . So \\boxed{27}.'
    """
    text = _ESCAPED_DOLLAR.sub("", text or "")
    text = _THOUSANDS_SPACE.sub("", text)
    text = _SPACING.sub(" ", text)
    text = _EMPTY_BOX.sub("", text)  # after the spacing macros: "\boxed{\,}" is empty too
    text = _DEGREES.sub("", text)
    text = _TRAILING_PERIOD.sub("", text)
    return _braced_arguments(text)


def _timeouts() -> tuple[int | None, int | None]:
    if threading.current_thread() is threading.main_thread():
        return _PARSING_TIMEOUT, _VERIFY_TIMEOUT
    # Silence math-verify's "timeout is disabled" warnings when we disable them on purpose, as TRL does.
    logging.getLogger("math_verify.parser").setLevel(logging.ERROR)
    logging.getLogger("math_verify.grader").setLevel(logging.ERROR)
    return None, None


def _gold_text(gold: Any) -> str:
    # The gold as math-verify is given it, before any `$..$` wrapping (see _parse_gold_text).
    if gold is None or isinstance(gold, bool):
        return ""
    if isinstance(gold, (int, float)):
        return repr(gold) if isinstance(gold, float) else str(gold)
    return _gold_string(str(gold))


@lru_cache(maxsize=65536)
def _gold_string(gold: str) -> str:
    # Golds repeat G times per step and across steps: normalised once (bounded cache of a pure function).
    text = normalize_answer(gold).strip()  # before the delimiter test: "\$36" holds no math delimiter
    if _GSM8K_MARK in text:
        # GSM8K: "<rationale> #### 1,234" -> "1234" (thousands separators are not decimal commas here).
        return text.rsplit(_GSM8K_MARK, 1)[1].strip().replace(",", "")
    return text


@lru_cache(maxsize=65536)
def _parse_gold_text(text: str, parsing_timeout: int | None) -> tuple | None:
    # Unparseable only when math-verify extracts nothing (TRL's accuracy_reward test). A reading only as a string
    # (e.g. "$$x = \frac{-1 \pm \sqrt{13}}{4}$$", which latex2sympy cannot convert) is kept: `verify` compares strings.
    try:
        if "\\boxed" in text or "\\fbox" in text or any(d in text for d in _MATH_DELIMITERS):
            # MATH solutions: math-verify extracts the last \boxed{} (or the delimited LaTeX) itself.
            parsed = parse(text, parsing_timeout=parsing_timeout)
        elif _BARE_NUMBER.fullmatch(text):
            # A plain number is parsed bare, as plain math-verify (and TRL's accuracy_reward) parse it: its number
            # grammar reads "1,234" and "1 234" as 1234 and "1,22" as 1.22 (a decimal comma), where LaTeX reads
            # "$1 234$" as 235 and "$1,22$" as the set {1, 22}.
            parsed = parse(text, parsing_timeout=parsing_timeout)
            if _DECIMAL_COMMA.fullmatch(text) and not _THOUSANDS_NUMBER.fullmatch(text):
                # Ambiguous: "1,22" is 1.22 to math-verify, "-2,1" the list {-2, 1} in MATH. Both readings are
                # kept; `verify` accepts an answer that matches any gold item.
                parsed = parsed + parse(f"${text}$", parsing_timeout=parsing_timeout)
        else:
            # Other bare LaTeX ("\frac{1}{3}", "x^2+2x+1", "3\sqrt{2}"): bare, math-verify reads only a leading number
            # ("3\sqrt{2}" -> 3) or nothing, so it is wrapped. A reading only as a string is then the wrapping's, not
            # the gold's (bare, math-verify finds nothing in "unparseable ???"): unparseable, as before wrapping.
            parsed = parse(f"${text}$", parsing_timeout=parsing_timeout)
            if all(isinstance(item, str) for item in parsed):
                parsed = []
    except Exception:  # math-verify should not raise, but a bad gold must never crash a training step
        logger.debug("math-verify failed to parse gold %r", text, exc_info=True)
        return None
    return tuple(parsed) if parsed else None


def parse_gold(gold: Any) -> list | None:
    r"""
    Parse a gold answer with math-verify, or return `None` when it cannot be parsed.

    Accepted forms: GSM8K answers (`"... #### 1,234"` -> 1234), MATH solutions (the last `\boxed{}` is used),
    bare numbers (`"18"`, `"0.5"`, also `int`/`float`), parsed bare as plain math-verify parses them (`"1,234"` ->
    1234, `"1,22"` -> 1.22, a decimal comma), and other bare LaTeX (`"\frac{1}{3}"`), wrapped in `$...$` before
    parsing. A bare `a,b` that is not a thousands group keeps both readings, math-verify's decimal comma and
    LaTeX's list (`"1,22"` -> 1.22 and {1, 22}; MATH writes the roots -2 and 1 as `"-2,1"`): an answer matching
    either is correct. A gold that math-verify reads only as a string, as written, is kept (its `verify` compares
    strings; a string reading of bare text comes from the wrapping and is dropped). `None`, empty strings and golds
    from which math-verify extracts nothing give `None`. Results are cached (golds repeat `G` times per step); do
    not mutate the returned list.

    >>> parse_gold("Natalia sold 48 + 24 = 72 clips. #### 1,272")[0]
    1272
    >>> parse_gold(r"So the total is $2+3=\boxed{5}$.")[0], parse_gold(r"\frac{1}{3}")[0], parse_gold(7)[0]
    (5, 1/3, 7)
    >>> parse_gold("1,22"), parse_gold(r"$$x = \frac{-1 \pm \sqrt{13}}{4}$$")
    ([1.22000000000000, '1.22', {1, 22}, '1,22'], ['x = \\frac{-1 \\pm \\sqrt{13}}{4}'])
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
    (answers written while thinking do not count); otherwise the whole text. At most `ANSWER_REGION_CHARS` (2000)
    characters are kept, since parsing pathological long garbage could otherwise take seconds: the text's last
    non-empty `\boxed` (or `\fbox`; an empty `\boxed{}` holds no answer) and the 2000 characters from it when that
    box stands before the last 2000 characters (a long note may follow the final answer), else the last 2000
    characters. Finding the last box is one reverse scan per macro.

    >>> extract_answer_region(r"<think>\boxed{1}</think> \boxed{2}")
    ' \\boxed{2}'
    >>> len(extract_answer_region("x" * 5000)), extract_answer_region(r"\boxed{1} \boxed{2}" + "x" * 5000)[:11]
    (2000, '\\boxed{2}xx')
    """
    text = text or ""
    if answer_after_think:
        index = text.rfind(THINK_CLOSE)
        if index >= 0:
            text = text[index + len(THINK_CLOSE) :]
    if len(text) <= ANSWER_REGION_CHARS:
        return text
    box = _last_answer_box(text)
    if 0 <= box < len(text) - ANSWER_REGION_CHARS:
        return text[box : box + ANSWER_REGION_CHARS]
    return text[-ANSWER_REGION_CHARS:]


def _last_answer_box(text: str) -> int:
    # The start of the last \boxed or \fbox that is not empty (the last box extract_boxed reads once normalize_answer
    # has dropped the empty ones), or -1. Each macro's scan only moves backwards: linear even in a degenerate rollout
    # that repeats "\boxed{}" thousands of times.
    best = -1
    for macro in ("\\boxed", "\\fbox"):
        end = len(text)
        while (pos := text.rfind(macro, 0, end)) > best:
            if not _EMPTY_BOX_AT.match(text, pos):
                best = pos
                break
            end = pos
    return best


def is_correct(
    completion: Any, gold: Any, answer_after_think: bool = True, require_think_close: bool = False
) -> bool | None:
    r"""
    Check a completion's final answer against a gold answer with math-verify.

    Args:
        completion (`str` or conversational `list[dict]`): The completion.
        gold (`str`, `int`, `float` or `None`): The gold answer, in any form `parse_gold` accepts.
        answer_after_think (`bool`, *optional*, defaults to `True`):
            Look for the answer after the last `</think>` when there is one.
        require_think_close (`bool`, *optional*, defaults to `False`):
            A completion without `</think>` (unfinished thinking, e.g. truncated) is wrong.

    Returns:
        `None` iff the gold answer cannot be parsed; otherwise `True`/`False`. Empty or garbage text, a missing
        answer, or any math-verify error give `False`; this function never raises on bad text.

    The prediction must be boxed (the last non-empty `\boxed{}` wins) or stated ("The answer is 18.", "#### 18";
    the last statement wins, see `extract_prediction`); a bare number somewhere in the text does not count.

    >>> is_correct([{"role": "assistant", "content": r"\boxed{0.5}"}], "1/2")
    True
    >>> is_correct(r"\boxed{5}", "5", require_think_close=True)
    False
    """
    gold_text = _gold_text(gold)
    parsing_timeout, verify_timeout = _timeouts()
    if not gold_text or _parse_gold_text(gold_text, parsing_timeout) is None:
        return None
    text = completion_text(completion)
    return _text_verdict(text, gold_text, answer_after_think, require_think_close, parsing_timeout, verify_timeout)


# The verdict per whole completion text too: several rewards of a step pass the same completion objects, whose
# strings cache their own hash, so a later reward's check is one dictionary lookup (no scan for the answer region).
# Bounded to a few steps' completions (texts are kept alive by the cache: 4096 x at most a completion each).
@lru_cache(maxsize=4096)
def _text_verdict(
    text: str,
    gold_text: str,
    answer_after_think: bool,
    require_think_close: bool,
    parsing_timeout: int | None,
    verify_timeout: int | None,
) -> bool:
    if require_think_close and THINK_CLOSE not in text:
        return False
    return _region_verdict(extract_answer_region(text, answer_after_think), gold_text, parsing_timeout, verify_timeout)


def clear_answer_cache(golds: bool = False) -> None:
    """Forget cached answer verdicts (benchmarks use it to time a step's first reward on new completions), and with
    `golds=True` the parsed gold answers too (a fresh run)."""
    _text_verdict.cache_clear()
    _region_verdict.cache_clear()
    _region_matches.cache_clear()
    if golds:
        _parse_gold_text.cache_clear()
        _gold_string.cache_clear()


# Several rewards of one recipe (correctness, Kimi, ShorterBetter, ...) check the same completions in the same step:
# the verdict is cached per (raw answer region, gold), so a later reward of the step only finds the region (one
# reverse scan) and looks it up, and per (normalised region, gold), so math-verify parses each distinct answer once.
# Both caches are bounded (LRU) and hold pure functions of their keys: they never change a verdict. The raw regions
# are at most ANSWER_REGION_CHARS characters, so 16384 entries hold at most ~32M characters.
@lru_cache(maxsize=16384)
def _region_verdict(raw_region: str, gold_text: str, parsing_timeout: int | None, verify_timeout: int | None) -> bool:
    region = normalize_answer(raw_region)
    if not region.strip():
        return False
    fast = integer_verdict(region, gold_text)
    if fast is not None:
        return fast
    return _region_matches(region, gold_text, parsing_timeout, verify_timeout)


_PLAIN_INTEGER = re.compile(r"-?[1-9]\d{0,14}|0")


def integer_verdict(region: str, gold_text: str) -> bool | None:
    r"""
    The verdict on an integer answer to an integer gold without math-verify, or `None` when this fast path does not
    apply: the gold text is a plain integer (`-?[1-9]\d*` or `0`, at most 15 digits: GSM8K's golds), and the
    normalised answer region holds exactly one `\boxed`, written `\boxed{...}` (and no `\fbox`), whose content is
    such an integer. Then math-verify reads that box (a boxed answer wins over anchors and other LaTeX:
    `boxed_match_priority=0`) as the integer and compares it exactly, and the string fallback agrees, so the verdict
    is the integers' equality (`tests/rewards/test_answer_fast_paths.py` compares both paths on varied and malformed
    regions).

    >>> integer_verdict(r"The final answer is 1272. \boxed{72}", "72"), integer_verdict(r"\boxed{ -5 }", "5")
    (True, False)
    >>> integer_verdict(r"\boxed{1,272}", "1272"), integer_verdict(r"\boxed{2} \boxed{3}", "3")
    (None, None)
    """
    boxes = region.count("\\boxed")
    if not _PLAIN_INTEGER.fullmatch(gold_text) or boxes != 1 or region.count("\\boxed{") != 1 or "\\fbox" in region:
        return None  # the brace-less "\\boxed 72" is not a box to math-verify: an anchor may win
    answer = extract_boxed(region)
    if answer is None or not _PLAIN_INTEGER.fullmatch(answer):
        return None
    return int(answer) == int(gold_text)


@lru_cache(maxsize=8192)
def _region_matches(region: str, gold_text: str, parsing_timeout: int | None, verify_timeout: int | None) -> bool:
    gold_parsed = _parse_gold_text(gold_text, parsing_timeout)
    try:
        answer = extract_prediction(region, parsing_timeout)
        if answer and verify(list(gold_parsed), answer, timeout_seconds=verify_timeout):
            return True
    except Exception:
        logger.debug("math-verify failed on completion region %r", region[-200:], exc_info=True)
    return answers_match_as_strings(region, gold_text)


# An answer statement (issue 36 item 6b, 6c): math-verify 0.9's strong anchors ("final answer ... is", its priority 50
# in `parser.lazy_expr_regex`/`lazy_latex_regex`, and "answer:", its priority 100), "answer is" / "answer =" (which
# math-verify reads with its weakest anchor, "answer" then any value within 50 characters, priority 200), and GSM8K's
# "####". The pattern only marks where a statement starts; math-verify reads its value.
_STATEMENT = re.compile(r"(?i:final answer.{0,100}?\s+is\b|answer\s*(?:is\b|:|=))|####")
# Where the next anchor starts: a statement's text ends there, so math-verify sees one anchor in it.
_NEXT_ANCHOR = re.compile(r"(?i:answer)|####")
# GSM8K's own answer pattern (openai/grade-school-math, `grade_school_math/dataset.py`,
# `ANS_RE = r"#### (\-?[0-9\.\,]+)"`), with any spacing after "####", ending on a digit (a full stop after the number
# is punctuation) and ending its line, as every GSM8K gold does, so that a markdown heading "#### 1. Multiply" is no
# answer. Commas are removed as GSM8K's `extract_answer` and our gold side (`_gold_string`) remove them.
_GSM8K_ANSWER = re.compile(r"####[ \t]*(-?[0-9.,]*[0-9])\.?[ \t]*(?:\n|$)")
# How many of the last statements are tried, last first, when math-verify reads no value in a later one ("the answer
# is below"): a bound on math-verify calls per region, which a degenerate rollout repeating "answer:" would inflate.
_STATEMENTS_TRIED = 4


def extract_prediction(region: str, parsing_timeout: int | None = None) -> list:
    r"""
    math-verify's reading of the final answer in a normalised answer region (`normalize_answer` of
    `extract_answer_region`), `[]` when there is none. Three tiers, each the **last** of its kind:

    1. a region with a `\boxed{` (math-verify's box pattern) is read by math-verify with the box first
       (`boxed_match_priority=0`, `extraction_mode="first_match"`, as TRL's `accuracy_reward`): the last box wins;
    2. else the last answer statement whose value math-verify reads: "final answer ... is X", "the answer is X",
       "answer: X", "answer = X", or GSM8K's "#### X" (read as GSM8K's grader reads it, commas removed), each read on
       its own text up to the next anchor, the last one first (up to `_STATEMENTS_TRIED` of them);
    3. else math-verify on the whole region with anchors required ("answer ... X"), as before.

    A later statement beats an earlier one whatever their wording (issue 36 item 6b: math-verify ranks an earlier
    "final answer" above a later "The answer is 27."), and "#### 27" counts (item 6c); see the module docstring.

    >>> extract_prediction("The final answer is 24. Wait, 3 x 9 = 27. The answer is 27.")
    [27, '27']
    >>> extract_prediction("3 x 9 = 27\n#### 27"), extract_prediction("I bought 18 apples.")
    ([27, '27'], [])
    """
    if "\\boxed{" not in region:
        statements = list(_STATEMENT.finditer(region))[-_STATEMENTS_TRIED:]
        for statement in reversed(statements):
            following = _NEXT_ANCHOR.search(region, statement.end())
            text = region[statement.start() : following.start() if following else len(region)]
            if text.startswith("####"):
                number = _GSM8K_ANSWER.match(text)
                answer = parse(number.group(1).replace(",", ""), parsing_timeout=parsing_timeout) if number else []
            else:
                answer = _parse_anchored(text, parsing_timeout)
            if answer:
                return answer
    return _parse_anchored(region, parsing_timeout)


def _parse_anchored(text: str, parsing_timeout: int | None) -> list:
    return parse(
        text, extraction_config=list(_PRED_EXTRACTION), extraction_mode="first_match", parsing_timeout=parsing_timeout
    )


_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_WHITESPACE = re.compile(r"\s+")


def _canonical_string(answer: str) -> str:
    # The answer normalised by `normalize_answer` and by math-verify's own LaTeX normalisation (units, \left, \dfrac,
    # malformed operators), then spelled without text wrappers, whitespace, enclosing dollars or a final period.
    text = normalize_latex(normalize_answer(answer), _STRING_NORMALIZATION)
    text = _WHITESPACE.sub("", _TEXT_WRAPPER.sub(r"\1", text))
    return text.strip("$").rstrip(".")


_STRING_NORMALIZATION = NormalizationConfig(
    basic_latex=True, units=True, malformed_operators=True, nits=True, boxed="none"
)


def answers_match_as_strings(region: str, gold: str) -> bool:
    r"""
    Fallback used when math-verify does not accept an answer: the last `\boxed{}` of the answer region equals the
    gold answer as strings once both are normalised (`normalize_answer`, math-verify's LaTeX normalisation, text
    wrappers such as `\text{..}` unwrapped, whitespace, enclosing `$` and a final period removed).

    The gold is the last `\boxed{}` of a solution, else the whole gold text. Only boxed answers count. Beyond what
    those normalisations drop (spacing, wrappers, units, as math-verify itself does), the comparison is exact: case,
    order and every symbol must agree.

    >>> answers_match_as_strings(r"so \boxed{\textbf{Evelyn}}.", r"\text{Evelyn}")
    True
    >>> answers_match_as_strings(r"\boxed{\frac43}", r"\frac{3}{4}"), answers_match_as_strings("The answer is 5", "5")
    (False, False)
    """

    answer = extract_boxed(drop_empty_boxes(region))  # an echoed empty box hides no earlier box
    if answer is None:
        return False
    gold_answer = extract_boxed(gold) if has_boxed(gold) else gold
    if gold_answer is None:
        return False
    try:
        gold_string = _canonical_string(gold_answer)
        return bool(gold_string) and _canonical_string(answer) == gold_string
    except Exception:  # latex2sympy's normaliser should not raise, but a bad completion must never crash a step
        logger.debug("string normalisation failed on %r", answer[-200:], exc_info=True)
        return False


_BOXED = re.compile(r"\\(boxed|fbox)\s*\{")


def drop_empty_boxes(text: str) -> str:
    r"""`text` without its empty boxes (`\boxed{}`, `\fbox{ }`, with math delimiters that hold only them), as
    `normalize_answer` drops them: an echoed instruction "within \boxed{}" is no answer (module docstring, (a)).

    >>> drop_empty_boxes(r"within $\boxed{}$. So \boxed{(b)}.")
    'within . So \\boxed{(b)}.'
    """
    return _EMPTY_BOX.sub("", text or "")


def has_boxed(text: str) -> bool:
    r"""Whether `text` contains a `\boxed{` (or `\fbox{`).

    >>> has_boxed(r"so \boxed{3}"), has_boxed("so 3")
    (True, False)
    """
    return bool(_BOXED.search(text or ""))


_BOX_RE = re.compile(r"\\(?:boxed|fbox)")


def extract_boxed(text: str | None) -> str | None:
    r"""
    Content of the last `\boxed{...}` (or `\fbox{...}`) in `text`, with nested braces.

    Only the last box is considered: if it is unbalanced (a truncated completion), the result is `None` rather than
    an earlier, intermediate box. Escaped braces `\{` and `\}` do not count for nesting. The brace-less form
    `\boxed 5` is also read (up to the next space or `$`).

    Args:
        text (`str` or `None`): A solution or completion.

    Returns:
        `str` or `None`: the box content (stripped; `""` for an empty box), or `None` when there is no box or the
        last one is unbalanced.

    >>> extract_boxed(r"so $x = \boxed{\frac{1}{2}}$ and then \boxed{\sqrt{\frac{a}{b}}}.")
    '\\sqrt{\\frac{a}{b}}'
    >>> extract_boxed(r"the set is \boxed{\{1, 2\}}")
    '\\{1, 2\\}'
    >>> [extract_boxed(t) for t in [r"\fbox{7}", r"answer: \boxed 5$", r"\boxed{12", "42"]]
    ['7', '5', None, None]
    """
    if not text:
        return None
    matches = list(_BOX_RE.finditer(text))
    if not matches:
        return None
    return _read_box_argument(text, matches[-1].end())


def _read_box_argument(text: str, pos: int) -> str | None:
    if pos < len(text) and text[pos] == "{":
        depth, i = 0, pos
        while i < len(text):
            ch = text[i]
            if ch == "\\":  # skip the escaped character: \{ and \} are literal braces, \\ is a line break
                i += 2
                continue
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[pos + 1 : i].strip()
            i += 1
        return None  # unbalanced, e.g. a truncated completion
    if pos < len(text) and text[pos].isspace():  # "\boxed 5": plain-TeX argument without braces
        token = re.match(r"\s*([^\s$]+)", text[pos:])
        return token.group(1) if token else None
    return None  # end of text, or another macro such as \boxedsomething
