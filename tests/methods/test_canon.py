"""CANON (methods.md §26): length-conditioned advantages, options, edges, config errors, trainer, recipe and YAML."""

import json
import os
from types import SimpleNamespace

import pytest
import torch
from helpers import (
    RecordingMixin,
    ScriptedGenerationMixin,
    group_batch,
    make_dataset,
    recipe_yaml_settings,
    tiny_cli_args,
    tiny_config,
)

from trl_efficient.methods.canon import CANONAdvantage, canon_advantages
from trl_efficient.rewards import correctness_reward
from trl_efficient.trainer import EfficientGRPOTrainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
NAN = float("nan")


batch = group_batch


class CANONRecordingTrainer(RecordingMixin, EfficientGRPOTrainer, ScriptedGenerationMixin):
    pass


class TestAdvantages:
    def test_inter_group_default(self):
        out = canon_advantages(torch.tensor([1.0, 1, 0, 1]), torch.tensor([10.0, 20, 30, 40]), 4)
        # lower (10, 20): rewards 1, 1 -> mean 1 ; upper (30, 40): 0, 1 -> mean .5
        # upper: r - mean_lo = -1, 0 ; lower: r - mean_up = .5, .5
        assert out.tolist() == pytest.approx([0.5, 0.5, -1.0, 0.0])

    def test_intra_group_and_mix(self):
        r, L = torch.tensor([1.0, 0, 0, 1]), torch.tensor([40.0, 10, 20, 30])
        # sorted by length: rows 1 (10), 2 (20) lower, mean 0 ; rows 3 (30), 0 (40) upper, mean 1
        intra = canon_advantages(r, L, 4, mu=0.0)  # r - own half's mean
        assert intra.tolist() == pytest.approx([0.0, 0.0, 0.0, 0.0])
        inter = canon_advantages(r, L, 4, mu=1.0)  # upper: r - 0 ; lower: r - 1
        assert inter.tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0])
        half = canon_advantages(r, L, 4, mu=0.5)
        assert half.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5])

    def test_alpha_beta_bias_towards_short(self):
        r, L = torch.tensor([1.0, 1, 0, 1]), torch.tensor([10.0, 20, 30, 40])
        out = canon_advantages(r, L, 4, alpha=0.5, beta=0.1)
        # upper: .5 r - mean_lo (1) + .1 -> -.9, -.4 ; lower: r - .5 * mean_up (.5) - .1 -> .65, .65
        assert out.tolist() == pytest.approx([0.65, 0.65, -0.9, -0.4])

    def test_odd_group_ties_and_unscorable(self):
        # odd n: lower = first 1 of 3, the extra sample is upper ; ties keep index order (rows 0 and 1, length 5)
        out = canon_advantages(torch.tensor([0.0, 1, 1]), torch.tensor([5.0, 5, 9]), 3)
        # lower [row 0] mean 0 ; upper [rows 1, 2] mean 1 -> lower: 0 - 1 = -1 ; upper: 1 - 0 = 1, 1
        assert out.tolist() == pytest.approx([-1.0, 1.0, 1.0])
        out = canon_advantages(torch.tensor([1.0, NAN, 0, 1]), torch.tensor([1.0, 2, 3, 4]), 4)
        # scorable rows 0, 2, 3 -> lower [0] (mean 1), upper [2, 3] (mean .5): -1+... -> upper 0-1, 1-1 ; lower 1-.5
        assert out.tolist() == pytest.approx([0.5, 0.0, -1.0, 0.0])

    def test_estimator_edges_and_scaling(self):
        b = batch(
            [1, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 0],
            [4, 3, 2, 1, 1, 2, 3, 4, 1, 2, 3, 4],
            4,
            truncated=[False] * 8 + [True] * 4,
        )
        est = CANONAdvantage(SimpleNamespace(max_completion_length=8), alpha=0.5, normalize_by_max_length=True)
        # group 0 all equal -> 0 despite alpha (our documented edge rule) ; group 1: lower (1, 2) rewards 0, 1 mean .5,
        # upper (3, 4) 0, 1 mean .5 -> lower r - alpha*.5 = r - .25, upper alpha*r - .5 -> [-.25, .75, -.5, 0] / 8
        # group 2 all truncated: CANON has no truncation rule -> same formula: lower (lengths 1, 2) rewards 1, 0,
        # upper (3, 4) 1, 0 -> lower [1 - .25, 0 - .25], upper [.5 - .5, 0 - .5] -> [.75, -.25, 0, -.5] / 8
        assert est(b).tolist() == pytest.approx(
            [0] * 4 + [-0.03125, 0.09375, -0.0625, 0.0] + [0.09375, -0.03125, 0.0, -0.0625]
        )

    def test_config_errors(self, tmp_path):
        with pytest.raises(ValueError, match="divides by max_completion_length twice"):
            tiny_config(
                tmp_path,
                advantage_estimator="canon",
                loss_type="dr_grpo",
                advantage_kwargs={"normalize_by_max_length": True},
            )
        with pytest.raises(ValueError, match=r"advantage_kwargs\['mu'\] must be <= 1.0"):
            tiny_config(tmp_path, advantage_estimator="canon", advantage_kwargs={"mu": 2})


def test_trainer_advantages(tiny_model_dir, tmp_path):
    args = tiny_config(tmp_path, per_device_train_batch_size=8, advantage_estimator="canon")
    trainer = CANONRecordingTrainer(
        model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(32)
    )
    trainer.train()
    for rec in trainer.records:
        total = torch.tensor([r[0] for r in rec["rewards"]])
        expected = canon_advantages(total, torch.tensor(rec["lengths"]), 4)  # alpha 1: equal groups give 0 anyway
        assert rec["advantages"] == pytest.approx(expected.tolist(), abs=1e-6)


def test_canon_yaml(tmp_path):
    from trl_efficient.api.training import train_main

    config = recipe_yaml_settings("canon")
    # methods.md §26 [code] (biuboomc/CANON scripts/setups.sh): alpha 1.0, mu (_lambda) 1.0, G 16, clip-high .28,
    # max response 8192, lr 1e-6, no KL; no /max_len division with the token-mean loss (proposed)
    assert config["advantage_kwargs"] == {"alpha": 1.0, "mu": 1.0, "beta": 0.0, "normalize_by_max_length": False}
    assert (config["num_generations"], config["epsilon_high"], config["max_completion_length"]) == (16, 0.28, 8192)
    assert (config["learning_rate"], config["beta"], config["loss_type"]) == (1e-6, 0.0, "dapo")
    train_main(
        ["--config", os.path.join(ROOT, "configs", "canon.yaml"), *tiny_cli_args(tmp_path, max_completion_length=12)]
    )
    with open(os.path.join(tmp_path, "trl_efficient_summary.json")) as f:
        assert json.load(f)["recipe"] == "canon"
