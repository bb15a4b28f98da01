"""Logging: `report_to` TensorBoard and Trackio record the `trl_efficient/*` metrics of a 2-step run, read back
from what each backend wrote (TensorBoard's event file; Trackio's local store)."""

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import tiny_cli_args

from trl_efficient.api.training import train_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# logged every step by EfficientGRPOTrainer (trainer.py, group-stage metrics), whatever the recipe
EXPECTED = ("trl_efficient/truncated_fraction", "trl_efficient/accuracy")


def test_tensorboard_event_file_holds_trl_efficient_scalars(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(logdir))  # transformers' TensorBoardCallback reads it
    monkeypatch.chdir(ROOT)
    train_main(["--config", "configs/grpo.yaml", *tiny_cli_args(tmp_path / "run", report_to="tensorboard")])
    events = [f for f in os.listdir(logdir) if f.startswith("events.out.tfevents")]
    assert events, os.listdir(logdir)
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for name in EXPECTED:
        tag = f"train/{name}"  # the Trainer's "train/" prefix
        assert tag in tags, tags
        points = acc.Scalars(tag)
        assert [p.step for p in points] == [1, 2]  # logging_steps=1, max_steps=2
        assert all(math.isfinite(p.value) for p in points)
    assert all(0.0 <= p.value <= 1.0 for p in acc.Scalars("train/trl_efficient/truncated_fraction"))


TRACKIO_RUN = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {tests!r})
    from helpers import tiny_cli_args
    from trl_efficient.api.training import train_main
    train_main(["--config", "configs/grpo.yaml", *tiny_cli_args({out!r}, report_to="trackio"),
                "--project", "trl-efficient-test", "--run_name", "two-steps"])
    from trackio.sqlite_storage import SQLiteStorage
    print("LOGS=" + json.dumps(SQLiteStorage.get_logs("trl-efficient-test", "two-steps"), default=str))
    """
)


def test_trackio_local_store_holds_trl_efficient_metrics(tmp_path):
    pytest.importorskip("trackio")
    # A fresh process: trackio reads TRACKIO_DIR (its local SQLite store) when it is imported.
    script = TRACKIO_RUN.format(tests=os.path.dirname(ROOT + "/tests/"), out=str(tmp_path / "run"))
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    logs = json.loads(proc.stdout.split("LOGS=", 1)[1])
    steps = [row for row in logs if f"train/{EXPECTED[0]}" in row]  # the Trainer's "train/" prefix
    assert [row["step"] for row in steps] == [1, 2], [sorted(row) for row in logs]
    for row in steps:
        for name in EXPECTED:
            assert math.isfinite(row[f"train/{name}"])
        assert 0.0 <= row["train/trl_efficient/truncated_fraction"] <= 1.0
