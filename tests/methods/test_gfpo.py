"""GFPO (methods.md §13): keep masks, kept-set advantages, the t-digest, adaptive k, the filter, the loss normaliser,
resume, recipes and YAMLs."""

import json
import os
import random
from types import SimpleNamespace

import pytest
import torch
from helpers import (
    RecordingMixin,
    ScriptedGenerationMixin,
    group_batch,
    make_dataset,
    recipe_yaml_settings,
    tiny_config,
    train_yaml,
)

from trl_efficient.methods.gfpo import (
    AdaptiveGFPOAdvantage,
    GFPOAdvantage,
    GFPOTrainer,
    TDigest,
    gfpo_keep_mask,
    kept_set_advantages,
)
from trl_efficient.rewards import correctness_reward, get_kimi_length_reward
from trl_efficient.trainer import EfficientGRPOTrainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
NAN = float("nan")


batch = group_batch


ARGS = SimpleNamespace(num_generations=4, advantage_estimator="gfpo")


class GFPORecordingTrainer(RecordingMixin, GFPOTrainer, ScriptedGenerationMixin):
    pass


class PlainRecordingTrainer(RecordingMixin, EfficientGRPOTrainer, ScriptedGenerationMixin):
    pass


class TestKeepAndAdvantages:
    def test_shortest_with_stable_ties(self):
        keep = gfpo_keep_mask(torch.zeros(8), torch.tensor([5, 3, 9, 3, 7, 7, 7, 1.0]), 4, 2)
        # group 0: lengths 3 (idx 1) and 3 (idx 3) ; group 1: 1 (idx 7), then the first 7 (idx 4)
        assert keep.tolist() == [False, True, False, True, True, False, False, True]

    def test_token_efficiency_prefers_reward_per_token_and_puts_unscorable_last(self):
        total = torch.tensor([1.0, 0.0, 1.0, NAN, -1.0, -1.0, 0.0, 0.0])
        lengths = torch.tensor([5, 3, 9, 1, 10, 20, 5, 5.0])
        # R/L: .2, 0, .111, NaN -> keep .2 and .111 ; group 1: -.1, -.05, 0, 0 -> keep the two 0s (idx 6, 7)
        keep = gfpo_keep_mask(total, lengths, 4, 2, "token_efficiency")
        assert keep.tolist() == [True, False, True, False, False, False, True, True]
        # with negative rewards R/L keeps the LONGER wrong answer (-1/20 > -1/10): the paper's behaviour
        keep = gfpo_keep_mask(total, lengths, 4, 3, "token_efficiency")
        assert keep[4:].tolist() == [False, True, True, True]

    def test_per_group_k(self):
        keep = gfpo_keep_mask(torch.zeros(8), torch.tensor([1, 2, 3, 4, 1, 2, 3, 4.0]), 4, torch.tensor([3, 2]))
        assert keep.tolist() == [True, True, True, False, True, True, False, False]

    def test_kept_set_advantages(self):
        total = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 5.0])
        keep = torch.tensor([True, True, True, False, True, True, False, False])
        # group 0 kept [1, 0, 0]: mean 1/3, sample std sqrt(1/3) = .57735 -> (2/3)/.57745, (-1/3)/.57745 ;
        # dropped row 0 ; group 1 kept [1, 1]: std 0 -> 0
        s = 3**-0.5 + 1e-4
        assert kept_set_advantages(total, keep, 4).tolist() == pytest.approx(
            [(2 / 3) / s, (-1 / 3) / s, (-1 / 3) / s, 0, 0, 0, 0, 0], abs=1e-5
        )

    def test_estimator_hand_values_and_edges(self):
        est = GFPOAdvantage(ARGS, k=2)
        b = batch(
            [1, 0, 1, 1, 1, 0, 0, 1, 1, 0, 1, 0],
            [5, 3, 9, 4, 2, 4, 6, 8, 9, 9, 9, 9],
            4,
            truncated=[False] * 8 + [True] * 4,
        )
        adv = est(b)
        # paper: A_i = m_i (R_i - mu_S) / sigma_S over the kept set S (+1e-4, TRL's eps), no truncation rule.
        # group 0: keep lengths 3 (R 0) and 4 (R 1): mean .5, sample std .70711 -> -.5/.70721 = -.70700, +.70700
        # group 1: keep lengths 2 (R 1), 4 (R 0) -> +.70700, -.70700
        # group 2, all truncated: equal lengths, stable ties keep rows 8 (R 1) and 9 (R 0) -> +.70700, -.70700
        assert adv.tolist() == pytest.approx(
            [0, -0.70700, 0, 0.70700, 0.70700, -0.70700, 0, 0, 0.70700, -0.70700, 0, 0], abs=1e-4
        )
        assert b.extras["gfpo_keep"].tolist() == [
            False,
            True,
            False,
            True,
            True,
            True,
            False,
            False,
            True,
            True,
            False,
            False,
        ]
        equal = batch([1, 1, 1, 1], [1, 2, 3, 4], 4)
        assert est(equal).tolist() == [0.0] * 4

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"k": 1}, r"advantage_kwargs\['k'\] must be an int in \[2, num_generations=4\]"),
            ({"k": 5}, r"advantage_kwargs\['k'\]"),
            ({"k": 2, "metric": "longest"}, r"advantage_kwargs\['metric'\]"),
        ],
    )
    def test_estimator_config_errors(self, tmp_path, kwargs, match):
        with pytest.raises(ValueError, match=match):
            tiny_config(tmp_path, advantage_estimator="gfpo", advantage_kwargs=kwargs)

    def test_filter_config_errors(self, tmp_path):
        with pytest.raises(ValueError, match="completion_filter='gfpo' masks what advantage_estimator"):
            tiny_config(tmp_path, completion_filter="gfpo")
        with pytest.raises(ValueError, match=r"filter_kwargs\['loss_normalizer'\]"):
            tiny_config(
                tmp_path,
                advantage_estimator="gfpo",
                advantage_kwargs={"k": 2},
                completion_filter="gfpo",
                filter_kwargs={"loss_normalizer": "some"},
            )


class TestTDigest:
    def test_exact_quantiles_on_few_points(self):
        d = TDigest()
        d.add([0.0, 1.0, 0.5, 0.25, NAN])  # NaN is ignored
        # sorted 0, .25, .5, 1 at positions .5, 1.5, 2.5, 3.5 (of 4): q25 -> 1.0 -> 0 + .5 * .25 = .125 ;
        # q50 -> 2.0 -> .375 ; q75 -> 3.0 -> .5 + .5 * .5 = .75 ; extremes clamp to min / max
        assert [d.quantile(q) for q in (0.25, 0.5, 0.75, 0.0, 1.0)] == [0.125, 0.375, 0.75, 0.0, 1.0]
        assert d.count == 4

    def test_merging_bounds_size_and_keeps_quantiles(self):
        rng = random.Random(0)
        d = TDigest(compression=50, buffer_size=100)
        values = [rng.random() for _ in range(5000)]
        d.add(values)
        assert d.count == 5000 and len(d.means) < 100 and d.buffer == []
        for q in (0.1, 0.25, 0.5, 0.75, 0.9):
            assert d.quantile(q) == pytest.approx(sorted(values)[int(q * 5000)], abs=0.02)

    def test_quantile_does_not_change_state_and_json_round_trip(self):
        d = TDigest(buffer_size=4)
        d.add([3.0, 1.0, 2.0, 5.0, 4.0, 0.5])
        before = json.dumps(d.state_dict())
        d.quantile(0.3)
        assert json.dumps(d.state_dict()) == before
        e = TDigest()
        e.load_state_dict(json.loads(before))
        assert [e.quantile(q) for q in (0.2, 0.5, 0.8)] == [d.quantile(q) for q in (0.2, 0.5, 0.8)]


class TestAdaptive:
    def make(self, **kwargs):
        return AdaptiveGFPOAdvantage(
            SimpleNamespace(num_generations=4), k_by_quartile=[4, 3, 2, 2], warmup_k=4, **kwargs
        )

    def test_warmup_then_k_by_quartile(self):
        est = self.make(warmup_steps=1, warmup_prompts=4)
        # 4 prompts with mean rewards 0, .25, .5, 1 (one batch): q25 .125, q50 .375, q75 .75
        history = batch([0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1], [1] * 16, 4)
        assert est.group_k(history).tolist() == [4, 4, 4, 4]  # not ready: warmup_k
        est.update(history)
        assert est.ready and est.steps == 1 and est.digest.count == 4
        # new groups with means .1 (< q25), .25 (< q50), .5 (< q75), .75 (>= q75) -> k 4, 3, 2, 2
        b = batch([0.4, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0], [1, 2, 3, 4] * 4, 4)
        assert est.group_k(b).tolist() == [4, 3, 2, 2]
        adv = est(b)
        assert b.extras["gfpo_keep"].view(4, 4).sum(1).tolist() == [4, 3, 2, 2]
        # group 1 keeps lengths 1-3 with rewards [1, 0, 0] -> (2/3)/.57745, -(1/3)/.57745 x2, dropped 0
        s = 3**-0.5 + 1e-4
        assert adv[4:8].tolist() == pytest.approx([(2 / 3) / s, (-1 / 3) / s, (-1 / 3) / s, 0], abs=1e-5)

    def test_ready_needs_steps_and_prompts(self):
        est = self.make(warmup_steps=2, warmup_prompts=1)
        one = batch([1, 0, 0, 0], [1] * 4, 4)
        est.update(one)
        assert not est.ready  # 1 step of 2
        est.update(one)
        assert est.ready

    def test_state_round_trip(self):
        est = self.make(warmup_steps=0, warmup_prompts=0)
        est.update(batch([1, 0, 0, 0, 1, 1, 0, 0], [1] * 8, 4))
        other = self.make(warmup_steps=0, warmup_prompts=0)
        other.load_state_dict(json.loads(json.dumps(est.state_dict())))
        assert other.state_dict() == est.state_dict() and other.steps == 1
        b = batch([1, 0, 0, 0, 1, 1, 1, 0], [1] * 8, 4)
        assert other.group_k(b).tolist() == est.group_k(b).tolist()

    def test_config_errors_name_the_field(self, tmp_path):
        with pytest.raises(ValueError, match=r"advantage_kwargs\['k_by_quartile'\]\[3\]"):
            tiny_config(
                tmp_path,
                advantage_estimator="gfpo_adaptive",
                advantage_kwargs={"k_by_quartile": [4, 4, 2, 1], "warmup_k": 4},
            )
        with pytest.raises(ValueError, match=r"advantage_kwargs\['warmup_k'\]"):
            tiny_config(tmp_path, advantage_estimator="gfpo_adaptive", advantage_kwargs={"k_by_quartile": [4, 4, 2, 2]})


def _gfpo_trainer(tiny_model_dir, out, cls=GFPORecordingTrainer, **overrides):
    kwargs = dict(
        per_device_train_batch_size=8, advantage_estimator="gfpo", advantage_kwargs={"k": 2}, completion_filter="gfpo"
    )
    kwargs.update(overrides)
    return cls(
        model=tiny_model_dir,
        reward_funcs=[correctness_reward, get_kimi_length_reward(warmup_ratio=0.0)],
        args=tiny_config(out, **kwargs),
        train_dataset=make_dataset(32),
    )


class TestTrainer:
    def test_kept_rows_trained_dropped_rows_masked_normaliser_over_all_rows(self, tiny_model_dir, tmp_path):
        trainer = _gfpo_trainer(tiny_model_dir, tmp_path)
        trainer.train()
        for rec in trainer.records:
            lengths = rec["lengths"]
            total = torch.tensor([r[0] + r[1] for r in rec["rewards"]])
            keep = gfpo_keep_mask(total, torch.tensor(lengths), 4, 2)
            kept = [m > 0 for m in rec["completion_mask_sums"]]
            assert kept == keep.tolist()
            expected = kept_set_advantages(total, keep, 4)
            assert rec["advantages"] == pytest.approx(expected.tolist(), abs=1e-5)
            # loss_normalizer 'all': the denominator still counts the dropped rows' tokens (the paper's choice)
            assert rec["num_items_in_batch"] == sum(lengths) > sum(rec["completion_mask_sums"])
        assert "trl_efficient/gfpo/mean_k" in trainer.state.log_history[0]

    def test_kept_normaliser_and_plain_trainer(self, tiny_model_dir, tmp_path):
        trainer = _gfpo_trainer(
            tiny_model_dir, tmp_path / "kept", filter_kwargs={"loss_normalizer": "kept"}, max_steps=1
        )
        trainer.train()
        rec = trainer.records[0]
        assert rec["num_items_in_batch"] == sum(rec["completion_mask_sums"])
        # the base trainer's masking hook honours 'all' too: the plain EfficientGRPOTrainer keeps all G rows' tokens
        plain = _gfpo_trainer(tiny_model_dir, tmp_path / "plain", cls=PlainRecordingTrainer, max_steps=1)
        plain.train()
        rec = plain.records[0]
        assert rec["num_items_in_batch"] == sum(rec["lengths"]) > sum(rec["completion_mask_sums"])

    def test_adaptive_resume_is_exact(self, tiny_model_dir, tmp_path):
        kwargs = dict(
            advantage_estimator="gfpo_adaptive",
            max_steps=4,
            advantage_kwargs={"k_by_quartile": [4, 3, 2, 2], "warmup_k": 4, "warmup_steps": 1, "warmup_prompts": 2},
        )
        full = _gfpo_trainer(tiny_model_dir, tmp_path / "full", save_strategy="steps", save_steps=2, **kwargs)
        full.train()
        ckpt = os.path.join(tmp_path, "full", "checkpoint-2")
        with open(os.path.join(ckpt, "trl_efficient_state.json")) as f:
            saved = json.load(f)["gfpo_adaptive"]
        assert saved["steps"] == 2 and saved["digest"]["buffer"]  # 4 prompt means seen
        resumed = _gfpo_trainer(tiny_model_dir, tmp_path / "resumed", **kwargs)
        resumed.train(resume_from_checkpoint=ckpt)
        assert len(resumed.records) == 2
        for a, b in zip(full.records[2:], resumed.records, strict=True):
            assert a["rewards"] == b["rewards"] and a["completion_mask_sums"] == b["completion_mask_sums"]
            assert a["advantages"] == pytest.approx(b["advantages"], abs=1e-6)
        est_full = full.stateful_components["gfpo_adaptive"]
        est_res = resumed.stateful_components["gfpo_adaptive"]
        assert est_full.state_dict() == est_res.state_dict() and est_full.steps == 4
        # the adaptive k was active after the warm-up: some group kept fewer than 4
        assert any(
            sum(m > 0 for m in r["completion_mask_sums"][i : i + 4]) < 4 for r in full.records[1:] for i in (0, 4)
        )


class TestRecipes:
    def test_gfpo_yaml(self, tmp_path):
        from trl_efficient.recipes import get_recipe

        assert get_recipe("gfpo").trainer_cls is GFPOTrainer
        config = train_yaml("gfpo", tmp_path, advantage_kwargs={"k": 2, "metric": "shortest"})
        assert (config.completion_filter, config.loss_type) == ("gfpo", "dapo")
        assert config.filter_kwargs == {"loss_normalizer": "all"}

    def test_gfpo_adaptive_yaml(self, tmp_path):
        config = train_yaml(
            "gfpo-adaptive",
            tmp_path,
            advantage_kwargs={"k_by_quartile": [4, 4, 3, 2], "warmup_k": 4, "warmup_steps": 1, "warmup_prompts": 1},
        )
        assert config.advantage_estimator == "gfpo_adaptive"
        raw = recipe_yaml_settings("gfpo-adaptive")
        # methods.md §13 [paper]: k = 8, 8, 6, 4 by reward quartile (mean 6.5), k = 8 until the digest is ready;
        # normaliser over all G; t-digest ready after 5 steps and 64 prompts (proposed default)
        assert raw["advantage_kwargs"]["k_by_quartile"] == [8, 8, 6, 4] and raw["advantage_kwargs"]["warmup_k"] == 8
        assert (raw["advantage_kwargs"]["warmup_steps"], raw["advantage_kwargs"]["warmup_prompts"]) == (5, 64)
        assert raw["filter_kwargs"] == {"loss_normalizer": "all"} and raw["completion_filter"] == "gfpo"
