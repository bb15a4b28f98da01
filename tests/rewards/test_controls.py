"""The negative controls' rewards (trl_efficient/rewards/controls.py): a fixed per-token penalty and a placebo."""

import pickle

import numpy as np
import pytest

from trl_efficient.rewards.controls import get_constant_length_penalty, get_placebo_reward


def test_constant_penalty_hand_computed():
    reward = get_constant_length_penalty(alpha=1 / 384)
    # 384 tokens -> -1.0 ; 96 tokens -> -0.25 ; the same whether correct or not (no solution is read)
    assert reward(completions=["a", "b"], completion_ids=[[0] * 384, [1] * 96]) == [pytest.approx(-1.0),
                                                                                   pytest.approx(-0.25)]  # fmt: skip
    assert pickle.loads(pickle.dumps(reward))(completions=["x"], completion_ids=[[0] * 3]) == [pytest.approx(-3 / 384)]
    assert reward.__name__ == "constant_length_penalty"
    with pytest.raises(ValueError, match="alpha"):
        get_constant_length_penalty(alpha=-0.1)


def test_placebo_is_zero_mean_and_blind_to_length_and_correctness():
    reward = get_placebo_reward(scale=0.1, seed=0)
    rng = np.random.default_rng(0)
    ids = [list(rng.integers(0, 500, size=int(n))) for n in rng.integers(20, 300, size=4000)]
    values = np.array(reward(completions=["x"] * len(ids), completion_ids=ids))
    lengths = np.array([len(i) for i in ids], dtype=float)
    assert np.all(np.abs(values) <= 0.1)
    # uniform on [-0.1, 0.1]: mean 0, sd 0.1 / sqrt(3) = 0.0577; the mean of 4000 draws within 4 standard errors
    assert abs(values.mean()) < 4 * 0.0577 / np.sqrt(4000) and values.std() == pytest.approx(0.0577, rel=0.05)
    assert abs(np.corrcoef(values, lengths)[0, 1]) < 4 / np.sqrt(4000)  # no information about length
    # the same ids give the same value (reproducible, the same on every process); another seed, other values
    assert reward(completions=["a"], completion_ids=[ids[0]]) == [values[0]]
    other = get_placebo_reward(scale=0.1, seed=1)(completions=["a"], completion_ids=[ids[0]])
    assert other != [values[0]]
    assert pickle.loads(pickle.dumps(reward))(completions=["a"], completion_ids=[ids[0]]) == [values[0]]
    with pytest.raises(ValueError, match="scale"):
        get_placebo_reward(scale=-1)
