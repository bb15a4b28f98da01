"""A rerun of `trl-efficient train` into a run's `output_dir` resumes it or is refused, never silently restarted over
it (trl_efficient/trainer/runs.py); Ctrl-C ends in one line naming the checkpoint to resume from."""

import json
import logging
import os
import re

import pytest
from helpers import tiny_cli_args

from trl_efficient.cli import main
from trl_efficient.trainer import EfficientGRPOTrainer
from trl_efficient.trainer.runs import BEFORE_EVAL_FILE, RUN_FILE, decide_resume

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _argv(run, **extra):
    # a checkpoint after every step (the Trainer also always saves the last step's); a 2-problem evaluation set
    args = {"save_strategy": "steps", "save_steps": 1, "eval_before_after": True, "eval_dataset_name": "gsm8k",
            "eval_limit": 2, **extra}  # fmt: skip
    return ["train", "--config", os.path.join(ROOT, "configs", "grpo.yaml"), *tiny_cli_args(run, **args)]


def _error(capsys) -> str:
    err = capsys.readouterr().err
    return re.split(r"[\r\n]", err.strip())[-1]


def _step(checkpoint) -> int:
    with open(os.path.join(checkpoint, "trainer_state.json")) as f:
        return json.load(f)["global_step"]


def test_interrupted_run_names_its_checkpoint_and_the_same_command_resumes_it(tmp_path, capsys, monkeypatch, caplog):
    run = tmp_path / "run"
    real_step = EfficientGRPOTrainer.training_step

    def ctrl_c_at_step_2(self, *args, **kwargs):
        if self.state.global_step == 1:  # checkpoint-1 is on disk
            raise KeyboardInterrupt
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(EfficientGRPOTrainer, "training_step", ctrl_c_at_step_2)
    evaluations = []  # the before/after evaluation, recorded (its generation is not what this test checks)

    class Result:
        def __init__(self, tag):
            self.tag = tag

        def to_dict(self):
            return {"accuracy": 0.5, "mean_tokens": 10.0, "truncated_fraction": 0.0, "num_samples": 2, "tag": self.tag}

    def fake_evaluate(*args, description, **kwargs):
        evaluations.append(description)
        return Result(description)

    monkeypatch.setattr("trl_efficient.eval.evaluate.evaluate_model", fake_evaluate)
    assert main(_argv(run)) == 130
    assert evaluations == ["eval (before training)"]
    line = _error(capsys)
    assert re.fullmatch(
        rf"trl-efficient: interrupted; {re.escape(str(run / 'checkpoint-1'))} \(step 1\) is kept: "
        r"`trl-efficient train --config \S+grpo.yaml .*--save_steps 1 --eval_dataset_name gsm8k --eval_limit 2` "
        r"resumes from it",
        line,
    ), line
    assert (run / "checkpoint-1").is_dir() and not (run / "checkpoint-2").exists()
    assert not (run / "trl_efficient_summary.json").exists()

    # the same command again: resumes from checkpoint-1 (one line says so) and finishes at step 2
    monkeypatch.setattr(EfficientGRPOTrainer, "training_step", real_step)
    with caplog.at_level(logging.INFO, logger="trl_efficient"):
        assert main(_argv(run)) == 0
    resumed = [r.getMessage() for r in caplog.records if "resuming" in r.getMessage()]
    assert resumed == [
        f"trl-efficient: resuming from {run / 'checkpoint-1'} (step 1 of 2); pass --output_dir <a new folder> for a "
        "new run"
    ]
    assert _step(run / "checkpoint-2") == 2 and (run / "trl_efficient_summary.json").exists()
    # the resume did not evaluate before training again: the summary holds the first run's evaluation
    assert evaluations == ["eval (before training)", "eval (after training)"]
    summary = json.loads((run / "trl_efficient_summary.json").read_text())
    assert summary["before"]["tag"] == "eval (before training)" and summary["after"]["tag"] == "eval (after training)"

    # a rerun of the finished run is refused, with the command to use, before any model loads
    capsys.readouterr()
    assert main(_argv(run)) == 2
    assert _error(capsys) == (
        f"trl-efficient: error: {run} holds a finished run (checkpoint-2, step 2 of 2; its model and summary are "
        "there): to train it further pass --max_steps <more than 2> (it resumes from checkpoint-2), or --output_dir "
        "<a new folder> for a new run"
    )
    # ... and other settings are refused, naming what differs and the flag that resumes anyway
    assert main(_argv(run, learning_rate=0.5)) == 2
    assert _error(capsys) == (
        f"trl-efficient: error: {run} holds checkpoint-2 of a run with other settings (learning_rate: 1e-06 there, "
        "0.5 now): pass --resume_from_checkpoint true to resume it with this command's settings, or --output_dir <a "
        "new folder> for a new run"
    )
    # raising max_steps resumes from the last checkpoint and trains the one more step
    assert main(_argv(run, max_steps=3)) == 0
    assert _step(run / "checkpoint-3") == 3


def test_resume_from_checkpoint_true_is_the_last_checkpoint(tmp_path):
    settings = {"learning_rate": 1e-6}
    run = tmp_path / "run"
    with pytest.raises(ValueError, match=r"holds no complete checkpoint to resume from; drop the flag"):
        decide_resume(str(run), "true", settings)
    for step in (2, 10):
        (run / f"checkpoint-{step}").mkdir(parents=True)
        (run / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        (run / f"checkpoint-{step}" / "trl_efficient_state.json").write_text("{}")
    (run / "checkpoint-12").mkdir()  # cut off while saving: no trainer_state.json
    (run / RUN_FILE).write_text(json.dumps({"learning_rate": 1.0}))
    for flag in ("true", "True", True):  # the command line's spelling, and a YAML's `true`
        assert decide_resume(str(run), flag, settings) == str(run / "checkpoint-10")  # other settings: asked for
    assert decide_resume(str(run), "false", {"learning_rate": 1.0}) == str(run / "checkpoint-10")  # same settings
    with pytest.raises(ValueError, match="is not a complete checkpoint"):
        decide_resume(str(run), str(run / "checkpoint-12"), settings)


def test_a_trained_model_without_checkpoints_is_not_trained_over(tmp_path, capsys):
    from trl_efficient.api.training import train_main

    run = tmp_path / "run"  # trained through the library's pipeline, refused by the command in one line
    assert train_main(["--config", os.path.join(ROOT, "configs", "grpo.yaml"), *tiny_cli_args(run)])["recipe"] == "grpo"
    weights = (run / "model.safetensors").read_bytes()
    capsys.readouterr()
    assert main(["train", "--config", os.path.join(ROOT, "configs", "grpo.yaml"), *tiny_cli_args(run)]) == 2
    assert _error(capsys) == (
        f"trl-efficient: error: {run} already holds a trained model and no checkpoint to resume from: pass "
        "--output_dir <a new folder> for a new run (or delete that one to train over it)"
    )
    assert (run / "model.safetensors").read_bytes() == weights


def test_a_resume_reads_the_before_evaluation_back(tmp_path):
    from types import SimpleNamespace

    from trl_efficient.api.training import _before_evaluation

    calls = []
    args = SimpleNamespace(output_dir=str(tmp_path), resume_from_checkpoint=None, should_save=True)
    first = _before_evaluation(args, lambda tag: calls.append(tag) or {"accuracy": 0.25})
    assert first == {"accuracy": 0.25} and calls == ["before training"]
    args.resume_from_checkpoint = str(tmp_path / "checkpoint-1")
    assert _before_evaluation(args, lambda tag: pytest.fail("a resume must not evaluate again")) == first
    os.remove(tmp_path / BEFORE_EVAL_FILE)  # a run that never evaluated before training: no table, no evaluation
    assert _before_evaluation(args, lambda tag: pytest.fail("a resume must not evaluate again")) is None


def test_push_to_hub_with_the_hub_unreachable_fails_at_the_end_with_the_model_saved(tmp_path, capsys, monkeypatch,
                                                                                     caplog):  # fmt: skip
    import huggingface_hub

    def unreachable(self, *args, **kwargs):
        raise ConnectionError("cannot reach https://huggingface.co")

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", unreachable)
    run = tmp_path / "run"
    argv = ["train", "--config", os.path.join(ROOT, "configs", "grpo.yaml"),
            *tiny_cli_args(run, push_to_hub=True, hub_model_id="tester/tiny")]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="trl_efficient"):
        assert main(argv) == 1
    assert [r.getMessage() for r in caplog.records if "Hub" in r.getMessage()] == [
        "trl-efficient: the Hugging Face Hub cannot be reached now (ConnectionError: cannot reach "
        f"https://huggingface.co); training goes on and the push is tried at the end, after the model is saved in {run}"
    ]
    assert _error(capsys) == (
        "trl-efficient: error: push to the Hub failed (ConnectionError: cannot reach https://huggingface.co); the "
        f"trained model and its checkpoints are saved in {run}"
    )
    assert (run / "model.safetensors").exists() and (run / "trl_efficient_summary.json").exists()


def test_resume_true_on_a_finished_run_never_trains_past_max_steps_nor_rewrites_it(tmp_path, capsys):
    """Issue 47: `--resume_from_checkpoint true` (or the last checkpoint's path) on a finished run is refused as a
    plain rerun is, before the model is touched; a larger --max_steps trains further."""
    run = tmp_path / "run"
    assert main(_argv(run, eval_before_after=False)) == 0
    model = run / "model.safetensors"
    written = (model.stat().st_mtime_ns, model.read_bytes())
    for resume in ("true", str(run / "checkpoint-2")):
        capsys.readouterr()
        assert main(_argv(run, eval_before_after=False, resume_from_checkpoint=resume)) == 2
        assert _error(capsys) == (
            f"trl-efficient: error: {run} holds a finished run (checkpoint-2, step 2 of 2; its model and summary are "
            "there): to train it further pass --max_steps <more than 2> (it resumes from checkpoint-2), or "
            "--output_dir <a new folder> for a new run"
        )
        assert (model.stat().st_mtime_ns, model.read_bytes()) == written and not (run / "checkpoint-3").exists()
    assert main(_argv(run, eval_before_after=False, resume_from_checkpoint="true", max_steps=3)) == 0
    assert _step(run / "checkpoint-3") == 3
