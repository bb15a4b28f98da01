"""Testbed scaling rules (`trl_efficient_testbed/scaling.py`), per-recipe G, the failure row, the check prompts and the
method families (the checks' statistics: tests/testbed/test_protocol.py): no training here except the `testbed:small`
failure-isolation run (seconds)."""

import json
import math
import os

import pytest
import torch

from trl_efficient.recipes import RECIPES, Recipe, RewardSpec, get_recipe
from trl_efficient_testbed.checks import check_modes, pearson, rank, spearman
from trl_efficient_testbed.runner import TestbedSettings as Settings
from trl_efficient_testbed.runner import build_config, failed_row, scaled_recipe
from trl_efficient_testbed.scaling import recipe_scale, resolve_placeholders
from trl_efficient_testbed.specs import compared_recipes

CAP = 192


def test_every_compared_recipe_has_a_spec(monkeypatch):
    # `--recipes all` compares the library recipes with a spec (specs/: scale, family, claims); every recipe of the
    # committed comparisons has one, and a library recipe without one is left out, not an error for the library
    import json

    from trl_efficient_testbed.checks import CHECKS, SPECIFIC_CHECKS
    from trl_efficient_testbed.specs import SPECS, compared_recipes, spec_of, uncompared_recipes

    assert set(SPECS) <= set(RECIPES.names())  # no spec of a recipe the library does not have
    assert compared_recipes() == sorted(SPECS) and set(compared_recipes()).isdisjoint(uncompared_recipes())
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for world in ("results", "results_v3"):
        with open(os.path.join(root, "perf", "testbed", world, "compare.json")) as f:
            ran = {row["recipe"] for row in json.load(f)["rows"]} & set(RECIPES.names())
        assert ran <= set(compared_recipes()), (world, sorted(ran - set(compared_recipes())))
    for name in compared_recipes():
        spec = spec_of(name)
        assert spec.recipe == name and spec.claim in CHECKS, name
        assert spec.specific is None or spec.specific in SPECIFIC_CHECKS, name
        assert spec.at(CAP, 40).recipe == name  # its rule names it (the run files' keys hold the rule)
    # a recipe the library registers without a spec: the library takes it, the instrument leaves it out of `all`
    # and refuses it by name, in one line
    bare = Recipe(name="bare", method="m", description="d", rewards=(RewardSpec("correctness"),))
    monkeypatch.setitem(RECIPES._entries, "bare", bare)
    assert "bare" not in compared_recipes() and "bare" in uncompared_recipes()
    with pytest.raises(ValueError, match=r"recipe 'bare' has no testbed spec: .*trl_efficient_testbed/specs"):
        recipe_scale("bare")
    with pytest.raises(ValueError, match="Unknown recipe"):
        recipe_scale("not-a-recipe")


def _validate(name, tmp_path, tiny_model_dir, tokenizer):
    """Build everything `train_recipe` builds before training: config, estimator, filter, rollout plan, dataset
    preparation inputs and reward callables."""
    from trl_efficient.trainer.advantages import ADVANTAGE_ESTIMATORS
    from trl_efficient.trainer.config import build_rollout_plan
    from trl_efficient.trainer.filters import COMPLETION_FILTERS

    settings = Settings(max_completion_length=CAP)
    scale = recipe_scale(name, CAP, settings.max_steps)
    recipe = scaled_recipe(get_recipe(name), scale)
    args = build_config(recipe, settings, str(tmp_path / name), scale=scale)
    assert args.max_completion_length == scale.config.get("max_completion_length", CAP)  # Frugal: its own cap
    if args.advantage_estimator != "grpo":
        entry = ADVANTAGE_ESTIMATORS.get(args.advantage_estimator)
        if isinstance(entry, type):
            entry(args, **(args.advantage_kwargs or {}))  # the estimator's own validation (e.g. DA-DLER truncate_to)
    if args.completion_filter:
        entry = COMPLETION_FILTERS.get(args.completion_filter)
        if isinstance(entry, type):
            entry(args, **(args.filter_kwargs or {}))
    plan = build_rollout_plan(args)
    if plan is not None:
        plan.validate(args.num_generations, args.max_completion_length)
    if name == "saber":
        from trl_efficient.prompts import validate_tiers

        tiers = validate_tiers(scale.recipe_kwargs["tiers"])
        assert tiers[0] < CAP  # otherwise the budget penalty could never apply
    elif name == "bingo":
        from trl_efficient.recipes.bingo import prepare_bingo

        kwargs = resolve_placeholders(scale.recipe_kwargs, tiny_model_dir)
        assert kwargs["scorer"] == f"self-information:{tiny_model_dir}"  # offline scorer, no download
        prepare_bingo(None, args, tokenizer, **kwargs)  # checks the kwargs against get_bingo_length_reward
    funcs, weights = recipe.build_reward_funcs(args, tokenizer)
    assert len(funcs) == len(weights) == len(recipe.rewards)
    return scale, args


@pytest.mark.parametrize("name", compared_recipes())
def test_rule_output_passes_the_recipe_validation_at_the_testbed_cap(name, tmp_path, tiny_model_dir, monkeypatch):
    from transformers import AutoTokenizer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)  # name_or_path = Bingo's frozen reference policy
    scale, args = _validate(name, tmp_path, tiny_model_dir, tokenizer)
    assert scale.rule and scale.recipe == name
    # every length constant the rule sets lies within the testbed cap
    for key in ("budgets", "target_length_range"):
        if key in scale.config:
            assert all(0 < v <= CAP for v in scale.config[key]), (key, scale.config[key])


def test_paper_constants_are_scaled_by_cap_over_paper_cap():
    hbpo = recipe_scale("hbpo", CAP)
    assert hbpo.config["budgets"] == [24, 48, 96, 120]  # 512, 1024, 2048, 2560 x 192/4096
    k = hbpo.config["advantage_kwargs"]
    assert k["l_max"] == 192 and k["alpha"] == pytest.approx(1 / 192) and k["beta"] == 4.0
    # the cosine ceiling f2(b) = beta cos(pi b / (2 l_max)) is no longer flat below the cap: with equal rewards the
    # inter-group term is 0 and the advantage is -f2(b), so budgets 30 and 150 differ by f2(30) - f2(150) =
    # 4 cos(pi 30 / 384) - 4 cos(pi 150 / 384) = 3.880 - 1.348 = 2.533 (at the paper's l_max 4096: 0.025)
    from trl_efficient.methods.hbpo import hbpo_advantages

    def ceiling_gap(l_max):
        adv = hbpo_advantages(torch.zeros(4), torch.tensor([30.0, 30.0, 150.0, 150.0]), 4, beta=k["beta"],
                              l_max=l_max, zero_equal_groups=False)  # fmt: skip
        return (adv[2] - adv[0]).item()

    assert ceiling_gap(k["l_max"]) == pytest.approx(2.533, abs=1e-3) and ceiling_gap(4096) < 0.03
    l1 = recipe_scale("l1-exact", CAP)
    assert l1.config["target_length_range"] == [5, 188]  # 100, 4000 x 192/4096 = 4.7, 187.5
    assert l1.reward_kwargs["l1"]["alpha"] == pytest.approx(0.0003 * 4096 / 192)  # 0.0064
    # a deviation of half the cap now costs as much as half the paper's cap did: 0.0064 * 96 = 0.0003 * 2048 = 0.61
    assert l1.reward_kwargs["l1"]["alpha"] * 96 == pytest.approx(0.0003 * 2048)
    assert recipe_scale("l1-max", CAP).reward_kwargs["l1"]["alpha"] == pytest.approx(0.001 * 4096 / 192)
    assert recipe_scale("da-dler", CAP).config["advantage_kwargs"]["truncate_to"] == 96  # 2000 x 192/4000
    assert recipe_scale("da-dler", CAP).config["max_completion_length"] == CAP
    # DLER's penalty is its truncation, and it must bind as the paper's 4000 does: training truncates at cap/2
    assert recipe_scale("dler", CAP).config == {"max_completion_length": 96}
    assert recipe_scale("laser", CAP).reward_kwargs["laser"]["target_length"] == 24  # 2048 x 192/16384
    assert recipe_scale("shorter-better", CAP).reward_kwargs["shorter_better"]["beta"] == pytest.approx(
        0.001 * 4096 / 192
    )
    assert recipe_scale("saber", CAP).recipe_kwargs["tiers"] == [16, 48, 192]  # 128 -> 1.5 -> floor 16; 4096 -> 48
    bingo = recipe_scale("bingo", CAP, max_steps=40)
    assert (bingo.recipe_kwargs["schedule_start"], bingo.recipe_kwargs["schedule_window"]) == (10, 5)
    assert recipe_scale("kimi", CAP).config == {} and "scale-free" in recipe_scale("kimi", CAP).rule


def test_scaling_changes_only_the_constants_it_scales(tmp_path):
    # A rule states what it scales; every other method setting is the recipe's. DA-DLER on the testbed keeps the
    # released script's +0.1 correct-sample boost and its 0.75 solve-rate threshold (methods.md §4), with truncate_to
    # 2000 x 192/4000 = 96; HBPO keeps beta 4 and the paper variant, with alpha 1/192 and l_max 192 (§2).
    settings = Settings(max_completion_length=CAP)
    dadler = build_config(get_recipe("da-dler"), settings, str(tmp_path / "d")).advantage_kwargs
    assert dadler == {"solve_rate_threshold": 0.75, "truncate_to": 96, "correct_boost": 0.1}
    hbpo = build_config(get_recipe("hbpo"), settings, str(tmp_path / "h")).advantage_kwargs
    assert hbpo["l_max"] == 192 and hbpo["alpha"] == pytest.approx(1 / 192)
    assert {k: v for k, v in hbpo.items() if k not in ("l_max", "alpha")} == {
        k: v for k, v in get_recipe("hbpo").config_overrides["advantage_kwargs"].items() if k not in ("l_max", "alpha")
    }


def test_each_recipe_gets_its_own_g_and_the_same_prompts_per_step(tmp_path):
    settings = Settings(max_completion_length=CAP)  # 32 rows, G = 8: 4 prompts per step
    seen = {}
    for name in ("grpo", "gfpo", "gfpo-adaptive", "hbpo", "kimi"):
        scale = recipe_scale(name, CAP)
        args = build_config(scaled_recipe(get_recipe(name), scale), settings, str(tmp_path / name), scale=scale)
        seen[name] = (args.num_generations, args.per_device_train_batch_size)
    assert seen == {"grpo": (8, 32), "kimi": (8, 32), "gfpo": (16, 64), "gfpo-adaptive": (16, 64), "hbpo": (16, 64)}
    gfpo = build_config(get_recipe("gfpo"), settings, str(tmp_path / "g"), scale=recipe_scale("gfpo", CAP))
    assert gfpo.advantage_kwargs["k"] == 8 < gfpo.num_generations  # GFPO now filters: keeps 8 of 16


def test_scaled_recipe_rejects_kwargs_for_an_unused_builder():
    from trl_efficient_testbed.scaling import RecipeScale

    with pytest.raises(ValueError, match="does not use"):
        scaled_recipe(get_recipe("grpo"), RecipeScale("grpo", "x", reward_kwargs={"l1": {"alpha": 1.0}}))


def test_correlations_and_ranks_by_hand():
    assert rank([3, 1, 2]) == [3.0, 1.0, 2.0]
    # x = 1..4, y = 2,4,5,9: means 2.5, 5; sxy = 1.5*3 + .5*1 + .5*0 + 1.5*4 = 11, sxx = 5, syy = 9+1+0+16 = 26
    assert pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / math.sqrt(5 * 26))
    assert spearman([1, 2, 3, 4], [9, 5, 4, 2]) == pytest.approx(-1.0)
    assert pearson([1, 1], [2, 3]) is None and pearson([1], [1]) is None


def test_every_registered_recipe_declares_a_known_method_family():
    from trl_efficient_testbed.checks import family_of
    from trl_efficient_testbed.scale import scale_free
    from trl_efficient_testbed.specs import FAMILIES, SPECS, RecipeSpec

    assert {family_of(name) for name in SPECS} == set(FAMILIES)  # every family has members
    assert family_of("no-such-recipe") == "other"
    with pytest.raises(ValueError, match="family must be one of"):
        RecipeSpec("x", scale_free("x", "none"), family="misc")


def test_check_modes_follow_the_scaled_constants():
    hbpo = check_modes("hbpo", recipe_scale("hbpo", CAP))
    assert [m.value for m in hbpo] == [24, 48, 96, 120] and hbpo[0].prefill.endswith("with 24 tokens")
    l1 = check_modes("l1-exact", recipe_scale("l1-exact", CAP))
    assert [m.value for m in l1] == [
        23,
        60,
        96,
        133,
        170,
    ]  # 5 + 183 * (0.1, 0.3, 0.5, 0.7, 0.9) = 23.3, 59.9, 96.5, 133.1, 169.7
    assert l1[0].user_suffix == " Think for 23 tokens."
    assert [m.value for m in check_modes("saber", recipe_scale("saber", CAP))] == [16, 48, 192]  # 128, 4096, 16384
    bt = check_modes("budgetthinker", recipe_scale("budgetthinker", CAP))  # final choices 2000/4000/6000 x 192/10000
    assert [(m.value, m.control_budget) for m in bt] == [(38, 38), (77, 77), (115, 115)]
    assert check_modes("kimi", recipe_scale("kimi", CAP)) == []


def test_failed_row_is_one_line():
    row = failed_row("bingo", OSError("We couldn't connect to 'https://huggingface.co'\n to load this file"), 8)
    assert row == {"recipe": "bingo", "status": "failed", "num_generations": 8,
                   "error": "OSError: We couldn't connect to 'https://huggingface.co' to load this file"}  # fmt: skip


@pytest.fixture()
def small_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TRL_EFFICIENT_CACHE", str(tmp_path_factory.mktemp("tbcache_fail")))


def test_a_failing_recipe_is_a_row_and_the_others_still_run(small_cache, tmp_path, monkeypatch):
    """compare() with one recipe raising: its row says failed with the error, the other recipe and the base are
    measured, the table and the plot are written, and the CLI exits with status 1."""
    from transformers import AutoModelForCausalLM

    from trl_efficient.overthinking.base import resolve_base_model
    from trl_efficient_testbed import cli, training

    base = resolve_base_model("testbed:small")

    def fake_train(name, settings, folder, **kwargs):
        if name == "saber":
            raise RuntimeError("boom |\n second line")
        return {
            "seconds": 0.0,
            "log_history": [],
            "testbed_scale": {},
            "model": AutoModelForCausalLM.from_pretrained(base),
        }

    monkeypatch.setattr(training, "train_recipe", fake_train)
    out_dir = tmp_path / "cmp"
    code = cli.main(["compare", "--recipes", "grpo", "saber", "--base-model", "testbed:small", "--output-dir",
                     str(out_dir), "--set", "num_eval=3", "--set", "eval_samples=1", "--set", "check_eval=2",
                     "--set", "max_completion_length=16"])  # fmt: skip
    assert code == 1
    data = json.load(open(out_dir / "compare.json"))
    rows = {r["recipe"]: r for r in data["rows"]}
    assert rows["saber"] == {"recipe": "saber", "status": "failed", "num_generations": 8,
                             "error": "RuntimeError: boom | second line"}  # fmt: skip
    assert rows["grpo"]["status"] == "ok" and rows["base"]["status"] == "ok" and rows["grpo"]["num_generations"] == 8
    md = open(out_dir / "compare.md").read()
    assert "| saber | 8 | **failed**: RuntimeError: boom \\| second line |" in md
    assert "- `saber`: tiers x cap/16384" in md and os.path.isfile(out_dir / "pareto.png")
    assert not list((out_dir / "runs").glob("saber/*.json"))  # a failure is not cached: a rerun retries it
    assert len(list((out_dir / "runs").glob("grpo/seed*.json"))) == 3  # one file per training seed


def test_curriculum_and_frugal_rules_keep_the_papers_anchors():
    """Curriculum (methods.md §22): 256 -> 87 tokens, the start at the base model's length (the paper's 256 against
    its base's 258.4; testbed:v2 writes 160.8 tokens at world v2's 384-token cap: world_report_v2.md) and the end at
    what the tasks need (the paper's 87; cap / 2 x 87/256 = 65, the tasks' mean floor of 61.7). FRUGAL (§30): the
    paper's 16k context is 16384 / 11491 = 1.43x its base model's mean output; 0.6 x 384 = 230 tokens is 1.43x
    testbed:v2's 161, and `build_config` trains at that cap while every other recipe keeps the common one."""
    budgets = recipe_scale("curriculum", 384, 40).config["rollout_plan_kwargs"]
    assert (budgets["initial_budget"], budgets["final_budget"]) == (round(160.8), 65)
    # the rule's training cap is the paper's ratio of context to mean output (16384 / 11491 = 1.43) times the base's 161
    frugal = recipe_scale("frugal", 384, 40).config["max_completion_length"]
    assert frugal == 230 and abs(frugal / 160.8 - 16384 / 11491) < 0.01
    settings = Settings(max_completion_length=384)
    assert build_config(get_recipe("frugal"), settings, "unused").max_completion_length == 230
    assert build_config(get_recipe("kimi"), settings, "unused").max_completion_length == 384
