"""Sampling defaults of evaluation (`trl-efficient eval --temperature/--top-p`, `evaluate_model`): temperature 0.6 and
top-p 0.95 (docs/evaluation.md). A module of its own, without torch, so that the command's parser (`trl-efficient eval
--help`) loads none of the evaluation."""

DEFAULT_TEMPERATURE = 0.6
DEFAULT_TOP_P = 0.95
