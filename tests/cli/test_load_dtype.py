"""The dtype the policy loads in is decided once, at config time (`resolve_load_dtype`), before any model loads:
a run that trains in float32 (bf16 and fp16 off) loads float32 unless the user set a dtype; a run preset's dtype lies
beneath everything the user sets; a half-precision dtype the user set while bf16 is off is kept and named in one
warning line (issue 36, item 2: `--bf16 false` on a recipe YAML used to load and save bfloat16 weights silently)."""

import logging

import pytest
import torch

from trl_efficient.api.training import parse_train_args
from trl_efficient.cli import main
from trl_efficient.core.models import model_init_kwargs

# a shipped recipe YAML (run_defaults: math-1.5b, whose preset sets bf16: true and model_init_kwargs.dtype bfloat16)
KIMI = ["--config", "kimi", "--use_vllm", "false"]


def _load_dtype(argv):
    """The dtype `run_training` passes to `from_pretrained`, and the config's own `model_init_kwargs`."""
    script, _, config = parse_train_args(argv)
    return model_init_kwargs(script, overrides=config.model_init_kwargs)["dtype"], config


def _warnings(caplog):
    """The dtype warnings (not, e.g., the CPU thread hint of a busy machine)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name == "trl_efficient" and "loads the weights" in r.getMessage()
    ]


def test_bf16_off_loads_float32_without_a_word(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    dtype, config = _load_dtype([*KIMI, "--bf16", "false", "--output_dir", str(tmp_path)])
    # the preset's bfloat16 goes with its bf16: true; with bf16 off nothing the user set asks for it
    assert dtype == "float32" and config.model_init_kwargs == {"dtype": "float32"}
    assert _warnings(caplog) == []


def test_the_preset_dtype_stays_while_bf16_is_on(tmp_path):
    # --use_cpu true keeps bf16 (autocast) on a CPU machine: the preset's bfloat16 weights are what it asks for
    dtype, config = _load_dtype([*KIMI, "--use_cpu", "true", "--output_dir", str(tmp_path)])
    assert config.bf16 is True and dtype == "bfloat16"


@pytest.mark.parametrize(
    "extra, expected, where",
    [
        (["--dtype", "float16"], "float16", "--dtype=float16"),  # a flag wins over the preset
        (["--torch_dtype", "bfloat16"], "bfloat16", "--dtype=bfloat16"),  # TRL's old name of --dtype
        (["--model_init_kwargs", '{"dtype": "bfloat16"}'], "bfloat16", "model_init_kwargs.dtype=bfloat16"),
    ],
)
def test_a_half_dtype_the_user_set_with_bf16_off_is_kept_and_named_once(tmp_path, caplog, extra, expected, where):
    caplog.set_level(logging.WARNING)
    dtype, _ = _load_dtype([*KIMI, "--bf16", "false", *extra, "--output_dir", str(tmp_path)])
    assert dtype == expected
    (line,) = _warnings(caplog)
    assert line.startswith(f"{where} loads the weights in {expected} while bf16 and fp16 are off") and "\n" not in line


def test_a_yaml_dtype_the_user_set_wins_over_the_flag_and_the_preset(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    yaml_file = tmp_path / "mine.yaml"
    yaml_file.write_text("recipe: kimi\nrun_defaults: math-1.5b\nmodel_init_kwargs: {dtype: float32}\n")
    argv = ["--config", str(yaml_file), "--use_vllm", "false", "--output_dir", str(tmp_path)]
    # the YAML's model_init_kwargs win over --dtype (TRL's grpo script), even with bf16 on
    assert _load_dtype([*argv, "--use_cpu", "true", "--dtype", "bfloat16"])[0] == "float32"
    assert _warnings(caplog) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only message")
def test_the_cpu_bf16_error_names_the_preset_not_trl(capsys):
    assert main(["train", *KIMI]) == 2
    err = capsys.readouterr().err
    assert err == (
        "trl-efficient: error: the run preset math-1.5b (run_defaults) sets bf16: true, which needs a GPU, and this "
        "machine has no CUDA: to run on CPU pass --bf16 false (the model then loads and trains in float32 unless you "
        "set a dtype), or --use_cpu true to keep bf16 autocast on CPU\n"
    )
