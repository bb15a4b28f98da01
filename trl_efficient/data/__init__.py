"""Datasets: GSM8K / MATH / MATH-500 loaders for training (`loaders`), the evaluation benchmarks with their
answer types (`benchmarks`), and `trl-efficient data` (`cli`)."""

from .loaders import (
    DATASET_NAMES,
    DEFAULT_INSTRUCTION,
    DataArguments,
    extract_boxed,
    extract_gsm8k_answer,
    format_prompt,
    load_datasets,
    load_math_dataset,
    parse_level,
)

__all__ = [
    "DEFAULT_INSTRUCTION",
    "DATASET_NAMES",
    "DataArguments",
    "extract_boxed",
    "extract_gsm8k_answer",
    "format_prompt",
    "load_datasets",
    "load_math_dataset",
    "parse_level",
]
