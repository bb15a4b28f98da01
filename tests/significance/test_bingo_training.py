"""Bingo inside the trainers (tiny model, scripted rollouts): schedule updates and exact resume, a scorer server
that dies mid-training, plain GRPOTrainer, and the `bingo` recipe from its YAML."""

import json
import math
import os
import threading

import pytest
import torch
from bingo_testing import WordScorer, start_server, stop_server
from helpers import RecordingTrainer, ScriptedGenerationMixin, make_dataset, tiny_cli_args, tiny_config
from transformers import TrainerCallback

from trl_efficient.rewards import correctness_reward
from trl_efficient.rewards.bingo import get_bingo_length_reward
from trl_efficient.significance import LLMLingua2Scorer, ScorerUnavailableError
from trl_efficient.significance.server import make_server

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
BASE = 5 / (math.pi / 2)


def _model_reference_reward(tiny_model_dir, tokenizer, scorer=None):
    return get_bingo_length_reward(
        scorer or WordScorer(), reference="model", reference_model=tiny_model_dir, tokenizer=tokenizer,
        reference_samples=2, max_new_tokens=8, reference_batch_size=1, device="cpu",
        generation_kwargs={"sequence_bias": [[[tokenizer.eos_token_id], 3.0]]},
        schedule_start=1, schedule_window=2,
    )  # fmt: skip


def _trainer(tiny_model_dir, out, reward, max_steps, cls=RecordingTrainer, dataset_size=3, **overrides):
    args = tiny_config(out, max_steps=max_steps, **overrides)
    return cls(model=tiny_model_dir, reward_funcs=[correctness_reward, reward], args=args,
               train_dataset=make_dataset(dataset_size))  # fmt: skip


def test_resume_restores_schedule_and_reference_cache(tiny_model_dir, tiny_tokenizer, tmp_path):
    full_reward = _model_reference_reward(tiny_model_dir, tiny_tokenizer)
    full = _trainer(tiny_model_dir, tmp_path / "full", full_reward, 4, save_strategy="steps", save_steps=2)
    full.train()
    assert full_reward.schedule.steps == 4 and full_reward.schedule.active  # start 1, window 2
    assert full_reward.schedule.coefficient != BASE
    assert 1 <= len(full_reward.reference_cache) <= 3  # one entry per distinct prompt seen (3 prompts)
    logged = full.state.log_history[0]
    assert logged["bingo/w_t"] == pytest.approx(BASE) and "bingo/insignificant_tokens" in logged
    ckpt = os.path.join(tmp_path, "full", "checkpoint-2")
    with open(os.path.join(ckpt, "trl_efficient_state.json")) as f:
        saved = json.load(f)["bingo_length_reward"]
    assert saved["schedule"]["steps"] == 2 and saved["reference_cache"]

    resumed_reward = _model_reference_reward(tiny_model_dir, tiny_tokenizer)
    calls = []
    original = resumed_reward.generator.generate
    resumed_reward.generator.generate = lambda prompts, keys: calls.append(list(keys)) or original(prompts, keys)
    resumed = _trainer(tiny_model_dir, tmp_path / "resumed", resumed_reward, 4, save_strategy="steps", save_steps=2)
    resumed.train(resume_from_checkpoint=ckpt)
    assert len(resumed.records) == 2
    for a, b in zip(full.records[2:], resumed.records, strict=True):
        torch.testing.assert_close(torch.tensor(a["rewards"]), torch.tensor(b["rewards"]), equal_nan=True)
        torch.testing.assert_close(torch.tensor(a["advantages"]), torch.tensor(b["advantages"]))
    assert resumed_reward.state_dict() == full_reward.state_dict()
    assert all(key not in saved["reference_cache"] for batch in calls for key in batch)  # never regenerated


def test_group_reference_rewards_in_trainer(tiny_model_dir, tmp_path):
    reward = get_bingo_length_reward(WordScorer(), reference="group")  # G from the trainer's group_size column
    trainer = _trainer(tiny_model_dir, tmp_path, reward, 2, dataset_size=8)
    trainer.train()
    for rec in trainer.records:
        for correct, shaped in rec["rewards"]:
            if correct == 1.0:
                assert 0.0 <= shaped <= 5.0 + 1e-6
            elif correct == 0.0:
                assert shaped <= 0.0
    assert reward.schedule.steps == 2


def _kill_after_first_step(kill):
    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                kill()

    return Kill()


def test_server_killed_mid_training_stops_the_run(tiny_model_dir, tiny_classifier_dir, tmp_path):
    proc, url = start_server(tiny_classifier_dir, tmp_path)
    try:
        client = {"retries": 1, "backoff": 0.05, "timeout": 5, "cache_size": 0}
        reward = get_bingo_length_reward(url, reference="group", scorer_kwargs=client)
        trainer = _trainer(tiny_model_dir, tmp_path / "out", reward, 3, dataset_size=8)
        trainer.add_callback(_kill_after_first_step(proc.kill))
        with pytest.raises(ScorerUnavailableError, match=url):
            trainer.train()
        assert len(trainer.records) == 1  # step 1 trained, step 2 never got rewards
    finally:
        stop_server(proc)


def test_server_dies_and_training_falls_back(tiny_model_dir, tiny_classifier_dir, tmp_path):
    server = make_server(LLMLingua2Scorer(tiny_classifier_dir, device="cpu"), port=0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()

    def kill():
        server.shutdown()
        server.server_close()

    reward = get_bingo_length_reward(
        server.url,
        reference="group",
        on_scorer_error="fallback",
        fallback_scorer=tiny_classifier_dir,
        scorer_kwargs={"retries": 0, "timeout": 5, "cache_size": 0, "device": "cpu"},
    )
    trainer = _trainer(tiny_model_dir, tmp_path, reward, 2, dataset_size=8)
    trainer.add_callback(_kill_after_first_step(kill))
    trainer.train()
    history = [h for h in trainer.state.log_history if "bingo/scorer_fallback" in h]
    assert [h["bingo/scorer_fallback"] for h in history] == [0.0, 1.0]
    assert all(not math.isnan(r[1]) for r in trainer.records[1]["rewards"] if not math.isnan(r[0]))


class PlainScriptedGRPO(ScriptedGenerationMixin):
    """trl's GRPOTrainer with scripted rollouts (no trl_efficient hooks)."""


def test_plain_grpo_trainer_updates_the_schedule_itself(tiny_model_dir, tiny_tokenizer, tmp_path):
    reward = _model_reference_reward(tiny_model_dir, tiny_tokenizer)
    trainer = PlainScriptedGRPO(model=tiny_model_dir, reward_funcs=[correctness_reward, reward],
                                args=tiny_config(tmp_path, max_steps=2), train_dataset=make_dataset(3))  # fmt: skip
    trainer.train()
    assert reward.schedule.steps == 2
    # 2 steps x 1 group (4 rows, G = 4) of make_dataset(3): one or two distinct prompts, keyed by the dataset prompt
    # (reference_key="prompt"), each with reference_samples = 2 cached (N_low, N_high) count pairs
    cache = reward.reference_cache
    dataset_keys = {reward.key_for(prompt=p) for p in make_dataset(3)["prompt"]}
    assert 1 <= len(cache) <= 2 and set(cache) <= dataset_keys
    assert all(len(v) == 2 and all(len(pair) == 2 and min(pair) >= 0 for pair in v) for v in cache.values())


def test_recipe_trains_two_steps_from_its_yaml(tiny_classifier_dir, tmp_path, monkeypatch):
    from trl_efficient.api.training import train_main

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_SCORER", tiny_classifier_dir)  # the environment ...
    kwargs = json.dumps({"reference_samples": 2, "schedule_start": 1, "schedule_window": 2})  # ... and recipe_kwargs
    argv = ["--config", "configs/bingo.yaml", *tiny_cli_args(tmp_path, save_strategy="steps", save_steps=2),
            "--recipe_kwargs", kwargs]  # fmt: skip
    summary = train_main(argv)
    assert summary["recipe"] == "bingo"
    with open(os.path.join(tmp_path, "checkpoint-2", "trl_efficient_state.json")) as f:
        state = json.load(f)["bingo_length_reward"]
    assert state["schedule"]["steps"] == 2 and state["reference_cache"]  # frozen tiny policy made references
