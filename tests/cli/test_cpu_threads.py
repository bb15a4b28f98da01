"""The CPU thread hint (issue 36, item 7): torch's default threads made a step 10x slower on a 2-core machine shared
with other work (905 s against 91 s with OMP_NUM_THREADS=1). `trl-efficient train` says so in one line at config time
when torch's threads outnumber the free cores and the user did not choose them; it changes nothing it runs."""

import logging
import os
from types import SimpleNamespace

import pytest
import torch

from trl_efficient.api.training import cpu_threads_hint, parse_train_args, warn_cpu_threads


@pytest.mark.parametrize(
    "threads, cpus, load, free",
    [
        (2, 2, 5.0, 1),  # the machine: 2 cores, 5 busy workers -> max(1, 2 - 5) = 1 free
        (2, 2, 0.2, None),  # idle: 2 - 0 = 2 free, 2 threads fit
        (1, 2, 5.0, None),  # one thread always fits
        (16, 16, 8.4, 8),  # 16 - round(8.4) = 8 free
    ],
)
def test_hint_when_threads_outnumber_free_cores(threads, cpus, load, free):
    line = cpu_threads_hint(threads, cpus, load)
    if free is None:
        assert line is None
    else:
        assert line.startswith(f"torch will use {threads} threads on CPU while about {free} of the {cpus} cores")
        assert f"set OMP_NUM_THREADS={free} before the command" in line and "\n" not in line


@pytest.fixture
def busy_two_cores(monkeypatch):
    """This process sees 2 cores with a load average of 5, torch runs 2 threads, OMP_NUM_THREADS is unset."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 5.0, 5.0), raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _hints(caplog):
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("torch will use")]


def test_train_says_it_once_at_config_time(busy_two_cores, tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.WARNING)
    cpu = ["--bf16", "false", "--use_cpu", "true", "--output_dir", str(tmp_path)]
    parse_train_args(["--model_name_or_path", "tiny:qwen2", *cpu])
    (line,) = _hints(caplog)
    assert line.startswith("torch will use 2 threads on CPU while about 1 of the 2 cores are free (load average 5.0)")
    # the testbed runs on one thread already, and a thread count the user chose is theirs: no hint
    caplog.clear()
    warn_cpu_threads(SimpleNamespace(model_name_or_path="testbed:base"), SimpleNamespace(use_cpu=True))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    warn_cpu_threads(SimpleNamespace(model_name_or_path="tiny:qwen2"), SimpleNamespace(use_cpu=True))
    assert _hints(caplog) == []
    monkeypatch.delenv("OMP_NUM_THREADS")
    warn_cpu_threads(SimpleNamespace(model_name_or_path="tiny:qwen2"), SimpleNamespace(use_cpu=True))
    assert len(_hints(caplog)) == 1  # the same call without the two exemptions does hint
