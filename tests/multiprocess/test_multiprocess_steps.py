"""Step Pruner and GRSP with 1 process vs 2 processes (torchrun, gloo, CPU): the middle group straddles the ranks, and
the gathered rewards, the advantages and the stop rule's state are the same on every rank and equal to the single
process's; the stop rule's state is recomputed by hand from the recorded lengths."""

import os

import pytest
from helpers import run_one_and_two

SCRIPT = os.path.join(os.path.dirname(__file__), "run_steps_trainer.py")


@pytest.mark.dist
def test_one_vs_two_processes(tiny_model_dir, tmp_path):
    single, (rank0, rank1) = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path)
    assert len(single["records"]) == len(rank0["records"]) == len(rank1["records"]) >= 2
    assert single["global_step"] == rank0["global_step"] == rank1["global_step"]
    nonzero = False
    for rec, r0, r1 in zip(single["records"], rank0["records"], rank1["records"], strict=True):
        assert r0["lengths"] == r1["lengths"] == rec["lengths"]
        for a, b, c in zip(r0["rewards"], r1["rewards"], rec["rewards"], strict=True):
            assert a == pytest.approx(b, abs=1e-6, nan_ok=True) and a == pytest.approx(c, abs=1e-6, nan_ok=True)
            nonzero |= a[1] != 0.0 or a[2] != 0.0
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
    assert nonzero  # the step terms were not all zero
    assert rank0["state"] == rank1["state"] == single["state"]
    # stop rule by hand: window 2, a check every batch, patience 1 -> stop at the first average that is no new low
    means = [sum(r["lengths"]) / len(r["lengths"]) for r in single["records"]]
    best, stop, window, fired_at = None, False, [], None
    for i, m in enumerate(means, start=1):
        window = (window + [m])[-2:]
        avg = sum(window) / len(window)
        if best is None or avg < best:
            best = avg
        elif not stop:
            stop, fired_at = True, i
    assert single["state"]["stop_requested"] == stop
    assert single["state"]["best_average"] == pytest.approx(best)
    # the callback ends training at the step the rule fired (else it runs to max_steps = 3)
    assert len(means) == (fired_at if stop else 3)
