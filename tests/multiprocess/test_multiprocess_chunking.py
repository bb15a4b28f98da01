"""Generation in chunks with 1 process vs 2 processes (torchrun, gloo, CPU): one group of 16 that straddles the
ranks, 4 rows per generate call on every rank: the same rewards and lengths, advantages over the whole gathered
group (rank 0's and rank 1's slices make the single process's), the same loss, reward and weights
(trl_efficient/trainer/chunking.py)."""

import os

import pytest
from helpers import run_one_and_two

SCRIPT = os.path.join(os.path.dirname(__file__), "run_chunking_trainer.py")


@pytest.mark.dist
def test_chunked_generation_one_vs_two_processes(tiny_model_dir, tmp_path):
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path)
    assert single["calls"] == [4] * 8  # 2 steps x 16 rows in chunks of 4
    assert ranks[0]["calls"] == ranks[1]["calls"] == [4] * 4  # 2 steps x 8 rows per rank
    assert len(single["records"]) == 2
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        assert r0["rewards"] == r1["rewards"] == rec["rewards"]  # the gathered group, the same on every rank
        assert r0["lengths"] == r1["lengths"] == rec["lengths"]
        assert len(set(map(tuple, rec["rewards"]))) > 1  # the group carries a signal
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
    for run in ranks:
        assert run["reward"] == single["reward"]
        assert run["loss"] == pytest.approx(single["loss"], abs=1e-5)
        assert run["policy_sums"] == pytest.approx(single["policy_sums"], abs=1e-4)
