"""docs/scale.md's table: the paper length constants of every recipe with a spec at the testbed
(`specs.RecipeSpec.paper_lengths` through the one rule, `scale.paper_to_testbed`), printed, written between the file's
markers or checked against them by `trl-efficient testbed scale-table [--update docs/scale.md | --check docs/scale.md]`.
"""

from __future__ import annotations

import sys

from trl_efficient.recipes.tables import readme_section, replace_readme_section

from .scale import TESTBED_BASE_CAP, TESTBED_V3_BASE_MEAN, PaperLength
from .specs import SPECS

__all__ = ["MARKER", "SCALE_TABLE_CAP", "SCALE_TABLE_STEPS", "check_or_update", "scale_table"]

MARKER = "scale-table"  # docs/scale.md holds the table between `<!-- scale-table:start -->` and `:end -->`
# The comparison's settings (docs/testbed.md): the cap of world v2 and 40 training steps
SCALE_TABLE_CAP, SCALE_TABLE_STEPS = TESTBED_BASE_CAP, 40


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


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
    """One row per paper length constant of every registered recipe (`RecipeSpec.paper_lengths`), sorted by recipe: the
    paper's value, the reference it scales by (at world v3's base mean, `TESTBED_V3_BASE_MEAN`), the one rule's
    testbed value (`paper_to_testbed`), the value world v3's comparison trains with (`RecipeSpec.at(cap, max_steps,
    base_mean)`: the rule's unless the constant states why it is kept), and the value world v2's comparison trained
    with (the recipe's own rule, `RecipeSpec.at(cap, max_steps)`) with its reason where it differed from the rule at
    world v2's base mean (`TESTBED_BASE_MEAN`).

    >>> scale_table().splitlines()[0]  # doctest: +NORMALIZE_WHITESPACE
    '| Recipe | Constant (unit; source) | Paper | Reference (paper -> testbed v3) | One rule | World v3 | Kept: why |
    World v2 | World v2 differed: why |'
    """
    mean = TESTBED_V3_BASE_MEAN
    lines = ["| Recipe | Constant (unit; source) | Paper | Reference (paper -> testbed v3) | One rule | World v3 | "
             "Kept: why | World v2 | World v2 differed: why |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in sorted(SPECS):
        spec = SPECS[name]
        if not spec.paper_lengths:
            continue
        v3, v2 = spec.at(cap, max_steps, mean), spec.at(cap, max_steps)
        for length in spec.paper_lengths:
            kept = "" if length.agrees(v3, cap, mean) else length.keep or "**none stated**"
            v2_why = "" if length.agrees(v2, cap) else length.exception or "**none stated**"
            cells = [f"`{name}`", f"{_cell(length.name)} ({length.unit}; {_cell(length.source)})",
                     _value(length.paper, length.unit), _cell(_reference(length, cap, mean)),
                     _value(length.rule(cap, mean), length.unit), _value(length.today(v3, cap), length.unit),
                     _cell(kept), _value(length.today(v2, cap), length.unit), _cell(v2_why)]  # fmt: skip
            lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines)


def check_or_update(path: str, update: bool) -> int:
    """Compare the table between `path`'s markers with `scale_table()` (exit status 1 and a line on stderr when they
    differ), or, with `update`, rewrite it there."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    fresh = scale_table()
    if update:
        updated = replace_readme_section(text, MARKER, fresh)
        if updated != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(updated)
        return 0
    if readme_section(text, MARKER) != fresh:
        print(f"{path}: the scale table differs from the specs; run `trl-efficient testbed scale-table --update "
              f"{path}`", file=sys.stderr)  # fmt: skip
        return 1
    return 0
