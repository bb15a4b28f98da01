"""Recipes by name from any directory: `--config kimi`, `--config configs/kimi.yaml` where no such file exists (the
README's form, after `pip install`), `--recipe kimi`, and `trl-efficient recipes show kimi`; a path that exists
wins."""

import os
from importlib import resources

import pytest
from helpers import tiny_cli_args

from trl_efficient.api.configs import resolve_config, shipped_configs
from trl_efficient.api.training import parse_train_args
from trl_efficient.cli import main
from trl_efficient.recipes import RECIPES

SHIPPED = resources.files("trl_efficient.recipes").joinpath("configs")


def test_every_registered_recipe_ships_a_yaml_by_its_name():
    assert shipped_configs() == sorted([*RECIPES.names(), "quickstart", "smoke"])


@pytest.mark.parametrize("value", ["kimi", "kimi.yaml", "configs/kimi.yaml", "./configs/kimi.yml"])
def test_a_shipped_name_resolves_outside_the_checkout(value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ here
    assert resolve_config(value) == str(SHIPPED.joinpath("kimi.yaml"))


def test_an_existing_path_wins_and_other_folders_are_not_guessed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs("configs")
    with open("configs/kimi.yaml", "w") as f:
        f.write("recipe: kimi\nmax_steps: 7\n")
    assert resolve_config("configs/kimi.yaml") == "configs/kimi.yaml"
    assert resolve_config("kimi") == str(SHIPPED.joinpath("kimi.yaml"))  # a bare name is the shipped recipe
    assert resolve_config("elsewhere/kimi.yaml") == "elsewhere/kimi.yaml"  # a typo'd folder stays an error
    assert resolve_config("nope") == "nope"


def test_config_name_recipe_name_and_readme_path_parse_the_same(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tiny = tiny_cli_args(tmp_path / "out")
    parsed = [parse_train_args([*form, *tiny]) for form in
              (["--config", "kimi"], ["--recipe", "kimi"], ["--config", "configs/kimi.yaml"])]  # fmt: skip
    for script, data, config in parsed:
        # from kimi.yaml (tiny_cli_args sets none of these): the shipped run settings, not the defaults
        assert (script.recipe, data.dataset_name, data.eval_limit, config.learning_rate) == ("kimi", "math", 100, 1e-6)
        assert config.max_completion_length == 24  # the command line still wins over the YAML
    assert parsed[0][2].to_dict() == parsed[1][2].to_dict() == parsed[2][2].to_dict()


def test_recipe_with_a_config_switches_the_method_of_that_yaml(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script, data, _ = parse_train_args(
        ["--config", "quickstart", "--recipe", "shorter-better", "--output_dir", str(tmp_path / "out")]
    )
    assert (script.recipe, data.dataset_name) == ("shorter-better", "testbed")  # quickstart's data, the new method


def test_recipes_show_prints_the_shipped_yaml_from_anywhere(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["recipes", "show", "kimi"]) == 0
    printed = capsys.readouterr().out
    assert printed == SHIPPED.joinpath("kimi.yaml").read_text("utf-8")
    # the printed YAML, saved and edited, is a config of its own (its run preset included)
    (tmp_path / "mine.yaml").write_text(printed + "max_steps: 9\n")
    _, _, config = parse_train_args(
        ["--config", "mine.yaml", "--bf16", "false", "--use_vllm", "false", "--output_dir", str(tmp_path / "out")]
    )
    assert config.max_steps == 9 and config.learning_rate == 1e-6 and config.max_completion_length == 4096


def test_recipes_show_unknown_name_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["recipes", "show", "kimmi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trl-efficient: error: no shipped recipe YAML named 'kimmi'; choose one of a-dlp, alp,")
    assert err.count("\n") == 1 and "kimi, l1-exact" in err
