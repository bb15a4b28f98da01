"""Exact resume across epochs: HF `Trainer` builds a fresh sampler on resume, so TRL's `RepeatSampler` (whose
`torch.Generator` advances one permutation per `__iter__`) replays epoch 0's permutation in the first epoch after a
resume. `prompt_sampler="repeat"` (trainer/prompt_samplers.py) keeps TRL's sequence and resumes it exactly: pass `p`
is the `(p+1)`-th permutation of a generator seeded with `seed`, and the pass index is part of the checkpointed
state."""

import os

import pytest
from helpers import RecordingTrainer, make_dataset, tiny_config

from trl_efficient.rewards import correctness_reward

STEPS_PER_EPOCH = 3  # 12 prompts, 4 prompts (8 rows, G = 2) per generation batch
MAX_STEPS = 8  # ~2.7 epochs


def _trainer(tiny_model_dir, out, sampler):
    args = tiny_config(
        out,
        per_device_train_batch_size=8,
        num_generations=2,
        max_steps=MAX_STEPS,
        save_strategy="steps",
        save_steps=1,
        prompt_sampler=sampler,
        seed=0,
    )
    return RecordingTrainer(
        model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(12)
    )


def _prompts(trainer):
    """The `idx` of the prompts of each step (each prompt's G = 2 rows are consecutive)."""
    return [r["metadata"]["idx"][0::2] for r in trainer.records]


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory):
    """Uninterrupted runs with and without the sampler; both save a checkpoint every step."""
    out = {}
    for sampler in ("repeat", None):
        trainer = _trainer(tiny_model_dir, tmp_path_factory.mktemp(f"full_{sampler}"), sampler)
        trainer.train()
        out[sampler] = (trainer, _prompts(trainer))
    return out


def _resume(tiny_model_dir, full, tmp_path, sampler, step):
    ckpt = os.path.join(full.args.output_dir, f"checkpoint-{step}")
    resumed = _trainer(tiny_model_dir, tmp_path / "resumed", sampler)
    resumed.train(resume_from_checkpoint=ckpt)
    return resumed, _prompts(resumed)


@pytest.mark.parametrize(
    "step",
    [STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH + 1],  # at the end of epoch 0; one step into epoch 2
)
def test_repeat_sampler_resumes_the_uninterrupted_sequence(runs, tiny_model_dir, tmp_path, step):
    full, seq = runs["repeat"]
    assert len(seq) == MAX_STEPS and all(len(s) == 4 for s in seq)
    # the uninterrupted sequence is TRL's: the same prompts in the same order as the run without the sampler
    assert seq == runs[None][1]
    epochs = [sorted(i for s in seq[e : e + STEPS_PER_EPOCH] for i in s) for e in (0, STEPS_PER_EPOCH)]
    assert epochs[0] == epochs[1] == list(range(12))  # every epoch is a permutation of the 12 prompts ...
    assert seq[:STEPS_PER_EPOCH] != seq[STEPS_PER_EPOCH : 2 * STEPS_PER_EPOCH]  # ... a different one each epoch
    resumed, resumed_seq = _resume(tiny_model_dir, full, tmp_path, "repeat", step)
    assert resumed_seq == seq[step:]
    assert resumed.prompt_sampler.state_dict() == full.prompt_sampler.state_dict()


def test_trl_default_sampler_replays_epoch_0_after_a_resume_at_an_epoch_boundary(runs, tiny_model_dir, tmp_path):
    """Why `prompt_sampler="repeat"` exists: resumed at the end of epoch 0, TRL's fresh `RepeatSampler` draws its
    first permutation again, so epoch 1 after the resume repeats epoch 0 instead of the uninterrupted epoch 1."""
    full, seq = runs[None]
    assert full.prompt_sampler is None
    _, resumed_seq = _resume(tiny_model_dir, full, tmp_path, None, STEPS_PER_EPOCH)
    assert resumed_seq[:STEPS_PER_EPOCH] == seq[:STEPS_PER_EPOCH]  # epoch 0's permutation again
    assert resumed_seq[:STEPS_PER_EPOCH] != seq[STEPS_PER_EPOCH : 2 * STEPS_PER_EPOCH]
