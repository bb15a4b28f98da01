"""Quiet output (issue 47): a run prints no warning its user cannot act on: no FutureWarning of transformers'
deprecated `gradient_checkpointing` names (TRL's own default, TRL's own reads), no `None` metric, no matplotlib
warning from the evaluation's plot."""

import warnings

from helpers import tiny_cli_args

from trl_efficient.api.training import train_main
from trl_efficient.eval.plots import pareto_plot


def test_a_short_run_raises_no_future_warning(tmp_path, monkeypatch):
    argv = tiny_cli_args(tmp_path / "run", max_steps=1)  # transformers 5's name: activation_checkpointing
    assert "--gradient_checkpointing" not in argv and "--activation_checkpointing" in argv
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_main(["--recipe", "prorl", "--ref_reset_steps", "1", *argv])
    future = [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if issubclass(w.category, FutureWarning)]
    assert not future, future


def test_the_pareto_plot_warns_nothing(tmp_path):
    points = [{"model": "", "mode": "plain", "accuracy": 0.5, "mean_tokens": 3.0}]  # one point: no Pareto-front line
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "No artists with labels found to put in legend" among them
        assert pareto_plot(points, str(tmp_path / "p.png"), reference_x={"floor": 1.0}) == str(tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0
