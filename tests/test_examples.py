"""Every example runs, exactly as its header documents it, in its smoke mode (`SMOKE=1`: a tiny offline model, 1-2
steps, CPU), so a refactor cannot break one silently (`examples/`). The accelerate configs that can run on CPU are
launched with the command the docs give (2 processes, gloo): `examples/launch.sh cpu-2proc` (marked `dist`, like
tests/multiprocess) and `zero2-cpu`/`zero3-cpu` (the `deepspeed` tier); the GPU-only ones (`ddp`, `zero2`, `zero3`)
go through `scripts/gpu_check.sh`."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI_DOCS = open(os.path.join(ROOT, "docs", "cli.md"), encoding="utf-8").read()  # the launch commands
TESTING_DOCS = open(os.path.join(ROOT, "docs", "testing.md"), encoding="utf-8").read()  # the tiers' commands
LAUNCH = open(os.path.join(ROOT, "examples", "launch.sh"), encoding="utf-8").read()


def _run(argv, tmp_path, timeout=900, **env):
    """Run an example command from the checkout root in smoke mode; the console scripts of this environment first."""
    env = {
        **os.environ,
        "SMOKE": "1",
        "OUTPUT_DIR": str(tmp_path / "out"),
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        "HF_HUB_OFFLINE": "1",
        **env,
    }
    env.pop("TRL_EFFICIENT_BINGO_SCORER", None)
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _epoch(output_dir) -> float:
    """The epoch reached at checkpoint-1: 1 step of 4 completions per process (G = 4) over 16 prompts is 1/16 of an
    epoch per process, so 2/16 proves that two processes trained."""
    with open(os.path.join(output_dir, "checkpoint-1", "trainer_state.json")) as f:
        return json.load(f)["epoch"]


def test_plain_trl_rewards_example(tmp_path):
    proc = _run([sys.executable, "examples/plain_trl_rewards.py"], tmp_path)
    assert "plain GRPOTrainer with trl-efficient rewards: 2 steps" in proc.stdout
    # TRL logs each of our rewards under its __name__
    for name in ("correctness_reward", "kimi_length_reward", "shorter_better_reward"):
        assert f"'rewards/{name}/mean'" in proc.stdout + proc.stderr


def test_bingo_with_scorer_server_example(tmp_path):
    # a scorer server process, then the `bingo` recipe training 2 steps against it over HTTP
    argv = ["bash", "examples/bingo_with_scorer_server.sh", "--output_dir", str(tmp_path / "out")]
    proc = _run(argv, tmp_path, timeout=1800)  # two processes load models: 5 min on 2 busy cores, 15+ under load
    assert "scorer ready at http://127.0.0.1:" in proc.stdout
    assert "recipe 'bingo'" in proc.stdout
    assert os.path.exists(tmp_path / "out" / "trl_efficient_summary.json")


@pytest.mark.parametrize("section, recipe", [("quickstart", "kimi"), ("one-gpu", "kimi")])
def test_launch_single_process_sections(section, recipe, tmp_path):
    proc = _run(["bash", "examples/launch.sh", section], tmp_path)
    assert f"recipe '{recipe}' on tiny:qwen2-16" in proc.stdout
    assert _epoch(tmp_path / "out") == pytest.approx(1 / 16)


@pytest.mark.dist
def test_launch_cpu_two_processes(tmp_path):
    proc = _run(["bash", "examples/launch.sh", "cpu-2proc"], tmp_path)
    assert "recipe 'kimi' on tiny:qwen2-16" in proc.stdout
    assert _epoch(tmp_path / "out") == pytest.approx(2 / 16)


@pytest.mark.deepspeed
@pytest.mark.parametrize("section", ["zero2-cpu", "zero3-cpu"])
def test_launch_deepspeed_on_cpu(section, tmp_path):
    pytest.importorskip("deepspeed")
    _run(["bash", "examples/launch.sh", section], tmp_path, DS_ACCELERATOR="cpu", timeout=1800)
    assert _epoch(tmp_path / "out") == pytest.approx(2 / 16)


def test_documented_launch_commands_are_the_tested_ones():
    # every `accelerate launch --config_file examples/accelerate/...` command of docs/cli.md is a launch.sh section
    readme = re.findall(r"accelerate launch --config_file examples/accelerate/(\S+\.yaml)(.*)", CLI_DOCS)
    assert {name for name, _ in readme} >= {"cpu_2proc.yaml", "zero2.yaml"}
    for name, rest in readme:
        assert f'--config_file "$HERE/accelerate/{name}"' in LAUNCH, name
        flags = rest.split("#")[0].strip().rstrip("`").split()
        assert all(flag in LAUNCH for flag in flags), (name, flags)
    for name in os.listdir(os.path.join(ROOT, "examples", "accelerate")):
        assert f"accelerate/{name}" in LAUNCH, name  # every config has its launch.sh section


def test_launch_without_a_section_lists_them():
    proc = subprocess.run(["bash", "examples/launch.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "CPU:  quickstart, cpu-2proc" in proc.stderr


def test_readme_vllm_tier_command_runs_every_vllm_test():
    # docs/testing.md's vLLM tier command names folders; every test file with a vllm mark must sit in one of them
    (command,) = re.findall(r"venv-vllm/bin/python -m pytest -m vllm ([^`]*)`", TESTING_DOCS)
    folders = command.split()
    marked = []
    for folder, _, files in os.walk(os.path.join(ROOT, "tests")):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".py") and re.search(r"pytest\.mark\.vllm|mark\.vllm", open(path).read()):
                marked.append(os.path.relpath(path, ROOT))
    assert len(marked) >= 4  # tests/methods (colocate, server mode, O1-Pruner) and tests/eval
    assert [p for p in marked if not any(p.startswith(f + "/") for f in folders)] == []
