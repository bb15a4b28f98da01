"""Generation in chunks of rows (`generation_chunk_size`, trainer/chunking.py; BroRL, arXiv 2510.01180).

One chunk and several give the same completions, the same advantages (group statistics over the whole group, after
TRL's gather), the same loss and the same gradients; with the group also split over several micro-batches (TRL's own
`per_device_train_batch_size` / `gradient_accumulation_steps`) the gradients of the optimizer step are the one-pass
gradients. A group of 128 trains a step on real generation; the config errors are one line each.
"""

import pytest
import torch
from helpers import RecordingMixin, RowScriptedMixin, make_dataset, tiny_config
from transformers import TrainerCallback
from trl import GRPOTrainer

from trl_efficient.rewards import correctness_reward
from trl_efficient.trainer import EfficientGRPOConfig


def length_reward(completion_ids, **kwargs):
    """A signal in every group, whatever the model answers: fewer tokens score higher."""
    return [-len(ids) / 48 for ids in completion_ids]


class CountingMixin(GRPOTrainer):
    """Real generation (TRL's), recording the rows of each call."""

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        self.calls = getattr(self, "calls", []) + [len(prompt_ids)]
        return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)


class ScriptedTrainer(RecordingMixin, RowScriptedMixin):
    pass


class RealTrainer(RecordingMixin, CountingMixin):
    pass


class Grads(TrainerCallback):
    """The accumulated gradients right before each optimizer step."""

    def __init__(self):
        self.steps = []

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        self.steps.append({n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None})


def run(model_dir, tokenizer, out, trainer_cls=ScriptedTrainer, **overrides):
    grads = Grads()
    args = tiny_config(out, **{"max_steps": 1, "learning_rate": 1e-2, "loss_type": "dapo", **overrides})
    trainer = trainer_cls(
        model=model_dir, reward_funcs=[correctness_reward, length_reward], args=args,
        train_dataset=make_dataset(), processing_class=tokenizer, callbacks=[grads],
    )  # fmt: skip
    trainer.train()
    loss = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    return trainer, grads.steps, loss


def assert_same(a, b, exact: bool) -> None:
    (ta, ga, la), (tb, gb, lb) = a, b
    assert ta.records[0]["prompts_decoded"] == tb.records[0]["prompts_decoded"]
    assert ta.records[0]["completion_mask_sums"] == tb.records[0]["completion_mask_sums"]  # same completions
    assert ta.records[0]["rewards"] == tb.records[0]["rewards"]
    assert ta.records[0]["advantages"] == tb.records[0]["advantages"]
    assert any(x != 0 for x in ta.records[0]["advantages"])  # a signal, so the gradients are not trivially zero
    assert len(ga) == len(gb) == 1 and ga[0].keys() == gb[0].keys() and ga[0]
    for name, g in ga[0].items():
        if exact:
            assert torch.equal(g, gb[0][name]), name
        else:  # the micro-batches sum the same terms in another order
            torch.testing.assert_close(g, gb[0][name], rtol=1e-5, atol=1e-7, msg=name)
    assert la == pytest.approx(lb, rel=1e-5)


@pytest.fixture(scope="module")
def one_call(tiny_model_dir, tiny_tokenizer, tmp_path_factory):
    """The reference: a group of 16 generated in one call and trained in one micro-batch."""
    return run(tiny_model_dir, tiny_tokenizer, tmp_path_factory.mktemp("one"), per_device_train_batch_size=16,
               num_generations=16)  # fmt: skip


def test_chunks_give_the_one_call_numbers(one_call, tiny_model_dir, tiny_tokenizer, tmp_path):
    assert one_call[0].calls == [16]
    chunked = run(tiny_model_dir, tiny_tokenizer, tmp_path, per_device_train_batch_size=16, num_generations=16,
                  generation_chunk_size=4)  # fmt: skip
    assert chunked[0].calls == [4, 4, 4, 4]  # TRL's generation, called on 4 chunks of 4 rows
    assert_same(one_call, chunked, exact=True)  # same rows in the same micro-batch: bit for bit


def test_chunks_and_micro_batches_give_the_one_pass_gradients(one_call, tiny_model_dir, tiny_tokenizer, tmp_path):
    # The group of 16 in 2 chunks of 8 rows, trained in 4 micro-batches of 4 (TRL's steps_per_generation =
    # gradient_accumulation_steps = 4): one optimizer step whose gradient is the one-pass gradient.
    split = run(tiny_model_dir, tiny_tokenizer, tmp_path, per_device_train_batch_size=4, num_generations=16,
                gradient_accumulation_steps=4, generation_chunk_size=8)  # fmt: skip
    assert split[0].args.steps_per_generation == 4 and split[0].calls == [8, 8]
    assert_same(one_call, split, exact=False)


def test_a_group_of_128_trains_a_step_with_whole_group_statistics(tiny_model_dir, tiny_tokenizer, tmp_path):
    # Real sampled generation: 128 rollouts of one prompt, generated 32 at a time, trained in 4 micro-batches of 32.
    trainer, grads, loss = run(
        tiny_model_dir, tiny_tokenizer, tmp_path, trainer_cls=RealTrainer, per_device_train_batch_size=32,
        num_generations=128, gradient_accumulation_steps=4, generation_chunk_size=32, max_completion_length=6,
        loss_type="grpo",
    )  # fmt: skip
    assert trainer.calls == [32, 32, 32, 32] and trainer.state.global_step == 1 and len(grads) == 1
    record = trainer.records[0]
    assert len(record["advantages"]) == 128 and len(set(record["prompts_decoded"])) == 1  # one group of 128
    # TRL's advantage over the whole group: (r - mean_128) / (std_128 + 1e-4), std unbiased (torch.std)
    rewards = torch.tensor(record["rewards"]).nansum(dim=1)
    assert rewards.std() > 0
    expected = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    torch.testing.assert_close(torch.tensor(record["advantages"]), expected, rtol=1e-5, atol=1e-6)
    assert all(g.abs().sum() > 0 for g in grads[0].values()) and loss


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"generation_chunk_size": 3}, r"generation_chunk_size=3 must divide .* = 8 x 1 = 8 \(or be at least 8"),
        ({"generation_chunk_size": 0}, r"generation_chunk_size must be a number of rows >= 1"),
        ({"generation_chunk_size": 4, "use_vllm": True}, r"generation_chunk_size=4 chunks transformers .*use_vllm"),
        ({"generation_chunk_size": 3, "gradient_accumulation_steps": 3}, None),  # 8 x 3 = 24 rows: 3 divides
        ({"generation_chunk_size": 32}, None),  # at least the 8 rows: one call
    ],
)
def test_config_errors_are_one_line(overrides, match, tmp_path):
    kwargs = dict(output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=8, use_cpu=True,
                  report_to="none", **overrides)  # fmt: skip
    if match is None:
        assert EfficientGRPOConfig(**kwargs).generation_chunk_size == overrides["generation_chunk_size"]
        return
    with pytest.raises(ValueError, match=match) as err:
        EfficientGRPOConfig(**kwargs)
    assert "\n" not in str(err.value)


def test_brorl_card_cites_brorl_and_prorl(tiny_model_dir, tiny_tokenizer, tmp_path):
    from trl_efficient.hub.card import card_data_from_trainer
    from trl_efficient.hub.papers import bibtex
    from trl_efficient.recipes import get_recipe

    args = tiny_config(tmp_path, beta=0.1, ref_reset_steps=2, generation_chunk_size=2)
    trainer = ScriptedTrainer(model=tiny_model_dir, reward_funcs=[correctness_reward], args=args,
                              train_dataset=make_dataset(8), processing_class=tiny_tokenizer)  # fmt: skip
    trainer.update_card_info(recipe=get_recipe("brorl"))
    assert card_data_from_trainer(trainer).papers == ["2510.01180", "2505.24864"]  # BroRL, then ProRL's algorithm
    assert "Broadened Exploration" in bibtex("2510.01180") and "Hu, Jian" in bibtex("2510.01180")
