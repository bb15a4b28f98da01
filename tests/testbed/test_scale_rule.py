"""The one scale rule (issue 35, item 1): `paper_to_testbed` on hand-computed values; every recipe whose testbed
scale depends on the cap declares its paper length constants (`RecipeSpec.paper_lengths`, read from the specs); each
testbed value is the rule's or an exception with a reason; docs/scale.md's table is the specs'
(`trl-efficient testbed scale-table`)."""

import json
import math
import os

import pytest

from trl_efficient.recipes.tables import readme_section
from trl_efficient_testbed.scale import (
    TESTBED_BASE_CAP,
    TESTBED_BASE_MEAN,
    TESTBED_V3_BASE_MEAN,
    PaperLength,
    RecipeScale,
    Reference,
    apply_one_rule,
    paper_to_testbed,
)
from trl_efficient_testbed.scale_table import SCALE_TABLE_CAP, SCALE_TABLE_STEPS, scale_table
from trl_efficient_testbed.specs import SPECS

RECIPES = sorted(SPECS)  # the recipes with a spec (that every compared recipe has one: tests/testbed/test_scaling.py)

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


def test_world_v3_base_mean_is_its_world_report():
    from trl_efficient_testbed.scaling import ONE_RULE_BASE_MEANS

    with open(os.path.join(ROOT, "perf", "testbed", "results_v3", "world_report_v3.json"), encoding="utf-8") as f:
        report = json.load(f)
    assert report["model"] == "testbed:v3" and report["max_new_tokens"] == TESTBED_BASE_CAP
    assert abs(report["summary"]["mean_tokens"] - TESTBED_V3_BASE_MEAN) < 0.05  # 159.37 -> 159.4
    assert ONE_RULE_BASE_MEANS == {"testbed:v3": TESTBED_V3_BASE_MEAN}


@pytest.mark.parametrize("name", [n for n in RECIPES if SPECS[n].paper_lengths])
def test_under_the_one_rule_each_value_is_the_rules_or_kept_with_a_reason(name):
    """World v3's comparison: every paper length constant at the rule's value, but those whose `keep` says why."""
    recipe = SPECS[name]
    for cap in (SCALE_TABLE_CAP, 192):
        scale = recipe.at(cap, SCALE_TABLE_STEPS, TESTBED_V3_BASE_MEAN)
        own = recipe.at(cap, SCALE_TABLE_STEPS)
        for length in recipe.paper_lengths:
            if length.keep:
                assert length.today(scale, cap) == length.today(own, cap), (name, length.name)
            else:
                assert length.agrees(scale, cap, TESTBED_V3_BASE_MEAN), (name, length.name)
        # what the rule does not declare stays as the recipe's own rule has it
        assert scale.num_generations == own.num_generations and scale.needs == own.needs


def test_one_rule_keeps_only_world_reasons():
    """The kept constants of world v3, each with its reason; a new one is a decision that belongs in docs/scale.md."""
    kept = {(n, length.name) for n in RECIPES for length in SPECS[n].paper_lengths if length.keep}
    assert kept == {("hbpo", "budgets"), ("hbpo", "l_max (the cosine's horizon)"), ("hbpo", "alpha"),
                    ("curriculum", "final budget"), ("lapo", "target of a prompt without a record")}  # fmt: skip


def test_one_rule_hand_computed_on_the_shared_4k_budget():
    """The same ~4K training budget (issue 35 item 3) lands at one place: DLER's and DA-DLER's 4000 at
    round(4000 x 159.4 / 5500) = 116, DOT-4K's 4096 at round(4096 x 159.4 / 5483) = 119, DA-DLER's easy-group cut
    2000 at 58; ShorterBetter's beta 0.001 x 5226 / 159.4 = 0.03279."""
    scale = lambda name: SPECS[name].at(384, 40, TESTBED_V3_BASE_MEAN)  # noqa: E731
    assert scale("dler").config["max_completion_length"] == 116
    assert scale("da-dler").config["max_completion_length"] == 116
    assert scale("da-dler").config["advantage_kwargs"]["truncate_to"] == 58
    assert scale("dot").config["max_completion_length"] == 119 and scale("dot").config["filter_kwargs"]["margin"] == 1
    assert scale("shorter-better").reward_kwargs["shorter_better"]["beta"] == pytest.approx(0.0327854, rel=1e-5)
    assert scale("frugal").config["max_completion_length"] == 227  # 16384 x 159.4 / 11491 = 227.3


def test_apply_one_rule_leaves_agreeing_scales_untouched_and_copies_the_rest():
    ref = Reference(4096, "cap", "§6")
    alpha = PaperLength("alpha", 0.0003, "per-token", ref, "§6", "reward_kwargs.l1.alpha")
    agreeing = RecipeScale("l1-exact", "own", reward_kwargs={"l1": {"alpha": 0.0003 * 4096 / 384}})
    assert apply_one_rule(agreeing, (alpha,), 384, 159.4) is agreeing
    nested = {"l1": {"alpha": 0.1, "other": 1}}
    out = apply_one_rule(RecipeScale("l1-exact", "own", reward_kwargs=nested), (alpha,), 384, 159.4)
    assert out.reward_kwargs == {"l1": {"alpha": pytest.approx(0.0032), "other": 1}} and nested["l1"]["alpha"] == 0.1
    assert out.rule.startswith("one rule (base mean 159.4): alpha")


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


@pytest.mark.parametrize("name", RECIPES)
def test_every_cap_dependent_value_is_a_declared_paper_length(name):
    """What a recipe's testbed scale changes with the cap is a length constant: it must be declared."""
    recipe = SPECS[name]
    wide, tight = _leaves(recipe.at(384, 40)), _leaves(recipe.at(192, 40))
    moving = sorted(k for k in wide.keys() | tight.keys() if wide.get(k) != tight.get(k))
    fields = [length.field for length in recipe.paper_lengths]
    undeclared = [k for k in moving if not any(k == f or k.startswith(f + ".") for f in fields)]
    assert not undeclared, f"recipe {name!r}: {undeclared} change with the cap but are in no PaperLength"


@pytest.mark.parametrize("name", [n for n in RECIPES if SPECS[n].paper_lengths])
def test_each_testbed_value_is_the_rule_or_a_stated_exception(name):
    recipe = SPECS[name]
    cap, steps = SCALE_TABLE_CAP, SCALE_TABLE_STEPS
    scale = recipe.at(cap, steps)
    for length in recipe.paper_lengths:
        assert length.source and length.reference.source, length
        if length.agrees(scale, cap):
            assert not length.exception, f"{name}: {length.name} agrees with the rule; drop its exception"
        else:
            assert length.exception.strip(), f"{name}: {length.name} differs from the rule and states no reason"
        # at the tight cap too, a value is the rule's or an exception
        assert length.agrees(recipe.at(192, steps), 192) or length.exception


def test_agrees_compares_per_token_values_to_relative_precision():
    length = PaperLength("alpha", 0.0003, "per-token", CAP_4096, "§6", "reward_kwargs.l1.alpha")
    scale = RecipeScale("l1-exact", "r", reward_kwargs={"l1": {"alpha": 0.0003 * 4096 / 384}})
    assert length.agrees(scale, 384) and math.isclose(length.rule(384), 0.0032)


def test_docs_table_is_the_specs():
    with open(os.path.join(ROOT, "docs", "scale.md"), encoding="utf-8") as f:
        docs = f.read()
    assert readme_section(docs, "scale-table") == scale_table(), (
        "docs/scale.md's table differs from the specs: run `trl-efficient testbed scale-table --update docs/scale.md`"
    )


def test_cli_prints_checks_and_updates_the_scale_table(capsys, tmp_path):
    from trl_efficient.cli import main

    assert main(["testbed", "scale-table"]) == 0  # through the library's command table (entry point `testbed`)
    assert capsys.readouterr().out.strip() == scale_table()
    stale = tmp_path / "scale.md"
    stale.write_text("intro\n<!-- scale-table:start -->\nSTALE ROW\n<!-- scale-table:end -->\nend\n")
    assert main(["testbed", "scale-table", "--check", str(stale)]) == 1
    assert "trl-efficient testbed scale-table --update" in capsys.readouterr().err
    assert main(["testbed", "scale-table", "--update", str(stale)]) == 0
    assert readme_section(stale.read_text(), "scale-table") == scale_table()
    assert stale.read_text().startswith("intro\n") and stale.read_text().endswith("end\n")
    assert main(["testbed", "scale-table", "--check", str(stale)]) == 0
    # the library's README tables no longer carry it
    from trl_efficient.recipes import tables

    assert "scale-table" not in tables.TABLES and not hasattr(tables, "scale_table")
