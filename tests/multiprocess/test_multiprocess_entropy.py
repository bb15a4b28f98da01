"""CANON's entropy variant with 1 process vs 2 processes (torchrun, gloo, CPU): the middle group straddles the
ranks; the gathered entropies (rounded to 1e-4 nats), rewards and advantages are the same."""

import os

import pytest
from helpers import run_one_and_two

SCRIPT = os.path.join(os.path.dirname(__file__), "run_entropy_trainer.py")


@pytest.mark.dist
def test_canon_entropy_one_vs_two_processes(tiny_model_dir, tmp_path):
    single, (rank0, rank1) = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path, timeout=600)
    steps = len(single["records"])
    assert steps >= 2 and len(rank0["records"]) == len(rank1["records"]) == steps
    for rec, r0, r1 in zip(single["records"], rank0["records"], rank1["records"], strict=True):
        assert r0["lengths"] == r1["lengths"] == rec["lengths"]
        assert r0["entropy"] == r1["entropy"]  # every rank holds the same gathered values
        assert r0["entropy"] == pytest.approx(rec["entropy"], abs=2e-4)
        assert r0["rewards"] == r1["rewards"] == rec["rewards"]
        assert r0["prompts_decoded"] + r1["prompts_decoded"] == rec["prompts_decoded"]
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-4)
        assert any(a != 0 for a in rec["advantages"])
