"""The testbed base model (reduced size), recipe comparison and the quickstart hooks, end to end on CPU.

Default tier: the `small` base (trained in seconds into a temporary cache) and 1-step comparisons, to test the
plumbing. The `slow` tier trains the real `testbed:base` and checks that it over-thinks and that length recipes cut
tokens at kept accuracy.
"""

import json
import os

import pytest


@pytest.fixture(scope="module")
def testbed_cache(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tbcache"))
    old = os.environ.get("TRL_EFFICIENT_CACHE")
    os.environ["TRL_EFFICIENT_CACHE"] = root
    yield root
    if old is None:
        os.environ.pop("TRL_EFFICIENT_CACHE", None)
    else:
        os.environ["TRL_EFFICIENT_CACHE"] = old


@pytest.fixture(scope="module")
def small_base(testbed_cache):
    from trl_efficient.overthinking.base import resolve_base_model

    return resolve_base_model("testbed:small")


def test_small_base_is_cached_and_loadable(small_base, testbed_cache):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_efficient.core.models import resolve_model_name
    from trl_efficient.overthinking.base import BASE_MODEL_SIZES

    assert small_base.startswith(os.path.join(testbed_cache, "testbed", "small-"))
    info = json.load(open(os.path.join(small_base, "trl_efficient_testbed.json")))
    assert info["config"]["max_steps"] == BASE_MODEL_SIZES["small"].max_steps
    stamp = os.path.getmtime(os.path.join(small_base, "config.json"))
    assert resolve_model_name("testbed:small") == small_base  # cached: not retrained
    assert os.path.getmtime(os.path.join(small_base, "config.json")) == stamp
    tok = AutoTokenizer.from_pretrained(small_base)
    model = AutoModelForCausalLM.from_pretrained(small_base)
    assert model.config.vocab_size == len(tok) and tok.eos_token == "<|im_end|>"
    assert resolve_model_name("Qwen/Qwen2.5-0.5B") == "Qwen/Qwen2.5-0.5B"


def test_config_key_changes_with_settings():
    from trl_efficient.overthinking.base import BaseModelConfig

    assert BaseModelConfig().key() != BaseModelConfig(max_steps=1).key()


def test_evaluate_testbed_reports_accounting(small_base):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_efficient.overthinking.data import load_testbed_dataset
    from trl_efficient_testbed.runner import evaluate_testbed

    tok, model = AutoTokenizer.from_pretrained(small_base), AutoModelForCausalLM.from_pretrained(small_base)
    s = evaluate_testbed(model, tok, load_testbed_dataset("test", 4, max_ops=3), num_samples=2, max_new_tokens=24)
    assert s["n"] == 8 and s["num_samples"] == 8 and 0 <= s["redundant_share"] <= 1
    assert s["mean_floor_tokens"] > 0 and set(s["by_difficulty"]) <= {"1", "2", "3"}
    rec = s["records"]  # one entry per completion, task-major: the cells of the intervals
    assert rec["task"] == [0, 0, 1, 1, 2, 2, 3, 3] and rec["sample"] == [0, 1] * 4
    assert sum(rec["tokens"]) / 8 == s["mean_tokens"] and sum(rec["correct"]) / 8 == s["accuracy"]
    assert len(rec["useful_checks"]) == len(rec["useless_checks"]) == 8


def test_eval_cli_on_testbed_benchmark(small_base, tmp_path):
    from trl_efficient.eval.cli import main

    out = tmp_path / "e"
    assert main(["--model", "testbed:small", "--benchmarks", "testbed", "--limit", "3", "--max-new-tokens", "16",
                 "--output-dir", str(out), "--quiet", "--no-plot"]) == 0  # fmt: skip
    entry = json.loads((out / "testbed_small" / "plain" / "testbed.json").read_text())
    assert "redundant_share" in entry["result"]["extra"] and "floor_tokens" in entry["result"]["extra"]


def test_compare_two_recipes_one_step(small_base, tmp_path):
    from trl_efficient_testbed.runner import TestbedSettings, compare

    settings = TestbedSettings(base_model="testbed:small", max_steps=1, num_train=16, num_eval=4, eval_samples=1,
                               per_device_train_batch_size=8, num_generations=4, max_completion_length=24,
                               max_ops=3, seeds=1, check_eval=2, bootstrap=100)  # fmt: skip
    out = compare(["grpo", "kimi"], settings, str(tmp_path / "cmp"), show_progress=False)
    assert [r["recipe"] for r in out["rows"]] == ["base", "grpo", "kimi"]
    for name in ("json", "markdown", "plot", "per_difficulty", "checks"):
        assert os.path.isfile(out["files"][name])
    md = open(out["files"]["markdown"]).read()
    assert "| kimi |" in md and "floor" in md
    (path,) = (tmp_path / "cmp" / "runs" / "kimi").glob("seed0-*.json")
    saved = json.load(open(path))
    assert saved["key"]["settings"]["max_steps"] == 1 and saved["log_history"] and saved["seed"] == 0
    assert len(saved["records"]["tokens"]) == 4 and not list((tmp_path / "cmp" / "runs" / "kimi").glob("*/"))
    # cached: a second call reuses the results without training; kimi's reference is then the base model
    stamp = os.path.getmtime(path)
    again = compare(["kimi"], settings, str(tmp_path / "cmp"), show_progress=False)
    assert os.path.getmtime(path) == stamp and again["rows"][1]["mean_tokens"] == out["rows"][2]["mean_tokens"]
    assert out["rows"][2]["method_check"]["claim"].startswith("shorter than grpo")
    assert again["rows"][1]["method_check"]["claim"].startswith("shorter than base")
    assert out["rows"][2]["num_generations"] == 4 and "G |" in md and "Testbed scaling rules" in md


def test_conditioned_recipe_is_checked_against_its_matching_control_under_the_same_prompts(small_base, tmp_path):
    """Protocol 1: a conditioned recipe's check compares it with GRPO (same seeds) evaluated under the same prompts
    (`grpo-prompted`, trained with the comparison), no longer with the base model; both evaluations are reused."""
    from trl_efficient_testbed.runner import TestbedSettings, compare

    settings = TestbedSettings(base_model="testbed:small", max_steps=1, num_train=16, num_eval=4, eval_samples=1,
                               per_device_train_batch_size=8, num_generations=4, max_completion_length=24,
                               max_ops=3, check_eval=3, seeds=1, bootstrap=100)  # fmt: skip
    out = compare(["l1-max"], settings, str(tmp_path / "cmp"), show_progress=False)
    (base,) = (tmp_path / "cmp" / "runs" / "base").glob("*.json")
    (trained,) = (tmp_path / "cmp" / "runs" / "l1-max").glob("*.json")
    base, trained = json.load(open(base)), json.load(open(trained))
    # the base model is evaluated under every conditioned recipe's prompts, once: hbpo 4 budgets, l1 5 + 5 targets,
    # saber 2 tiers (16, 16, 24 at this cap), asrr 1, budgetthinker 3 budgets
    assert set(trained["modes"]) <= set(base["modes"]) and len(trained["modes"]) == 5 and len(base["modes"]) == 20
    assert all(len(r["lengths"]) == len(r["correct"]) == 3 for r in base["modes"].values())
    assert out["rows"][0]["tight_cap"] == 12 and "tight_truncated_fraction" in out["rows"][1]
    assert [r["recipe"] for r in out["rows"]] == ["base", "l1-max", "grpo-prompted"]
    (control,) = (tmp_path / "cmp" / "runs" / "grpo-prompted").glob("*.json")
    control = json.load(open(control))
    assert control["key"]["trains"] == "grpo" and set(trained["modes"]) <= set(control["modes"])
    assert len(control["modes"]) == len(base["modes"]) - 3  # every conditioned prompt but BudgetThinker's 3 budgets
    assert "(grpo-prompted) ->" in out["rows"][1]["method_check"]["measured"]
    # another conditioned recipe reuses the base model's and the control's evaluations
    stamps = {p: os.path.getmtime(p) for name in ("base", "grpo-prompted")
              for p in (tmp_path / "cmp" / "runs" / name).glob("*.json")}  # fmt: skip
    out = compare(["l1-exact"], settings, str(tmp_path / "cmp"), show_progress=False)
    assert {p: os.path.getmtime(p) for p in stamps} == stamps
    assert "(grpo-prompted) ->" in out["rows"][1]["method_check"]["measured"]


def test_quickstart_config_runs_through_train(small_base, tmp_path, monkeypatch):
    """configs/quickstart.yaml (what `trl-efficient train` runs with no arguments) through the real train path."""
    from trl_efficient.cli import main

    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    code = main(
        [
            "train",
            "--config",
            "configs/quickstart.yaml",
            "--model_name_or_path",
            "testbed:small",
            "--max_steps",
            "1",
            "--dataset_limit",
            "16",
            "--eval_limit",
            "2",
            "--eval_max_new_tokens",
            "8",
            "--max_completion_length",
            "24",
            "--per_device_train_batch_size",
            "8",
            "--num_generations",
            "4",
            "--output_dir",
            str(tmp_path / "qs"),
            "--save_strategy",
            "no",
        ]
    )
    assert code == 0
    summary = json.load(open(tmp_path / "qs" / "trl_efficient_summary.json"))
    assert summary["model"] == "testbed:small" and summary["before"]["num_samples"] == 2
    assert "redundant_share" in summary["after"]["extra"]


@pytest.mark.slow
def test_full_base_overthinks(tmp_path):
    """The real base model: well above zero redundant share, a computed floor, non-trivial accuracy."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_efficient.overthinking.base import resolve_base_model
    from trl_efficient.overthinking.data import load_testbed_dataset
    from trl_efficient_testbed.runner import evaluate_testbed

    path = resolve_base_model("testbed:base")
    tok, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
    s = evaluate_testbed(model, tok, load_testbed_dataset("test", 128), num_samples=2)
    assert s["redundant_share"] > 0.2 and s["mean_floor_tokens"] > 20 and s["accuracy"] > 0.4


@pytest.mark.slow
def test_length_recipe_cuts_tokens_at_kept_accuracy(tmp_path):
    from trl_efficient_testbed.runner import TestbedSettings, compare

    out = compare(["grpo", "kimi"], TestbedSettings(), str(tmp_path / "cmp"), workers=2)
    rows = {r["recipe"]: r for r in out["rows"]}
    assert rows["kimi"]["mean_tokens"] < 0.8 * rows["base"]["mean_tokens"]
    assert rows["kimi"]["accuracy"] >= rows["base"]["accuracy"] - 0.05
