"""ALP, GRPO-λ and ASRR: 1 process vs 2 processes (torchrun, gloo, CPU) give the same rewards and advantages, with the
middle group of G=4 straddling the ranks, and ASRR's no-think prefix in every prompt."""

import math
import os

import pytest
from helpers import run_one_and_two

from trl_efficient.prompts import ASRR_NO_THINK_PREFIX

SCRIPT = os.path.join(os.path.dirname(__file__), "run_solve_rate_trainer.py")
ALP, LAMBDA, ASRR = 1, 2, 3  # reward columns after correctness


def _alp(correct, lengths):
    # methods.md §14 by hand: p = solve rate of the group, r = c - (0.5/48) max(p, 1/4) L
    p = sum(correct) / 4
    return [c - 0.5 / 48 * max(p, 0.25) * n for c, n in zip(correct, lengths, strict=True)]


def _asrr(correct, lengths):
    # methods.md §24 by hand, tau = 0, beta 0.5, eps 1e-6, window 16: alpha = 0.5 (Acc + 1e-6)/(1 + 1e-6),
    # O = clip((L - shortest correct)/16, 0, 1), 0 without a correct answer
    alpha = 0.5 * (sum(correct) / 4 + 1e-6) / (1 + 1e-6)
    shortest = min((n for c, n in zip(correct, lengths, strict=True) if c), default=None)
    over = [0.0 if shortest is None else min(max((n - shortest) / 16, 0.0), 1.0) for n in lengths]
    return [c - alpha * o for c, o in zip(correct, over, strict=True)]


@pytest.mark.dist
def test_solve_rate_rewards_one_vs_two_processes(tiny_model_dir, tmp_path):
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path)
    assert len(single["records"]) == 2
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        assert r0["lengths"] == r1["lengths"] == rec["lengths"]
        for a, b, c in zip(r0["rewards"], r1["rewards"], rec["rewards"], strict=True):
            assert a == pytest.approx(b, abs=1e-6, nan_ok=True) and a == pytest.approx(c, abs=1e-6, nan_ok=True)
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
        # every prompt (both ranks, the straddling group included) ends with the no-think prefix
        assert len(r0["prompts_decoded"]) == len(r1["prompts_decoded"]) == 6
        assert all(p.endswith(ASRR_NO_THINK_PREFIX) for p in r0["prompts_decoded"] + r1["prompts_decoded"])
        # the straddling group (global rows 4..7) is scored whole: ALP and ASRR recomputed from the gathered rows
        correct = [row[0] for row in rec["rewards"]]
        for g in range(3):
            rows = slice(4 * g, 4 * g + 4)
            for column, formula in ((ALP, _alp), (ASRR, _asrr)):
                expected = formula(correct[rows], rec["lengths"][rows])
                assert [row[column] for row in rec["rewards"][rows]] == pytest.approx(expected, abs=1e-5)
        # GRPO-λ: ceil(0.5 * 3) = 2 efficiency groups; a correct answer there scores 1 - 0.6 sigmoid(z) < 1
        assert any(0.4 <= row[LAMBDA] < 1.0 for row in rec["rewards"] if row[0] == 1.0)
        assert not any(math.isnan(row[k]) for row in rec["rewards"] for k in (ALP, LAMBDA, ASRR))
