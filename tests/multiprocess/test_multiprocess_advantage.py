"""The advantage family with 1 process vs 2 processes (torchrun, gloo, CPU): groups straddle the ranks, and the
gathered rewards, the advantages, the masks, the loss normaliser, the metrics and the checkpointed state are the
same. With dynamic-sampling refill (dler_refill, da_dler) rows of the refilled batch move between ranks: each
rank's prompts, advantages and masks must still concatenate to the single process's."""

import importlib.util
import os

import pytest
from helpers import run_one_and_two

SCRIPT = os.path.join(os.path.dirname(__file__), "run_advantage_trainer.py")
_spec = importlib.util.spec_from_file_location("run_advantage_trainer", SCRIPT)
_runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_runner)
METHODS = list(_runner.METHODS)  # every method the script trains (a new one is one entry there, no list here)


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("advantage_mp")
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, out, timeout=600)
    return single["methods"], [r["methods"] for r in ranks]


@pytest.mark.dist
@pytest.mark.parametrize("method", METHODS)
def test_one_vs_two_processes(runs, method):
    single, (rank0, rank1) = runs[0][method], (runs[1][0][method], runs[1][1][method])
    steps = len(single["records"])
    assert steps >= 2 and len(rank0["records"]) == len(rank1["records"]) == steps
    for step, rec in enumerate(single["records"]):
        r0, r1 = rank0["records"][step], rank1["records"][step]
        for key in ("lengths", "metadata"):
            assert r0[key] == r1[key] == rec[key]
        for a, b, c in zip(r0["rewards"], r1["rewards"], rec["rewards"], strict=True):
            assert a == pytest.approx(b, abs=1e-6, nan_ok=True) and a == pytest.approx(c, abs=1e-6, nan_ok=True)
        assert len(r0["advantages"]) == len(r1["advantages"]) == 6  # per-process row count unchanged
        # local slices concatenate to the single process's rows
        assert r0["prompts_decoded"] + r1["prompts_decoded"] == rec["prompts_decoded"]
        assert r0["completion_mask_sums"] + r1["completion_mask_sums"] == rec["completion_mask_sums"]
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-4)
        assert r0["num_items_in_batch"] == r1["num_items_in_batch"] == rec["num_items_in_batch"]
        if "scores" in rec:  # DRPO: the sampling policy's scores, gathered
            assert r0["scores"] == pytest.approx(rec["scores"], abs=1e-4)
    assert rank0["state"] == rank1["state"]
    for key, value in single["state"].items():
        assert rank0["state"][key] == value, key
    assert rank0["metrics"].keys() == single["metrics"].keys()
    for key, values in single["metrics"].items():
        assert rank0["metrics"][key] == pytest.approx(values, abs=1e-4), key


@pytest.mark.dist
def test_the_runs_exercise_what_they_claim(runs):
    single = runs[0]
    for method in ("dler_refill", "da_dler"):  # some step refilled: more than one generation batch
        assert max(single[method]["metrics"]["trl_efficient/dynamic_sampling/generation_batches"]) > 1, method
    # the refilled first batch is not the dataloader's (canon trains on the dataloader's batch, same seed)
    assert single["dler_refill"]["records"][0]["metadata"]["idx"] != single["canon"]["records"][0]["metadata"]["idx"]
    assert single["dler_refill"]["state"]["dynamic_sampling_refill"] != {"epoch": 0, "position": 0}
    assert max(single["da_dler"]["metrics"]["trl_efficient/da_dler/cut_fraction"]) > 0
    assert single["gfpo_adaptive"]["state"]["gfpo_adaptive"]["steps"] == 3
    assert min(single["gfpo_adaptive"]["metrics"]["trl_efficient/gfpo/mean_k"]) < 4  # adaptive k after warm-up
    assert "scores" in single["drpo"]["records"][0]
