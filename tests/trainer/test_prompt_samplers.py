"""Prompt samplers (trainer/prompt_samplers.py): TRL's RepeatSampler layout, LSPO's length-aware choice (methods.md
§20), Frugal-Thinking's uniform sampling of the kept problems and its pass-rate weighting option (§30), and exact
resume."""

import json
import os

import pytest
import torch
from datasets import Dataset
from helpers import RecordingTrainer, make_dataset, tiny_config
from trl.trainer.utils import RepeatSampler

from trl_efficient.methods.frugal import FrugalSampler, frugal_weight
from trl_efficient.methods.lspo import LSPOSampler, quantile
from trl_efficient.rewards import correctness_reward
from trl_efficient.trainer import EfficientGRPOConfig, GroupBatch
from trl_efficient.trainer.prompt_samplers import PromptSampler


def _ids(n):
    return Dataset.from_dict({"idx": list(range(n))})


def _batch(ids, lengths, group_size=2, rewards=None):
    # rewards 1, 0, 1, 0, ... by default: every group of 2 has non-zero variance (LSPO records its length)
    n = len(ids)
    rewards = [float(i % 2 == 0) for i in range(n)] if rewards is None else rewards
    return GroupBatch(
        rewards=torch.tensor(rewards, dtype=torch.float32).view(n, 1),
        reward_names=["r"],
        reward_weights=torch.ones(1),
        lengths=torch.tensor(lengths, dtype=torch.float32),
        truncated=torch.zeros(n, dtype=torch.bool),
        group_size=group_size,
        metadata={"idx": list(ids)},
    )


def _chunks(sampler, n_chunks):
    """The next `n_chunks` chunks of prompt indices (one index per prompt) from one pass of `iter`."""
    it, per_chunk = iter(sampler), sampler.batch_size * sampler.mini_repeat_count * sampler.repeat_count
    flat = [next(it) for _ in range(n_chunks * per_chunk)]
    step = sampler.mini_repeat_count
    return [flat[c * per_chunk : c * per_chunk + sampler.batch_size * step : step] for c in range(n_chunks)]


@pytest.mark.parametrize("cls", [PromptSampler, LSPOSampler])
@pytest.mark.parametrize("n, shuffle", [(10, True), (8, True), (7, False)])
def test_without_history_the_sequence_is_trls_repeat_sampler(cls, n, shuffle):
    layout = dict(mini_repeat_count=3, batch_size=2, repeat_count=2, shuffle=shuffle, seed=7)
    trl = RepeatSampler(_ids(n), **layout)
    ours = cls(_ids(n), **layout)
    assert len(ours) == len(trl)
    for _epoch in range(3):  # every epoch (TRL draws a new permutation each epoch)
        assert list(ours) == list(trl)


def test_quantile_by_hand():
    # sorted [10, 20, 30, 40, 50], h = q (n - 1): q = 0.3 -> h = 1.2 -> 20 + 0.2 * 10 = 22
    assert quantile([50, 10, 40, 30, 20], 0.3) == pytest.approx(22.0)
    # q = 0.7 -> h = 2.8 -> 30 + 0.8 * 10 = 38
    assert quantile([50, 10, 40, 30, 20], 0.7) == pytest.approx(38.0)
    assert quantile([7], 0.3) == 7.0


def test_lspo_skips_the_middle_and_the_overlong_by_hand():
    s = LSPOSampler(_ids(8), mini_repeat_count=1, batch_size=3, shuffle=False, seed=0, l_max=45)
    # groups of 2 rows: mean lengths idx0 (8+12)/2 = 10, idx1 20, idx2 30, idx3 40, idx4 50; 5, 6, 7 unseen
    s.update(_batch([0, 0, 1, 1, 2, 2, 3, 3, 4, 4], [8, 12, 20, 20, 25, 35, 40, 40, 50, 50], group_size=2))
    assert s.lengths == {0: 10.0, 1: 20.0, 2: 30.0, 3: 40.0, 4: 50.0}
    # Q(0.3) = 22, Q(0.7) = 38 (test_quantile_by_hand): 22 < 30 < 38 skipped; 50 > L_max = 45 skipped
    assert s.thresholds() == pytest.approx((22.0, 38.0))
    assert [s.eligible(i, s.thresholds()) for i in range(8)] == [True, True, False, True, False, True, True, True]
    # pass [0..7]: chunk 1 = first three eligible [0, 1, 3] (2 skipped), chunk 2 = [5, 6, 7] (4 skipped)
    assert _chunks(s, 2) == [[0, 1, 3], [5, 6, 7]]
    # boundaries are kept: L = Q(L_low) and L = Q(L_high) are not strictly inside
    s.lengths = {0: 10.0, 1: 22.0, 2: 38.0, 3: 50.0, 4: 60.0}  # Q(0.3) = h 1.2: 22 + 0.2 * 16 = 25.2
    q_low, q_high = s.thresholds()  # Q(0.7): h 2.8: 38 + 0.8 * 12 = 47.6
    assert (q_low, q_high) == pytest.approx((25.2, 47.6))
    assert [s.eligible(i, (22.0, 38.0)) for i in (1, 2)] == [True, True]


def test_lspo_drops_zero_variance_groups_before_the_quantiles_by_hand():
    # LSPO (arXiv 2510.01459): zero-variance groups are dropped first; L(q) and the quantiles use the groups left.
    s = LSPOSampler(_ids(5), mini_repeat_count=2, batch_size=2, shuffle=False, seed=0, l_max=100)
    s.update(_batch([0, 0, 1, 1, 2, 2, 3, 3, 4, 4], [8, 12, 80, 80, 90, 90, 36, 44, 50, 50],
                    rewards=[1, 0, 1, 1, 0, 0, 0, 1, 1, 0]))  # fmt: skip
    # idx 1 (rewards 1, 1) and idx 2 (0, 0) have zero variance: no length. Kept: idx 0 (8 + 12) / 2 = 10,
    # idx 3 (36 + 44) / 2 = 40, idx 4 50.
    assert s.lengths == {0: 10.0, 3: 40.0, 4: 50.0}
    # quantiles of [10, 40, 50]: Q(0.3): h = 0.3 * 2 = 0.6 -> 10 + 0.6 * 30 = 28; Q(0.7): h = 1.4 -> 40 + 0.4 * 10 = 44
    assert s.thresholds() == pytest.approx((28.0, 44.0))
    # kept: idx 0 (10 <= 28), idx 4 (44 <= 50 <= 100), idx 1 and 2 (no length: unseen, eligible); skipped: idx 3
    # (28 < 40 < 44). Counting the zero-variance groups instead (the other reading) would take the quantiles of
    # [10, 40, 50, 80, 90]: Q(0.3) = h 1.2 -> 40 + 0.2 * 10 = 42, Q(0.7) = h 2.8 -> 50 + 0.8 * 30 = 74, keeping idx 3
    # (40 <= 42) and skipping idx 4 (42 < 50 < 74): the opposite choice.
    assert [s.eligible(i, s.thresholds()) for i in range(5)] == [True, True, True, False, True]
    # pass [0, 1, 2, 3, 4], 5 // 2 = 2 chunks: [0, 1], then [2, 4] (3 skipped)
    assert _chunks(s, 2) == [[0, 1], [2, 4]]
    # a later zero-variance group of idx 0 removes its length: quantiles over [40, 50] only
    s.update(_batch([0, 0], [30, 30], rewards=[1, 1]))
    assert s.lengths == {3: 40.0, 4: 50.0}


def test_lspo_fills_with_skipped_prompts_in_order_and_defaults_l_max():
    args = EfficientGRPOConfig(output_dir="/tmp/x", max_completion_length=100, report_to="none", use_cpu=True)
    s = LSPOSampler(_ids(4), mini_repeat_count=2, batch_size=3, shuffle=False, seed=0, args=args)
    assert s.l_max == pytest.approx(95.0)  # 0.95 * 100 (proposed default)
    s.update(_batch([0, 0, 1, 1, 2, 2], [96, 96, 97, 97, 98, 98]))  # all three above L_max; idx 3 unseen
    # only idx 3 is eligible in the pass [0, 1, 2, 3]: fill with the first two skipped, emitted in pass order
    assert _chunks(s, 1) == [[0, 1, 3]]
    with pytest.raises(ValueError, match="'idx' column"):
        LSPOSampler(Dataset.from_dict({"prompt": ["a", "b"]}), mini_repeat_count=1)
    with pytest.raises(ValueError, match="low <= high"):
        LSPOSampler(_ids(4), mini_repeat_count=1, low=0.8, high=0.2)


def test_sampler_config_fields_are_checked():
    kw = dict(output_dir="/tmp/x", report_to="none", use_cpu=True)
    with pytest.raises(ValueError, match="prompt_sampler must be one of"):
        EfficientGRPOConfig(prompt_sampler="nope", **kw)
    with pytest.raises(ValueError, match="sampler_kwargs"):
        EfficientGRPOConfig(prompt_sampler="lspo", sampler_kwargs={"bogus": 1}, **kw)
    with pytest.raises(ValueError, match="alpha"):
        EfficientGRPOConfig(prompt_sampler="frugal", sampler_kwargs='{"alpha": -1}', **kw)
    assert EfficientGRPOConfig(prompt_sampler="lspo", sampler_kwargs='{"low": 0.2}', **kw).sampler_kwargs == {
        "low": 0.2
    }


def _simulate(sampler, steps, skip=0, start=0):
    """A training loop over `iter(sampler)`: one generation batch per chunk, `update` with lengths that are a pure
    function of (idx, step); the first `skip` batches are consumed without training (HF's resume skip)."""
    per_chunk = sampler.batch_size * sampler.mini_repeat_count * sampler.repeat_count
    out, it, step = [], None, start
    while step < start + steps:
        if it is None:
            it = iter(sampler)
        try:
            rows = [next(it) for _ in range(per_chunk)]
        except StopIteration:
            it = None
            continue
        if skip:
            skip -= 1
            continue
        chunk = rows[:: sampler.mini_repeat_count][: sampler.batch_size]
        out.append(chunk)
        ids = [i for i in chunk for _ in range(sampler.mini_repeat_count)]
        sampler.update(_batch(ids, [(7 * i + 3 * step) % 23 + 1 for i in ids], sampler.mini_repeat_count))
        step += 1
    return out


@pytest.mark.parametrize("stop", [2, 3, 5])
def test_lspo_state_resumes_exactly(stop):
    make = lambda: LSPOSampler(_ids(9), mini_repeat_count=2, batch_size=2, seed=3, l_max=20)  # noqa: E731
    full = make()
    expected = _simulate(full, 10)
    first = make()
    assert _simulate(first, stop) == expected[:stop]
    state = json.loads(json.dumps(first.state_dict()))  # the checkpoint file is JSON
    resumed = make()
    resumed.load_state_dict(state)
    done_in_epoch = stop % resumed.chunks_per_epoch  # HF re-iterates the epoch and skips the trained batches
    assert _simulate(resumed, 10 - stop, skip=done_in_epoch, start=stop) == expected[stop:]
    assert resumed.state_dict() == full.state_dict()
    assert expected != _simulate(PromptSampler(_ids(9), mini_repeat_count=2, batch_size=2, seed=3), 10)  # it acts


@pytest.mark.parametrize("n, shuffle", [(10, True), (8, True), (7, False)])
def test_frugal_default_is_uniform_trls_shuffled_order(n, shuffle):
    # arXiv 2511.01937 Stage 1 samples the kept problems (p < 1) uniformly; the released run reads them with verl's
    # shuffled dataloader (Frugal-Thinking 7348824b, stage_1/q3_4b_it_math_xp.slurm: SHUFFLE=true, data.shuffle).
    # Over a dataset of kept problems only (what prepare_dataset leaves) the default sampler is therefore TRL's own
    # RepeatSampler: one seeded permutation per epoch, every kept problem once per epoch.
    rates = Dataset.from_dict({"pass_rate": [(i % 4) / 4 for i in range(n)]})  # 0, 0.25, 0.5, 0.75: all kept
    layout = dict(mini_repeat_count=3, batch_size=2, repeat_count=2, shuffle=shuffle, seed=7)
    trl, ours = RepeatSampler(rates, **layout), FrugalSampler(rates, **layout)
    assert ours.alpha == 0.0 and ours.weights.tolist() == [1.0] * n  # uniform: w = 1 + 0 * p
    for _epoch in range(3):
        assert list(ours) == list(trl)


def test_frugal_uniform_skips_always_solved_problems_by_hand():
    # no shuffle, pass order [0, 1, 2, 3, 4, 5]; p = 1 at rows 1 and 4 (never drawn)
    s = FrugalSampler(Dataset.from_dict({"pass_rate": [0.0, 1.0, 0.5, 0.25, 1.0, 0.75]}), 1, batch_size=2,
                      shuffle=False, seed=0)  # fmt: skip
    # 6 // 2 = 3 chunks an epoch. pass 0: kept positions 0, 2, 3, 5 -> [0, 2], then [3, 5]; the rest (nothing kept)
    # ends the pass; pass 1 starts over: [0, 2]
    assert _chunks(s, 3) == [[0, 2], [3, 5], [0, 2]]
    # uniform over the kept four with shuffling: each drawn 1/4 of the time, p = 1 never
    u = FrugalSampler(Dataset.from_dict({"pass_rate": [0.0, 1.0, 0.5, 0.25, 1.0, 0.75]}), 1, batch_size=1, seed=0)
    counts = torch.zeros(6)
    for _ in range(200):
        for i in u:
            counts[i] += 1
    freq = counts / counts.sum()
    assert freq[1] == 0 and freq[4] == 0
    assert freq[[0, 2, 3, 5]].tolist() == pytest.approx([0.25] * 4, abs=0.03)


def test_frugal_weighting_option_by_hand_and_sampling():
    # option alpha > 0: w = 1 + alpha p for p < 1, 0 for p = 1
    assert [frugal_weight(p, alpha=1.0) for p in (0.0, 0.5, 0.75, 1.0)] == [1.0, 1.5, 1.75, 0.0]
    assert [frugal_weight(p) for p in (0.0, 0.5, 0.75, 1.0)] == [1.0, 1.0, 1.0, 0.0]  # default: uniform
    with pytest.raises(ValueError, match="pass_rate"):
        frugal_weight(1.5)
    rates = [0.0, 0.75, 1.0, 0.0, 0.75, 1.0]  # alpha = 1: weights 1, 1.75, 0, 1, 1.75, 0: total 5.5
    s = FrugalSampler(Dataset.from_dict({"pass_rate": rates}), mini_repeat_count=1, batch_size=1, seed=0, alpha=1.0)
    counts = torch.zeros(6)
    for _ in range(700):  # 6 // 1 = 6 chunks an epoch
        for i in s:
            counts[i] += 1
    freq = counts / counts.sum()
    assert freq[2] == 0 and freq[5] == 0  # always-solved problems are never drawn
    # P(p = 0.75) = 1.75 / 5.5 = 0.318, P(p = 0) = 1 / 5.5 = 0.182
    assert freq[1].item() == pytest.approx(0.318, abs=0.03) and freq[0].item() == pytest.approx(0.182, abs=0.03)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_frugal_state_resumes_exactly(alpha):
    rates = [0.0, 0.75, 1.0, 0.0, 0.75, 1.0]
    make = lambda: FrugalSampler(Dataset.from_dict({"pass_rate": rates}), 2, batch_size=2, seed=5, alpha=alpha)  # noqa: E731
    a, b = make(), make()
    first = list(a)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    next_b = list(b)
    assert next_b and list(a) == next_b  # the next epoch is identical
    assert first == list(make())  # seeded: the same seed gives the same sequence
    with pytest.raises(ValueError, match="pass_rate"):
        FrugalSampler(Dataset.from_dict({"idx": [0, 1]}), mini_repeat_count=1)
    with pytest.raises(ValueError, match="pass_rate < 1"):
        FrugalSampler(Dataset.from_dict({"pass_rate": [1.0, 1.0, 0.5]}), mini_repeat_count=1, batch_size=2)


# ------------------------------------------------------------------------------------------------ in the trainer
def _trainer(tiny_model_dir, out, max_steps, sampler="lspo"):
    args = tiny_config(
        out,
        per_device_train_batch_size=8,
        num_generations=2,  # 4 prompts per generation batch; 12 prompts -> 3 steps an epoch
        max_steps=max_steps,
        save_strategy="steps",
        save_steps=4,
        prompt_sampler=sampler,
        sampler_kwargs={"l_max": 40} if sampler == "lspo" else None,
    )
    return RecordingTrainer(
        model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(12)
    )


def test_trainer_resume_yields_the_uninterrupted_index_sequence(tiny_model_dir, tmp_path):
    full = _trainer(tiny_model_dir, tmp_path / "full", 8)
    assert full._get_train_sampler() is full.prompt_sampler
    full.train()
    seq = [r["metadata"]["idx"] for r in full.records]
    assert all(s[0::2] == s[1::2] for s in seq)  # each prompt's G = 2 rows are consecutive
    ckpt = os.path.join(tmp_path, "full", "checkpoint-4")
    with open(os.path.join(ckpt, "trl_efficient_state.json")) as f:
        saved = json.load(f)["prompt_sampler"]
    assert saved["epoch"] == 1 and len(saved["epoch_chunks"]) >= 1 and saved["lengths"]
    resumed = _trainer(tiny_model_dir, tmp_path / "resumed", 8)
    resumed.train(resume_from_checkpoint=ckpt)
    assert [r["metadata"]["idx"] for r in resumed.records] == seq[4:]
    assert resumed.prompt_sampler.state_dict() == full.prompt_sampler.state_dict()
    # without the sampler: TRL's sequence; LSPO changed it once lengths were known
    trl = _trainer(tiny_model_dir, tmp_path / "trl", 8, sampler=None)
    assert trl.prompt_sampler is None and isinstance(trl._get_train_sampler(), RepeatSampler)
    trl.train()
    trl_seq = [r["metadata"]["idx"] for r in trl.records]
    assert seq[:2] == trl_seq[:2] and seq != trl_seq
