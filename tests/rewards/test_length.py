"""Tests for trl_efficient/core/lengths.py and the per-completion length rewards (trl_efficient/rewards/length.py)."""

import math
import pickle

import pytest
from trl.rewards import get_cosine_scaled_reward

from trl_efficient.core.lengths import LengthMeter, completion_text, split_thinking, validate_length_options
from trl_efficient.rewards import (
    get_cosine_length_reward,
    get_dler_truncation_reward,
    get_l1_reward,
    get_laser_reward,
    get_soft_overlong_reward,
)


def conv(text):
    return [{"role": "assistant", "content": text}]


def ids(n):
    return [0] * n


THINK_TEXT = "<think> short reasoning </think> The final answer is \\boxed{42}"


class TestLengths:
    def test_completion_text(self):
        assert completion_text("abc") == "abc"
        assert completion_text(conv("abc")) == "abc"
        assert completion_text(None) == completion_text([]) == ""

    def test_split_thinking(self):
        assert split_thinking("<think>a</think>b") == ("<think>a</think>", "b", True)
        assert split_thinking("a</think>b</think>c") == ("a</think>b</think>", "c", True)  # last close tag
        assert split_thinking("abc") == ("abc", "", False)

    @pytest.mark.parametrize(
        ("unit", "scope", "match"), [("words", "total", "length_unit"), ("tokens", "all", "length_scope")]
    )
    def test_validate(self, unit, scope, match):
        with pytest.raises(ValueError, match=match):
            validate_length_options(unit, scope)

    def test_meter_chars(self):
        text = "<think>ab</think>cde"  # 7 + 2 + 8 + 3 = 20 chars ; thinking 17 ; answer 3
        assert LengthMeter("chars")(text, None) == 20
        assert LengthMeter("chars", "thinking")(text, None) == 17
        assert LengthMeter("chars", "answer")(text, None) == 3
        assert LengthMeter("chars", "answer")("no close", None) == 0

    def test_meter_tokens_total(self):
        assert LengthMeter()("whatever", [1, 2, 3]) == 3
        with pytest.raises(ValueError, match="completion_ids"):
            LengthMeter()("whatever", None)

    def test_meter_needs_tokenizer(self):
        with pytest.raises(ValueError, match="tokenizer="):
            LengthMeter("tokens", "thinking")

    def test_meter_token_boundary(self, tiny_tokenizer):
        tok = tiny_tokenizer
        token_ids = tok.encode(THINK_TEXT, add_special_tokens=False) + [tok.eos_token_id]
        k = LengthMeter("tokens", "thinking", tok)(THINK_TEXT, token_ids)
        # exact boundary: the first k tokens hold "</think>", the first k - 1 do not
        assert tok.decode(token_ids[:k]).endswith("</think>")
        assert "</think>" not in tok.decode(token_ids[: k - 1])
        # the answer is the rest, trailing EOS included
        assert LengthMeter("tokens", "answer", tok)(THINK_TEXT, token_ids) == len(token_ids) - k

    def test_meter_token_boundary_last_close(self, tiny_tokenizer):
        tok = tiny_tokenizer
        text = "<think> a </think> b </think> 42"
        token_ids = tok.encode(text, add_special_tokens=False)
        k = LengthMeter("tokens", "thinking", tok)(text, token_ids)
        assert tok.decode(token_ids[:k]) == "<think> a </think> b </think>"

    def test_meter_no_close(self, tiny_tokenizer):
        tok = tiny_tokenizer
        token_ids = tok.encode("<think> short reasoning", add_special_tokens=False)
        assert LengthMeter("tokens", "thinking", tok)("", token_ids) == len(token_ids)
        assert LengthMeter("tokens", "answer", tok)("", token_ids) == 0
        assert LengthMeter("tokens", "thinking", tok)("", []) == 0

    def test_meter_pickle(self, tiny_tokenizer):
        meter = LengthMeter("tokens", "thinking", tiny_tokenizer)
        token_ids = tiny_tokenizer.encode(THINK_TEXT, add_special_tokens=False)
        assert pickle.loads(pickle.dumps(meter))(THINK_TEXT, token_ids) == meter(THINK_TEXT, token_ids)


class TestCosineLengthReward:
    def test_paper_defaults_hand_computed(self):
        reward = get_cosine_length_reward(max_completion_length=100)
        completions = [r"\boxed{1}", r"\boxed{1}", r"\boxed{2}", r"\boxed{2}", r"\boxed{1}", r"\boxed{1}"]
        lengths = [0, 50, 0, 50, 83, 84]
        out = reward(completions=completions, solution=["1"] * 6, completion_ids=[ids(n) for n in lengths])
        expected = [
            2.0,  # correct, L=0: max_value_correct
            1.5,  # correct, L=50: 1 + 0.5 * (2 - 1) * (1 + cos(pi/2)) = 1.5
            -10.0,  # wrong, L=0: min_value_wrong
            -5.0,  # wrong, L=50: 0 + 0.5 * (-10 - 0) * (1 + 0) = -5
            1 + 0.5 * (1 + math.cos(0.83 * math.pi)),  # correct, L=83: 83 + 16 = 99 < 100, no exceed
            -10.0,  # L=84: 84 + 16 = 100 >= 100 -> exceed_penalty
        ]
        assert out == pytest.approx(expected)

    def test_exceed_disabled_clamps(self):
        reward = get_cosine_length_reward(max_completion_length=100, exceed_penalty=None)
        out = reward(completions=[r"\boxed{1}", r"\boxed{2}"], solution=["1", "1"], completion_ids=[ids(150)] * 2)
        # progress clamped at 1: correct -> min_value_correct 1 ; wrong -> max_value_wrong 0
        assert out == pytest.approx([1.0, 0.0])

    @pytest.mark.parametrize(
        "bounds",
        [
            dict(min_value_wrong=-10.0, max_value_wrong=0.0, min_value_correct=1.0, max_value_correct=2.0),
            dict(min_value_wrong=-1.0, max_value_wrong=-0.5, min_value_correct=0.5, max_value_correct=1.0),  # TRL's
        ],
    )
    def test_equals_trl_on_conversational(self, bounds):
        completions = [conv(r"\boxed{\frac{1}{3}}"), conv(r"\boxed{\frac{1}{2}}"), conv(r"\boxed{\frac{2}{6}}"),
                       conv("no answer"), conv(r"\boxed{\frac{1}{3}}")]  # fmt: skip
        solution = [r"\frac{1}{3}"] * 5
        completion_ids = [ids(n) for n in (10, 37, 64, 99, 250)]
        ours = get_cosine_length_reward(max_completion_length=128, exceed_penalty=None, **bounds)
        trl = get_cosine_scaled_reward(max_len=128, **bounds)
        expected = trl(completions, solution, completion_ids)
        out = ours(completions=completions, solution=solution, completion_ids=completion_ids)
        assert out == pytest.approx(expected)

    def test_string_and_conversational_agree(self):
        reward = get_cosine_length_reward(max_completion_length=100)
        args = dict(solution=["1", "1"], completion_ids=[ids(20), ids(40)])
        plain = reward(completions=[r"\boxed{1}", r"\boxed{3}"], **args)
        assert reward(completions=[conv(r"\boxed{1}"), conv(r"\boxed{3}")], **args) == plain
        # correct, L=20 (20 + 16 < 100): 1 + 0.5 (2 - 1)(1 + cos(0.2 pi)) ; wrong, L=40: 0 + 0.5 (-10 - 0)(1 + cos(0.4
        # pi))
        assert plain == pytest.approx([1 + 0.5 * (1 + math.cos(0.2 * math.pi)), -5 * (1 + math.cos(0.4 * math.pi))])

    def test_none_path(self):
        reward = get_cosine_length_reward(max_completion_length=100)
        # unparseable gold -> None, even when over length
        out = reward(completions=[r"\boxed{1}", r"\boxed{1}"], solution=["", None], completion_ids=[ids(5), ids(99)])
        assert out == [None, None]

    def test_chars_unit(self):
        reward = get_cosine_length_reward(max_completion_length=36, length_unit="chars")
        # "\boxed{1}" is 9 chars: 9 + 16 = 25 < 36 ; 1 + 0.5 * (1 + cos(pi * 9/36))
        out = reward(completions=[r"\boxed{1}"], solution=["1"], completion_ids=[ids(1000)])
        assert out == pytest.approx([1 + 0.5 * (1 + math.cos(math.pi / 4))])

    def test_thinking_scope(self, tiny_tokenizer):
        tok = tiny_tokenizer
        token_ids = tok.encode(THINK_TEXT, add_special_tokens=False)
        k = LengthMeter("tokens", "thinking", tok)(THINK_TEXT, token_ids)
        reward = get_cosine_length_reward(
            max_completion_length=100, exceed_penalty=None, length_scope="thinking", tokenizer=tok
        )
        out = reward(completions=[THINK_TEXT], solution=["42"], completion_ids=[token_ids])
        assert out == pytest.approx([1 + 0.5 * (1 + math.cos(math.pi * k / 100))])

    def test_pickle_kwargs_name(self):
        reward = get_cosine_length_reward(max_completion_length=100)
        clone = pickle.loads(pickle.dumps(reward))
        args = dict(completions=[r"\boxed{1}", r"\boxed{0}"], solution=["1", "1"], completion_ids=[ids(50), ids(50)],
                    trainer_state=None, log_metric=None, log_extra=None, unused_column=["a", "b"])  # fmt: skip
        assert clone(**args) == reward(**args) == [1.5, -5.0]
        assert reward.__name__ == clone.__name__ == "cosine_length_reward"

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"max_completion_length": 0}, "max_completion_length"),
            ({"max_completion_length": 10.5}, "max_completion_length"),
            ({"max_completion_length": 100, "min_value_wrong": "x"}, "min_value_wrong"),
            ({"max_completion_length": 100, "exceed_penalty": float("nan")}, "exceed_penalty"),
            ({"max_completion_length": 100, "length_unit": "words"}, "length_unit"),
            ({"max_completion_length": 100, "length_scope": "thinking"}, "tokenizer="),
            ({}, "max_completion_length is required"),
            ({"max_completion_length": 100, "max_len": 100}, "not both"),
        ],
    )
    def test_bad_args(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_cosine_length_reward(**kwargs)


class TestCapName:
    """One name for the completion cap across factories (`max_completion_length`, TRL's config field); the old names
    still work for a release, with a FutureWarning."""

    def test_old_names_are_deprecated_aliases(self):
        with pytest.warns(FutureWarning, match="`max_len` is deprecated"):
            old = get_cosine_length_reward(max_len=100)
        with pytest.warns(FutureWarning, match="`max_completion_len` is deprecated"):
            old_soft = get_soft_overlong_reward(max_completion_len=100, soft_punish_cache=20)
        args = dict(completions=[r"\boxed{1}"], solution=["1"], completion_ids=[ids(90)])
        assert old(**args) == get_cosine_length_reward(max_completion_length=100)(**args)
        assert old_soft(**args) == get_soft_overlong_reward(max_completion_length=100, soft_punish_cache=20)(**args)


class TestSoftOverlongReward:
    def test_hand_computed(self):
        reward = get_soft_overlong_reward(max_completion_length=100, soft_punish_cache=20)
        # 70 <= 80 -> 0 ; 90 in (80, 100] -> (80 - 90) / 20 = -0.5 ; 100 -> (80 - 100) / 20 = -1 ; 110 > 100 -> -1
        out = reward(completions=["a"] * 4, completion_ids=[ids(70), ids(90), ids(100), ids(110)])
        assert out == [0.0, -0.5, -1.0, -1.0]

    def test_chars_and_conversational(self):
        reward = get_soft_overlong_reward(max_completion_length=10, soft_punish_cache=4, length_unit="chars")
        # 6 chars -> 0 ; 8 chars -> (6 - 8) / 4 = -0.5
        assert reward(completions=[conv("abcdef"), "abcdefgh"], completion_ids=[ids(99), ids(99)]) == [0.0, -0.5]

    def test_zero_cache(self):
        reward = get_soft_overlong_reward(max_completion_length=10, soft_punish_cache=0)
        assert reward(completions=["a", "b"], completion_ids=[ids(10), ids(11)]) == [0.0, -1.0]

    def test_pickle_kwargs_name(self):
        reward = get_soft_overlong_reward(100, 20)
        clone = pickle.loads(pickle.dumps(reward))
        args = dict(completions=["a"], completion_ids=[ids(90)], solution=["1"], trainer_state=None)
        assert clone(**args) == reward(**args) == [-0.5]
        assert reward.__name__ == "soft_overlong_reward"

    @pytest.mark.parametrize(
        ("args", "match"),
        [((0, 0), "max_completion_length"), ((100, 101), "soft_punish_cache"), ((100, -1), "soft_punish_cache")],
    )
    def test_bad_args(self, args, match):
        with pytest.raises(ValueError, match=match):
            get_soft_overlong_reward(*args)


class TestL1Reward:
    def test_exact_hand_computed(self):
        reward = get_l1_reward()
        out = reward(
            completions=[r"\boxed{4}", r"\boxed{5}", r"\boxed{4}", "no answer"],
            solution=["4", "4", "", "4"],
            completion_ids=[ids(800), ids(1500), ids(10), ids(1000)],
            target_length=[1000, 1000, 1000, 1000],
        )
        # 1 - 0.0003 * |1000 - 800| = 0.94 ; 0 - 0.0003 * 500 = -0.15 ; unparseable gold -> None ; 0 - 0 = 0
        assert out == [pytest.approx(0.94), pytest.approx(-0.15), None, 0.0]

    def test_max_hand_computed(self):
        reward = get_l1_reward(mode="max")
        out = reward(
            completions=[r"\boxed{4}", r"\boxed{4}", r"\boxed{4}", r"\boxed{5}"],
            solution=["4"] * 4,
            completion_ids=[ids(100), ids(800), ids(1800), ids(100)],
            target_length=[1000] * 4,
        )
        # clip(0.001 * 900 + 0.5) = 1 ; clip(0.2 + 0.5) = 0.7 ; clip(-0.8 + 0.5) = 0 ; wrong -> 0 * ... = 0
        assert out == pytest.approx([1.0, 0.7, 0.0, 0.0])

    def test_per_row_length_mode(self):
        reward = get_l1_reward(mode="max")
        out = reward(
            completions=[r"\boxed{4}", r"\boxed{4}", r"\boxed{4}"],
            solution=["4"] * 3,
            completion_ids=[ids(1200), ids(1200), ids(1200)],
            target_length=[1000] * 3,
            length_mode=["exact", "max", None],
        )
        # exact row: 1 - 0.0003 * 200 = 0.94 ; max rows: clip(0.001 * -200 + 0.5) = 0.3
        assert out == pytest.approx([0.94, 0.3, 0.3])

    def test_custom_alpha_and_chars(self):
        reward = get_l1_reward(alpha=0.1, length_unit="chars")
        # "\boxed{4}" is 9 chars, target 10: 1 - 0.1 * 1 = 0.9
        out = reward(completions=[conv(r"\boxed{4}")], solution=["4"], completion_ids=[ids(500)], target_length=[10])
        assert out == [pytest.approx(0.9)]

    def test_thinking_scope(self, tiny_tokenizer):
        tok = tiny_tokenizer
        token_ids = tok.encode(THINK_TEXT, add_special_tokens=False)
        k = LengthMeter("tokens", "thinking", tok)(THINK_TEXT, token_ids)
        reward = get_l1_reward(alpha=0.01, length_scope="thinking", tokenizer=tok)
        out = reward(completions=[THINK_TEXT], solution=["42"], completion_ids=[token_ids], target_length=[k + 10])
        assert out == [pytest.approx(1 - 0.01 * 10)]  # thinking is exactly k tokens, 10 below target

    def test_missing_target(self):
        with pytest.raises(ValueError, match="target_length"):
            get_l1_reward()(completions=[r"\boxed{4}"], solution=["4"], completion_ids=[ids(3)])

    def test_bad_row_values(self):
        reward = get_l1_reward()
        with pytest.raises(ValueError, match="length_mode"):
            reward(completions=["a"], solution=["4"], completion_ids=[ids(3)], target_length=[5], length_mode=["x"])
        with pytest.raises(ValueError, match="target_length"):
            reward(completions=["a"], solution=["4"], completion_ids=[ids(3)], target_length=[None])

    def test_pickle_kwargs_names(self):
        reward = get_l1_reward(mode="max")
        clone = pickle.loads(pickle.dumps(reward))
        args = dict(completions=[r"\boxed{4}"], solution=["4"], completion_ids=[ids(800)], target_length=[1000],
                    trainer_state=None, prompts=["p"], other=[1])  # fmt: skip
        # Max: 1[correct] clip(0.001 (1000 - 800) + 0.5, 0, 1) = 0.7, with the extra columns ignored
        assert clone(**args) == reward(**args) == [pytest.approx(0.7)]
        assert clone.__name__ == "l1_max_reward"
        assert get_l1_reward().__name__ == "l1_exact_reward"

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"mode": "min"}, "mode"),
            ({"alpha": -1.0}, "alpha"),
            ({"delta": "0.5"}, "delta"),
            ({"length_unit": "x"}, "length_unit"),
        ],
    )
    def test_bad_args(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_l1_reward(**kwargs)


class TestLaserReward:
    def test_hand_computed(self):
        reward = get_laser_reward(target_length=4)
        completions = [
            r"a</think>\boxed{3}",  # correct, 4 <= 4 -> 1 + 0.5
            r"a</think>\boxed{3}",  # correct, 5 > 4 -> 1
            r"a</think>\boxed{2}",  # wrong -> -0.5
            r"\boxed{3}",  # no </think> (e.g. truncated) -> format -1
            r"<think>\boxed{3}</think> it is 3",  # boxed only inside thinking -> format -1
            r"a</think>\boxed{3}",  # gold unparseable -> None
        ]
        completion_ids = [ids(n) for n in (4, 5, 4, 4, 4, 4)]
        out = reward(completions=completions, solution=["3"] * 5 + [""], completion_ids=completion_ids)
        assert out == [1.5, 1.0, -0.5, -1.0, -1.0, None]

    def test_per_row_target_length(self):
        reward = get_laser_reward(target_length=4)
        # row targets 8 (5 <= 8 -> bonus), 2 (3 > 2 -> no bonus), None (factory 4: 3 <= 4 -> bonus)
        out = reward(completions=[conv(r"a</think>\boxed{3}")] * 3, solution=["3"] * 3,
                     completion_ids=[ids(5), ids(3), ids(3)], target_length=[8, 2, None])  # fmt: skip
        assert out == [1.5, 1.0, 1.5]

    def test_custom_values_and_chars(self):
        reward = get_laser_reward(target_length=20, alpha=1.0, correct_reward=2.0, wrong_reward=0.0,
                                  format_reward=-2.0, length_unit="chars")  # fmt: skip
        # "a</think>\boxed{3}" is 1 + 8 + 9 = 18 chars <= 20 -> 2 + 1 ; wrong -> 0 ; no close -> -2
        out = reward(completions=[r"a</think>\boxed{3}", r"a</think>\boxed{4}", "a"], solution=["3"] * 3,
                     completion_ids=[ids(100)] * 3)  # fmt: skip
        assert out == [3.0, 0.0, -2.0]

    def test_thinking_scope(self, tiny_tokenizer):
        tok = tiny_tokenizer
        token_ids = tok.encode(THINK_TEXT, add_special_tokens=False)
        k = LengthMeter("tokens", "thinking", tok)(THINK_TEXT, token_ids)
        args = dict(completions=[THINK_TEXT], solution=["42"], completion_ids=[token_ids])
        # thinking is k tokens: bonus at target k, none at k - 1
        assert get_laser_reward(target_length=k, length_scope="thinking", tokenizer=tok)(**args) == [1.5]
        assert get_laser_reward(target_length=k - 1, length_scope="thinking", tokenizer=tok)(**args) == [1.0]

    def test_pickle_kwargs_name(self):
        reward = get_laser_reward(target_length=4)
        clone = pickle.loads(pickle.dumps(reward))
        args = dict(completions=[r"a</think>\boxed{3}"], solution=["3"], completion_ids=[ids(4)], trainer_state=None)
        assert clone(**args) == reward(**args) == [1.5]
        assert clone.__name__ == "laser_reward"

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"target_length": 0}, "target_length"),
            ({"alpha": None}, "alpha"),
            ({"format_reward": "x"}, "format_reward"),
        ],
    )
    def test_bad_args(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_laser_reward(**kwargs)


class TestDlerTruncationReward:
    def test_hand_computed_with_eos(self):
        reward = get_dler_truncation_reward(max_completion_length=4, eos_token_id=[2, 7])
        completions = [
            r"a</think>\boxed{3}",  # correct, ends with EOS 2 -> 1
            r"a</think>\boxed{3}",  # correct, ends with EOS 7 -> 1
            r"a</think>\boxed{3}",  # correct, no EOS (truncated) -> 1 * 0.1
            r"a</think>\boxed{4}",  # wrong -> 0
            r"a \boxed{3}",  # no </think> -> wrong -> 0
            r"a</think> The answer is 3.",  # not boxed -> 0
            r"a</think>\boxed{3}",  # gold unparseable -> None
        ]
        completion_ids = [[5, 2], [5, 5, 5, 5, 7], [5, 5], [5, 2], [5, 2], [5, 2], [5, 2]]
        out = reward(completions=completions, solution=["3"] * 6 + [None], completion_ids=completion_ids)
        assert out == [1.0, 1.0, pytest.approx(0.1), 0.0, 0.0, 0.0, None]

    def test_without_eos_uses_length(self):
        reward = get_dler_truncation_reward(max_completion_length=4, stop_factor=0.5)
        # 3 < 4 tokens -> stopped -> 1 ; 4 >= 4 -> truncated -> 0.5
        completions = [conv(r"a</think>\boxed{3}")] * 2
        out = reward(completions=completions, solution=["3"] * 2, completion_ids=[ids(3), ids(4)])
        assert out == [1.0, 0.5]

    def test_relaxed_format(self):
        reward = get_dler_truncation_reward(max_completion_length=10, require_think_close=False, require_boxed=False)
        out = reward(completions=[r"\boxed{3}", "The answer is 3."], solution=["3", "3"], completion_ids=[ids(2)] * 2)
        assert out == [1.0, 1.0]

    def test_pickle_kwargs_name(self):
        reward = get_dler_truncation_reward(max_completion_length=4, eos_token_id=2)
        clone = pickle.loads(pickle.dumps(reward))
        args = dict(completions=[r"a</think>\boxed{3}"], solution=["3"], completion_ids=[[5, 5]], trainer_state=None)
        assert clone(**args) == reward(**args) == [pytest.approx(0.1)]
        assert clone.__name__ == "dler_truncation_reward"

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"max_completion_length": 0}, "max_completion_length"),
            ({"max_completion_length": 4, "eos_token_id": "2"}, "eos_token_id"),
            ({"max_completion_length": 4, "eos_token_id": []}, "eos_token_id"),
            ({"max_completion_length": 4, "stop_factor": 1.5}, "stop_factor"),
            ({"max_completion_length": 4, "require_think_close": "yes"}, "require_think_close"),
        ],
    )
    def test_bad_args(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_dler_truncation_reward(**kwargs)
