"""`trl_efficient.train(config, **overrides)` (issue 34): `trl-efficient train` from a user's own script, through the
command's own parser and pipeline (`parse_train_args`, `run_training`), under `accelerate launch` as TRL's trainers
run."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import tiny_cli_args

import trl_efficient
from trl_efficient.api import UserError, training

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tiny_overrides(output_dir, **extra) -> dict:
    """`tiny_cli_args` as keyword arguments (their values typed, as a script writes them)."""
    flags = tiny_cli_args(output_dir)
    typed = {"max_steps": 2, "per_device_train_batch_size": 4, "num_generations": 4, "max_completion_length": 24,
             "dataset_limit": 16, "eval_before_after": False, "use_vllm": False, "bf16": False, "use_cpu": True,
             "activation_checkpointing": False, "gradient_accumulation_steps": 1, "eos_logit_bias": 3.0,
             "logging_steps": 1}  # fmt: skip
    kwargs = {flags[i][2:]: typed.get(flags[i][2:], flags[i + 1]) for i in range(0, len(flags), 2)}
    return {**kwargs, **extra}


@pytest.fixture
def parsed(monkeypatch):
    """What `train` hands the pipeline, without training: `run_training`'s arguments."""
    calls = []
    monkeypatch.setattr(training, "run_training", lambda *args: calls.append(args) or {"recipe": args[0].recipe})
    return calls


def test_overrides_outrank_the_config_as_command_line_flags(parsed, tmp_path):
    summary = trl_efficient.train(
        "kimi", **_tiny_overrides(tmp_path, max_steps=3, reward_kwargs={"kimi_length": {"warmup_ratio": 0.0}})
    )
    ((script_args, data_args, training_args),) = parsed
    assert summary == {"recipe": "kimi"} and script_args.model_name_or_path == "tiny:qwen2-16"
    assert training_args.max_steps == 3 and training_args.bf16 is False and training_args.use_cpu is True
    assert training_args.reward_kwargs == {"kimi_length": {"warmup_ratio": 0.0}}  # a dict travels as JSON
    assert data_args.dataset_limit == 16


def test_a_dict_config_is_a_yaml_file_and_overrides_still_win(parsed, tmp_path):
    config = {"recipe": "kimi", **_tiny_overrides(tmp_path, max_steps=5, learning_rate=0.25)}
    trl_efficient.train(config, max_steps=2)
    ((script_args, _, training_args),) = parsed
    assert script_args.recipe == "kimi"
    assert training_args.max_steps == 2 and training_args.learning_rate == 0.25  # override > config > recipe


def test_user_errors_raise_naming_what_to_change(parsed, tmp_path):
    with pytest.raises(UserError, match="num_generations"):
        trl_efficient.train("kimi", **_tiny_overrides(tmp_path, num_generations=1))
    with pytest.raises(UserError, match="max_steps=None"):
        trl_efficient.train("kimi", max_steps=None)
    assert parsed == []  # nothing reached the pipeline


def test_a_ten_line_user_script_trains_under_accelerate_launch(tmp_path):
    out = tmp_path / "run"
    script = tmp_path / "my_train.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import json
            import trl_efficient

            summary = trl_efficient.train(
                "kimi",
                **{_tiny_overrides(out)!r},
            )
            with open({str(tmp_path / "summary.json")!r}, "w") as f:
                json.dump(summary, f)
            """
        )
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": ROOT}
    accelerate = os.path.join(os.path.dirname(sys.executable), "accelerate")
    cmd = [accelerate, "launch", "--cpu", "--num_processes", "1", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", str(script)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(tmp_path / "summary.json") as f:
        summary = json.load(f)
    assert summary["recipe"] == "kimi" and summary["model"] == "tiny:qwen2-16"
    assert (out / "model.safetensors").is_file()  # trained and saved as `trl-efficient train` saves
    with open(out / "trl_efficient_run.json") as f:  # the run settings the command records for a rerun
        assert json.load(f)


def test_evaluate_runs_the_eval_command_and_returns_its_results(tiny_model_dir, tmp_path):
    """`trl_efficient.evaluate` is `trl-efficient eval` with keywords for flags: same parser (its defaults, such as
    temperature 0.6), same files, and the results it prints as a dict."""
    out = trl_efficient.evaluate(
        tiny_model_dir, label=["tiny"], benchmarks=["gsm8k"], modes=["plain"], limit=2, max_new_tokens=4,
        eos_logit_bias=3, output_dir=tmp_path, quiet=True, no_plot=True,
    )  # fmt: skip
    ((entry,),) = [out["results"]]
    assert (entry["model"], entry["mode"], entry["benchmark"]) == ("tiny", "plain", "gsm8k")
    assert entry["result"]["num_problems"] == 2 and entry["settings"]["temperature"] == 0.6
    assert out["failed"] == {} and (tmp_path / "tiny" / "plain" / "gsm8k.json").is_file()
    assert not (tmp_path / "pareto.png").exists()  # no_plot=True is the switch --no-plot
    with pytest.raises(UserError, match="unknown keyword 'max_tokens'; choose from .*max_new_tokens"):
        trl_efficient.evaluate(tiny_model_dir, max_tokens=4)
    with pytest.raises(UserError, match="backend='jax': choose one of transformers, vllm"):
        trl_efficient.evaluate(tiny_model_dir, backend="jax")


def test_merge_runs_the_merge_command_and_refuses_bad_values_before_writing(tiny_model_dir, tmp_path):
    info = trl_efficient.merge(
        "layerwise", base=tiny_model_dir, trained=tiny_model_dir, output=tmp_path / "m", ratios=(0.2, 0.5, 0.8)
    )
    assert info["ratios"] == [0.2, 0.5, 0.8]  # a tuple travels as the command's "0.2,0.5,0.8"
    assert (tmp_path / "m" / "model.safetensors").is_file() and (tmp_path / "m" / "README.md").is_file()
    with pytest.raises(ValueError, match=r"--alpha 2: must be in \[0, 1\]"):
        trl_efficient.merge("uniform", base=tiny_model_dir, trained=tiny_model_dir, output=tmp_path / "u", alpha=2)
    assert not (tmp_path / "u").exists()


def test_push_is_the_push_command(offline_run):
    """Offline, `trl_efficient.push` stops before any request with the command's error (the upload itself is
    tests/hub/test_push.py's, through the command that calls the same `hub.push.push`)."""
    from trl_efficient.hub.push import PushError

    with pytest.raises(PushError, match="push needs the network and HF_HUB_OFFLINE is set"):
        trl_efficient.push(offline_run, "tester/x", token="hf_NotARealToken000")
