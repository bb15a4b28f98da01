"""HBPO (methods.md §2): budget-aware reward, subgroup advantage, trainer integration, recipe and YAML."""

import json
import logging
import math
import os
import pickle
from types import SimpleNamespace

import pytest
import torch
from helpers import RecordingMixin, ScriptedGenerationMixin, make_dataset, tiny_cli_args, tiny_config

from trl_efficient.methods.hbpo import HBPOAdvantage, HBPOTrainer, hbpo_advantages, subgroup_mean
from trl_efficient.recipes import get_recipe
from trl_efficient.recipes.budget import build_hbpo_reward
from trl_efficient.rewards import get_correctness_reward
from trl_efficient.rewards.budget import get_hbpo_reward, hbpo_budget_ceiling
from trl_efficient.trainer.rollout import BudgetRolloutPlan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
OK = r"x</think> \boxed{4}"  # correct and well formatted for gold "4"


def f1(length, budget):  # paper: beta cos(pi L / 2 L_max) - alpha |L - b|, beta 4, L_max 4096, alpha 1/4096
    return 4 * math.cos(math.pi * length / 8192) - abs(length - budget) / 4096


def f2(budget):
    return 4 * math.cos(math.pi * budget / 8192)


# ------------------------------------------------------------------------------------------------------- reward
class TestHBPOReward:
    def test_ceiling_values(self):
        # methods.md §2: f2 = 3.92, 3.70, 2.83, 2.22 for 512, 1024, 2048, 2560
        assert [round(hbpo_budget_ceiling(b), 2) for b in (512, 1024, 2048, 2560)] == [3.92, 3.7, 2.83, 2.22]

    def test_paper_piecewise(self):
        reward = get_hbpo_reward(count_prefill=False)
        out = reward(
            completions=[OK] * 3,
            solution=["4"] * 3,
            completion_ids=[[0] * 300, [0] * 512, [0] * 1000],
            budget=[512] * 3,
        )
        # L <= b -> f2(512) = 4 cos(pi/16) = 3.92314 ; L = 512 -> f2 ; L = 1000 > b -> 4 cos(0.38350) - 488/4096
        assert out == pytest.approx([3.923141, 3.923141, 3.590309], abs=1e-6)
        assert out[2] == pytest.approx(f1(1000, 512))

    def test_released_code_min_form_differs_only_for_short_answers(self):
        paper = get_hbpo_reward(count_prefill=False)
        code = get_hbpo_reward(count_prefill=False, variant="released_code")
        ids = [[0] * 300, [0] * 1000]
        kw = dict(completions=[OK] * 2, solution=["4"] * 2, completion_ids=ids, budget=[512, 512])
        # b = 512, L = 300: min(4 cos(pi 300/8192) - 212/4096, f2) = min(3.97356 - 0.05176, 3.92314) = 3.92180
        assert code(**kw)[0] == pytest.approx(f1(300, 512), abs=1e-9)
        assert paper(**kw)[0] - code(**kw)[0] == pytest.approx(f2(512) - f1(300, 512))
        assert 0 < paper(**kw)[0] - code(**kw)[0] <= 0.048  # methods.md §2: at most 0.048 lower
        assert code(**kw)[1] == paper(**kw)[1]  # L > b: both f1

    def test_wrong_format_overlong_and_unscorable(self):
        reward = get_hbpo_reward(count_prefill=False)
        out = reward(
            completions=[r"x</think> \boxed{5}", r"x \boxed{4}", "x</think> 4", OK, OK],
            solution=["4", "4", "4", "4", ""],
            completion_ids=[[0] * 10, [0] * 10, [0] * 10, [0] * 4097, [0] * 10],
            budget=[512] * 5,
        )
        # wrong -> 0 ; no </think> -> -1 ; no boxed answer -> -1 ; correct but L > L_max -> 0 (code) ; gold -> None
        assert out == [0.0, -1.0, -1.0, 0.0, None]

    def test_no_budget_uses_plain_cosine(self):
        reward = get_hbpo_reward(count_prefill=False)
        out = reward(completions=[OK, OK], solution=["4", "4"], completion_ids=[[0] * 2048, [0] * 2048])
        assert out == pytest.approx([4 * math.cos(math.pi / 4)] * 2)  # 2.828427: no budget column

    def test_prefill_tokens_count_in_length(self, tiny_tokenizer):
        statement = "<think> I will answer the question with 8 tokens"
        n_prefill = len(tiny_tokenizer(statement, add_special_tokens=False)["input_ids"])
        assert n_prefill > 5  # the phrase is several policy tokens
        with_prefill = get_hbpo_reward(tokenizer=tiny_tokenizer)
        out = with_prefill(
            completions=[OK], solution=["4"], completion_ids=[[0] * 20], budget=[8], budget_statement=[statement]
        )
        # L = 20 completion tokens + n_prefill prefill tokens > b = 8 -> f1(20 + n_prefill, 8)
        assert out == pytest.approx([f1(20 + n_prefill, 8)])
        without = get_hbpo_reward(count_prefill=False)
        assert without(
            completions=[OK], solution=["4"], completion_ids=[[0] * 20], budget=[8], budget_statement=[statement]
        ) == pytest.approx([f1(20, 8)])

    def test_shorter_budget_earns_more_and_correct_beats_wrong(self):
        reward = get_hbpo_reward(count_prefill=False)
        budgets = [512, 1024, 2048, 2560]
        out = reward(completions=[OK] * 4, solution=["4"] * 4, completion_ids=[[0] * 100] * 4, budget=budgets)
        assert out == sorted(out, reverse=True) and len(set(out)) == 4
        for length in range(0, 3500, 100):  # below ~3600 every correct answer beats a wrong one (0)
            r = reward(completions=[OK] * 4, solution=["4"] * 4, completion_ids=[[0] * length] * 4, budget=budgets)
            assert min(r) > 0

    def test_conversational_pickle_and_extra_kwargs(self, tiny_tokenizer):
        reward = get_hbpo_reward(tokenizer=tiny_tokenizer)
        clone = pickle.loads(pickle.dumps(reward))
        kw = dict(
            completions=[[{"role": "assistant", "content": OK}]],
            solution=["4"],
            completion_ids=[[0] * 5],
            budget=[512],
            budget_statement=["<think> I will answer the question with 512 tokens"],
            trainer_state=None,
            group_size=[4],
            unrelated=[1],
        )
        assert reward(**kw) == clone(**kw) == pytest.approx([f2(512)])
        assert reward.__name__ == "hbpo_reward"

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"beta": 0.0}, "beta must be > 0"),
            ({"alpha": -1.0}, "alpha must be >= 0"),
            ({"l_max": 0}, "l_max must be a positive int"),
            ({"variant": "nope"}, "variant must be one of"),
            ({"count_prefill": True}, "needs tokenizer"),
        ],
    )
    def test_bad_arguments(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_hbpo_reward(**{"count_prefill": False, **kwargs})


# ---------------------------------------------------------------------------------------------------- advantage
class TestHBPOAdvantage:
    def test_hand_computed(self):
        rewards = torch.tensor([3.0, 1.0, 2.0, 0.0])
        budgets = torch.tensor([512.0, 512.0, 2560.0, 2560.0])
        adv = hbpo_advantages(rewards, budgets, 4)
        # mean 1.5, unbiased std sqrt((2.25 + 0.25 + 0.25 + 2.25) / 3) = 1.290994 -> inter (r - 1.5) / 1.290995
        inter = (rewards - 1.5) / (1.2909944 + 1e-6)
        # mu_512 = 2.0 -> intra 2.0 - f2(512) = 2.0 - 3.923141 ; mu_2560 = 1.0 -> 1.0 - 2.222281
        intra = torch.tensor([2.0 - f2(512)] * 2 + [1.0 - f2(2560)] * 2)
        torch.testing.assert_close(adv, inter + intra, atol=1e-5, rtol=0)

    def test_released_code_adds_intra_twice(self):
        rewards = torch.tensor([3.0, 1.0, 2.0, 0.0])
        budgets = torch.tensor([512.0, 512.0, 2560.0, 2560.0])
        paper = hbpo_advantages(rewards, budgets, 4)
        code = hbpo_advantages(rewards, budgets, 4, variant="released_code")
        intra = torch.tensor([2.0 - f2(512)] * 2 + [1.0 - f2(2560)] * 2)
        torch.testing.assert_close(code - paper, intra, atol=1e-5, rtol=0)

    def test_all_equal_or_all_truncated_groups_are_zero_never_nan(self):
        budgets = torch.tensor([512.0, 512.0, 1024.0, 1024.0] * 3)
        rewards = torch.tensor([-1.0] * 4 + [0.0] * 4 + [float("nan")] * 4)  # truncated ; all wrong ; unscorable
        adv = hbpo_advantages(rewards, budgets, 4)
        assert adv.tolist() == [0.0] * 12
        literal = hbpo_advantages(rewards, budgets, 4, zero_equal_groups=False)
        # paper formula: inter 0, intra = R - f2(b): -1 - 3.92314 for b = 512 ; 0 - f2(1024) = -3.69552
        assert literal[0].item() == pytest.approx(-1 - f2(512), abs=1e-5)
        assert literal[6].item() == pytest.approx(-f2(1024), abs=1e-5)
        assert not torch.isnan(literal).any() and literal[8:].tolist() == [0.0] * 4

    def test_unscorable_row_is_left_out(self):
        rewards = torch.tensor([3.0, float("nan"), 2.0, 0.0])
        adv = hbpo_advantages(rewards, torch.tensor([512.0, 512.0, 2560.0, 2560.0]), 4)
        # stats over {3, 2, 0}: mean 5/3, std sqrt(((4/3)^2 + (1/3)^2 + (5/3)^2) / 2) = 1.527525 ; mu_512 = 3 (NaN out)
        assert adv[1].item() == 0.0
        assert adv[0].item() == pytest.approx((3 - 5 / 3) / 1.5275252 + 3 - f2(512), abs=1e-5)

    def test_subgroup_mean_multi_group(self):
        values = torch.tensor([1.0, 3.0, 5.0, 7.0, 2.0, 2.0, 4.0, float("nan")])
        labels = torch.tensor([8.0, 8.0, 16.0, 16.0] * 2)
        # group 1: (1+3)/2, (5+7)/2 ; group 2: 2, 4 (NaN left out)
        assert subgroup_mean(values, labels, 4).tolist() == [2.0, 2.0, 6.0, 6.0, 2.0, 2.0, 4.0, 4.0]

    @pytest.mark.parametrize(
        "overrides, match",
        [
            ({}, "needs budget subgroups: set rollout_plan='budget'"),
            ({"rollout_plan": "target_length"}, "rollout_plan='target_length'"),
            ({"rollout_plan": "budget", "budgets": [512, 8192]}, r"budgets \[8192\] exceed HBPO's L_max"),
            ({"rollout_plan": "budget", "budgets": [8, 16], "advantage_kwargs": {"variant": "x"}}, "variant must be"),
            ({"rollout_plan": "budget", "budgets": [8, 16], "advantage_kwargs": {"l_max": 0}}, "l_max must be"),
            ({"rollout_plan": "budget", "budgets": [8, 16, 32]}, "divisible by the number of budgets"),
        ],
    )
    def test_config_time_errors_name_the_field(self, tmp_path, overrides, match):
        with pytest.raises(ValueError, match=match):
            tiny_config(tmp_path, advantage_estimator="hbpo", **overrides)


# ------------------------------------------------------------------------------------------------------ trainer
class HBPORecordingTrainer(RecordingMixin, HBPOTrainer, ScriptedGenerationMixin):
    """HBPO trainer with scripted rollouts that records every batch."""


def _hbpo_trainer(model_dir, tmp_path, tokenizer, **overrides):
    args = tiny_config(
        tmp_path,
        rollout_plan="budget",
        budgets=[8, 64],
        budget_placement="prefill",
        advantage_estimator="hbpo",
        advantage_kwargs={"beta": 4.0, "alpha": 1 / 4096, "l_max": 4096},
        max_steps=3,
        reward_weights=[1.0, 0.0],
        **overrides,
    )
    # as in the recipe: a zero-weight correctness reward gives per-budget accuracy metrics, not reward
    correctness = get_correctness_reward(require_think_close=True)
    return HBPORecordingTrainer(
        model=model_dir,
        reward_funcs=[build_hbpo_reward(args, tokenizer), correctness],
        args=args,
        train_dataset=make_dataset(),
        processing_class=tokenizer,
    )


class TestHBPOTrainer:
    def test_end_to_end_rewards_advantages_and_metrics(self, tiny_model_dir, tmp_path, tiny_tokenizer):
        trainer = _hbpo_trainer(tiny_model_dir, tmp_path, tiny_tokenizer)
        trainer.train()
        prefill = {
            b: len(
                tiny_tokenizer(f"<think> I will answer the question with {b} tokens", add_special_tokens=False)[
                    "input_ids"
                ]
            )
            for b in (8, 64)
        }
        seen_correct = 0
        for rec in trainer.records:
            budgets = rec["metadata"]["budget"]
            assert budgets == [8, 8, 64, 64] * (len(budgets) // 4)
            for prompt, b in zip(rec["prompts_decoded"], budgets, strict=True):
                assert prompt.endswith(f"<|im_start|>assistant\n<think> I will answer the question with {b} tokens")
            rewards = [r[0] for r in rec["rewards"]]
            for reward, (_, correct), length, b in zip(rewards, rec["rewards"], rec["lengths"], budgets, strict=True):
                assert (reward > 0.5) == (correct == 1.0)
                if correct == 1.0:  # L = completion tokens + prefill tokens (reference code)
                    seen_correct += 1
                    L = length + prefill[b]
                    assert reward == pytest.approx(f1(L, b) if L > b else f2(b), abs=1e-5)
                else:
                    assert reward in (0.0, -1.0)
            expected = hbpo_advantages(torch.tensor(rewards), torch.tensor(budgets, dtype=torch.float32), 4)
            torch.testing.assert_close(torch.tensor(rec["advantages"]), expected, atol=1e-5, rtol=1e-5)
        assert seen_correct > 0
        logged = {k for entry in trainer.state.log_history for k in entry}
        for b in (8, 64):
            for metric in ("mean_length", "reward"):
                assert f"trl_efficient/budget_{b}/{metric}" in logged
        assert "trl_efficient/budget_8/accuracy" in logged

    def test_duplicate_think_tag_warns(self, caplog):
        rendered = "<|im_start|>assistant\n<think>\n"  # a template that already opens <think>
        stub = SimpleNamespace(rollout_plan=BudgetRolloutPlan([8]), _render_chat=lambda m: rendered)
        with caplog.at_level(logging.WARNING, logger="trl_efficient.methods.hbpo"):
            HBPOTrainer._check_prefill_template(stub)
        assert "budget_template" in caplog.text
        caplog.clear()
        stub.rollout_plan = BudgetRolloutPlan([8], template="I will answer the question with {budget} tokens")
        with caplog.at_level(logging.WARNING, logger="trl_efficient.methods.hbpo"):
            HBPOTrainer._check_prefill_template(stub)
        assert caplog.text == ""


# ------------------------------------------------------------------------------------------------- recipe, YAML
class TestHBPORecipe:
    def test_builder_reads_shared_constants_and_placement(self, tmp_path, tiny_tokenizer):
        args = tiny_config(
            tmp_path,
            rollout_plan="budget",
            budgets=[8, 16],
            advantage_estimator="hbpo",
            advantage_kwargs={"beta": 2.0, "l_max": 1024, "variant": "released_code"},
        )
        reward = build_hbpo_reward(args, tiny_tokenizer)
        assert (reward.beta, reward.l_max, reward.variant, reward.count_prefill) == (2.0, 1024, "released_code", True)
        args = tiny_config(tmp_path, rollout_plan="budget", budgets=[8, 16], budget_placement="system")
        assert build_hbpo_reward(args, tiny_tokenizer).count_prefill is False
        args = tiny_config(
            tmp_path, rollout_plan="budget", budgets=[8, 16], advantage_estimator="hbpo", advantage_kwargs={"beta": 2.0}
        )
        with pytest.raises(ValueError, match="disagree with advantage_kwargs"):
            build_hbpo_reward(args, tiny_tokenizer, beta=4.0)

    def test_recipe_defaults_match_methods_md(self):
        recipe = get_recipe("hbpo")
        o = recipe.config_overrides
        assert o["budgets"] == [512, 1024, 2048, 2560] and o["budget_placement"] == "prefill"
        assert o["advantage_kwargs"] == {"beta": 4.0, "alpha": 1 / 4096, "l_max": 4096, "variant": "paper"}
        assert (o["epsilon_high"], o["beta"]) == (0.28, 0.0)
        # the factory's defaults are the same numbers (one home: rewards.budget constants)
        reward = get_hbpo_reward(count_prefill=False)
        assert (reward.beta, reward.alpha, reward.l_max) == (4.0, 1 / 4096, 4096)
        est = HBPOAdvantage(SimpleNamespace(rollout_plan="budget", budgets=o["budgets"]))
        assert (est.beta, est.l_max, est.variant) == (4.0, 4096, "paper")

    def test_trains_from_yaml(self, tmp_path, monkeypatch):
        from huggingface_hub import ModelCard

        from trl_efficient.api.training import parse_train_args, train_main

        monkeypatch.chdir(ROOT)
        _, _, cfg = parse_train_args(["--config", "configs/hbpo.yaml", *tiny_cli_args(tmp_path)])
        assert cfg.budgets == [512, 1024, 2048, 2560] and cfg.advantage_estimator == "hbpo"
        assert cfg.advantage_kwargs["l_max"] == 4096 and cfg.num_generations == 4
        train_main(["--config", "configs/hbpo.yaml", *tiny_cli_args(tmp_path)])
        with open(os.path.join(tmp_path, "trl_efficient_summary.json")) as f:
            assert json.load(f)["recipe"] == "hbpo"
        card = ModelCard.load(os.path.join(tmp_path, "README.md")).text
        assert "`hbpo`" in card and "HBPO prefill kept in the prompt" in card
