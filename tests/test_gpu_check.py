"""scripts/gpu_check.sh on a machine without CUDA: every check is a SKIP with its reason, a final count, exit 0.

The checks themselves need a GPU (docs/gpu-check.md); here we pin what a CPU-only run prints and the pure helpers
the driver uses to compare 1-process and 2-process runs.
"""

import importlib.util
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_check.sh")
CHECKS = ["bf16-train", "hbpo-budgets", "ddp-1-vs-2", "zero3", "vllm-colocate", "vllm-server", "cost"]


def _load_driver():
    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(ROOT, "scripts", "gpu_check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args, timeout=120):
    env = {**os.environ, "PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": ""}  # no GPU even where there is one
    env.pop("MODEL", None)
    return subprocess.run(["bash", SCRIPT, *args], env=env, capture_output=True, text=True, timeout=timeout)


def test_shell_syntax():
    assert subprocess.run(["bash", "-n", SCRIPT], capture_output=True).returncode == 0


def test_no_cuda_every_check_skips_with_reason_and_count():
    proc = _run()
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert any(line.startswith("Needs beyond torch: this package (`pip install -e .`") for line in lines)
    assert "model: tiny:qwen2 (built offline, no download)" in lines
    results = [line for line in lines if re.match(r"^(PASS|FAIL|SKIP) ", line)]
    reason = "no CUDA device (torch.cuda.is_available() is False)"
    assert results == [f"SKIP {name}: {reason}" for name in CHECKS]
    assert lines[-1] == "GPU check: 0 passed, 0 failed, 7 skipped"
    assert not any(line.startswith("logs:") for line in lines)  # nothing written without a GPU


def test_only_selects_checks_and_bad_name_is_an_error():
    proc = _run("--only", "zero3", "bf16-train")
    assert [line.split(":")[0] for line in proc.stdout.splitlines() if line.startswith("SKIP")] == [
        "SKIP bf16-train",
        "SKIP zero3",
    ]
    assert proc.stdout.splitlines()[-1] == "GPU check: 0 passed, 0 failed, 2 skipped"
    bad = _run("--only", "nope")
    assert bad.returncode == 2 and "invalid choice: 'nope'" in bad.stderr


def test_close_compares_nested_rewards_with_tolerance_and_none():
    close = _load_driver()._close
    assert close([[1.0, None], [2.0, 3.0]], [[1.0 + 5e-7, None], [2.0, 3.0]], 1e-6)
    assert not close([[1.0, None]], [[1.0 + 2e-6, None]], 1e-6)  # beyond the tolerance
    assert not close([[1.0, None]], [[1.0, 0.0]], 1e-6)  # None (no reward) vs a value
    assert not close([1.0, 2.0], [1.0], 1e-6)  # different lengths


def test_last_error_line_names_the_failure(tmp_path):
    log = tmp_path / "check.log"
    log.write_text("loading\nTraceback (most recent call last):\n  File x\nAssertionError: losses [nan]\ndone\n")
    assert _load_driver()._last_error(str(log)) == "AssertionError: losses [nan]"
    log.write_text("")
    assert _load_driver()._last_error(str(log)) == "no output"
