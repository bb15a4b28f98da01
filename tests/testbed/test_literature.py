"""The published head-to-heads (trl_efficient_testbed/literature.yaml) and their reading on the testbed (issue 35,
item 5): the list validates, the tau is pinned to hand-computed values, the command reads the committed comparison,
and docs/literature.md holds the command's output. The matched readings (issue 35, item 4: testbed/matched.py) are
pinned on hand-built panels."""

import json
import os

import numpy as np
import pytest

from trl_efficient.recipes import RECIPES
from trl_efficient_testbed import cli
from trl_efficient_testbed.literature import (
    DEFAULT_RESULTS,
    _matched_cell,
    concordance,
    kendall_tau,
    literature,
    literature_markdown,
    load_pairs,
    published_signs,
    read_pair,
    summary,
)
from trl_efficient_testbed.matched import interpolate, load_curves, matched_difference, read_matched, segment
from trl_efficient_testbed.stats import Panel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, DEFAULT_RESULTS)
RESULTS_V3 = os.path.join(ROOT, "perf", "testbed", "results_v3")  # world v3's comparison (docs/literature.md)
DOCS = os.path.join(ROOT, "docs", "literature.md")


def test_every_entry_names_registered_recipes_a_table_and_both_arms_numbers():
    pairs = load_pairs()
    assert len(pairs) >= 26
    for pair in pairs:
        assert pair["winner"] in RECIPES and pair["loser"] in RECIPES, pair
        assert "arXiv:" in pair["source"] and pair["cite"], pair  # every source is a paper with its id
        assert any(w in pair["table"].lower() for w in ("table", "figure")), pair  # names the table or figure
        assert pair["run"] in ("measured", "copied"), pair
        for side in ("winner_result", "loser_result"):
            assert pair[side]["accuracy"] > 0 and pair[side]["tokens"] > 0 and pair[side]["setting"], pair
        assert "metric" not in pair  # both metrics are read: no entry picks one


def test_published_signs_thresholds_hand_computed():
    # accuracy: a difference of 1 point is clear, 0.9 is not; tokens: 10% of the loser's tokens is clear, 9% is not
    sign = lambda wa, wt, la, lt: published_signs({"accuracy": wa, "tokens": wt}, {"accuracy": la, "tokens": lt})  # noqa: E731
    assert sign(51.0, 1000, 50.0, 1000) == {"accuracy": 1, "tokens": 0}
    assert sign(50.9, 1000, 50.0, 1000) == {"accuracy": 0, "tokens": 0}
    assert sign(49.0, 1000, 50.0, 1000) == {"accuracy": -1, "tokens": 0}
    assert sign(49.1, 1000, 50.0, 1000)["accuracy"] == 0
    assert sign(50, 900, 50, 1000)["tokens"] == 1  # 10% shorter
    assert sign(50, 910, 50, 1000)["tokens"] == 0  # 9% shorter
    assert sign(50, 1100, 50, 1000)["tokens"] == -1  # 10% longer
    assert sign(50, 1090, 50, 1000)["tokens"] == 0  # 9% longer


def test_a_more_accurate_and_longer_winner_gets_two_readings():
    # HBPO > cosine (HBPO's tab:normal-performance): +7.25 points and 2.06x the tokens: read on both, not on accuracy
    pair = next(p for p in load_pairs() if (p["winner"], p["loser"]) == ("hbpo", "cosine"))
    assert published_signs(pair["winner_result"], pair["loser_result"]) == {"accuracy": 1, "tokens": -1}
    result = literature(RESULTS, [pair])
    metrics = result["readings"][0]["metrics"]
    assert metrics["accuracy"]["sign"] == 1 and metrics["tokens"]["sign"] == -1
    assert metrics["accuracy"]["difference"] is not None and metrics["tokens"]["difference"] is not None
    assert result["summary"]["accuracy"]["readings"] == 1 and result["summary"]["tokens"]["readings"] == 1
    assert result["summary"]["all"]["readings"] == 2


def test_signed_difference_follows_the_published_sign():
    # a winner published longer: the tokens difference is winner minus loser (positive: the testbed's winner is longer)
    pair = {"winner": "w", "loser": "l", "run": "measured", "winner_result": {"accuracy": 60, "tokens": 2000},
            "loser_result": {"accuracy": 50, "tokens": 1000}}  # fmt: skip
    panels = {"w": _panel([0, 1], [130, 130], [0.9, 0.9]), "l": _panel([0, 1], [110, 110], [0.8, 0.8])}
    out = read_pair(pair, {"w": {}, "l": {}}, panels, {"bootstrap": 20, "seed": 0})
    assert out["metrics"]["accuracy"]["difference"][0] == pytest.approx(0.1)  # 0.9 - 0.8, paper +
    assert out["metrics"]["tokens"]["difference"][0] == pytest.approx(20.0)  # paper -: 130 - 110
    assert out["metrics"]["accuracy"]["reading"] == out["metrics"]["tokens"]["reading"] == "agrees"
    # a metric without a clear published difference is not read
    out = read_pair({**pair, "winner_result": {"accuracy": 50.5, "tokens": 1050}}, {"w": {}, "l": {}}, panels,
                    {"bootstrap": 20, "seed": 0})  # fmt: skip
    assert out["metrics"]["accuracy"] == {"sign": 0, "difference": None, "reading": "not read"}
    assert out["metrics"]["tokens"] == {"sign": 0, "difference": None, "reading": "not read"}


def test_the_three_entries_issue_48_fixed():
    pairs = {(p["winner"], p["loser"]): p for p in load_pairs()}
    # laser > kimi is not in the LASER paper (its group-based baseline is Arora & Zanette's, not Kimi's reward)
    assert ("laser", "kimi") not in pairs and ("kimi", "laser") not in pairs
    # the O1-Pruner rows of DOT's table are starred (copied from earlier work): copied readings, not same-author runs
    for key in (("dot", "o1-pruner"), ("dler", "o1-pruner")):
        assert pairs[key]["run"] == "copied" and "starred" in pairs[key]["how"], pairs[key]
    assert all(p["run"] == "measured" for k, p in pairs.items() if "DOT" not in p["cite"] or "o1-pruner" not in k)
    # GFPO's pair cites the per-benchmark table and says why its Avg column is read
    gfpo = pairs[("gfpo-adaptive", "gfpo")]
    assert "per-benchmark" in gfpo["source"] and "per-benchmark" in gfpo["table"] and "Avg" in gfpo["how"]
    assert published_signs(gfpo["winner_result"], gfpo["loser_result"]) == {"accuracy": 0, "tokens": 0}


def test_load_pairs_refuses_a_duplicate_pair_and_a_missing_field(tmp_path):
    entry = ("- {winner: dot, loser: dler, model: m, benchmark: b, approximate: false, source: s, table: t, "
             "cite: c, kind: own, run: measured, how: h, winner_result: {accuracy: 43.1, tokens: 3342, setting: x}, "
             "loser_result: {accuracy: 35.8, tokens: 3354, setting: y}}\n")  # fmt: skip
    path = tmp_path / "pairs.yaml"
    path.write_text(entry + entry.replace("winner: dot, loser: dler", "winner: dler, loser: dot"))
    with pytest.raises(ValueError, match="listed twice"):
        load_pairs(str(path))
    path.write_text(entry.replace("source: s, ", ""))
    with pytest.raises(ValueError, match="missing source"):
        load_pairs(str(path))
    path.write_text(entry.replace("table: t, ", ""))
    with pytest.raises(ValueError, match="missing table"):
        load_pairs(str(path))
    path.write_text(entry.replace("run: measured", "run: someone"))
    with pytest.raises(ValueError, match="run one of"):
        load_pairs(str(path))


def test_counts_per_metric_and_over_all_readings_hand_built():
    m = lambda sign, reading, d: {"sign": sign, "reading": reading, "difference": d}  # noqa: E731
    pair = lambda run: {"run": run}  # noqa: E731
    readings = [
        {"pair": pair("measured"), "metrics": {"accuracy": m(1, "agrees", [1, 0.5, 2]),
                                               "tokens": m(-1, "disagrees", [-3, -5, -1])}},
        {"pair": pair("measured"), "metrics": {"accuracy": m(0, "not read", None),
                                               "tokens": m(1, "undecided", [2, -1, 5])}},
        {"pair": pair("measured"), "metrics": {"accuracy": m(1, "cannot be judged", None),
                                               "tokens": m(0, "not read", None)}},
        {"pair": pair("copied"), "metrics": {"accuracy": m(1, "disagrees", [-1, -2, -0.5]),
                                             "tokens": m(1, "agrees", [4, 1, 7])}},
    ]  # fmt: skip
    s = summary(readings)
    assert s["pairs"] == 4 and s["measured_pairs"] == 3 and s["not_read"] == {"accuracy": 1, "tokens": 1}
    assert s["accuracy"]["readings"] == 2 and s["accuracy"]["decided"]["agrees"] == 1
    assert s["accuracy"]["cannot_judge"] == 1
    assert s["tokens"]["decided"] == {"agrees": 0, "disagrees": 1, "undecided": 1, "tau": -1.0}
    assert s["all"]["decided"] == {"agrees": 1, "disagrees": 1, "undecided": 1, "tau": 0.0}
    assert s["copied"]["decided"]["agrees"] == 1 and s["copied"]["decided"]["disagrees"] == 1


@pytest.mark.parametrize("results", [RESULTS, RESULTS_V3], ids=["v2", "v3"])
def test_committed_counts_add_up(results):
    s = literature(results)["summary"]
    for name in ("accuracy", "tokens"):
        d = s[name]["decided"]
        assert d["agrees"] + d["disagrees"] + d["undecided"] + s[name]["cannot_judge"] == s[name]["readings"]
        assert s[name]["readings"] + s["not_read"][name] == s["measured_pairs"]
    assert s["all"]["readings"] == s["accuracy"]["readings"] + s["tokens"]["readings"]
    assert s["all"]["decided"]["agrees"] == s["accuracy"]["decided"]["agrees"] + s["tokens"]["decided"]["agrees"]


def test_kendall_tau_hand_computed():
    assert kendall_tau(3, 1) == 0.5  # (3 - 1) / (3 + 1)
    assert kendall_tau(6, 10) == -0.25  # (6 - 10) / 16
    assert kendall_tau(4, 0) == 1.0 and kendall_tau(0, 0) is None


def test_concordance_counts_ties_and_leaves_out_what_cannot_be_judged():
    readings = [
        {"reading": "agrees", "difference": [2.0, 1.0, 3.0]},  # concordant, decided
        {"reading": "agrees", "difference": [1.0, 0.5, 1.5]},  # concordant, decided
        {"reading": "undecided", "difference": [0.5, -1.0, 2.0]},  # concordant, undecided
        {"reading": "disagrees", "difference": [-1.0, -2.0, -0.5]},  # discordant, decided
        {"reading": "undecided", "difference": [0.0, -1.0, 1.0]},  # a tie
        {"reading": "cannot be judged", "difference": None},
    ]
    out = concordance(readings)
    # all: C 3, D 1 -> (3 - 1) / 4 = 0.5; decided: 2 agree, 1 disagrees -> (2 - 1) / 3
    assert out["all"] == {"concordant": 3, "discordant": 1, "ties": 1, "tau": 0.5}
    assert out["decided"] == {"agrees": 2, "disagrees": 1, "undecided": 2, "tau": pytest.approx(1 / 3)}
    assert out["cannot_judge"] == 1 and out["readings"] == 6


def test_a_missing_row_or_two_rows_of_the_same_runs_cannot_be_judged():
    numbers = {"winner_result": {"accuracy": 60, "tokens": 800}, "loser_result": {"accuracy": 50, "tokens": 1000}}
    pair = {"winner": "laser-d", "loser": "laser-de", "run": "measured", **numbers}
    rows = {"laser-d": {}, "laser-de": {"method_check": {"duplicate_of": "laser-d"}}}
    out = read_pair(pair, rows, {"laser-d": None, "laser-de": None}, {"bootstrap": 10, "seed": 0})
    assert "same runs" in out["note"]
    assert {m["reading"] for m in out["metrics"].values()} == {"cannot be judged"}
    out = read_pair({**pair, "loser": "kimi"}, rows, {"laser-d": None}, {"bootstrap": 10, "seed": 0})
    assert out["metrics"]["accuracy"]["reading"] == "cannot be judged" and "no finished row for kimi" in out["note"]


def test_the_command_reads_every_pair_on_the_committed_comparison(capsys, tmp_path):
    assert cli.main(["literature", RESULTS, "--json", str(tmp_path / "lit.json")]) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == len(load_pairs())
    assert "Accuracy: " in printed and "Tokens: " in printed and "All read metrics: " in printed
    assert (tmp_path / "lit.json").exists()


@pytest.mark.parametrize(("marker", "results"), [("literature", RESULTS), ("literature-v3", RESULTS_V3)],
                         ids=["v2", "v3"])  # fmt: skip
def test_docs_block_equals_the_command_output(marker, results):
    with open(DOCS) as f:
        text = f.read()
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    block = text.split(start, 1)[1].split(end, 1)[0].strip()
    assert block == literature_markdown(literature(results)).strip()


# --- matched readings (issue 35, item 4): the curve's value interpolated at the other recipe's, hand-built panels ---


def _panel(seeds, tokens, correct):
    """A `stats.Panel` with every task of seed s at `tokens[s]` and `correct[s]` (two tasks): the task resamples then
    all give the point, so the interval is the Student t over the seeds alone."""
    cells = {"tokens": [[t, t] for t in tokens], "correct": [[c, c] for c in correct]}
    return Panel(list(seeds), np.array([1, 1]), {k: np.array(v, dtype=float) for k, v in cells.items()})


def test_interpolate_and_segment_hand_computed():
    assert interpolate(100.0, 0.90, 120.0, 0.94, 115.0) == pytest.approx(0.93)  # 0.90 + 0.04 x 15 / 20
    assert interpolate(0.90, 100.0, 0.94, 120.0, 0.92) == pytest.approx(110.0)  # tokens at accuracy 0.92
    curve = [(100.0, 0.90), (120.0, 0.94), (140.0, 0.92)]  # (tokens, accuracy) in token order
    assert segment(curve, "tokens", 100.0) == (0, 1) and segment(curve, "tokens", 140.0) == (1, 2)  # ends included
    assert segment(curve, "accuracy", 0.93) == (0, 1)  # reached on (0, 1) and (1, 2): the fewest tokens
    assert segment(curve, "tokens", 99.0) is None and segment(curve, "accuracy", 0.89) is None  # out of range
    assert segment([(100.0, 0.9)], "tokens", 100.0) is None  # one point: no segment


def test_accuracy_at_matched_tokens_hand_computed_and_tokens_out_of_range():
    # the loser's curve: (100 tok, 0.90) and (120 tok, 0.94) under both seeds; the winner at 110 then 115 tokens, 0.95
    low, high = _panel([0, 1], [100, 100], [0.90, 0.90]), _panel([0, 1], [120, 120], [0.94, 0.94])
    winner = _panel([0, 1], [110, 115], [0.95, 0.95])
    curves = {"l": [{"label": "alpha=2", "panel": high}, {"label": "alpha=1", "panel": low}]}  # sorted by tokens
    out = read_matched({"winner": "w", "loser": "l"}, curves, {"w": winner, "l": low}, {"bootstrap": 200, "seed": 0})
    acc = out["accuracy"]
    # point: the winner's mean 112.5 tok -> 0.90 + 0.04 x 12.5 / 20 = 0.925; 0.95 - 0.925 = +0.025
    # seeds: 0.95 - 0.92 = 0.03 and 0.95 - 0.93 = 0.02; t(1) 12.706 x sd 0.00707 / sqrt(2) = 0.0635 either side
    assert acc["difference"][0] == pytest.approx(0.025)
    assert acc["difference"][2] - 0.025 == pytest.approx(12.706 * np.std([0.03, 0.02], ddof=1) / np.sqrt(2), rel=1e-3)
    assert acc["difference"][0] - acc["difference"][1] == pytest.approx(acc["difference"][2] - 0.025)
    assert acc["segment"] == ["alpha=1", "alpha=2"] and acc["at"] == pytest.approx(112.5) and acc["seeds"] == [0, 1]
    # the winner's 0.95 is above every point of the curve (0.90-0.94): out of the sweep's range, no difference
    tok = out["tokens"]
    assert tok["segment"] is None and tok["difference"] is None and tok["range"] == pytest.approx([0.90, 0.94])
    assert "out of the sweep's range (w 95.0%, l's sweep 90.0-94.0%)" in _matched_cell("tokens", tok)


def test_tokens_at_matched_accuracy_on_the_winners_curve_when_the_losers_is_out_of_range():
    # both swept; the winner's row (130 tok, 0.99) is outside the loser's curve (accuracy 0.80-0.85, 140-160 tok), so
    # the loser's row (130 tok, 0.92) is read on the winner's curve: (100 tok, 0.90), (120 tok, 0.94)
    w_curve = [_panel([0], [100], [0.90]), _panel([0], [120], [0.94])]
    l_curve = [_panel([0], [140], [0.80]), _panel([0], [160], [0.85])]
    curves = {"w": [{"label": f"w{i}", "panel": p} for i, p in enumerate(w_curve)],
              "l": [{"label": f"l{i}", "panel": p} for i, p in enumerate(l_curve)]}  # fmt: skip
    panels = {"w": _panel([0], [130], [0.99]), "l": _panel([0], [130], [0.92])}
    out = read_matched({"winner": "w", "loser": "l"}, curves, panels, {"bootstrap": 50, "seed": 0})
    # the winner's tokens at 0.92: 100 + 20 x 0.02 / 0.04 = 110; loser - winner = 130 - 110 = +20 tokens
    assert out["tokens"]["swept"] == "w" and out["tokens"]["difference"] == pytest.approx([20.0, 20.0, 20.0])
    # accuracy at 130 tokens: outside the loser's curve (140-160) and the winner's (100-120): out of range, and the
    # first option's range is the one reported
    assert out["accuracy"]["difference"] is None and out["accuracy"]["range"] == pytest.approx([140.0, 160.0])


def test_a_row_without_a_seed_of_the_sweep_has_no_matched_reading():
    curves = {
        "l": [{"label": "a", "panel": _panel([0], [100], [0.90])}, {"label": "b", "panel": _panel([0], [120], [0.94])}]
    }
    out = read_matched(
        {"winner": "w", "loser": "l"}, curves, {"w": _panel([5], [110], [0.95])}, {"bootstrap": 9, "seed": 0}
    )
    assert out["accuracy"]["difference"] is None and "no training seed of w's row" in out["accuracy"]["note"]
    assert _matched_cell("accuracy", out["accuracy"]).startswith("no training seed of w's row")


def test_matched_difference_signs_follow_the_paper():
    # swept (100, 0.90)-(120, 0.94), other (110, 0.95): the swept recipe's 0.92 at 110 tokens
    ends, other = (_panel([0], [100], [0.90]), _panel([0], [120], [0.94])), _panel([0], [110], [0.95])
    assert matched_difference(ends, other, "accuracy", True, 20, 0)[0] == pytest.approx(-0.03)  # 0.92 - 0.95
    assert matched_difference(ends, other, "accuracy", False, 20, 0)[0] == pytest.approx(0.03)  # 0.95 - 0.92
    other = _panel([0], [130], [0.92])  # the swept recipe's 110 tokens at 0.92
    assert matched_difference(ends, other, "tokens", True, 20, 0)[0] == pytest.approx(20.0)  # 130 - 110
    assert matched_difference(ends, other, "tokens", False, 20, 0)[0] == pytest.approx(-20.0)  # 110 - 130


def _run(recipe, seed, weight, tokens, correct):
    key = {"recipe": recipe, "train_seed": seed, "rewards": [["kimi_length", weight, {}]], "config_overrides": {}}
    records = {"task": [0, 1], "sample": [0, 0], "difficulty": [1, 1], "tokens": tokens, "correct": correct}
    return {"key": key, "seed": seed, "records": records}


def test_load_curves_finds_each_points_runs_by_key_and_checks_the_recorded_means(tmp_path):
    runs_dir = tmp_path / "runs" / "kimi"
    runs_dir.mkdir(parents=True)
    for weight, tokens in ((0.2, [100, 110]), (0.8, [80, 90])):
        (runs_dir / f"seed0-{weight}.json").write_text(json.dumps(_run("kimi", 0, weight, tokens, [1, 0])))
    point = lambda w, t: {"label": f"weight={w}", "point": {"reward.kimi_length.weight": w}, "seeds": [0],  # noqa: E731
                          "accuracy": 0.5, "mean_tokens": t}  # fmt: skip
    (tmp_path / "frontier.json").write_text(json.dumps({"sweeps": [{"recipe": "kimi", "points": [
        point(0.2, 105.0), point(0.8, 85.0)]}]}))  # fmt: skip
    template = _run("kimi", 0, 0.4, [0, 0], [0, 0])["key"]  # the comparison's run: weight 0.4
    curves = load_curves(str(tmp_path), {"kimi"}, {"kimi": template})
    assert [c["label"] for c in curves["kimi"]] == ["weight=0.2", "weight=0.8"]
    assert curves["kimi"][1]["panel"].metrics["tokens"].tolist() == [[80.0, 90.0]]
    assert load_curves(str(tmp_path), {"laser"}, {"kimi": template}) == {}  # a recipe without a sweep
    (tmp_path / "frontier.json").write_text(json.dumps({"sweeps": [{"recipe": "kimi", "points": [
        point(0.2, 105.0), point(0.8, 86.0)]}]}))  # fmt: skip
    with pytest.raises(ValueError, match="records accuracy 0.5 and 86.0 tokens, its runs give 0.5 and 85.0"):
        load_curves(str(tmp_path), {"kimi"}, {"kimi": template})


def test_matched_counts_only_read_metrics_with_a_matched_reading_on_that_metric():
    result = literature(RESULTS)
    m = result["matched_summary"]
    own = [(r, name) for r in result["readings"] if r["pair"]["run"] == "measured" for name in ("accuracy", "tokens")
           if r["metrics"][name]["sign"] and (r["matched"][name] or {}).get("difference")]  # fmt: skip
    assert m["matched"]["readings"] == m["point"]["readings"] == len(own)
    with open(os.path.join(RESULTS, "frontier.json")) as f:
        swept = {s["recipe"] for s in json.load(f)["sweeps"]}
    assert {"kimi", "drpo", "dler", "o1-pruner"} <= swept  # a config key (dler's cap, drpo's advantage_kwargs.lam) too
    for r in result["readings"]:  # a pair with no swept recipe has no matched reading
        if not swept & {r["pair"]["winner"], r["pair"]["loser"]}:
            assert r["matched"] == {"accuracy": None, "tokens": None}


@pytest.mark.parametrize("results", [RESULTS, RESULTS_V3], ids=["v2", "v3"])
def test_load_curves_keys_a_swept_config_value_as_the_sweep_did(results):
    """DRPO's sweep sets one entry of a dict field (`advantage_kwargs.lam`) and DLER's a config field (its training
    cap): each point's runs are found by the key `sweep.run_sweep` gave them (`matched._sweep_overrides`), not the
    recipe's own runs (which `_point_panel` would refuse: their means are not the point's)."""
    with open(os.path.join(results, "compare.json")) as f:
        runs = json.load(f)["runs"]
    templates = {}
    for name in ("drpo", "dler"):
        with open(os.path.join(results, runs[name][0])) as f:
            templates[name] = json.load(f)["key"]
    curves = load_curves(results, {"drpo", "dler"}, templates)
    lams = [c["label"] for c in curves["drpo"]]
    assert lams == ["lam=0.05", "lam=0.1", "lam=0.2"] and len(curves["dler"]) == 3
    means = [float(c["panel"].metrics["tokens"].mean()) for c in curves["drpo"]]
    assert len(set(means)) == 3  # three different runs, not the recipe's own three times
