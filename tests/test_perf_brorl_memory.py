"""perf/brorl_memory.py runs in smoke mode and its row counts are the generation calls' own (the timings and memory
are not tested)."""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load():
    spec = importlib.util.spec_from_file_location("brorl_memory", os.path.join(ROOT, "perf", "brorl_memory.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["brorl_memory"] = module
    spec.loader.exec_module(module)
    return module


def test_smoke_prints_every_arm_with_counted_rows(capsys):
    rows = _load().main(["--smoke"])
    # N 8 and 16, each without chunks (one call of N rows) and with chunks of 4 (N / 4 calls), in 2 steps each
    assert [(r["n"], r["chunk"]) for r in rows] == [(8, None), (8, 4), (16, None), (16, 4)]
    assert [r["rows_per_call"] for r in rows] == [8, 4, 16, 4]
    assert [r["generate_calls"] for r in rows] == [2, 4, 2, 8]
    assert [r["micro_batch"] for r in rows] == [8, 8, 8, 8]  # TRL's micro-batches: 16 rollouts span 2
    assert all(r["peak_bytes"] > 0 and r["s_per_step"] > 0 for r in rows)
    out = capsys.readouterr().out
    assert "| N | chunk | rows/call |" in out and "| 16 | 4 | 4 | 8 |" in out
