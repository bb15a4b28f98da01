"""HAPO and A-DLP with 1 process vs 2 processes (torchrun, gloo, CPU): the middle group straddles the ranks, and the
gathered rewards (correctness, HAPO's length term read from the prompt history, A-DLP's -lambda L), the advantages,
the prompt history and lambda are the same on every rank and equal to the single process's."""

import math
import os

import pytest
from helpers import run_one_and_two

SCRIPT = os.path.join(os.path.dirname(__file__), "run_adaptive_trainer.py")


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("adaptive_mp")
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, out)
    return single, ranks


@pytest.mark.dist
def test_one_vs_two_processes(runs):
    single, (rank0, rank1) = runs
    assert len(single["records"]) == 3
    for step, rec in enumerate(single["records"]):
        r0, r1 = rank0["records"][step], rank1["records"][step]
        for key in ("lengths", "metadata"):
            assert r0[key] == r1[key] == rec[key]
        for a, b, c in zip(r0["rewards"], r1["rewards"], rec["rewards"], strict=True):
            assert a == pytest.approx(b, abs=1e-6, nan_ok=True) and a == pytest.approx(c, abs=1e-6, nan_ok=True)
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
    assert rank0["state"] == rank1["state"] == single["state"]
    assert rank0["lambda_logged"] == pytest.approx(single["lambda_logged"])


@pytest.mark.dist
def test_history_and_lambda_by_hand(runs):
    single = runs[0]
    # lambda_{t+1} = clip(lambda_t + 0.05 (acc_t - 0.5), 0, 0.05), lambda_0 = 0.01, acc_t from the correctness column;
    # step t's A-DLP column is -lambda_t L
    lam, best, history_read = 0.01, {}, False
    for rec in single["records"]:
        rows = list(zip(rec["rewards"], rec["lengths"], rec["metadata"]["idx"], strict=True))
        for r, L, i in rows:
            assert r[2] == pytest.approx(-lam * L, abs=1e-6)
            h = best.get(i)
            if h is None:
                assert r[1] == 0.0
            else:
                x = L / h
                c = math.cos(x * math.pi / 2) if x < 2 else -1.0
                assert r[1] == pytest.approx(max(-0.7, c) if r[0] > 0.5 else min(0.0, c), abs=1e-6)
                history_read = True
        for r, L, i in rows:
            if r[0] > 0.5:
                best[i] = min(best.get(i, L), L)
        acc = sum(r[0] > 0.5 for r, _, _ in rows) / len(rows)
        lam = min(0.05, max(0.0, lam + 0.05 * (acc - 0.5)))
    assert history_read
    assert single["state"]["adlp_length_reward"] == {"lambda": pytest.approx(lam), "steps": 3}
    assert single["state"]["prompt_history"]["best_length"] == {str(k): int(v) for k, v in best.items()}
