"""Silent zero signal (issue 36, item 5): a reward whose value depends on `</think>` logs the fraction of completions
without it (`trl_efficient/no_think_close_fraction`, through TRL's `log_metric`) and warns once per run the first time
no completion of a call has one (`core.lengths.ThinkCloseMonitor`). A model that never writes `</think>` otherwise
gets HBPO's -1 on every completion and DLER's 0 even when it answers right: zero advantage, nothing said."""

import logging
import pickle

import pytest

from trl_efficient.core.lengths import NO_THINK_CLOSE_METRIC
from trl_efficient.rewards.budget import get_hbpo_reward, get_saber_reward
from trl_efficient.rewards.length import get_dler_truncation_reward, get_laser_reward

RIGHT_NO_CLOSE = [r"x \boxed{4}"] * 4  # right answers, thinking never closed
HALF_CLOSED = [r"a</think>\boxed{4}", r"x \boxed{4}", r"b</think>\boxed{4}", r"y \boxed{4}"]


class Log:
    """TRL's `log_metric(name, value)`, recorded."""

    def __init__(self):
        self.values = []

    def __call__(self, name, value):
        self.values.append((name, value))


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "</think>" in r.getMessage()]


def _hbpo(completions, reward, log):
    return reward(completions=completions, solution=["4"] * 4, completion_ids=[[0] * 300] * 4, budget=[512] * 4,
                  log_metric=log)  # fmt: skip


def test_hbpo_without_think_close_logs_the_fraction_and_warns_once(caplog):
    caplog.set_level(logging.WARNING)
    reward, log = get_hbpo_reward(count_prefill=False), Log()
    # every completion right but unclosed -> format_reward -1 for all: the same value, no signal
    assert _hbpo(RIGHT_NO_CLOSE, reward, log) == [-1.0] * 4
    assert _hbpo(RIGHT_NO_CLOSE, reward, log) == [-1.0] * 4
    out = _hbpo(HALF_CLOSED, reward, log)
    assert out[1] == out[3] == -1.0 and out[0] == out[2] > 3.9  # f2(512) = 4 cos(pi/16) = 3.92
    # 4/4, 4/4, then 2 of 4 without </think>
    assert log.values == [(NO_THINK_CLOSE_METRIC, 1.0), (NO_THINK_CLOSE_METRIC, 1.0), (NO_THINK_CLOSE_METRIC, 0.5)]
    (line,) = _warnings(caplog)  # once per run, not once per call
    assert line.startswith("hbpo_reward: none of the 4 completions of this batch contains </think>, so each gets "
                           "format_reward=-1.0, the same for all: no learning signal.")  # fmt: skip
    assert "\n" not in line and NO_THINK_CLOSE_METRIC in line


def test_dler_scores_a_right_answer_without_think_close_0_and_says_so(caplog):
    caplog.set_level(logging.WARNING)
    reward, log = get_dler_truncation_reward(max_completion_length=8, eos_token_id=2), Log()
    ids = [[5, 2]] * 4  # all stopped
    assert reward(completions=RIGHT_NO_CLOSE, solution=["4"] * 4, completion_ids=ids, log_metric=log) == [0.0] * 4
    assert log.values == [(NO_THINK_CLOSE_METRIC, 1.0)]
    (line,) = _warnings(caplog)
    assert line.startswith("dler_truncation_reward: none of the 4 completions of this batch contains </think>, so "
                           "each gets 0 (wrong), even with a right answer")  # fmt: skip
    # without require_think_close the reward does not depend on </think>: right answers score 1, nothing logged
    caplog.clear()
    free, log = get_dler_truncation_reward(max_completion_length=8, eos_token_id=2, require_think_close=False), Log()
    assert free(completions=RIGHT_NO_CLOSE, solution=["4"] * 4, completion_ids=ids, log_metric=log) == [1.0] * 4
    assert log.values == [] and _warnings(caplog) == []


@pytest.mark.parametrize(
    "reward, columns",
    [
        (get_laser_reward(length_unit="chars"), {}),
        (
            get_saber_reward(length_unit="chars"),
            {
                "saber_mode": ["budget"] * 4,
                "saber_budget": [100] * 4,
                "saber_base_tokens": [90] * 4,
                "saber_penalize": [True] * 4,
            },
        ),  # fmt: skip
    ],
)
def test_laser_and_saber_log_the_fraction_too(reward, columns, caplog):
    caplog.set_level(logging.WARNING)
    log = Log()
    reward(completions=HALF_CLOSED, solution=["4"] * 4, log_metric=log, **columns)
    assert log.values == [(NO_THINK_CLOSE_METRIC, 0.5)] and _warnings(caplog) == []  # some close: no warning
    reward(completions=RIGHT_NO_CLOSE, solution=["4"] * 4, log_metric=log, **columns)
    assert log.values[-1] == (NO_THINK_CLOSE_METRIC, 1.0)
    assert len(_warnings(caplog)) == 1 and _warnings(caplog)[0].startswith(f"{reward.__name__}: none of the 4")


def test_rewards_still_pickle_and_work_without_log_metric():
    # TRL's async worker pickles reward functions; plain GRPOTrainer-free calls pass no log_metric
    reward = pickle.loads(pickle.dumps(get_hbpo_reward(count_prefill=False)))
    assert _hbpo(RIGHT_NO_CLOSE, reward, None) == [-1.0] * 4 and reward.think_close.warned


def test_a_trainer_logs_the_fraction_and_warns_once(tiny_model_dir, tmp_path, caplog):
    """Through TRL 1.16's reward call (its `log_metric` kwarg): a tiny random model never writes `</think>`, so DLER
    scores every completion 0; the logged fraction is 1 at every step and the warning comes once in the run."""
    from helpers import make_dataset, tiny_config

    from trl_efficient.trainer import EfficientGRPOTrainer

    caplog.set_level(logging.WARNING)
    reward = get_dler_truncation_reward(max_completion_length=8, eos_token_id=2)
    args = tiny_config(tmp_path, max_completion_length=8, max_steps=2, learning_rate=0.0)
    trainer = EfficientGRPOTrainer(
        model=tiny_model_dir, reward_funcs=[reward], args=args, train_dataset=make_dataset(8)
    )
    trainer.train()
    logged = [e[NO_THINK_CLOSE_METRIC] for e in trainer.state.log_history if NO_THINK_CLOSE_METRIC in e]
    assert logged == [1.0, 1.0]  # logging_steps=1, two steps
    assert [w.split(":")[0] for w in _warnings(caplog)] == ["dler_truncation_reward"]
