"""HBPO with 1 process vs 2 processes (torchrun, gloo, CPU): budget subgroups straddle the ranks, and the gathered
rewards, the HBPO advantages (group z-score + subgroup term) and the per-budget metrics are the same."""

import os

import pytest
import torch
from helpers import run_one_and_two

from trl_efficient.methods.hbpo import hbpo_advantages

SCRIPT = os.path.join(os.path.dirname(__file__), "run_hbpo_trainer.py")


@pytest.mark.dist
def test_hbpo_one_vs_two_processes(tiny_model_dir, tmp_path):
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path)
    assert len(single["records"]) == 2
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        assert rec["metadata"]["budget"] == [8, 8, 64, 64] * 3
        for key in ("lengths", "metadata"):
            assert r0[key] == r1[key] == rec[key]
        for a, b in zip(r0["rewards"], rec["rewards"], strict=True):
            assert a == pytest.approx(b, abs=1e-6, nan_ok=True)
        # each rank's prompts carry their own subgroup's prefill; together they are the single process's prompts
        assert r0["prompts_decoded"] + r1["prompts_decoded"] == rec["prompts_decoded"]
        # local advantage slices concatenate to the single-process values, which are HBPO's on the gathered batch
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
        total = torch.tensor([r[0] for r in rec["rewards"]])
        expected = hbpo_advantages(total, torch.tensor(rec["metadata"]["budget"], dtype=torch.float32), 4)
        assert rec["advantages"] == pytest.approx(expected.tolist(), abs=1e-5)
    assert ranks[0]["metrics"] == pytest.approx(single["metrics"], abs=1e-5)
    assert "trl_efficient/budget_64/reward" in single["metrics"]
