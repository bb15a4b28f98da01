"""Datasets: GSM8K / MATH / MATH-500 loaders for training (`loaders`), the evaluation benchmarks with their
answer types (`benchmarks`), and `trl-efficient data` (`cli`)."""

from . import loaders
from .loaders import *  # noqa: F403  (the public names of `loaders`, listed once, in its `__all__`)

__all__ = list(loaders.__all__)
