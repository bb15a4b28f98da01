"""The answer checker's fast paths give the reference path's verdicts (trl_efficient/core/answers.py, issue 20).

`integer_verdict` (an integer answer to an integer gold without math-verify) against math-verify's path
(`_region_matches`), and the cached `is_correct` against an uncached reference, on varied and malformed inputs.
"""

import itertools
import random

import pytest

from trl_efficient.core import answers
from trl_efficient.core.answers import (
    clear_answer_cache,
    extract_answer_region,
    integer_verdict,
    is_correct,
    normalize_answer,
)

PREFIXES = ["", "The final answer is 1272. ", "The answer is $5$. Then ", "$x = -3$ so ", "Answer: 13\n",
            "so 7 + 8 = 15, ", r"\[ \frac{1}{2} \] hence ", "<think>\\boxed{9}</think> "]  # fmt: skip
BOXES = [r"\boxed{72}", r"\boxed{ 72 }", r"\boxed{-5}", r"\boxed{0}", r"\boxed{072}", r"\boxed{1,272}", r"\boxed{1272}",
         r"\boxed{72.0}", r"\boxed{\frac{1}{2}}", r"\boxed{-0}", r"\boxed{72", r"\boxed 72", r"\fbox{72}", "",
         r"\boxed{72} \boxed{5}", r"\boxed{\text{72}}", r"\boxed{999999999999999}"]  # fmt: skip
SUFFIXES = ["", ".", r"\%", " dollars", " but the answer is 1272", r" \boxed", " $=1272$"]
GOLDS = ["72", "1272", "-5", "0", "5", "999999999999999", "72.0", "1/2", r"\frac{1}{2}"]


def _reference(region: str, gold: str) -> bool:
    # math-verify's path, as is_correct ran it before the fast path
    return answers._region_matches(normalize_answer(region), answers._gold_text(gold), None, None)


@pytest.mark.parametrize("gold", GOLDS)
def test_integer_fast_path_agrees_with_math_verify(gold):
    applied = 0
    for prefix, box, suffix in itertools.product(PREFIXES, BOXES, SUFFIXES):
        region = normalize_answer(prefix + box + suffix)
        fast = integer_verdict(region, answers._gold_text(gold))
        if fast is None:
            continue
        applied += 1
        assert fast == _reference(prefix + box + suffix, gold), (prefix, box, suffix, gold)
    # it applies only to integer golds; for them it must cover the common boxed-integer forms
    assert (applied > 0) == (gold in ("72", "1272", "-5", "0", "5", "999999999999999"))


def test_integer_fast_path_does_not_apply_to_ambiguous_regions():
    assert integer_verdict(r"\boxed{72} \boxed{5}", "5") is None  # two boxes: math-verify decides
    assert integer_verdict(r"\fbox{72} \boxed{5}", "5") is None
    assert integer_verdict(r"\boxed{1,272}", "1272") is None  # thousands separator
    assert integer_verdict(r"\boxed{72}", "72.0") is None and integer_verdict(r"\boxed{72", "72") is None
    assert integer_verdict(r"\boxed 72 but the answer is 1272", "1272") is None  # math-verify reads the anchor


def test_cached_is_correct_equals_the_uncached_reference():
    # varied and malformed completions: truncated boxes, no </think>, long garbage, conversational messages
    rng = random.Random(0)
    words = ["so", "wait", "the", "answer", "is", "1272", "$x$", r"\frac{1}{2}", "}", "{", r"\boxed{", "</think>"]
    completions, golds = [], []
    for i in range(300):
        filler = " ".join(rng.choice(words) for _ in range(rng.randint(0, 60)))
        box = rng.choice(BOXES)
        text = rng.choice([f"<think>{filler}</think> {box}", f"{filler} {box}", f"<think>{filler}", filler + box * 3,
                           "x" * rng.choice([0, 2500]) + box])  # fmt: skip
        completions.append([{"role": "assistant", "content": text}] if i % 3 == 0 else text)
        golds.append(rng.choice(GOLDS + ["#### 1,272", "", None, 72]))
    clear_answer_cache(golds=True)
    for flags in [(True, False), (False, False), (True, True)]:
        fast = [is_correct(c, g, *flags) for c, g in zip(completions, golds, strict=True)]
        again = [is_correct(c, g, *flags) for c, g in zip(completions, golds, strict=True)]  # from the caches
        reference = []
        for c, g in zip(completions, golds, strict=True):
            gold_text = answers._gold_text(g)
            if not gold_text or answers._parse_gold_text(gold_text, None) is None:
                reference.append(None)
                continue
            text = answers.completion_text(c)
            if flags[1] and "</think>" not in text:
                reference.append(False)
                continue
            region = normalize_answer(extract_answer_region(text, flags[0]))
            reference.append(bool(region.strip()) and answers._region_matches(region, gold_text, None, None))
        assert fast == again == reference
        assert any(v is True for v in fast) and any(v is False for v in fast) and any(v is None for v in fast)
