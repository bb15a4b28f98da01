"""Registry-driven tests: every registered recipe has a YAML that agrees with it and trains 2 steps from it, and the
README's recipe and reward tables are the registry's (`trl-efficient recipes --markdown`). A new recipe is covered
here by registering it; no list to extend."""

import json
import os

import pytest
import yaml
from helpers import gold_scripted_generation, profile_with_cli, tiny_cli_args

from trl_efficient.api.training import parse_train_args, train_main
from trl_efficient.cli import main
from trl_efficient.recipes import RECIPES, REWARD_BUILDERS, REWARD_INFO, tables
from trl_efficient.recipes.presets import run_preset

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Keys tests/methods still read from the raw YAML (equal to the recipe's value, never different): to drop from these
# YAMLs once those tests read the parsed config instead.
# Method values that cannot bind at the tiny run's size (G = 4, 24 tokens), as the per-method tests shrink them
TINY = {
    "da-dler": {"advantage_kwargs": {"solve_rate_threshold": 0.75, "truncate_to": 6, "correct_boost": 0.1}},
    "dot": {"filter_kwargs": {"alpha": 1.0, "margin": 4}},  # G = 4: max z-score 1.5 < alpha 3 (methods.md §21)
    "gfpo": {"advantage_kwargs": {"k": 2, "metric": "shortest"}},
    # BroRL's N = 512 at the tiny run's G = 4; its chunked generation through the command line (2 rows per call)
    "brorl": {"num_generations": 4, "generation_chunk_size": 2},
    # LASER-D's monitor generates monitor_prompts x monitor_rollouts completions for real: a handful at the tiny size
    "laser-d": {"reward_kwargs": {"laser_d": {"monitor_prompts": 2, "monitor_rollouts": 2}}},
    "laser-de": {"reward_kwargs": {"laser_de": {"monitor_prompts": 2, "monitor_rollouts": 2}}},
    # GRSP's buckets at the scripted completions' size (their segments are a few tokens; the default edges are 32/128)
    "grsp": {"reward_kwargs": {"grsp": {"segmenter": "sentences", "bucket_bounds": [3, 6]}}},
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


def _tiny_args(name, output_dir, **extra):
    cli = {k: json.dumps(v) for k, v in TINY.get(name, {}).items()}
    return tiny_cli_args(output_dir, **cli, **extra)


def _yaml(name):
    path = os.path.join(ROOT, "configs", f"{name}.yaml")
    assert os.path.exists(path), f"recipe {name!r} has no configs/{name}.yaml"
    with open(path) as f:
        return path, yaml.safe_load(f)


@pytest.mark.parametrize("name", RECIPES.names())
def test_yaml_holds_only_what_differs_from_the_recipe(name, tmp_path):
    path, data = _yaml(name)
    assert data["recipe"] == name
    overrides = RECIPES.get(name).config_overrides
    for key in set(data) & set(overrides):  # a method setting lives in the recipe only
        verb = "restates" if data[key] == overrides[key] else "contradicts"
        raise AssertionError(f"configs/{name}.yaml {verb} the recipe's {key!r}: method settings live in the recipe")
    # a run setting equal to the preset's is left to the preset, unless its line cites the paper for it (§)
    preset = run_preset(data.get("run_defaults"))
    with open(path, encoding="utf-8") as f:
        lines = {line.split(":", 1)[0]: line for line in f if line[:1].isalpha()}
    restated = [k for k in set(data) & set(preset) if data[k] == preset[k] and "§" not in lines[k].partition("#")[2]]
    assert not restated, f"configs/{name}.yaml restates its run preset's {sorted(restated)}: remove them"
    # the YAML parses into a config, and the recipe's method settings reach it
    _, _, config = parse_train_args(["--config", path, *_tiny_args(name, tmp_path)])
    for key, value in overrides.items():
        if key not in ("max_completion_length", *TINY.get(name, {})):  # run-size values the tiny run overrides
            assert getattr(config, key) == value, key


def test_every_reward_builder_has_its_table_entry():
    assert set(REWARD_INFO) == set(REWARD_BUILDERS.names())


@pytest.mark.parametrize(
    "path, marker, table",
    [("README.md", "recipes-table", tables.recipes_table), ("docs/recipes.md", "rewards-table", tables.rewards_table)],
)
def test_readme_tables_are_generated_from_the_registry(path, marker, table):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        section = tables.readme_section(f.read(), marker)
    assert section == table(), f"{path} drifted from the registry: run `trl-efficient recipes --update-readme {path}`"


def test_recipes_markdown_command(capsys, tmp_path):
    assert main(["recipes", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out == tables.markdown()
    assert "| `shorter-better` | ShorterBetter | arXiv:2504.21370 |" in out  # one row, by hand
    assert "| `kimi_length` | `get_kimi_length_reward` |" in out and "`solution`, whole groups |" in out
    stale = tmp_path / "README.md"
    stale.write_text(
        "intro\n<!-- recipes-table:start -->\nSTALE ROW\n<!-- recipes-table:end -->\n"
        "<!-- rewards-table:start -->\n<!-- rewards-table:end -->\nend\n"
    )
    assert main(["recipes", "--check-readme", str(stale)]) == 1
    assert main(["recipes", "--update-readme", str(stale)]) == 0
    assert main(["recipes", "--check-readme", str(stale)]) == 0
    text = stale.read_text()
    assert text.startswith("intro\n") and text.endswith("end\n") and "STALE ROW" not in text


# ---------------------------------------------------------------------------------- every recipe trains 2 steps
def _bingo_extras(tmp_path, monkeypatch):
    from trl_efficient.testing.scorers import save_tiny_token_classifier

    scorer = save_tiny_token_classifier(str(tmp_path / "tiny-bert-base-multilingual-cased"))
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_SCORER", scorer)
    return ["--recipe_kwargs", json.dumps({"reference_samples": 1})]


def _saber_extras(tmp_path, monkeypatch):
    # SABER needs a base-model profile: made by the `profile` command, as in tests/methods/test_saber.py
    from trl_efficient.methods.saber import SABER_PROFILE_ENV

    path = profile_with_cli(tmp_path / "profile.jsonl", max_new_tokens=8)
    monkeypatch.delenv(SABER_PROFILE_ENV, raising=False)
    return ["--dataset_name", "gsm8k", "--recipe_kwargs", json.dumps({"profile": path, "no_think_ratio": 0.1})]


def _frugal_extras(tmp_path, monkeypatch):
    # Frugal-Thinking needs the base model's pass rates: estimated at the start (2 rollouts a problem, the tiny cap)
    return ["--recipe_kwargs", json.dumps({"estimate": True, "n": 2, "output": str(tmp_path / "rates.jsonl")})]


# Rewards that cannot take two values in a 2-step tiny run, by construction (each with the reason); every other
# reward of every recipe must.
CONSTANT_IN_TWO_STEPS = {
    # 0 on a prompt's first visit (no history yet); 2 steps of 1 prompt each visit 2 prompts once
    ("hapo", "hapo_length_reward"),
}

EXTRAS = {"bingo": _bingo_extras, "saber": _saber_extras, "frugal": _frugal_extras}  # need more than their YAML


@pytest.mark.parametrize("name", RECIPES.names())
def test_recipe_trains_two_steps_from_its_yaml(name, tmp_path, monkeypatch):
    """2 steps from the YAML on scripted completions (the gold answer about half the time, varying lengths): every
    reward of the recipe must take more than one value over the run, so the test proves the reward, not only the
    wiring (a reward stuck at one value, say 0 on every row, fails here)."""
    import math

    from huggingface_hub import ModelCard

    monkeypatch.chdir(ROOT)
    extra = EXTRAS[name](tmp_path, monkeypatch) if name in EXTRAS else []
    run = tmp_path / "run"
    records = gold_scripted_generation(monkeypatch, cap=128)
    train_main(["--config", f"configs/{name}.yaml", *_tiny_args(name, run, max_completion_length=128), *extra])
    with open(run / "trl_efficient_summary.json") as f:
        assert json.load(f)["recipe"] == name
    assert f"`{name}`" in ModelCard.load(run / "README.md").text
    assert records, "no generation batch was scored"
    names = records[0]["names"]
    assert len(names) == len(RECIPES.get(name).rewards)
    for j, reward in enumerate(names):
        if (name, reward) in CONSTANT_IN_TWO_STEPS:
            continue
        values = {round(row[j], 9) for rec in records for row in rec["rewards"] if not math.isnan(row[j])}
        assert len(values) > 1, f"recipe {name!r}: reward {reward!r} took only the values {sorted(values)} in 2 steps"
