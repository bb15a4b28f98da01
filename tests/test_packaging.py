"""The installed package is the product: the wheel carries every file the package reads at run time, and a card
that fails never costs the trained model.

`.ci/run` also installs the built wheel into a fresh virtual environment and runs the quickstart from outside the
checkout; these tests are the fast, in-suite half of that proof.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from helpers import tiny_cli_args

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "trl_efficient")


def _package_data_files() -> list[str]:
    """Every non-Python file under `trl_efficient/`, as wheel member names
    (`trl_efficient/recipes/configs/kimi.yaml`)."""
    out = []
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if not name.endswith((".py", ".pyc")):
                out.append(os.path.relpath(os.path.join(folder, name), ROOT).replace(os.sep, "/"))
    return sorted(out)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> str:
    # Build from a copy of what an sdist holds, so the checkout gets no `build/` (whose stale files would otherwise
    # reach later wheels) and nothing outside these paths can leak into the wheel.
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src / name)
    shutil.copytree(PACKAGE, src / "trl_efficient", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    (path,) = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".whl")]
    return path


def test_package_has_no_symlinks():
    # A symlink inside the package reaches a wheel only where package-data happens to glob through it, and an sdist
    # or a Windows checkout may not carry it at all: run-time files live in the package as real files.
    links = [os.path.relpath(os.path.join(d, n), ROOT) for d, dirs, files in os.walk(PACKAGE) for n in dirs + files
             if os.path.islink(os.path.join(d, n))]  # fmt: skip
    assert links == []


def test_wheel_carries_every_package_data_file(wheel):
    data = _package_data_files()
    # the files the package opens at run time: the card template and every recipe's YAML
    assert "trl_efficient/hub_cards/method_section.md" in data
    assert "trl_efficient/recipes/configs/quickstart.yaml" in data and "trl_efficient/recipes/configs/kimi.yaml" in data
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [f for f in data if f not in names] == []


def test_library_wheel_holds_no_comparison_instrument(wheel):
    """The library's wheel is the library: no module of the comparison instrument (`trl_efficient_testbed`, its own
    distribution under testbed/), and none of its data (protocol, literature, pinned comparison base models)."""
    names = zipfile.ZipFile(wheel).namelist()
    instrument = [n for n in names if n.startswith("trl_efficient_testbed") or n.endswith(("protocol.yaml",
                  "literature.yaml")) or "/pinned/" in n or n.endswith("trl_efficient_testbed.json")]  # fmt: skip
    assert instrument == [] and "trl_efficient/overthinking/world.py" in names


def test_testbed_command_without_the_instrument_says_how_to_install_it(monkeypatch, capsys):
    """`trl-efficient testbed` is a plugin's command: with no package declaring it, one line says how to install it
    and the command exits 2 (as every user error does)."""
    from importlib import metadata

    from trl_efficient import cli

    monkeypatch.setattr(metadata, "entry_points", lambda **kw: [])
    assert cli.main(["testbed", "compare"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install -e ./testbed" in err, err


def test_instrument_plugs_in_through_entry_points():
    """Installed, the instrument is found through its entry points only: the `testbed` command and the plugin that
    registers its pinned base models (the library names neither)."""
    from importlib import metadata

    pytest.importorskip("trl_efficient_testbed")
    commands = {e.name: e.value for e in metadata.entry_points(group="trl_efficient.commands")}
    assert commands.get("testbed") == "trl_efficient_testbed.cli:main"
    from trl_efficient.api import load_plugins
    from trl_efficient.overthinking.base import pinned_model_dir

    assert "testbed" in load_plugins() and pinned_model_dir("v3").endswith(os.path.join("pinned", "v3"))


def test_wheel_copy_reads_its_files_from_outside_the_checkout(wheel, tmp_path):
    """Unpack the wheel and use it from a directory with no `configs/`: the card template renders and every
    registered recipe's packaged YAML loads, all from the wheel's copy (not the checkout)."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    work = tmp_path / "elsewhere"
    work.mkdir()
    script = """
import json, os, sys, yaml
import trl_efficient
from trl_efficient.api.configs import packaged_config
from trl_efficient.hub.card import SECTION_MARKER, _template
from trl_efficient.recipes import RECIPES
assert trl_efficient.__file__.startswith(sys.argv[1]), trl_efficient.__file__
section = _template().safe_substitute()
configs = {name: yaml.safe_load(open(packaged_config(name))) for name in [*RECIPES.names(), "quickstart", "smoke"]}
print(json.dumps({"section": SECTION_MARKER in section, "configs": sorted(configs),
                  "paths": sorted({os.path.dirname(packaged_config(n)) for n in configs})}))
"""
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", script, str(site)], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["section"] is True
    assert out["paths"] == [str(site / "trl_efficient" / "recipes" / "configs")]
    from trl_efficient.recipes import RECIPES

    assert out["configs"] == sorted([*RECIPES.names(), "quickstart", "smoke"])


def test_failing_model_card_keeps_the_model_and_names_the_card(tmp_path, monkeypatch, capsys):
    """A card that cannot be written (here: its section raises) must not cost the checkpoint or the final model:
    both are on disk, and the command then fails with one line that names the card."""
    import trl_efficient.hub.card as model_card
    from trl_efficient.cli import main

    def broken(trainer):
        raise FileNotFoundError("hub_cards/method_section.md")

    monkeypatch.setattr(model_card, "render_method_section", broken)
    monkeypatch.chdir(ROOT)
    args = tiny_cli_args(tmp_path)
    code = main(["train", "--config", "configs/grpo.yaml", *args, "--save_strategy", "steps", "--save_steps", "2"])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("trl-efficient: error: model card (README.md) failed (FileNotFoundError")
    assert str(tmp_path) in err
    # TRL writes the card before the checkpoint's weights: the checkpoint is complete anyway
    checkpoint = tmp_path / "checkpoint-2"
    assert (checkpoint / "model.safetensors").is_file() and (checkpoint / "trl_efficient_state.json").is_file()
    assert (checkpoint / "optimizer.pt").is_file()
    # the final model, tokenizer and summary
    assert (tmp_path / "model.safetensors").is_file() and (tmp_path / "tokenizer_config.json").is_file()
    assert json.loads((tmp_path / "trl_efficient_summary.json").read_text())["recipe"] == "grpo"


def _pyproject() -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def _project_table() -> dict:
    return _pyproject()["project"]


def test_release_artefacts_build_and_pass_twine_check(tmp_path):
    """`python -m build` makes the sdist and, from it, the wheel; `twine check --strict` (PyPI's checks, README
    rendering included) passes on both; the version in the metadata is `trl_efficient.__version__` (its only
    source: pyproject reads it). `.ci/run` runs the same build with isolation from a fresh virtual environment."""
    pytest.importorskip("build", reason="needs the release extra: pip install -e '.[release]'")
    pytest.importorskip("twine", reason="needs the release extra: pip install -e '.[release]'")
    import tarfile

    import trl_efficient

    src, dist = tmp_path / "src", tmp_path / "dist"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src / name)
    shutil.copytree(PACKAGE, src / "trl_efficient", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    # no isolation (the test environment has setuptools; CI's .ci/run builds isolated), no dependency check
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--skip-dependency-check", "-o", str(dist),
                    str(src)], check=True, capture_output=True, text=True, timeout=300)  # fmt: skip
    files = sorted(os.listdir(dist))
    version = trl_efficient.__version__
    assert files == [f"trl_efficient-{version}-py3-none-any.whl", f"trl_efficient-{version}.tar.gz"]
    proc = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *[str(dist / f) for f in files]],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == 2

    metadata = zipfile.ZipFile(dist / files[0]).read(f"trl_efficient-{version}.dist-info/METADATA").decode()
    headers = metadata.split("\n\n")[0].splitlines()
    assert f"Version: {version}" in headers and "License-Expression: Apache-2.0" in headers
    assert sorted(h.removeprefix("Classifier: ") for h in headers if h.startswith("Classifier: ")) == sorted(
        _project_table()["classifiers"]
    )
    # the sdist carries what the wheel is built from: the README and every package-data file
    sdist_names = {n.split("/", 1)[1] for n in tarfile.open(dist / files[1]).getnames() if "/" in n}
    assert {"README.md", "pyproject.toml"} <= sdist_names
    assert [f for f in _package_data_files() if f not in sdist_names] == []


def test_one_version_source():
    """pyproject has no static version: setuptools reads `trl_efficient.__version__` (a literal it parses without
    importing the package)."""
    pyproject = _pyproject()
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "trl_efficient.__version__"}


def test_classifiers_are_known_and_urls_are_absent():
    trove = pytest.importorskip("trove_classifiers", reason="needs the release extra")
    project = _project_table()
    assert project["classifiers"] and [c for c in project["classifiers"] if c not in trove.classifiers] == []
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # PEP 639: the SPDX expression only
    # no invented project URLs: add [project.urls] only for pages that exist
    assert "urls" not in project
