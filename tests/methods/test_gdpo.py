"""GDPO (methods.md §5): TRL's normalize_then_sum with the proposed correctness-gated length reward; recipe, builder
default, advantages as TRL computes them, YAML."""

import json
import os
import pickle
from types import SimpleNamespace

import pytest
import torch
from helpers import RecordingMixin, ScriptedGenerationMixin, make_dataset, tiny_cli_args, tiny_config

from trl_efficient.recipes import REWARD_BUILDERS, get_recipe
from trl_efficient.rewards import correctness_reward
from trl_efficient.rewards.gdpo import get_gdpo_length_reward
from trl_efficient.trainer import EfficientGRPOTrainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


class GDPORecordingTrainer(RecordingMixin, EfficientGRPOTrainer, ScriptedGenerationMixin):
    pass


def gdpo_reference(rewards: torch.Tensor, weights: torch.Tensor, G: int, eps: float = 1e-4) -> torch.Tensor:
    """methods.md §5: per-reward group z-score (NaN-aware, Bessel std), weighted sum, batch z-score."""
    out = []
    grouped = rewards.view(-1, G, rewards.shape[1])
    mean = torch.nanmean(grouped, 1, keepdim=True)
    count = (~torch.isnan(grouped)).sum(1, keepdim=True)
    std = (torch.nansum((grouped - mean) ** 2, 1, keepdim=True) / (count - 1).clamp(min=1)).sqrt()
    z = ((grouped - mean) / (std + eps)).view(-1, rewards.shape[1])
    total = (z * weights).nansum(1)
    out = (total - total.mean()) / (total.std() + eps)
    return out


class TestReward:
    def test_hand_values(self):
        reward = get_gdpo_length_reward(length_limit=4)
        out = reward(
            completions=[r"\boxed{3}", r"\boxed{3}", r"\boxed{2}", r"\boxed{3}"],
            solution=["3", "3", "3", ""],
            completion_ids=[[0] * 4, [0] * 5, [0] * 2, [0] * 2],
        )
        # correct and L = 4 <= 4 -> 1 ; correct but 5 > 4 -> 0 ; wrong -> 0 ; gold unparseable -> None
        assert out == [1.0, 0.0, 0.0, None]
        assert pickle.loads(pickle.dumps(reward)).__name__ == "gdpo_length_reward"

    def test_options_and_errors(self):
        strict = get_gdpo_length_reward(length_limit=10, require_think_close=True)
        assert strict(
            completions=[r"\boxed{3}", r"x</think>\boxed{3}"], solution=["3", "3"], completion_ids=[[0], [0]]
        ) == [0.0, 1.0]
        chars = get_gdpo_length_reward(length_limit=9, length_unit="chars")
        assert chars(completions=[r"\boxed{3}", r" \boxed{3}"], solution=["3", "3"]) == [1.0, 0.0]  # 9 vs 10 chars
        with pytest.raises(ValueError, match="length_limit must be a positive int"):
            get_gdpo_length_reward(length_limit=0)

    def test_builder_default_limit_is_half_the_cap(self):
        reward = REWARD_BUILDERS.get("gdpo_length")(
            SimpleNamespace(max_completion_length=8000, length_unit="tokens", length_scope="total"), None
        )
        assert reward.length_limit == 4000  # methods.md §5: 4000 for R1-Distill-1.5B scale (8000 / 2)

    def test_reference_on_the_papers_toy_case(self):
        # §5 toy: 2 rollouts, 2 binary rewards; (0,1) vs (0,2) summed give the same GRPO advantages but GDPO's
        # pre-batch-norm values differ (+/-.7071 vs +/-1.4142); after the batch step: all +/-1 scaled
        rewards = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]])
        out = gdpo_reference(rewards, torch.ones(2), 2)
        # group sums: [-.7070, .7070] and [-1.4140, 1.4140]; batch mean 0, std sqrt(2 (.5 + 2) / 3) = 1.29083
        assert out.tolist() == pytest.approx([-0.54772, 0.54772, -1.09545, 1.09545], abs=1e-4)


def test_trainer_advantages_are_gdpo(tiny_model_dir, tmp_path):
    args = tiny_config(
        tmp_path,
        per_device_train_batch_size=8,
        multi_objective_aggregation="normalize_then_sum",
        max_completion_length=24,
    )
    length = REWARD_BUILDERS.get("gdpo_length")(args, None)
    assert length.length_limit == 12
    trainer = GDPORecordingTrainer(
        model=tiny_model_dir, reward_funcs=[correctness_reward, length], args=args, train_dataset=make_dataset(32)
    )
    trainer.train()
    for rec in trainer.records:
        expected = gdpo_reference(torch.tensor(rec["rewards"]), torch.ones(2), 4)
        assert rec["advantages"] == pytest.approx(expected.tolist(), abs=1e-4)


def test_gdpo_recipe_and_yaml(tmp_path):
    from trl_efficient.api.training import train_main

    recipe = get_recipe("gdpo")
    assert recipe.config_overrides == {"multi_objective_aggregation": "normalize_then_sum"}
    assert [s.builder for s in recipe.rewards] == ["correctness", "gdpo_length"]
    train_main(
        ["--config", os.path.join(ROOT, "configs", "gdpo.yaml"), *tiny_cli_args(tmp_path, max_completion_length=12)]
    )
    with open(os.path.join(tmp_path, "trl_efficient_summary.json")) as f:
        assert json.load(f)["recipe"] == "gdpo"
