"""LISA with 1 process vs 2 processes (torchrun, gloo, CPU, DDP with gradient checkpointing): every rank draws the
same layers at the same steps (a function of the seed and the interval), the optimizer holds state for the drawn
layer only, and the weights equal the single process's (trl_efficient/trainer/lisa.py)."""

import os

import pytest
from helpers import run_one_and_two

from trl_efficient.trainer.lisa import sample_layers

SCRIPT = os.path.join(os.path.dirname(__file__), "run_lisa_trainer.py")


@pytest.mark.dist
def test_lisa_one_vs_two_processes(tiny_model_dir, tmp_path):
    single, ranks = run_one_and_two(SCRIPT, tiny_model_dir, tmp_path)
    # steps 0-1 are interval 0, steps 2-3 interval 1; seed 1 draws layer 0 then layer 1 of the 2 (sample_layers)
    expected = [sample_layers(1, step // 2, 2, 1) for step in range(4)]
    assert expected == [[0], [0], [1], [1]]
    for run in (single, *ranks):
        assert run["find_unused_parameters"] is True  # set by the LISA config, not turned off by checkpointing
        assert [d["layers"] for d in run["draws"]] == expected
        assert [d["moved"] for d in run["draws"]] == expected  # a frozen layer never moves, a drawn one does
        assert run["lisa"] == single["lisa"]
        # 2 always-trained tensors (embeddings = tied head, final norm) + 1 layer's 12 tensors (Qwen2: q/k/v with
        # biases, o, gate/up/down, 2 norms)
        assert {d["optimizer_tensors"] for d in run["draws"]} == {14}
        assert run["sums"] == pytest.approx(single["sums"], abs=1e-4)
        moved = {n for n in run["sums"] if run["sums"][n] != run["initial_sums"][n]}
        assert any(n.startswith("model.layers.0.") for n in moved) and any(
            n.startswith("model.layers.1.") for n in moved
        )
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        assert r0["rewards"] == r1["rewards"] == rec["rewards"]
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
