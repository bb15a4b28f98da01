"""Protocol 1 (trl_efficient_testbed/protocol.yaml, issue 32): the looks' error spending, one-sided p-values, the
Benjamini-Hochberg correction, checks that cannot be judged, identical runs, the controls, the committed comparison
recomputed from its run files, the verdict history, and a smoke of placebo and GRPO through the protocol."""

import dataclasses
import importlib.util
import json
import os

import numpy as np
import pytest

from trl_efficient_testbed import protocol
from trl_efficient_testbed.checks import CheckInputs, method_check
from trl_efficient_testbed.stats import Bootstrap, Panel, decide, interval_at, wmean
from trl_efficient_testbed.verdicts import annotate, label

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "perf", "testbed", "results")
RESULTS_V3 = os.path.join(ROOT, "perf", "testbed", "results_v3")  # world v3's comparison, under the one scale rule
# the committed comparisons: world v2's (results/) and world v3's (results_v3/)
COMPARISONS = pytest.mark.parametrize("results", [RESULTS, RESULTS_V3], ids=["v2", "v3"])


def _panel(tokens, correct=None, seeds=None, **metrics):
    tokens = np.asarray(tokens, float)
    correct = np.ones_like(tokens) if correct is None else np.asarray(correct, float)
    seeds = list(range(tokens.shape[0])) if seeds is None else seeds
    return Panel(
        seeds,
        np.array([1 + i % 8 for i in range(tokens.shape[1])]),
        {"tokens": tokens, "correct": correct, **{k: np.asarray(v, float) for k, v in metrics.items()}},
    )


@pytest.mark.parametrize("looks", [3, 5])
def test_error_spending_keeps_the_overall_error_of_its_looks(looks):
    # Z_k = S_k / sqrt(k) of a random walk observed at K equally spaced looks, no effect: the chance that any look
    # crosses the boundary is the design's one-sided error, 0.025 for Pocock (K = 3: 2.289 at every look; K = 5:
    # 2.413) and O'Brien-Fleming (K = 3: 3.471, 2.454, 2.004; K = 5: 4.562, 3.226, 2.634, 2.281, 2.040); the
    # uncorrected 1.96 at every look crosses far more often (about 0.054 at K = 3, 0.071 at K = 5)
    rng = np.random.default_rng(0)
    walks = np.cumsum(rng.standard_normal((200_000, looks)), axis=1) / np.sqrt(np.arange(1, looks + 1))
    from statistics import NormalDist

    for method in ("pocock", "obrien-fleming"):
        bounds = [NormalDist().inv_cdf(1 - a) for a in protocol.nominal_levels(looks, method)]
        crossed = (walks > np.array(bounds)).any(axis=1).mean()
        assert crossed == pytest.approx(0.025, abs=0.002), method
    assert (walks > 1.96).any(axis=1).mean() > 0.05


def test_the_protocol_looks_at_three_and_six_seeds_of_a_three_look_design():
    # protocol 6: Pocock K = 3 (Jennison & Turnbull 2000, Table 2.1: C_P(3) = 2.289 -> one-sided 0.0110 a look);
    # protocol 13 ends every row's looks at 6 seeds at those levels (the third look's error unspent), the rows at
    # twice grpo's cost at 3, and ProRL's and BroRL's rows are in no comparison
    assert protocol.look_sizes() == [3, 6, 9] and protocol.last_look() == 6
    assert protocol.row_max_seeds("kimi") == 6 and protocol.row_max_seeds("laser-d") == 3
    assert protocol.nominal_level(6) == protocol.nominal_levels(3)[1]
    assert not any(protocol.row_in_comparison(n, w) for n in ("prorl", "brorl") for w in ("testbed:v2", "testbed:v3"))
    assert protocol.nominal_level(3) == protocol.nominal_level(9) == pytest.approx(0.01104, abs=1e-5)
    # the repeated p-value of the nominal level is the design's error, and it is monotone (protocol 2's BH reads it)
    assert protocol.repeated_p(protocol.nominal_level(3)) == pytest.approx(0.025, abs=0.002)
    assert protocol.repeated_p(0.001) < protocol.repeated_p(0.01) < protocol.repeated_p(0.1) < 1.0


def test_held_and_not_held_use_the_same_margin():
    assert decide((2.0, 1.2, 2.8), 1.0) is True and decide((2.0, 0.8, 2.8), 1.0) is None  # 0.8 < 1: not beyond it
    assert decide((0.5, 0.2, 0.9), 1.0) is False and decide((0.5, 0.2, 1.1), 1.0) is None


def test_p_value_is_the_level_at_which_the_low_end_meets_the_threshold():
    rng = np.random.default_rng(1)
    x = rng.normal(2.0, 3.0, size=(4, 300))  # four seeds, mean about 2
    boot = Bootstrap(4, 300, resamples=2000, seed=0)
    est = interval_at(boot, lambda w, v: wmean(x, w, v), 0.025)
    for threshold in (0.0, 1.0):
        p = est.spread.p_above(threshold)
        assert 0 < p < 0.5 and est.spread.bounds(p)[0] == pytest.approx(threshold, abs=0.02)
    assert est.spread.p_above(est[0] + 1) == 1.0  # the point is below the threshold
    # a 95% interval's low end above the threshold <=> p < 0.025
    assert (est[1] > 1.0) == (est.spread.p_above(1.0) < 0.025)


def test_bh_adjusts_and_keeps_order():
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.060, 0.074, 0.205]
    q = protocol.benjamini_hochberg(p)
    # q_(8) = 0.205; q_(7) = 0.074 x 8/7 = 0.0846; q_(6) = 0.06 x 8/6 = 0.08; q_(5) = min(0.042 x 8/5 = 0.0672, 0.08)
    assert q[7] == pytest.approx(0.205) and q[6] == pytest.approx(0.0846, abs=1e-4) and q[4] == pytest.approx(0.0672)
    assert q[0] == pytest.approx(0.008) and all(a <= b for a, b in zip(q, q[1:]))  # 0.001 x 8 = 0.008


def test_dapo_where_the_cap_binds_for_neither_arm_cannot_be_judged_and_identical_runs_are_one_row():
    rng = np.random.default_rng(0)
    tokens = rng.normal(100, 10, size=(3, 200))
    zero = np.zeros_like(tokens)
    ref = _panel(tokens, truncated=zero)
    c = method_check("dapo-overlong", CheckInputs(_panel(tokens - 5, truncated=zero), ref, "grpo", ref, 60.0, 300))
    assert c["held"] is None and "binds for neither arm" in c["cannot_judge"] and label(c) == "cannot be judged"
    rare = zero.copy()
    rare[:, :3] = 1.0  # protocol 9: the reference truncates 1.5% (under the margin 0.02), the recipe none: no cap binds
    c = method_check("dapo-overlong", CheckInputs(_panel(tokens, truncated=zero), _panel(tokens, truncated=rare),
                                                  "grpo", None, 60.0, 300))  # fmt: skip
    assert "grpo 0.015" in c["cannot_judge"] and label(c) == "cannot be judged"
    c = method_check("dapo-overlong", CheckInputs(_panel(tokens, truncated=rare), _panel(tokens, truncated=zero),
                                                  "grpo", None, 60.0, 300))  # fmt: skip
    assert "recipe 0.015, grpo 0.000" in c["cannot_judge"]  # either arm's rate: the recipe's too
    some = zero.copy()
    some[:, :20] = 1.0  # the reference truncates 10% of its completions, the recipe none: judged, and held
    c = method_check("dapo-overlong", CheckInputs(_panel(tokens, truncated=zero), _panel(tokens, truncated=some),
                                                  "grpo", None, 60.0, 300))  # fmt: skip
    assert "cannot_judge" not in c and c["held"] is True
    check = {"claim": "shorter", "held": True, "p_value": 0.001, "alpha": 0.0079}
    rows = [{"recipe": "laser-d", "records_sha256": "ab", "method_check": dict(check)},
            {"recipe": "laser-de", "records_sha256": "ab", "method_check": dict(check)}]  # fmt: skip
    counts = annotate(rows)
    assert rows[1]["method_check"]["duplicate_of"] == "laser-d" and counts["held"] == 1 and counts["cannot_judge"] == 1


def test_a_check_that_placebo_passes_is_broken():
    rows = [{"recipe": "kimi", "records_sha256": "a", "method_check": {
        "claim": "shorter", "held": True, "p_value": 0.001, "alpha": 0.0079,
        "controls": {"placebo": {"held": True}, "constant-penalty": {"held": True}}}},
        {"recipe": "placebo", "records_sha256": "b", "method_check": {"claim": "shorter", "held": None,
                                                                       "p_value": 0.3, "alpha": 0.0079}}]  # fmt: skip
    counts = annotate(rows)
    assert rows[0]["method_check"]["label"] == "broken" and counts["broken"] == 1 and counts["held"] == 0
    assert "constant-penalty passes" in rows[0]["method_check"]["not_specific"]
    assert rows[1]["method_check"]["label"] == "control" and rows[1]["method_check"]["passes"] == ["kimi"]


def _committed(results: str = RESULTS):
    with open(os.path.join(results, "compare.json")) as f:
        return json.load(f)


@COMPARISONS
def test_compare_json_records_the_protocol_and_the_new_run_files_their_versions(results):
    data = _committed(results)
    assert data["protocol"]["sha256"] == protocol.sha256() and data["protocol"]["error_spending"]["method"] == "pocock"
    counts = data["protocol"]["run_files"]
    # every file the table reads was written by the timed run from an empty directory under protocol 6 (the earlier
    # files held the same records; docs/testbed.md, "Runtime under protocol 6"), and the table reads only hashes this
    # protocol reads as its own
    assert set(counts) <= protocol.compatible_runs() and "None" not in counts
    # protocol 3 judges the runs of protocols 1 and 2 (its changes are checks computed from the same run files), and
    # protocol 4 those of protocol 3 (it only adds rows, their controls and checks: issue 33 item 5), protocol 5 those
    # of protocol 4 (it only writes the confirmation rule down), protocol 6 those of protocol 5 (it cuts the looks),
    # protocol 7 those of protocol 6 (it adds world v3's controls at the one rule's caps; nothing changes for v2),
    # protocol 8 those of protocol 7 (it ends the dearest rows' looks at 6 seeds), protocol 9 those of protocol 8 (it
    # widens DAPO-overlong's "cannot be judged")
    # and protocol 10 those of protocol 9 (it adds the controls' seeds and constant-penalty-half's runs), protocol 11
    # those of protocol 10 (it scopes ProRL's and BroRL's rows to world v2's comparison), protocol 12 those of
    # protocol 11 (it leaves ASRR's prefix claim uncounted), protocol 13 those of protocol 12 (it ends the looks at 6
    # seeds, the dearest rows' at 3, and takes ProRL and BroRL out of the comparison: it reads fewer of them)
    assert protocol.compatible_runs() == {protocol.sha256(), "679556910933e552", "4bff1ddc0db11da0",
                                          "3e7adf8e3c70e564", "05262746f092d3fb", "73117ef03bbe2606",
                                          "16a34c4628d2a3ac", "6a3e2ea353903edd", "5574eea2f110a808",
                                          "0e532a47dfe2de21", "fb9c6aafa049ab06", "d8443fee372aef16",
                                          "7a1c05de7f274a1e"}  # fmt: skip
    for path in data["runs"]["placebo"]:  # its hash and the libraries' versions
        run = json.load(open(os.path.join(results, path)))
        assert run["protocol_sha256"] in counts and set(run["versions"]) >= {"trl", "transformers", "torch"}


@COMPARISONS
def test_committed_verdicts_and_counts_follow_from_the_committed_checks(results):
    data = _committed(results)
    rows = json.loads(json.dumps(data["rows"]))
    for row in rows:  # recompute the labels, duplicates and BH q-values from the stored p-values and held
        check = row.get("method_check") or {}
        for key in ("label", "q_value", "held_after_bh", "duplicate_of", "broken", "control", "passes", "fails",
                    "scored_on", "p_adjusted", "not_specific"):  # fmt: skip
            check.pop(key, None)
        if check.get("cannot_judge", "").startswith("its run files measured exactly"):
            check.pop("cannot_judge")
            check["held"] = next(r for r in data["rows"] if r["recipe"] == row["recipe"])["method_check"]["held"]
    counts = annotate(rows)
    # a compare.json rendered before protocol 10 has no credit counts (`credited`, `claims_held`, ...)
    assert {k: counts[k] for k in data["verdicts"]} == data["verdicts"] and set(data["verdicts"]) <= set(counts)
    assert [r.get("method_check", {}).get("label") for r in rows] == [
        r.get("method_check", {}).get("label") for r in data["rows"]]  # fmt: skip


@pytest.mark.parametrize(("results", "names"), [
    (RESULTS, ["base", "grpo", "kimi", "dapo-overlong", "placebo", "constant-penalty"]),
    (RESULTS_V3, ["base", "grpo", "dler", "grpo-cap116", "shorter-better", "placebo", "constant-penalty"]),
], ids=["v2", "v3"])  # fmt: skip
def test_committed_rows_recompute_from_the_run_files(results, names):
    """A subset of each committed comparison (world v2: kimi, DAPO-overlong; world v3, under the one scale rule: DLER
    and its control at the rule's cap, ShorterBetter; each with placebo and constant-penalty, base and grpo) rendered
    again from the committed run files gives the same rows: numbers, intervals, checks, the controls' scores
    (everything but the family-wide BH fields). The runs are planned from today's code, so a changed scale rule or
    control fails here."""
    from trl_efficient_testbed.runner import TestbedSettings, load_panels, panel_rows, plan_runs

    data = _committed(results)
    settings = TestbedSettings(**{k: v for k, v in data["settings"].items() if k != "extra"})
    seeds = {r["recipe"]: len(r.get("seeds") or [0]) for r in data["rows"]}
    names = names + [n for n in ("constant-penalty-half",) if n in seeds]  # protocol 10's second point, once trained
    plan = {}
    for name in names:
        plan.update(plan_runs([name], dataclasses.replace(settings, seeds=max(seeds[name], 1)), results))
    panels, infos, errors = load_panels(plan, {})
    assert not errors
    rows = panel_rows(panels, infos, errors, names, settings)
    committed = {r["recipe"]: r for r in data["rows"]}
    # the family-wide fields, and the confirmation pass's `confirmed` (tested below)
    # and protocol 10's `credit`, which reads the GRPO matching controls of other rows (grpo-cap230, ...) that the
    # subset does not load (tests/testbed/test_credit.py tests it on panels built by hand)
    family = ("label", "q_value", "held_after_bh", "duplicate_of", "broken", "control", "passes", "fails", "scored_on",
              "p_adjusted", "not_specific", "confirmed", "credit")  # fmt: skip
    for row in rows:
        want = json.loads(json.dumps(committed[row["recipe"]]))
        got = json.loads(json.dumps(row))
        for r in (want, got):
            r.pop("train_seconds", None)
            for key in family:
                (r.get("method_check") or {}).pop(key, None)
        assert got == want, row["recipe"]


def _history():
    path = os.path.join(ROOT, "perf", "testbed", "verdict_history.py")
    spec = importlib.util.spec_from_file_location("verdict_history", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_verdict_history_keeps_the_old_verdicts_beside_the_new():
    vh = _history()
    _, _, out_json, out_md = vh.paths("v2")
    data = json.load(open(out_json))
    assert open(out_md).read() == vh.render(data)
    assert data["versions"][-1]["verdicts"] == vh.verdicts(_committed())  # the last version is the committed one
    first = data["versions"][0]["verdicts"]
    # world v2's first verdicts, restored: HBPO's budget spread and SABER's tier gap were not held
    assert first["hbpo"]["verdict"] == "not held" and first["hbpo"]["difference"].startswith("spread_gain -20.8")
    assert first["saber"]["verdict"] == "not held" and first["saber"]["difference"].startswith("gap_gain -8.52")
    moves = [(e["commit"], e["old"]["verdict"] if e["old"] else None, e["new"]["verdict"])
             for e in data["entries"] if e["recipe"] == "curriculum"]  # fmt: skip
    assert moves[0] == ("810e882", "not held", "inconclusive") and moves[1][2] == "held"
    assert all(e["reason"] != "-" for e in data["entries"])  # every move has its reason


def test_world_v3_verdict_history_keeps_dapo_overlongs_broken_beside_cannot_be_judged():
    """Protocol 9 moved world v3's DAPO-overlong from broken (the placebo passed it) to cannot be judged, after that
    verdict was seen: the generated history of world v3 holds both verdicts, the change is marked as made after the
    verdict, and its reason is given."""
    vh = _history()
    _, _, out_json, out_md = vh.paths("v3")
    data = json.load(open(out_json))
    assert open(out_md).read() == vh.render(data)
    assert data["versions"][-1]["verdicts"] == vh.verdicts(_committed(RESULTS_V3))
    assert data["versions"][0]["verdicts"]["dapo-overlong"]["verdict"] == "broken"
    (move,) = [e for e in data["entries"] if e["recipe"] == "dapo-overlong"]
    assert (move["old"]["verdict"], move["new"]["verdict"]) == ("broken", "cannot be judged")
    assert move["after_verdict"] is True and "placebo" in move["reason"]
    assert all(e["reason"] != "-" for e in data["entries"])


def _close(value, level):
    return value is not None and abs(value - level) < 5e-5


def test_verdict_history_tracks_the_confirmation_and_its_level_beside_todays():
    """Issue 48: 8822f49 read the confirmation at 0.0110 after it had been run and read at 0.0079 (250c992: cosine
    and gdpo not confirmed, their reruns' p 0.0088 and 0.0094); the history states both confirmation verdicts, the
    level change, and each check's confirmation at the level in force when it was first confirmed beside today's."""
    vh = _history()
    _, _, out_json, out_md = vh.paths("v2")
    data = json.load(open(out_json))
    md = open(out_md).read()
    assert md == vh.render(data)
    last = data["versions"][-1]
    with open(os.path.join(RESULTS, "confirm", "compare.json")) as f:
        assert last["confirmation"] == vh.confirmation(_committed(), json.load(f))  # the committed pass, restated
    changes = {c["commit"]: c for c in data["changes"]}
    c8822 = changes["8822f49"]
    assert "confirmation level 0.0079 -> 0.0110" in c8822["changed"]
    assert "nominal level 0.0079 a look -> 0.0110 a look" in c8822["changed"] and c8822["after_verdict"] is True
    assert "issue 48" in c8822["correction"] and "250c992" in c8822["correction"]
    assert (c8822["confirmation_moved"], changes["250c992"]["confirmation_new"]) == (2, 7)
    for recipe, p in (("cosine", 0.0088), ("gdpo", 0.0094)):
        (first,) = [e for e in data["confirmation_entries"] if e["recipe"] == recipe and e["commit"] == "250c992"]
        assert first["old"] is None and first["new"]["confirmation"] == "not confirmed"
        assert _close(first["new"]["level"], 0.0079) and first["new"]["rerun"] == "inconclusive"
        (move,) = [e for e in data["confirmation_entries"] if e["recipe"] == recipe and e["commit"] == "8822f49"]
        assert move["old"] == first["new"] and move["after_verdict"] is True
        assert move["new"]["confirmation"] == "confirmed held" and _close(move["new"]["level"], 0.0110)
        assert round(move["new"]["p_value"], 4) == p  # the same rerun, read at two levels
        (side,) = [c for c in data["confirmation_levels"] if c["recipe"] == recipe]
        assert side["first"]["commit"] == "250c992" and side["first"]["confirmation"] == "not confirmed"
        assert side["same"] is False
        assert side["today"]["confirmation"] == last["confirmation"][recipe]["confirmation"] == "confirmed held"
        then = f"**not confirmed (rerun inconclusive, p {p:.4f} at level 0.0079)**"
        today = f"**confirmed held (rerun held, p {p:.4f} at level 0.0110)**"
        assert f"| {recipe} | 250c992 (2026-12-03) | {then} | {last['commit']} | {today} |" in md
    # no other check's confirmation differs between the two levels; da-dler's differs by protocol 10's rule (its check
    # gained DLER's accuracy condition, so its rerun's p-value is another one), not by the level
    differ = {c["recipe"]: c for c in data["confirmation_levels"] if not c["same"]}
    assert sorted(differ) == ["cosine", "da-dler", "gdpo"]
    assert differ["da-dler"]["first"]["p_value"] != differ["da-dler"]["today"]["p_value"]


def test_verdict_history_marks_810e882_as_made_after_the_verdicts_it_moved():
    """Issue 48: 810e882 trained 36 new seed runs (seeds 3-5 of 12 recipes) and moved canon, curriculum and lapo, after
    their verdicts had been seen; it was recorded with after_verdict false."""
    vh = _history()
    data = json.load(open(vh.paths("v2")[2]))
    (c810,) = [c for c in data["changes"] if c["commit"] == "810e882"]
    assert c810["after_verdict"] is True and c810["after_verdict_recorded"] is False
    assert "issue 48" in c810["correction"]
    (seeds,) = [c for c in c810["changed"] if c.startswith("seeds read 3 -> 6")]
    assert seeds.endswith("(12 rows)") and "36 new seed runs" in c810["correction"]
    moved = {e["recipe"]: e for e in data["entries"] if e["commit"] == "810e882"}
    assert sorted(moved) == ["canon", "curriculum", "lapo"] and all(e["after_verdict"] is True for e in moved.values())


@pytest.mark.parametrize("world", ["v2", "v3"])
def test_verdict_history_has_an_entry_for_every_change_of_a_verdict_level_margin_or_seeds(world):
    """Recomputed from the git history of the world's compare.json (and confirm/compare.json): every version that moves
    a verdict or a confirmation verdict, or changes a level, margin, the looks or the seeds, has an entry in
    verdict_changes.yaml; every entry that moves a verdict an earlier version stated says after_verdict: true; and the
    committed history is this recomputation. Removing an entry, or the after_verdict of 810e882, is caught."""
    import yaml

    vh = _history()
    with open(vh.CHANGES) as f:
        changes = {str(k): v for k, v in yaml.safe_load(f).items()}
    vs = vh.versions(world)

    def build(changes, vs=vs):
        return {"changes": vh.change_list(vs, changes)}

    data = build(changes)
    assert vh.unrecorded(data) == [] and vh.unmarked(data) == []
    committed = json.load(open(vh.paths(world)[2]))
    assert committed["changes"] == data["changes"] and committed["versions"][-1]["rules"] == vs[-1]["rules"]
    assert committed["confirmation_entries"] == vh.confirmation_history(vs, changes)
    assert committed["stated_entries"] == vh.stated_history(vs, changes)
    # a change of the nominal level with no entry (a working-tree version) is named
    tree = json.loads(json.dumps(vs[-1]))
    tree.update(commit="working tree", protocol=vs[-1]["protocol"])
    tree["rules"]["nominal_levels"] = [0.02] * 3
    assert vh.unrecorded(build(changes, [*vs, tree])) == ["working tree"]
    if world == "v2":
        assert vh.unrecorded(build({k: v for k, v in changes.items() if k != "250c992"})) == ["250c992"]
        assert vh.unmarked(build({**changes, "810e882": {**changes["810e882"], "after_verdict": False}})) == ["810e882"]


def test_placebo_and_grpo_are_not_held_on_a_length_check(small_base, tmp_path):
    """The smoke: placebo and GRPO trained through the protocol (2 seeds each, 1 step); neither passes the length
    check ("shorter than grpo at similar accuracy", kimi's and every length penalty's), which a check that credited
    noise or ordinary RL would let them pass."""
    from trl_efficient_testbed.runner import TestbedSettings, compare, load_panels, plan_runs
    from trl_efficient_testbed.verdicts import check_inputs

    settings = TestbedSettings(base_model="testbed:small", max_steps=1, num_train=16, num_eval=6, eval_samples=1,
                               per_device_train_batch_size=8, num_generations=4, max_completion_length=16, max_ops=3,
                               seeds=2, check_eval=3, bootstrap=200)  # fmt: skip
    out = compare(["grpo", "placebo"], settings, str(tmp_path), show_progress=False)
    rows = {r["recipe"]: r for r in out["rows"]}
    placebo = rows["placebo"]["method_check"]
    assert placebo["label"] == "control" and placebo["held"] is not True and "shorter than grpo" in placebo["claim"]
    panels, _, _ = load_panels(plan_runs(["base", "grpo", "placebo"], settings, str(tmp_path)), {})
    for model in ("grpo", "placebo"):  # each scored on kimi's check (the length check) against grpo
        check = method_check("kimi", check_inputs("placebo", panels, "grpo", 10.0, settings, panel=panels[model]))
        assert check["held"] is not True and "shorter than grpo" in check["claim"], model
    data = json.load(open(out["files"]["json"]))
    assert data["protocol"]["sha256"] == protocol.sha256() and data["protocol"]["run_files"] == {protocol.sha256(): 3}
    run = json.load(open(os.path.join(str(tmp_path), data["runs"]["placebo"][0])))
    assert run["protocol_sha256"] == protocol.sha256() and "torch" in run["versions"]


def test_docs_state_the_evaluation_settings():
    from trl_efficient_testbed.runner import TestbedSettings

    settings = TestbedSettings()
    with open(os.path.join(ROOT, "docs", "testbed.md")) as f:
        text = f.read()
    # the metric table and the paired evaluation both give the settings' sampling (world v2: 1.0, not v1's 0.6)
    assert text.count(f"(temperature {settings.eval_temperature}, top-p {settings.eval_top_p}") == 1
    assert text.count(f"sample each (temperature {settings.eval_temperature}, top-p") == 1
    assert f"max {settings.max_completion_length} completion tokens" in text


def test_docs_protocol_and_history_sections_are_rendered_from_the_committed_files():
    path = os.path.join(ROOT, "perf", "testbed", "update_readme.py")
    spec = importlib.util.spec_from_file_location("update_readme", path)
    up = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(up)
    docs = open(up.DOCS).read()
    assert up.readme_section(docs, up.PROTOCOL) == up.render_protocol(up.DEFAULT_JSON).strip()
    assert up.readme_section(docs, up.HISTORY) == up.render_history().strip()
    assert up.readme_section(docs, up.HISTORY_V3) == up.render_history(up.HISTORY_V3_JSON).strip()
    for recipe in ("laser-de", "dapo-overlong"):  # held under protocol 3, no verdict under protocol 1
        assert f"| {recipe} | held | **cannot be judged**" in docs


@pytest.mark.slow  # trains 8 tiny runs (~40 s)
def test_confirmation_marks_each_decided_check(small_base, tmp_path):
    """`confirm` reruns the decided checks once on unseen seeds and a fresh task set (seed 1000 here: training seeds
    1000-1001, other evaluation tasks) and marks them; its runs are new files, none of the comparison's."""
    from trl_efficient_testbed.runner import TestbedSettings, compare, confirm

    settings = TestbedSettings(base_model="testbed:small", max_steps=1, num_train=16, num_eval=6, eval_samples=1,
                               per_device_train_batch_size=8, num_generations=4, max_completion_length=16, max_ops=3,
                               seeds=2, check_eval=3, bootstrap=200)  # fmt: skip
    out = compare(["grpo", "placebo"], settings, str(tmp_path / "main"), show_progress=False)
    data = json.load(open(out["files"]["json"]))
    data["rows"][-1]["method_check"]["label"] = "held"  # pretend placebo's own check was decided, to rerun it
    json.dump(data, open(out["files"]["json"], "w"))
    result = confirm(out["files"]["json"], str(tmp_path / "confirm"), seed=1000, show_progress=False)
    again = {r["recipe"]: r for r in result["rows"]}
    assert again["placebo"]["seeds"] == [1000, 1001] and again["placebo"]["method_check"]["label"] == "control"
    marked = json.load(open(out["files"]["json"]))
    assert marked["rows"][-1]["method_check"]["confirmed"] is False  # "held" is not what the rerun says
    assert marked["confirmation"]["seeds"] == [1000, 1001] and "| confirmed |" in open(out["files"]["markdown"]).read()


def test_grpo_prompted_is_grpo_retrained_exactly():
    """The matching control of the conditioned checks is GRPO itself: retrained on 2026-12-03 under protocol 1, its
    plain evaluation reproduces the committed grpo run files record for record (seeds 0-2), so its records under the
    recipes' prompts are GRPO's."""
    data = _committed()
    by_seed = {}
    for path in data["runs"]["grpo"]:
        run = json.load(open(os.path.join(RESULTS, path)))
        by_seed[run["seed"]] = run["records"]
    for path in data["runs"]["grpo-prompted"]:
        run = json.load(open(os.path.join(RESULTS, path)))
        assert run["key"]["trains"] == "grpo" and run["records"] == by_seed[run["seed"]]
        assert {"hbpo:48", "l1:46", "l1-max:338", "saber:16", "asrr"} <= set(run["modes"])


@COMPARISONS
def test_committed_confirmation_follows_from_its_committed_rerun(results):
    """The `confirmed` column of the committed comparison is `confirm_rows` of the committed confirmation pass
    (results/confirm/compare.json, its rows judged from results/confirm/runs/): each decided check is confirmed
    exactly when the rerun gives the same verdict, and the counts agree."""
    from trl_efficient_testbed.verdicts import confirm_rows

    data = _committed(results)
    record = data["confirmation"]
    with open(os.path.join(results, record["output_dir"], "compare.json")) as f:
        rerun = json.load(f)
    assert rerun["settings"]["seed"] == record["seed"] != data["settings"]["seed"]
    looked = {s for r in data["rows"] for s in (r.get("seeds") or [])}
    assert not looked & set(record["seeds"])  # training seeds never looked at
    rows = json.loads(json.dumps(data["rows"]))
    for row in rows:
        (row.get("method_check") or {}).pop("confirmed", None)
    assert confirm_rows(rows, rerun["rows"]) == record["counts"]
    assert [(r.get("method_check") or {}).get("confirmed") for r in rows] == [
        (r.get("method_check") or {}).get("confirmed") for r in data["rows"]]  # fmt: skip
    decided = [r["recipe"] for r in data["rows"] if (r.get("method_check") or {}).get("label") in ("held", "not held")]
    assert sorted(record["recipes"]) == sorted(decided)


def test_verdict_history_tracks_the_claims_the_headline_states():
    """Protocol 12 moved no verdict: it took ASRR's held, confirmed claim out of world v2's results. The history shows
    that move beside the old state, with protocol 12's reason, marked as made after the verdict; without its entry
    (and protocol 12's, which its protocol hash would find) the version is unrecorded."""
    import yaml

    vh = _history()
    with open(vh.CHANGES) as f:
        changes = {str(k): v for k, v in yaml.safe_load(f).items()}
    vs = vh.versions("v2")
    (move,) = [e for e in vh.stated_history(vs, changes) if e["commit"] == "c341195"]
    assert (move["recipe"], move["old"], move["new"], move["after_verdict"]) == ("asrr", "stated", "not stated", True)
    assert "protocol 12" in move["reason"]
    (item,) = [c for c in vh.change_list(vs, changes) if c["commit"] == "c341195"]
    assert item["moved"] == 0 and item["stated_moved"] == 1 and item["moved_seen"] == 1
    without = {k: v for k, v in changes.items() if k not in ("c341195", "protocol-12")}
    assert "c341195" in vh.unrecorded({"changes": vh.change_list(vs, without)})
    md = open(vh.paths("v2")[3]).read()
    assert "| 2026-12-06 | c341195 | asrr | stated | not stated | yes |" in md
