"""Tests for the shared answer checker (trl_efficient/core/answers.py); table from docs/testing.md §14."""

import threading
import time

import pytest

from trl_efficient.core.answers import (
    ANSWER_REGION_CHARS,
    answers_match_as_strings,
    extract_answer_region,
    has_boxed,
    is_correct,
    normalize_answer,
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

    def test_region_starts_at_a_last_box_before_the_final_window(self):
        # the last box (9 characters) stands 9 + 2991 = 3000 characters before the end: the window is the 2000
        # characters from it, the box and 1991 x
        text = r"\boxed{1} " + r"\boxed{2}" + "x" * 2991
        assert extract_answer_region(text) == r"\boxed{2}" + "x" * 1991
        # a box inside the final window: the last 2000 characters, as before
        text = r"\boxed{1}" + "x" * 3000 + r"\fbox{2}" + "y" * 100
        assert extract_answer_region(text) == text[-ANSWER_REGION_CHARS:]

    @pytest.mark.parametrize(("box", "expected"), [(r"\boxed{20 \%}", True), (r"\boxed{30 \%}", False)])
    def test_boxed_answer_followed_by_a_long_note(self, box, expected):
        # Issue 18 item 13a: a 4,420-character completion whose box stands 3,930 characters before the end (a long
        # note follows) used to be wrong whatever it boxed, the box lying outside the last 2,000 characters. The
        # note holds LaTeX and an anchored "the answer is 5": the box wins, as it does in a short answer.
        note = "Note: we used $x = 5$ and $y = 7$ along the way; the answer is 5 in the other unit. "
        prefix = "<think>" + "let me think. " * 30 + "</think> Putting it together, "
        text = prefix.ljust(490) + box + (note * 60)[: 3930 - len(box)]
        assert len(text) == 4420 and len(text) - text.index(box) == 3930
        assert is_correct(text, r"20\%") is expected
        assert is_correct(text, "5") is False

    def test_has_boxed(self):
        assert has_boxed(r"so \boxed{3}") and has_boxed(r"\fbox{3}") and not has_boxed("so 3")


class TestUnparseableGold:
    # bare "-" and "unparseable ???" read only as strings once wrapped in $..$, and plain math-verify finds nothing
    # in them: unparseable (unlike "$-$" as written, see test_string_only_gold_is_scored)
    @pytest.mark.parametrize("gold", ["", "   ", None, r"\boxed{}", "$$", "#### ", "-", "unparseable ???"])
    def test_none(self, gold):
        assert parse_gold(gold) is None
        assert is_correct(r"\boxed{1}", gold) is None

    def test_gold_parses(self):
        # GSM8K: "#### 1,234" -> 1234 ; MATH: last boxed -> 5
        assert parse_gold(GSM8K_SOLUTION)[0] == 1234
        assert parse_gold(MATH_SOLUTION)[0] == 5
        assert str(parse_gold(r"\frac{1}{3}")[0]) == "1/3"

    def test_string_only_gold_is_scored(self):
        # Issue 18 item 13c: math-verify reads this gold only as a string; it used to be dropped (None for every
        # completion). verify compares strings: the same string matches, any other answer is wrong.
        gold = r"$$x = \frac{1}{2}, x = \frac{-1 \pm \sqrt{13}}{4}$$"
        assert parse_gold(gold) == [r"x = \frac{1}{2}, x = \frac{-1 \pm \sqrt{13}}{4}"]
        assert is_correct(r"\boxed{x = \frac{1}{2}, x = \frac{-1 \pm \sqrt{13}}{4}}", gold) is True
        assert is_correct(r"\boxed{x = \frac{1}{2},\, x = \frac{-1 \pm \sqrt{13}}{4}}", gold) is True  # spacing
        assert is_correct(r"\boxed{x = \frac{1}{2}, x = \frac{-1 \pm \sqrt{14}}{4}}", gold) is False
        assert is_correct(r"\boxed{x = \frac{-1 \pm \sqrt{13}}{4}, x = \frac{1}{2}}", gold) is False  # order
        assert is_correct(r"\boxed{\frac{1}{2}}", gold) is False
        # "$-$" reads as the string "-" (it used to give None, as "without mathematical content")
        assert parse_gold("$-$") == ["-"]
        assert (is_correct(r"\boxed{1}", "$-$"), is_correct(r"\boxed{-}", "$-$")) == (False, True)

    def test_gold_cache_returns_fresh_lists(self):
        first = parse_gold("18")
        first.append("mutated")
        assert parse_gold("18") == parse_gold("18") and "mutated" not in parse_gold("18")


class TestBareNumberGold:
    """Issue 18 item 13b: a bare number gold is read as plain math-verify reads it, not wrapped in `$..$`."""

    @pytest.mark.parametrize(
        ("gold", "completion", "expected"),
        [
            ("1,22", r"\boxed{1.22}", True),  # math-verify's decimal comma (was the set {1, 22}: wrong)
            ("1,22", r"\boxed{1.23}", False),
            ("1,22", r"\boxed{122}", False),
            ("1,22", r"\boxed{22}", False),
            ("1,22", r"\boxed{1, 22}", True),  # the list reading is kept as well
            ("-2,1", r"\boxed{1, -2}", True),  # MATH-500's roots -2 and 1, in either order (a set)
            ("-2,1", r"\boxed{-2}", False),
            ("-2,1", r"\boxed{-2.1}", True),  # the other reading of the same gold: accepted by design
            ("1,234", r"\boxed{1234}", True),  # a thousands group, both readings agree
            ("1,234", r"\boxed{1.234}", False),
            ("1 234", r"\boxed{1234}", True),  # math-verify's space-separated thousands (LaTeX read "$1 234$" as 235)
            ("1 234", r"\boxed{235}", False),
            ("0.5", r"\boxed{\frac{1}{2}}", True),
        ],
    )
    def test_bare_numbers(self, gold, completion, expected):
        assert is_correct(completion, gold) is expected

    def test_gold_readings(self):
        # "1,22": 1.22 (math-verify's bare reading) and {1, 22} (LaTeX's); "1,234": 1234 only
        assert [str(item) for item in parse_gold("1,22")] == ["1.22000000000000", "1.22", "{1, 22}", "1,22"]
        assert parse_gold("1,234") == [1234, "1234"]


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
        assert is_correct(r"\boxed{5} " + garbage, "5") is True  # and so is a last box far from the end
        assert time.perf_counter() - start < 5.0

    def test_works_off_the_main_thread(self):
        # math-verify's signal-based timeouts only work in the main thread; off it they are disabled
        results = []
        thread = threading.Thread(target=lambda: results.append(is_correct(r"\boxed{\frac{2}{6}}", r"\frac{1}{3}")))
        thread.start()
        thread.join(timeout=30)
        assert results == [True]


class TestNormalisation:
    """Issue 8 (answer checker misjudges gold answers): escaped dollars, thin spaces, shorthand LaTeX, degrees."""

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (r"\$18.90", "18.90"),  # \$ is a currency sign, not a math delimiter
            (r"1\,000", "1000"),  # a thin space between digit groups is a thousands separator
            (r"1\,5", r"1 5"),  # ... but not before fewer than 3 digits: just a space
            (r"90^\circ", "90"),
            (r"90^{\circ}", "90"),
            (r"\boxed{5.}", r"\boxed{5}"),  # a final period after a number is punctuation
            ("0.5", "0.5"),  # a decimal point is not
            # TeX: an unbraced argument is one character or one control word
            (r"\frac43", r"\frac{4}{3}"),
            (r"\frac 59", r"\frac{5}{9}"),
            (r"\frac{270}7", r"\frac{270}{7}"),
            (r"\frac9{19}", r"\frac{9}{19}"),
            (r"\dfrac\pi2", r"\dfrac{\pi}{2}"),
            (r"\frac123", r"\frac{1}{2}3"),  # TeX reads \frac123 as (1/2)*3
            (r"11\sqrt2", r"11\sqrt{2}"),
            (r"\sqrt[3]x", r"\sqrt[3]{x}"),
            (r"\frac{1}{2} + \sqrt{3}", r"\frac{1}{2} + \sqrt{3}"),  # braced arguments unchanged
        ],
    )
    def test_normalize_answer(self, text, expected):
        assert normalize_answer(text) == expected

    @pytest.mark.parametrize(
        ("gold", "completion"),
        [
            (r"\$18.90", r"\boxed{18.9}"),  # 18.90 = 18.9
            ("18.90", r"\boxed{18.9}"),
            (r"\$36", r"\boxed{36}"),
            ("36", r"\boxed{\$36}"),
            (r"\$32,\!348", r"\boxed{32348}"),
            (r"\frac43", r"\boxed{\frac{4}{3}}"),
            (r"\frac 59", r"\boxed{\dfrac{5}{9}}"),
            (r"11\sqrt2", r"\boxed{11\sqrt{2}}"),
            (r"\frac{270}7\text{ degrees}", r"\boxed{\frac{270}{7}}"),  # the unit is dropped (math-verify units)
            ("1000", r"\boxed{1\,000}"),
            ("5", r"\boxed{5.}"),
            ("90", r"\boxed{90^\circ}"),
            (r"\frac{3}{2}", r"\boxed{\frac123}"),  # (1/2)*3 = 3/2 by TeX's argument rule
        ],
    )
    def test_equivalent_spellings_are_correct(self, gold, completion):
        assert is_correct(completion, gold) is True

    @pytest.mark.parametrize(
        ("gold", "completion"),
        [
            (r"\frac43", r"\boxed{\frac34}"),  # 4/3 != 3/4
            (r"\frac43", r"\boxed{\frac{4}{3}+1}"),
            (r"11\sqrt2", r"\boxed{11\sqrt{3}}"),
            (r"\$36", r"\boxed{37}"),
            (r"\$32,\!348", r"\boxed{32,349}"),
            (r"\$18.90", r"\boxed{18.09}"),
            ("1", r"\boxed{1\,000}"),  # 1000, not 1*000 or 1
            ("5", r"\boxed{5.5}"),
            (r"\frac 59", r"\boxed{\frac 95}"),
            (r"\frac{1}{23}", r"\boxed{\frac123}"),  # TeX: 3/2, not 1/23
        ],
    )
    def test_wrong_answers_stay_wrong(self, gold, completion):
        assert is_correct(completion, gold) is False

    def test_escaped_dollar_gold_is_parseable(self):
        # "\$" used to be taken for a math delimiter, so the gold was not wrapped and did not parse (None)
        assert [parse_gold(g)[0] for g in (r"\$36", r"\$32,\!348")] == [36, 32348]


class TestStringFallback:
    def test_boxed_strings_equal_after_normalisation(self):
        assert answers_match_as_strings(r"so \boxed{\textbf{Evelyn}}.", r"\text{Evelyn}") is True
        assert answers_match_as_strings(r"\boxed{ \left( 1,\, 2 \right) }", "$(1,2)$") is True
        assert answers_match_as_strings(r"\boxed{\frac43}", r"We get \boxed{\dfrac{4}{3}}.") is True  # gold's box

    def test_differences_beyond_spelling_fail(self):
        assert answers_match_as_strings(r"\boxed{\text{Evelyn}}", r"\text{Evan}") is False
        assert answers_match_as_strings(r"\boxed{\frac43}", r"\frac34") is False
        assert answers_match_as_strings(r"\boxed{x}", "X") is False  # case matters
        assert answers_match_as_strings("The answer is 5.", "5") is False  # only boxed answers
        assert answers_match_as_strings(r"\boxed{}", "") is False

    def test_is_correct_falls_back_when_math_verify_says_no(self, monkeypatch):
        import trl_efficient.core.answers as verify_module

        monkeypatch.setattr(verify_module, "verify", lambda *args, **kwargs: False)
        verify_module.clear_answer_cache()
        try:
            assert is_correct(r"\boxed{\frac43}", r"\frac{4}{3}") is True  # same string once normalised
            assert is_correct(r"\boxed{\frac{8}{6}}", r"\frac{4}{3}") is False  # equal value, different string
        finally:
            verify_module.clear_answer_cache()


# Issue 36 item 6: answers on real text. Completions in the style of SmolLM2-135M-Instruct's (markdown, \[..\] maths,
# the instruction echoed); each case failed before the decisions documented in trl_efficient/core/answers.py.
ECHO = "Please reason step by step, and put your final answer within \\boxed{}.\n\n"
WORKING = (
    "To find the total number of apples, we multiply the number of baskets by the apples in each basket:\n\n"
    "\\[ \\text{Total} = 3 \\times 9 = 27 \\]\n\n"
)


class TestEmptyBox:
    """(a) An empty `\\boxed{}` (the instruction echoed) is no answer: the last non-empty box, else the last
    statement, is read, as math-verify's own `any_match` reads on past a box it cannot read."""

    @pytest.mark.parametrize(
        ("completion", "gold", "expected"),
        [
            (ECHO + WORKING + "The answer is 27.", "27", True),  # was False: \boxed{.+} ran to \text{Total}'s }
            (ECHO + WORKING + "The answer is 27.", "3", False),
            (ECHO + WORKING + "So, the final answer is $27$.", "27", True),
            ("I will put the final answer within $\\boxed{}$.\n\n" + WORKING + "Answer: 27", "27", True),
            (WORKING + "\\boxed{27}\n\nI have put my final answer within \\boxed{}.", "27", True),  # echo after the box
            (WORKING + "\\boxed{27}\n\nI have put my final answer within \\boxed{ }.", "24", False),
            (ECHO + WORKING + "\\boxed{24}", "27", False),  # the non-empty box is read, not the working
            (ECHO + WORKING, "27", False),  # the echo alone answers nothing
        ],
    )
    def test_echoed_empty_box(self, completion, gold, expected):
        assert is_correct(completion, gold) is expected

    def test_normalisation_drops_empty_boxes_with_their_delimiters(self):
        text = r"within $\boxed{}$, \(\boxed{}\), \[ \boxed{\,} \] and \fbox{}; then \boxed{27} and $\boxed{x}$."
        # no "$$" left behind to open display maths; non-empty boxes kept
        assert normalize_answer(text) == r"within , ,  and ; then \boxed{27} and $\boxed{x}$."

    def test_region_window_starts_at_the_last_non_empty_box(self):
        # the answer box stands 3,000 characters before the end and an echoed empty box follows it: the window
        # starts at the answer box (it used to start at the empty box, losing the answer)
        text = r"\boxed{27}" + "x" * 1000 + r" \boxed{} " + "y" * 1990
        assert extract_answer_region(text).startswith(r"\boxed{27}")
        assert is_correct(text, "27") is True

    def test_many_empty_boxes_stay_fast(self):
        text = r"\boxed{7} " + r"\boxed{}" * 6000  # a degenerate rollout: 48,000 characters of empty boxes
        start = time.perf_counter()
        assert is_correct(text, "7") is True
        assert time.perf_counter() - start < 2.0


class TestLastStatement:
    """(b) The last answer statement wins whatever its wording ("final answer ... is", "the answer is", "answer:",
    "answer =", "####"); a box still beats every statement; weak anchors count only when no statement does."""

    REVISED = "The final answer is 24.\n\nWait, let me check again. 3 × 9 = 27, not 24.\n\nThe answer is 27."

    @pytest.mark.parametrize(
        ("completion", "gold", "expected"),
        [
            (REVISED, "27", True),  # was 24: math-verify ranks "final answer" (50) above "answer ... X" (200)
            (REVISED, "24", False),
            ("**Final Answer:** 24\n\nHmm, 3 × 9 is 27. So the answer is 27.", "27", True),  # "answer:" (100)
            ("The answer is 24. No wait: 3 × 9 = 27, so the final answer is 27.", "27", True),  # as before
            # a weak anchor after a statement does not replace it (was 3: the rightmost "answer ... X")
            ("The answer is 27. This answer uses 3 multiplications.", "27", True),
            ("The answer is 27. This answer uses 3 multiplications.", "3", False),
            ("The answer is below.\n\n3 × 9 = 27, and the final answer is 27.", "27", True),
            ("The answer is 27.\n\nI hope this answer is clear!", "27", True),  # a statement without a value
            ("\\boxed{24}. Wait, the answer is 27.", "24", True),  # a box beats every statement (unchanged)
            ("This answer took 3 steps.", "3", True),  # only a weak anchor: math-verify's reading, unchanged
        ],
    )
    def test_last_statement_wins(self, completion, gold, expected):
        assert is_correct(completion, gold) is expected

    def test_answer_in_latex(self):
        text = r"The final answer is $\frac{1}{3}$. Let me double-check: the answer is $\frac{2}{3}$."
        assert (is_correct(text, r"\frac{2}{3}"), is_correct(text, r"\frac{1}{3}")) == (True, False)


class TestGsm8kMark:
    """(c) A completion's "#### N" is a statement, read as GSM8K's grader reads it (commas removed)."""

    NATALIA = (
        "Natalia sold 48 / 2 = 24 clips in May.\nNatalia sold 48 + 24 = 72 clips altogether in April and May.\n#### 72"
    )

    @pytest.mark.parametrize(
        ("completion", "gold", "expected"),
        [
            (NATALIA, "72", True),  # was False: only golds parsed ####
            (NATALIA, "#### 72", True),
            (NATALIA, "24", False),
            ("3 × 9 = 27\n\n#### 27.", "27", True),  # a full stop after the number is punctuation
            ("#### 1,234", "1234", True),
            ("#### 1,22", "122", True),  # GSM8K's reading (commas removed), as the gold side reads "#### 1,22"
            ("#### 1,22", "1.22", False),
            ("#### -5", "-5", True),
            ("The answer is 24.\n#### 27", "27", True),  # the last statement
            ("#### 27\nThe answer is 24.", "27", False),
            # markdown headings are not answers: the number must end its line
            ("#### 1. Multiply\n3 × 9 = 27", "1", False),
            ("#### 1. Multiply\n3 × 9 = 27\n\nThe answer is 27.", "27", True),
            ("#### Step 2\nThe answer is 27.", "27", True),
        ],
    )
    def test_gsm8k_mark(self, completion, gold, expected):
        assert is_correct(completion, gold) is expected
