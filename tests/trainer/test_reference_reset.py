"""ProRL's reference resets (trl_efficient/trainer/reference.py, methods.md §33): the plateau trigger on hand-made
metric sequences, the config errors, the reset itself (KL 0 after it, reference = policy, optimizer state empty), the
equality with TRL's own `sync_ref_model` at alpha = 1 (the differential test), and resume across a reset."""

import json
import os

import pytest
import torch
from helpers import RecordingTrainer, make_dataset, resume_trainer, tiny_config
from transformers import TrainerCallback

from trl_efficient.rewards import correctness_reward, get_kimi_length_reward
from trl_efficient.trainer.reference import REF_MODEL_FILE, PlateauMonitor, ReferenceReset


# ------------------------------------------------------------------------------------------------- plateau monitor
def test_plateau_max_hand_sequence():
    m = PlateauMonitor(mode="max", patience=2, min_delta=0.0)
    # 0.1 best; 0.3 best; 0.3 (=, no gain) bad 1; 0.2 bad 2 -> plateau, count restarts; 0.25 bad 1; 0.4 best; 0.4 bad 1
    seq = [0.1, 0.3, 0.3, 0.2, 0.25, 0.4, 0.4]
    assert [m.observe(v) for v in seq] == [False, False, False, True, False, False, False]
    assert m.state_dict() == {"best": 0.4, "bad": 1}


def test_plateau_min_mode_min_delta_and_nan():
    m = PlateauMonitor(mode="min", patience=3, min_delta=0.1)
    # loss-like: 1.0 best; 0.95 (gain 0.05 <= 0.1) bad 1; NaN ignored; 0.85 (gain 0.15 over 1.0) best;
    # 0.8, 0.78, 0.76 (gains 0.05, 0.07, 0.09 over 0.85) bad 1, 2, 3 -> plateau
    seq = [1.0, 0.95, float("nan"), 0.85, 0.8, 0.78, 0.76]
    assert [m.observe(v) for v in seq] == [False, False, False, False, False, False, True]
    assert m.best == 0.85 and m.bad == 0


def test_plateau_patience_one_fires_on_every_non_improvement():
    m = PlateauMonitor(patience=1)
    assert [m.observe(v) for v in [1.0, 1.0, 2.0, 1.5, 3.0]] == [False, True, False, True, False]


def test_plateau_state_round_trip():
    a = PlateauMonitor(patience=3)
    for v in [0.5, 0.4, 0.3]:
        a.observe(v)
    b = PlateauMonitor(patience=3)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    # both at best 0.5 with 2 bad values: the next non-improving value completes the plateau in each
    assert a.observe(0.45) is b.observe(0.45) is True


def test_due_waits_for_generation_boundary():
    r = ReferenceReset(every_steps=4, metric="reward", patience=1, period=2)
    assert [r.due(s) for s in range(1, 9)] == [None, None, None, "every_steps", None, None, None, "every_steps"]
    r.pending = True  # a plateau found after step 5 waits for step 6 (the next generation)
    assert [r.due(s) for s in (5, 6)] == [None, "plateau"]


# --------------------------------------------------------------------------------------------------- config errors
@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"ref_reset_steps": 2, "beta": 0.0}, r"ref_reset_steps=2 .* beta=0.0"),
        ({"ref_reset_metric": "reward", "beta": 0.0}, r"ref_reset_metric='reward' .* beta > 0"),
        ({"ref_reset_steps": 0, "beta": 0.1}, "ref_reset_steps must be a positive"),
        ({"ref_reset_steps": 2, "beta": 0.1, "sync_ref_model": True}, "sync_ref_model=True both"),
        ({"ref_reset_steps": 3, "beta": 0.1, "num_iterations": 2}, "multiple of 2"),
        ({"ref_reset_metric": "eval_reward", "beta": 0.1}, "eval_strategy='no'"),
        ({"ref_reset_metric": "reward", "beta": 0.1, "ref_reset_patience": 0}, "ref_reset_patience must be"),
        ({"ref_reset_metric": "reward", "beta": 0.1, "ref_reset_mode": "up"}, "ref_reset_mode must be one of"),
    ],
)
def test_config_errors_are_one_line(overrides, match, tmp_path):
    with pytest.raises(ValueError, match=match) as err:
        tiny_config(tmp_path, **overrides)
    assert "\n" not in str(err.value)


def test_options_off_add_nothing(tiny_model_dir, tmp_path):
    trainer = RecordingTrainer(
        model=tiny_model_dir,
        reward_funcs=[correctness_reward],
        args=tiny_config(tmp_path, beta=0.1),
        train_dataset=make_dataset(8),
    )
    assert trainer.reference_reset is None and "reference_reset" not in trainer.stateful_components
    assert not any(isinstance(cb, ReferenceReset) for cb in trainer.callback_handler.callbacks)


def test_card_cites_prorl_whenever_resets_are_on(tiny_model_dir, tmp_path):
    from trl_efficient.hub.card import card_data_from_trainer
    from trl_efficient.hub.papers import bibtex

    def card_papers(**overrides):
        args = tiny_config(tmp_path, beta=0.1, **overrides)
        trainer = RecordingTrainer(
            model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(8)
        )
        return card_data_from_trainer(trainer).papers

    assert card_papers(ref_reset_steps=2) == ["2505.24864"]  # whatever the recipe (here none)
    assert card_papers() == []
    assert "Prolonged Reinforcement Learning" in bibtex("2505.24864")


def test_peft_is_refused_in_one_line(tiny_model_dir, tmp_path):
    from peft import LoraConfig

    with pytest.raises(ValueError, match="cannot run with PEFT"):  # before the model loads
        RecordingTrainer(
            model=tiny_model_dir,
            reward_funcs=[correctness_reward],
            args=tiny_config(tmp_path, beta=0.1, ref_reset_steps=1),
            train_dataset=make_dataset(8),
            peft_config=LoraConfig(r=2, target_modules=["q_proj"]),
        )


# --------------------------------------------------------------------------------------------------------- a reset
def length_reward(completion_ids, **kwargs):
    """-L / 100: varies within every group of scripted rollouts (their filler lengths differ), so every step has a
    gradient; correctness alone left step 1 without one whenever its group was all wrong (then KL stays 0 at step 2)."""
    return [-len(ids) / 100 for ids in completion_ids]


def _scripted(model_dir, tmp_path, **overrides):
    """Scripted rollouts (tests/helpers.py), KL with beta 0.1, a learning rate that moves the tiny policy."""
    args = tiny_config(tmp_path, beta=0.1, learning_rate=1e-2, **overrides)
    return RecordingTrainer(
        model=model_dir, reward_funcs=[correctness_reward, length_reward], args=args, train_dataset=make_dataset(16)
    )


def _kl(trainer) -> list[float]:
    return [entry["kl"] for entry in trainer.state.log_history if "kl" in entry]


def test_reset_zeroes_kl_copies_policy_and_clears_optimizer(tiny_model_dir, tmp_path):
    trainer = _scripted(tiny_model_dir, tmp_path, max_steps=3, ref_reset_steps=2)
    seen = {}

    class AfterReset(TrainerCallback):  # added after the reset callback: runs after it at the same step
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 2:
                policy, reference = trainer.model.parameters(), trainer.ref_model.parameters()
                seen["equal"] = all(torch.equal(p, r) for p, r in zip(policy, reference, strict=True))
                seen["optimizer_state"] = len(trainer.optimizer.state)

    trainer.add_callback(AfterReset())
    trainer.train()
    assert seen == {"equal": True, "optimizer_state": 0}
    kl = _kl(trainer)
    # step 1: reference = initial policy = policy -> 0; step 2: the policy moved (lr 1e-2) -> > 0; step 3: reset at 2
    assert kl[0] == 0.0 and kl[1] > 1e-4 and kl[2] == 0.0
    assert trainer.reference_reset.state_dict()["events"] == [[2, "every_steps"]]
    assert [e["trl_efficient/ref_reset_count"] for e in trainer.state.log_history if "kl" in e] == [0.0, 1.0, 1.0]
    # the optimizer restarted at step 2: by the end it holds the state of one step (step 3) only
    assert all(int(s["step"]) == 1 for s in trainer.optimizer.state.values())


def test_without_optimizer_reset_the_moments_are_kept(tiny_model_dir, tmp_path):
    trainer = _scripted(tiny_model_dir, tmp_path, max_steps=2, ref_reset_steps=1, ref_reset_optimizer=False)
    trainer.train()
    assert trainer.reference_reset.count == 2
    assert all(int(s["step"]) == 2 for s in trainer.optimizer.state.values())


def test_plateau_on_training_reward_triggers_resets(tiny_model_dir, tmp_path):
    trainer = _scripted(tiny_model_dir, tmp_path, max_steps=4, ref_reset_metric="reward", ref_reset_patience=1)
    trainer.train()
    rewards = [e["reward"] for e in trainer.state.log_history if "reward" in e]
    m, expected = PlateauMonitor(patience=1), []
    for step, value in enumerate(rewards, start=1):  # the same rule by hand on the logged rewards
        if m.observe(value):
            expected.append([step, "plateau"])
    assert expected, rewards  # the scripted rewards do not rise every step
    assert trainer.reference_reset.events == expected


def test_plateau_on_evaluation_resets_at_that_step(tiny_model_dir, tmp_path):
    # the paper's trigger: validation stalls; TRL's evaluation runs after the step's own `on_step_end`, and the
    # reset happens right away (every step ends a generation batch here), before the checkpoint of that step
    evaluate = {"eval_strategy": "steps", "eval_steps": 1, "per_device_eval_batch_size": 4}
    args = tiny_config(tmp_path, beta=0.1, learning_rate=1e-2, max_steps=4, ref_reset_metric="eval_reward",
                       ref_reset_patience=1, **evaluate)  # fmt: skip
    trainer = RecordingTrainer(
        model=tiny_model_dir,
        reward_funcs=[correctness_reward, get_kimi_length_reward(warmup_ratio=0.0)],
        args=args,
        train_dataset=make_dataset(16),
        eval_dataset=make_dataset(4),
    )
    trainer.train()
    evals = [(e["step"], e["eval_reward"]) for e in trainer.state.log_history if "eval_reward" in e]
    m, expected = PlateauMonitor(patience=1), []
    for step, value in evals:
        if m.observe(value):
            expected.append([step, "plateau"])
    assert len(evals) == 4 and expected, evals  # the scripted evaluation rewards do not rise at every step
    assert trainer.reference_reset.events == expected
    kl = {e["step"]: e["kl"] for e in trainer.state.log_history if "kl" in e}
    assert all(kl[step + 1] == 0.0 for step, _ in expected if step + 1 in kl)


def test_hard_reset_equals_trl_sync_at_alpha_one(tiny_model_dir, tmp_path):
    """Differential: with the optimizer reset off, a reset every 2 steps is TRL's `sync_ref_model` with
    `ref_model_mixup_alpha=1.0, ref_model_sync_steps=2`: the same logged TRL metrics and the same weights."""
    ours = _scripted(tiny_model_dir, tmp_path / "ours", max_steps=3, ref_reset_steps=2, ref_reset_optimizer=False)
    ours.train()
    trl = _scripted(tiny_model_dir, tmp_path / "trl", max_steps=3, sync_ref_model=True, ref_model_mixup_alpha=1.0,
                    ref_model_sync_steps=2)  # fmt: skip
    trl.train()
    for a, b in zip(ours.state.log_history, trl.state.log_history, strict=True):
        for key in ("loss", "kl", "reward", "grad_norm"):
            if key in b:
                assert a[key] == b[key], key
    for model in ("model", "ref_model"):
        pairs = zip(getattr(ours, model).parameters(), getattr(trl, model).parameters(), strict=True)
        assert all(torch.equal(p, q) for p, q in pairs), model


# ---------------------------------------------------------------------------------------------------------- resume
def _resume_run(model_dir, out, tok, max_steps):
    # prompt_sampler "repeat": TRL's prompt order with exact resume across epochs (3 prompts, 1 per step)
    return resume_trainer(
        model_dir, out, tok, max_steps, beta=0.1, ref_reset_steps=2, save_steps=3, prompt_sampler="repeat"
    )


def test_resume_across_a_reset_is_bit_exact(tiny_model_dir, tiny_tokenizer, tmp_path):
    # resets at steps 2 and 4; checkpoint-3 holds the reference of step 2 (no longer the initial model)
    full = _resume_run(tiny_model_dir, tmp_path / "full", tiny_tokenizer, max_steps=5)
    full.train()
    ckpt = os.path.join(tmp_path, "full", "checkpoint-3")
    assert os.path.exists(os.path.join(ckpt, REF_MODEL_FILE))
    with open(os.path.join(ckpt, "trl_efficient_state.json")) as f:
        assert json.load(f)["reference_reset"]["events"] == [[2, "every_steps"]]

    resumed = _resume_run(tiny_model_dir, tmp_path / "resumed", tiny_tokenizer, max_steps=5)
    resumed.train(resume_from_checkpoint=ckpt)
    for a, b in zip(full.records[3:], resumed.records, strict=True):
        assert a["lengths"] == b["lengths"] and a["rewards"] == b["rewards"] and a["advantages"] == b["advantages"]
    full_logs = {e["step"]: e for e in full.state.log_history if "kl" in e}
    resumed_logs = {e["step"]: e for e in resumed.state.log_history if "kl" in e}
    for step in (4, 5):  # step 4: KL to the reference of step 2 (read back from the checkpoint); step 5: after reset 2
        assert (
            resumed_logs[step]["kl"] == full_logs[step]["kl"] and resumed_logs[step]["loss"] == full_logs[step]["loss"]
        )
    assert full_logs[4]["kl"] > 0 and full_logs[5]["kl"] == 0.0
    for model in ("model", "ref_model"):
        pairs = zip(getattr(full, model).parameters(), getattr(resumed, model).parameters(), strict=True)
        assert all(torch.equal(p, q) for p, q in pairs), model
    assert resumed.reference_reset.state_dict() == full.reference_reset.state_dict()


def test_checkpoint_without_reference_weights_is_refused(tiny_model_dir, tiny_tokenizer, tmp_path):
    full = _resume_run(tiny_model_dir, tmp_path / "full", tiny_tokenizer, max_steps=3)
    full.train()
    ckpt = os.path.join(tmp_path, "full", "checkpoint-3")
    os.remove(os.path.join(ckpt, REF_MODEL_FILE))
    resumed = _resume_run(tiny_model_dir, tmp_path / "resumed", tiny_tokenizer, max_steps=4)
    with pytest.raises(FileNotFoundError, match="cannot resume exactly"):
        resumed.train(resume_from_checkpoint=ckpt)
