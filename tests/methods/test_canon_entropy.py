"""CANON's entropy variant (methods.md §26): conditioning on mean token entropy, errors, and the trainer."""

from types import SimpleNamespace

import pytest
import torch
from helpers import RecordingMixin, ScriptedGenerationMixin, group_batch, make_dataset, tiny_config

from trl_efficient.methods.canon import CANONAdvantage, canon_advantages
from trl_efficient.methods.entropy import ENTROPY_COLUMN, TokenEntropyTrainer
from trl_efficient.rewards import correctness_reward
from trl_efficient.trainer import EfficientGRPOTrainer

ARGS = SimpleNamespace(max_completion_length=8)


def test_entropy_conditioning_on_a_constructed_batch():
    b = group_batch([1, 0, 0, 0], [10, 20, 30, 40], 4)
    b.extras[ENTROPY_COLUMN] = torch.tensor([0.1, 0.9, 0.2, 0.8])
    # by entropy: lower = rows 0 (.1), 2 (.2), rewards 1, 0 -> mean .5 ; upper = rows 3 (.8), 1 (.9), mean 0
    # upper: r - mean_lo -> row 1: -.5, row 3: -.5 ; lower: r - mean_up -> row 0: 1, row 2: 0
    assert CANONAdvantage(ARGS, metric="entropy")(b).tolist() == pytest.approx([1.0, -0.5, 0.0, -0.5])
    # by length (the default): lower rows 0, 1 mean .5, upper rows 2, 3 mean 0 -> [1 - 0, 0 - 0, 0 - .5, 0 - .5]
    assert CANONAdvantage(ARGS)(b).tolist() == pytest.approx([1.0, 0.0, -0.5, -0.5])


def test_entropy_ties_break_by_index_and_flat_groups():
    b = group_batch([1, 0, 1, 1, 1, 1, 1, 1], [1] * 8, 4)
    b.extras[ENTROPY_COLUMN] = torch.tensor([0.5, 0.5, 0.5, 0.5, 0.3, 0.1, 0.2, 0.4])
    # group 0, all tied: lower rows 0, 1 (r 1, 0) mean .5 ; upper rows 2, 3 mean 1
    # upper: r - .5 -> .5, .5 ; lower: r - 1 -> 0, -1 ; group 1 all equal rewards -> 0
    assert CANONAdvantage(ARGS, metric="entropy")(b).tolist() == pytest.approx([0.0, -1.0, 0.5, 0.5] + [0.0] * 4)


def test_errors(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="metric"):
        CANONAdvantage(ARGS, metric="perplexity")
    with pytest.raises(RuntimeError, match="mean_token_entropy"):
        CANONAdvantage(ARGS, metric="entropy")(group_batch([1, 0], [1, 2], 2))
    args = tiny_config(tmp_path, advantage_estimator="canon", advantage_kwargs={"metric": "entropy"})
    with pytest.raises(ValueError, match="TokenEntropyTrainer"):
        EfficientGRPOTrainer(
            model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(8)
        )


class Recording(RecordingMixin, TokenEntropyTrainer, ScriptedGenerationMixin):
    def _record_batch(self, batch, trainer):
        super()._record_batch(batch, trainer)
        self.records[-1]["entropy"] = batch.extras[ENTROPY_COLUMN].tolist()


def test_trainer_advantages(tiny_model_dir, tmp_path):
    args = tiny_config(
        tmp_path, per_device_train_batch_size=8, advantage_estimator="canon", advantage_kwargs={"metric": "entropy"}
    )
    data = make_dataset(16)
    trainer = Recording(model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=data)
    trainer.train()
    assert trainer.records
    for rec in trainer.records:
        assert len(rec["entropy"]) == len(rec["lengths"]) and all(e >= 0 for e in rec["entropy"])
        total = torch.tensor([r[0] for r in rec["rewards"]])
        expected = canon_advantages(total, torch.tensor(rec["entropy"]), 4)
        assert rec["advantages"] == pytest.approx(expected.tolist(), abs=1e-6)
