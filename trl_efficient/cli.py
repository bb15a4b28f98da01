"""`trl-efficient` command line: a thin parser over the library API (`trl_efficient.api`: `train`, `evaluate`,
`merge`, `push`). `train` (default recipe run, `api.training`), `recipes` (list them; `--markdown` prints the README's
recipe and reward tables generated from the registry), and the commands of the lower
layers (`eval`, `data`, `testbed`, `serve-scorer`, `profile`, `push`, `merge`), each imported only when it runs:
`trl-efficient --help` and `trl-efficient recipes` load only what they need, and a command's `--help` loads no torch,
TRL or transformers (`tests/cli/test_lazy_imports.py`). `train`'s and `profile`'s options are TRL's and
transformers' dataclasses (`GRPOConfig` is a `TrainingArguments`): their first `--help` renders the text with them
and keeps it (`help_cache_path`), later ones print it.

`trl-efficient train --config <recipe> [--key value ...]`: see `trl_efficient.api.training` (run preset < recipe <
YAML < command line; `--config` takes a YAML path or a shipped recipe's name, `trl-efficient recipes show kimi`
prints one). With no arguments, `trl-efficient train` runs the bundled `configs/quickstart.yaml`, an offline smoke
run of the whole pipeline on CPU. The same entry point runs under `accelerate launch -m trl_efficient.cli train ...`.

User errors in any command (a missing or malformed config file, an unknown recipe, field or flag, an invalid value, a
model name that does not resolve, bf16 or 4-bit on a machine without CUDA) print one line, `trl-efficient: error:
<what to change>`, and exit 2 (`main`); `--debug` anywhere on the command line shows the traceback instead. The
commands' parsers are `core.errors.CommandParser`s, whose errors raise `UserError`; nothing patches `argparse`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

from .core.errors import CommandParser, UserError, one_line

logger = logging.getLogger("trl_efficient")

QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "huggingface_hub")  # WARNING+ unless --debug
OWN_HANDLER_LOGGERS = ("huggingface_hub", "datasets")  # libraries that attach a stderr handler and still propagate


# Subcommand -> (help, "module:function", registers). Each function takes the remaining argv and returns an exit code
# (or None, or a summary dict). Modules are imported only when their command runs, and the registries are filled
# (`api.register_everything`: every recipe, the `tiny:` and `testbed:` model schemes) only for a command that
# `registers` and is not asked for its help, so `trl-efficient --help` and every `<command> --help` stay light.
COMMANDS = {
    "train": ("train a recipe (default: the offline quickstart)", "trl_efficient.api.training:train_main", True),
    "recipes": (
        "list the registered recipes (`recipes show NAME`: print one's YAML; `recipes presets`: the run presets; "
        "--markdown: the README tables)",
        "trl_efficient.cli:recipes_main",
        False,  # imports trl_efficient.recipes, and only that
    ),
    "eval": ("evaluate accuracy and tokens of a model on benchmarks", "trl_efficient.eval.cli:main", True),
    "data": ("data utilities: `data prepare` writes benchmarks to local files", "trl_efficient.data.cli:main", True),
    "testbed": (
        "CPU testbed: compare recipes on a synthetic over-thinking world (the `trl-efficient-testbed` package)",
        None,  # a plugin's command: the entry point `testbed` of group `trl_efficient.commands` (`plugin_command`)
        True,
    ),
    "serve-scorer": (
        "serve a token-significance scorer over HTTP (Bingo)",
        "trl_efficient.significance.server:main",
        True,
    ),
    "profile": ("profile a base model over a dataset (SABER tiers)", "trl_efficient.methods.saber:profile_main", True),
    "push": (
        "upload a trained output directory (model, tokenizer, card, evaluation) to the Hub",
        "trl_efficient.hub.push:main",
        False,
    ),
    "merge": (
        "merge models: base/trained averaging, layer-wise, DLER update-selective, LoRA into base",
        "trl_efficient.hub.merge:main",
        True,
    ),
}


def asks_for_help(argv: list[str]) -> bool:
    """A command line that only asks for a help text (`-h`/`--help` anywhere): argparse prints it and exits before the
    command does anything, so nothing is registered for it.

    >>> asks_for_help(["show", "--help"]), asks_for_help(["--config", "kimi"])
    (True, False)
    """
    return any(arg in ("-h", "--help") for arg in argv)


# Commands whose options are TRL's and transformers' dataclasses (`EfficientGRPOConfig` is a `TrainingArguments`,
# `profile`'s arguments live in `methods.saber`): their help text cannot be rendered without torch, so the first
# `<command> --help` renders it and keeps it (`help_cache_path`), and later ones print the kept text.
DATACLASS_COMMANDS = ("train", "profile")


def help_cache_path(command: str) -> str:
    """Where the help text of `trl-efficient <command> --help` is kept: `$TRL_EFFICIENT_CACHE/help/` (default
    `~/.cache/trl_efficient/help/`), named by a hash of everything the text depends on: the installed versions of
    torch, TRL and transformers (read from their distributions, not imported), the Python version, the terminal
    width argparse wraps to, and the source of every module of this package (the dataclasses and the registries
    their help lists), so an upgrade or an edit renders it again."""
    import hashlib
    import shutil
    from importlib import metadata

    digest = hashlib.sha256(f"{sys.version}\n{shutil.get_terminal_size().columns}\n".encode())
    for dist in ("torch", "trl", "transformers"):
        digest.update(f"{dist}=={metadata.version(dist)}\n".encode())
    package = os.path.dirname(os.path.abspath(__file__))
    for folder, dirs, files in sorted(os.walk(package)):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(os.path.relpath(os.path.join(folder, name), package).encode() + b"\0" + f.read())
    root = os.environ.get("TRL_EFFICIENT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "trl_efficient")
    return os.path.join(root, "help", f"{command}-{digest.hexdigest()[:16]}.txt")


def print_kept_help(command: str, run) -> None:
    """`trl-efficient <command> --help` for a `DATACLASS_COMMANDS` command: print the kept text when there is one,
    else render it (`run(["--help"])`, which prints it and exits) and keep it; exits 0 as argparse's help does. A
    cache that cannot be written only costs the next call the rendering."""
    import contextlib
    import io

    path = help_cache_path(command)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            print(f.read(), end="")
        raise SystemExit(0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            run()(["--help"])
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                raise
    print(out.getvalue(), end="")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(f"{path}.{os.getpid()}", "w", encoding="utf-8") as f:
            f.write(out.getvalue())
        os.replace(f"{path}.{os.getpid()}", path)
    except OSError:
        pass
    raise SystemExit(0)


def list_recipes() -> None:
    from .recipes import RECIPES

    for name in RECIPES.names():
        recipe = RECIPES.get(name)
        print(f"{name:18s} {recipe.method}: {recipe.description}")


def show_recipe(argv: list[str]) -> int:
    """`trl-efficient recipes show NAME`: print the shipped recipe YAML `NAME` (to copy, edit and pass as --config)."""
    parser = CommandParser(
        prog="trl-efficient recipes show",
        description="Print a shipped recipe YAML: `trl-efficient recipes show kimi > my-kimi.yaml`, edit it, then "
        "`trl-efficient train --config my-kimi.yaml`.",
    )
    parser.add_argument("name", help="a recipe (`trl-efficient recipes` lists them), quickstart or smoke")
    from importlib import resources

    from .api.configs import shipped_config_name, shipped_configs

    name = parser.parse_args(argv).name
    found = shipped_config_name(name)
    if found is None:
        raise UserError(
            f"no shipped recipe YAML named {name!r}; choose one of {', '.join(shipped_configs())} "
            "(see `trl-efficient recipes`)"
        )
    print(resources.files("trl_efficient.recipes").joinpath("configs", f"{found}.yaml").read_text("utf-8"), end="")
    return 0


def show_presets(argv: list[str]) -> int:
    """`trl-efficient recipes presets`: print the run presets a YAML names with `run_defaults:`, as YAML."""
    CommandParser(
        prog="trl-efficient recipes presets",
        description="Print the run presets (`run_defaults: NAME` in a YAML applies one beneath the recipe, the YAML "
        "and the command line).",
    ).parse_args(argv)
    import yaml

    from .recipes.presets import RUN_PRESETS

    for name, settings in RUN_PRESETS.items():
        print(f"# run_defaults: {name}")
        print(yaml.safe_dump({name: settings}, sort_keys=False), end="")
    return 0


def recipes_main(argv: list[str]) -> int:
    """`trl-efficient recipes [--markdown | --update-readme PATH | --check-readme PATH]` (PATH: README.md);
    `trl-efficient recipes show NAME` prints a shipped recipe YAML (`show_recipe`)."""
    if argv[:1] == ["show"]:
        return show_recipe(argv[1:])
    if argv[:1] == ["presets"]:
        return show_presets(argv[1:])
    parser = CommandParser(
        prog="trl-efficient recipes",
        description="List the registered recipes. `trl-efficient recipes show NAME` prints one's YAML; "
        "`trl-efficient train --config NAME` trains it.",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--markdown", action="store_true", help="print the README's recipe and reward tables")
    group.add_argument("--update-readme", metavar="PATH", help="rewrite the generated tables between their markers")
    group.add_argument(
        "--check-readme", metavar="PATH", help="exit 1 when the README's tables differ from the registry"
    )
    args = parser.parse_args(argv)
    if not (args.markdown or args.update_readme or args.check_readme):
        list_recipes()
        return 0
    from .recipes import tables

    if args.markdown:
        print(tables.markdown(), end="")
        return 0
    path = args.update_readme or args.check_readme
    with open(path, encoding="utf-8") as f:
        text = f.read()
    updated = tables.update_readme(text)
    if args.check_readme:
        if updated != text:
            print(
                f"{path}: the generated tables differ from the registry; run "
                f"`trl-efficient recipes --update-readme {path}`",
                file=sys.stderr,
            )
            return 1
        return 0
    if updated != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(updated)
    return 0


# Commands that another package provides (entry points of this group): `testbed`, from the comparison instrument
COMMAND_GROUP = "trl_efficient.commands"
PLUGIN_HINTS = {"testbed": "pip install -e ./testbed (from a checkout of trl-efficient: the comparison instrument, "
                "package trl-efficient-testbed)"}  # fmt: skip


def plugin_command(name: str) -> Callable:
    """The function of command `name` that an installed package declares under the entry-point group
    `trl_efficient.commands`; a `UserError` saying how to install it when none does."""
    from importlib import metadata

    for entry in metadata.entry_points(group=COMMAND_GROUP, name=name):
        return entry.load()
    raise UserError(f"`trl-efficient {name}` is not installed: {PLUGIN_HINTS.get(name, 'install its package')}")


def _resolve(target: str | None, name: str | None = None):
    import importlib

    if target is None:
        return plugin_command(name)

    module, _, func = target.partition(":")
    return getattr(importlib.import_module(module), func)


# User errors: `main` prints them as one line, `trl-efficient: error: <message>`, and exits 2. `UserError` and the
# `ValueError`s of config validation (every `__post_init__`, registry lookups) name what to change; a missing file
# names the file; argparse errors of any subcommand are raised as `UserError` instead of printing usage.
def _user_error_types() -> tuple[type[BaseException], ...]:
    import yaml

    return (ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError, PermissionError,
            yaml.YAMLError)  # fmt: skip


def _user_error_line(err: BaseException) -> str:
    """The one line of a user error: a file error names its file (`_file_error_line`), anything else is its message
    (the commands raise `UserError`s that say what to change, an unknown flag included)."""
    if isinstance(err, OSError) and err.filename is not None:
        return _file_error_line(err)
    return one_line(err)


def _file_error_line(err: OSError) -> str:
    """A file error in one line, without guessing "read" for a write: a missing path is named as such, a permission
    error says "cannot write" when the path is not there yet (it was being created) or is there and readable (so the
    write failed), else "cannot read"."""
    what = err.strerror or one_line(err)
    if isinstance(err, FileNotFoundError):
        return f"{err.filename}: {what} (check the path, and that its folder exists)"
    if isinstance(err, IsADirectoryError):
        return f"{err.filename} is a directory: pass a file path"
    if isinstance(err, FileExistsError):
        return f"{err.filename} exists and is not a folder: pass a new folder"
    if isinstance(err, NotADirectoryError):
        return f"{err.filename}: part of this path is a file, not a folder; pass another path"
    # a path that is not there yet was being created (a write); one that is there and readable was being written
    exists = os.path.exists(err.filename)
    writing = not exists or os.access(err.filename, os.R_OK)
    return f"cannot {'write' if writing else 'read'} {err.filename}: {what}"


def _offline_refusal(err: BaseException) -> str | None:
    """The line for a Hugging Face Hub request that offline mode refused (huggingface_hub's `OfflineModeIsEnabled`
    anywhere in the chain) and that is not a model lookup (`model_lookup_error` returned None); else `None`."""
    from huggingface_hub.errors import OfflineModeIsEnabled

    seen, depth = err, 0
    while seen is not None and depth < 10:
        if isinstance(seen, OfflineModeIsEnabled):
            return (
                "this command needs the Hugging Face Hub and offline mode is on (HF_HUB_OFFLINE or "
                "TRANSFORMERS_OFFLINE is set): unset them and run it again"
            )
        seen, depth = seen.__cause__ or seen.__context__, depth + 1
    return None


class _PrintedByTheirOwnHandler(logging.Filter):
    """On the root logger's handlers: drop a record of `OWN_HANDLER_LOGGERS` (huggingface_hub, datasets) when that
    library's logger has its own handler, which already printed it (checked per record: they attach it on import)."""

    def filter(self, record: logging.LogRecord) -> bool:
        library = record.name.split(".")[0]
        return not (library in OWN_HANDLER_LOGGERS and logging.getLogger(library).handlers)


def main(argv: list[str] | None = None) -> int:
    """`trl-efficient <command> ...`. A user error prints `trl-efficient: error: <one line>` on stderr and returns 2;
    `--debug` anywhere on the command line re-raises it with its traceback."""
    from .api.errors import ExtraFailedError, InterruptedRunError

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [arg for arg in argv if arg != "--debug"]
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not debug:  # one INFO line per HTTP request (push, downloads) otherwise; --debug shows them
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:  # printed by their own handler, then again by the root one: once
        if not any(isinstance(f, _PrintedByTheirOwnHandler) for f in handler.filters):
            handler.addFilter(_PrintedByTheirOwnHandler())
    if not argv or argv[0] in ("-h", "--help"):
        parser = argparse.ArgumentParser(prog="trl-efficient", description="Efficient-reasoning RL on top of TRL.")
        parser.add_argument(
            "command", choices=sorted(COMMANDS), help="; ".join(f"{k}: {v[0]}" for k, v in sorted(COMMANDS.items()))
        )
        parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
        parser.parse_args(argv[:1] or ["--help"])  # prints the help
        return 2
    if argv[0] not in COMMANDS:
        print(
            f"trl-efficient: error: unknown command {argv[0]!r}; choose one of {', '.join(sorted(COMMANDS))} "
            "(see `trl-efficient --help`)",
            file=sys.stderr,
        )
        return 2
    _, target, registers = COMMANDS[argv[0]]
    if argv[0] in DATACLASS_COMMANDS and argv[1:] in (["--help"], ["-h"]):
        print_kept_help(argv[0], lambda: _resolve(target))
    if registers and not asks_for_help(argv[1:]):
        from .api import register_everything

        register_everything()
    try:
        result = _resolve(target, argv[0])(argv[1:])
    except ExtraFailedError as err:  # the model is saved; say which extra failed, in one line, and exit non-zero
        if debug:
            raise
        print(f"trl-efficient: error: {err}", file=sys.stderr)
        return 1
    except InterruptedRunError as err:  # Ctrl-C in train: the checkpoint to resume from, in one line
        if debug:
            raise
        print(f"trl-efficient: {err}", file=sys.stderr)
        return 130
    except _user_error_types() as err:
        if debug:
            raise
        print(f"trl-efficient: error: {_user_error_line(err)}", file=sys.stderr)
        return 2
    except OSError as err:  # a model name that does not resolve, in any command (eval, profile...)
        from .core.models import model_lookup_error

        lookup = model_lookup_error(err)
        line = one_line(lookup) if lookup is not None else _offline_refusal(err)
        if line is None or debug:
            raise
        print(f"trl-efficient: error: {line}", file=sys.stderr)
        return 2
    return 0 if result is None or isinstance(result, dict) else int(result)


if __name__ == "__main__":
    sys.exit(main())
