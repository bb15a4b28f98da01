"""The `trl-efficient` CLI: quickstart, smoke run, overrides and config errors (every recipe: tests/recipes)."""

import os
import subprocess
import sys

import pytest
import yaml
from helpers import tiny_cli_args

from trl_efficient.api.training import parse_train_args, train_main
from trl_efficient.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
# Every registered recipe trains 2 steps from its YAML in tests/recipes/test_every_recipe.py.


def test_no_arguments_runs_the_quickstart_config(monkeypatch):
    from trl_efficient.api import training

    seen = {}
    monkeypatch.setattr(
        training, "run_training", lambda s, d, t: seen.update(model=s.model_name_or_path, data=d.dataset_name)
    )
    training.train_main([])
    assert seen == {"model": "testbed:base", "data": "testbed"}


def test_smoke_config_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    summary = train_main(
        [
            "--config",
            "configs/smoke.yaml",
            "--output_dir",
            str(tmp_path),
            "--max_steps",
            "3",
            "--save_steps",
            "3",
            "--eval_limit",
            "4",
            "--dataset_limit",
            "32",
            "--model_name_or_path",
            "tiny:qwen2-16",
        ]
    )
    out = capsys.readouterr().out
    assert "SMOKE RUN" in out and "mean tokens" in out
    assert summary["before"]["num_samples"] == 4 and summary["after"]["mean_tokens"] > 0
    assert os.path.exists(os.path.join(tmp_path, "checkpoint-3", "trl_efficient_state.json"))
    assert os.path.exists(os.path.join(tmp_path, "README.md"))


def test_precedence_recipe_then_yaml_then_cli(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    # dapo-overlong's recipe sets epsilon_high=0.28; the YAML does not; the CLI wins over both
    _, _, cfg = parse_train_args(["--config", "configs/dapo-overlong.yaml", *tiny_cli_args(tmp_path)])
    assert cfg.epsilon_high == 0.28 and cfg.max_completion_length == 24
    _, _, cfg = parse_train_args(
        ["--config", "configs/dapo-overlong.yaml", *tiny_cli_args(tmp_path), "--epsilon_high", "0.3"]
    )
    assert cfg.epsilon_high == 0.3


def test_run_preset_lies_beneath_the_recipe_the_yaml_and_the_cli(tmp_path, capsys):
    """`run_defaults: NAME` applies a preset beneath everything else: the recipe's method settings win over it (L1's
    rollout plan), the YAML's keys over both, the command line over all; a YAML without it gets TRL's defaults."""
    from trl_efficient.cli import main
    from trl_efficient.recipes.presets import RUN_PRESETS

    preset = RUN_PRESETS["math-1.5b"]
    config = tmp_path / "run.yaml"
    config.write_text("recipe: l1-exact\nrun_defaults: math-1.5b\nlogging_steps: 3\n")
    cpu = ["--use_cpu", "true", "--use_vllm", "false", "--output_dir", str(tmp_path / "out")]
    script, data, cfg = parse_train_args(["--config", str(config), *cpu, "--max_steps", "7"])
    assert script.model_name_or_path == preset["model_name_or_path"] and data.dataset_name == preset["dataset_name"]
    assert (cfg.learning_rate, cfg.num_generations, cfg.max_completion_length) == (1e-6, 8, 4096)  # the preset
    assert cfg.rollout_plan == "target_length"  # the recipe's
    assert cfg.logging_steps == 3 and cfg.max_steps == 7  # the YAML's, the command line's
    bare = tmp_path / "bare.yaml"
    bare.write_text("recipe: l1-exact\n")
    script, _, cfg = parse_train_args(["--config", str(bare), *tiny_cli_args(tmp_path)])
    assert script.model_name_or_path != preset["model_name_or_path"] and cfg.logging_steps != 5
    with pytest.raises(ValueError, match="unknown run_defaults 'nope': one of \\['math-1.5b'"):
        parse_train_args(["--config", str(bare), *tiny_cli_args(tmp_path), "--run_defaults", "nope"])
    assert main(["recipes", "presets"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["math-1.5b"] == preset


@pytest.mark.parametrize("recipe, mode", [("l1-exact", "exact"), ("l1-max", "mixed")])
def test_l1_yaml_agrees_with_recipe_defaults(recipe, mode, tmp_path, monkeypatch):
    # One source of truth for L1's targets: the YAML may restate the recipe and field defaults, never contradict
    # them. §6: N ~ U{100..4000} per example, shared by the G rollouts; L1-Max mixes Exact and Max 50/50.
    monkeypatch.chdir(ROOT)
    fields = ("rollout_plan", "target_length_range", "target_length_mode", "target_length_per")
    _, _, from_yaml = parse_train_args(["--config", f"configs/{recipe}.yaml", *tiny_cli_args(tmp_path)])
    # the recipe alone, without its YAML (`--recipe NAME` with no --config reads the shipped NAME.yaml)
    bare = tmp_path / "bare.yaml"
    bare.write_text(f"recipe: {recipe}\n")
    _, _, from_recipe = parse_train_args(["--config", str(bare), *tiny_cli_args(tmp_path)])
    got = {f: getattr(from_yaml, f) for f in fields}
    assert got == {f: getattr(from_recipe, f) for f in fields}
    assert got == {
        "rollout_plan": "target_length",
        "target_length_range": [100, 4000],
        "target_length_mode": mode,
        "target_length_per": "prompt",
    }


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--recipe", "nope"], "Unknown recipe 'nope'"),
        (["--rollout_plan", "budget", "--budgets", "100", "200", "300"], "divisible by the number of budgets"),
        (["--length_unit", "words"], "invalid choice|length_unit"),
    ],
)
def test_config_errors_are_clear(extra, match, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    with pytest.raises((ValueError, SystemExit)) as info:
        parse_train_args(["--config", "configs/grpo.yaml", *tiny_cli_args(tmp_path), *extra])
    # a ValueError carries the message; argparse's SystemExit (exit code 2) prints it to stderr
    message = str(info.value) if isinstance(info.value, ValueError) else capsys.readouterr().err
    if info.type is SystemExit:
        assert info.value.code == 2
    assert __import__("re").search(match, message), message


def test_console_script_lists_recipes():
    proc = subprocess.run(
        [sys.executable, "-m", "trl_efficient.cli", "recipes"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "shorter-better" in proc.stdout


def test_unknown_command_exits_nonzero(capsys):
    assert main(["bogus"]) == 2
    assert capsys.readouterr().err.startswith("trl-efficient: error: unknown command 'bogus'; choose one of data,")


def test_model_config_flags_reach_the_trainer(tmp_path, monkeypatch):
    # TRL's ModelConfig flags (as `trl grpo` takes them) load the policy and wrap it in LoRA: dtype (and TRL's old
    # name --torch_dtype), attn_implementation, --use_peft with rank, alpha and target modules.
    import dataclasses

    import peft
    import torch

    from trl_efficient.recipes import RECIPES, get_recipe

    monkeypatch.chdir(ROOT)
    built = []
    cls = get_recipe("grpo").trainer_cls
    spy = type("Spy", (cls,), {"__init__": lambda t, *a, **k: (cls.__init__(t, *a, **k), built.append(t))[0]})
    monkeypatch.setitem(RECIPES._entries, "grpo", dataclasses.replace(get_recipe("grpo"), trainer_class=spy))
    flags = ["--use_peft", "--lora_r", "2", "--lora_alpha", "4", "--lora_target_modules", "all-linear",
             "--torch_dtype", "bfloat16", "--attn_implementation", "eager"]  # fmt: skip
    script, _, _ = parse_train_args(["--config", "configs/grpo.yaml", *tiny_cli_args(tmp_path), *flags])
    assert (script.use_peft, script.lora_r, script.lora_target_modules, script.dtype) == (
        True,
        2,
        "all-linear",
        "bfloat16",
    )
    # a YAML's own model_init_kwargs win over --dtype, as in TRL's grpo script; a run preset's dtype lies beneath the
    # flag (tests/cli/test_load_dtype.py)
    from trl_efficient.core.models import model_init_kwargs

    own = tmp_path / "own.yaml"
    own.write_text("recipe: grpo\nmodel_init_kwargs: {dtype: bfloat16}\n")
    script, _, config = parse_train_args(["--config", str(own), *tiny_cli_args(tmp_path), "--dtype", "float16"])
    assert model_init_kwargs(script, overrides=config.model_init_kwargs)["dtype"] == "bfloat16"
    script, _, config = parse_train_args(
        ["--config", "configs/grpo.yaml", *tiny_cli_args(tmp_path), "--dtype", "float16"]
    )
    assert model_init_kwargs(script, overrides=config.model_init_kwargs)["dtype"] == "float16"
    # without model_init_kwargs in the YAML, the flags decide (the default dtype is TRL's float32)
    bare = tmp_path / "bare.yaml"
    bare.write_text("recipe: grpo\n")
    train_main(["--config", str(bare), *tiny_cli_args(tmp_path, max_steps=1), *flags])
    (trainer,) = built
    assert isinstance(trainer.model, peft.PeftModel)
    assert trainer.model.peft_config["default"].r == 2 and trainer.model.peft_config["default"].lora_alpha == 4
    base = trainer.model.get_base_model()
    assert base.dtype == torch.bfloat16 and base.config._attn_implementation == "eager"
    assert trainer.ref_model is None  # with PEFT, TRL's reference is the adapter-disabled model


def test_a_finished_run_destroys_its_process_group(tmp_path):
    """`train` ends a distributed run by destroying its process group (a gloo group left alive can abort the process
    at interpreter exit, SIGABRT, after a finished run); without a group it does nothing. In a subprocess, so that
    this test's process group and accelerate state stay out of the others'."""
    code = f"""
import torch.distributed as dist
from trl_efficient.api.training import end_process_group
end_process_group()  # no group: a no-op
dist.init_process_group("gloo", init_method="file://{tmp_path / "store"}", rank=0, world_size=1)
assert dist.is_initialized()
end_process_group()
print("initialized after:", dist.is_initialized())
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "initialized after: False" in proc.stdout
