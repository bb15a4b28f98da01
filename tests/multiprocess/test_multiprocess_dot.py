"""DOT (methods.md §21): 1 process vs 2 processes (torchrun, gloo, CPU) give the same cuts, re-scored rewards, masks,
pass-rate window and refill draws, with refilled groups straddling the ranks (docs/trl-integration.md §9)."""

import os

import pytest
from helpers import run_one_and_two

SCRIPT = os.path.join(os.path.dirname(__file__), "run_dot_trainer.py")


@pytest.mark.dist
def test_dot_one_vs_two_processes(tiny_model_dir, tmp_path):
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path)
    assert len(single["records"]) == 2
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        for key in ("rewards", "lengths", "truncated", "idx"):
            assert r0[key] == r1[key] == rec[key], key
        # by hand (run_dot_trainer.py): groups of [10, 10, 10, 100] all correct are cut to 77 and re-scored wrong
        assert rec["lengths"][:4] == [10, 10, 10, 77] and rec["rewards"][:4] == [1, 1, 1, 0]
        assert rec["truncated"][:4] == [False, False, False, True]
        # local slices concatenate to the single process's; the loss normaliser is global
        assert r0["completion_mask_sums"] + r1["completion_mask_sums"] == rec["completion_mask_sums"] == rec["lengths"]
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
        assert r0["num_items_in_batch"] == r1["num_items_in_batch"] == rec["num_items_in_batch"] == 474
    # every rank scored the same number of times (first pass, re-scoring, refill), with its half of the rows
    # per step: the dataloader's 16 rows, their re-scoring after the cuts, a refill of 2 prompts (step 1: factor 1.5,
    # floor(4 * 1.5) - 4) or 1 prompt (step 2: factor 1 / (5/6) = 1.2, floor(4.8) - 4 = 0 -> at least 1)
    assert [len(p) for p in single["scoring_passes"]] == [16, 16, 8, 16, 16, 4]
    for r in ranks:
        assert [len(p) for p in r["scoring_passes"]] == [8, 8, 4, 8, 8, 2]
    assert ranks[0]["scoring_passes"][1] + ranks[1]["scoring_passes"][1] == single["scoring_passes"][1]
    assert ranks[0]["window"] == ranks[1]["window"] == single["window"]
    assert single["window"]["rates"] == pytest.approx([5 / 6, 4 / 5])
    assert ranks[0]["refill"] == ranks[1]["refill"] == single["refill"] == {"epoch": 0, "position": 3}
