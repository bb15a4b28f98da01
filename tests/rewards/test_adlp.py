"""A-DLP (methods.md §18, arXiv 2505.18298): hand-computed lambda sequences with clipping at 0 and at the cap,
reward values, the skipped update, logging, the builder's cap, state round trip and resume through a checkpoint."""

import json
import os

import pytest
import torch
from helpers import RecordingTrainer, make_dataset, tiny_config

from trl_efficient.recipes import get_recipe
from trl_efficient.recipes.adaptive import build_adlp_length_reward
from trl_efficient.rewards import correctness_reward
from trl_efficient.rewards.controller import get_adlp_reward
from trl_efficient.rewards.history import get_hapo_length_reward
from trl_efficient.trainer import GroupBatch


def _batch(correct):
    n = len(correct)
    return GroupBatch(rewards=torch.tensor(correct, dtype=torch.float32).view(n, 1), reward_names=["correctness"],
                      reward_weights=torch.ones(1), lengths=torch.full((n,), 5.0), truncated=torch.zeros(n, dtype=bool),
                      group_size=n, correctness_index=0)  # fmt: skip


def _scores(reward, lengths, **kwargs):
    return reward(completions=["x"] * len(lengths), completion_ids=[[0] * L for L in lengths], **kwargs)


def test_lambda_sequence_by_hand_with_both_clips():
    reward = get_adlp_reward(lambda_init=0.02, eta=0.1, acc_ref=0.5, lambda_max=0.05)
    assert _scores(reward, [10, 0]) == [pytest.approx(-0.2), 0.0]  # step 0 scored with lambda_0: -0.02 * 10
    reward.update(_batch([1, 0, 0, 0]))  # acc 0.25: 0.02 + 0.1 * (0.25 - 0.5) = -0.005 -> clipped to 0
    assert reward.lam == 0.0 and _scores(reward, [10]) == [0.0]
    reward.update(_batch([1, 1, 1, 1]))  # acc 1.0: 0 + 0.1 * 0.5 = 0.05 (= the cap)
    assert reward.lam == pytest.approx(0.05)
    reward.update(_batch([1, 1, 1, 0]))  # acc 0.75: 0.05 + 0.025 = 0.075 -> clipped to the cap 0.05
    assert reward.lam == pytest.approx(0.05)
    assert _scores(reward, [10, 20]) == [pytest.approx(-0.5), pytest.approx(-1.0)]  # -0.05 * 10 ; -0.05 * 20
    reward.update(_batch([1, 0, float("nan"), 0]))  # NaN left out: acc 1/3 -> 0.05 + 0.1 * (1/3 - 1/2) = 0.0333
    assert reward.lam == pytest.approx(0.05 - 0.1 / 6)
    assert reward.state_dict() == {"lambda": pytest.approx(0.05 - 0.1 / 6), "steps": 4}


def test_script_defaults_and_unbounded_lambda():
    reward = get_adlp_reward()  # lambda_0 1e-3, eta 1e-3, acc_ref 0.62, no cap (the paper)
    reward.update(_batch([1, 1, 1, 1]))  # 1e-3 + 1e-3 * 0.38 = 1.38e-3
    reward.update(_batch([0, 0, 0, 0]))  # 1.38e-3 - 0.62e-3 = 0.76e-3
    assert reward.lam == pytest.approx(0.76e-3)
    big = get_adlp_reward(lambda_init=1.0, eta=1.0, acc_ref=0.0)
    big.update(_batch([1, 1]))  # 1 + 1 * 1 = 2: unbounded without lambda_max
    assert big.lam == 2.0


def test_unscorable_batch_skips_the_update_and_state_round_trips():
    reward = get_adlp_reward(lambda_init=0.01, eta=0.1)
    reward.update(_batch([float("nan")] * 4))  # nothing scorable: unchanged, not counted
    nothing = GroupBatch(rewards=torch.zeros(2, 1), reward_names=["r"], reward_weights=torch.ones(1),
                         lengths=torch.ones(2), truncated=torch.zeros(2, dtype=bool), group_size=2)  # fmt: skip
    reward.update(nothing)  # no correctness column
    assert reward.state_dict() == {"lambda": 0.01, "steps": 0}
    other = get_adlp_reward()
    other.load_state_dict(json.loads(json.dumps({"lambda": 0.003, "steps": 7})))
    assert other.state_dict() == {"lambda": 0.003, "steps": 7}


def test_logs_lambda_and_the_recipe_is_the_released_uncapped_controller():
    logged = []
    reward = get_adlp_reward(lambda_init=0.004)
    _scores(reward, [3], log_metric=lambda name, value: logged.append((name, value)))
    assert logged == [("adlp/lambda", 0.004)]
    # Released code (JinyanSu1/A-DLP afbc411): scripts/train.sh lambda_init=1e-3, lr=1e-3, acc_init=0.62;
    # main_ppo.py constrained_reward_fn: r_acc - lambda_len * resp_len; ray_trainer.py:
    # lambda_len = max(0.0, lambda_len + lr * (seq_acc - acc_init)) -- no upper bound.
    args = tiny_config("/tmp/unused", max_completion_length=8192)
    built = build_adlp_length_reward(args, None, **get_recipe("a-dlp").rewards[1].kwargs)
    assert built.lambda_max is None and built.lam == 1e-3
    # a 4096-token answer at lambda_0: -1e-3 * 4096 = -4.096 (wrong: 0 - 4.096; correct: 1 - 4.096 = -3.096)
    assert _scores(built, [4096]) == [pytest.approx(-4.096)]
    built.update(_batch([1, 1, 1, 1]))  # acc 1: 1e-3 + 1e-3 * (1 - 0.62) = 1.38e-3, above 1/8192 = 1.22e-4
    assert built.lam == pytest.approx(1.38e-3)


def test_cap_lambda_option_caps_at_one_over_the_completion_cap():
    args = tiny_config("/tmp/unused", max_completion_length=8192)
    kwargs = {**get_recipe("a-dlp").rewards[1].kwargs, "cap_lambda": True}
    built = build_adlp_length_reward(args, None, **kwargs)
    assert built.lambda_max == 1 / 8192 and built.lam == 1 / 8192  # lambda_0 = 1e-3 clipped to 1/8192 = 1.22e-4
    # a correct answer at the cap never drops below 0: 1 - (1/8192) * 8192 = 0
    assert 1 + _scores(built, [8192])[0] == pytest.approx(0.0)
    built.update(_batch([1, 1, 1, 1]))  # 1.22e-4 + 3.8e-4 -> clipped to the cap 1/8192
    assert built.lam == 1 / 8192
    # an explicit lambda_max wins over cap_lambda
    assert build_adlp_length_reward(args, None, cap_lambda=True, lambda_max=0.5).lambda_max == 0.5
    with pytest.raises(ValueError, match="max_completion_length"):
        get_adlp_reward(cap_lambda=True)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"eta": -1.0}, "eta must be >= 0.0"), ({"acc_ref": 1.5}, "acc_ref must be <= 1.0"),
     ({"lambda_max": 0.0}, "lambda_max must be > 0.0"), ({"lambda_init": -1e-3}, "lambda_init must be >= 0.0")],
)  # fmt: skip
def test_bad_arguments_fail_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_adlp_reward(**kwargs)


# --------------------------------------------------------------------- resume: HAPO history and A-DLP lambda together
def _make(model_dir, out, max_steps):
    args = tiny_config(out, per_device_train_batch_size=12, max_steps=max_steps, save_strategy="steps", save_steps=1,
                       track_prompt_history=True)  # fmt: skip
    return RecordingTrainer(
        model=model_dir,
        reward_funcs=[
            correctness_reward,
            get_hapo_length_reward(),
            get_adlp_reward(lambda_init=0.01, eta=0.05, acc_ref=0.5, lambda_max=0.05),
        ],  # fmt: skip
        args=args,
        train_dataset=make_dataset(6),  # 2 steps per epoch: prompts are revisited from step 3 on
    )


def test_resume_restores_history_and_lambda(tiny_model_dir, tmp_path):
    full = _make(tiny_model_dir, tmp_path / "full", max_steps=4)
    full.train()
    # a checkpoint in the middle of the first epoch (resuming exactly at an epoch boundary replays the first epoch's
    # prompt order in transformers' sampler, which would change the rollouts, not the state under test)
    ckpt = os.path.join(tmp_path, "full", "checkpoint-1")
    with open(os.path.join(ckpt, "trl_efficient_state.json")) as f:
        saved = json.load(f)
    assert saved["prompt_history"]["attempts"] and saved["adlp_length_reward"]["steps"] == 1
    resumed = _make(tiny_model_dir, tmp_path / "resumed", max_steps=4)
    resumed.train(resume_from_checkpoint=ckpt)
    assert len(resumed.records) == 3
    assert any(r[1] != 0.0 for rec in full.records[2:] for r in rec["rewards"])  # HAPO read the history
    for a, b in zip(full.records[1:], resumed.records, strict=True):
        assert a["lengths"] == b["lengths"] and a["metadata"] == b["metadata"]
        torch.testing.assert_close(torch.tensor(a["rewards"]), torch.tensor(b["rewards"]), equal_nan=True)
    for key in ("prompt_history", "adlp_length_reward"):
        assert full.stateful_components[key].state_dict() == resumed.stateful_components[key].state_dict(), key
    # lambda by hand over the 4 steps: lambda_{t+1} = clip(lambda_t + 0.05 (acc_t - 0.5), 0, 0.05)
    lam = 0.01
    for rec in full.records:
        acc = sum(r[0] > 0.5 for r in rec["rewards"]) / len(rec["rewards"])
        lam = min(0.05, max(0.0, lam + 0.05 * (acc - 0.5)))
    assert full.stateful_components["adlp_length_reward"].lam == pytest.approx(lam)
