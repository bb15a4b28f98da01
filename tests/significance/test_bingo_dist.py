"""Bingo rewards across 2 processes (torchrun, gloo, CPU): rewards, schedule and reference cache equal one process's,
with a group straddling the ranks."""

import json
import os

import pytest
from bingo_dist_worker import run
from helpers import run_torchrun

WORKER = os.path.join(os.path.dirname(__file__), "bingo_dist_worker.py")


@pytest.mark.dist
def test_one_vs_two_processes(tiny_model_dir, tmp_path):
    single = run(tiny_model_dir, 0, 1)  # in-process, no torch.distributed: gather_rows is the identity
    single = json.loads(json.dumps(single))  # same JSON round trip as the workers' dumps
    ranks = run_torchrun(WORKER, 2, tmp_path, tiny_model_dir, tmp_path)
    for name in ("group", "model"):
        for step in range(2):
            assert ranks[0]["rewards"][name][step] + ranks[1]["rewards"][name][step] == pytest.approx(
                single["rewards"][name][step]
            )
        assert ranks[0]["states"][name] == ranks[1]["states"][name] == single["states"][name]
    # questions "What is k + 1?" for k = 0, 1, 2 (step 0) and 1, 2, 3 (step 1): 4 distinct prompts, 2 reused
    assert len(single["states"]["model"]["reference_cache"]) == 4
    assert single["states"]["group"]["schedule"]["steps"] == 2
    # the middle group (rows 4-7) straddles the ranks: its reference mixes both ranks' rows
    assert len(ranks[0]["rewards"]["group"][0]) == 6
