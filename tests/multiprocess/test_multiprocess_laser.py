"""LASER-DE, 1 process vs 2 processes (torchrun, gloo, CPU): the monitoring pass gives identical targets on every
rank, equal to a single process's (seeded chunks, all-gathered records), and the bucketed rewards of a group that
straddles the ranks are the single process's."""

import os

import pytest
from helpers import run_one_and_two

SCRIPT = os.path.join(os.path.dirname(__file__), "run_laser_trainer.py")


@pytest.mark.dist
def test_laser_monitor_and_rewards_one_vs_two_processes(tiny_model_dir, tmp_path):
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path)
    assert [p["step"] for p in single["passes"]] == [0, 1, 2]  # train begin, then every step (interval 1)
    assert single["state"]["failures"] == 0 and single["state"]["targets"]["low"] is not None
    for p in single["passes"]:
        assert len(p["records"]) == 6 and all(len(flags) == 2 for flags, _ in p["records"])
    # the monitor state (targets, statistics, records of every pass) is identical on both ranks and to 1 process
    assert ranks[0]["passes"] == ranks[1]["passes"] == single["passes"]
    assert ranks[0]["state"] == ranks[1]["state"] == single["state"]
    assert len(single["records"]) == 2
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        assert r0["lengths"] == r1["lengths"] == rec["lengths"]
        assert r0["rewards"] == r1["rewards"]
        for a, b in zip(r0["rewards"], rec["rewards"], strict=True):
            assert a == pytest.approx(b, abs=1e-6, nan_ok=True)
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
