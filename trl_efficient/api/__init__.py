"""The library API under `trl-efficient`: `train`, `evaluate`, `merge` and `push` as plain functions, for a user's own
script (under `accelerate launch` or torchrun for `train`, as TRL's trainers run); the command line
(`trl_efficient.cli`) is a thin parser over them. Each takes its command's options as typed keyword arguments, runs
the command's checks (a value is refused exactly as on the command line, by a `UserError` or `ValueError` naming what
to change), and returns what the command prints. Importing this package loads nothing heavy: each function imports
its layer when called.

- `training`: the training pipeline (`train_args`, `parse_train_args`, `run_training`, `train_main`);
- `configs`: where `--config` reads its YAML (shipped recipe names, paths) and the YAML reader;
- `errors`: how a run ends without its summary (`ExtraFailedError`, `InterruptedRunError`).
"""

from __future__ import annotations

import dataclasses
import os

from ..core.errors import UserError

__all__ = ["UserError", "evaluate", "load_plugins", "merge", "push", "register_everything", "resolve_model", "train"]


def register_everything() -> None:
    """Fill the registries that have no provider of their own, and the plugins: `recipes` (every recipe and reward
    builder; light), `testing` and `overthinking` (the `tiny:` and `testbed:` schemes, the testbed benchmark and
    dataset); then every installed plugin (`load_plugins`). The method layer is not imported here: the trainer's
    registries import `trl_efficient.methods` on the first lookup that misses (`core.registry.Registry`). Each is
    imported once; calling this again costs nothing."""
    from .. import overthinking, recipes, testing  # noqa: F401

    load_plugins()


PLUGIN_GROUP = "trl_efficient.plugins"


def load_plugins() -> list[str]:
    """Import every module installed under the entry-point group `trl_efficient.plugins` and return their names. A
    package extends the library this way without the library knowing it: the comparison instrument
    (`trl_efficient_testbed`, `pip install -e ./testbed`) registers its pinned base models there."""
    from importlib import metadata

    names = []
    for entry in metadata.entry_points(group=PLUGIN_GROUP):
        entry.load()
        names.append(entry.name)
    return names


def resolve_model(name: str) -> str:
    """`core.models.resolve_model_name` with every scheme registered first (`register_everything`): a `tiny:` or
    `testbed:` name resolves from any script, not only after `trl_efficient.testing` or `trl_efficient.overthinking` was
    imported (the package root imports neither)."""
    from ..core.models import resolve_model_name

    register_everything()
    return resolve_model_name(name)


def train(config: str | os.PathLike | dict | None = None, /, **overrides) -> dict:
    """Train as `trl-efficient train` does, from Python, and return the run's summary (`recipe`, `model`, the
    `before`/`after` evaluations).

    `config` is what `--config` takes (a YAML path, or a shipped recipe YAML's name such as `"kimi"`), or a dict of
    the same keys; `None` runs the quickstart when no override is given, as the command does. Each keyword is a field,
    as its flag sets it (`max_steps=2`, `reward_kwargs={...}`), typed as you pass it: run preset < recipe < `config` <
    `overrides` (`training.train_args`; no command line is made). Like the command, a successful run ends the
    distributed process group (`training.end_process_group`), so call it once per launched process.
    """
    from .configs import packaged_config
    from .training import run, train_args

    if config is None and not overrides:
        config = packaged_config("quickstart")
    return run(*train_args(config, overrides, function="train"))


def _options(cls, function: str, values: dict):
    """`cls(**values)` (a command's options dataclass, which its parser fills too), an unknown keyword a `UserError`
    listing the known ones."""
    known = sorted(f.name for f in dataclasses.fields(cls))
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise UserError(f"{function}(): unknown keyword {unknown[0]!r}; choose from {', '.join(known)}")
    return cls(**values)


def evaluate(model: str | os.PathLike | list, /, **options) -> dict:
    """Evaluate accuracy and tokens as `trl-efficient eval --model MODEL ...` does (`eval.cli.run_eval`): `model` is
    one model (a local path, Hub id, `tiny:<arch>` or `testbed:base`) or a list of them; the keywords are the
    command's options by name (`eval.cli.EvalOptions`: `benchmarks=["math500"]`, `modes=["plain", "l1:512"]`, `n=4`,
    `max_new_tokens=512`, `output_dir=...`, `overwrite=True`). Writes what the command writes under `output_dir` and
    returns `{"results": [...], "failed": {benchmark: message}, "files": {...}}`."""
    from ..eval.cli import EvalOptions, run_eval

    register_everything()  # `tiny:` and `testbed:` model names, the testbed benchmark
    return run_eval(_options(EvalOptions, "evaluate", {"model": model, **options}))


def merge(method: str = "uniform", /, **options) -> dict:
    """Merge models as `trl-efficient merge --method METHOD ...` does (`hub.merge.run_merge`): `uniform`,
    `layerwise`, `update-selective` (`base=`, `trained=`) or `lora` (`adapter=`, `base=` optional), into `output=`
    (new or empty; nothing is written unless all of it is). `alpha`, `keep` are numbers, `ratios` three weights and
    `split_layers` two layer indices (`hub.merge.MergeOptions`). Returns the merge card's parameters."""
    from ..hub.merge import MergeOptions, run_merge

    register_everything()  # `tiny:` model names
    return run_merge(_options(MergeOptions, "merge", {"method": method, **options}))


def push(output_dir: str | os.PathLike, repo_id: str, /, **options) -> str:
    """Upload a trained (or merged) output directory as `trl-efficient push OUTPUT_DIR --repo-id REPO_ID` does
    (`hub.push.push`: the card rendered again with the evaluation results, model and card in one commit); options
    `eval_path`, `license`, `private`, `revision`, `commit_message`, `token`. Returns the commit's URL."""
    from ..hub.push import push as push_to_hub

    return push_to_hub(os.fspath(output_dir), repo_id, **options)
