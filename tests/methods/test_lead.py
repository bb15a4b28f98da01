"""GRPO-LEAD (methods.md §15): outcome classes, the group reward, the difficulty-aware advantage, trainer, recipe and
YAML."""

import json
import math
import os
import pickle
from types import SimpleNamespace

import pytest
import torch
from helpers import (
    RecordingMixin,
    ScriptedGenerationMixin,
    make_dataset,
    recipe_yaml_settings,
    tiny_cli_args,
    tiny_config,
)

from trl_efficient.methods.lead import LEADAdvantage, lead_advantages, logistic_weight
from trl_efficient.rewards.lead import get_lead_reward, is_degenerate, lead_outcome
from trl_efficient.trainer import EfficientGRPOTrainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
NAN = float("nan")
OK, WRONG = r"a</think> \boxed{3}", r"a</think> \boxed{4}"


def w(x):  # GRPO-LEAD logistic_reweight: 0.4 + 1.1 / (1 + exp(10 (x - 0.75)))
    return 0.4 + 1.1 / (1 + math.exp(10 * (x - 0.75)))


class LEADRecordingTrainer(RecordingMixin, EfficientGRPOTrainer, ScriptedGenerationMixin):
    pass


class TestOutcome:
    def test_classes(self):
        assert lead_outcome(OK, "3") == "correct" and lead_outcome(WRONG, "3") == "wrong"
        assert lead_outcome(r"a \boxed{3}", "3") == "format"  # no </think>
        assert lead_outcome("a</think> 3", "3") == "format"  # no boxed answer
        assert lead_outcome("hmm " * 10, "3") == "degenerate"  # a format failure that repeats a word 10 times
        assert lead_outcome(OK + " x" * 20, "3") == "correct"  # repetition only matters for format failures
        assert lead_outcome(OK, "") is None

    def test_degenerate(self):
        assert is_degenerate("a b c " * 10) and not is_degenerate("a b c " * 9)  # 3-gram x 10 vs x 9
        assert not is_degenerate("x " + "a b " * 9 + "c")
        assert is_degenerate("w" * 120) and not is_degenerate("w" * 119)
        # chunks are cut from the start (the repository's max_continuous_ngram): an offset repeat of 2-grams is
        # still found as a repeat of 1-grams only when the words themselves repeat
        assert is_degenerate("x " + "a a " * 5)


class TestReward:
    def test_group_shaping_hand_values(self):
        reward = get_lead_reward(num_generations=4)
        out = reward(
            completions=[OK, OK, OK, WRONG], solution=["3"] * 4, completion_ids=[[0] * 10, [0] * 20, [0] * 30, [0] * 5]
        )
        # correct lengths 10, 20, 30: mean 20, sample std 10 -> z = -1, 0, 1 -> exp(.05), 1, exp(-.05)
        assert out == pytest.approx([math.exp(0.05), 1.0, math.exp(-0.05), -1.0], abs=1e-6)

    def test_single_correct_and_failures(self):
        reward = get_lead_reward(num_generations=4)
        out = reward(
            completions=[OK, "a", "hi " * 10, WRONG],
            solution=["3", "3", "3", ""],
            completion_ids=[[0] * 7, [0] * 3, [0] * 10, [0] * 2],
        )
        # one correct: sigma 1, z 0 -> 1 ; format failure -1 (proposed; repo 0) ; degenerate -2 ; gold -> None
        assert out == [1.0, -1.0, -2.0, None]
        repo = get_lead_reward(num_generations=4, format_failure_reward=0.0)
        assert (
            repo(
                completions=[OK, "a", "hi " * 10, WRONG],
                solution=["3", "3", "3", ""],
                completion_ids=[[0] * 7, [0] * 3, [0] * 10, [0] * 2],
            )[1]
            == 0.0
        )

    def test_gate_and_groups(self):
        reward = get_lead_reward(num_generations=2, length_gate=15)
        out = reward(
            completions=[OK, OK, OK, OK], solution=["3"] * 4, completion_ids=[[0] * 10, [0] * 30, [0] * 20, [0] * 40]
        )
        # group 0: mean of the (up to) 3 shortest = 20 > 15 -> shaped: z -/+ .7071 ; group 1: 30 > 15 -> shaped
        z = 10 / math.sqrt(200)
        assert out == pytest.approx([math.exp(0.05 * z), math.exp(-0.05 * z)] * 2, abs=1e-6)
        gated = get_lead_reward(num_generations=2, length_gate=25)(
            completions=[OK, OK, OK, OK], solution=["3"] * 4, completion_ids=[[0] * 10, [0] * 30, [0] * 20, [0] * 40]
        )
        assert gated[:2] == [1.0, 1.0]  # mean 20 <= 25: the repository skips the shaping

    def test_contract(self):
        reward = get_lead_reward()
        assert reward.__name__ == "lead_reward" and pickle.loads(pickle.dumps(reward)).alpha == 0.05
        assert reward(
            completions=[OK, WRONG],
            solution=["3", "3"],
            completion_ids=[[0], [0]],
            group_size=[2, 2],
            extra_column=[1, 2],
        ) == [1.0, -1.0]
        with pytest.raises(ValueError, match="not a multiple of the group size"):
            reward(completions=[OK] * 3, solution=["3"] * 3, completion_ids=[[0]] * 3, group_size=[2] * 3)
        with pytest.raises(ValueError, match="alpha must be >= 0"):
            get_lead_reward(alpha=-1)


class TestAdvantage:
    def test_hand_values(self):
        out = lead_advantages(torch.tensor([1.0, 1.0, -1.0, -1.0, 1.1, 0.9, 1.0, -1.0]), 4)
        # group 0: mean 0, sample std 1.1547 -> A-hat +/-.86603 ; rho .5 -> w(.5) = 1.41655 both signs
        # group 1: mean .5, std sqrt((.36+.16+.25+2.25)/3) = 1.00333 ; rho .75 -> positives x w(.75) = .95,
        #          the negative x w(.25) = 1.49258
        s1 = math.sqrt((0.36 + 0.16 + 0.25 + 2.25) / 3) + 1e-6
        s0 = math.sqrt(4 / 3) + 1e-6
        expected = [
            1 / s0 * w(0.5),
            1 / s0 * w(0.5),
            -1 / s0 * w(0.5),
            -1 / s0 * w(0.5),
            0.6 / s1 * w(0.75),
            0.4 / s1 * w(0.75),
            0.5 / s1 * w(0.75),
            -1.5 / s1 * w(0.25),
        ]
        assert out.tolist() == pytest.approx(expected, abs=1e-5)

    def test_hard_prompt_correct_boosted_easy_prompt_wrong_punished(self):
        hard = lead_advantages(torch.tensor([1.0, -1.0, -1.0, -1.0]), 4)  # rho .25: correct x w(.25) ~ 1.49
        easy = lead_advantages(torch.tensor([1.0, 1.0, 1.0, -1.0]), 4)  # rho .75: wrong x w(.25) ~ 1.49
        # hard: mean -.5, std 1 -> A-hat 1.5 ; easy: mean .5, std 1 -> A-hat -1.5 ; both x w(.25) = 1.49258
        assert hard[0].item() == pytest.approx(1.5 / (1 + 1e-6) * w(0.25), abs=1e-5)
        assert easy[3].item() == pytest.approx(-1.5 / (1 + 1e-6) * w(0.25), abs=1e-5)
        assert logistic_weight(torch.tensor(0.25)).item() == pytest.approx(w(0.25))

    def test_edges(self):
        est = LEADAdvantage(SimpleNamespace())
        from trl_efficient.trainer import GroupBatch

        b = GroupBatch(
            rewards=torch.tensor([[1.0], [1.0], [1.0], [NAN], [0.5], [-1.0]]),
            reward_names=["r"],
            reward_weights=torch.ones(1),
            lengths=torch.ones(6),
            truncated=torch.tensor([False, False, False, False, True, True]),
            group_size=2,
        )
        # all equal -> A-hat 0 | one scorable row -> 0 (evaluation-only edge), never NaN
        # all truncated, rewards differ: GRPO-LEAD has no truncation rule, so the formula applies:
        # mean -.25, sample std sqrt(2 * .75^2 / 1) = 1.06066 -> A-hat ±.75/1.06066 = ±.70711 ; rho = 1/2 (one
        # positive reward) -> the positive row x w(.5), the negative row x w(1 - .5) = w(.5) = 1.41656
        a = 0.75 / (math.sqrt(2 * 0.75**2) + 1e-6) * w(0.5)
        assert est(b).tolist() == pytest.approx([0.0, 0.0, 0.0, 0.0, a, -a], abs=1e-5)
        assert a == pytest.approx(1.00166, abs=1e-5)

    def test_config_error_names_the_field(self, tmp_path):
        with pytest.raises(ValueError, match=r"advantage_kwargs\['slope'\]"):
            tiny_config(tmp_path, advantage_estimator="grpo_lead", advantage_kwargs={"slope": "steep"})


def test_trainer_uses_gathered_reward_and_reweighting(tiny_model_dir, tmp_path):
    args = tiny_config(
        tmp_path, per_device_train_batch_size=8, advantage_estimator="grpo_lead", correctness_reward="lead_reward"
    )
    trainer = LEADRecordingTrainer(
        model=tiny_model_dir, reward_funcs=[get_lead_reward()], args=args, train_dataset=make_dataset(32)
    )
    trainer.train()
    for rec in trainer.records:
        total = torch.tensor([r[0] for r in rec["rewards"]])
        assert set(total.tolist()) <= {-2.0, -1.0} | {x for x in total.tolist() if x > 0}
        expected = lead_advantages(total, 4)
        assert rec["advantages"] == pytest.approx(expected.tolist(), abs=1e-5)


def test_grpo_lead_yaml(tmp_path):
    from trl_efficient.api.training import train_main
    from trl_efficient.recipes import get_recipe

    o = get_recipe("grpo-lead").config_overrides
    assert (o["advantage_estimator"], o["completion_filter"]) == ("grpo_lead", "zero_std")
    config = recipe_yaml_settings("grpo-lead")
    # methods.md §15 [code]: G 8, T 0.8, lr 1e-6, no KL; all-same groups rejected (here: zero_std masks them)
    assert (config["num_generations"], config["temperature"], config["learning_rate"]) == (8, 0.8, 1e-6)
    assert (config["beta"], config["completion_filter"], config["advantage_estimator"]) == (
        0.0,
        "zero_std",
        "grpo_lead",
    )
    train_main(
        [
            "--config",
            os.path.join(ROOT, "configs", "grpo-lead.yaml"),
            *tiny_cli_args(tmp_path, max_completion_length=12),
        ]
    )
    with open(os.path.join(tmp_path, "trl_efficient_summary.json")) as f:
        assert json.load(f)["recipe"] == "grpo-lead"
