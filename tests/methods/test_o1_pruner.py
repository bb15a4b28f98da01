"""O1-Pruner (methods.md §10): the length-harmonizing weight as a reward, the reference statistics of the frozen
initial model (from sample records, cached, checkpointed) and the recipe trained from its YAML.

Expected values are computed by hand from the released code's formula (the authors' O1-Pruner repository at 04c0863,
`o1_scripts/construct_dataset.py`): `w = (avg_length - length) / length + alpha * (correct - avg_acc)`, clipped to
[-2, 4], alpha = 5."""

import json
import os

import pytest
from helpers import make_dataset, tiny_cli_args

import trl_efficient.methods.o1_pruner as o1
from trl_efficient.methods.o1_pruner import (
    O1_STATE_KEY,
    O1_STATS_FILE,
    apply_reference_stats,
    load_or_sample_reference_stats,
    load_reference_stats,
    prepare_dataset,
    reference_stats_from_records,
)
from trl_efficient.recipes import get_recipe
from trl_efficient.rewards.o1_pruner import get_o1_pruner_reward, o1_pruner_weight
from trl_efficient.trainer import EfficientGRPOConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------------------------------------------ weight
@pytest.mark.parametrize(
    "length, correct, ref_length, ref_accuracy, expected",
    [
        (100, 1, 150, 0.5, 3.0),  # 150/100 - 1 + 5 (1 - 0.5) = 0.5 + 2.5
        (200, 0, 100, 0.25, -1.75),  # 0.5 - 1 + 5 (0 - 0.25) = -0.5 - 1.25
        (120, 1, 120, 1.0, 0.0),  # as long and as accurate as the initial model
        (80, 0, 100, 0.0, 0.25),  # 1.25 - 1 + 0
        (300, 0, 150, 0.75, -2.0),  # 0.5 - 1 - 3.75 = -4.25 -> lower clip
        (100, 0, 100, 0.4, -2.0),  # 0 - 2.0: exactly the lower bound
        (50, 1, 400, 0.5, 4.0),  # 8 - 1 + 2.5 = 9.5 -> upper clip
        (0, 0, 400, 0.5, -2.0),  # empty completion: the lower clip (proposed default)
        (10, 0, 0, 0.0, -1.0),  # every reference sample empty in this scope: 0 - 1 + 0
    ],
)
def test_weight_by_hand(length, correct, ref_length, ref_accuracy, expected):
    assert o1_pruner_weight(length, correct, ref_length, ref_accuracy) == pytest.approx(expected, abs=1e-12)


def test_weight_alpha_and_clip_are_settings():
    # alpha 1: 2 - 1 + (1 - 0.5) = 1.5; clip [-1, 1] -> 1.0
    assert o1_pruner_weight(50, 1, 100, 0.5, alpha=1.0) == 1.5
    assert o1_pruner_weight(50, 1, 100, 0.5, alpha=1.0, clip=(-1.0, 1.0)) == 1.0
    with pytest.raises(ValueError, match="alpha"):
        get_o1_pruner_reward(alpha=-1)
    with pytest.raises(ValueError, match="clip"):
        get_o1_pruner_reward(clip=(4, -2))


def test_reward_on_completions_and_edges():
    reward = get_o1_pruner_reward(length_unit="chars")
    think = "<think>" + "x" * 25 + "</think>"  # 40 characters
    completions = [
        think + r"\boxed{4}",  # 49 chars, correct: 98/49 - 1 + 5 (1 - 0.5) = 3.5
        think + r"\boxed{5}",  # 49 chars, wrong: 2 - 1 - 2.5 = -1.5
        "",  # empty completion: lower clip
        "   ",  # whitespace only counts as empty
        r"\boxed{4}",  # no thinking block: wrong (require_think_close); 98/9 - 1 - 2.5 = 7.39 -> 4.0
        think,  # closed thinking, no answer: wrong; 98/40 - 1 - 2.5 = -1.05
        think + r"\boxed{4}",  # gold does not parse: not scored
    ]
    out = reward(
        completions=completions,
        solution=["4"] * 6 + [""],
        o1_ref_length=[98.0] * 7,
        o1_ref_accuracy=[0.5] * 7,
    )
    assert out[:6] == pytest.approx([3.5, -1.5, -2.0, -2.0, 4.0, -1.05]) and out[6] is None
    # tokens: the length is len(completion_ids); EOS-only text is empty -> -2;
    # 4 ids, correct: 8/4 - 1 + 5 (1 - 0) = 6 -> 4; 16 ids, correct, acc_ref 1: 8/16 - 1 + 0 = -0.5
    tokens = get_o1_pruner_reward()
    out = tokens(completions=["", r"<think>a</think>\boxed{4}", r"<think>a</think>\boxed{4}"], solution=["4"] * 3,
                 o1_ref_length=[8.0, 8.0, 8.0], o1_ref_accuracy=[0.0, 0.0, 1.0],
                 completion_ids=[[2], [1, 1, 1, 1], [1] * 16])  # fmt: skip
    assert out == [-2.0, 4.0, pytest.approx(8 / 16 - 1 + 0)]
    with pytest.raises(ValueError, match="'o1_ref_accuracy' must be"):
        reward(completions=["x"], solution=["4"], o1_ref_length=[10.0], o1_ref_accuracy=[1.5])
    with pytest.raises(ValueError, match="'o1_ref_length' must be"):
        reward(completions=["x"], solution=["4"], o1_ref_length=[float("nan")], o1_ref_accuracy=[0.5])


# -------------------------------------------------------------------------------------------------- statistics
def test_stats_from_records_by_hand():
    rows = [(0, 10, True), (0, 20, False), (0, 60, True), (1, 7, False), (1, 8, False), (1, 0, False)]
    records = [{"idx": i, "question": f"q{i}", "length": n, "correct": c} for i, n, c in rows]
    out = reference_stats_from_records(records, k=3)
    # problem 0: (10 + 20 + 60) / 3 = 30, 2 of 3 correct; problem 1: 15 / 3 = 5, none correct
    assert out == [
        {"idx": 0, "question": "q0", "k": 3, "ref_length": 30.0, "ref_accuracy": pytest.approx(2 / 3)},
        {"idx": 1, "question": "q1", "k": 3, "ref_length": 5.0, "ref_accuracy": 0.0},
    ]
    with pytest.raises(ValueError, match="groups of k = 4"):
        reference_stats_from_records(records, k=4)
    ds = apply_reference_stats(make_dataset(2), out)
    assert ds["o1_ref_length"] == [30.0, 5.0] and ds["o1_ref_accuracy"] == [pytest.approx(2 / 3), 0.0]
    with pytest.raises(ValueError, match="no O1-Pruner reference statistics"):
        apply_reference_stats(make_dataset(3), out)
    assert apply_reference_stats(make_dataset(3), out, unmatched="drop")["idx"] == [0, 1]


def test_cache_is_reused_and_keyed(tmp_path):
    calls = []

    def sample():
        calls.append(1)
        return [{"idx": 0, "question": "q", "k": 2, "ref_length": 3.0, "ref_accuracy": 0.5}]

    path = str(tmp_path / "ref.json")
    key = {"model": "m", "dataset": "d", "k": 2}
    first, sampled = load_or_sample_reference_stats(path, key, sample)
    second, again = load_or_sample_reference_stats(path, dict(key), sample)
    assert (sampled, again, len(calls)) == (True, False, 1) and first == second == load_reference_stats(path)
    with pytest.raises(ValueError, match="k differ"):
        load_or_sample_reference_stats(path, {**key, "k": 3}, sample)
    assert len(calls) == 1


def _args(tmp_path, **kw):
    return EfficientGRPOConfig(output_dir=str(tmp_path / "run"), report_to="none", use_cpu=True,
                               max_completion_length=6, temperature=1.0, **kw)  # fmt: skip


def test_prepare_dataset_samples_once_with_the_frozen_model(tmp_path, tiny_model_dir, tiny_tokenizer, monkeypatch):
    calls = []
    real = o1.sample_rollouts

    def counting(*args, **kwargs):
        calls.append(kwargs.get("max_new_tokens"))
        return real(*args, **kwargs)

    monkeypatch.setattr(o1, "sample_rollouts", counting)
    args, ds = _args(tmp_path), make_dataset(3)
    out = get_recipe("o1-pruner").apply_prepare_dataset(ds, args, tiny_tokenizer, k=2)
    payload = load_reference_stats(os.path.join(args.output_dir, O1_STATS_FILE))
    assert calls == [6] and payload["key"]["k"] == 2 and len(payload["stats"]) == 3
    # a whole-completion token length is between 1 (EOS) and the cap; the columns are the file's
    assert all(1 <= r["ref_length"] <= 6 and r["ref_accuracy"] in (0.0, 0.5, 1.0) for r in payload["stats"])
    assert out["o1_ref_length"] == [r["ref_length"] for r in payload["stats"]]
    again = prepare_dataset(ds, args, tiny_tokenizer, k=2)  # same model/dataset/K: the cache, no sampling
    assert calls == [6] and again["o1_ref_length"] == out["o1_ref_length"]
    with pytest.raises(ValueError, match="k differ"):
        prepare_dataset(ds, args, tiny_tokenizer, k=3)
    with pytest.raises(ValueError, match="unknown"):
        prepare_dataset(ds, args, tiny_tokenizer, n=3)
    # another cache path: sampled there once, and copied into the output dir
    other = str(tmp_path / "elsewhere.json")
    prepare_dataset(ds, _args(tmp_path / "b"), tiny_tokenizer, k=2, stats=other)
    assert len(calls) == 2 and os.path.exists(other)
    assert load_reference_stats(str(tmp_path / "b" / "run" / O1_STATS_FILE)) == load_reference_stats(other)


def test_reward_state_round_trip():
    payload = {"key": {"k": 2}, "stats": [{"idx": 0, "ref_length": 3.0, "ref_accuracy": 0.5}]}
    reward = get_o1_pruner_reward(reference=payload)
    restored = get_o1_pruner_reward()
    restored.load_state_dict(json.loads(json.dumps(reward.state_dict())))
    assert restored.state_dict() == payload and restored.state_key == "o1_pruner_reference"
    other = get_o1_pruner_reward(reference={"key": {"k": 2}, "stats": [{"idx": 0, "ref_length": 4.0,
                                                                         "ref_accuracy": 0.5}]})  # fmt: skip
    with pytest.raises(ValueError, match="differ from this run's"):
        other.load_state_dict(payload)


# ------------------------------------------------------------------------------------------- training and resume
def test_trains_from_yaml_and_resumes_without_resampling(tmp_path, monkeypatch):
    from trl_efficient.api.training import train_main

    calls = []
    real = o1.sample_rollouts

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(o1, "sample_rollouts", counting)
    monkeypatch.chdir(ROOT)
    run = tmp_path / "run"
    cli = tiny_cli_args(run, max_completion_length=12, dataset_limit=8, save_strategy="steps", save_steps=1)
    extra = ["--recipe_kwargs", json.dumps({"k": 2})]
    train_main(["--config", "configs/o1-pruner.yaml", *cli, *extra])
    assert len(calls) == 1
    with open(run / "trl_efficient_summary.json") as f:
        assert json.load(f)["recipe"] == "o1-pruner"
    stats = load_reference_stats(str(run / O1_STATS_FILE))
    assert len(stats["stats"]) == 8 and stats["key"]["k"] == 2
    for step in (1, 2):  # the statistics travel in every checkpoint
        with open(run / f"checkpoint-{step}" / "trl_efficient_state.json") as f:
            assert json.load(f)[O1_STATE_KEY] == stats
    # resume from checkpoint-1 with the output-dir copy gone: the checkpoint's statistics, no resampling
    os.remove(run / O1_STATS_FILE)
    train_main(["--config", "configs/o1-pruner.yaml", *cli, *extra,
                "--resume_from_checkpoint", str(run / "checkpoint-1")])  # fmt: skip
    assert len(calls) == 1 and load_reference_stats(str(run / O1_STATS_FILE)) == stats


# ------------------------------------------------------------------------------------------- the sampling command
def test_command_samples_then_reuses(tmp_path, capsys):
    out = str(tmp_path / "ref.json")
    argv = ["--model_name_or_path", "tiny:qwen2-16", "--dataset_name", "gsm8k", "--dataset_limit", "3", "--k", "2",
            "--max_new_tokens", "4", "--output", out]  # fmt: skip
    assert o1.main(argv) == 0 and "(sampled)" in capsys.readouterr().out
    payload = load_reference_stats(out)
    assert len(payload["stats"]) == 3 and all(r["k"] == 2 and 1 <= r["ref_length"] <= 4 for r in payload["stats"])
    assert o1.main(argv) == 0 and "(cached)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="max_new_tokens differ"):
        o1.main([*argv[:-4], "--max_new_tokens", "5", "--output", out])


@pytest.mark.vllm
def test_command_with_the_vllm_backend(tmp_path):
    import subprocess
    import sys

    pytest.importorskip("vllm")
    from trl_efficient.testing.tiny import save_tiny_model

    model = save_tiny_model(str(tmp_path / "tiny-qwen2-128"))  # head_dim 64: vLLM-CPU rejects smaller heads
    out = str(tmp_path / "ref.json")
    cmd = [sys.executable, "-m", "trl_efficient.methods.o1_pruner", "--backend", "vllm", "--model_name_or_path", model,
           "--dataset_name", "gsm8k", "--dataset_limit", "2", "--k", "3", "--max_new_tokens", "8",
           "--vllm_max_model_len", "512", "--vllm_enforce_eager", "true", "--output", out]  # fmt: skip
    proc = subprocess.run(cmd, env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    payload = load_reference_stats(out)
    # k = 3 samples per problem (SamplingParams.n), whole-completion tokens within the cap
    assert [r["k"] for r in payload["stats"]] == [3, 3] and all(0 < r["ref_length"] <= 8 for r in payload["stats"])


def test_vllm_profile_folds_n_samples_per_prompt(monkeypatch, tiny_tokenizer):
    # the vLLM pre-pass asks for n samples in one request and gets n consecutive records (fake vllm module: the real
    # one runs in the `vllm` tier above)
    import sys
    import types

    from trl_efficient.core.lengths import LengthMeter
    from trl_efficient.methods.saber import profile_dataset_vllm

    seen = {}

    class SamplingParams:
        def __init__(self, **kw):
            seen["params"] = kw

    class LLM:
        def __init__(self, model, seed, **kw):
            pass

        def generate(self, prompts, params, use_tqdm=True):
            def output(text, reason):
                return types.SimpleNamespace(token_ids=tiny_tokenizer.encode(text), finish_reason=reason)

            texts = [(r"<think>a</think>\boxed{42}", "stop"), ("<think>abc def", "length"), ("", "stop")]
            return [types.SimpleNamespace(outputs=[output(t, r) for t, r in texts]) for _ in prompts]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    meter = LengthMeter("chars", "total")
    records = profile_dataset_vllm("m", tiny_tokenizer, make_dataset(2), n=3, length_meter=meter)
    assert seen["params"]["n"] == 3 and [r["idx"] for r in records] == [0, 0, 0, 1, 1, 1]
    # problem 0 (gold 42): lengths 26, 14, 0 chars -> 40 / 3; one of three correct
    stats = reference_stats_from_records(records, k=3)
    assert stats[0]["ref_length"] == pytest.approx(40 / 3) and stats[0]["ref_accuracy"] == pytest.approx(1 / 3)
    assert [r["truncated"] for r in records[:3]] == [False, True, False]
    assert stats[1]["ref_accuracy"] == 0.0  # problem 1's gold is 5
