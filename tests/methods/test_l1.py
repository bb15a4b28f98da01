"""L1 / LCPO target prompting (methods.md §6): each rollout's own target reaches its prompt and its reward, and both
recipes train from their YAML."""

import json
import os
import re

import pytest
from helpers import RecordingTrainer, make_dataset, tiny_cli_args, tiny_config

from trl_efficient.rewards import correctness_reward, get_l1_reward

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
TARGET = re.compile(r"Think for (maximum )?(\d+) tokens\.")


def _expected(correct: float, length: float, target: int, mode: str) -> float:
    if mode == "exact":  # 1[correct] - 0.0003 |N - n|
        return correct - 0.0003 * abs(target - length)
    return correct * min(1.0, max(0.0, 0.001 * (target - length) + 0.5))  # 1[correct] clip(0.001 (N - n) + 0.5)


@pytest.mark.parametrize("mode", ["exact", "mixed"])
def test_each_rollout_is_scored_against_its_own_target(tiny_model_dir, tmp_path, mode):
    args = tiny_config(
        tmp_path,
        rollout_plan="target_length",
        target_length_range=[5, 60],
        target_length_mode=mode,
        target_length_per="rollout",
        reward_weights=[1.0, 0.0],
        max_steps=3,
    )
    reward = get_l1_reward(mode="max" if mode == "mixed" else "exact")
    trainer = RecordingTrainer(
        model=tiny_model_dir, reward_funcs=[reward, correctness_reward], args=args, train_dataset=make_dataset()
    )
    trainer.train()
    modes_seen, checked = set(), 0
    for rec in trainer.records:
        targets, modes = rec["metadata"]["target_length"], rec["metadata"]["length_mode"]
        assert len(set(targets)) > 1  # per-rollout targets: the rollouts of a group are told different lengths
        for prompt, target, row_mode in zip(rec["prompts_decoded"], targets, modes, strict=True):
            ((maximum, n),) = TARGET.findall(prompt)
            assert int(n) == target and (maximum != "") == (row_mode == "max")
        for (l1, correct), length, target, row_mode in zip(rec["rewards"], rec["lengths"], targets, modes, strict=True):
            assert l1 == pytest.approx(_expected(correct, length, target, row_mode), abs=1e-6)
            modes_seen.add(row_mode)
            checked += 1
    assert checked == 12
    assert modes_seen == ({"exact", "max"} if mode == "mixed" else {"exact"})


@pytest.mark.parametrize("recipe", ["l1-exact", "l1-max"])
def test_l1_trains_from_its_yaml(recipe, tmp_path, monkeypatch):
    from huggingface_hub import ModelCard

    from trl_efficient.api.training import parse_train_args, train_main

    monkeypatch.chdir(ROOT)
    _, _, cfg = parse_train_args(["--config", f"configs/{recipe}.yaml", *tiny_cli_args(tmp_path)])
    assert cfg.rollout_plan == "target_length" and cfg.target_length_range == [100, 4000]
    assert cfg.target_length_mode == ("exact" if recipe == "l1-exact" else "mixed")
    train_main(["--config", f"configs/{recipe}.yaml", *tiny_cli_args(tmp_path)])
    with open(os.path.join(tmp_path, "trl_efficient_summary.json")) as f:
        assert json.load(f)["recipe"] == recipe
    card = ModelCard.load(os.path.join(tmp_path, "README.md")).text
    assert f"`{recipe}`" in card
    if recipe == "l1-max":
        assert "alpha 0.001, delta 0.5" in card  # the proposed default is printed
