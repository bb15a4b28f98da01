"""LAPO (methods.md §28): quantiles, both stages' rewards, the per-prompt memory, the stage-2 plan, the trainer and
resume."""

import json
import math
import os
import pickle
from types import SimpleNamespace

import pytest
from helpers import RecordingMixin, ScriptedGenerationMixin, make_dataset, tiny_config

from trl_efficient.methods.lapo import LAPOMemory, LAPORolloutPlan, LAPOTrainer, lapo_settings
from trl_efficient.recipes import get_recipe
from trl_efficient.recipes.lapo import build_lapo_reward
from trl_efficient.rewards import get_correctness_reward
from trl_efficient.rewards.lapo import (
    get_lapo_reward,
    lapo_percentile,
    lapo_stage,
    lapo_stage1_rewards,
    lapo_stage2_rewards,
)

OK, BAD = r"x</think> \boxed{4}", r"x</think> \boxed{5}"  # correct / wrong for gold "4"


def gauss(d, sigma=120.0):
    return math.exp(-(d**2) / (2 * sigma**2))


# ----------------------------------------------------------------------------------------------------- quantiles
class TestPercentile:
    def test_linear_interpolation_by_hand(self):
        # n = 5, sorted [10, 20, 30, 40, 50]: P30 at position 0.3 * 4 = 1.2 -> 20 + 0.2 * 10 = 22;
        # P70 at 0.7 * 4 = 2.8 -> 30 + 0.8 * 10 = 38; P50 at 2 -> 30
        values = [50, 10, 40, 20, 30]
        assert lapo_percentile(values, 30) == pytest.approx(22.0)
        assert lapo_percentile(values, 70) == pytest.approx(38.0)
        assert lapo_percentile(values, 50) == 30.0
        # n = 2, [100, 200]: P30 at 0.3 -> 130; P70 at 0.7 -> 170
        assert lapo_percentile([200, 100], 30) == pytest.approx(130.0)
        assert lapo_percentile([200, 100], 70) == pytest.approx(170.0)

    def test_single_value_and_empty(self):
        assert lapo_percentile([7], 30) == lapo_percentile([7], 70) == 7.0
        with pytest.raises(ValueError):
            lapo_percentile([], 30)


# ------------------------------------------------------------------------------------------------------- stage 1
class TestStage1:
    def test_band_and_falloff(self):
        # correct lengths [100, 200] -> band [130, 170]
        # 100: d = 30 -> 1 + 0.7 * 0.7 = 1.49; 150 (in band) -> 1.7; 200: d = 30 -> 1.49; wrong -> 0
        rows = [(True, 100), (False, 150), (True, 200), (True, 150)]
        # with 150 correct too: [100, 150, 200] -> P30 at 0.6: 100 + 0.6 * 50 = 130, P70 at 1.4: 150 + 0.4 * 50 = 170
        assert lapo_stage1_rewards(rows) == pytest.approx([1.49, 0.0, 1.49, 1.7])

    def test_far_outside_the_band_gets_no_bonus(self):
        # [10, 20, 30, 1000]: P30 at 0.9 -> 19, P70 at 2.1 -> 30 + 0.1 * 970 = 127; 1000: d = 873 -> max(0, .) = 0
        # 10: d = 9 -> 1 + 0.7 * 0.91 = 1.637; 20, 30 inside -> 1.7
        assert lapo_stage1_rewards([(True, 10), (True, 20), (True, 30), (True, 1000)]) == pytest.approx(
            [1.637, 1.7, 1.7, 1.0]
        )

    def test_one_correct_answer_released_code_and_point_band(self):
        rows = [(True, 50), (False, 10), (False, 500), (None, 7)]
        # released code: P30 == P70 == 50, `lower_q < upper_q` fails -> len_reward 0 -> 1 + 0
        assert lapo_stage1_rewards(rows) == [1.0, 0.0, 0.0, None]
        # point band: the one correct rollout is inside [50, 50] -> 1.7
        assert lapo_stage1_rewards(rows, point_band=True) == pytest.approx([1.7, 0.0, 0.0, None])

    def test_all_equal_correct_lengths_degenerate(self):
        assert lapo_stage1_rewards([(True, 40)] * 4) == [1.0] * 4
        # point band: 40 in [40, 40] -> 1.7 each; a correct 90 next to three 40s: P30 = P70 = 40 (positions 0.9, 2.1
        # of [40, 40, 40, 90] -> 40, 40 + 0.1 * 50 = 45): band [40, 45] is not degenerate: 90: d = 45 -> 1 + 0.7 * 0.55
        assert lapo_stage1_rewards([(True, 40), (True, 40), (True, 40), (True, 90)]) == pytest.approx(
            [1.7, 1.7, 1.7, 1.385]
        )

    def test_no_correct_and_all_wrong(self):
        assert lapo_stage1_rewards([(False, 10), (False, 20)]) == [0.0, 0.0]
        assert lapo_stage1_rewards([(None, 10), (False, 20)]) == [None, 0.0]


# ------------------------------------------------------------------------------------------------------- stage 2
class TestStage2:
    def test_known_target(self):
        # target 300: 300 -> 1 + 0.8; 420 (d = sigma) -> 1 + 0.8 e^-0.5; 60 (d = 2 sigma) -> 1 + 0.8 e^-2; wrong -> 0
        rows = [(True, 300), (True, 420), (True, 60), (False, 300)]
        expected = [1.8, 1 + 0.8 * math.exp(-0.5), 1 + 0.8 * math.exp(-2), 0.0]
        assert lapo_stage2_rewards(rows, target=300) == pytest.approx(expected)

    def test_unknown_target_uses_group_median(self):
        # target 4096 = unknown: median of correct [100, 200, 600] = 200; 100: d = 100; 600: d = 400
        rows = [(True, 100), (True, 200), (True, 600), (False, 50)]
        expected = [1 + 0.8 * gauss(100), 1.8, 1 + 0.8 * gauss(400), 0.0]
        assert lapo_stage2_rewards(rows, target=4096) == pytest.approx(expected)
        # even number of correct: median(100, 300) = 200
        assert lapo_stage2_rewards([(True, 100), (True, 300)], target=4096) == pytest.approx([1 + 0.8 * gauss(100)] * 2)

    def test_no_correct_and_extremes(self):
        assert lapo_stage2_rewards([(False, 10), (None, 5)], target=4096) == [0.0, None]
        # 10 000 tokens from the target: exp(-694) ~ 0 -> exactly 1 (no NaN)
        assert lapo_stage2_rewards([(True, 10_100)], target=100) == [1.0]

    def test_sigma_argument(self):
        # sigma 12 (a 10x smaller scale): d = 12 -> 1 + 0.8 e^-0.5
        assert lapo_stage2_rewards([(True, 112)], 100, sigma=12) == pytest.approx([1 + 0.8 * math.exp(-0.5)])


class TestReward:
    def test_stage_from_column(self):
        reward = get_lapo_reward(num_generations=2)
        kwargs = dict(completions=[OK, OK], solution=["4", "4"], completion_ids=[[0] * 100, [0] * 220])
        # stage 1: correct lengths [100, 220] -> band [136, 184]; both d = 36 -> 1 + 0.7 * 0.64 = 1.448
        assert reward(**kwargs, lapo_stage=[1, 1], lapo_target_length=[4096] * 2) == pytest.approx([1.448] * 2)
        # stage 2, target 100: 100 -> 1.8, 220 (d = 120) -> 1 + 0.8 e^-0.5
        out = reward(**kwargs, lapo_stage=[2, 2], lapo_target_length=[100, 100])
        assert out == pytest.approx([1.8, 1 + 0.8 * math.exp(-0.5)])

    def test_stage_from_trainer_state_and_default(self):
        reward = get_lapo_reward(num_generations=2, stage1_fraction=0.5)
        kwargs = dict(completions=[OK, BAD], solution=["4", "4"], completion_ids=[[0] * 100, [0] * 10])
        # one correct: stage 1 -> 1.0 (degenerate band); stage 2 with unknown target -> median 100 -> 1.8
        assert reward(**kwargs) == [1.0, 0.0]  # no column, no trainer_state: stage 1
        early, late = SimpleNamespace(global_step=4, max_steps=10), SimpleNamespace(global_step=5, max_steps=10)
        assert reward(**kwargs, trainer_state=early) == [1.0, 0.0]
        assert reward(**kwargs, trainer_state=late) == pytest.approx([1.8, 0.0])

    def test_lapo_stage(self):
        # stage1_fraction * max_steps = 0.5 * 10 = 5: steps 0..4 are stage 1
        assert [lapo_stage(s, 10, 0.5) for s in range(10)] == [1] * 5 + [2] * 5

    def test_picklable_and_argument_errors(self):
        reward = pickle.loads(pickle.dumps(get_lapo_reward(sigma=60)))
        assert reward.__name__ == "lapo_reward" and reward.sigma == 60.0
        for bad in ({"sigma": 0}, {"stage1_fraction": 1.5}, {"unknown_length": 0}, {"point_band": 1}):
            with pytest.raises(ValueError):
                get_lapo_reward(**bad)


# -------------------------------------------------------------------------------------------------------- memory
class TestMemory:
    def test_stage1_keeps_latest_median(self):
        m = LAPOMemory(unknown_length=4096)
        assert m.row_columns({"idx": 0}) == {"lapo_target_length": 4096}  # unseen prompt
        # group idx 0: correct [10, 30] -> median 20; group idx 1: no correct -> unchanged (no record)
        m.observe([0, 0, 1, 1], [10, 30, 5, 6], [1, 1, 0, float("nan")], [1] * 4, 2)
        assert m.targets == {0: 20}
        # a later stage-1 group replaces it even if longer: correct [41, 50] -> median 45.5 -> floored 45
        m.observe([0, 0], [41, 50], [1, 1], [1, 1], 2)
        assert m.targets == {0: 45}

    def test_stage2_only_lowers_or_sets_unknown(self):
        m = LAPOMemory()
        m.load_state_dict({"targets": {"0": 100}})
        m.observe([0, 0], [150, 250], [1, 1], [2, 2], 2)  # median 200 > 100: kept
        assert m.targets == {0: 100}
        m.observe([0, 0], [60, 80], [1, 1], [2, 2], 2)  # median 70 < 100: lowered
        assert m.targets == {0: 70}
        m.observe([1, 1], [300, 0], [1, 0], [2, 2], 2)  # unknown prompt: set to the median 300
        assert m.targets == {0: 70, 1: 300}
        m.observe([0, 0], [1, 2], [0, 0], [2, 2], 2)  # all wrong: unchanged
        assert m.targets == {0: 70, 1: 300}

    def test_state_round_trip_and_missing_idx(self):
        m = LAPOMemory()
        m.observe([3, 3], [11, 13], [1, 1], [1, 1], 2)
        state = json.loads(json.dumps(m.state_dict()))
        other = LAPOMemory()
        other.load_state_dict(state)
        assert other.targets == {3: 12} and other.state_dict() == m.state_dict()
        with pytest.raises(ValueError, match="idx"):
            m.row_columns({"prompt": "q"})


# ---------------------------------------------------------------------------------------------------------- plan
class TestPlan:
    def test_stage_switch_and_prefill(self):
        plan = LAPORolloutPlan(stage1_fraction=0.5, max_steps=4)
        first = plan.assign({"lapo_target_length": 4096}, 0, 4, 0, step=1)
        assert first.prefill is None and first.metadata == {"lapo_stage": 1, "lapo_target_length": 4096}
        second = plan.assign({"lapo_target_length": 87}, 3, 4, 0, step=2)
        assert second.prefill == "<think> I will answer the question with 87 tokens."
        assert second.metadata == {"lapo_stage": 2, "lapo_target_length": 87}
        assert plan.num_prompt_subgroups(8) == 1

    def test_errors(self):
        with pytest.raises(ValueError, match="LAPOTrainer"):
            LAPORolloutPlan(0.5, 4).assign({}, 0, 4, 0, 0)
        with pytest.raises(ValueError, match="max_steps"):
            LAPORolloutPlan(0.5, -1)
        assert LAPORolloutPlan(0.0, -1).stage(0) == 2  # stage 2 only needs no max_steps
        with pytest.raises(ValueError, match="unknown to LAPO"):
            lapo_settings(SimpleNamespace(rollout_plan_kwargs={"sigmaa": 1}))


# ------------------------------------------------------------------------------------------------------- trainer
class LAPORecordingTrainer(RecordingMixin, LAPOTrainer, ScriptedGenerationMixin):
    pass


def _trainer(tiny_model_dir, out, dataset=None, **overrides):
    settings = dict(
        per_device_train_batch_size=8,
        num_generations=4,
        max_steps=4,
        rollout_plan="lapo",
        rollout_plan_kwargs={"stage1_fraction": 0.5, "unknown_length": 4096, "sigma": 120},
        reward_weights=[1.0, 0.0],
        shuffle_dataset=False,  # the same order every step (the resume test shuffles, with prompt_sampler="repeat")
    )
    settings.update(overrides)
    args = tiny_config(out, **settings)
    return LAPORecordingTrainer(
        model=tiny_model_dir,
        reward_funcs=[build_lapo_reward(args, None), get_correctness_reward()],
        args=args,
        train_dataset=dataset if dataset is not None else make_dataset(2),  # 2 prompts: each seen every step
    )


class TestTrainer:
    def test_missing_idx_is_a_construction_error(self, tiny_model_dir, tmp_path):
        with pytest.raises(ValueError, match="idx"):
            _trainer(tiny_model_dir, tmp_path, dataset=make_dataset(2).remove_columns("idx"))

    def test_needs_the_lapo_plan(self, tiny_model_dir, tmp_path):
        with pytest.raises(ValueError, match="rollout_plan='lapo'"):
            _trainer(tiny_model_dir, tmp_path, rollout_plan=None, rollout_plan_kwargs=None)

    def test_resume_restores_memory_and_stage(self, tiny_model_dir, tmp_path):
        # 2 prompts a step = 1 epoch a step: checkpoint-2 is an epoch boundary; shuffled, the "repeat" sampler
        # (the recipe's) resumes the uninterrupted order (TRL's own sampler would replay epoch 0's permutation)
        order = dict(shuffle_dataset=True, prompt_sampler="repeat")
        full = _trainer(tiny_model_dir, tmp_path / "full", save_strategy="steps", save_steps=2, **order)
        full.train()
        stages = [r["metadata"]["lapo_stage"] for r in full.records]
        assert stages == [[1] * 8, [1] * 8, [2] * 8, [2] * 8]  # 0.5 * 4 steps of stage 1
        # stage 2 prompts carry the memory's targets, and the reward's target column is the same value
        for rec in full.records[2:]:
            for prompt, target in zip(rec["prompts_decoded"], rec["metadata"]["lapo_target_length"]):
                assert f"I will answer the question with {target} tokens." in prompt
        ckpt = os.path.join(tmp_path, "full", "checkpoint-2")
        with open(os.path.join(ckpt, "trl_efficient_state.json")) as f:
            saved = json.load(f)["lapo_memory"]
        assert saved["targets"]  # stage 1 recorded medians

        resumed = _trainer(tiny_model_dir, tmp_path / "resumed", **order)
        resumed.train(resume_from_checkpoint=ckpt)
        assert len(resumed.records) == 2
        for a, b in zip(full.records[2:], resumed.records, strict=True):
            assert a["metadata"] == b["metadata"] and a["lengths"] == b["lengths"]
            assert a["rewards"] == b["rewards"]
        assert resumed.lapo_memory.state_dict() == full.lapo_memory.state_dict()

        # stage 2 alone from the stage-1 checkpoint (the paper's separate runs)
        alone = _trainer(
            tiny_model_dir,
            tmp_path / "alone",
            max_steps=1,
            rollout_plan_kwargs={"stage1_fraction": 0.0, "memory_from": ckpt},
        )
        assert alone.lapo_memory.state_dict() == saved
        alone.train()
        assert alone.records[0]["metadata"]["lapo_stage"] == [2] * 8

    def test_memory_from_without_state(self, tiny_model_dir, tmp_path):
        with pytest.raises(ValueError, match="memory_from"):
            _trainer(tiny_model_dir, tmp_path, rollout_plan_kwargs={"stage1_fraction": 0.0, "memory_from": "/nope"})


def test_recipe():
    recipe = get_recipe("lapo")
    from trl_efficient.methods.lapo import LAPOTrainer

    assert recipe.trainer_cls is LAPOTrainer
    kwargs = recipe.config_overrides["rollout_plan_kwargs"]
    assert (kwargs["band_weight"], kwargs["target_weight"], kwargs["sigma"], kwargs["band_margin"]) == (
        0.7,
        0.8,
        120,
        100,
    )
    assert kwargs["unknown_length"] == 4096 and recipe.config_overrides["rollout_plan"] == "lapo"
