"""Protocol 10 (`credit` in trl_efficient_testbed/protocol.yaml, issue 48): a length claim counts as the method's only
when no control passes its check (generic otherwise) and it beats the length-matched constant penalty; a mechanism
check (A-DLP's controller) is a column of its own, never counted; the headline states only the credited, confirmed
claims with their accuracy difference, the Benjamini-Hochberg survivors and the smallest effect each metric resolves.
Panels built by hand: every difference is a fixed offset or a fixed set of tasks, so each verdict is certain."""

import copy

import numpy as np
import pytest

from trl_efficient_testbed.checks import method_check
from trl_efficient_testbed.runner import VERDICT_HEADER, check_table, verdict_cells
from trl_efficient_testbed.stats import Panel
from trl_efficient_testbed.training import TestbedSettings
from trl_efficient_testbed.verdicts import (
    annotate,
    check_inputs,
    confirm_rows,
    credited_claim,
    headline,
    nearest_point,
    score_controls,
)

TASKS, SEEDS = 400, (0, 1, 2)
DIFFICULTY = np.array([1 + i % 8 for i in range(TASKS)])
FLOOR = 60.0  # the token margin is 2% of it: 1.2 tokens
SETTINGS = TestbedSettings(bootstrap=200)
GRPO_TOKENS = 150 + 20 * np.sin(np.arange(TASKS))  # tokens vary by task; every model below is an offset of them


def _panel(tokens_offset: float, accuracy: float, seeds=SEEDS, logs=None) -> Panel:
    """GRPO's tokens + `tokens_offset` on every task and seed; tasks 0 .. accuracy x TASKS - 1 correct."""
    tokens = np.tile(GRPO_TOKENS + tokens_offset, (len(seeds), 1))
    correct = np.tile((np.arange(TASKS) < round(accuracy * TASKS)).astype(float), (len(seeds), 1))
    return Panel(list(seeds), DIFFICULTY, {"tokens": tokens, "correct": correct}, {}, {}, 1, logs or {})


def _judge(panels: dict, names: list[str]) -> list[dict]:
    """The rows of `names` as `runner.panel_rows` builds them (check, controls, credit), then `annotate`d."""
    rows = [{"recipe": "grpo", "records_sha256": "grpo", "method_check": {"claim": "baseline", "held": None}}]
    for name in names:
        inputs = check_inputs(name, panels, "grpo", FLOOR, SETTINGS)
        row = {"recipe": name, "records_sha256": name, "method_check": method_check(name, inputs, 192)}
        score_controls(name, row, panels, "grpo", FLOOR, SETTINGS, 192)
        rows.append(row)
    for control in ("placebo", "constant-penalty", "constant-penalty-half"):
        if control in panels:
            check = {"claim": "shorter", "held": None, "p_value": 0.5, "alpha": 0.011}
            rows.append({"recipe": control, "records_sha256": control, "method_check": check})
    annotate(rows)
    return rows


def _check(rows: list[dict], name: str) -> dict:
    return next(r for r in rows if r["recipe"] == name)["method_check"]


# a constant penalty that cuts as much but loses 0.2 accuracy fails "shorter than grpo at similar accuracy"; a half
# penalty that cuts 1 token (under the 1.2-token margin) fails it too: neither control passes a recipe's check
BASE = {"grpo": _panel(0, 0.8), "placebo": _panel(0, 0.8), "constant-penalty": _panel(-25, 0.6),
        "constant-penalty-half": _panel(-1, 0.8)}  # fmt: skip


def test_the_length_claims_credit_judges():
    assert credited_claim("kimi") == "shorter" and credited_claim("dler") == "tight-cap"
    assert credited_claim("a-dlp") == "shorter"  # its mechanism check's row is counted on its length line
    assert credited_claim("lspo") is None and credited_claim("laser-d") is None and credited_claim("asrr") is None


def test_a_held_length_claim_no_control_passes_that_beats_the_length_matched_penalty_is_credited():
    rows = _judge({**BASE, "kimi": _panel(-30, 0.8)}, ["kimi"])
    check = _check(rows, "kimi")
    credit = check["credit"]
    assert check["label"] == "held" and credit["generic"] == [] and credit["comparator"] == "grpo"
    # kimi 30 tokens shorter than grpo; constant-penalty 25 (distance 5), the half 1 (distance 29): the nearest point
    assert credit["strongest_control"] == "constant-penalty"
    assert credit["mean_tokens"]["constant-penalty"][1] == pytest.approx(float(GRPO_TOKENS.mean()) - 25)
    assert credit["vs_strongest"]["held"] is True and credit["credited"] is True
    assert credit["accuracy_difference"] == pytest.approx([0.0, 0.0, 0.0])
    assert set(credit["scored"]) == {"placebo", "constant-penalty", "constant-penalty-half"}  # no GRPO control here
    counts = annotate(rows)
    assert counts["claims_held"] == counts["credited"] == 1 and counts["generic"] == 0


def test_a_length_check_a_control_passes_is_generic_and_not_counted():
    # GRPO trained at a 230-token cap writes as short as kimi at the same accuracy: it passes kimi's check
    panels = {**BASE, "kimi": _panel(-30, 0.8), "grpo-cap230": _panel(-30, 0.8)}
    rows = _judge(panels, ["kimi"])
    check = _check(rows, "kimi")
    assert check["label"] == "held" and check["credit"]["generic"] == ["grpo-cap230"]
    assert check["credit"]["credited"] is False and "generic" in check["credit"]["reason"]
    counts = annotate(rows)
    assert counts["held"] == 1 and counts["claims_held"] == 0 and counts["credited"] == 0 and counts["generic"] == 1
    cells = dict(zip(VERDICT_HEADER, verdict_cells(check), strict=True))
    assert cells["verdict"].startswith("held") and "generic: grpo-cap230 passes it" in cells["verdict"]
    assert cells["controls that pass"] == "**grpo-cap230**" and cells["credit (protocol 10)"].startswith("not credited")
    # a negative control passing it makes it generic as well (constant-penalty cutting as much at grpo's accuracy)
    rows = _judge({**BASE, "kimi": _panel(-30, 0.8), "constant-penalty": _panel(-30, 0.8)}, ["kimi"])
    assert _check(rows, "kimi")["credit"]["generic"] == ["constant-penalty"]
    assert annotate(rows)["claims_held"] == 0


def test_a_matching_control_that_is_the_rows_own_comparator_is_not_scored_against_itself():
    # FRUGAL's comparator is grpo-cap230 (world v2): it is the reference, not a control that passes its check
    panels = {**BASE, "frugal": _panel(-40, 0.8), "grpo-cap230": _panel(-20, 0.8), "grpo-cap192": _panel(-45, 0.8)}
    check = _check(_judge(panels, ["frugal"]), "frugal")
    assert check["credit"]["comparator"] == "grpo-cap230" and "grpo-cap230" not in check["credit"]["scored"]
    assert check["credit"]["generic"] == ["grpo-cap192"]  # 5 tokens shorter than grpo-cap230: it passes


def test_a_held_claim_that_loses_to_the_length_matched_constant_penalty_is_not_credited():
    # constant-penalty writes 45 tokens less than grpo at 0.05 less accuracy (beyond the 0.04 tolerance), so it fails
    # kimi's check (not generic); it is the nearest point (15 tokens from kimi, the half 29), 15 tokens shorter than
    # kimi: kimi is neither shorter by the margin nor more accurate at no more tokens than it -> not credited
    panels = {**BASE, "kimi": _panel(-30, 0.8), "constant-penalty": _panel(-45, 0.75)}
    rows = _judge(panels, ["kimi"])
    check = _check(rows, "kimi")
    credit = check["credit"]
    assert check["label"] == "held" and credit["generic"] == [] and credit["strongest_control"] == "constant-penalty"
    assert credit["vs_strongest"]["held"] is False and credit["credited"] is False
    assert "does not beat the length-matched constant penalty (constant-penalty): worse" in credit["reason"]
    counts = annotate(rows)
    assert counts["held"] == 1 and counts["claims_held"] == 0 and counts["not_credited"] == 1
    cells = dict(zip(VERDICT_HEADER, verdict_cells(check), strict=True))
    assert cells["vs length-matched constant penalty"] == "not better (constant-penalty)"
    # the same recipe against a length-matched point it beats (the half 5 tokens longer at 0.05 less accuracy)
    panels["constant-penalty-half"] = _panel(-25, 0.75)
    assert _check(_judge(panels, ["kimi"]), "kimi")["credit"]["credited"] is True
    # a length claim that is not held has nothing to credit
    panels["kimi"] = _panel(-30, 0.7)
    assert _check(_judge(panels, ["kimi"]), "kimi")["credit"]["credited"] is None


def test_nearest_point_picks_the_constant_penalty_whose_mean_tokens_are_nearest():
    panels = {"r": _panel(-30, 0.8), "constant-penalty": _panel(-50, 0.8), "constant-penalty-half": _panel(-20, 0.8)}
    assert nearest_point(panels, "r")[0] == "constant-penalty-half"  # 10 tokens away against 20
    panels["constant-penalty-half"] = _panel(-5, 0.8)
    assert nearest_point(panels, "r")[0] == "constant-penalty"  # 20 against 25
    # read on the seeds both have: the half trained seeds 3-5 only shares none with r, so it is not a candidate
    panels["constant-penalty-half"] = _panel(-30, 0.8, seeds=(3, 4, 5))
    assert nearest_point(panels, "r")[0] == "constant-penalty"
    assert nearest_point({"r": _panel(0, 0.8)}, "r") == (None, {})


def test_controls_are_scored_at_the_rows_own_seeds():
    # the placebo trained 9 seeds (protocol 10: the controls follow the rows); kimi has 3: read on seeds 0-2 only,
    # where the placebo writes grpo's tokens, though on seeds 3-8 it is far shorter
    tokens = np.vstack([np.tile(GRPO_TOKENS, (3, 1)), np.tile(GRPO_TOKENS - 40, (6, 1))])
    correct = np.tile((np.arange(TASKS) < 320).astype(float), (9, 1))
    placebo = Panel(list(range(9)), DIFFICULTY, {"tokens": tokens, "correct": correct}, {}, {}, 1, {})
    panels = {**BASE, "kimi": _panel(-30, 0.8), "grpo": _panel(0, 0.8, seeds=tuple(range(9))), "placebo": placebo}
    check = _check(_judge(panels, ["kimi"]), "kimi")
    assert check["controls"]["placebo"]["held"] is False and check["label"] == "held"


def _adlp_logs(moving: bool) -> dict:
    top = 1 / 384
    trace = [top * (1 - 0.3 * i / 9) for i in range(10)] if moving else [top] * 10
    return {"adlp/lambda": [list(trace) for _ in SEEDS], "adlp/lambda_max": [top for _ in SEEDS]}


def test_a_mechanism_check_is_its_own_column_and_never_counted():
    # A-DLP's controller moves (the mechanism check holds) but it writes grpo's length: its counted verdict is the
    # length line, not held; the mechanism's "held" is in its own column and in no count or BH family
    panels = {**BASE, "a-dlp": _panel(0, 0.8, logs=_adlp_logs(True))}
    rows = _judge(panels, ["a-dlp"])
    check = _check(rows, "a-dlp")
    assert check["mechanism"]["label"] == "held" and "lambda" in check["mechanism"]["claim"]
    assert check["label"] == "not held" and check["claim"].startswith("shorter than grpo")
    assert check["credit"]["credited"] is None
    counts = annotate(rows)
    assert counts["held"] == 0 and counts["claims_held"] == 0 and counts["mechanism"] == 1
    assert check["p_adjusted"] != check["mechanism"].get("p_value")  # BH read the length line's p-value
    cells = dict(zip(VERDICT_HEADER, verdict_cells(check), strict=True))
    assert cells["mechanism"].startswith("held: the penalty adapts") and cells["verdict"] == "**not held**"
    # the controls were scored on the length line (a mechanism no control can fail is not what is counted)
    assert set(check["controls"]) == {"placebo", "constant-penalty", "constant-penalty-half"}
    # when its length line holds and is credited, it counts as a length claim; the mechanism still does not
    panels["a-dlp"] = _panel(-30, 0.8, logs=_adlp_logs(False))
    rows = _judge(panels, ["a-dlp"])
    check = _check(rows, "a-dlp")
    assert check["mechanism"]["label"] == "cannot be judged" and check["label"] == "held"
    assert check["credit"]["credited"] is True and annotate(rows)["claims_held"] == 1
    annotate(rows)  # annotating twice does not swap the mechanism back
    assert check["label"] == "held" and check["mechanism"]["label"] == "cannot be judged"


def test_headline_states_only_credited_confirmed_claims_with_their_accuracy_bh_and_the_smallest_effects():
    # grpo-cap230 writes grpo's length on seeds 0-2 (kimi's) and 20 tokens less on seeds 3-5 (cosine's and gdpo's):
    # scored at each row's own seeds, it passes cosine's and gdpo's checks (generic), not kimi's
    six = tuple(range(6))
    cap = _panel(0, 0.8, seeds=six)
    cap.metrics["tokens"][3:] -= 20
    panels = {**BASE, "grpo": _panel(0, 0.8, seeds=six), "kimi": _panel(-30, 0.8), "grpo-cap230": cap,
              "cosine": _panel(-20, 0.8, seeds=(3, 4, 5)), "gdpo": _panel(-20, 0.8, seeds=(3, 4, 5))}  # fmt: skip
    for name in ("placebo", "constant-penalty", "constant-penalty-half"):
        panels[name] = _panel(*{"placebo": (0, 0.8), "constant-penalty": (-25, 0.6),
                                "constant-penalty-half": (-1, 0.8)}[name], seeds=six)  # fmt: skip
    rows = _judge(panels, ["kimi", "cosine", "gdpo"])
    for row, width in zip(rows[1:4], (4.0, 6.0, 10.0), strict=True):
        row["vs_reference"] = {"reference": "grpo", "mean_tokens": [-30, -30 - width, -30 + width],
                               "accuracy": [0.0, -width / 200, width / 200]}  # fmt: skip
    again = copy.deepcopy(rows)
    _check(again, "gdpo")["label"] = "inconclusive"  # gdpo is not confirmed
    confirm_rows(rows, again)
    assert _check(rows, "kimi")["credit"]["confirmed"] is True
    text = headline(rows, {"seeds": [1000, 1001, 1002], "seed": 1000}, {"version": 10}, "world v2 (`testbed:v2`)")
    stated = text.split("Held at the looks but not counted")[0]
    assert text.startswith("**World v2 (`testbed:v2`)** (protocol 10")
    assert ("beat their strongest control: **1**: length claims (no control passes them; they beat the length-matched"
            " constant penalty): `kimi` (tokens saved vs grpo +30.0") in stated  # fmt: skip
    assert "accuracy vs grpo +0.000 [+0.000, +0.000]" in stated
    assert "beats the length-matched constant-penalty" in stated
    assert "`cosine`" not in stated and "`gdpo`" not in stated
    assert "generic (a control passes the check): `cosine` (grpo-cap230, confirmed), `gdpo` (grpo-cap230)" in text
    bh = sum(1 for r in rows if (r["method_check"]).get("held_after_bh"))
    assert f"Benjamini-Hochberg: {bh} of the 3 checks that can be judged survive" in text
    assert "+-6.0 tokens, +-0.030 accuracy" in text  # the medians of 4, 6, 10 and of 0.02, 0.03, 0.05
    # a credited claim the confirmation does not credit again is not stated
    _check(again, "kimi")["credit"]["credited"] = False
    confirm_rows(rows, again)
    text = headline(rows, {"seeds": [1000, 1001, 1002], "seed": 1000}, {"version": 10})
    assert "strongest control: **0**: no length claim." in text and "not in the confirmation (`kimi`)" in text


def test_the_check_table_has_the_protocol_10_columns_and_counts():
    rows = _judge({**BASE, "kimi": _panel(-30, 0.8), "grpo-cap230": _panel(-30, 0.8)}, ["kimi"])
    counts = annotate(rows)
    lines = check_table(rows, {"version": 10, "verdicts": counts})
    header = next(line for line in lines if line.startswith("| recipe"))
    assert "| controls that pass |" in header and "| mechanism |" in header and "placebo" not in header
    kimi = next(line for line in lines if line.startswith("| kimi"))
    assert kimi.count("|") == header.count("|") and "generic: grpo-cap230" in kimi
    assert "Counted as method claims (protocol 10): 0 of the 1 held" in "\n".join(lines)


def test_a_claim_whose_control_never_trained_under_its_condition_is_printed_and_not_counted():
    """Protocol 12 (issue 48 item 2): ASRR's prefix accuracy is judged against grpo-prompted, GRPO trained without the
    no-think prefix; the check keeps its verdict but is never counted as a method claim, and the headline and the
    table's credit column say why. A held claim of another recipe with no control passing it still counts."""
    from trl_efficient_testbed.verdicts import counted, unmatched_conditions

    assert set(unmatched_conditions()) == {"asrr"} and "no-think prefix" in unmatched_conditions()["asrr"]
    check = {"claim": "prefix accuracy rises", "held": True, "p_value": 0.001, "alpha": 0.0110, "confirmed": True,
             "differences": {"prefix_accuracy_gain": [0.6, 0.5, 0.7]}}  # fmt: skip
    rows = [{"recipe": "asrr", "records_sha256": "a", "method_check": dict(check)},
            {"recipe": "lspo", "records_sha256": "b", "method_check": dict(check)}]  # fmt: skip
    counts = annotate(rows)
    asrr, other = rows[0]["method_check"], rows[1]["method_check"]
    assert asrr["label"] == "held" and asrr["unmatched"] == unmatched_conditions()["asrr"]
    assert not counted(asrr) and counted(other) and counts["claims_held"] == 1 and counts["held"] == 2
    text = headline(rows, {"seeds": [1000, 1001, 1002], "seed": 1000}, {"version": 12}, "world v2")
    stated = text.split("Held at the looks but not counted")[0]
    assert "`asrr`" not in stated and "`lspo`" in stated and "**1**" in stated
    assert ("no matching control trained under the condition the claim is measured in: `asrr` (grpo-prompted never "
            "trained with the no-think prefix") in text and "at all, confirmed)" in text  # fmt: skip
    cells = dict(zip(VERDICT_HEADER, verdict_cells(asrr), strict=True))
    assert cells["credit (protocol 10)"].startswith("not counted: grpo-prompted never trained")
    assert cells["verdict"] == "held"
