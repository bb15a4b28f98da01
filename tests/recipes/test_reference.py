"""docs/methods.md is the method reference rendered from the registry and the code's docstrings
(`trl_efficient/recipes/reference.py`): it covers every recipe, keeps the section numbers the code cites, and does not
drift."""

import os
import re

from trl_efficient.recipes import RECIPES
from trl_efficient.recipes.reference import SECTIONS, render_reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_docs_methods_md_is_the_rendered_reference():
    with open(os.path.join(ROOT, "docs", "methods.md"), encoding="utf-8") as f:
        text = f.read()
    assert text == render_reference(), (
        "docs/methods.md drifted: python -m trl_efficient.recipes.reference docs/methods.md"
    )


def test_sections_name_registered_recipes_once():
    # a recipe without a section is listed under "Other recipes" (rendered, so nothing to extend for a new one)
    names = [name for _, _, recipes, _ in SECTIONS for name in recipes]
    assert len(names) == len(set(names)) and set(names) <= set(RECIPES.names())


def test_every_cited_section_exists():
    numbers = {number for number, *_ in SECTIONS}
    cited = set()
    for folder in ("trl_efficient", "docs", "tests"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith((".py", ".md")):
                    with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                        cited |= {int(n) for n in re.findall(r"methods\.md`? §(\d+)", f.read())}
    assert cited <= numbers, sorted(cited - numbers)
