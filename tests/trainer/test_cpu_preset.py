"""The `smollm2-cpu` run preset (issue 47): any recipe becomes a short real-model CPU run, its own constants scaled by
rules on config keys (`recipes.presets.scaled_overrides`). Every registered recipe's scaled settings parse into a
valid config (a YAML holding them, which `trl-efficient train` reads above the recipe, as the preset's scaled layer
sits); a few representative recipes train one step from them on the tiny model (all 43 would take minutes)."""

import json

import pytest
import yaml
from helpers import gold_scripted_generation

from trl_efficient.api.training import parse_train_args, train_main
from trl_efficient.cli import main
from trl_efficient.recipes import RECIPES
from trl_efficient.recipes.presets import RUN_PRESETS, run_preset, scaled_overrides

PRESET = "smollm2-cpu"
TINY = {"model_name_or_path": "tiny:qwen2-16", "eval_before_after": False, "max_steps": 1, "dataset_limit": 8}


def _yaml(name, tmp_path, **extra) -> str:
    settings = {"recipe": name, **run_preset(PRESET), **scaled_overrides(PRESET, RECIPES.get(name).config_overrides)}
    settings.update(output_dir=str(tmp_path / "run"), **extra)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(settings))
    return str(path)


@pytest.mark.parametrize("name", RECIPES.names())
def test_every_recipe_scales_to_a_valid_cpu_config(name, tmp_path):
    # the one flag a user passes: the recipe's own constants come scaled (Recipe.settings), no YAML needed
    one_flag = parse_train_args(["--recipe", name, "--run_defaults", PRESET, "--output_dir", str(tmp_path / "r")])[2]
    _, data, cfg = parse_train_args(["--config", _yaml(name, tmp_path)])
    assert (one_flag.max_steps, one_flag.num_generations, one_flag.ref_reset_steps, one_flag.budgets) == (
        cfg.max_steps, cfg.num_generations, cfg.ref_reset_steps, cfg.budgets)  # fmt: skip
    preset = RUN_PRESETS[PRESET]
    assert (cfg.max_steps, cfg.num_generations, cfg.use_cpu, cfg.bf16) == (4, 4, True, False)
    assert cfg.max_completion_length <= preset["max_completion_length"] and data.dataset_name == "gsm8k"
    if cfg.ref_reset_steps is not None:  # ProRL/BroRL's 200 of a 500-step run -> 2 of 4
        assert cfg.ref_reset_steps == 2
    for budget in cfg.budgets or ():
        assert budget <= preset["max_completion_length"]


def test_the_rules_scale_the_recipes_constants():
    assert scaled_overrides(PRESET, RECIPES.get("brorl").config_overrides)["num_generations"] == 4  # N = 512
    gfpo = scaled_overrides(PRESET, RECIPES.get("gfpo-adaptive").config_overrides)["advantage_kwargs"]
    assert (gfpo["k_by_quartile"], gfpo["warmup_k"], gfpo["warmup_steps"], gfpo["warmup_prompts"]) == ([2] * 4, 2, 1, 1)
    dler = scaled_overrides(PRESET, RECIPES.get("da-dler").config_overrides)
    assert (dler["max_completion_length"], dler["advantage_kwargs"]["truncate_to"]) == (62, 31)  # 4000, 2000 at 64/4096
    assert scaled_overrides("math-1.5b", RECIPES.get("prorl").config_overrides) == RECIPES.get("prorl").config_overrides


@pytest.mark.parametrize("name", ["prorl", "brorl", "hbpo", "gfpo-adaptive"])
def test_representative_recipes_train_one_step_from_the_preset(name, tmp_path, monkeypatch):
    records = gold_scripted_generation(monkeypatch, cap=64)
    train_main(["--config", _yaml(name, tmp_path, **TINY)])
    with open(tmp_path / "run" / "trl_efficient_summary.json") as f:
        assert json.load(f)["recipe"] == name
    assert records and len(records[0]["rewards"]) == 4  # one prompt x the preset's G


def test_recipes_presets_prints_the_preset_and_its_rules(capsys):
    assert main(["recipes", "presets"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed[PRESET]["model_name_or_path"] == "smollm2:135m-instruct"
    assert any("max_steps / 500" in rule for rule in printed[PRESET]["scale_rules"])
