"""Per-difficulty tokens-to-floor ratio, the worst ratio at kept accuracy, the testbed plots, `testbed sweep` and the
frontier's Pareto marking. Values are computed by hand in the comments; the end-to-end sweep runs the `small` base
model (trained in seconds into a temporary cache) for 1 step per point."""

import json
import math
import os

import pytest

from trl_efficient_testbed.runner import MISSING, compare_markdown, render_compare_json, worst_ratio_cell
from trl_efficient_testbed.summary import floor_ratio_by_difficulty, worst_ratio_at_kept_accuracy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _cell(tokens, floor, accuracy, n=100):
    return {"mean_tokens": tokens, "mean_floor_tokens": floor, "accuracy": accuracy, "n": n}


def _summary(by_difficulty):
    return {"accuracy": 0.7, "mean_tokens": 60.0, "std_tokens": 10.0, "n": 300, "mean_floor_tokens": 40.0,
            "excess_over_floor": 20.0, "redundant_share": 0.2, "skips_per_completion": 0.0, "truncated_fraction": 0.0,
            "tight_cap": 96, "tight_truncated_fraction": 0.0, "by_difficulty": by_difficulty}  # fmt: skip


def _rows():
    from trl_efficient_testbed.runner import _row

    # recipe: k=1 30/20 = 1.5 (acc 0.9), k=2 60/40 = 1.5 (acc 0.5), k=3 100/50 = 2.0 (acc 0.80)
    recipe = _row("kimi", _summary({"1": _cell(30, 20, 0.9), "2": _cell(60, 40, 0.5), "3": _cell(100, 50, 0.80)}))
    # reference (grpo): k=1 24/20 = 1.2, k=2 56/40 = 1.4, k=3 70/50 = 1.4
    grpo = _row("grpo", _summary({"1": _cell(24, 20, 0.9), "2": _cell(56, 40, 0.8), "3": _cell(70, 50, 0.84)}))
    # base: k=1 26/20 = 1.3 (acc 0.9), k=2 68/40 = 1.7 (acc 0.85), k=3 60/50 = 1.2 (acc 0.5)
    base = _row("base", _summary({"1": _cell(26, 20, 0.9), "2": _cell(68, 40, 0.85), "3": _cell(60, 50, 0.5)}))
    return base, grpo, recipe


def test_row_has_per_difficulty_ratio_and_accuracy():
    _, _, recipe = _rows()
    assert recipe["floor_ratio_by_difficulty"] == {"1": 1.5, "2": 1.5, "3": 2.0}  # 30/20, 60/40, 100/50
    assert recipe["accuracy_by_difficulty"] == {"1": 0.9, "2": 0.5, "3": 0.80}
    assert floor_ratio_by_difficulty({"4": _cell(10, 0, 1.0)}) == {"4": None}  # no floor: no ratio, no crash


def test_worst_ratio_at_kept_accuracy_by_hand():
    base, grpo, recipe = _rows()
    # tolerance at k = max(0.04, 2 sqrt(p1(1-p1)/n1 + p2(1-p2)/n2)), n = 100:
    # k=1: 0.9 vs 0.9, noise 2 sqrt(0.0009 + 0.0009) = 0.0849 -> kept, ratio 1.5
    # k=2: 0.5 vs 0.8, noise 2 sqrt(0.0025 + 0.0016) = 0.128 -> 0.5 < 0.672: lost
    # k=3: 0.80 vs 0.84, noise 2 sqrt(0.0016 + 0.001344) = 0.1085 -> 0.80 >= 0.7315: kept, ratio 2.0
    worst, k = worst_ratio_at_kept_accuracy(recipe, grpo)
    assert math.isclose(worst, 2.0) and k == "3"
    # the reference of grpo is the base: k=1 kept (1.2), k=2 0.8 vs 0.85 noise 2 sqrt(0.0016 + 0.001275) = 0.107
    # -> 0.8 >= 0.743 kept (1.4), k=3 0.84 vs 0.5 kept (1.4): worst 1.4 at k=2 (the first of the tie)
    assert worst_ratio_at_kept_accuracy(grpo, base) == (1.4, "2")
    # the base is the reference itself: every k counts, worst 68/40 = 1.7 at k=2
    assert worst_ratio_at_kept_accuracy(base, None) == (1.7, "2")
    cells = {r["recipe"]: worst_ratio_cell(r, [base, grpo, recipe]) for r in (base, grpo, recipe)}
    assert cells == {"base": "1.70 (k=2)", "grpo": "1.40 (k=2)", "kimi": "2.00 (k=3)"}
    # with many samples the noise is small and the 0.04 floor of the tolerance decides:
    # 0.85 vs 0.9 at n = 10000: noise 2 sqrt(0.1275/1e4 + 0.09/1e4) = 0.0093 < 0.04 -> 0.85 < 0.86: lost
    big = {"accuracy_by_difficulty": {"1": 0.85}, "floor_ratio_by_difficulty": {"1": 1.1},
           "by_difficulty": {"1": {"n": 10000}}}  # fmt: skip
    ref = {"accuracy_by_difficulty": {"1": 0.9}, "by_difficulty": {"1": {"n": 10000}}}
    assert worst_ratio_at_kept_accuracy(big, ref) is None
    big["accuracy_by_difficulty"]["1"] = 0.87  # 0.87 >= 0.86: kept
    assert worst_ratio_at_kept_accuracy(big, ref) == (1.1, "1")


def test_worst_ratio_is_missing_when_no_k_keeps_accuracy_or_the_row_is_old():
    base, grpo, recipe = _rows()
    recipe["accuracy_by_difficulty"] = {"1": 0.0, "2": 0.0, "3": 0.0}
    assert worst_ratio_cell(recipe, [base, grpo, recipe]) == MISSING
    old = {k: v for k, v in grpo.items() if k not in ("accuracy_by_difficulty", "floor_ratio_by_difficulty")}
    assert worst_ratio_cell(old, [base, old]) == MISSING
    assert worst_ratio_cell(recipe, [base, old, recipe]) == MISSING  # its reference is old: not comparable
    md = compare_markdown([base, grpo, recipe])
    assert "| worst tokens/floor (k) |" in md and "| 1.70 (k=2) |" in md and "keeps the accuracy of grpo" in md


def test_compare_json_without_the_fields_renders_dashes(tmp_path):
    path = os.path.join(ROOT, "perf", "testbed", "results", "compare.json")
    data = json.load(open(path))
    ok = [r for r in data["rows"] if r.get("status", "ok") == "ok"]
    md = render_compare_json(path)
    assert all("accuracy_by_difficulty" in r for r in ok) and "| worst tokens/floor (k) |" in md
    assert sum(worst_ratio_cell(r, ok) != MISSING for r in ok) == len(ok)  # the committed rows have the fields
    # the same rows as written before the per-difficulty fields and the intervals existed: a dash in every ok row
    old_keys = ("accuracy_by_difficulty", "floor_ratio_by_difficulty", "ci", "ci_by_difficulty", "vs_reference")
    data["rows"] = [{k: v for k, v in r.items() if k not in old_keys} for r in data["rows"]]
    for r in data["rows"]:
        if r.get("method_check"):
            r["method_check"] = {k: r["method_check"][k] for k in ("claim", "measured", "held")}
    old = tmp_path / "compare.json"
    old.write_text(json.dumps(data))
    old_md = render_compare_json(str(old))
    assert old_md.count(f"| {MISSING} |") >= len(ok) and "| worst tokens/floor (k) |" in old_md


def test_per_difficulty_plot_is_written_and_fails_loudly(tmp_path):
    from trl_efficient_testbed.plots import per_difficulty_plot

    rows = list(_rows())
    path = per_difficulty_plot(rows, str(tmp_path / "pd.png"))
    assert path and open(path, "rb").read(8) == PNG_MAGIC
    with pytest.raises(ValueError, match="no rows"):
        per_difficulty_plot([], str(tmp_path / "empty.png"))
    old = {k: v for k, v in rows[0].items() if k != "floor_ratio_by_difficulty"}
    with pytest.raises(ValueError, match="'base' has no floor_ratio_by_difficulty"):
        per_difficulty_plot([old], str(tmp_path / "old.png"))
    assert not (tmp_path / "old.png").exists()


def _pt(label, tokens, accuracy, recipe="laser"):
    return {"recipe": recipe, "label": label, "status": "ok", "mean_tokens": tokens, "accuracy": accuracy,
            "mean_floor_tokens": 60.0}  # fmt: skip


def test_frontier_pareto_marking_by_hand(tmp_path):
    from trl_efficient_testbed.plots import frontier_plot
    from trl_efficient_testbed.sweep import _mark_pareto

    # A (60, 0.50) optimal: nothing has <= 60 tokens. B (70, 0.50) dominated by A (fewer tokens, same accuracy).
    # C (80, 0.60) optimal: the only points at >= 0.60 have more tokens. D (90, 0.55) dominated by C.
    # base (84, 0.58) dominated by C (80 <= 84, 0.60 >= 0.58). grpo (71, 0.54) optimal: A and B are less accurate,
    # C and D longer. E (80, 0.60) of another recipe ties C: neither strictly beats the other, both optimal.
    def refs():
        return [_pt("base", 84, 0.58, "base"), _pt("grpo", 71, 0.54, "grpo")]

    s1 = {"recipe": "laser", "keys": ["k"], "points": [_pt("A", 60, 0.5), _pt("B", 70, 0.5), _pt("C", 80, 0.6)],
          "references": refs()}  # fmt: skip
    s2 = {"recipe": "kimi", "keys": ["w"], "points": [_pt("D", 90, 0.55, "kimi"), _pt("E", 80, 0.6, "kimi"),
          {"recipe": "kimi", "label": "F", "status": "failed", "error": "boom"}], "references": refs()}  # fmt: skip
    _mark_pareto([s1, s2])
    assert [p["pareto"] for p in s1["points"]] == [True, False, True]
    assert [p.get("pareto") for p in s2["points"]] == [False, True, None]
    for s in (s1, s2):  # each sweep's copy of a reference gets the same mark
        assert [r["pareto"] for r in s["references"]] == [False, True]
    path = frontier_plot([s1, s2], str(tmp_path / "f.png"))
    assert open(path, "rb").read(8) == PNG_MAGIC
    with pytest.raises(ValueError, match="no successful sweep points"):
        frontier_plot([{"recipe": "x", "points": [s2["points"][2]], "references": refs()}], str(tmp_path / "g.png"))
    with pytest.raises(ValueError, match="has no 'mean_tokens'"):
        frontier_plot([{"recipe": "x", "points": [{"label": "bad", "accuracy": 0.5}]}], str(tmp_path / "h.png"))


def test_sweep_keys_resolve_and_fail_fast():
    from trl_efficient_testbed.runner import TestbedSettings
    from trl_efficient_testbed.sweep import parse_sweep_set, resolve_point, sweep_grid

    settings = TestbedSettings(max_completion_length=192)  # LASER's L_T 2048 x 192/16384 = 24
    cfg, rewards, resolved = resolve_point("laser", {"reward.laser.target_length": "x2"}, settings)
    assert cfg == {} and rewards == {"laser": {"target_length": 48}} and resolved["reward.laser.target_length"] == 48
    # a reward argument the recipe does not set: multiplies the factory default (LASER alpha 0.5 -> 0.25)
    assert resolve_point("laser", {"reward.laser.alpha": "x0.5"}, settings)[1] == {"laser": {"alpha": 0.25}}
    assert resolve_point("kimi", {"reward.kimi_length.weight": "x2"}, settings)[1] == {"kimi_length": {"weight": 0.8}}
    cfg, _, _ = resolve_point("da-dler", {"advantage_kwargs.truncate_to": 48, "learning_rate": 2e-4}, settings)
    assert cfg["learning_rate"] == 2e-4 and cfg["advantage_kwargs"]["truncate_to"] == 48
    assert "correct_boost" in cfg["advantage_kwargs"]  # the other entries of the dict field are kept
    # a multiple of an integer setting is the nearest integer (world v3's DA-DLER cut 58 x 0.75 = 43.5 -> 44; the
    # trainer refuses a non-integer truncate_to at config time)
    cfg, _, resolved = resolve_point("da-dler", {"advantage_kwargs.truncate_to": "x0.75"},
                                     TestbedSettings(base_model="testbed:v3"))  # fmt: skip
    assert cfg["advantage_kwargs"]["truncate_to"] == 44 and isinstance(resolved["advantage_kwargs.truncate_to"], int)
    for point, match in [({"reward.l1.alpha": 0.1}, "has no reward 'l1'"),
                         ({"reward.laser.no_such": 1}, "has no argument 'no_such'"),
                         ({"no_such_field": 1}, "neither an EfficientGRPOConfig field"),
                         ({"loss_type": "x2"}, "has no number there")]:  # fmt: skip
        with pytest.raises(ValueError, match=match):
            resolve_point("laser", point, settings)
    from trl_efficient_testbed.scaling import recipe_scale
    from trl_efficient_testbed.sweep import changed_overrides

    scale = recipe_scale("laser", 192, 40)
    # a config value equal to the recipe's testbed config changes nothing (the point shares compare's runs)
    assert changed_overrides("laser", {"learning_rate": 1e-4}, settings, scale) == {}
    assert changed_overrides("laser", {"learning_rate": 2e-4}, settings, scale) == {"learning_rate": 2e-4}
    key, values = parse_sweep_set("reward.laser.target_length=24,48")
    assert len(sweep_grid({key: values, "learning_rate": [1e-4, 2e-4]})) == 4
    with pytest.raises(ValueError, match="key=v1,v2"):
        parse_sweep_set("reward.laser.target_length")


TINY = ["--base-model", "testbed:small", "--setting", "max_steps=1", "--setting", "num_train=16", "--setting",
        "num_eval=4", "--setting", "eval_samples=1", "--setting", "per_device_train_batch_size=8", "--setting",
        "num_generations=4", "--setting", "max_completion_length=24", "--setting", "max_ops=3", "--setting", "seeds=1",
        "--setting", "bootstrap=100"]  # fmt: skip


def test_sweep_cli_end_to_end_then_frontier(small_base, tmp_path):
    from trl_efficient.overthinking.base import base_model_id
    from trl_efficient_testbed.cli import main
    from trl_efficient_testbed.jobs import plan_job
    from trl_efficient_testbed.runner import TestbedSettings

    out = tmp_path / "sw"
    settings = TestbedSettings(base_model="testbed:small", max_steps=1, num_train=16, num_eval=4, eval_samples=1,
                               per_device_train_batch_size=8, num_generations=4, max_completion_length=24,
                               max_ops=3, seeds=1, bootstrap=100)  # fmt: skip
    argv = ["sweep", "--recipe", "laser", "--set", "reward.laser.target_length=x1,x2", *TINY, "--references",
            "base", "--output-dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    sweep = json.loads((out / "sweep_laser.json").read_text())
    # cap 24: L_T 2048 x 24/16384 = 3, so x1 -> 3 and x2 -> 6
    assert [p["label"] for p in sweep["points"]] == ["target_length=3", "target_length=6"]
    assert [p["point"] for p in sweep["points"]] == [{"reward.laser.target_length": v} for v in (3, 6)]
    for p in sweep["points"]:  # every point has its intervals and its pairing with the reference
        assert p["status"] == "ok" and "pareto" in p and p["accuracy_by_difficulty"] and p["seeds"] == [0]
        assert p["ci"]["mean_tokens"][0] <= p["mean_tokens"] <= p["ci"]["mean_tokens"][1]
        assert p["vs_reference"]["reference"] == "base"
    assert [r["recipe"] for r in sweep["references"]] == ["base"] and sweep["settings"]["max_steps"] == 1
    assert (out / "sweep_laser.png").read_bytes()[:8] == PNG_MAGIC
    md = (out / "sweep_laser.md").read_text()
    assert "| target_length=6 |" in md and "| base |" in md
    # the x1 point is laser as compare trains it: the same run file (job hash) as compare's laser seed 0
    base_id = base_model_id(small_base)
    same = plan_job("laser", 0, settings, str(out), base_id)
    assert os.path.isfile(same.path)
    runs = sorted((out / "runs" / "laser").glob("*.json"))
    assert len(runs) == 2 and not any(f.suffix == ".safetensors" for f in (out / "runs" / "laser").rglob("*"))
    stamps = [os.path.getmtime(p) for p in runs]
    assert main(argv) == 0  # cached: nothing retrained
    assert [os.path.getmtime(p) for p in runs] == stamps
    assert main(["frontier", str(out / "sweep_laser.json"), "--out", str(tmp_path / "f" / "frontier.png")]) == 0
    assert (tmp_path / "f" / "frontier.png").read_bytes()[:8] == PNG_MAGIC
    assert "### laser" in (tmp_path / "f" / "frontier.md").read_text()
    # a key the recipe cannot take fails before anything trains
    with pytest.raises(ValueError, match="has no reward 'kimi_length'"):
        main(["sweep", "--recipe", "laser", "--set", "reward.kimi_length.weight=1,2", *TINY, "--output-dir",
              str(tmp_path / "bad")])  # fmt: skip
    assert not (tmp_path / "bad" / "runs").exists()


def test_plots_cli_redraws_from_compare_json(tmp_path):
    from trl_efficient_testbed.cli import main

    path = tmp_path / "compare.json"
    path.write_text(json.dumps({"settings": {"max_steps": 40}, "rows": list(_rows())}))
    assert main(["plots", str(path)]) == 0
    assert (tmp_path / "per_difficulty.png").read_bytes()[:8] == PNG_MAGIC


def test_frontier_script_skips_what_cannot_run():
    import importlib.util

    spec = importlib.util.spec_from_file_location("frontier", os.path.join(ROOT, "perf", "testbed", "frontier.py"))
    frontier = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(frontier)
    from trl_efficient_testbed.runner import TestbedSettings

    runnable, skipped = frontier.plan(["laser", "no-such-recipe"], TestbedSettings())
    assert runnable == [("laser", {"reward.laser.target_length": ["x1", "x2", "x4"]})]
    assert "no entry in FRONTIER_SWEEPS" in skipped["no-such-recipe"]
    assert all(len(values) == 3 for _, values in frontier.FRONTIER_SWEEPS.values())
