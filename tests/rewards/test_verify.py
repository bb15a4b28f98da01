"""Tests for the shared answer checker (trl_efficient/rewards/_verify.py); table from offline-testing.md §14."""

import threading
import time

import pytest

from trl_efficient.rewards._verify import (
    ANSWER_REGION_CHARS,
    extract_answer_region,
    has_boxed,
    is_correct,
    parse_gold,
)


MATH_SOLUTION = r"We have $x = 2$ and $y = 3$, so the total is $2 + 3 = \boxed{5}$."
GSM8K_SOLUTION = "She sells 1,000 + 234 = 1,234 clips.\n#### 1,234"


class TestIsCorrectTable:
    @pytest.mark.parametrize(
        ("gold", "completion"),
        [
            (r"\frac{1}{3}", r"\boxed{\frac{2}{6}}"),  # equivalent fractions
            ("18", "The answer is 18."),  # anchored plain answer, no box
            ("18", r"\boxed{18}"),
            ("1/2", r"\boxed{0.5}"),  # 1/2 == 0.5
            ("#### 72", r"\boxed{72}"),  # GSM8K format
            (GSM8K_SOLUTION, r"\boxed{1234}"),  # GSM8K gold with thousands separator
            (MATH_SOLUTION, r"The sum is \boxed{5}."),  # MATH solution: its last \boxed{} is the gold
            (r"(3, \frac{\pi}{2})", r"\boxed{(3, \frac{\pi}{2})}"),  # tuples
            ("10", r"\boxed{10\%}"),  # percent normalisation
            ("x^2+2x+1", r"\boxed{x^2+2x+1}"),  # bare LaTeX gold (wrapped in $...$ before parsing)
            (72, r"\boxed{72}"),  # int gold
            (0.5, r"\boxed{\frac{1}{2}}"),  # float gold
        ],
    )
    def test_matches(self, gold, completion):
        assert is_correct(completion, gold) is True

    @pytest.mark.parametrize(
        ("gold", "completion"),
        [
            (r"\frac{1}{3}", r"\boxed{\frac{1}{2}}"),
            ("18", "I bought 18 apples and 3 pears."),  # stray numbers are not answers
            ("18", "18"),  # nor is a bare number without an anchor
            ("#### 72", r"\boxed{27}"),
            (MATH_SOLUTION, r"\boxed{2}"),  # 2 appears in the solution, but the boxed gold is 5
        ],
    )
    def test_mismatches(self, gold, completion):
        assert is_correct(completion, gold) is False

    def test_conversational_completion(self):
        assert is_correct([{"role": "assistant", "content": r"\boxed{0.5}"}], "1/2") is True


class TestAnswerRegion:
    def test_answer_after_last_think_close_is_used(self):
        # the thinking part boxes 5, the final answer after </think> is 7
        text = r"<think>first guess \boxed{5}</think> Final: \boxed{7}"
        assert is_correct(text, "7") is True
        assert is_correct(text, "5") is False

    def test_last_of_several_think_closes(self):
        text = r"<think>a</think> \boxed{5} </think> \boxed{7}"
        assert extract_answer_region(text) == r" \boxed{7}"

    def test_without_think_close_whole_text_is_used(self):
        assert is_correct(r"<think>still thinking \boxed{5}", "5") is True

    def test_require_think_close(self):
        assert is_correct(r"<think>still thinking \boxed{5}", "5", require_think_close=True) is False
        assert is_correct(r"thinking</think>\boxed{5}", "5", require_think_close=True) is True

    def test_answer_after_think_false_reads_whole_text(self):
        assert extract_answer_region("a</think>b", answer_after_think=False) == "a</think>b"

    def test_region_is_bounded(self):
        region = extract_answer_region("y" * 100 + "x" * (ANSWER_REGION_CHARS + 10))
        assert region == "x" * ANSWER_REGION_CHARS

    def test_has_boxed(self):
        assert has_boxed(r"so \boxed{3}") and has_boxed(r"\fbox{3}") and not has_boxed("so 3")


class TestUnparseableGold:
    @pytest.mark.parametrize("gold", ["", "   ", None, r"\boxed{}", "$-$", "#### "])
    def test_none(self, gold):
        assert parse_gold(gold) is None
        assert is_correct(r"\boxed{1}", gold) is None

    def test_gold_parses(self):
        # GSM8K: "#### 1,234" -> 1234 ; MATH: last boxed -> 5
        assert parse_gold(GSM8K_SOLUTION)[0] == 1234
        assert parse_gold(MATH_SOLUTION)[0] == 5
        assert str(parse_gold(r"\frac{1}{3}")[0]) == "1/3"

    def test_gold_cache_returns_fresh_lists(self):
        first = parse_gold("18")
        first.append("mutated")
        assert parse_gold("18") == parse_gold("18") and "mutated" not in parse_gold("18")


class TestBadCompletions:
    @pytest.mark.parametrize(
        "completion",
        ["", None, [], "   ", "asdf qwer", r"\boxed{", r"\boxed{}", "}}}{{{\\frac{", [{"role": "assistant"}]],
    )
    def test_false_never_raises(self, completion):
        assert is_correct(completion, "5") is False

    def test_huge_completion_is_fast(self):
        garbage = ("1+ (x^ \\frac{ 9 " * 4000)[:50_000]
        start = time.perf_counter()
        assert is_correct(garbage, "5") is False
        assert is_correct(garbage + r" \boxed{5}", "5") is True  # the answer at the end is still found
        assert time.perf_counter() - start < 5.0

    def test_works_off_the_main_thread(self):
        # math-verify's signal-based timeouts only work in the main thread; off it they are disabled
        results = []
        thread = threading.Thread(target=lambda: results.append(is_correct(r"\boxed{\frac{2}{6}}", r"\frac{1}{3}")))
        thread.start()
        thread.join(timeout=30)
        assert results == [True]
