"""Tests for trl_efficient/rewards/correctness.py."""

import pickle

import pytest

from trl_efficient.rewards import correctness_reward, get_correctness_reward, think_format_reward


def conv(text):
    return [{"role": "assistant", "content": text}]


class TestCorrectnessReward:
    def test_values(self):
        completions = [r"<think>hm \boxed{3}</think> \boxed{4}", "The answer is 5.", r"\boxed{4}", "no answer"]
        # correct after </think> ; wrong (5 != 4) ; gold unparseable ; no answer
        out = correctness_reward(completions=completions, solution=["4", "4", "", "4"])
        assert out == [1.0, 0.0, None, 0.0]

    def test_conversational(self):
        out = correctness_reward(completions=[conv(r"\boxed{4}"), conv(r"\boxed{5}")], solution=["4", "4"])
        assert out == [1.0, 0.0]

    def test_extra_kwargs_ignored(self):
        out = correctness_reward(
            prompts=["p"], completions=[r"\boxed{4}"], solution=["#### 4"], completion_ids=[[1, 2]],
            trainer_state=None, log_metric=None, log_extra=None, other_column=["x"],
        )  # fmt: skip
        assert out == [1.0]

    def test_name(self):
        assert correctness_reward.__name__ == "correctness_reward"

    def test_issue_18_golds_are_scored(self):
        # Issue 18 item 13: a decimal-comma gold (b) and a gold math-verify reads only as a string (c) are scored
        # (they gave 0.0 and None before): the same answer 1.0, another answer 0.0; "$$" is still unscorable (None)
        gold = r"$$x = \frac{1}{2}, x = \frac{-1 \pm \sqrt{13}}{4}$$"
        same = r"\boxed{x = \frac{1}{2}, x = \frac{-1 \pm \sqrt{13}}{4}}"
        completions = [r"\boxed{1.22}", r"\boxed{1.23}", same, r"\boxed{x = 2}", r"\boxed{1}"]
        out = correctness_reward(completions=completions, solution=["1,22", "1,22", gold, gold, "$$"])
        assert out == [1.0, 0.0, 1.0, 0.0, None]


class TestGetCorrectnessReward:
    def test_values_and_options(self):
        reward = get_correctness_reward(require_think_close=True, correct_value=2.0, wrong_value=-1.0)
        # closed + correct -> 2 ; not closed -> wrong -> -1 ; unparseable gold -> None
        completions = [r"a</think>\boxed{2}", r"\boxed{2}", r"a</think>\boxed{2}"]
        out = reward(completions=completions, solution=["2", "2", None])
        assert out == [2.0, -1.0, None]

    def test_answer_after_think_false(self):
        reward = get_correctness_reward(answer_after_think=False)
        # the whole text holds one boxed answer (inside the thinking) -> counts
        assert reward(completions=[r"<think>\boxed{2}</think> done"], solution=["2"]) == [1.0]
        assert get_correctness_reward()(completions=[r"<think>\boxed{2}</think> done"], solution=["2"]) == [0.0]

    def test_pickle_round_trip(self):
        reward = get_correctness_reward(wrong_value=-0.5)
        clone = pickle.loads(pickle.dumps(reward))
        args = dict(completions=[r"\boxed{2}", r"\boxed{3}"], solution=["2", "2"])
        assert clone(**args) == reward(**args) == [1.0, -0.5]
        assert clone.__name__ == "correctness_reward"

    def test_extra_kwargs_ignored(self):
        reward = get_correctness_reward()
        out = reward(completions=[r"\boxed{2}"], solution=["2"], completion_ids=[[0]], foo=[1], trainer_state=None)
        assert out == [1.0]

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"answer_after_think": "yes"}, "answer_after_think"),
            ({"require_think_close": 1}, "require_think_close"),
            ({"correct_value": "1"}, "correct_value"),
            ({"wrong_value": None}, "wrong_value"),
        ],
    )
    def test_bad_args(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_correctness_reward(**kwargs)


class TestThinkFormatReward:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("<think>plan</think> 42", 1.0),
            ("plan</think> 42", 1.0),  # <think> opened by the chat template
            ("\n<think>\nplan\n</think>\n\n42", 1.0),
            ("<think>plan 42", 0.0),  # never closed (truncated)
            ("<think></think> 42", 0.0),  # empty thinking
            ("</think> 42", 0.0),
            ("<think>plan</think>   ", 0.0),  # no answer
            ("plan</think>a</think>b", 0.0),  # two closes
            ("<think>a<think>b</think> 42", 0.0),  # two opens
            ("", 0.0),
        ],
    )
    def test_values(self, text, expected):
        assert think_format_reward(completions=[text]) == [expected]
        assert think_format_reward(completions=[conv(text)]) == [expected]

    def test_extra_kwargs_and_name(self):
        assert think_format_reward(completions=["a</think>b"], solution=["1"], completion_ids=[[1]]) == [1.0]
        assert think_format_reward.__name__ == "think_format_reward"


@pytest.mark.parametrize("name", ["math500", "gsm8k"])
def test_every_bundled_gold_is_correct_against_itself(name):
    # Issue 8: a gold answer boxed as a completion must be judged correct against itself (by definition, 100%);
    # before the normaliser, 11 MATH-500 golds failed (3 with "\$" gave None, 8 in shorthand LaTeX gave 0.0).
    from trl_efficient.data.loaders import load_math_dataset

    golds = load_math_dataset(name, split="test")["solution"]
    assert len(golds) == {"math500": 500, "gsm8k": 1319}[name]
    rewards = correctness_reward(completions=[conv(rf"\boxed{{{gold}}}") for gold in golds], solution=golds)
    misjudged = [(gold, reward) for gold, reward in zip(golds, rewards, strict=True) if reward != 1.0]
    assert misjudged == []
