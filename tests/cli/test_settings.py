"""Settings are resolved once (run preset < recipe < YAML < user), each value's source recorded in the config, and the
config-time checks judge the value in effect and quote where it was set (issue 46): the command line is parsed INTO
these settings, and `trl_efficient.train` passes none."""

import os

import pytest
from helpers import tiny_cli_args

import trl_efficient
from trl_efficient.api import UserError, training
from trl_efficient.api.training import parse_train_args
from trl_efficient.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRPO = ["--config", os.path.join(ROOT, "configs", "grpo.yaml")]


def test_a_repeated_flag_is_judged_by_the_value_in_effect(tmp_path, capsys):
    # argparse keeps the last value: a valid one after an invalid one runs, an invalid one after a valid one is
    # refused quoting it (the check read the first: it refused 1e-3 for nan, and quoted 8 for -5)
    argv = [*GRPO, *tiny_cli_args(tmp_path)]
    _, _, config = parse_train_args([*argv, "--learning_rate", "nan", "--learning_rate", "1e-3"])
    assert config.learning_rate == 1e-3 and config.sources["learning_rate"] == "user"
    assert main(["train", *argv, "--max_completion_length", "8", "--max_completion_length", "-5"]) == 2
    assert capsys.readouterr().err == (
        "trl-efficient: error: --max_completion_length -5: max_completion_length must be a whole number of tokens "
        ">= 1; pass e.g. --max_completion_length 1024\n"
    )


def test_a_yaml_value_is_quoted_from_the_yaml_and_a_keyword_as_a_keyword(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("recipe: grpo\ntop_p: 1.5\n")
    with pytest.raises(UserError, match=rf"^{config} sets top_p: 1.5: top_p must be in \(0, 1\]"):
        parse_train_args(["--config", str(config), *tiny_cli_args(tmp_path)])
    assert parse_train_args(["--config", str(config), *tiny_cli_args(tmp_path), "--top_p", "0.9"])[2].top_p == 0.9
    with pytest.raises(UserError, match=r"^top_p=1.5: top_p must be in \(0, 1\]"):
        training.train_args(None, {"top_p": 1.5, "bf16": False, "use_cpu": True}, function="train")


def test_every_value_records_its_source(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("recipe: l1-exact\nrun_defaults: math-1.5b\nlogging_steps: 3\n")
    cpu = ["--use_cpu", "true", "--use_vllm", "false", "--output_dir", str(tmp_path / "out")]
    script, data, args = parse_train_args(["--config", str(config), *cpu, "--max_steps", "7"])
    assert args.recipe == "l1-exact" and args.sources["model_init_kwargs.dtype"] == "preset"
    keys = ("num_generations", "rollout_plan", "logging_steps", "max_steps")
    assert [args.sources[key] for key in keys] == ["preset", "recipe", "yaml", "user"]
    assert args.sources["model_name_or_path"] == "preset" and "beta" in args.sources and "seed" in args.sources
    assert "eos_logit_bias" not in args.sources  # nobody set it: its default


def test_train_passes_no_command_line(tmp_path, monkeypatch):
    """`trl_efficient.train`'s keywords are settings, typed as given: no argv is made or parsed."""
    monkeypatch.setattr(training, "command_line", lambda argv: pytest.fail(f"a command line was parsed: {argv}"))
    calls = []
    monkeypatch.setattr(training, "run_training", lambda *args: calls.append(args) or {})
    flags = tiny_cli_args(tmp_path)
    keywords = {**{flag[2:]: text for flag, text in zip(flags[::2], flags[1::2], strict=True)}, "max_steps": 3}
    trl_efficient.train({"recipe": "kimi", "learning_rate": "2e-6"}, **keywords)  # the flags' texts, typed too
    ((script, _, args),) = calls
    assert args.max_steps == 3 and args.learning_rate == 2e-6 and args.recipe == "kimi"  # the YAML's text, typed
    assert (args.sources["max_steps"], args.sources["learning_rate"]) == ("user", "yaml")
    with pytest.raises(UserError, match=r"train\(\): unknown keyword\(s\) max_stepz"):
        trl_efficient.train("kimi", max_stepz=3)


def test_train_help_lists_this_projects_options_first_then_trls_then_transformers():
    """`trl-efficient train --help` groups the options by whose they are (issue 47 item 5): the project's own first,
    then TRL's, then transformers', each under one heading."""
    from trl_efficient.api.training import train_parser

    text = train_parser().format_help()
    ours, trl, hf = (text.index(h) for h in ("trl-efficient options", "TRL options", "transformers options"))
    assert ours < trl < hf
    assert ours < text.index("--recipe ") < trl and ours < text.index("--advantage_estimator") < trl
    assert trl < text.index("--num_generations ") < hf and trl < text.index("--lora_r ") < hf
    assert hf < text.index("--learning_rate ")
