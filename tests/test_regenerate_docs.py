"""`python scripts/regenerate_docs.py`: the one command that regenerates every file generated from the registries
(README.md's tables, docs/methods.md), and its `--check` (docs/adding-a-method.md)."""

import importlib.util
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("regenerate_docs", os.path.join(ROOT, "scripts", "regenerate_docs.py"))
regenerate_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regenerate_docs)


def test_one_command_rewrites_every_stale_generated_file_and_check_then_passes(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    shutil.copy(os.path.join(ROOT, "README.md"), tmp_path / "README.md")
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- recipes-table:start -->") + len("<!-- recipes-table:start -->")
    (tmp_path / "README.md").write_text(readme[:start] + "\n| stale | row |\n" + readme[start:], encoding="utf-8")
    (tmp_path / "docs" / "methods.md").write_text("# Method reference\n\nstale\n", encoding="utf-8")
    assert regenerate_docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert "README.md: differs" in capsys.readouterr().err
    assert "stale" in (tmp_path / "docs" / "methods.md").read_text()  # --check writes nothing
    assert regenerate_docs.main(["--root", str(tmp_path)]) == 0
    assert regenerate_docs.main(["--check", "--root", str(tmp_path)]) == 0
    assert "| stale | row |" not in (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "## §8. Kimi k1.5 length penalty" in (tmp_path / "docs" / "methods.md").read_text(encoding="utf-8")
    assert [path for path, _ in regenerate_docs.generated_files()] == ["README.md", "docs/methods.md"]
