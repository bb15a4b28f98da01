"""DLER (methods.md §4) and DAPO dynamic sampling with refill (§31): estimator, DA-DLER truncation, refill trainer,
resume, recipe YAMLs."""

import json
import logging
import os
from types import SimpleNamespace

import pytest
import torch
from helpers import RecordingMixin, ScriptedGenerationMixin, make_dataset, tiny_config, train_yaml

from trl_efficient.methods.dler import (
    DADLERAdvantage,
    DLERAdvantage,
    DLERTrainer,
    DynamicSamplingFilter,
    RefillSampler,
    assemble_group_batch,
    difficulty_cut_lengths,
    dler_advantages,
    select_groups,
    signal_free_groups,
)
from trl_efficient.rewards import correctness_reward
from trl_efficient.trainer import EfficientGRPOTrainer, GroupBatch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
NAN = float("nan")


def batch(rewards, lengths, group_size, truncated=None, **kw):
    n = len(rewards)
    return GroupBatch(
        rewards=torch.tensor(rewards, dtype=torch.float32).view(n, -1),
        reward_names=["r"],
        reward_weights=torch.ones(1),
        lengths=torch.tensor(lengths, dtype=torch.float32),
        truncated=torch.tensor(truncated or [False] * n),
        group_size=group_size,
        **kw,
    )


class DLERRecordingTrainer(RecordingMixin, DLERTrainer, ScriptedGenerationMixin):
    pass


class ExtraKeysMixin(EfficientGRPOTrainer):
    """Below `DLERTrainer` in the MRO: every generation batch's output gains two keys TRL 1.16 does not return."""

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        ids, mask = out["completion_ids"], out["completion_mask"]
        out["row_fingerprint"] = (ids * mask).sum(1).float()
        out["token_echo"] = torch.where(mask.bool(), ids.float(), torch.tensor(-7.0))
        return out


class ExtraKeysDLERTrainer(RecordingMixin, DLERTrainer, ExtraKeysMixin, ScriptedGenerationMixin):
    def __init__(self, *args, **kwargs):
        self.final_outputs = []
        super().__init__(*args, **kwargs)

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        self.final_outputs.append({k: v.clone() for k, v in out.items() if isinstance(v, torch.Tensor)})
        return out


def closed_reward(completions, **kwargs):
    """1 when the thinking part is closed (scripted completions: 85% are)."""
    return [1.0 if "</think>" in c[0]["content"] else 0.0 for c in completions]


# ---------------------------------------------------------------------------------------------------- estimator
class TestDLERAdvantage:
    def test_signal_free_groups_follow_dapo_std_rule(self):
        # DLER's dapo_ray_trainer.py keeps a group iff np.std(rewards) > 0; truncation plays no part.
        b = batch(
            [1, 0, 1, 1, 0.1, 0, 0.1, 0.1, NAN, NAN, 2, NAN],
            [1] * 12,
            2,
            truncated=[False] * 4 + [True] * 4 + [False] * 4,
        )
        # [1, 0] std .5 kept | [1, 1] std 0 | all truncated [.1, 0]: std .05 > 0, kept | all truncated [.1, .1]: std 0
        # | nothing scorable | one scorable row (std of one value 0)
        assert signal_free_groups(b).tolist() == [False, True, False, True, True, True]

    def test_hand_values_token_weighted_with_boost(self):
        b = batch([1, 0, 1, 1, 0.1, 0], [2, 4, 3, 3, 4, 2], 2)
        # verl masked_whiten over the informative groups' tokens. centred: g0 [.5, -.5], g1 flat (left out, 0),
        # g2 [.05, -.05]; token weights 2, 4, 4, 2 (N = 12 tokens)
        # mean = (2*.5 - 4*.5 + 4*.05 - 2*.05) / 12 = -.9 / 12 = -.075
        # sum of squares = 2*.575^2 + 4*.425^2 + 4*.125^2 + 2*.025^2 = 1.4475
        # masked_var(unbiased=True) = 1.4475/12 * 12/11 = 1.4475/11 = .131591 ; A = (c + .075) * rsqrt(var + 1e-8)
        # boost (dler_slurm.sh: +0.1 where score >= 1): row 0 only (rows 2-3 are in a flat group and stay 0)
        scale = (1.4475 / 11 + 1e-8) ** -0.5  # 2.756684
        expected = [0.575 * scale + 0.1, -0.425 * scale, 0, 0, 0.125 * scale, 0.025 * scale]
        assert dler_advantages(b, correct_boost=0.1).tolist() == pytest.approx(expected, abs=1e-5)
        assert expected[0] == pytest.approx(1.68509, abs=1e-5)  # not the population std's 0.575/.347312 + .1 = 1.7556

    def test_all_truncated_group_with_different_rewards_is_trained_on(self):
        # DLER's reward: truncated correct 0.1, truncated wrong 0 -> the group differs and is kept (std .05 > 0)
        b = batch([1, 0, 0.1, 0], [3, 3, 5, 5], 2, truncated=[False, False, True, True])
        # centred [.5, -.5, .05, -.05]; tokens 3, 3, 5, 5 (N = 16): mean (1.5 - 1.5 + .25 - .25)/16 = 0
        # sum of squares 3*.25*2 + 5*.0025*2 = 1.525 ; var = 1.525/15
        scale = (1.525 / 15 + 1e-8) ** -0.5
        assert dler_advantages(b).tolist() == pytest.approx(
            [0.5 * scale, -0.5 * scale, 0.05 * scale, -0.05 * scale], abs=1e-5
        )
        assert dler_advantages(b)[2] > 0  # the truncated correct answer is pushed up relative to the wrong one

    def test_row_weighted_whitening_is_bessel_corrected(self):
        b = batch([1, 0, 0.1, 0], [2, 4, 4, 2], 2)
        # rows (N = 4): centred [.5, -.5, .05, -.05], mean 0, var (2*.25 + 2*.0025)/3 = .505/3 = .168333
        scale = (0.505 / 3 + 1e-8) ** -0.5
        assert dler_advantages(b, token_weighted=False).tolist() == pytest.approx(
            [0.5 * scale, -0.5 * scale, 0.05 * scale, -0.05 * scale], abs=1e-5
        )

    def test_all_flat_gives_zeros_not_nan(self):
        b = batch([1, 1, 0, 0, 0.1, 0.1], [3, 5, 2, 2, 9, 9], 2, truncated=[False] * 4 + [True, True])
        assert dler_advantages(b, correct_boost=0.1).tolist() == [0.0] * 6

    def test_estimator_defaults_follow_the_released_script(self):
        est = DLERAdvantage(SimpleNamespace())
        # dler_slurm.sh: correct_sample_advantage_boost_value=0.1 ; verl masked_whiten: rsqrt(var + 1e-8)
        assert (est.correct_boost, est.boost_threshold, est.eps) == (0.1, 1.0, 1e-8)
        b = batch([1, 0], [1, 1], 2)
        # centred [.5, -.5], N = 2 rows of 1 token: var = (.25 + .25)/1 = .5 ; A = ±.5/sqrt(.5) = ±.707107, +.1 on row 0
        assert est(b).tolist() == pytest.approx([0.5 / 0.5**0.5 + 0.1, -(0.5 / 0.5**0.5)], abs=1e-5)
        assert DLERAdvantage(SimpleNamespace(), correct_boost=0.0)(b).tolist() == pytest.approx(
            [0.707107, -0.707107], abs=1e-5
        )

    def test_unscorable_rows_get_zero(self):
        b = batch([1, NAN, 0, 0, 1, 0], [2, 2, 2, 2, 2, 2], 3)
        out = dler_advantages(b)
        assert out[1] == 0 and not torch.isnan(out).any()
        # group 0 centred on its scorable rows: [.5, -, -.5] ; group 1 [-1/3, -1/3, 2/3]
        assert out[0] > 0 > out[2] and out[4] > 0 > out[3]

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"eps": -1}, r"advantage_kwargs\['eps'\]"),
            ({"token_weighted": 1}, r"advantage_kwargs\['token_weighted'\]"),
            ({"correct_boost": "x"}, r"advantage_kwargs\['correct_boost'\]"),
        ],
    )
    def test_config_errors(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            DLERAdvantage(SimpleNamespace(), **kwargs)


# ------------------------------------------------------------------------------------------ stop detection (EOS)
@pytest.fixture
def two_eos_model_dir(tiny_model_dir, tmp_path):
    """The tiny model with a Qwen-style generation config: generation stops on <|im_end|> (2, the tokenizer's EOS)
    and on <|endoftext|> (0)."""
    import shutil

    path = tmp_path / "two-eos"
    shutil.copytree(tiny_model_dir, path)
    with open(path / "generation_config.json") as f:
        config = json.load(f)
    config["eos_token_id"] = [2, 0]
    with open(path / "generation_config.json", "w") as f:
        json.dump(config, f)
    return str(path)


class TestStopDetection:
    # DLER: reward x0.1 when finish_reason != "stop". Generation (TRL 1.16) stops on any id of the union of the
    # tokenizer's EOS and generation_config.eos_token_id and keeps it as the last completion id, so a completion
    # ending in 2 or 0 stopped (x1) and one ending in neither was cut (x0.1).
    COMPLETIONS = [r"a</think>\boxed{3}"] * 3
    IDS = [[5, 5, 2], [5, 5, 0], [5, 5, 5]]

    def test_recipe_builder_uses_every_eos_id(self, two_eos_model_dir):
        from transformers import AutoTokenizer

        from trl_efficient.recipes.registry import REWARD_BUILDERS

        tok = AutoTokenizer.from_pretrained(two_eos_model_dir)
        assert tok.eos_token_id == 2  # the tokenizer alone knows one of the two
        reward = REWARD_BUILDERS.get("dler_truncation")(SimpleNamespace(max_completion_length=8), tok)
        out = reward(completions=self.COMPLETIONS, solution=["3"] * 3, completion_ids=self.IDS)
        assert out == [1.0, 1.0, 0.1]

    def test_trainer_gives_the_reward_its_own_eos_set(self, two_eos_model_dir, tmp_path):
        from trl_efficient.core.lengths import completion_eos_token_ids
        from trl_efficient.rewards import get_dler_truncation_reward
        from trl_efficient.trainer import EfficientGRPOTrainer

        reward = get_dler_truncation_reward(max_completion_length=48, eos_token_id=2)  # the old builder's set
        assert reward(completions=self.COMPLETIONS, solution=["3"] * 3, completion_ids=self.IDS) == [1.0, 0.1, 0.1]
        trainer = EfficientGRPOTrainer(
            model=two_eos_model_dir, reward_funcs=[reward], args=tiny_config(tmp_path), train_dataset=make_dataset(8)
        )
        assert sorted(trainer.eos_token_ids) == [0, 2]  # TRL's own union
        assert (
            completion_eos_token_ids(trainer.model.generation_config, trainer.processing_class) == trainer.eos_token_ids
        )  # the shared helper is TRL's rule
        assert reward(completions=self.COMPLETIONS, solution=["3"] * 3, completion_ids=self.IDS) == [1.0, 1.0, 0.1]

    def test_real_generation_ending_on_the_second_eos_counts_as_stopped(self, two_eos_model_dir, tmp_path):
        # TRL 1.16 (transformers generate) stops on either id and keeps it as the last of completion_ids; the
        # reward's verdict must match the trainer's truncation flags row by row. <|endoftext|> (0) is biased up so
        # that completions end on it.
        from trl_efficient.rewards import get_dler_truncation_reward
        from trl_efficient.trainer import EfficientGRPOTrainer

        reward = get_dler_truncation_reward(max_completion_length=16, eos_token_id=2)
        seen, flags = [], []

        def spy(completion_ids, **kwargs):
            seen.extend((ids[-1], reward._stopped(ids)) for ids in completion_ids)
            return [0.0] * len(completion_ids)

        args = tiny_config(
            tmp_path,
            per_device_train_batch_size=8,
            max_completion_length=16,
            max_steps=1,
            reward_weights=[1.0, 0.0],
            generation_kwargs={"sequence_bias": [[[0], 4.0]]},
        )
        trainer = EfficientGRPOTrainer(
            model=two_eos_model_dir,
            reward_funcs=[reward, spy],
            args=args,
            train_dataset=make_dataset(8),
            group_stages=[lambda batch, _: flags.extend(batch.truncated.tolist())],
        )
        trainer.train()
        assert len(seen) == len(flags) == 8
        assert [stopped for _, stopped in seen] == [not t for t in flags]
        assert any(last == 0 and stopped for last, stopped in seen)  # ended on the second EOS: stopped, x1


class TestDifficultyTruncation:
    def test_cut_lengths(self):
        correct = torch.tensor([1, 1, 1, 0, 1, 0, NAN, 1])
        lengths = torch.tensor([5, 9, 3, 12, 9, 9, 9, 9.0])
        # group 0 solve rate 3/4 >= .75: rows longer than 8 cut ; group 1: 2 of 3 scorable = .667 < .75
        assert difficulty_cut_lengths(correct, lengths, 4, 0.75, 8).tolist() == [0, 8, 0, 8, 0, 0, 0, 0]

    def test_da_dler_config_errors_name_the_field(self):
        args = SimpleNamespace(max_completion_length=100)
        with pytest.raises(ValueError, match=r"advantage_kwargs\['truncate_to'\]=100 must be below"):
            DADLERAdvantage(args, truncate_to=100)
        with pytest.raises(ValueError, match=r"advantage_kwargs\['solve_rate_threshold'\]"):
            DADLERAdvantage(args, solve_rate_threshold=1.5, truncate_to=10)

    def test_da_dler_refuses_to_run_without_dler_trainer(self):
        est = DADLERAdvantage(SimpleNamespace(max_completion_length=100), truncate_to=10)
        with pytest.raises(RuntimeError, match="needs trl_efficient.methods.dler.DLERTrainer"):
            est(batch([1, 0], [1, 1], 2))

    def test_trainer_truncates_rescores_and_masks(self, tiny_model_dir, tmp_path):
        calls = []

        def spy(completions, completion_ids, **kwargs):  # weight 0: records what every scoring pass saw
            pairs = zip(completions, completion_ids, strict=True)
            calls.append([("</think>" in c[0]["content"], len(ids)) for c, ids in pairs])
            return [0.0] * len(completions)

        args = tiny_config(
            tmp_path,
            per_device_train_batch_size=8,
            advantage_estimator="da_dler",
            advantage_kwargs={"truncate_to": 8, "solve_rate_threshold": 0.75},
            correctness_reward="closed_reward",
            reward_weights=[1.0, 0.0],
        )
        trainer = DLERRecordingTrainer(
            model=tiny_model_dir, reward_funcs=[closed_reward, spy], args=args, train_dataset=make_dataset(16)
        )
        trainer.train()
        assert len(calls) == 4  # each step: a first pass, then a re-scoring pass after the cuts
        for step, rec in enumerate(trainer.records):
            first, second = calls[2 * step], calls[2 * step + 1]
            correct = torch.tensor([float(c) for c, _ in first])
            lengths = torch.tensor([float(n) for _, n in first])
            cuts = difficulty_cut_lengths(correct, lengths, 4, 0.75, 8)
            assert (cuts > 0).any()
            expected = [c if c else n for c, n in zip(cuts.tolist(), lengths.tolist(), strict=True)]
            assert [n for _, n in second] == expected == rec["lengths"]
            assert [r[0] for r in rec["rewards"]] == [float(c) for c, _ in second]  # re-scored
            assert rec["completion_mask_sums"] == expected  # masked past the cut
            assert rec["num_items_in_batch"] == sum(expected)
        logged = {k for e in trainer.state.log_history for k in e}
        assert "trl_efficient/da_dler/cut_fraction" in logged

    def test_trainer_needs_a_correctness_reward(self, tiny_model_dir, tmp_path):
        args = tiny_config(tmp_path, advantage_estimator="da_dler", advantage_kwargs={"truncate_to": 8})
        with pytest.raises(ValueError, match="set correctness_reward"):
            DLERTrainer(model=tiny_model_dir, reward_funcs=[closed_reward], args=args, train_dataset=make_dataset(4))


# ---------------------------------------------------------------------------------------------- dynamic sampling
class TestRefillPieces:
    def test_select_groups(self):
        inf = [torch.tensor([True, False, False]), torch.tensor([False, True, True])]
        assert select_groups(inf, 3) == [(0, 0), (1, 1), (1, 2)]  # informative first, in generation order
        assert select_groups(inf, 2) == [(0, 0), (1, 1)]
        # shortfall: informative ones, then signal-free ones in generation order; a single batch keeps its order
        assert select_groups([torch.tensor([False, True, False])], 3) == [(0, 0), (0, 1), (0, 2)]
        assert select_groups([torch.tensor([False, False]), torch.tensor([False, True])], 2) == [(0, 0), (1, 1)]

    def test_assemble_group_batch(self):
        a = batch([1, 2, 3, 4], [10, 20, 30, 40], 2, metadata={"idx": [0, 0, 1, 1]}, correctness_index=0)
        b = batch(
            [5, 6, 7, 8], [50, 60, 70, 80], 2, truncated=[True, False, False, False], metadata={"idx": [2, 2, 3, 3]}
        )
        out = assemble_group_batch([a, b], [(1, 0), (1, 1), (0, 2), (0, 3)], local_size=2, process_index=1)
        assert out.rewards.view(-1).tolist() == [5, 6, 3, 4]
        assert out.lengths.tolist() == [50, 60, 30, 40] and out.truncated.tolist() == [True, False, False, False]
        assert out.metadata == {"idx": [2, 2, 1, 1]}
        assert (out.local_slice, out.correctness_index) == (slice(2, 4), 0)

    def test_refill_sampler_is_seeded_and_resumable(self):
        a, b = RefillSampler(10, seed=3), RefillSampler(10, seed=3)
        first = a.next_prompts(4) + a.next_prompts(4) + a.next_prompts(4)
        assert sorted(first[:10]) == list(range(10))  # one epoch is a permutation
        assert a.state_dict() == {"epoch": 1, "position": 2}
        b.load_state_dict(json.loads(json.dumps(a.state_dict())))
        assert a.next_prompts(5) == b.next_prompts(5)
        # not the main sampler's permutation (torch.randperm seeded with args.seed)
        main = torch.randperm(10, generator=torch.Generator().manual_seed(3)).tolist()
        assert RefillSampler(10, seed=3).next_prompts(10) != main

    def test_filter_masks_and_warns_without_refill(self, caplog):
        f = DynamicSamplingFilter(SimpleNamespace())
        with caplog.at_level(logging.WARNING):
            keep = f(batch([1, 0, 1, 1, 0.1, 0], [1] * 6, 2, truncated=[False] * 4 + [True, True]))
        # std > 0 | std 0 | all truncated, 0.1 vs 0: std .05 > 0, kept (dapo_ray_trainer.py: keep iff std > 0)
        assert keep.tolist() == [True, True, False, False, True, True]
        assert "cannot refill" in caplog.text

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"max_generation_batches": 0}, r"filter_kwargs\['max_generation_batches'\]"),
            ({"on_shortfall": "drop"}, r"filter_kwargs\['on_shortfall'\]"),
        ],
    )
    def test_filter_config_errors(self, tmp_path, kwargs, match):
        with pytest.raises(ValueError, match=match):
            tiny_config(tmp_path, completion_filter="dynamic_sampling", filter_kwargs=kwargs)


def _refill_trainer(tiny_model_dir, out, rewards=None, trainer_cls=None, **overrides):
    kwargs = dict(
        per_device_train_batch_size=8, advantage_estimator="dler", completion_filter="dynamic_sampling", max_steps=3
    )
    kwargs.update(overrides)
    return (trainer_cls or DLERRecordingTrainer)(
        model=tiny_model_dir,
        reward_funcs=rewards or [correctness_reward],
        args=tiny_config(out, **kwargs),
        train_dataset=make_dataset(32),
    )


class TestRefillTrainer:
    def test_refilled_batches_hold_informative_groups_with_dler_advantages(self, tiny_model_dir, tmp_path):
        trainer = _refill_trainer(tiny_model_dir, tmp_path)
        trainer.train()
        batches = [
            e["trl_efficient/dynamic_sampling/generation_batches"]
            for e in trainer.state.log_history
            if "trl_efficient/dynamic_sampling/generation_batches" in e
        ]
        assert len(batches) == 3 and max(batches) > 1  # some step needed a refill
        for rec in trainer.records:
            assert len(rec["advantages"]) == 8  # per-process row count unchanged
            rewards = [r[0] for r in rec["rewards"]]
            for g in range(2):
                group = rewards[4 * g : 4 * g + 4]
                assert max(group) > min(group)  # every group informative (no shortfall here)
                assert len(set(rec["metadata"]["idx"][4 * g : 4 * g + 4])) == 1  # rows of a group stay together
                assert len(set(rec["prompts_decoded"][4 * g : 4 * g + 4])) == 1
            # the advantages are DLER's on the refilled batch (truncated rows all score 0 here)
            expected = dler_advantages(batch(rewards, rec["lengths"], 4), correct_boost=0.1)  # estimator default
            assert rec["advantages"] == pytest.approx(expected.tolist(), abs=1e-5)
            assert rec["num_items_in_batch"] == sum(rec["completion_mask_sums"])

    def test_no_refill_once_the_useful_groups_are_there(self, tiny_model_dir, tmp_path):
        # issue 20: refilling stops when a step's useful groups are reached. A reward that differs within every
        # group makes the dataloader's batch fully informative: one generation batch per step, no refill.
        def alternating(completions, **kwargs):
            return [float(i % 2) for i in range(len(completions))]

        trainer = _refill_trainer(tiny_model_dir, tmp_path, rewards=[alternating], max_steps=2)
        trainer.train()
        batches = [
            e["trl_efficient/dynamic_sampling/generation_batches"]
            for e in trainer.state.log_history
            if "trl_efficient/dynamic_sampling/generation_batches" in e
        ]
        assert batches == [1.0, 1.0]

    def test_refill_moves_output_keys_it_was_never_told_about(self, tiny_model_dir, tmp_path):
        # A future TRL may return more tensors. The refill detects each key's layout from its shape and pads it with
        # what its padded cells already hold, so two keys TRL 1.16 does not have must come out of a refilled batch
        # still matching their rows: a per-row fingerprint, and a right-padded token tensor padded with -7.
        trainer = _refill_trainer(tiny_model_dir, tmp_path, trainer_cls=ExtraKeysDLERTrainer)
        trainer.train()
        batches = [
            e["trl_efficient/dynamic_sampling/generation_batches"]
            for e in trainer.state.log_history
            if "trl_efficient/dynamic_sampling/generation_batches" in e
        ]
        assert max(batches) > 1  # some step refilled, so rows were moved and re-padded
        for out in trainer.final_outputs:
            ids, mask = out["completion_ids"], out["completion_mask"]
            assert out["row_fingerprint"].tolist() == (ids * mask).sum(1).float().tolist()
            assert torch.equal(out["token_echo"], torch.where(mask.bool(), ids.float(), torch.tensor(-7.0)))

    def test_shortfall_masks_or_raises(self, tiny_model_dir, tmp_path):
        def constant(completions, **kwargs):
            return [1.0] * len(completions)

        trainer = _refill_trainer(
            tiny_model_dir,
            tmp_path / "mask",
            rewards=[constant],
            max_steps=1,
            filter_kwargs={"max_generation_batches": 2},
        )
        trainer.train()
        rec = trainer.records[0]
        assert rec["advantages"] == [0.0] * 8 and rec["completion_mask_sums"] == [0] * 8
        assert trainer.state.log_history[0]["trl_efficient/dynamic_sampling/shortfall_groups"] == 2
        assert trainer.refill_sampler.state_dict()["position"] == 2  # one refill batch of 2 prompts was drawn
        trainer = _refill_trainer(
            tiny_model_dir,
            tmp_path / "err",
            rewards=[constant],
            max_steps=1,
            filter_kwargs={"max_generation_batches": 2, "on_shortfall": "error"},
        )
        with pytest.raises(RuntimeError, match="found 0 informative groups of the 2 needed"):
            trainer.train()

    def test_resume_continues_the_refill_stream_exactly(self, tiny_model_dir, tmp_path):
        full = _refill_trainer(tiny_model_dir, tmp_path / "full", max_steps=4, save_strategy="steps", save_steps=2)
        full.train()
        ckpt = os.path.join(tmp_path, "full", "checkpoint-2")
        with open(os.path.join(ckpt, "trl_efficient_state.json")) as f:
            assert "dynamic_sampling_refill" in json.load(f)
        resumed = _refill_trainer(tiny_model_dir, tmp_path / "resumed", max_steps=4)
        resumed.train(resume_from_checkpoint=ckpt)
        assert len(resumed.records) == 2
        for a, b in zip(full.records[2:], resumed.records, strict=True):
            assert (a["metadata"], a["lengths"], a["rewards"]) == (b["metadata"], b["lengths"], b["rewards"])
            assert a["advantages"] == pytest.approx(b["advantages"], abs=1e-6)
        assert full.refill_sampler.state_dict() == resumed.refill_sampler.state_dict()
        assert full.refill_sampler.state_dict() != {"epoch": 0, "position": 0}

    def test_grpo_with_batch_statistics_is_refused(self, tiny_model_dir, tmp_path):
        with pytest.raises(NotImplementedError, match="scale_rewards='batch'"):
            _refill_trainer(tiny_model_dir, tmp_path, advantage_estimator="grpo", scale_rewards="batch")


# ------------------------------------------------------------------------------------------------ recipes / YAML


class TestRecipes:
    def test_dler_yaml_refills_the_batch(self, tmp_path, monkeypatch):
        # Recipe 'dler' trains with DLERTrainer, whose refill loop alone logs trl_efficient/dynamic_sampling/*.
        # The tiny random model never writes a boxed answer after </think> in 12 tokens, so every dler_truncation
        # reward is 0, no group is informative, and each step must draw the YAML's max_generation_batches (4) batches
        # and fall short by every group: per_device_train_batch_size 4 / num_generations 4 = 1 group per step.
        from transformers import Trainer

        logs, seen = [], []
        original_log, original_refill = Trainer.log, DLERTrainer._refill_rows

        def log(self, logs_, *args, **kwargs):  # Trainer.log: GRPOTrainer.log has merged its metrics by then
            logs.append(dict(logs_))
            return original_log(self, logs_, *args, **kwargs)

        def refill_rows(self, n):
            rows = original_refill(self, n)
            seen.append([row["idx"] for row in rows])
            return rows

        monkeypatch.setattr(Trainer, "log", log)
        monkeypatch.setattr(DLERTrainer, "_refill_rows", refill_rows)
        config = train_yaml("dler", tmp_path, max_completion_length=12)
        assert (config.advantage_estimator, config.completion_filter) == ("dler", "dynamic_sampling")
        assert (config.epsilon_high, config.mask_truncated_completions, config.beta) == (0.28, False, 0.0005)
        assert config.filter_kwargs["max_generation_batches"] == 4
        assert config.advantage_kwargs["correct_boost"] == 0.1  # dler_slurm.sh: correct_sample_advantage_boost_value
        steps = [e for e in logs if "trl_efficient/dynamic_sampling/generation_batches" in e]
        assert len(steps) == 2  # max_steps 2, logging_steps 1
        for e in steps:
            assert e["trl_efficient/dynamic_sampling/generation_batches"] == 4.0
            assert e["trl_efficient/dynamic_sampling/informative_fraction"] == 0.0
            assert e["trl_efficient/dynamic_sampling/shortfall_groups"] == 1.0
        # 2 steps x 3 refill batches, each one prompt repeated G = 4 times, drawn from the refill sampler
        assert len(seen) == 6 and all(len(rows) == 4 and len(set(rows)) == 1 for rows in seen)

    def test_da_dler_yaml_and_recipe(self, tmp_path):
        from trl_efficient.recipes import get_recipe

        recipe = get_recipe("da-dler")
        assert recipe.trainer_cls is DLERTrainer
        o = recipe.config_overrides
        assert (o["advantage_estimator"], o["completion_filter"]) == ("da_dler", "dynamic_sampling")
        assert o["advantage_kwargs"]["solve_rate_threshold"] == 0.75 and o["advantage_kwargs"]["truncate_to"] == 2000
        assert o["advantage_kwargs"]["correct_boost"] == 0.1  # DLER's released script (§4), as recipe 'dler'
        config = train_yaml("da-dler", tmp_path, advantage_kwargs={"truncate_to": 6})
        assert config.correctness_reward == "dler_truncation_reward"
        assert config.filter_kwargs["max_generation_batches"] == 4
