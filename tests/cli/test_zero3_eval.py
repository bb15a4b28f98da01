"""DeepSpeed ZeRO-3 and the before/after evaluation: refused in one line before any model loads (the eval generates
on the main process from weights that ZeRO-3 shards; it died mid-run with `RuntimeError: 'weight' must be 2-D`)."""

from helpers import tiny_cli_args

from trl_efficient.api.training import parse_train_args
from trl_efficient.cli import main

REFUSAL = (
    "trl-efficient: error: the before/after evaluation (eval_before_after) cannot run under DeepSpeed ZeRO-3, which "
    "shards the weights it generates from: pass --eval_before_after false and evaluate the saved model with "
    "`trl-efficient eval`\n"
)


def test_zero3_with_the_before_after_eval_is_refused_before_training(tmp_path, monkeypatch, capsys):
    from trl_efficient.api import training

    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")  # what `accelerate launch` sets from zero3.yaml
    monkeypatch.setattr(training, "run_training", lambda *a: (_ for _ in ()).throw(AssertionError("trained")))
    argv = ["train", "--config", "smoke", *tiny_cli_args(tmp_path, eval_before_after=True)]
    assert main(argv) == 2
    assert capsys.readouterr().err == REFUSAL
    # the fix the line names parses
    assert parse_train_args([*argv[1:], "--eval_before_after", "false"])[0].eval_before_after is False


def test_zero2_and_zero3_without_an_eval_set_are_not_refused(tmp_path, monkeypatch):
    args = tiny_cli_args(tmp_path, eval_before_after=True)
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2")  # ZeRO-2 keeps whole weights on every process
    assert parse_train_args(["--config", "smoke", *args])[0].eval_before_after is True
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    no_eval_set = tmp_path / "no-eval.yaml"
    no_eval_set.write_text("recipe: grpo\ndataset_name: gsm8k\n")  # nothing to evaluate before/after
    script, data, _ = parse_train_args(["--config", str(no_eval_set), *args])
    assert (script.eval_before_after, data.eval_dataset_name) == (True, None)
