"""Tests for the group-relative rewards (trl_efficient/rewards/group.py), single process."""

import pickle
from types import SimpleNamespace

import pytest

from trl_efficient.rewards import gather_rows, get_kimi_length_reward, get_shorter_better_reward, resolve_group_size


def conv(text):
    return [{"role": "assistant", "content": text}]


RIGHT, WRONG = r"\boxed{1}", r"\boxed{2}"

# Two groups of G = 4, gold "1".
# group 1: correct 10, correct 20, wrong 30, wrong 50 ; group 2: wrong 12, correct 20, correct 28, wrong 36
TWO_GROUPS = dict(
    completions=[RIGHT, RIGHT, WRONG, WRONG, WRONG, RIGHT, RIGHT, WRONG],
    solution=["1"] * 8,
    completion_ids=[[0] * n for n in (10, 20, 30, 50, 12, 20, 28, 36)],
)


class TestHelpers:
    def test_gather_rows_single_process(self):
        assert gather_rows([1, None, (True, 3)]) == ([1, None, (True, 3)], 0)

    def test_resolve_group_size(self):
        assert resolve_group_size(None, {"group_size": [4, 4, 4]}) == 4
        assert resolve_group_size(4, {"group_size": [4, 4]}) == 4
        assert resolve_group_size(8, {}) == 8
        assert resolve_group_size(8, {"group_size": None}) == 8

    def test_resolve_group_size_errors(self):
        with pytest.raises(ValueError, match=r"needs whole groups: pass num_generations=\.\.\. to get_x\(\)"):
            resolve_group_size(None, {}, "get_x()")
        with pytest.raises(ValueError, match="disagrees"):
            resolve_group_size(2, {"group_size": [4, 4]})
        with pytest.raises(ValueError, match="same for every row"):
            resolve_group_size(None, {"group_size": [4, 8]})
        with pytest.raises(ValueError, match="positive ints"):
            resolve_group_size(None, {"group_size": [0]})


class TestKimiLengthReward:
    def test_two_groups_hand_computed(self):
        out = get_kimi_length_reward(num_generations=4)(**TWO_GROUPS)
        expected = [
            # group 1: min 10, max 50, lambda = 0.5 - (L - 10) / 40
            0.5,  # correct, L=10: 0.5
            0.25,  # correct, L=20: 0.5 - 10/40
            0.0,  # wrong, L=30: min(0, 0.5 - 20/40 = 0)
            -0.5,  # wrong, L=50: min(0, -0.5)
            # group 2: min 12, max 36, lambda = 0.5 - (L - 12) / 24
            0.0,  # wrong, L=12: min(0, 0.5)
            1 / 6,  # correct, L=20: 0.5 - 8/24
            -1 / 6,  # correct, L=28: 0.5 - 16/24
            -0.5,  # wrong, L=36: min(0, -0.5)
        ]
        assert out == pytest.approx(expected)

    def test_equal_lengths_give_zero(self):
        reward = get_kimi_length_reward(num_generations=2)
        out = reward(completions=[RIGHT, WRONG], solution=["1", "1"], completion_ids=[[0] * 5] * 2)
        assert out == [0.0, 0.0]

    def test_group_size_column_and_conversational(self):
        kwargs = dict(TWO_GROUPS, completions=[conv(c) for c in TWO_GROUPS["completions"]], group_size=[4] * 8)
        assert get_kimi_length_reward()(**kwargs) == get_kimi_length_reward(num_generations=4)(**TWO_GROUPS)

    def test_unparseable_gold_is_none_but_counts_in_min_max(self):
        # row 2's gold is unparseable: None, but its length 50 still sets the max: 0.5 - 10/40 = 0.25 for L=20
        out = get_kimi_length_reward(num_generations=3)(
            completions=[RIGHT, RIGHT, RIGHT], solution=["1", "1", ""], completion_ids=[[0] * 10, [0] * 20, [0] * 50]
        )
        assert out == [pytest.approx(0.5), pytest.approx(0.25), None]

    def test_warmup(self):
        reward = get_kimi_length_reward(num_generations=4, warmup_ratio=0.1)
        # 10% of 100 steps: step 9 is warm-up (all 0), step 10 is not
        during = reward(**TWO_GROUPS, trainer_state=SimpleNamespace(global_step=9, max_steps=100))
        after = reward(**TWO_GROUPS, trainer_state=SimpleNamespace(global_step=10, max_steps=100))
        assert during == [0.0] * 8
        assert after == reward(**TWO_GROUPS)  # no trainer_state -> no warm-up

    def test_shorter_correct_never_scores_lower(self):
        out = get_kimi_length_reward(num_generations=4)(**TWO_GROUPS)
        # within group 2, correct rows L=20 and L=28
        assert out[5] > out[6]

    def test_pickle_kwargs_name(self):
        reward = get_kimi_length_reward(num_generations=4)
        clone = pickle.loads(pickle.dumps(reward))
        extra = dict(prompts=["p"] * 8, log_metric=None, log_extra=None, other=[0] * 8)
        assert clone(**TWO_GROUPS, **extra) == reward(**TWO_GROUPS)
        assert clone.__name__ == "kimi_length_reward"

    def test_missing_group_size(self):
        with pytest.raises(ValueError, match=r"pass num_generations=\.\.\. to get_kimi_length_reward\(\)"):
            get_kimi_length_reward()(**TWO_GROUPS)

    def test_rows_not_multiple_of_group(self):
        with pytest.raises(ValueError, match="not a multiple of the group size 3"):
            get_kimi_length_reward(num_generations=3)(**TWO_GROUPS)  # 8 rows, G=3

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"num_generations": 0}, "num_generations"),
            ({"warmup_ratio": 1.5}, "warmup_ratio"),
            ({"length_scope": "answer"}, "tokenizer="),
        ],  # fmt: skip
    )
    def test_bad_args(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_kimi_length_reward(**kwargs)


class TestShorterBetterReward:
    def test_two_groups_hand_computed(self):
        out = get_shorter_better_reward(num_generations=4)(**TWO_GROUPS)
        expected = [
            # group 1: SOL = shortest correct = 10 ; r = 2 * c - 0.001 * |L - 10|
            2.0,  # 2 - 0
            1.99,  # 2 - 0.001 * 10
            -0.02,  # 0 - 0.001 * 20
            -0.04,  # 0 - 0.001 * 40
            # group 2: SOL = 20
            -0.008,  # 0 - 0.001 * 8
            2.0,  # 2 - 0
            1.992,  # 2 - 0.001 * 8
            -0.016,  # 0 - 0.001 * 16
        ]
        assert out == pytest.approx(expected)

    def test_no_correct_uses_mean_length(self):
        out = get_shorter_better_reward(num_generations=4, alpha=1.0, beta=0.1)(
            completions=[WRONG] * 4, solution=["1"] * 4, completion_ids=[[0] * n for n in (10, 20, 30, 60)]
        )
        # SOL = mean(10, 20, 30, 60) = 30 ; -0.1 * [20, 10, 0, 30]
        assert out == pytest.approx([-2.0, -1.0, 0.0, -3.0])

    def test_chars_unit_and_none(self):
        reward = get_shorter_better_reward(num_generations=2, beta=0.5, length_unit="chars")
        # "\boxed{1}" = 9 chars (SOL) ; "xx \boxed{1}" = 12 chars: 2 - 0.5 * 3 = 0.5
        out = reward(completions=[RIGHT, "xx " + RIGHT], solution=["1", "1"], completion_ids=[[0], [0]])
        assert out == pytest.approx([2.0, 0.5])
        out = reward(completions=[RIGHT, RIGHT], solution=["1", None], completion_ids=[[0], [0]])
        assert out == [2.0, None]

    def test_thinking_scope(self, tiny_tokenizer):
        text_short = "<think> short </think> The final answer is \\boxed{1}"
        text_long = "<think> short reasoning reasoning </think> \\boxed{1}"
        ids = [tiny_tokenizer.encode(t, add_special_tokens=False) for t in (text_short, text_long)]
        reward = get_shorter_better_reward(
            num_generations=2, beta=1.0, length_scope="thinking", tokenizer=tiny_tokenizer
        )
        out = reward(completions=[text_short, text_long], solution=["1", "1"], completion_ids=ids)
        # both correct; the long one has more thinking tokens, so it is penalised by its extra thinking tokens
        k_short = len(tiny_tokenizer.encode("<think> short </think>", add_special_tokens=False))
        k_long = len(tiny_tokenizer.encode("<think> short reasoning reasoning </think>", add_special_tokens=False))
        assert out == pytest.approx([2.0, 2.0 - (k_long - k_short)])

    def test_pickle_kwargs_name(self):
        reward = get_shorter_better_reward(num_generations=4)
        clone = pickle.loads(pickle.dumps(reward))
        assert clone(**TWO_GROUPS, trainer_state=None, foo=[1] * 8) == reward(**TWO_GROUPS)
        assert clone.__name__ == "shorter_better_reward"

    def test_errors(self):
        with pytest.raises(ValueError, match="num_generations"):
            get_shorter_better_reward()(**TWO_GROUPS)
        with pytest.raises(ValueError, match="not a multiple"):
            get_shorter_better_reward(num_generations=4)(**{k: v[:6] for k, v in TWO_GROUPS.items()})
        with pytest.raises(ValueError, match="beta"):
            get_shorter_better_reward(beta=-0.1)
        with pytest.raises(ValueError, match="alpha"):
            get_shorter_better_reward(alpha="2")
