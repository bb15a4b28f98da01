"""Curriculum length control, "Train Long, Think Short" (methods.md §22): schedule, triangular and format rewards,
plan, trainer, resume (the schedule's state is the restored global step)."""

import math
import os
import pickle
from types import SimpleNamespace

import pytest
from helpers import RecordingTrainer, make_dataset, tiny_config

from trl_efficient.methods.curriculum import CurriculumRolloutPlan, curriculum_schedule
from trl_efficient.recipes import get_recipe
from trl_efficient.recipes.curriculum import build_curriculum_reward
from trl_efficient.rewards import get_correctness_reward
from trl_efficient.rewards.curriculum import (
    CurriculumSchedule,
    curriculum_format_indicators,
    get_curriculum_reward,
    triangular_length_reward,
)

OK, BAD = r"<think>x</think> \boxed{4}", r"<think>x</think> \boxed{5}"


# ------------------------------------------------------------------------------------------------------ schedule
class TestSchedule:
    def test_main_setting_n3(self):
        # d = (87/256)^(1/3): ln(0.33984375) = -1.079270, / 3 = -0.359757,
        # exp = exp(-0.36) * exp(0.000243) = 0.697676 * 1.000243 = 0.697846 (the paper's d ~ 0.70)
        s = CurriculumSchedule(256, 87, decay_points=3)
        assert s.decay == pytest.approx(0.697846, abs=1e-5)
        # T = 600 / 4 = 150: 256; 256 d = 178.649 -> 179; 256 d^2 = 124.669 -> 125; 256 d^3 = 87
        assert [s.budget(t, 600) for t in (0, 149, 150, 299, 300, 449, 450, 599, 600)] == [
            256, 256, 179, 179, 125, 125, 87, 87, 87,
        ]  # fmt: skip

    def test_n1_and_n7(self):
        # n = 1: d = 87/256 = 0.3398, one drop at step 300
        one = CurriculumSchedule(256, 87, decay_points=1)
        assert one.decay == pytest.approx(0.33984375)
        assert [one.budget(t, 600) for t in (0, 299, 300, 599)] == [256, 256, 87, 87]
        # n = 7: d = 0.33984375^(1/7) = exp(-1.079270 / 7) = exp(-0.154181) = 0.860708 * 0.995828 = 0.857117
        # (the paper's 0.857), every 75 steps; 256 d = 219.42 -> 219; after 7 drops 87
        seven = CurriculumSchedule(256, 87, decay_points=7)
        assert seven.decay == pytest.approx(0.857117, abs=1e-5)
        assert [seven.budget(t, 600) for t in (74, 75, 525)] == [256, 219, 87]

    def test_linear_variant(self):
        # equal drops of (256 - 87) / 3 = 56.33: 256, 199.67 -> 200, 143.33 -> 143, 87
        s = CurriculumSchedule(256, 87, 3, kind="linear")
        assert [s.budget(t, 600) for t in (0, 150, 300, 450)] == [256, 200, 143, 87]

    def test_floor_of_one_and_short_runs(self):
        # B(t) = max(1, .): 4 -> 1 over 2 drops, d = 0.5: 4, 2, 1
        assert [CurriculumSchedule(4, 1, 2).budget(t, 3) for t in range(3)] == [4, 2, 1]
        # max_steps = 2, n = 3: T = 0.5: step 0 -> 0 drops, step 1 -> floor(1 / 0.5) = 2 drops -> 125
        assert [CurriculumSchedule().budget(t, 2) for t in range(2)] == [256, 125]
        with pytest.raises(ValueError, match="max_steps"):
            CurriculumSchedule().budget(0, 0)

    def test_settings_errors(self):
        with pytest.raises(ValueError, match="schedule"):
            curriculum_schedule(SimpleNamespace(rollout_plan_kwargs={"schedule": "cosine"}))
        with pytest.raises(ValueError, match="unknown"):
            curriculum_schedule(SimpleNamespace(rollout_plan_kwargs={"budget0": 3}))
        with pytest.raises(ValueError, match="decay_points"):
            curriculum_schedule(SimpleNamespace(rollout_plan_kwargs={"decay_points": 0}))


# -------------------------------------------------------------------------------------------------------- reward
class TestReward:
    def test_triangular(self):
        # L = 87: 0 -> 0; 29 -> 1/3; 87 -> 1; 116 -> 1 - 29/87 = 2/3; 174 -> 0; 1000 -> 0
        values = [triangular_length_reward(n, 87) for n in (0, 29, 87, 116, 174, 1000)]
        assert values == pytest.approx([0.0, 1 / 3, 1.0, 2 / 3, 0.0, 0.0])
        assert triangular_length_reward(50, 100, r_max=2.0) == 1.0  # R_max l / L = 2 * 0.5

    def test_format_indicators(self):
        assert curriculum_format_indicators(OK) == (1, 1)
        assert curriculum_format_indicators(r"x</think>\boxed{4}") == (1, 1)  # <think> opened by the template
        # reversed tags: no well-formed think block; the box after the last </think> still counts as an answer
        assert curriculum_format_indicators(r"</think><think>x \boxed{4}") == (0, 1)
        assert curriculum_format_indicators(r"<think><think>x</think>\boxed{4}") == (0, 1)  # two opens
        assert curriculum_format_indicators(r"<think>x</think> 4") == (1, 0)  # no boxed answer
        assert curriculum_format_indicators(r"<think>x \boxed{4}") == (0, 0)  # never closed
        assert curriculum_format_indicators(r"<think>x</think> \boxed{4") == (1, 0)  # unbalanced box

    def test_three_parts_by_hand(self):
        reward = get_curriculum_reward()
        completions = [OK, OK, BAD, r"<think>x \boxed{4}"]
        ids = [[0] * 87, [0] * 200, [0] * 58, [0] * 100]
        out = reward(completions=completions, solution=["4"] * 4, completion_ids=ids, budget=[87, 100, 87, 100])
        # 1) correct, l = L: 0.6 + 0.3 * 1 + 0.1 * (0.5 + 0.5) = 1.0
        # 2) correct, l = 2L: 0.6 + 0.3 * 0 + 0.1 = 0.7
        # 3) wrong, l = 58 = 2/3 L: 0 + 0.3 * 2/3 + 0.1 = 0.3
        # 4) no </think>: correct? answer region is the whole text -> boxed 4 correct: 0.6 + 0.3 * 1 + 0.1 * 0 = 0.9
        assert out == pytest.approx([1.0, 0.7, 0.3, 0.9])

    def test_weights_and_budget_from_trainer_state(self):
        reward = get_curriculum_reward(lambda_correct=0.3, lambda_length=0.6, lambda_format=0.0)
        state = SimpleNamespace(global_step=150, max_steps=600)  # B = 179
        out = reward(completions=[OK], solution=["4"], completion_ids=[[0] * 179], trainer_state=state)
        assert out == pytest.approx([0.3 + 0.6])  # length-heavy weights, l = L
        with pytest.raises(ValueError, match="budget"):
            reward(completions=[OK], solution=["4"], completion_ids=[[0] * 10])

    def test_unparseable_gold_is_none_and_pickles(self):
        reward = pickle.loads(pickle.dumps(get_curriculum_reward()))
        assert reward(completions=[OK], solution=[""], completion_ids=[[0] * 5], budget=[10]) == [None]
        with pytest.raises(ValueError):
            get_curriculum_reward(lambda_format=math.nan)


# ---------------------------------------------------------------------------------------------------------- plan
def test_plan_states_the_step_budget():
    plan = CurriculumRolloutPlan(CurriculumSchedule(256, 87, 3), max_steps=600)
    a = plan.assign({}, 5, 8, 2, step=450)
    assert a.user_suffix == " IMPORTANT: You should use exactly 87 tokens in your response."
    assert a.metadata == {"budget": 87} and a.prefill is None and plan.num_prompt_subgroups(8) == 1
    with pytest.raises(ValueError, match="max_steps"):
        CurriculumRolloutPlan(CurriculumSchedule(), max_steps=-1)


# ------------------------------------------------------------------------------------------------------- trainer
def _trainer(tiny_model_dir, out, **overrides):
    settings = dict(
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=4,
        rollout_plan="curriculum",
        rollout_plan_kwargs={"initial_budget": 64, "final_budget": 8, "decay_points": 3},
        reward_weights=[1.0, 0.0],
        shuffle_dataset=False,
    )
    settings.update(overrides)
    args = tiny_config(out, **settings)
    return RecordingTrainer(
        model=tiny_model_dir,
        reward_funcs=[build_curriculum_reward(args, None), get_correctness_reward()],
        args=args,
        train_dataset=make_dataset(4),
    )


def test_resumed_run_at_step_k_gets_budget_of_k(tiny_model_dir, tmp_path):
    # 64 -> 8 in 3 drops, d = (8/64)^(1/3) = 0.5; T = 4/4 = 1: steps 0..3 -> 64, 32, 16, 8
    full = _trainer(tiny_model_dir, tmp_path / "full", save_strategy="steps", save_steps=2)
    full.train()
    budgets = [rec["metadata"]["budget"] for rec in full.records]
    assert budgets == [[64] * 4, [32] * 4, [16] * 4, [8] * 4]
    assert all("use exactly 16 tokens" in p for p in full.records[2]["prompts_decoded"])
    resumed = _trainer(tiny_model_dir, tmp_path / "resumed")
    resumed.train(resume_from_checkpoint=os.path.join(tmp_path, "full", "checkpoint-2"))
    assert [rec["metadata"]["budget"] for rec in resumed.records] == [[16] * 4, [8] * 4]  # B(2), B(3)
    for a, b in zip(full.records[2:], resumed.records, strict=True):
        assert a["rewards"] == b["rewards"] and a["lengths"] == b["lengths"]


def test_recipe():
    recipe = get_recipe("curriculum")
    assert recipe.config_overrides["rollout_plan_kwargs"] == {
        "initial_budget": 256,
        "final_budget": 87,
        "decay_points": 3,
        "schedule": "step",
    }
    spec = recipe.rewards[0].kwargs
    assert (spec["lambda_correct"], spec["lambda_length"], spec["lambda_format"]) == (0.6, 0.3, 0.1)
