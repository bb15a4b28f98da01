"""perf/lisa_memory.py runs in smoke mode and its numbers are the tensors' own (the timings are not tested)."""

import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load():
    spec = importlib.util.spec_from_file_location("lisa_memory", os.path.join(ROOT, "perf", "lisa_memory.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["lisa_memory"] = module
    spec.loader.exec_module(module)
    return module


def test_smoke_prints_the_three_arms_with_ratios(tmp_path, capsys):
    rows = _load().main(["--smoke", "--json", str(tmp_path / "rows.json")])
    out = capsys.readouterr().out
    assert "| arm | peak MiB | grads+Adam MiB |" in out and "| lisa |" in out and "| lora |" in out
    by_arm = {r["arm"]: r for r in rows}
    assert set(by_arm) == {"full", "lisa", "lora"}
    full, lisa = by_arm["full"], by_arm["lisa"]
    # the smoke model: 4 decoder layers, gamma 2; full fine-tuning trains every parameter, LISA all but 2 layers
    assert full["trained_params"] == full["total_params"]
    per_layer = (full["total_params"] - lisa["trained_params"]) / 2
    assert per_layer == int(per_layer) and 0 < per_layer < full["total_params"] / 4
    # AdamW in float32: gradient + exp_avg + exp_avg_sq = 12 bytes a trained parameter, plus a 4-byte step per tensor
    for row in (full, lisa):
        assert 12 * row["trained_params"] <= row["train_state_bytes"] < 12 * row["trained_params"] + 4 * 100
    assert lisa["train_state_bytes"] < full["train_state_bytes"]
    assert json.loads((tmp_path / "rows.json").read_text())["rows"] == rows
