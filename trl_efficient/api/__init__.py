"""The library API under `trl-efficient`: `train`, `evaluate`, `merge` and `push` as plain functions, for a user's own
script (under `accelerate launch` or torchrun for `train`, as TRL's trainers run); the command line is a thin parser
over them (`trl_efficient.cli`). Each takes what its command takes, as keyword arguments named after the flags, runs
the command's own parser and checks (so a value is read and refused exactly as on the command line: a user error
raises `UserError`, a `ValueError`, naming what to change), and returns what the command prints.

Importing this package loads nothing heavy: each function imports its layer when called.

- `training`: the training pipeline (`parse_train_args`, `run_training`, `train_main`);
- `configs`: where `--config` reads its YAML (shipped recipe names, paths) and the YAML reader;
- `errors`: how a run ends without its summary (`ExtraFailedError`, `InterruptedRunError`).
"""

from __future__ import annotations

import json
import os

from ..core.errors import UserError

__all__ = ["UserError", "evaluate", "load_plugins", "merge", "push", "register_everything", "resolve_model", "train"]


def register_everything() -> None:
    """Fill every registry, by explicit imports: the one place the `trl-efficient` command and this API register.
    `methods` (estimators, filters, plans, samplers: a recipe's config names them), `recipes` (every recipe and reward
    builder; light, it imports no method), `testing` (the `tiny:` model scheme) and `overthinking` (the `testbed:`
    scheme and benchmark); then every installed plugin (`load_plugins`). Each is imported once; calling this again
    costs nothing."""
    from .. import methods, overthinking, recipes, testing  # noqa: F401

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


def train_flags(function: str, options: dict) -> list[str]:
    """`options` as `trl-efficient train` flags: `max_steps=2` is `--max_steps 2`, a dict is passed as JSON, a list
    as several values, a bool as true/false (TRL's parser reads them so); None is refused (it is no flag value).

    >>> train_flags("train", {"max_steps": 2, "bf16": False, "reward_kwargs": {"a": 1}, "report_to": ["none"]})
    ['--max_steps', '2', '--bf16', 'false', '--reward_kwargs', '{"a": 1}', '--report_to', 'none']
    """
    argv: list[str] = []
    for key, value in options.items():
        if value is None:
            raise UserError(
                f"{function}(): {key}=None cannot be a command-line value; leave {key} out to keep its default"
            )
        if isinstance(value, (list, tuple)):
            argv += [f"--{key}", *(str(v) for v in value)]
        else:
            text = json.dumps(value) if isinstance(value, dict) else str(value)
            argv += [f"--{key}", text.lower() if isinstance(value, bool) else text]
    return argv


def command_flags(parser, function: str, options: dict) -> list[str]:
    """`options` as the flags of an `argparse` command (`eval`, `merge`): the keyword is the flag's destination
    (`max_new_tokens` for `--max-new-tokens`); a switch (`--overwrite`) is given when True and left out when False; a
    list or tuple is several values; anything else its `str`. An unknown keyword or a None raises `UserError`."""
    actions = {action.dest: action for action in parser._actions if action.option_strings}
    argv: list[str] = []
    for key, value in options.items():
        action = actions.get(key)
        if action is None or action.dest == "help":
            known = ", ".join(sorted(dest for dest in actions if dest != "help"))
            raise UserError(f"{function}(): unknown keyword {key!r}; choose from {known}")
        if value is None:
            raise UserError(
                f"{function}(): {key}=None cannot be a command-line value; leave {key} out to keep its default"
            )
        flag = action.option_strings[-1]
        if action.nargs == 0:  # a switch: store_true / store_false
            if bool(value) == bool(action.const):
                argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [flag, *(str(v) for v in value)]
        else:
            argv += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return argv


def train(config: str | os.PathLike | dict | None = None, /, **overrides) -> dict:
    """Train as `trl-efficient train` does, from Python (a user's own script, under `accelerate launch` or torchrun as
    TRL's trainers run), and return the run's summary (`recipe`, `model`, the `before`/`after` evaluations).

    `config` is what `--config` takes (a YAML path, or the name of a shipped recipe YAML such as `"kimi"`), or a dict
    of the same keys (`{"recipe": "kimi", "run_defaults": "math-1.5b", ...}`); `None` runs the quickstart when no
    override is given, as the command does. Each keyword is a command-line flag (`train_flags`), so the precedence is
    the command's: run preset < recipe < `config` < `overrides`. The same parser and pipeline run
    (`training.parse_train_args`, `training.run_training`): a user error raises `UserError` naming what to change; a
    rerun into an `output_dir` that holds a run resumes it or is refused. Like the command, a successful run ends the
    distributed process group (`training.end_process_group`), so call it once per launched process.
    """
    import tempfile

    from .configs import packaged_config
    from .training import train_main

    argv = train_flags("train", overrides)
    with tempfile.TemporaryDirectory(prefix="trl_efficient_train_") as tmp:
        if isinstance(config, dict):  # the keys of a YAML file, written as one (YAML's types, None included)
            import yaml

            path = os.path.join(tmp, "config.yaml")
            with open(path, "w", encoding="utf-8") as f:
                yaml.safe_dump(config, f)
            argv = ["--config", path, *argv]
        elif config is not None:
            argv = ["--config", os.fspath(config), *argv]
        if not argv:
            argv = ["--config", packaged_config("quickstart")]
        return train_main(argv)


def evaluate(model: str | os.PathLike | list, /, **options) -> dict:
    """Evaluate accuracy and tokens as `trl-efficient eval --model MODEL ...` does (`eval.cli.run_eval`): `model` is
    one model (a local path, Hub id, `tiny:<arch>` or `testbed:base`) or a list of them; each keyword is one of the
    command's flags by its destination (`benchmarks=["math500"]`, `modes=["plain", "l1:512"]`, `n=4`,
    `max_new_tokens=512`, `output_dir=...`, `overwrite=True`; `command_flags`). Writes what the command writes under
    `output_dir` and returns `{"results": [...], "failed": {benchmark: message}, "files": {...}}`."""
    from ..eval.cli import build_parser, run_eval

    register_everything()  # `tiny:` and `testbed:` model names, the testbed benchmark
    models = [os.fspath(model)] if isinstance(model, (str, os.PathLike)) else [os.fspath(m) for m in model]
    parser = build_parser()
    return run_eval(parser.parse_args(["--model", *models, *command_flags(parser, "evaluate", options)]))


def merge(method: str = "uniform", /, **options) -> dict:
    """Merge models as `trl-efficient merge --method METHOD ...` does (`hub.merge.run_merge`): `uniform`,
    `layerwise`, `update-selective` (`base=`, `trained=`) or `lora` (`adapter=`, `base=` optional), into `output=`
    (new or empty; nothing is written unless all of it is). `alpha`, `keep` are numbers, `ratios` three weights and
    `split_layers` two layer indices (a tuple, or the command's comma-separated text). Returns the merge card's
    parameters."""
    from ..hub.merge import build_parser, run_merge

    register_everything()  # `tiny:` model names
    for key in ("ratios", "split_layers"):  # one comma-separated value on the command line
        if isinstance(options.get(key), (list, tuple)):
            options[key] = ",".join(str(v) for v in options[key])
    parser = build_parser()
    return run_merge(parser.parse_args(["--method", method, *command_flags(parser, "merge", options)]))


def push(output_dir: str | os.PathLike, repo_id: str, /, **options) -> str:
    """Upload a trained (or merged) output directory as `trl-efficient push OUTPUT_DIR --repo-id REPO_ID` does
    (`hub.push.push`: the card rendered again with the evaluation results, model and card in one commit); options
    `eval_path`, `license`, `private`, `revision`, `commit_message`, `token`. Returns the commit's URL."""
    from ..hub.push import push as push_to_hub

    return push_to_hub(os.fspath(output_dir), repo_id, **options)
