"""Evaluation that reports accuracy *and* tokens: inference-time modes, generation backends, metrics (`evaluate`),
the Pareto plot (`plots`) and `trl-efficient eval` (`cli`)."""

from . import evaluate
from .evaluate import *  # noqa: F403  (the public names of `evaluate`, listed once, in its `__all__`)

__all__ = list(evaluate.__all__)
