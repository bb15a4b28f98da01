"""`python scripts/regenerate_docs.py`: the one command that regenerates every file generated from the registries
(README.md's recipe table, docs/recipes.md's reward table, docs/methods.md), and its `--check`, which fails on drift
of any of them (docs/adding-a-method.md)."""

import importlib.util
import os
import shutil

import pytest

from trl_efficient.recipes import tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("regenerate_docs", os.path.join(ROOT, "scripts", "regenerate_docs.py"))
regenerate_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regenerate_docs)

PATHS = ["README.md", "docs/recipes.md", "docs/methods.md"]


def _copy_checkout(tmp_path):
    (tmp_path / "docs").mkdir()
    for path in PATHS:
        shutil.copy(os.path.join(ROOT, path), tmp_path / path)


def _stale_row(path, marker):
    text = path.read_text(encoding="utf-8")
    start = text.index(f"<!-- {marker}:start -->") + len(f"<!-- {marker}:start -->")
    path.write_text(text[:start] + "\n| stale | row |\n" + text[start:], encoding="utf-8")


def test_the_checkout_has_not_drifted():
    # the suite fails when any generated file differs from the registries, naming it
    assert regenerate_docs.regenerate(ROOT, check=True) == [], "run `python scripts/regenerate_docs.py`"


def test_every_generated_table_has_one_home_that_holds_its_markers():
    homes = [(path, m) for path, markers in regenerate_docs.GENERATED.items() for m in markers or ()]
    assert sorted(m for _, m in homes) == sorted(tables.TABLES)  # each table written by the script, once
    for path, marker in homes:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            assert tables.readme_section(f.read(), marker)  # raises unless exactly one start and one end marker
    assert [path for path, _ in regenerate_docs.generated_files()] == PATHS


@pytest.mark.parametrize("stale", PATHS)
def test_check_names_each_drifted_file_and_one_command_rewrites_it(stale, tmp_path, capsys):
    _copy_checkout(tmp_path)
    if stale == "docs/methods.md":
        (tmp_path / stale).write_text("# Method reference\n\nstale\n", encoding="utf-8")
    else:
        _stale_row(tmp_path / stale, regenerate_docs.GENERATED[stale][0])
    assert regenerate_docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{stale}: differs from the registry: run `python scripts/regenerate_docs.py`"
    ]
    assert "stale" in (tmp_path / stale).read_text(encoding="utf-8")  # --check writes nothing
    assert regenerate_docs.main(["--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"{stale}: regenerated\n"
    assert regenerate_docs.main(["--check", "--root", str(tmp_path)]) == 0
    for path in PATHS:  # back to the checkout's (which the test above shows are the registries')
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            assert (tmp_path / path).read_text(encoding="utf-8") == f.read(), path


def test_a_file_without_its_markers_is_an_error_naming_it(tmp_path):
    _copy_checkout(tmp_path)
    text = (tmp_path / "docs" / "recipes.md").read_text(encoding="utf-8")
    (tmp_path / "docs" / "recipes.md").write_text(text.replace("<!-- rewards-table:end -->", ""), encoding="utf-8")
    with pytest.raises(ValueError, match=r"^docs/recipes\.md: expected exactly one '<!-- rewards-table:start -->'"):
        regenerate_docs.regenerate(str(tmp_path), check=True)
