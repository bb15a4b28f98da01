"""
CPU testbed for efficient reasoning: a synthetic world where over-thinking is measurable to the token.

- `world`: tasks (digit chains, 1-8 operations, one reasoning step each), teacher traces with redundant sentences,
  exact sentence classification;
- `base`: the over-thinking base model (tiny Qwen2 trained from scratch on CPU, cached; `"testbed:base"`);
- `data`: datasets in the library's format (`dataset_name: testbed`);
- `analysis`: necessary / redundant / frame tokens of every completion and the floor (shortest correct trace);
- `runner`: train recipes from the base with the same budget and compare them (`trl-efficient testbed compare`);
- `cli`: `trl-efficient testbed {base,eval,compare,quickstart}`.

Hooks for `trl-efficient train` (see `docs/testbed.md`): `resolve_model_name` understands `"testbed:<size>"`
(and defers every other name to `trl_efficient.tiny.resolve_model_name`); `load_datasets` builds the testbed
datasets when `dataset_name == "testbed"` (and defers to `trl_efficient.data.load_datasets` otherwise).
"""

from __future__ import annotations

__all__ = ["TESTBED_DATASET_NAME", "is_testbed_model", "load_datasets", "resolve_model_name"]

TESTBED_DATASET_NAME = "testbed"


def is_testbed_model(name: str) -> bool:
    """`True` for `"testbed:<size>"` names.

    >>> is_testbed_model("testbed:base"), is_testbed_model("tiny:qwen2")
    (True, False)
    """
    return isinstance(name, str) and name.startswith("testbed:")


def resolve_model_name(name: str, cache_dir: str | None = None) -> str:
    """A local directory for `"testbed:<size>"` (trained once, cached) and `"tiny:..."` names; other names pass
    through unchanged (drop-in replacement for `trl_efficient.tiny.resolve_model_name`)."""
    if is_testbed_model(name):
        from .base import resolve_base_model

        return resolve_base_model(name, cache_dir)
    from ..tiny import resolve_model_name as resolve_tiny

    return resolve_tiny(name, cache_dir)


def load_datasets(data_args, seed: int = 0):
    """Train and eval datasets for `trl-efficient train`: testbed tasks when `data_args.dataset_name` is
    `"testbed"` (`dataset_limit` tasks, default 1024; eval `eval_limit`, default 128), else
    `trl_efficient.data.load_datasets`. Testbed prompts have their own instruction; `instruction`,
    `system_prompt` and the sources do not apply to them."""
    from .data import load_testbed_dataset

    if getattr(data_args, "dataset_name", None) != TESTBED_DATASET_NAME:
        from ..data import load_datasets as load_math

        return load_math(data_args, seed=seed)
    train = load_testbed_dataset("train", data_args.dataset_limit or 1024, seed)
    if getattr(data_args, "eval_dataset_name", None) is None:
        return train, None
    if data_args.eval_dataset_name != TESTBED_DATASET_NAME:
        raise ValueError("dataset_name 'testbed' can only be evaluated on eval_dataset_name 'testbed'.")
    return train, load_testbed_dataset("test", data_args.eval_limit or 128, seed)
