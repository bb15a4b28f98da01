"""`trl-efficient` imports what a command needs, when it runs (issue 34): `--help` of the command table and of every
command whose options are its own loads neither torch, TRL nor transformers; `trl-efficient recipes` loads nothing
beyond `trl_efficient.recipes`; nothing patches `argparse` for other parsers. Each check runs in a fresh interpreter
(what an earlier test imported would hide an eager import), and reads `sys.modules`, not a clock."""

import json
import os
import subprocess
import sys

import pytest

from trl_efficient.cli import COMMANDS, DATACLASS_COMMANDS, help_cache_path, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEAVY = ("torch", "trl", "transformers")
# train and profile: their help lists TRL's and transformers' dataclasses; rendered once, then kept (tests below)
HELP_ARGVS = [[], ["--help"], ["recipes", "show", "--help"], ["recipes", "presets", "--help"]] + [
    [command, "--help"] for command in sorted(COMMANDS) if command not in DATACLASS_COMMANDS
]


def _run(code: str) -> dict:
    """Run `code` in a fresh interpreter (the checkout on the path) and return the JSON it prints last."""
    env = {**os.environ, "PYTHONPATH": ROOT, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", HELP_ARGVS, ids=lambda argv: " ".join(argv) or "no arguments")
def test_a_help_text_loads_no_torch_trl_or_transformers(argv):
    code = f"""
import contextlib, io, json, sys
from trl_efficient.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main({argv!r})
    except SystemExit:
        pass
print(json.dumps({{"loaded": [m for m in {HEAVY!r} if m in sys.modules], "help": out.getvalue()}}))
"""
    seen = _run(code)
    assert seen["loaded"] == []
    assert "usage: trl-efficient" in seen["help"]  # the help was printed, not an error


def test_the_recipes_command_loads_nothing_beyond_the_registry():
    """With `trl_efficient.recipes` imported, listing the recipes adds only the command line's own light modules
    (no registration of the testbed or the tiny models, no training pipeline)."""
    code = """
import contextlib, io, json, sys
import trl_efficient.recipes
before = set(sys.modules)
from trl_efficient.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(["recipes"])
print(json.dumps({"code": code, "new": sorted(m for m in set(sys.modules) - before if m.startswith("trl_efficient")),
                  "listed": out.getvalue().count("\\n")}))
"""
    seen = _run(code)
    assert seen["code"] == 0 and seen["listed"] >= 30
    assert set(seen["new"]) <= {"trl_efficient.cli", "trl_efficient.core.errors", "trl_efficient.api",
                                "trl_efficient.api.errors"}  # fmt: skip


def test_importing_the_command_line_and_the_api_loads_nothing_heavy():
    code = """
import json, sys
import trl_efficient, trl_efficient.api, trl_efficient.cli
print(json.dumps([m for m in ("torch", "trl", "transformers", "datasets") if m in sys.modules]))
"""
    assert _run(code) == []


def test_a_parser_that_is_not_ours_still_exits_as_argparse_does(monkeypatch, capsys):
    """Only the commands' own parsers (`core.errors.CommandParser`) raise `UserError`: a plain `argparse` parser run
    while a command runs (a user's, a library's) prints its usage and exits 2, as it would anywhere."""
    import argparse

    import trl_efficient.cli as cli

    def command(argv):
        parser = argparse.ArgumentParser(prog="theirs")
        parser.add_argument("--n", type=int)
        parser.parse_args(argv)

    monkeypatch.setattr(cli, "_resolve", lambda target, name=None: command)
    with pytest.raises(SystemExit) as exit_info:
        main(["push", "--n", "x"])
    assert exit_info.value.code == 2
    assert "theirs: error: argument --n: invalid int value: 'x'" in capsys.readouterr().err
    monkeypatch.undo()
    assert main(["push", "--nope"]) == 2  # ours: one line (the real parser again)
    assert capsys.readouterr().err.startswith("trl-efficient: error: trl-efficient push: the following arguments")


@pytest.mark.parametrize("command", DATACLASS_COMMANDS)
def test_a_dataclass_commands_help_is_rendered_once_and_kept(command, tmp_path, monkeypatch, capsys):
    """The first `train --help` renders the text (with TRL and transformers) and keeps it where the next one looks."""
    monkeypatch.setenv("TRL_EFFICIENT_CACHE", str(tmp_path))
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"usage: trl-efficient {command}") and "--model_name_or_path" in printed
    with open(help_cache_path(command), encoding="utf-8") as f:
        assert f.read() == printed


@pytest.mark.parametrize("command", DATACLASS_COMMANDS)
def test_a_kept_help_prints_without_torch_trl_or_transformers(command, tmp_path):
    code = f"""
import contextlib, io, json, os, sys
os.environ["TRL_EFFICIENT_CACHE"] = {str(tmp_path)!r}
from trl_efficient.cli import help_cache_path, main
path = help_cache_path({command!r})
os.makedirs(os.path.dirname(path))
with open(path, "w") as f:
    f.write("usage: trl-efficient {command} (kept)\\n")
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main([{command!r}, "--help"])
    except SystemExit as exit_:
        code = exit_.code
print(json.dumps({{"loaded": [m for m in {HEAVY!r} if m in sys.modules], "help": out.getvalue(), "code": code}}))
"""
    seen = _run(code)
    assert seen == {"loaded": [], "help": f"usage: trl-efficient {command} (kept)\n", "code": 0}


def test_the_kept_help_is_keyed_by_what_it_depends_on(monkeypatch):
    """Same inputs, same file; another terminal width (argparse wraps to it) or another transformers, another."""
    import os
    import shutil
    from importlib import metadata

    path = help_cache_path("train")
    assert help_cache_path("train") == path and help_cache_path("profile") != path
    monkeypatch.setattr(shutil, "get_terminal_size", lambda *a, **k: os.terminal_size((231, 40)))
    wide = help_cache_path("train")
    version = metadata.version
    monkeypatch.setattr(metadata, "version", lambda dist: "9.9.9" if dist == "transformers" else version(dist))
    assert len({path, wide, help_cache_path("train")}) == 3
