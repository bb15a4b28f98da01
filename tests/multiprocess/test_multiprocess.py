"""1 process vs 2 processes (torchrun, gloo, CPU) give the same rewards, advantages, masks and history, with groups
straddling the ranks (docs/trl-integration.md §9)."""

import os

import pytest
from helpers import run_one_and_two

SCRIPT = os.path.join(os.path.dirname(__file__), "run_group_trainer.py")


@pytest.mark.dist
@pytest.mark.parametrize("estimator", ["grpo", "group_center_batch_whiten"])
def test_one_vs_two_processes(tiny_model_dir, tmp_path, estimator):
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path, estimator)
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


L1_SCRIPT = os.path.join(os.path.dirname(__file__), "run_l1_group_trainer.py")
L1_TARGET = __import__("re").compile(r"Think for (\d+) tokens\.")


@pytest.mark.dist
def test_l1_per_prompt_target_is_shared_by_a_group_that_straddles_ranks(tiny_model_dir, tmp_path):
    # L1 draws one target per example, shared by its G rollouts (methods.md §6; cmu-l3/l1
    # scripts/data/deepscaler_dataset.py stores one randint(100, 4000) with each example). With 2 processes the
    # middle group of each step is split 2 + 2 across the ranks; its four prompts must still carry one target.
    single, ranks = run_one_and_two(L1_SCRIPT, tiny_model_dir, tmp_path)
    assert single["target_length_per"] == "prompt"  # the config default, not set by the script
    assert len(single["records"]) == 2
    step_targets = []
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        targets = rec["metadata"]["target_length"]
        assert r0["metadata"] == r1["metadata"] == rec["metadata"]
        groups = [targets[g * 4 : (g + 1) * 4] for g in range(3)]
        assert all(len(set(g)) == 1 for g in groups)  # one target per group of G = 4
        assert len({g[0] for g in groups}) == 3  # three examples, three draws (seed 0)
        # the straddling group: rank 0's last two prompts and rank 1's first two carry the same instruction
        straddle = r0["prompts_decoded"][4:6] + r1["prompts_decoded"][0:2]
        assert [int(n) for p in straddle for n in L1_TARGET.findall(p)] == [groups[1][0]] * 4
        # all twelve prompts of the two ranks, in global order, carry the single process's targets
        both = r0["prompts_decoded"] + r1["prompts_decoded"]
        assert [int(n) for p in both for n in L1_TARGET.findall(p)] == targets
        for a, b in zip(r0["rewards"], rec["rewards"], strict=True):
            assert a == pytest.approx(b, abs=1e-6, nan_ok=True)
        step_targets.append(targets)
    assert step_targets[0] != step_targets[1]  # step 2 samples other examples, with their own targets
