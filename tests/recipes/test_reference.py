"""docs/methods.md is the method reference rendered from the registry and the code's docstrings
(`trl_efficient/recipes/reference.py`): it covers every recipe, keeps the section numbers the code cites, and does not
drift."""

import os
import re

import pytest

from trl_efficient.recipes import RECIPES, Recipe, RewardSpec, Section
from trl_efficient.recipes.reference import render_reference, sections

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_docs_methods_md_is_the_rendered_reference():
    with open(os.path.join(ROOT, "docs", "methods.md"), encoding="utf-8") as f:
        text = f.read()
    assert text == render_reference(), (
        "docs/methods.md drifted: python -m trl_efficient.recipes.reference docs/methods.md"
    )


def test_sections_are_declared_by_the_recipes():
    # each recipe declares its section; a recipe without one is listed under "Other recipes"
    rendered = [(section.number, [r.name for r in recipes]) for section, recipes in sections()]
    numbers = [number for number, _ in rendered]
    assert numbers == list(range(len(numbers)))  # §0..§N without a gap (a new section is the next number)
    registered = [name for name, _ in RECIPES.items()]  # registration order within a section
    for _, names in rendered:
        assert names == [name for name in registered if name in names]
    assert {"laser", "laser-d", "laser-de"} <= set(dict(rendered)[7])
    without = [name for name in RECIPES.names() if RECIPES.get(name).section is None]
    assert without == ["constant-penalty", "placebo"]  # the testbed's negative controls: no method to describe


def test_two_recipes_declaring_one_number_differently_is_an_error(monkeypatch):
    other = Recipe("x-kimi", "x", "x", (RewardSpec("correctness"),), section=Section(8, "Another title"))
    monkeypatch.setitem(RECIPES._entries, "x-kimi", other)
    with pytest.raises(ValueError, match="x-kimi"):
        sections()


def test_every_cited_section_exists():
    numbers = {section.number for section, _ in sections()}
    cited = set()
    for folder in ("trl_efficient", "docs", "tests"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith((".py", ".md")):
                    with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                        cited |= {int(n) for n in re.findall(r"methods\.md`? §(\d+)", f.read())}
    assert cited <= numbers, sorted(cited - numbers)
