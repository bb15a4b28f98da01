"""User errors in every `trl-efficient` command: one line `trl-efficient: error: <what to change>` on stderr, exit
code 2; `--debug` anywhere on the command line shows the traceback instead."""

import importlib.util
import logging
import os
import re
import subprocess
import sys

import pytest
import torch

from trl_efficient.cli import COMMANDS, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPU = ["--bf16", "false", "--use_cpu", "true"]  # past the bf16 check on a machine without CUDA


def _one_error_line(capsys) -> str:
    """The whole of stderr, which must be exactly one `trl-efficient: error: ...` line; returns its message."""
    err = capsys.readouterr().err
    assert re.fullmatch(r"trl-efficient: error: [^\n]+\n", err), err
    return err[len("trl-efficient: error: ") : -1]


def _write(path, text):
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["train", "--config", "missing.yaml"],
            "config file not found: missing.yaml (pass a shipped recipe by name, e.g. --config kimi (`trl-efficient "
            "recipes` lists them, `trl-efficient recipes show kimi` prints one to copy and edit), or the path of a "
            "YAML file)",
        ),
        (["train", "--config", "."], "cannot read config file .: it is a directory (pass --config <a YAML file>)"),
        (["train", "--recipe", "nope", *CPU], "Unknown recipe 'nope'. Valid choices: ['a-dlp',"),
        (["train", *CPU, "--no_such_field", "1"], "unknown argument(s): --no_such_field 1; fix their names (see"),
        (
            ["train", *CPU, "--length_unit", "words"],
            "trl-efficient train: argument --length_unit/--length-unit: "
            "invalid choice: 'words' (choose from 'tokens', 'chars') (see `trl-efficient train --help`)",
        ),  # fmt: skip
        (["train", *CPU, "--max_steps", "x"], "trl-efficient train: argument --max_steps/--max-steps: invalid int"),
        (["train", *CPU, "--rollout_plan", "budget"], "rollout_plan='budget' needs `budgets`, e.g. budgets: [512,"),
        (["train", *CPU, "--recipe_kwargs", "{bad"], "recipe_kwargs must be a JSON object, got '{bad'"),
        (["train", *CPU, "--model_name_or_path", "./no/such/dir"], "model './no/such/dir': no such directory; pass"),
        (
            ["train", *CPU, "--max_steps", "-3"],
            "max_steps must be a positive number of optimizer steps, or -1 to train for num_train_epochs, got -3.",
        ),
        (["train", *CPU, "--max_steps", "0"], "max_steps must be a positive number of optimizer steps, or -1"),
        (
            [
                "train",
                *CPU,
                "--use_vllm",
                "false",
                "--recipe",
                "kimi",
                "--reward_kwargs",
                '{"kimi_length": {"warmup_ratoi": 0.1}}',
            ],
            "reward_kwargs: unknown argument(s) ['warmup_ratoi'] for reward builder 'kimi_length' "
            "(get_kimi_length_reward); valid names: ['length_scope', 'length_unit', 'num_generations', 'warmup_ratio', "
            "'weight'].",
        ),
        (
            ["train", *CPU, "--use_vllm", "false", "--recipe", "kimi", "--reward_kwargs", '{"l1": {"alpha": 0.1}}'],
            "reward_kwargs names ['l1'], which recipe 'kimi' does not use (it builds only ['correctness', "
            "'kimi_length']).",
        ),
        (["train", *CPU, "--reward_kwargs", '{"no_such_builder": {}}'], "Unknown reward builder 'no_such_builder'."),
        (
            ["train", *CPU, "--reward_kwargs", "{bad"],
            "reward_kwargs must be a JSON object, got '{bad': Expecting property name enclosed in double quotes",
        ),
        (["train", *CPU, "--reward_kwargs", "bad"], "reward_kwargs must be a JSON object such as '{\"key\": 1}', got"),
        (["train", *CPU, "--advantage_kwargs", "{bad"], "advantage_kwargs must be a JSON object, got '{bad'"),
        (
            ["train", *CPU, "--recipe", "dler", "--advantage_kwargs", '{"corect_boost": 0.1}'],
            "advantage_kwargs: unknown argument(s) ['corect_boost'] for DLERAdvantage; valid names: "
            "['boost_threshold', 'correct_boost', 'eps', 'token_weighted', 'tol'].",
        ),
        (
            ["train", *CPU, "--recipe", "dler", "--filter_kwargs", '{"max_batches": 4}'],
            "filter_kwargs: unknown argument(s) ['max_batches'] for DynamicSamplingFilter; valid names: "
            "['max_generation_batches', 'on_shortfall', 'tol'].",
        ),
        (
            ["train", *CPU, "--recipe", "lspo", "--sampler_kwargs", '{"lo": 0.3}'],
            "sampler_kwargs: unknown argument(s) ['lo'] for prompt_sampler='lspo'; valid names: ['high', 'l_max', "
            "'l_max_ratio', 'low'].",
        ),
        (
            ["train", *CPU, "--rollout_plan_kwargs", '{"initial_budget": 3}'],
            "rollout_plan_kwargs={'initial_budget': 3} is set but rollout_plan is None: set rollout_plan (one of",
        ),
        (
            ["train", *CPU, "--recipe", "curriculum", "--rollout_plan_kwargs", '{"inital_budget": 3}'],
            "rollout_plan_kwargs ['inital_budget'] unknown to rollout_plan='curriculum' (it takes ['initial_budget',",
        ),
        (
            ["train", *CPU, "--dataset_name", "data/train.jsonl"],
            "--dataset_name 'data/train.jsonl' is a local file: pass it as --dataset_source data/train.jsonl and set "
            "--dataset_name to its format, one of ['gsm8k', 'math', 'math500'].",
        ),
        (["train", *CPU, "--eval_dataset_name=./eval.parquet"], "--eval_dataset_name './eval.parquet' is a local file"),
        (["bogus"], "unknown command 'bogus'; choose one of data, eval, merge, profile, push, recipes, serve-scorer,"),
    ],
)
def test_train_user_errors_are_one_line_exit_2(argv, expected, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert _one_error_line(capsys).startswith(expected)


def test_yaml_syntax_and_unknown_field_name_the_file_and_line(capsys, tmp_path):
    bad = _write(tmp_path / "bad.yaml", "recipe: grpo\nmax_steps: [1\n")
    assert main(["train", "--config", bad]) == 2
    assert _one_error_line(capsys) == (
        f"{bad}: invalid YAML at line 3, column 1: expected ',' or ']', but got '<stream end>'; fix the file's syntax"
    )
    unknown = _write(tmp_path / "unknown.yaml", "recipe: grpo\nmax_stepz: 3\nbf16: false\nuse_cpu: true\n")
    assert main(["train", "--config", unknown]) == 2
    assert _one_error_line(capsys) == (
        f"unknown field(s) in {unknown}: max_stepz; remove them or fix their names (the fields are listed by "
        "`trl-efficient train --help`)"
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only message")
def test_bf16_yaml_on_a_cpu_machine_says_how_to_run_on_cpu(capsys, tmp_path):
    config = _write(tmp_path / "gpu.yaml", "recipe: grpo\nbf16: true\n")
    assert main(["train", "--config", config]) == 2
    assert _one_error_line(capsys) == (
        f"{config} asks for bf16: true, which needs a GPU, and this machine has no CUDA: to run on CPU pass "
        "--bf16 false (the model then loads and trains in float32 unless you set a dtype), or --use_cpu true to keep "
        "bf16 autocast on CPU"
    )
    # and the advice works: the same YAML parses with --bf16 false
    from trl_efficient.api.training import parse_train_args

    assert parse_train_args(["--config", config, "--bf16", "false", "--output_dir", str(tmp_path)])[2].bf16 is False


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only message")
def test_load_in_4bit_on_cpu_is_one_line(capsys, tmp_path):
    assert main(["train", *CPU, "--use_peft", "--load_in_4bit", "--output_dir", str(tmp_path)]) == 2
    assert _one_error_line(capsys) == (
        "--load_in_4bit needs a CUDA GPU (bitsandbytes quantisation) and this machine has none: drop --load_in_4bit "
        "to train the model unquantised on CPU"
    )


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="the message for a machine without vLLM")
def test_use_vllm_without_vllm_names_the_flag_and_the_extra(capsys, tmp_path):
    config = _write(tmp_path / "vllm.yaml", "recipe: grpo\nuse_vllm: true\nbf16: false\nuse_cpu: true\n")
    assert main(["train", "--config", config, "--output_dir", str(tmp_path)]) == 2
    assert _one_error_line(capsys) == (
        f"{config} sets use_vllm: true and vLLM is not installed: pass --use_vllm false to generate with "
        "transformers, or install it with `pip install 'trl-efficient[vllm]'`"
    )
    # the extra named is the one pyproject declares, and the advice works: the same YAML parses with the flag
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert re.search(r"^\[project\.optional-dependencies\][^\[]*^vllm = ", f.read(), re.M | re.S)
    from trl_efficient.api.training import parse_train_args

    assert (
        parse_train_args(["--config", config, "--use_vllm", "false", "--output_dir", str(tmp_path)])[2].use_vllm
        is False
    )


@pytest.mark.parametrize("content", ["", "\n\n", "[]"])
def test_a_dataset_file_without_rows_is_one_line(content, tmp_path):
    from trl_efficient.data.loaders import load_math_dataset

    path = _write(tmp_path / ("train.json" if content == "[]" else "train.jsonl"), content)
    with pytest.raises(ValueError) as err:
        load_math_dataset("gsm8k", source=path)
    assert str(err.value) == (
        f"Data file {path!r} holds no examples: pass a file with one example per row (dataset_source)."
    )


def test_an_empty_dataset_file_through_the_cli_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "empty.jsonl", "")
    assert main(["train", *CPU, "--dataset_source", "empty.jsonl", "--output_dir", str(tmp_path / "out")]) == 2
    assert _one_error_line(capsys) == (
        "Data file 'empty.jsonl' holds no examples: pass a file with one example per row (dataset_source)."
    )


def test_a_dataset_file_in_a_yaml_dataset_name_says_dataset_source(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "train.jsonl", '{"question": "1 + 1?", "answer": "#### 2"}\n')
    config = _write(tmp_path / "c.yaml", "recipe: grpo\ndataset_name: train.jsonl\nbf16: false\nuse_cpu: true\n")
    assert main(["train", "--config", config]) == 2
    assert _one_error_line(capsys).startswith(
        "--dataset_name 'train.jsonl' is a local file: pass it as --dataset_source"
    )


def test_eval_of_a_missing_directory_says_so(capsys, tmp_path):
    missing = str(tmp_path / "missing" / "dir")
    assert main(["eval", "--model", missing, "--output-dir", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"trl-efficient eval: error: model {missing!r}: no such directory; pass --model <an existing directory or a "
        "Hub id>\n"
    )
    assert not os.path.exists(tmp_path / "out")  # refused before anything was loaded or written


# One user error per command: the dispatcher is shared, so every command's argparse errors (missing or unknown
# arguments) and config ValueErrors come out as the one line.
PER_COMMAND = {
    "train": (["--bf16", "false", "--nope", "1"], "unknown argument(s): --nope 1"),
    "recipes": (["--nope"], "trl-efficient recipes: unrecognized arguments: --nope"),
    "eval": ([], "trl-efficient eval: the following arguments are required: --model"),
    "data": (["prepare", "--benchmarks", "nope", "--output", "out"], "Unknown benchmark 'nope'; choose one of"),
    "testbed": (["compare", "--recipes", "nope"], "Unknown recipe 'nope'. Valid choices:"),
    "profile": (["--nope"], "unknown argument(s): --nope; fix their names (see `trl-efficient profile --help`)"),
    "serve-scorer": ([], "trl-efficient serve-scorer: the following arguments are required: --model"),
    "push": (["--nope"], "trl-efficient push: "),
    "merge": (["--nope"], "trl-efficient merge: "),
}


def test_every_command_is_covered():
    assert set(PER_COMMAND) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(PER_COMMAND))
def test_every_command_prints_one_line_and_exits_2(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv, expected = PER_COMMAND[command]
    assert main([command, *argv]) == 2
    assert _one_error_line(capsys).startswith(expected)


def _cli(*argv, **env):
    return subprocess.run(
        [sys.executable, "-m", "trl_efficient.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, **env},
    )


def test_model_not_found_offline_names_the_id_and_the_setting(tmp_path):
    proc = _cli("train", *CPU, "--model_name_or_path", "nobody-here/no-such-model", "--output_dir", str(tmp_path),
                HF_HUB_OFFLINE="1")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "trl-efficient: error: model 'nobody-here/no-such-model' is not in the local Hugging Face cache and "
        "HF_HUB_OFFLINE=1 forbids downloading it: download it first (`hf download nobody-here/no-such-model`) or "
        "unset HF_HUB_OFFLINE, or pass a local directory instead"
    )
    assert "Traceback" not in proc.stderr


def test_debug_shows_the_traceback(tmp_path, capsys):
    from trl_efficient.api import UserError

    with pytest.raises(UserError, match="config file not found"):
        main(["train", "--config", str(tmp_path / "missing.yaml"), "--debug"])
    proc = _cli("--debug", "train", "--config", str(tmp_path / "missing.yaml"))
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr
    assert proc.stderr.rstrip().endswith(f"UserError: config file not found: {tmp_path / 'missing.yaml'} (pass "
                                         "a shipped recipe by name, e.g. --config kimi (`trl-efficient recipes` lists "
                                         "them, `trl-efficient recipes show kimi` prints one to copy and edit), or "
                                         "the path of a YAML file)")  # fmt: skip


def test_a_hub_request_refused_offline_is_not_a_missing_model(capsys, monkeypatch):
    """Offline mode refusing a Hub API request (`create_repo`, ...) is not a model lookup: the generic handler says
    offline mode stopped it, never "not in the local Hugging Face cache"; a model file lookup still is one."""
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    import trl_efficient.cli as cli
    from trl_efficient.core.models import model_lookup_error

    refused = OfflineModeIsEnabled("Cannot reach https://huggingface.co/api/repos/create: offline mode is enabled.")
    assert model_lookup_error(refused) is None
    try:  # transformers' wrapping of a file lookup of a model missing from the cache, offline
        try:
            raise LocalEntryNotFoundError("Cannot find the requested files in the disk cache") from refused
        except LocalEntryNotFoundError as inner:
            raise OSError("We couldn't connect to 'https://huggingface.co' to load the files") from inner
    except OSError as wrapped:
        monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
        assert "is not in the local Hugging Face cache" in str(model_lookup_error(wrapped))
        assert "is not in the local Hugging Face cache" in str(model_lookup_error(refused, "org/model"))

    def refuse(argv):
        raise refused

    monkeypatch.setattr(cli, "_resolve", lambda *target: refuse)
    assert main(["push", "x", "--repo-id", "a/b"]) == 2
    assert _one_error_line(capsys) == (
        "this command needs the Hugging Face Hub and offline mode is on (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is "
        "set): unset them and run it again"
    )


def test_push_offline_is_one_line_before_any_request(capsys, offline_run):
    assert main(["push", str(offline_run), "--repo-id", "tester/x", "--token", "hf_NotARealToken000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "trl-efficient push: error: push needs the network and HF_HUB_OFFLINE is set (Hugging Face Hub offline "
        "mode): unset HF_HUB_OFFLINE and push again."
    )
    assert not any("cache" in line for line in err)


def test_recipe_lengths_above_the_cap_warn_in_one_line(caplog, tmp_path):
    from trl_efficient.api.training import parse_train_args

    argv = ["--recipe", "hbpo", *CPU, "--use_vllm", "false", "--num_generations", "4",
            "--per_device_train_batch_size", "4", "--max_completion_length", "1024",
            "--output_dir", str(tmp_path)]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="trl_efficient"):
        parse_train_args(argv)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "max_completion" in r.msg]
    assert warnings == [
        "rollout_plan='budget' uses lengths above max_completion_length=1024 tokens (budgets [2048, 2560]): "
        "completions are cut at 1024 tokens and never reach them; lower them or raise max_completion_length."
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trl_efficient"):
        parse_train_args([*argv, "--max_completion_length", "2560"])
    assert not [r for r in caplog.records if "max_completion_length" in r.getMessage()]


def test_the_documented_cpu_hbpo_command_keeps_its_budgets_under_the_cap(caplog, tmp_path):
    """docs/budget-methods.md's CPU command, run as written (parsed): its budgets fit `max_completion_length`."""
    import shlex

    from trl_efficient.api.training import parse_train_args

    with open(os.path.join(ROOT, "docs", "budget-methods.md")) as f:
        text = f.read()
    block = re.search(r"```bash\n(trl-efficient train --config configs/hbpo\.yaml --model_name_or_path tiny.*?)```",
                      text, re.S).group(1)  # fmt: skip
    argv = shlex.split(block.replace("\\\n", " "))[2:]
    argv[argv.index("--output_dir") + 1] = str(tmp_path)
    with caplog.at_level(logging.WARNING, logger="trl_efficient"):
        _, _, config = parse_train_args([arg.replace("configs/", f"{ROOT}/configs/") for arg in argv])
    assert max(config.budgets) <= config.max_completion_length == 24
    assert not [r for r in caplog.records if "max_completion_length" in r.getMessage()]


# Issue 37: the wrong inputs a newcomer hits, each one line and exit 2. `early`: refused before any model (or
# tokenizer) loads. Files named in an argv are made in the test's folder (`_issue_37_files`).
TRAIN = ["train", "--config", os.path.join(ROOT, "configs", "grpo.yaml"), *CPU, "--use_vllm", "false",
         "--model_name_or_path", "tiny:qwen2-16", "--output_dir", "out"]  # fmt: skip
EVAL = ["eval", "--model", "tiny:qwen2-16", "--benchmarks", "gsm8k", "--limit", "2", "--max-new-tokens", "2",
        "--output-dir", "ev", "--quiet"]  # fmt: skip
ISSUE_37 = [
    # a malformed line of a JSONL data file: the file and the line (train, eval)
    (False, [*TRAIN, "--dataset_name", "gsm8k", "--dataset_source", "bad.jsonl"],
     "bad.jsonl, line 2: not JSON (Expecting ',' delimiter, column 42): fix or remove it, or pass another file "
     "(dataset_source)"),
    (True, [*EVAL, "--source", "gsm8k=bad.jsonl"],
     "bad.jsonl, line 2: not JSON (Expecting ',' delimiter, column 42): fix or remove it, or pass another file "
     "(--source)"),
    (True, [*EVAL, "--source", "gsm8k=empty.jsonl"],
     "Data file 'empty.jsonl' holds no examples: pass a file with one example per row (--source)."),
    # numbers that crashed late, or never
    (True, [*TRAIN, "--num_generations", "0"],
     "--num_generations 0: num_generations must be a whole number >= 2 (completions per prompt, compared in a "
     "group); pass e.g. --num_generations 8"),
    (True, [*TRAIN, "--learning_rate", "nan"],
     "--learning_rate nan: learning_rate must be a finite number >= 0; pass e.g. --learning_rate 1e-6"),
    (True, [*TRAIN, "--learning_rate", "-1"],
     "--learning_rate -1: learning_rate must be a finite number >= 0; pass e.g. --learning_rate 1e-6"),
    (True, [*TRAIN, "--per_device_train_batch_size", "0"],
     "--per_device_train_batch_size 0: per_device_train_batch_size must be a whole number >= 1; pass e.g. "
     "--per_device_train_batch_size 8"),
    (True, [*TRAIN, "--gradient_accumulation_steps", "0"],
     "--gradient_accumulation_steps 0: gradient_accumulation_steps must be a whole number >= 1; pass e.g. "
     "--gradient_accumulation_steps 1"),
    (True, [*TRAIN, "--temperature", "-1"],
     "--temperature -1: temperature must be a finite number > 0 (GRPO samples its rollouts); pass e.g. "
     "--temperature 1.0"),
    (True, [*TRAIN, "--temperature", "0"], "--temperature 0: temperature must be a finite number > 0"),
    (True, [*TRAIN, "--eval_max_new_tokens", "0"],
     "--eval_max_new_tokens 0: eval_max_new_tokens must be a whole number of tokens >= 1 (unset: "
     "max_completion_length); pass e.g. --eval_max_new_tokens 512"),
    (True, [*TRAIN, "--save_strategy", "steps", "--save_steps", "0"],
     "--save_steps 0: save_steps must be a number > 0 (steps between checkpoints, or a fraction of the run below "
     "1); pass e.g. --save_steps 100"),
    (True, [*TRAIN, "--max_completion_length", "0"],
     "--max_completion_length 0: max_completion_length must be a whole number of tokens >= 1; pass e.g. "
     "--max_completion_length 1024"),
    (True, [*TRAIN, "--num_iterations", "0"], "--num_iterations 0: num_iterations must be a whole number >= 1"),
    (True, [*TRAIN, "--beta", "-0.1"], "--beta -0.1: beta must be a finite number >= 0 (the KL coefficient"),
    (True, [*TRAIN, "--top_p", "1.5"], "--top_p 1.5: top_p must be in (0, 1] (1: no nucleus cut); pass e.g."),
    (True, [*EVAL, "--temperature", "nan"],
     "--temperature nan: must be a finite number >= 0 (0: greedy; e.g. 0.6)"),
    (True, [*EVAL, "--top-p", "2"], "--top-p 2.0: must be in (0, 1] (1: no nucleus cut; e.g. 0.95)"),
    (True, [*EVAL, "--batch-size", "0"], "--batch-size 0: must be a whole number >= 1"),
    (True, [*EVAL, "--max-new-tokens", "0"], "--max-new-tokens 0: must be a whole number >= 1"),
    # paths
    (True, [*TRAIN[:-1], "afile"], "--output_dir afile is a file, not a folder: pass --output_dir <a new folder>"),
    (True, [*TRAIN, "--resume_from_checkpoint", "out/checkpoint-9"],
     "--resume_from_checkpoint out/checkpoint-9 does not exist: pass a checkpoint-N folder the Trainer saved, or "
     "--resume_from_checkpoint true to resume from the last one in out"),
    (True, [*TRAIN, "--resume_from_checkpoint", "true"],
     "--resume_from_checkpoint true: out holds no complete checkpoint to resume from; drop the flag to start a new "
     "run there"),
    (True, ["merge", "--base", "tiny:qwen2-16", "--trained", "tiny:qwen2-16", "--output", "afile"],
     "--output afile: a file, not a directory; pass --output <a new directory>."),
    (True, [*TRAIN, "--model_name_or_path", "ev"],
     "model 'ev': a directory without a model (no config.json or adapter_config.json); pass --model_name_or_path <a "
     "model directory (a run's output_dir or one of its checkpoint-N folders) or a Hub id>"),
    (True, ["eval", "--model", "ev", "--output-dir", "ev2"],
     "model 'ev': a directory without a model (no config.json or adapter_config.json); pass --model <a model "
     "directory (a run's output_dir or one of its checkpoint-N folders) or a Hub id>"),
    # write failures: said before the work, and never "cannot read"
    (True, ["profile", "--model_name_or_path", "tiny:qwen2-16", "--dataset_name", "gsm8k", "--output", "nodir/p.json"],
     "--output nodir/p.json: the folder {tmp}/nodir does not exist; create it or pass another path"),
    (True, [*EVAL[:-3], "--output-dir", "afile"],
     "--output-dir afile: {tmp}/afile is a file, not a folder; pass another path"),
    (True, ["data", "prepare", "--benchmarks", "gsm8k", "--output", "afile/x"],
     "--output-dir afile/x: {tmp}/afile is a file, not a folder; pass another path"),
    # serve-scorer: checked before the scorer loads
    (True, ["serve-scorer", "--model", "x", "--port", "99999"], "--port 99999: must be in 0..65535 (0 picks a free"),
    (True, ["serve-scorer", "--model", "x", "--window", "0"], "--window 0: must be a whole number >= 1"),
    (True, ["serve-scorer", "--model", "x", "--host", "203.0.113.1", "--port", "0"],
     "--host 203.0.113.1 --port 0: cannot listen there (Cannot assign requested address"),
    # the testbed
    (True, ["testbed", "base", "--size", "bogus", "--retrain"],
     "--size bogus: no such testbed base model; pass one of base, formats, v2, v3, small"),
    (True, ["testbed", "base", "--retrian"],
     "trl-efficient testbed: unrecognized arguments: --retrian (see `trl-efficient testbed --help`)"),
    (True, ["testbed", "plots", "notcmp.json"],
     "notcmp.json is not a testbed comparison (no list of `rows`): pass the compare.json that `trl-efficient testbed "
     "compare` wrote (e.g. perf/testbed/results/compare.json)"),
    (True, ["testbed", "scorecard", "notcmp.json"], "notcmp.json is not a testbed comparison (no list of `rows`)"),
    (True, ["testbed", "eval", "--num-eval", "0"], "--num-eval 0: must be a whole number >= 1 (e.g. --num-eval 8)"),
    (True, ["testbed", "world-report", "--json", "nodir/w.json"],
     "--json nodir/w.json: the folder {tmp}/nodir does not exist; create it or pass another path"),
]  # fmt: skip
if importlib.util.find_spec("wandb") is None:
    ISSUE_37.append((True, [*TRAIN, "--report_to", "wandb"], "--report_to wandb needs wandb, which is not installed: "
                     "pass --report_to none (or one of the installed: "))  # fmt: skip
if importlib.util.find_spec("vllm") is None:
    # the run preset sets use_vllm: true too; the command line's flag is the one named
    ISSUE_37.append((True, [*TRAIN, "--use_vllm", "true"], "--use_vllm asks for vLLM and vLLM is not installed: pass "
                     "--use_vllm false to generate with transformers"))  # fmt: skip
    ISSUE_37.append((True, [*EVAL, "--backend", "vllm"], "--backend vllm needs vLLM, which is not installed: pass "
                     "--backend transformers, or install it with `pip install 'trl-efficient[vllm]'`"))  # fmt: skip


@pytest.mark.parametrize(
    "early, argv, expected", ISSUE_37, ids=lambda v: " ".join(v[:6]) if isinstance(v, list) else None
)
def test_wrong_inputs_of_issue_37_are_one_line_exit_2(early, argv, expected, capsys, tmp_path, monkeypatch):
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    monkeypatch.chdir(tmp_path)
    _write(
        tmp_path / "bad.jsonl",
        '{"question": "1 + 1?", "answer": "#### 2"}\n{"question": "2 + 2?", "answer": "#### 4"\n',
    )
    _write(tmp_path / "empty.jsonl", "")
    _write(tmp_path / "notcmp.json", '{"a": 1}')
    _write(tmp_path / "afile", "x")
    (tmp_path / "ev").mkdir()
    _write(tmp_path / "ev" / "tokenizer_config.json", "{}")  # a folder with a tokenizer file but no model
    if early:

        def no_load(*args, **kwargs):
            raise AssertionError("a model or tokenizer loaded before the wrong input was refused")

        monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(no_load))
        monkeypatch.setattr(PreTrainedTokenizerBase, "from_pretrained", classmethod(no_load))
    command = argv[0]
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    err = [line for line in lines if ": error: " in line]
    assert len(err) == 1 and not [line for line in lines if line.startswith(("ERROR", "Traceback"))], lines
    message = err[0].split(": error: ", 1)[1]
    assert message.startswith(expected.format(tmp=tmp_path)), message
    assert command in ("train", "eval", "merge", "testbed", "profile", "data", "serve-scorer")


def test_push_with_the_hub_unreachable_is_one_line(capsys, monkeypatch, tiny_model_dir, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run)
    (run / "trl_efficient_summary.json").write_text('{"recipe": "grpo", "model": "Qwen/Qwen2.5-0.5B-Instruct"}')
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert main(["push", str(run), "--repo-id", "tester/x", "--token", "hf_NotARealToken000"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith(
        "trl-efficient push: error: the Hugging Face Hub at http://127.0.0.1:9 cannot be reached (ConnectError: "
    ) and lines[-1].endswith("nothing was uploaded; check the network (or HF_ENDPOINT) and run the same push again")
    assert not [line for line in lines if line.startswith("Traceback")]


def test_a_train_error_is_the_only_line_on_stderr(tmp_path):
    """No transformers FutureWarning about `gradient_checkpointing` before the line: TRL's GRPOConfig defaults the
    deprecated name, which the user never wrote (issue 37, noise before every line)."""
    proc = _cli("train", "--config", "grpo", *CPU, "--use_vllm", "false", "--learning_rate", "nan",
                "--output_dir", str(tmp_path / "out"), PYTHONWARNINGS="default")  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr == (
        "trl-efficient: error: --learning_rate nan: learning_rate must be a finite number >= 0; pass e.g. "
        "--learning_rate 1e-6\n"
    )


def test_hub_warnings_print_once():
    """huggingface_hub (and datasets) attach their own stderr handler and propagate to the root logger that `main`
    configures: each retry warning of a push printed twice."""
    code = ("import logging; from trl_efficient.cli import main; main(['recipes', 'presets']); "
            "logging.getLogger('huggingface_hub.utils._http').warning('Retrying in 1s [Retry 1/5].'); "
            "logging.getLogger('datasets.load').warning('a datasets warning')")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("Retrying in 1s [Retry 1/5].") == 1 and proc.stderr.count("a datasets warning") == 1
