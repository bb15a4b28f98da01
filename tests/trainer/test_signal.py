"""What a user meets on a real model (issue 47): steps that train on nothing are counted, logged and warned about for
every recipe; no metric is logged as `None`; refusals come before the model loads; a resumed tied-embedding model is
not reported as missing its head."""

import logging

import pytest
import torch
from helpers import RecordingTrainer, make_dataset, tiny_config

from trl_efficient.cli import main
from trl_efficient.rewards import correctness_reward
from trl_efficient.trainer import EfficientGRPOTrainer
from trl_efficient.trainer.trl_internals import metric_buffer


class AllWrongTrainer(RecordingTrainer):
    """Scripted completions whose answer is never the gold one: every group is all-wrong."""

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        completions, _ = super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations)
        eos = self.processing_class.eos_token_id
        wrong = self.processing_class("<think> so </think> The final answer is \\boxed{1000}", add_special_tokens=False)
        return [wrong["input_ids"] + [eos] for _ in completions], None


def _logged(trainer, key):
    return [entry[key] for entry in trainer.state.log_history if key in entry]


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "on nothing" in r.getMessage()]


def test_an_all_wrong_run_logs_zero_signal_and_warns_once_then_louder(tiny_model_dir, tmp_path, caplog):
    # no completion filter, TRL's own advantages (any recipe): all-wrong groups have zero advantages
    trainer = AllWrongTrainer(model=tiny_model_dir, reward_funcs=[correctness_reward], train_dataset=make_dataset(16),
                              args=tiny_config(tmp_path, max_steps=3))  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="trl_efficient"):
        trainer.train()
    assert _logged(trainer, "trl_efficient/signal_rows") == [0.0, 0.0, 0.0]
    assert _logged(trainer, "trl_efficient/signal_fraction") == [0.0, 0.0, 0.0]
    first, louder = _warnings(caplog)  # one line at the first empty step, a louder one at the third in a row
    assert "step 1 trains on nothing (0 of 4 rows carry a gradient signal)" in first and "\n" not in first
    assert "every group all-wrong" in first
    assert "3 generation batches in a row trained on nothing" in louder and "all-wrong" in louder


def test_a_filter_that_masks_every_row_is_zero_signal_and_no_metric_is_none(tiny_model_dir, tmp_path, caplog):
    # zero_std masks every all-wrong group: TRL's clip_ratio/low_min then has no value, which TRL logs as None
    trainer = AllWrongTrainer(model=tiny_model_dir, reward_funcs=[correctness_reward], train_dataset=make_dataset(16),
                              args=tiny_config(tmp_path, max_steps=1, completion_filter="zero_std",
                                               loss_type="dapo"))  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="trl_efficient"):
        trainer.train()
    assert _logged(trainer, "trl_efficient/signal_rows") == [0.0]
    assert _logged(trainer, "trl_efficient/filter_kept_fraction") == [0.0]
    assert len(_warnings(caplog)) == 1
    for entry in trainer.state.log_history:
        assert all(value is not None for value in entry.values()), entry


def test_a_run_with_signal_counts_its_rows_and_does_not_warn(tiny_model_dir, tmp_path, caplog):
    def length_reward(completion_ids, **kwargs):
        return [float(len(ids)) for ids in completion_ids]

    trainer = RecordingTrainer(model=tiny_model_dir, reward_funcs=[length_reward], train_dataset=make_dataset(16),
                               args=tiny_config(tmp_path, max_steps=1))  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="trl_efficient"):
        trainer.train()
    advantages = torch.tensor(trainer.records[0]["advantages"])
    assert _logged(trainer, "trl_efficient/signal_rows") == [float((advantages != 0).sum())] != [0.0]
    assert not _warnings(caplog)


def test_the_signal_counts_rows_over_every_process(tiny_model_dir, tmp_path, monkeypatch):
    # the group stage runs after the gather: rows are summed over processes (accelerate's gather, faked to 2 ranks)
    import trl_efficient.trainer.trainer as module

    trainer = RecordingTrainer(model=tiny_model_dir, reward_funcs=[correctness_reward], train_dataset=make_dataset(16),
                               args=tiny_config(tmp_path))  # fmt: skip
    monkeypatch.setattr(module, "gather", lambda t: torch.cat([t, torch.tensor([[3.0, 4.0]])]))
    output = {"advantages": torch.tensor([0.0, 1.0, -1.0, 0.5]), "completion_mask": torch.ones(4, 3)}
    output["completion_mask"][2] = 0  # masked: no signal whatever its advantage
    batch = type("B", (), {"mode": "eval"})()
    trainer._monitor_signal(batch, output)
    assert metric_buffer(trainer, "eval")["trl_efficient/signal_rows"] == [5.0]  # 2 here + 3 on the other rank
    assert metric_buffer(trainer, "eval")["trl_efficient/signal_fraction"] == [5.0 / 8.0]


def test_a_resumed_tied_head_is_not_reported_missing(tiny_model_dir, tmp_path, caplog):
    from torch.nn.modules.module import _IncompatibleKeys

    trainer = RecordingTrainer(model=tiny_model_dir, reward_funcs=[correctness_reward], train_dataset=make_dataset(4),
                               args=tiny_config(tmp_path))  # fmt: skip
    assert trainer.model.lm_head.weight is trainer.model.model.embed_tokens.weight  # tied, saved once
    with caplog.at_level(logging.WARNING):
        trainer._issue_warnings_after_load(_IncompatibleKeys(["lm_head.weight"], []))
        assert "missing keys" not in caplog.text
        trainer._issue_warnings_after_load(_IncompatibleKeys(["lm_head.weight", "model.norm.weight"], []))
    assert "missing keys in the checkpoint model loaded: ['model.norm.weight']" in caplog.text  # others still said


# ---------------------------------------------------------------------------------------- refusals, in one line
def test_resets_with_peft_are_refused_before_the_model_loads(tmp_path):
    from peft import LoraConfig

    args = tiny_config(tmp_path, beta=1e-4, ref_reset_steps=1)
    with pytest.raises(ValueError, match=r"^ref_reset_steps=1 \(reference resets.*cannot run with PEFT"):
        EfficientGRPOTrainer(model=str(tmp_path / "no-such-model"), reward_funcs=[correctness_reward], args=args,
                             train_dataset=make_dataset(4), peft_config=LoraConfig())  # fmt: skip


@pytest.mark.parametrize(
    "recipe, extra, expected",
    [
        ("prorl", {"use_peft": "true"}, "ref_reset_steps=200 (reference resets, the prorl/brorl recipes) cannot run"),
        # BroRL's N = 512 at 4 x 2 rows per generation batch: which values to set, not TRL's bare divisibility
        (
            "brorl",
            {"gradient_accumulation_steps": 2},
            "8 rows is not a multiple of 512: set --gradient_accumulation_steps 128 (or a larger "
            "per_device_train_batch_size; steps_per_generation follows gradient_accumulation_steps unless set), or "
            "--num_generations 8.",
        ),
    ],
)
def test_the_command_line_refuses_at_config_time(recipe, extra, expected, tmp_path, capsys, monkeypatch):
    from helpers import tiny_cli_args

    import trl_efficient.api.training as training

    def no_model(*args, **kwargs):
        raise AssertionError("the refusal came after the run started")

    monkeypatch.setattr(training, "run_training", no_model)
    argv = tiny_cli_args(tmp_path, **extra)
    if recipe == "brorl":  # the recipe's own N
        at = argv.index("--num_generations")
        argv = argv[:at] + argv[at + 2 :]
    code = main(["train", "--recipe", recipe, *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("trl-efficient: error: "), err
    assert expected in err[0]
