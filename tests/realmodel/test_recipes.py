"""Every registered recipe trains one step from its YAML on SmolLM2-135M-Instruct (the real-model tier, docs/testing.md
§1): real sampled generation with the model's own chat template, on 1 MATH prompt x 4 rollouts of at most 32 tokens,
float32, one thread. A new recipe is covered here by registering it.

What each run must show: the run ends with its summary and card; the gathered batch holds 4 rows whose lengths are
what TRL generated (at most the cap, and the ids every reward was given); every advantage and the logged loss are
finite. Per-recipe times: `--durations=0`."""

import json
import math
import os

import pytest
import torch
from huggingface_hub import ModelCard
from transformers import AutoTokenizer
from trl import GRPOTrainer

from trl_efficient.api.training import train_main
from trl_efficient.recipes import RECIPES
from trl_efficient.trainer import EfficientGRPOTrainer

pytestmark = pytest.mark.realmodel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
G, CAP = 4, 32  # the real_cli_args fixture's (conftest.py)

# Method values that cannot bind at this size (G = 4, 32 tokens), as tests/recipes/test_every_recipe.py shrinks them
SMALL = {
    "da-dler": {"advantage_kwargs": {"solve_rate_threshold": 0.75, "truncate_to": 8, "correct_boost": 0.1}},
    "dot": {"filter_kwargs": {"alpha": 1.0, "margin": 4}},  # G = 4: max z-score 1.5 < alpha 3 (methods.md §21)
    "gfpo": {"advantage_kwargs": {"k": 2, "metric": "shortest"}},
    # LASER-D's monitor generates monitor_prompts x monitor_rollouts completions for real
    "laser-d": {"reward_kwargs": {"laser_d": {"monitor_prompts": 1, "monitor_rollouts": 2}}},
    "laser-de": {"reward_kwargs": {"laser_de": {"monitor_prompts": 1, "monitor_rollouts": 2}}},
    "gfpo-adaptive": {
        "advantage_kwargs": {
            "k_by_quartile": [4, 4, 3, 2],
            "warmup_k": 4,
            "warmup_steps": 1,
            "warmup_prompts": 1,
            "metric": "shortest",
        }
    },
}


def _bingo(model_dir, tmp_path):
    # a real scorer offline: the self-information of the tokens under the model itself (no LLMLingua-2 download)
    return ["--recipe_kwargs", json.dumps({"scorer": f"self-information:{model_dir}", "reference_samples": 1})]


def _saber(model_dir, tmp_path):
    # SABER's base-model profile, made by the `profile` command with the real model (4 problems, the run's cap)
    from trl_efficient.cli import main

    path = str(tmp_path / "profile.jsonl")
    argv = ["profile", "--model_name_or_path", model_dir, "--dataset_name", "gsm8k", "--dataset_limit", "4",
            "--output", path, "--max_new_tokens", str(CAP), "--batch_size", "4"]  # fmt: skip
    assert main(argv) == 0
    return ["--dataset_name", "gsm8k", "--recipe_kwargs", json.dumps({"profile": path, "no_think_ratio": 0.1})]


def _frugal(model_dir, tmp_path):
    # the base model's pass rates, estimated at the start: 2 rollouts per problem at the run's cap
    return ["--recipe_kwargs", json.dumps({"estimate": True, "n": 2, "output": str(tmp_path / "rates.jsonl")})]


EXTRAS = {"bingo": _bingo, "saber": _saber, "frugal": _frugal}


def record_steps(monkeypatch) -> dict:
    """Record, for every generation batch, the completion ids the rewards were given (`GRPOTrainer._calculate_rewards`),
    the gathered lengths (`EfficientGRPOTrainer.group_stage`), the advantages, and every logged dict."""
    seen = {"reward_ids": [], "reward_texts": [], "lengths": [], "advantages": [], "mask_sums": [], "logs": []}
    calculate, group_stage = GRPOTrainer._calculate_rewards, EfficientGRPOTrainer.group_stage
    generate_and_score, log = EfficientGRPOTrainer._generate_and_score_completions, EfficientGRPOTrainer.log

    def calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        seen["reward_ids"].append([list(ids) for ids in completion_ids_list])
        seen["reward_texts"].append([c if isinstance(c, str) else c[-1]["content"] for c in completions])
        return calculate(self, inputs, prompts, completions, completion_ids_list)

    def record_group(self, batch, output):
        seen["lengths"].append(batch.lengths.tolist())
        return group_stage(self, batch, output)

    def record_output(self, inputs):
        out = generate_and_score(self, inputs)
        seen["advantages"].append(out["advantages"].tolist())
        seen["mask_sums"].append(out["completion_mask"].sum(1).tolist())  # the tokens TRL's loss counts
        return out

    def record_log(self, logs, *args, **kwargs):
        seen["logs"].append(dict(logs))
        return log(self, logs, *args, **kwargs)

    monkeypatch.setattr(GRPOTrainer, "_calculate_rewards", calculate_rewards)
    monkeypatch.setattr(EfficientGRPOTrainer, "group_stage", record_group)
    monkeypatch.setattr(EfficientGRPOTrainer, "_generate_and_score_completions", record_output)
    monkeypatch.setattr(EfficientGRPOTrainer, "log", record_log)
    return seen


@pytest.mark.parametrize("name", RECIPES.names())
def test_recipe_trains_one_step_on_the_real_model(name, smollm2_dir, real_cli_args, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    torch.set_num_threads(1)
    extra = EXTRAS[name](smollm2_dir, tmp_path) if name in EXTRAS else []
    small = {k: json.dumps(v) for k, v in SMALL.get(name, {}).items()}
    seen = record_steps(monkeypatch)
    run = tmp_path / "run"
    summary = train_main(["--config", f"configs/{name}.yaml", *real_cli_args(smollm2_dir, run, **small), *extra])

    assert summary["recipe"] == name
    with open(run / "trl_efficient_summary.json") as f:
        assert json.load(f)["recipe"] == name
    assert f"`{name}`" in ModelCard.load(run / "README.md").text
    assert seen["lengths"], "no generation batch was scored"
    first = seen["lengths"][0]
    assert len(first) == G, first
    assert all(0 < n <= CAP for n in first), first  # a recipe's own cap (budgets) may be lower, never higher
    # the length every reward saw is the token count of the completion it was given, and those ids are the text the
    # rewards read; the loss masks in exactly those tokens, or none for a row the recipe's completion filter dropped
    ids = seen["reward_ids"][0]
    assert first == [float(len(row)) for row in ids]
    dropped = 0.0 if RECIPES.get(name).config_overrides.get("completion_filter") else None
    assert all(m in (n, dropped) for m, n in zip(seen["mask_sums"][0], first)), (seen["mask_sums"][0], first)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    assert [tokenizer.decode(row, skip_special_tokens=True) for row in ids] == seen["reward_texts"][0]
    assert all(math.isfinite(a) for adv in seen["advantages"] for a in adv), seen["advantages"]
    losses = [entry["loss"] for entry in seen["logs"] if "loss" in entry]
    assert losses and all(math.isfinite(x) for x in losses), seen["logs"]
