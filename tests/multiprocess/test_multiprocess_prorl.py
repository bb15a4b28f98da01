"""ProRL's reference resets with 1 process vs 2 processes (torchrun, gloo, CPU): the same resets at the same steps
(every 2 steps and on a plateau of the gathered training reward), the same KL (0 right after each reset), the same
reference and policy weights, and the optimizer state cleared on every rank (trl_efficient/trainer/reference.py)."""

import os

import pytest
from helpers import run_one_and_two

SCRIPT = os.path.join(os.path.dirname(__file__), "run_prorl_trainer.py")


@pytest.mark.dist
def test_prorl_resets_one_vs_two_processes(tiny_model_dir, tmp_path):
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path)
    assert len(single["records"]) == 4
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        assert r0["rewards"] == r1["rewards"] == rec["rewards"]
        assert r0["lengths"] == r1["lengths"] == rec["lengths"]
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
    # the reset decisions: identical on both ranks and in the single process (the plateau monitor reads the gathered
    # reward, the same on every rank)
    assert ranks[0]["reset"] == ranks[1]["reset"] == single["reset"]
    events = single["reset"]["events"]
    assert [2, "every_steps"] in events and [4, "every_steps"] in events
    for run in (single, *ranks):
        assert run["reward"] == single["reward"]
        assert run["kl"] == pytest.approx(single["kl"], abs=1e-6)
        assert run["loss"] == pytest.approx(single["loss"], abs=1e-5)
        # float32 weights after 4 steps whose gradients were all-reduced in another order: sums agree to 1e-4
        assert run["ref_sums"] == pytest.approx(single["ref_sums"], abs=1e-4)
        assert run["policy_sums"] == pytest.approx(single["policy_sums"], abs=1e-4)
        assert run["optimizer_steps"] == []  # the last reset (step 4) cleared the optimizer state on every rank
    # KL 0 at the first step after each reset (and at step 1: the reference is the initial policy)
    reset_steps = {step for step, _ in events}
    for step, kl in enumerate(single["kl"], start=1):
        if step == 1 or step - 1 in reset_steps:
            assert kl == 0.0, (step, kl)
    assert single["kl"][1] > 0  # step 2: the policy moved away from the initial reference
