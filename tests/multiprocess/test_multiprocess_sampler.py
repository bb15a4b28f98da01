"""1 process vs 2 processes (torchrun, gloo, CPU): a stateful prompt sampler draws the same global index sequence and
holds the same state on every rank, equal to one process's (trainer/prompt_samplers.py)."""

import os

import pytest
from helpers import run_one_and_two

SCRIPT = os.path.join(os.path.dirname(__file__), "run_sampler_trainer.py")


@pytest.mark.dist
@pytest.mark.parametrize("sampler", ["lspo", pytest.param("frugal", marks=pytest.mark.slow)])
def test_sampler_one_vs_two_processes(tiny_model_dir, tmp_path, sampler):
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path, sampler)
    assert len(single["idx"]) == 6
    # the gathered (global) rows: same prompts in the same order on both ranks and in one process
    assert ranks[0]["idx"] == ranks[1]["idx"] == single["idx"]
    assert ranks[0]["lengths"] == ranks[1]["lengths"] == single["lengths"]
    assert ranks[0]["state"] == ranks[1]["state"] == single["state"]
    if sampler == "lspo":
        assert single["state"]["lengths"] and single["state"]["epoch"] == 1
        # G = 2 rows per prompt, consecutive; a group never splits across the two ranks' rows out of order
        assert all(s[0::2] == s[1::2] for s in single["idx"])
