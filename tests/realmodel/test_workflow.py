"""The user's workflow after training, on SmolLM2-135M-Instruct: `trl-efficient eval` of a trained run, `merge`
(uniform, and LoRA into its base) and `push` to the suite's local Hub server (tests/fake_hub.py, as
tests/hub/test_push.py does)."""

import json
import os
import subprocess
import sys

import pytest
import torch
from fake_hub import start_fake_hub
from huggingface_hub import ModelCard
from transformers import AutoModelForCausalLM

from trl_efficient.api.training import train_main
from trl_efficient.cli import main

pytestmark = pytest.mark.realmodel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMIT, TOKENS = 4, 48  # evaluation: GSM8K problems, new tokens
# Kimi's length reward is 0 during its warm-up (the recipe's warmup_ratio), so a one-step run of the recipe as shipped
# has zero advantages when no answer is correct (none is, at this size); without the warm-up the lengths, which the
# EOS bias makes differ, give the step a gradient.
NO_WARMUP = json.dumps({"kimi_length": {"warmup_ratio": 0.0}})


def _state(path):
    return AutoModelForCausalLM.from_pretrained(path).state_dict()


@pytest.fixture(scope="module")
def full_run(smollm2_dir, real_cli_args, tmp_path_factory):
    """One kimi step (learning rate 1e-4, no length warm-up, lengths that differ: the weights move), then
    `trl-efficient eval` of the result into the run's `eval/` folder, where `push` looks for it."""
    run = tmp_path_factory.mktemp("real") / "smollm2-kimi"
    torch.set_num_threads(1)
    train_main(
        [
            "--config",
            os.path.join(ROOT, "configs", "kimi.yaml"),
            *real_cli_args(smollm2_dir, run, learning_rate=1e-4, reward_kwargs=NO_WARMUP),
        ]
    )
    argv = [
        "eval",
        "--model",
        str(run),
        "--benchmarks",
        "gsm8k",
        "--modes",
        "plain",
        "--limit",
        str(LIMIT),
        "--n",
        "1",
        "--max-new-tokens",
        str(TOKENS),
        "--output-dir",
        str(run / "eval"),
        "--no-plot",
        "--quiet",
    ]
    assert main(argv) == 0
    return run


def test_eval_reports_accuracy_and_tokens(full_run, smollm2_tokenizer):
    with open(full_run / "eval" / "results.json") as f:
        (entry,) = json.load(f)["results"]
    result = entry["result"]
    assert (entry["mode"], entry["benchmark"], result["num_problems"]) == ("plain", "gsm8k", LIMIT)
    assert 0.0 <= result["accuracy"] <= 1.0
    samples = [
        json.loads(line)
        for name in os.listdir(full_run / "eval")
        if os.path.isdir(full_run / "eval" / name)
        for dirpath, _, files in os.walk(full_run / "eval" / name)
        for file in files
        if file.endswith(".samples.jsonl")
        for line in open(os.path.join(dirpath, file), encoding="utf-8")
    ]
    assert len(samples) == LIMIT, samples
    tokens = [s["tokens"] for s in samples]
    assert all(0 < n <= TOKENS for n in tokens)
    assert result["mean_tokens"] == pytest.approx(sum(tokens) / len(tokens))


def test_uniform_merge_is_the_average(full_run, smollm2_dir, tmp_path):
    out = tmp_path / "merged"
    argv = ["merge", "--base", smollm2_dir, "--trained", str(full_run), "--alpha", "0.5", "--output", str(out)]
    assert main(argv) == 0
    base, trained, merged = _state(smollm2_dir), _state(full_run), _state(out)
    moved = [k for k in base if not torch.equal(base[k], trained[k])]
    assert moved, "one step at lr 1e-4 moved no weight"
    for key in base:  # merged = 0.5 * base + 0.5 * trained, computed here with torch ops
        torch.testing.assert_close(merged[key], 0.5 * base[key] + 0.5 * trained[key], rtol=1e-6, atol=1e-7)
    assert "merge" in open(out / "README.md", encoding="utf-8").read().lower()


def test_lora_run_merges_into_its_base(smollm2_dir, real_cli_args, tmp_path):
    from peft import PeftModel

    run = tmp_path / "lora"
    lora = {"use_peft": True, "lora_r": 4, "lora_alpha": 8, "learning_rate": 1e-3, "reward_kwargs": NO_WARMUP}
    train_main(["--config", os.path.join(ROOT, "configs", "kimi.yaml"), *real_cli_args(smollm2_dir, run, **lora)])
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(os.listdir(run))
    out = tmp_path / "merged"
    assert (
        main(["merge", "--method", "lora", "--adapter", str(run), "--output", str(out)]) == 0
    )  # base from the adapter
    expected = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(smollm2_dir), str(run))
    expected = expected.merge_and_unload().state_dict()
    merged, base = _state(out), _state(smollm2_dir)
    assert set(merged) == set(expected)
    assert any(not torch.equal(merged[k], base[k]) for k in merged), "the adapter changed nothing"
    for key in merged:
        torch.testing.assert_close(merged[key], expected[key], rtol=0, atol=1e-6)


def test_push_to_a_local_hub(full_run, tmp_path):
    root = tmp_path / "hub"
    server = start_fake_hub(str(root))
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(
        HF_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}",
        HF_TOKEN="hf_RealModelTierToken0123",
        HF_HOME=str(tmp_path / "hf_home"),
        PYTHONPATH=os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]),
    )
    try:
        argv = [sys.executable, "-m", "trl_efficient.cli", "push", str(full_run), "--repo-id", "tester/smollm2-kimi"]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr[-3000:]
    repo = root / "tester" / "smollm2-kimi"
    for name in (
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "README.md",
        "trl_efficient_card.json",
        "trl_efficient_summary.json",
        "eval/results.json",
    ):
        assert (repo / name).is_file(), sorted(os.listdir(repo))
    assert (repo / "model.safetensors").read_bytes() == (full_run / "model.safetensors").read_bytes()
    assert (repo / "chat_template.jinja").read_text() == (full_run / "chat_template.jinja").read_text()
    card = ModelCard.load(repo / "README.md")
    assert "model_id = 'tester/smollm2-kimi'" in card.text and "`kimi`" in card.text
    (result,) = [r for r in card.data.eval_results if r.metric_type == "accuracy"]
    with open(full_run / "eval" / "results.json") as f:
        assert result.metric_value == json.load(f)["results"][0]["result"]["accuracy"]
