"""1 process vs 2 processes (torchrun, gloo, CPU) give the same rewards, advantages, masks and history, with groups
straddling the ranks (trl-hooks.md §9)."""

import os

import pytest
from helpers import run_torchrun

SCRIPT = os.path.join(os.path.dirname(__file__), "run_group_trainer.py")


def _run(model_dir, out_dir, nproc, estimator):
    return run_torchrun(SCRIPT, nproc, out_dir, model_dir, out_dir, estimator)


@pytest.mark.dist
@pytest.mark.parametrize("estimator", ["grpo", "group_center_batch_whiten"])
def test_one_vs_two_processes(tiny_model_dir, tmp_path, estimator):
    (single,) = _run(tiny_model_dir, tmp_path / "one", 1, estimator)
    ranks = _run(tiny_model_dir, tmp_path / "two", 2, estimator)
    assert len(single["records"]) == 2
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        # gathered signals are identical on every rank and equal to the single process's
        assert r0["rewards"] == r1["rewards"]
        for key in ("lengths", "metadata"):
            assert r0[key] == r1[key] == rec[key]
        assert rec["metadata"]["budget"] == [24, 24, 48, 48] * 3
        for a, b in zip(r0["rewards"], rec["rewards"], strict=True):
            assert a == pytest.approx(b, abs=1e-6, nan_ok=True)
        # local slices of advantages and masks concatenate to the single-process values
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
        assert r0["completion_mask_sums"] + r1["completion_mask_sums"] == rec["completion_mask_sums"]
        assert len(r0["advantages"]) == 6
    assert ranks[0]["history"] == ranks[1]["history"] == single["history"]
    assert single["history"]["attempts"]
