"""The README's recipe and reward tables, generated from the registries (`trl-efficient recipes --markdown`), and
docs/scale.md's table of every recipe's paper length constants at the testbed (`trl-efficient recipes --scale-table`).

The README keeps each table between markers (`<!-- recipes-table:start -->` ... `<!-- recipes-table:end -->`, the
same for `rewards-table`); `update_readme` rewrites what is between them and a test fails when the README drifts
from the registry. A new recipe or reward builder therefore needs no hand edit of the README: regenerate with
`trl-efficient recipes --update-readme README.md` (and `--update-readme docs/scale.md` for the scale table).
"""

from __future__ import annotations

from .registry import RECIPES, REWARD_BUILDERS, REWARD_INFO
from .scale import TESTBED_BASE_CAP, TESTBED_V3_BASE_MEAN, PaperLength

TABLES = ("recipes-table", "rewards-table", "scale-table")
# The comparison's settings (docs/testbed.md): the cap of world v2 and 40 training steps
SCALE_TABLE_CAP, SCALE_TABLE_STEPS = TESTBED_BASE_CAP, 40


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


def _value(value, unit: str) -> str:
    """A paper or testbed value for the scale table: tokens as integers, per-token coefficients to 3 digits.

    >>> _value((48, 96), "length"), _value(1 / 384, "per-token"), _value(4000, "length")
    ('48, 96', '0.0026', '4000')
    """
    if isinstance(value, (tuple, list)):
        return ", ".join(_value(v, unit) for v in value)
    return f"{value:.3g}" if unit == "per-token" else f"{value:g}"


def _reference(length: PaperLength, cap: int, base_mean: float) -> str:
    ref = length.reference
    testbed = "the cap" if ref.kind == "cap" else "the testbed base's mean"
    return f"{ref.kind} {ref.tokens:g} ({ref.source}) -> {testbed}, {ref.testbed_tokens(cap, base_mean):g}"


def scale_table(cap: int = SCALE_TABLE_CAP, max_steps: int = SCALE_TABLE_STEPS) -> str:
    """One row per paper length constant of every registered recipe (`Recipe.paper_lengths`), sorted by recipe: the
    paper's value, the reference it scales by (at world v3's base mean, `TESTBED_V3_BASE_MEAN`), the one rule's
    testbed value (`paper_to_testbed`), the value world v3's comparison trains with (`Recipe.scale(cap, max_steps,
    base_mean)`: the rule's unless the constant states why it is kept), and the value world v2's comparison trained
    with (the recipe's own rule, `Recipe.scale(cap, max_steps)`) with its reason where it differed from the rule at
    world v2's base mean (`TESTBED_BASE_MEAN`).

    >>> scale_table().splitlines()[0]  # doctest: +NORMALIZE_WHITESPACE
    '| Recipe | Constant (unit; source) | Paper | Reference (paper -> testbed v3) | One rule | World v3 | Kept: why |
    World v2 | World v2 differed: why |'
    """
    mean = TESTBED_V3_BASE_MEAN
    lines = ["| Recipe | Constant (unit; source) | Paper | Reference (paper -> testbed v3) | One rule | World v3 | "
             "Kept: why | World v2 | World v2 differed: why |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in RECIPES.names():
        recipe = RECIPES.get(name)
        if not recipe.paper_lengths:
            continue
        v3, v2 = recipe.scale(cap, max_steps, mean), recipe.scale(cap, max_steps)
        for length in recipe.paper_lengths:
            kept = "" if length.agrees(v3, cap, mean) else length.keep or "**none stated**"
            v2_why = "" if length.agrees(v2, cap) else length.exception or "**none stated**"
            cells = [f"`{name}`", f"{_cell(length.name)} ({length.unit}; {_cell(length.source)})",
                     _value(length.paper, length.unit), _cell(_reference(length, cap, mean)),
                     _value(length.rule(cap, mean), length.unit), _value(length.today(v3, cap), length.unit),
                     _cell(kept), _value(length.today(v2, cap), length.unit), _cell(v2_why)]  # fmt: skip
            lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines)


def markdown() -> str:
    """Both tables, as `trl-efficient recipes --markdown` prints them."""
    return f"{recipes_table()}\n\n{rewards_table()}\n"


def _builders() -> dict:
    """Each generated table's marker (`TABLES`) -> the function that builds it."""
    return {"recipes-table": recipes_table, "rewards-table": rewards_table, "scale-table": scale_table}


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
    README holds the recipe and reward tables, docs/scale.md the scale table.

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
