"""The one scale rule (issue 35, item 1): `paper_to_testbed` on hand-computed values; every recipe whose testbed
scale depends on the cap declares its paper length constants (`Recipe.paper_lengths`, read from the registry); each
testbed value is the rule's or an exception with a reason; docs/scale.md's table is the registry's."""

import json
import math
import os

import pytest

from trl_efficient.recipes import RECIPES
from trl_efficient.recipes.scale import (
    TESTBED_BASE_CAP,
    TESTBED_BASE_MEAN,
    PaperLength,
    RecipeScale,
    Reference,
    paper_to_testbed,
)
from trl_efficient.recipes.tables import SCALE_TABLE_CAP, SCALE_TABLE_STEPS, readme_section, scale_table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DLER = Reference(5500, "base mean", "methods.md §4")
CAP_4096 = Reference(4096, "cap", "methods.md §6")


def test_paper_to_testbed_hand_computed():
    # base mean: 4000 * 160.8 / 5500 = 116.9 -> 117; at cap 192 the base's mean is taken as 80.4: 58.5 -> 58
    assert paper_to_testbed(4000, DLER, 384) == 117
    assert paper_to_testbed(4000, DLER, 192) == 58
    # cap: 2000 * 384 / 4096 = 187.5 -> 188 (round half to even: 188); tuples element by element
    assert paper_to_testbed((100, 2000), CAP_4096, 384) == (9, 188)
    # a floor: 128 * 384 / 16384 = 3 -> the minimum 16
    assert paper_to_testbed(128, Reference(16384, "cap", "§3"), 384, minimum=16) == 16
    # per-token, the inverse ratio: 0.001 * 4096 / 384 = 0.010667; 0.001 * 5500 / 160.8 = 0.034204
    assert paper_to_testbed(0.001, CAP_4096, 384, unit="per-token") == pytest.approx(0.0106667, rel=1e-5)
    assert paper_to_testbed(0.001, DLER, 384, unit="per-token") == pytest.approx(0.0342040, rel=1e-5)


def test_paper_to_testbed_refuses_unknown_units_and_references():
    with pytest.raises(ValueError, match="unit must be one of"):
        paper_to_testbed(1, CAP_4096, 384, unit="steps")
    with pytest.raises(ValueError, match="Reference.kind must be one of"):
        Reference(4096, "context", "§1")
    with pytest.raises(ValueError, match="field must start with"):
        PaperLength("m", 32, "length", CAP_4096, "§21", "filter_kwargs.margin")


def test_testbed_base_mean_is_the_world_report():
    with open(os.path.join(ROOT, "perf", "testbed", "results", "world_report_v2.json"), encoding="utf-8") as f:
        report = json.load(f)
    assert report["max_new_tokens"] == TESTBED_BASE_CAP
    assert abs(report["summary"]["mean_tokens"] - TESTBED_BASE_MEAN) < 0.05  # 160.82 -> 160.8


def _leaves(scale: RecipeScale) -> dict[str, object]:
    """`head.key.key` -> value for every leaf of the scale's config, reward_kwargs and recipe_kwargs."""
    out = {}

    def walk(value, path):
        if isinstance(value, dict) and value:
            for key, sub in value.items():
                walk(sub, f"{path}.{key}")
        else:
            out[path] = value

    for head in ("config", "reward_kwargs", "recipe_kwargs"):
        walk(getattr(scale, head), head)
    return out


@pytest.mark.parametrize("name", RECIPES.names())
def test_every_cap_dependent_value_is_a_declared_paper_length(name):
    """What a recipe's testbed scale changes with the cap is a length constant: it must be declared."""
    recipe = RECIPES.get(name)
    wide, tight = _leaves(recipe.scale(384, 40)), _leaves(recipe.scale(192, 40))
    moving = sorted(k for k in wide.keys() | tight.keys() if wide.get(k) != tight.get(k))
    fields = [length.field for length in recipe.paper_lengths]
    undeclared = [k for k in moving if not any(k == f or k.startswith(f + ".") for f in fields)]
    assert not undeclared, f"recipe {name!r}: {undeclared} change with the cap but are in no PaperLength"


@pytest.mark.parametrize("name", [n for n in RECIPES.names() if RECIPES.get(n).paper_lengths])
def test_each_testbed_value_is_the_rule_or_a_stated_exception(name):
    recipe = RECIPES.get(name)
    cap, steps = SCALE_TABLE_CAP, SCALE_TABLE_STEPS
    scale = recipe.scale(cap, steps)
    for length in recipe.paper_lengths:
        assert length.source and length.reference.source, length
        if length.agrees(scale, cap):
            assert not length.exception, f"{name}: {length.name} agrees with the rule; drop its exception"
        else:
            assert length.exception.strip(), f"{name}: {length.name} differs from the rule and states no reason"
        # at the tight cap too, a value is the rule's or an exception
        assert length.agrees(recipe.scale(192, steps), 192) or length.exception


def test_agrees_compares_per_token_values_to_relative_precision():
    length = PaperLength("alpha", 0.0003, "per-token", CAP_4096, "§6", "reward_kwargs.l1.alpha")
    scale = RecipeScale("l1-exact", "r", reward_kwargs={"l1": {"alpha": 0.0003 * 4096 / 384}})
    assert length.agrees(scale, 384) and math.isclose(length.rule(384), 0.0032)


def test_docs_table_is_the_registrys():
    with open(os.path.join(ROOT, "docs", "scale.md"), encoding="utf-8") as f:
        docs = f.read()
    assert readme_section(docs, "scale-table") == scale_table(), (
        "docs/scale.md's table differs from the registry: run `trl-efficient recipes --update-readme docs/scale.md`"
    )


def test_cli_prints_and_updates_the_scale_table(capsys, tmp_path):
    from trl_efficient.cli import main

    assert main(["recipes", "--scale-table"]) == 0
    assert capsys.readouterr().out.strip() == scale_table()
    stale = tmp_path / "scale.md"
    stale.write_text("intro\n<!-- scale-table:start -->\nSTALE ROW\n<!-- scale-table:end -->\nend\n")
    assert main(["recipes", "--check-readme", str(stale)]) == 1
    assert main(["recipes", "--update-readme", str(stale)]) == 0
    assert readme_section(stale.read_text(), "scale-table") == scale_table()
