"""LAPO with 1 process vs 2 processes (torchrun, gloo, CPU): a group straddles the ranks, and the stage-1 and stage-2
rewards, the per-prompt memory (updated from the gathered batch) and the stage-2 prefills are the same."""

import os

import pytest
from helpers import run_one_and_two

from trl_efficient.rewards.lapo import lapo_stage1_rewards, lapo_stage2_rewards

SCRIPT = os.path.join(os.path.dirname(__file__), "run_lapo_trainer.py")


@pytest.mark.dist
def test_lapo_one_vs_two_processes(tiny_model_dir, tmp_path):
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path)
    assert len(single["records"]) == 4
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        assert rec["metadata"]["lapo_stage"] == [1 if step < 2 else 2] * 12
        for key in ("lengths", "metadata", "rewards", "memory_before_update"):
            assert r0[key] == r1[key] == rec[key], key
        assert r0["prompts_decoded"] + r1["prompts_decoded"] == rec["prompts_decoded"]
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
        # the gathered rewards are the whole-group formulas (the middle group straddles the ranks with 2 processes)
        lapo = [r[0] for r in rec["rewards"]]
        correct = [r[1] > 0.5 for r in rec["rewards"]]
        rows = list(zip(correct, [int(n) for n in rec["lengths"]], strict=True))
        for g in range(3):
            group = rows[4 * g : 4 * g + 4]
            target = rec["metadata"]["lapo_target_length"][4 * g]
            if step < 2:
                expected = lapo_stage1_rewards(group, 0.7, 10.0)
            else:
                expected = lapo_stage2_rewards(group, target, 4096, 0.8, 12.0)
            assert lapo[4 * g : 4 * g + 4] == pytest.approx(expected, abs=1e-6)
    assert ranks[0]["memory"] == ranks[1]["memory"] == single["memory"]
    assert single["memory"]["targets"]  # something was recorded
    # stage 2 prompted recorded lengths (not only the unknown default)
    assert any(t != 4096 for rec in single["records"][2:] for t in rec["metadata"]["lapo_target_length"])
