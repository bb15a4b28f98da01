"""The README is the page a newcomer reads (issue 46): at most 300 lines; its test and lint commands are the ones
`.ci/run` runs, verbatim; every relative link of the README and of docs/ resolves, with docs/index.md the map of every
page. Its script is `examples/trl_script.py` (tests/cli/test_trl_script.py); the generated blocks have their own drift
tests, beside the generator of each (tests/recipes/test_every_recipe.py, tests/testbed/test_readme_table.py,
tests/test_perf_scripts.py).
"""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
DOCS = os.path.join(ROOT, "docs")


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)


def test_readme_is_short():
    assert len(README.splitlines()) <= 300


def test_ci_runs_the_readme_test_and_lint_commands_verbatim():
    section = README.split("## Tests and lint", 1)[1].split("\n## ", 1)[0]
    test, lint = (block.strip() for block in _blocks(section, "bash"))
    assert "pip install -e ./testbed" in test and ".[test,lint]" in test and test.endswith("python -m pytest -x -q")
    assert lint == "ruff check . && ruff format --check . && lint-imports"
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    assert test in lines and lint in lines


def _pages() -> list[str]:
    return [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(DOCS, name) for name in os.listdir(DOCS) if name.endswith(".md")
    )


def test_relative_links_resolve():
    broken = []
    for page in _pages():
        with open(page, encoding="utf-8") as f:
            text = re.sub(r"^```.*?^```$", "", f.read(), flags=re.M | re.S)  # links only outside code blocks
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path = target.split("#", 1)[0]
            if not path or re.match(r"[a-z]+:", path):  # an anchor on the page, or a URL
                continue
            if not os.path.exists(os.path.join(os.path.dirname(page), path)):
                broken.append(f"{os.path.relpath(page, ROOT)}: {target}")
    assert broken == []


def test_docs_index_maps_every_page():
    with open(os.path.join(DOCS, "index.md"), encoding="utf-8") as f:
        index = f.read()
    pages = {name for name in os.listdir(DOCS) if name.endswith(".md")} - {"index.md"}
    assert sorted(name for name in pages if f"]({name}" not in index) == []
    assert "](docs/index.md)" in README
