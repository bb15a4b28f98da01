"""The README's recipe table and docs/recipes.md's reward table, generated from the registries (`trl-efficient recipes
--markdown`).

Each file keeps its table between markers (`<!-- recipes-table:start -->` ... `<!-- recipes-table:end -->` in
README.md, the same for `rewards-table` in docs/recipes.md); `update_readme` rewrites whatever generated tables a file
holds, and a test fails when either file drifts from the registry. A new recipe or reward builder therefore needs no
hand edit: `python scripts/regenerate_docs.py` regenerates both (and docs/methods.md); `trl-efficient recipes
--update-readme PATH` one file.
"""

from __future__ import annotations

from .registry import RECIPES, REWARD_BUILDERS, REWARD_INFO

TABLES = ("recipes-table", "rewards-table")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def recipes_table() -> str:
    """One row per registered recipe, sorted by name: name, method, papers, description."""
    lines = ["| Recipe | Method | Paper | What it does |", "|---|---|---|---|"]
    for name in RECIPES.names():
        recipe = RECIPES.get(name)
        papers = ", ".join(f"arXiv:{p}" for p in recipe.papers)
        lines.append(f"| `{name}` | {_cell(recipe.method)} | {papers} | {_cell(recipe.description)} |")
    return "\n".join(lines)


def rewards_table() -> str:
    """One row per registered reward builder, sorted by name: builder, factory, paper, needed columns.

    >>> rewards_table().splitlines()[0]
    '| Builder | Reward factory | Paper | Needs |'
    """
    missing = [name for name in REWARD_BUILDERS.names() if name not in REWARD_INFO]
    if missing:
        raise ValueError(f"reward builders {missing} have no RewardInfo: declare them with reward_builder.")
    lines = ["| Builder | Reward factory | Paper | Needs |", "|---|---|---|---|"]
    for name in REWARD_BUILDERS.names():
        info = REWARD_INFO[name]
        needs = [f"`{column}`" for column in info.needs] + (["whole groups"] if info.whole_groups else [])
        lines.append(f"| `{name}` | `{info.factory_name}` | {_cell(info.paper)} | {', '.join(needs)} |")
    return "\n".join(lines)


def markdown() -> str:
    """Both tables, as `trl-efficient recipes --markdown` prints them."""
    return f"{recipes_table()}\n\n{rewards_table()}\n"


def _builders() -> dict:
    """Each generated table's marker (`TABLES`) -> the function that builds it."""
    return {"recipes-table": recipes_table, "rewards-table": rewards_table}


def generated_sections() -> dict[str, str]:
    return {marker: build() for marker, build in _builders().items()}


def _bounds(text: str, marker: str) -> tuple[int, int]:
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    if text.count(start) != 1 or text.count(end) != 1:
        raise ValueError(f"expected exactly one {start!r} and one {end!r} in the README.")
    a, b = text.index(start) + len(start), text.index(end)
    if a > b:
        raise ValueError(f"{start!r} comes after {end!r}.")
    return a, b


def readme_section(text: str, marker: str) -> str:
    """What the README holds between the `marker` start/end comments, stripped.

    >>> readme_section("x\\n<!-- t:start -->\\n| a |\\n<!-- t:end -->\\n", "t")
    '| a |'
    """
    a, b = _bounds(text, marker)
    return text[a:b].strip()


def replace_readme_section(text: str, marker: str, body: str) -> str:
    """`text` with what stands between the `marker` start/end comments replaced by `body` (on lines of its own).

    >>> replace_readme_section("x\\n<!-- t:start -->\\nold\\n<!-- t:end -->\\n", "t", "new")
    'x\\n<!-- t:start -->\\nnew\\n<!-- t:end -->\\n'
    """
    a, b = _bounds(text, marker)
    return f"{text[:a]}\n{body.strip()}\n{text[b:]}"


def write_readme_section(path: str, marker: str, body: str) -> None:
    """Rewrite the `marker` section of the file `path` (a README) with `body` (the benchmarks' `--update-readme`)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(replace_readme_section(text, marker, body))


def update_readme(text: str) -> str:
    """`text` with every generated table it holds (between its markers) replaced by the registry's current one: the
    README holds the recipe table, docs/recipes.md the reward table.

    >>> update_readme("no markers")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: no generated table in the text: expected the markers of one of ('recipes-table', ...).
    """
    builders = _builders()
    markers = [marker for marker in TABLES if f"<!-- {marker}:start -->" in text]
    if not markers:
        raise ValueError(f"no generated table in the text: expected the markers of one of {TABLES}.")
    for marker in markers:
        text = replace_readme_section(text, marker, builders[marker]())
    return text
