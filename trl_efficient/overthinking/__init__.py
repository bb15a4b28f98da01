"""
The synthetic over-thinking world the quickstart trains on: a CPU world where over-thinking is measurable to the token.

- `world`: tasks (digit chains, 1-8 operations, one reasoning step each), teacher traces with redundant sentences,
  exact sentence classification;
- `base`: the over-thinking base model (tiny Qwen2 trained from scratch on CPU, cached; `"testbed:base"`);
- `data`: datasets in the library's format (`dataset_name: testbed`);
- `analysis`: necessary / redundant / frame tokens of every completion and the floor (shortest correct trace).

It stays in the library because the quickstart (`trl-efficient train` with no arguments) trains on it: a model scheme
beside `tiny:`. The comparison instrument that measures recipes in this world (protocol, checks, verdicts, sweeps) is
its own package, `trl_efficient_testbed` (`pip install -e ./testbed`), which imports only the library's public names.

What this module plugs in when it is imported (`trl_efficient.api.register_everything` does; the package root does
not): the `testbed:<size>` model-name scheme of
`trl_efficient.core.models.resolve_model_name`, the `testbed` evaluation benchmark of
`trl_efficient.data.benchmarks` and the `testbed` training dataset of `trl_efficient.data.loaders.DATASET_LOADERS`
(`load_datasets` here; `trl-efficient train --dataset_name testbed`, see `docs/testbed.md`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from ..core.models import MODEL_SCHEMES
from ..core.registry import Registry
from ..data.benchmarks import Benchmark, register_benchmark
from ..data.loaders import DATASET_LOADERS

__all__ = ["PINNED_WEIGHTS", "TESTBED_DATASET_NAME", "is_testbed_model", "load_datasets", "torch_threads"]

TESTBED_DATASET_NAME = "testbed"

# size -> directory of weights trained elsewhere and shipped with a package (a plugin registers them: the comparison
# instrument, `trl_efficient_testbed`, ships `testbed:v2` and `testbed:v3`); `base.pinned_model_dir` uses them when
# they match the size's config
PINNED_WEIGHTS: Registry[str] = Registry("pinned testbed weights")


def is_testbed_model(name: str) -> bool:
    """`True` for `"testbed:<size>"` names.

    >>> is_testbed_model("testbed:base"), is_testbed_model("tiny:qwen2")
    (True, False)
    """
    return isinstance(name, str) and name.startswith("testbed:")


def load_datasets(data_args, seed: int = 0) -> tuple:
    """Train and eval datasets of `dataset_name: testbed` (registered in `data.loaders.DATASET_LOADERS`, so
    `trl_efficient.data.loaders.load_datasets` hands that name here): `dataset_limit` training tasks (default 1024) and
    `eval_limit` evaluation tasks (default 128), or no evaluation set without `eval_dataset_name`. Testbed prompts
    have their own instruction; `instruction`, `system_prompt` and the sources do not apply to them."""
    from .data import load_testbed_dataset

    train = load_testbed_dataset("train", data_args.dataset_limit or 1024, seed)
    if getattr(data_args, "eval_dataset_name", None) is None:
        return train, None
    if data_args.eval_dataset_name != TESTBED_DATASET_NAME:
        raise ValueError("dataset_name 'testbed' can only be evaluated on eval_dataset_name 'testbed'.")
    return train, load_testbed_dataset("test", data_args.eval_limit or 128, seed)


@contextlib.contextmanager
def torch_threads(num_threads: int | None = None) -> Iterator[None]:
    """Run with `num_threads` torch intra-op threads (default `$TRL_EFFICIENT_TESTBED_THREADS`, else 1), then restore.

    The testbed's matrices are tiny: a second thread barely helps on an idle machine, and on a busy one OpenMP
    threads waiting for each other make a GRPO step several times slower (measured: 7 s vs 0.5 s per step).
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(num_threads or int(os.environ.get("TRL_EFFICIENT_TESTBED_THREADS", "0") or 0) or 1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------------------------------------ registrations
def _resolve_testbed_model(name: str, cache_dir: str | None = None) -> str:
    from .base import resolve_base_model

    return resolve_base_model(name, cache_dir)


def _testbed_loader(split, limit, seed, instruction, system_prompt):
    from .data import load_testbed_dataset

    return load_testbed_dataset("test" if split == "test" else "train", n=limit or 256, seed=seed)


def _testbed_analyzer(row, completion_ids, text, tokenizer):
    from .analysis import analyze_completion
    from .data import task_from_row

    stats = analyze_completion(task_from_row(row), completion_ids, tokenizer, text=text)
    return {k: stats[k] for k in ("redundant_tokens", "necessary_tokens", "floor_tokens", "redundant_share")}


MODEL_SCHEMES.register("testbed", _resolve_testbed_model)
DATASET_LOADERS.register(TESTBED_DATASET_NAME, load_datasets)
register_benchmark(
    Benchmark(
        "testbed",
        "The CPU testbed's synthetic digit chains (levels = operations)",
        loader=_testbed_loader,
        sample_analyzer=_testbed_analyzer,
    )  # fmt: skip
)
