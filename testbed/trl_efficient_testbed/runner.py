"""
Train recipes on the testbed and measure them: `evaluate_testbed`, `train_recipe`, `compare`.

`compare(["grpo", "kimi", "shorter-better"], TestbedSettings())` trains every recipe with `settings.seeds` training
seeds from the same base model with the same data and number of GRPO steps (recipes come from
`trl_efficient.recipes`, built exactly as `trl-efficient train` builds them: the recipe's config overrides, its reward
functions and weights, its trainer class and dataset preparation), evaluates the base model and every trained model
on the same held-out tasks with the same sampling streams (paired: `sampling`), and writes `compare.json`,
`compare.md`, `pareto.png`, `per_difficulty.png` and `checks.png`. Every number of a row is a mean with its 95%
interval over tasks (bootstrap) and training seeds (Student t; `stats.interval`), every recipe-minus-reference
difference is paired by task and seed. The runs are `jobs.Job`s: resumable, and run on several processes with `workers`.

Testbed scale: completions are 20-190 tokens, so every recipe runs with its rule of `testbed.scaling` (lengths scaled
to the cap, per-token coefficients by the inverse, its own G where the method defines it; printed with the table).
Each recipe also gets its method check (`testbed.checks`), evaluated under the recipe's own conditions. A recipe
that raises is recorded as a failed row with its error; the others still run and the table is still written.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time

from .checks import is_baseline
from .specs import BASE_RECIPE, FIXED_PENALTY
from .training import (  # noqa: F401  (re-exported: the runner's public names before the split)
    RECORD_COLUMNS,
    TestbedSettings,
    build_config,
    evaluate_modes,
    evaluate_testbed,
    failed_row,
    hub_offline,
    num_generations_for,
    scaled_recipe,
    torch_threads,
    train_recipe,
)

logger = logging.getLogger(__name__)

__all__ = [
    "TestbedSettings",
    "compare",
    "evaluate_modes",
    "evaluate_testbed",
    "failed_row",
    "scaled_recipe",
    "train_recipe",
    "worst_ratio_cell",
]


def _row(name: str, summary: dict, seconds: float | None = None, num_generations: int | None = None) -> dict:
    """One table row from `evaluate_testbed`'s summary; per difficulty k also the accuracy and the tokens-to-floor
    ratio (`analysis.floor_ratio_by_difficulty`), from which the worst-ratio column and the per-difficulty plot are
    drawn."""
    from trl_efficient_testbed.summary import accuracy_by_difficulty, floor_ratio_by_difficulty

    return {
        "recipe": name,
        "status": "ok",
        "num_generations": num_generations,
        "accuracy": summary["accuracy"],
        "mean_tokens": summary["mean_tokens"],
        "std_tokens": summary.get("std_tokens"),
        "num_samples": summary.get("n"),
        "mean_floor_tokens": summary["mean_floor_tokens"],
        "excess_over_floor": summary["excess_over_floor"],
        "redundant_share": summary["redundant_share"],
        "skips_per_completion": summary["skips_per_completion"],
        "truncated_fraction": summary["truncated_fraction"],
        "tight_cap": summary.get("tight_cap"),
        "tight_truncated_fraction": summary.get("tight_truncated_fraction"),
        "train_seconds": seconds,
        "by_difficulty": summary["by_difficulty"],
        "accuracy_by_difficulty": accuracy_by_difficulty(summary["by_difficulty"]),
        "floor_ratio_by_difficulty": floor_ratio_by_difficulty(summary["by_difficulty"]),
    }


# row field: (numerator record, denominator record or None); a ratio of sums when there is a denominator
ROW_METRICS = {
    "accuracy": ("correct", None),
    "mean_tokens": ("tokens", None),
    "mean_floor_tokens": ("floor_tokens", None),
    "excess_over_floor": ("excess", None),
    "redundant_share": ("redundant_tokens", "tokens"),
    "skips_per_completion": ("num_skips", None),
    "truncated_fraction": ("truncated", None),
    "tight_truncated_fraction": ("tight_truncated", None),
    "useful_checks": ("useful_checks", None),
    "useless_checks": ("useless_checks", None),
}
DIFFICULTY_METRICS = {  # per difficulty k: the same, over the tasks of difficulty k
    "accuracy": ("correct", None),
    "mean_tokens": ("tokens", None),
    "mean_floor_tokens": ("floor_tokens", None),
    "redundant_share": ("redundant_tokens", "tokens"),
    "floor_ratio": ("tokens", "floor_tokens"),
    "useful_checks": ("useful_checks", None),
    "useless_checks": ("useless_checks", None),
}


def _estimate(panel, boot, num: str, den: str | None, mask=None) -> tuple:
    import numpy as np

    from .stats import interval, wratio

    x = panel.metrics[num]
    d = np.ones_like(x) if den is None else panel.metrics[den]
    # a mean or ratio of sums lies within the range of its cells' own values (an accuracy in [0, 1])
    cells = x / np.where(d != 0, d, np.nan)
    cells = cells if mask is None else cells[:, np.asarray(mask, dtype=bool)]
    limits = (float(np.nanmin(cells)), float(np.nanmax(cells))) if np.isfinite(cells).any() else None
    return interval(boot, lambda w, v: wratio(x, d, w, v, mask), limits=limits)


def _difference(panel, reference, resamples: int, seed: int, num: str, den: str | None = None, mask=None) -> list:
    """`[point, low, high]` of `panel - reference` (paired: `Panel.aligned`, the same resamples and seeds for both)."""
    import numpy as np

    from .stats import Bootstrap, interval, wratio

    a, b = panel.aligned(reference)
    xa, xb = a.metrics[num], b.metrics[num]
    da = np.ones_like(xa) if den is None else a.metrics[den]
    db = np.ones_like(xb) if den is None else b.metrics[den]
    boot = Bootstrap(len(a.seeds), a.num_tasks, resamples, seed)
    return list(interval(boot, lambda w, v: wratio(xa, da, w, v, mask) - wratio(xb, db, w, v, mask)))


def panel_row(name: str, panel, settings: TestbedSettings, reference=None, reference_name: str | None = None,
              train_seconds: float | None = None, num_generations: int | None = None,
              tight_cap: int | None = None) -> dict:  # fmt: skip
    """One table row from a model's per-(seed, task) `stats.Panel`: every `ROW_METRICS` field is the point estimate (the
    mean over seeds and tasks, a ratio of sums for the shares) and `ci[field]` its 95% interval (`stats.interval`:
    `settings.bootstrap` task resamples seeded with `settings.seed`, Student t over the seeds); per difficulty k the
    same for `DIFFICULTY_METRICS` (`by_difficulty[k]`, with `accuracy_by_difficulty`, `floor_ratio_by_difficulty` and
    `ci_by_difficulty`). With a `reference` panel, `vs_reference` holds the paired differences (this - the reference:
    per task and seed) of mean tokens and accuracy, overall and per k, as `[point, low, high]`."""
    from .stats import Bootstrap

    boot = Bootstrap(len(panel.seeds), panel.num_tasks, settings.bootstrap, settings.seed)
    row = {"recipe": name, "status": "ok", "num_generations": num_generations,
           "seeds": [s for s in panel.seeds if s is not None], "num_tasks": panel.num_tasks,
           "num_samples": len(panel.seeds) * panel.num_tasks * panel.samples, "tight_cap": tight_cap,
           "train_seconds": train_seconds}  # fmt: skip
    ci = {}
    for field_name, (num, den) in ROW_METRICS.items():
        point, low, high = _estimate(panel, boot, num, den)
        row[field_name], ci[field_name] = point, [low, high]
    row["ci"] = ci
    by, ci_by = {}, {key: {} for key in DIFFICULTY_METRICS}
    for k in sorted(set(panel.difficulty.tolist())):
        mask = panel.difficulty == k
        cell = {"n": int(mask.sum()) * len(panel.seeds) * panel.samples, "ci": {}}
        for key, (num, den) in DIFFICULTY_METRICS.items():
            point, low, high = _estimate(panel, boot, num, den, mask)
            cell[key], cell["ci"][key] = point, [low, high]
            ci_by[key][str(k)] = [low, high]
        by[str(k)] = cell
    row["by_difficulty"] = by
    row["accuracy_by_difficulty"] = {k: c["accuracy"] for k, c in by.items()}
    row["floor_ratio_by_difficulty"] = {k: c["floor_ratio"] for k, c in by.items()}
    row["ci_by_difficulty"] = ci_by
    if reference is not None:
        args = (settings.bootstrap, settings.seed)
        row["vs_reference"] = {
            "reference": reference_name,
            "mean_tokens": _difference(panel, reference, *args, "tokens"),
            "accuracy": _difference(panel, reference, *args, "correct"),
            "accuracy_by_difficulty": {
                str(k): _difference(panel, reference, *args, "correct", mask=panel.difficulty == k)
                for k in sorted(set(panel.difficulty.tolist()))
            },
        }
    return row


MISSING = "—"  # a value the row does not have (rows written before the field existed)


def row_reference(row: dict, rows: list[dict]) -> dict | None:
    """The row `row` is compared with (as the method checks do): `grpo` when the rows have it, else the base model;
    the base model for `grpo` itself; `None` for the reference itself (the base model)."""
    reference, _ = _reference(rows)
    if reference is row or row["recipe"] == "base":
        reference = None if row["recipe"] == "base" else next(
            (r for r in rows if r["recipe"] == "base" and r.get("status", "ok") == "ok"), None
        )  # fmt: skip
    return reference


def worst_ratio_with_intervals(row: dict) -> tuple[float, str] | None:
    """`(ratio, k)`: the largest tokens-to-floor ratio over the difficulties k where a row with intervals keeps its
    reference's accuracy: the upper end of the interval of the paired accuracy difference at k
    (`vs_reference["accuracy_by_difficulty"][k]`) is >= -`checks.ACCURACY_TOLERANCE` (it is not decisively less
    accurate by more than the tolerance). A row without a reference (the base model) takes every k.

    >>> row = {"floor_ratio_by_difficulty": {"1": 1.5, "2": 2.0},
    ...        "vs_reference": {"accuracy_by_difficulty": {"1": [0.0, -0.03, 0.03], "2": [-0.2, -0.3, -0.1]}}}
    >>> worst_ratio_with_intervals(row)  # k=2 is decisively 0.1-0.3 less accurate: only k=1 counts
    (1.5, '1')
    """
    from .checks import ACCURACY_TOLERANCE

    ratios = row.get("floor_ratio_by_difficulty") or {}
    diffs = (row.get("vs_reference") or {}).get("accuracy_by_difficulty")
    worst = None
    for k, ratio in ratios.items():
        if ratio is None:
            continue
        if diffs is not None:
            high = (diffs.get(k) or [None, None, None])[2]
            if high is None or high < -ACCURACY_TOLERANCE:
                continue
        if worst is None or ratio > worst[0]:
            worst = (float(ratio), k)
    return worst


def worst_ratio_cell(row: dict, rows: list[dict]) -> str:
    """`"1.32 (k=7)"`: the worst ratio at kept accuracy, `worst_ratio_with_intervals` for rows with intervals, else
    `analysis.worst_ratio_at_kept_accuracy` against `row_reference` (rows written before the intervals); `—` when no
    k keeps the reference's accuracy or the row (or its reference) predates the per-difficulty fields."""
    from trl_efficient_testbed.summary import worst_ratio_at_kept_accuracy

    if row.get("ci") is not None:
        worst = worst_ratio_with_intervals(row)
        return MISSING if worst is None else f"{worst[0]:.2f} (k={worst[1]})"
    reference = row_reference(row, rows)
    if reference is not None and not reference.get("accuracy_by_difficulty"):
        return MISSING
    worst = worst_ratio_at_kept_accuracy(row, reference)
    return MISSING if worst is None else f"{worst[0]:.2f} (k={worst[1]})"


def _secs(value) -> str:
    return "-" if value is None else f"{value:.0f}"


def _held(value) -> str:
    return {True: "held", False: "**not held**", None: "inconclusive"}[value]


def _num(row: dict, key: str, digits: int) -> str:
    """`0.512 [0.497, 0.527]` (the value and its 95% interval) for a row with intervals, else `0.512`."""
    value = row[key]
    low, high = ((row.get("ci") or {}).get(key) or [None, None])[:2]
    if value is None:
        return "-"
    if low is None or high is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _diff_cell(estimate, digits: int) -> str:
    if not estimate or estimate[0] is None:
        return "-"
    point, low, high = estimate
    if low is None:
        return f"{point:+.{digits}f}"
    return f"{point:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def _pm(cell: dict, key: str, digits: int) -> str:
    """`61.2±1.4`: a per-difficulty value and half the width of its interval (`61.2` without one)."""
    value = cell.get(key)
    if value is None:
        return "-"
    low, high = ((cell.get("ci") or {}).get(key) or [None, None])[:2]
    if low is None or high is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f}±{(high - low) / 2:.{digits}f}"


def _verdict(check: dict) -> str:
    """The verdict cell: the label (`verdicts.label`), bold when not held, broken or not judgeable."""
    label = check.get("label") or _held(check.get("held")).replace("*", "")
    if label == "held" and check.get("held_after_bh") is False:
        return "held (not after BH)"
    return f"**{label}**" if label in ("not held", "broken", "cannot be judged") else label


def _p(value) -> str:
    return "-" if value is None else ("<0.001" if value < 0.001 else f"{value:.3f}")


def _control_cell(result: dict | None) -> str:
    if not result:
        return "-"
    if result.get("cannot_judge"):
        return "cannot be judged"
    return {True: "**passes**", False: "fails", None: "inconclusive"}[result.get("held")]


VERDICT_HEADER = ["verdict", "accuracy vs comparator", "p", "q (BH)", "controls that pass",
                  "vs length-matched constant penalty", "credit (protocol 10)", "mechanism"]  # fmt: skip


def _passing(check: dict) -> str:
    """The controls that pass `check` (protocol 10: the negative controls and, for a length claim, the GRPO matching
    controls scored on it): `none (of 4)`, `-` when none was scored."""
    scored = {**(check.get("controls") or {}), **((check.get("credit") or {}).get("scored") or {})}
    if not scored:
        return "-"
    passing = [name for name, result in scored.items() if result.get("held") is True]
    return f"**{', '.join(passing)}**" if passing else f"none (of {len(scored)})"


def _strongest_cell(check: dict) -> str:
    credit = check.get("credit")
    if credit is not None:
        vs, point = credit.get("vs_strongest"), credit.get("strongest_control")
    else:
        vs, point = check.get("vs_constant_penalty"), FIXED_PENALTY
    if not vs:
        return "-"
    cell = _control_cell(vs).replace("**passes**", "**better**").replace("fails", "not better")
    return f"{cell} ({point})"


def _credit_cell(check: dict) -> str:
    if check.get("unmatched") and check.get("label") == "held":  # protocol 12
        return f"not counted: {check['unmatched']}"
    credit = check.get("credit")
    if credit is None:  # no length claim (or a compare.json rendered before protocol 10)
        return "-"
    if credit.get("credited") is None:
        return "-"
    return "**credited**" if credit["credited"] else f"not credited: {credit.get('reason')}"


def _mechanism_cell(check: dict) -> str:
    mechanism = check.get("mechanism")
    if not mechanism:
        return "-"
    reason = mechanism.get("cannot_judge")
    claim = str(mechanism.get("claim") or "").split(":")[0]  # "the penalty adapts"
    return f"{mechanism.get('label')}: {claim}" + (f" ({reason})" if reason else "")


def verdict_cells(check: dict) -> list[str]:
    """The cells every verdict table shows for a method check (`VERDICT_HEADER`: the comparison's and
    docs/testbed.md's protocol table): the verdict with its reason (cannot be judged, broken, generic, not specific),
    the accuracy difference against its comparator (protocol 10: every length check states it), the one-sided p (none
    when it cannot be judged), the BH q, the controls that pass it, the recipe against the length-matched constant
    penalty (`constant-penalty` for a check without credit), its credit and the mechanism check (A-DLP's)."""
    from .verdicts import _accuracy_of, _est

    credit = check.get("credit") or {}
    generic = (f"generic: {', '.join(credit['generic'])} pass{'es' if len(credit['generic']) == 1 else ''} it"
               if check.get("label") == "held" and credit.get("generic") else None)  # fmt: skip
    reason = check.get("cannot_judge") or check.get("broken") or generic or check.get("not_specific")
    verdict = _verdict(check) + (f": {reason}" if reason else "")
    acc = _accuracy_of(check)
    acc_cell = (
        _est(acc, 3)
        if acc
        else ("not part of the check" if check.get("label") in ("held", "not held", "inconclusive") else "-")
    )
    p_cell = "-" if check.get("cannot_judge") else _p(check.get("p_value"))
    return [
        c.replace("|", "/")
        for c in (
            verdict,
            acc_cell,
            p_cell,
            _p(check.get("q_value")),
            _passing(check),
            _strongest_cell(check),
            _credit_cell(check),
            _mechanism_cell(check),
        )
    ]


def _confirmed(check: dict) -> str:
    """The confirmed cell: `-` until a confirmation pass ran (`confirm`), then yes / **no** / not rerun."""
    if "confirmed" not in check:
        return "-"
    return {True: "yes", False: "**no**", None: "not rerun"}[check["confirmed"]]


def verdict_counts(counts: dict) -> str:
    """The counts line of a comparison's verdicts (`verdicts.annotate`); protocol 10's: the held checks counted as
    method claims (credited length claims, and other claims no control passes) first."""
    text = (f"Verdicts: {counts['held']} held ({counts['held_after_bh']} after Benjamini-Hochberg across the "
            f"{counts['family']} checks that can be judged; {counts['specific']} of those also better than "
            f"constant-penalty), {counts['inconclusive']} inconclusive, {counts['not held']} not held, "
            f"{counts['cannot be judged']} cannot be judged, {counts['broken']} broken (placebo passes).")  # fmt: skip
    if "claims_held" in counts:  # protocol 10
        text += (f" Counted as method claims (protocol 10): {counts['claims_held']} of the {counts['held']} held "
                 f"({counts['claims_held_after_bh']} after Benjamini-Hochberg): {counts['credited']} length claims "
                 f"credited (no control passes them, they beat the length-matched constant penalty); "
                 f"{counts['generic']} generic (a control passes the check), {counts['not_credited']} not better "
                 f"than the length-matched constant penalty; {counts['mechanism']} mechanism check(s) in their own "
                 "column, never counted.")  # fmt: skip
    return text


def check_table(rows: list[dict], protocol: dict | None = None) -> list[str]:
    """The method checks under the protocol: each check's claim and measurement, its verdict, its p-value and
    Benjamini-Hochberg q-value, how each negative control scores on it, and the recipe against `constant-penalty`;
    then the negative controls' own rows and the counts."""
    protocol = protocol or {}
    level = (protocol.get("nominal_levels") or [None])[0]
    conf = "" if level is None else f" (intervals at {1 - 2 * level:.1%}: each end at the looks' nominal level)"
    source = "testbed/trl_efficient_testbed/protocol.yaml"
    lines = ["", f"Method checks under protocol {protocol.get('version', 1)} (`{source}`, "
             f"sha256 {protocol.get('sha256', '-')}){conf}: does the method do what its paper says, against its "
             "matching control?", "",
             "| " + " | ".join(["recipe", "claim", "measured", *VERDICT_HEADER, "confirmed"]) + " |",
             "|" + "---|" * (4 + len(VERDICT_HEADER))]  # fmt: skip
    controls_rows = []
    for r in rows:
        c = r["method_check"]
        if is_baseline(c):
            continue
        if c.get("control"):
            controls_rows.append(r)
            continue
        cells = [str(c.get(k, "-")).replace("|", "\\|") for k in ("claim", "measured")]
        lines.append("| " + " | ".join([r["recipe"], *cells, *verdict_cells(c), _confirmed(c)]) + " |")
    if controls_rows:
        lines += ["", "Negative controls (trained like every recipe; scored on every recipe's check, with that "
                  "recipe's reference and matching control):", "", "| control | seeds | passes | fails | scored on |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for r in controls_rows:
            c = r["method_check"]
            passes = ", ".join(c.get("passes") or []) or "none"
            lines.append(f"| {r['recipe']} | {len(r.get('seeds') or [])} | {passes} | {len(c.get('fails') or [])} | "
                         f"{c.get('scored_on', 0)} checks |")  # fmt: skip
    counts = protocol.get("verdicts")
    if counts:
        lines += ["", verdict_counts(counts) + " Held: the interval's low end above the margin; not held: its high "
                  "end below the margin."]  # fmt: skip
    pending = protocol.get("pending_looks")
    if pending:
        lines += ["", "Looks the protocol asks for whose runs are not in the files (rendered with --no-train; those "
                  "checks stay inconclusive until they run): " + ", ".join(f"{n} at {k} seeds" for n, k in
                                                                          sorted(pending.items())) + "."]  # fmt: skip
    runs = protocol.get("run_files")
    if runs:
        lines += ["", "Run files by protocol: " + ", ".join(
            f"{n} {'written before protocol 1 (no hash recorded)' if h == 'None' else 'under ' + h}"
            for h, n in sorted(runs.items())) + " (recipes x their run files' protocols)."]  # fmt: skip
    return lines


def compare_markdown(rows: list[dict], settings: dict | None = None, scales: dict | None = None,
                     protocol: dict | None = None) -> str:  # fmt: skip
    """The comparison table (failed recipes as rows with their error), the method checks, tokens by difficulty
    (mean tokens / accuracy per number of operations) and the testbed scaling rule of every recipe. Rows with
    intervals (`panel_row`) show every number as `mean [95% interval]` plus their paired differences from the
    reference; rows written before the intervals render as they always did."""
    intervals = any(r.get("ci") for r in rows)
    head = ["recipe", "G", "accuracy", "mean tokens", "floor", "excess over floor", "worst tokens/floor (k)",
            "redundant share", "skips/compl.", "truncated", "method check", "train s"]  # fmt: skip
    if intervals:
        head[2:2] = ["seeds"]
        head[-2:-2] = ["Δ tokens vs ref.", "Δ accuracy vs ref."]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ok_rows = [r for r in rows if r.get("status", "ok") == "ok"]
    for r in rows:
        g = "-" if r.get("num_generations") is None else str(r["num_generations"])
        if r.get("status", "ok") != "ok":
            error = r["error"].replace("|", "\\|")
            lines.append(f"| {r['recipe']} | {g} | **failed**: {error} |" + " |" * (len(head) - 3))
            continue
        check = r.get("method_check") or {}
        verdict = "-" if is_baseline(check) else _verdict(check)
        if intervals:
            vs = r.get("vs_reference") or {}
            ref = f" ({vs['reference']})" if vs.get("reference") else ""
            cells = [r["recipe"], g, str(len(r.get("seeds") or [])), _num(r, "accuracy", 3), _num(r, "mean_tokens", 1),
                     _num(r, "mean_floor_tokens", 1), _num(r, "excess_over_floor", 1), worst_ratio_cell(r, rows),
                     _num(r, "redundant_share", 3), _num(r, "skips_per_completion", 2),
                     _num(r, "truncated_fraction", 3), _diff_cell(vs.get("mean_tokens"), 1) + ref,
                     _diff_cell(vs.get("accuracy"), 3) + ref, verdict, _secs(r["train_seconds"])]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
            continue
        lines.append(
            f"| {r['recipe']} | {g} | {r['accuracy']:.3f} | {r['mean_tokens']:.1f} | {r['mean_floor_tokens']:.1f} | "
            f"{r['excess_over_floor']:.1f} | {worst_ratio_cell(r, rows)} | {r['redundant_share']:.3f} | "
            f"{r['skips_per_completion']:.2f} | "
            f"{r['truncated_fraction']:.3f} | {verdict} | "
            f"{_secs(r['train_seconds'])} |"
        )
    checked = [r for r in ok_rows if r.get("method_check")]
    if checked and any("label" in r["method_check"] for r in checked):
        lines += check_table(checked, protocol)
    elif checked:
        lines += ["", "Method checks (does the method do on the testbed what its paper says?):", "",
                  "| recipe | claim | measured | result |", "|---|---|---|---|"]  # fmt: skip
        for r in checked:
            c = r["method_check"]
            if is_baseline(c):
                continue
            cells = [str(c[k]).replace("|", "\\|") for k in ("claim", "measured")]  # a "|" would split the cell
            lines.append(f"| {r['recipe']} | {cells[0]} | {cells[1]} | {_held(c['held'])} |")
        if intervals:
            judged = [r["method_check"]["held"] for r in checked if not is_baseline(r["method_check"])]
            counts = {v: sum(1 for held in judged if held is v) for v in (True, None, False)}
            lines += ["", f"Verdicts: {counts[True]} held, {counts[None]} inconclusive, {counts[False]} not held "
                      "(held: the 95% interval of the claimed paired difference excludes 0 on the claimed side; not "
                      "held: it excludes every effect of the margin's size on the claimed side; "
                      "testbed/trl_efficient_testbed/checks.py)."]  # fmt: skip
    levels = sorted({d for r in ok_rows for d in r["by_difficulty"]}, key=int)
    if levels:
        note = " (value±half its 95% interval)" if intervals else ""
        lines += ["", "Mean tokens (accuracy) by difficulty = number of operations; floor = shortest correct trace"
                  f"{note}:", ""]  # fmt: skip
        head = ["recipe", *[f"{d} ops" for d in levels]]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        floor_row = ["floor"] + [
            next((f"{r['by_difficulty'][d]['mean_floor_tokens']:.1f}" for r in ok_rows if d in r["by_difficulty"]),
                 "-")
            for d in levels
        ]  # fmt: skip
        lines.append("| " + " | ".join(floor_row) + " |")
        for r in ok_rows:
            if intervals:
                cells = [r["recipe"]] + [
                    f"{_pm(r['by_difficulty'][d], 'mean_tokens', 1)} ({_pm(r['by_difficulty'][d], 'accuracy', 2)})"
                    if d in r["by_difficulty"] else "-" for d in levels
                ]  # fmt: skip
            else:
                cells = [r["recipe"]] + [
                    f"{r['by_difficulty'][d]['mean_tokens']:.1f} ({r['by_difficulty'][d]['accuracy']:.2f})"
                    if d in r["by_difficulty"] else "-" for d in levels
                ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    if any(worst_ratio_cell(r, rows) != MISSING for r in ok_rows):
        if intervals:
            lines += ["", "worst tokens/floor (k): the largest ratio of mean tokens to the floor over the difficulties "
                      "k where the recipe keeps its reference's accuracy (the 95% interval of the paired accuracy "
                      "difference at k reaches above -0.04; the base model over all k), and that k: how much it "
                      "still over-thinks where thinking less would cost it nothing (plot: per_difficulty.png). "
                      "Δ: recipe minus its reference (grpo; the base for grpo), paired by task and seed."]  # fmt: skip
        else:
            lines += ["", "worst tokens/floor (k): the largest ratio of mean tokens to the floor over the difficulties "
                      f"k where the recipe keeps the accuracy of {_reference(rows)[1]} (base for grpo; the base model "
                      "over all k) within max(0.04, two standard errors), and that k: how much it still over-thinks "
                      "where thinking less would cost it nothing (plot: per_difficulty.png)."]  # fmt: skip
    if scales:
        cap = (settings or {}).get("max_completion_length", "the cap")
        lines += ["", f"Testbed scaling rules (testbed/trl_efficient_testbed/scaling.py; cap = {cap} tokens):", ""]
        lines += [f"- `{name}`: {scales[name]['rule']}" for name in scales]
    if settings:
        lines += ["", "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items() if k != "extra")]
        if settings.get("extra"):
            lines[-1] += f", extra={settings['extra']}"
    return "\n".join(lines) + "\n"


def compare(recipes: list[str], settings: TestbedSettings | None = None, output_dir: str = "outputs/testbed",
            overwrite: bool = False, keep_models: bool = False, include_base: bool = True, workers: int = 1,
            show_progress: bool = True, train: bool = True) -> dict:  # fmt: skip
    """Train each recipe with `settings.seeds` training seeds from the same base with the same budget of steps,
    evaluate all on the same held-out tasks and sampling streams, and write `compare.json`, `compare.md`,
    `pareto.png`, `per_difficulty.png` and `checks.png` under `output_dir`. Every (recipe, seed) run and the base
    model's evaluation is a `jobs.Job` with its result file under `<output_dir>/runs/` named by the hash of its
    config: a rerun skips the finished ones (`overwrite` recomputes), `workers` > 1 runs them on that many spawned
    processes. Rows carry means and 95% intervals (`panel_row`), checks paired differences
    (`checks.method_check`). A recipe whose run raises becomes a `failed_row`; the others still run.
    Runs offline (`HF_HUB_OFFLINE=1`) with `torch_threads()`. `train=False` trains nothing: it renders the
    finished run files, and a later look whose runs are missing is not taken (`compare.json`'s
    `protocol.pending_looks` names it). Returns `{"rows", "files", "failed"}`."""
    from trl_efficient.recipes import get_recipe

    from .scaling import settings_scale

    settings = settings or TestbedSettings()
    settings.training_seeds()  # fail fast on seeds < 1
    from .jobs import trained_recipe

    for name in recipes:
        get_recipe(trained_recipe(name))  # fail fast on a typo, before any training (a control names its recipe)
        settings_scale(trained_recipe(name), settings)  # and a missing rule
    with torch_threads(), hub_offline():
        return _compare(recipes, settings, output_dir, overwrite, keep_models, include_base, workers, show_progress,
                        train)  # fmt: skip


def plan_runs(names: list[str], settings: TestbedSettings, output_dir: str, keep_models: bool = False,
              overwrite: bool = False) -> dict[str, list]:  # fmt: skip
    """`{name: [jobs.Job, ...]}`: the base model's one evaluation (`"base"`) and every recipe's training seeds. The
    base model is resolved (trained on first use) here, before any worker starts. `overwrite` deletes their result
    files first."""
    from trl_efficient.overthinking.base import base_model_id, resolve_base_model

    from .jobs import BASE, plan_job

    base_id = base_model_id(resolve_base_model(settings.base_model))
    plan = {}
    for name in names:
        seeds = [None] if name == BASE else settings.training_seeds()
        plan[name] = [plan_job(name, s, settings, output_dir, base_id, keep_models=keep_models) for s in seeds]
    if overwrite:
        for job in (j for js in plan.values() for j in js):
            if os.path.isfile(job.path):
                os.remove(job.path)
    return plan


def load_panels(plan: dict[str, list], outcomes: dict[str, dict]) -> tuple[dict, dict, dict]:
    """`(panels, infos, errors)` of planned runs: a `stats.Panel` per name whose runs all finished, with `infos[name]`
    = `{"train_seconds" (mean over seeds), "num_generations", "tight_cap"}`; `errors[name]` the first error of a
    name with a missing run."""
    import hashlib

    from .jobs import load_result
    from .stats import Panel

    panels, infos, errors = {}, {}, {}
    for name, jobs in plan.items():
        missing = [j for j in jobs if not j.finished()]
        if missing:
            errors[name] = next((outcomes[j.path]["error"] for j in missing if outcomes.get(j.path, {}).get("error")),
                                f"no result for {missing[0].label}")  # fmt: skip
            continue
        results = [load_result(j) for j in jobs]
        panels[name] = Panel.from_runs(results)
        secs = [r["train_seconds"] for r in results if r.get("train_seconds") is not None]
        # what the runs measured (records and check records, seed by seed): equal digests = identical runs
        digest = hashlib.sha256(json.dumps([[r["records"], r.get("modes")] for r in results]).encode()).hexdigest()
        per_seed = {
            str(j.seed): hashlib.sha256(json.dumps([r["records"], r.get("modes")]).encode()).hexdigest()[:16]
            for j, r in zip(jobs, results, strict=True)
        }  # per seed: a row with more seeds than its twin
        infos[name] = {"train_seconds": sum(secs) / len(secs) if secs else None,
                       "num_generations": results[0].get("num_generations"),
                       "tight_cap": results[0]["summary"].get("tight_cap"), "records_sha256": digest[:16],
                       "seed_records_sha256": per_seed,
                       "protocols": sorted({str(r.get("protocol_sha256")) for r in results}),
                       "versions": sorted({json.dumps(r.get("versions"), sort_keys=True)
                                           for r in results})}  # fmt: skip
    return panels, infos, errors


def run_protocols(infos: dict) -> dict[str, int]:
    """`{protocol hash: runs}` over the loaded names ("None": written before protocol 1, which recorded no hash).
    Raises when two different protocols' runs would be mixed in one table."""
    counts: dict[str, int] = {}
    for info in infos.values():
        for h in info.get("protocols") or []:
            counts[h] = counts.get(h, 0) + 1
    from .protocol import compatible_runs

    known = sorted(h for h in counts if h != "None")
    if len(known) > 1 and not set(known) <= compatible_runs():
        raise ValueError(f"run files written under different protocols ({', '.join(known)}) cannot form one table; "
                         "rerun them under one protocol (testbed/trl_efficient_testbed/protocol.yaml).")  # fmt: skip
    return counts


def reference_of(name: str, names) -> str | None:
    """The row `name` is compared with: `grpo` when the comparison has it, the base model for `grpo` (and when there
    is no grpo), nothing for the base model.

    >>> reference_of("kimi", ["base", "grpo", "kimi"]), reference_of("grpo", ["base", "grpo"]), reference_of("base", [])
    ('grpo', 'base', None)
    """
    if name == "base":
        return None
    if name != BASE_RECIPE and BASE_RECIPE in names:
        return BASE_RECIPE
    return "base" if "base" in names else None


def panel_rows(panels: dict, infos: dict, errors: dict, names: list[str], settings: TestbedSettings,
               checks: bool = True, cache: dict | None = None) -> list[dict]:  # fmt: skip
    """The rows of `names` in order (failed ones as `failed_row`), each against `reference_of` it, with its method
    check (`checks.method_check` on the panels) when `checks`. `cache` (a dict kept across `compare`'s looks) reuses
    a row whose own seeds and whose common seeds with its reference are unchanged: a row reads its reference only on
    the seeds both have (`stats.Panel.aligned`), so a look that adds seeds recomputes only the rows they change."""
    from .checks import method_check

    rows = []
    floor = None
    for name in names:
        if name in errors:
            g = None
            if name != "base":
                from .jobs import trained_recipe
                from .protocol import row_settings
                from .scaling import settings_scale

                own = row_settings(name, settings)
                g = num_generations_for(settings_scale(trained_recipe(name), own), own)
            rows.append({"recipe": name, "status": "failed", "num_generations": g, "error": errors[name]})
            continue
        ref = reference_of(name, [n for n in names if n in panels])
        info = infos[name]
        own = panels[name].seeds
        common = [seed for seed in own if seed in panels[ref].seeds] if ref in panels else []
        from .verdicts import related

        # the seeds of every other panel the row reads (its matching control, the negative controls)
        others = tuple((n, tuple(panels[n].seeds)) for n in related(name, settings.base_model) if n in panels)
        key = (name, tuple(own), ref, tuple(common), checks, others)
        if cache is not None and key in cache:
            row = dict(cache[key])
            floor = floor if floor is not None else row["mean_floor_tokens"]
            rows.append(row)
            continue
        row = panel_row(name, panels[name], settings, panels.get(ref), ref, info["train_seconds"],
                        info["num_generations"], info["tight_cap"])  # fmt: skip
        floor = floor if floor is not None else row["mean_floor_tokens"]
        if checks and name != "base":
            from .verdicts import check_inputs, score_controls

            inputs = check_inputs(name, panels, ref, floor or 0.0, settings)
            row["method_check"] = method_check(name, inputs, info["tight_cap"])
            score_controls(name, row, panels, ref, floor or 0.0, settings, info["tight_cap"])
        row["records_sha256"] = info.get("records_sha256")
        if info.get("seed_records_sha256"):
            row["seed_records_sha256"] = info["seed_records_sha256"]
        if cache is not None:
            cache[key] = dict(row)
        rows.append(row)
    return rows


def undecided(rows: list[dict], seeds: int | None = None, base_model: str | None = None) -> list[str]:
    """The recipes whose method check is inconclusive (not the baselines, not failed rows), and `grpo`, the
    reference of their comparisons, when it is a row and any is: those that train more seeds at `compare`'s next
    look of `seeds` seeds (`look_sizes`, up to `TestbedSettings.max_seeds`; a row whose looks end earlier,
    `protocol.row_max_seeds`: its own end or every row's, `protocol.last_look`, stays where it is).

    >>> undecided([{"recipe": "grpo", "method_check": {"claim": "baseline", "held": None}},
    ...            {"recipe": "kimi", "method_check": {"claim": "shorter", "held": True}},
    ...            {"recipe": "gfpo", "method_check": {"claim": "shorter", "held": None}},
    ...            {"recipe": "prorl", "method_check": {"claim": "accuracy", "held": None}}], seeds=6)
    ['gfpo', 'grpo']
    """
    from .protocol import matching_control, row_max_seeds
    from .verdicts import is_control, negative_controls, twins

    names = [r["recipe"] for r in rows if r.get("status", "ok") == "ok"]
    duplicates = twins(rows)  # one row with another: "cannot be judged", not inconclusive (protocol 8 fixes the code)
    open_ = [r["recipe"] for r in rows if r.get("status", "ok") == "ok" and "method_check" in r
             and not is_baseline(r["method_check"]) and r["method_check"].get("held") is None
             and not r["method_check"].get("cannot_judge") and not is_control(r["recipe"])
             and r["recipe"] not in duplicates
             and (seeds is None or row_max_seeds(r["recipe"]) >= seeds)]  # fmt: skip
    # their matching controls train the same seeds (a check reads its control on the seeds both have)
    controls = [
        c
        for c in dict.fromkeys(matching_control(n, base_model) for n in open_)
        if c and c != BASE_RECIPE and c in names
    ]
    base = [BASE_RECIPE] if open_ and BASE_RECIPE in names and BASE_RECIPE not in open_ else []
    # protocol 10 (`looks.controls_follow_rows`): the negative controls train the seeds the rows they judge train
    follow = [n for n in negative_controls() if n in names and n not in controls] if open_ and _follow() else []
    return open_ + base + controls + follow


def _follow() -> bool:
    from .protocol import load

    return bool(load()["looks"].get("controls_follow_rows"))


def look_sizes(seeds: int, max_seeds: int) -> list[int]:
    """The number of training seeds at each look of `compare`: `seeds` first, then `seeds` more at a time (the last
    look capped at `max_seeds`) for the checks still undecided (`undecided`); `max_seeds` 0 or <= `seeds`: one look.

    >>> look_sizes(3, 12), look_sizes(3, 6), look_sizes(3, 8), look_sizes(3, 0)
    ([3, 6, 9, 12], [3, 6], [3, 6, 8], [3])
    """
    sizes = [seeds]
    while sizes[-1] < max_seeds:
        sizes.append(min(sizes[-1] + seeds, max_seeds))
    return sizes


def _reference(rows: list[dict]) -> tuple[dict | None, str]:
    for name in (BASE_RECIPE, "base"):
        ref = next((r for r in rows if r["recipe"] == name and r.get("status", "ok") == "ok"), None)
        if ref is not None:
            return ref, name
    return None, "-"


def _look(seeds: int, jobs: list, trained: dict, started: float) -> dict:
    """One look's entry of `compare.json`'s `timing`: its seeds, the runs it holds, those trained now, the seconds
    since `started`."""
    return {"seeds": seeds, "runs": len(jobs), "trained": len(trained),
            "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip


def _trained_any(timing: dict | None) -> bool:
    """Whether the invocation a `timing` record describes trained any run (a re-render trains none)."""
    return any(look.get("trained") for look in (timing or {}).get("looks") or [])


def _kept_timing(path: str, timing: dict) -> dict:
    """`{"timing": ...}` for the `compare.json` at `path` about to be written: this invocation's `timing`, unless it
    trained nothing (a re-render, `--no-train` or every run already finished) and the file there holds the timing of
    an invocation that did; then that timing, its `timing_note` and the confirmation pass's record stay (a re-render
    must not overwrite the measured runtime, scorecard item 7).

    >>> _kept_timing("/no/such/compare.json", {"looks": [{"trained": 0}]})
    {'timing': {'looks': [{'trained': 0}]}}
    """
    if _trained_any(timing) or not os.path.exists(path):
        return {"timing": timing}
    with open(path) as f:
        earlier = json.load(f)
    if not _trained_any(earlier.get("timing")):
        return {"timing": timing}
    # and the confirmation pass's record: the same runs, nothing trained (`confirm` rewrites it when it runs)
    return {k: earlier[k] for k in ("timing", "timing_note", "confirmation") if k in earlier}


def comparison_recipes(base_model: str | None = None) -> list[str]:
    """`--recipes all`: grpo, every compared recipe and the protocol's own rows (LISA), less the rows scoped to
    another scale rule than `base_model`'s or to none (`protocol.row_in_comparison`; protocol 11: ProRL's and BroRL's
    rows were world v2's alone, protocol 13: in no comparison). The matching controls follow from these
    (`with_controls`).

    >>> v2, v3 = comparison_recipes("testbed:v2"), comparison_recipes("testbed:v3")
    >>> v2[0], v2 == v3, "lisa" in v3, "prorl" in v2  # protocol 13: ProRL and BroRL in no comparison
    ('grpo', True, True, False)
    """
    from trl_efficient.recipes import RECIPES

    from .protocol import load, row_in_comparison
    from .specs import compared_recipes

    rows = [n for n in load().get("rows") or {} if n not in RECIPES]  # protocol rows of their own (lisa)
    names = [BASE_RECIPE, *(n for n in compared_recipes() if n != BASE_RECIPE), *rows]
    return [n for n in names if row_in_comparison(n, base_model)]


def with_controls(recipes: list[str], base_model: str | None = None) -> list[str]:
    """`recipes` and the matching control runs their checks need (`protocol.matching_control`), after them.

    >>> with_controls(["grpo", "hbpo", "kimi", "dler"])
    ['grpo', 'hbpo', 'kimi', 'dler', 'grpo-prompted', 'grpo-cap192']
    """
    from .protocol import CONTROL_JOBS, matching_control

    controls = [matching_control(n, base_model) for n in recipes]
    return list(recipes) + [c for c in dict.fromkeys(controls) if c in CONTROL_JOBS and c not in recipes]


def _compare(recipes, settings, output_dir, overwrite, keep_models, include_base, workers, show_progress,
             train: bool = True) -> dict:  # fmt: skip
    from trl_efficient.eval.plots import pareto_plot

    from .jobs import run_jobs
    from .protocol import describe
    from .verdicts import annotate

    os.makedirs(output_dir, exist_ok=True)
    started = time.perf_counter()
    names = (["base"] if include_base else []) + with_controls(list(recipes), settings.base_model)
    plan = plan_runs(names, settings, output_dir, keep_models, overwrite)
    pending: dict[str, int] = {}  # without training: the looks the protocol asks for whose runs are missing
    if not train:  # a matching control never trained is left out (its recipe's check says so), not a failed row
        from .protocol import CONTROL_JOBS

        for name in [n for n in names if n in CONTROL_JOBS and not any(j.finished() for j in plan[n])]:
            names.remove(name)
            plan.pop(name)
            pending[name] = settings.seeds
    jobs = [j for js in plan.values() for j in js]
    outcomes = run_jobs(jobs if train else [], workers, show_progress, "testbed compare")
    panels, infos, errors = load_panels(plan, outcomes)
    cache: dict = {}  # rows the later looks leave unchanged (`panel_rows`)
    rows = panel_rows(panels, infos, errors, names, settings, cache=cache)
    # the invocation's own timing (scorecard item 7): per look, the runs it holds and those trained now
    looks = [_look(settings.seeds, jobs, outcomes, started)]
    for seeds in look_sizes(settings.seeds, settings.max_seeds)[1:]:  # the later looks (`look_sizes`)
        more = undecided(rows, seeds, settings.base_model)
        if not train:
            from .verdicts import is_control

            bigger = plan_runs(more, dataclasses.replace(settings, seeds=seeds), output_dir, keep_models)
            missing = [n for n in more if not all(j.finished() for j in bigger[n])]
            for name in missing:
                pending.setdefault(name, seeds)
            more = [n for n in more if n not in missing]
            if not any(n != BASE_RECIPE and not is_control(n) for n in more):
                break
        if not more:
            break
        logger.info("testbed: %d undecided check(s) (%s): seeds up to %d", len(more) - (BASE_RECIPE in more),
                    ", ".join(more), seeds)  # fmt: skip
        look_started = time.perf_counter()
        plan.update(plan_runs(more, dataclasses.replace(settings, seeds=seeds), output_dir, keep_models))
        jobs = [j for n in more for j in plan[n]]
        new = run_jobs(jobs, workers, show_progress, f"testbed seeds {seeds}")
        outcomes.update(new)
        panels, infos, errors = load_panels(plan, outcomes)
        rows = panel_rows(panels, infos, errors, names, settings, cache=cache)
        looks.append(_look(seeds, jobs, new, look_started))
    from .protocol import row_settings

    own = {n: row_settings(n, settings) for n in recipes}  # a protocol row's own steps (ProRL's longer run)
    scales = {n: row_scale(n, own[n]) for n in recipes}
    failed = [r["recipe"] for r in rows if r.get("status", "ok") != "ok"]
    files = {"json": os.path.join(output_dir, "compare.json"), "markdown": os.path.join(output_dir, "compare.md")}
    runs = {name: [os.path.relpath(j.path, output_dir) for j in jobs] for name, jobs in plan.items()}
    verdicts = annotate(rows)
    protocol = {
        **describe(),
        "run_files": run_protocols(infos),
        "pending_looks": pending,
        "library_versions": sorted({v for info in infos.values() for v in info.get("versions") or []}),
    }
    timing = {"workers": workers, "seconds": round(time.perf_counter() - started, 1), "looks": looks}
    kept = _kept_timing(files["json"], timing)
    with open(files["json"], "w") as f:
        json.dump({"settings": settings.to_dict(), "scales": scales, "rows": rows, "runs": runs, **kept,
                   "protocol": protocol, "verdicts": verdicts}, f, indent=1)  # fmt: skip
    with open(files["markdown"], "w") as f:
        f.write(compare_markdown(rows, settings.to_dict(), scales, {**protocol, "verdicts": verdicts}))
    for row in rows:
        if row.get("status", "ok") == "ok":
            logger.info("testbed: %s accuracy %.3f mean tokens %.1f redundant share %.3f", row["recipe"],
                        row["accuracy"], row["mean_tokens"], row["redundant_share"])  # fmt: skip
    ok_rows = [r for r in rows if r.get("status", "ok") == "ok"]
    floor = ok_rows[0]["mean_floor_tokens"] if ok_rows else None
    plot = (
        pareto_plot(
            ok_rows,
            os.path.join(output_dir, "pareto.png"),
            group_key="recipe",
            label_key=None,
            title=f"Testbed: accuracy vs tokens after {settings.max_steps} GRPO steps",
            reference_x={"floor (shortest correct traces)": floor} if floor else None,
        )
        if ok_rows
        else None
    )
    if plot:
        files["plot"] = plot
    files.update(draw_compare_plots(ok_rows, output_dir, f"Testbed after {settings.max_steps} GRPO steps"))
    return {"rows": rows, "files": files, "failed": failed, "timing": timing}


CONFIRMATION_SEED = 1000  # the confirmation pass's data and evaluation seed: training seeds 1000.. never looked at


def confirm(json_path: str, output_dir: str, seed: int = CONFIRMATION_SEED, workers: int = 1, train: bool = True,
            show_progress: bool = True) -> dict:  # fmt: skip
    """The confirmation pass (issue 32, item 5): every recipe whose check is held or not held in `json_path`'s
    comparison, with grpo, its matching controls and the negative controls, trained once more on `settings.seeds`
    training seeds never looked at and evaluated on a fresh task set (both from `seed`: `TestbedSettings.seed` seeds
    the training tasks, the training seeds and the evaluation tasks), in one look with no change to anything;
    `compare` writes its table under `output_dir`, and the comparison's checks are marked `confirmed`
    (`verdicts.confirm_rows`), its `compare.json` and `compare.md` written again with a "confirmed" column.
    Returns `{"counts", "rows"}`."""
    from .verdicts import confirm_rows, negative_controls

    with open(json_path) as f:
        data = json.load(f)
    decided = [r["recipe"] for r in data["rows"] if (r.get("method_check") or {}).get("label") in ("held", "not held")]
    fields = {f.name for f in dataclasses.fields(TestbedSettings)}
    settings = TestbedSettings(**{k: v for k, v in data["settings"].items() if k in fields})
    settings = dataclasses.replace(settings, seed=seed, max_seeds=0)
    names = list(dict.fromkeys([BASE_RECIPE, *decided, *negative_controls()]))
    out = compare(names, settings, output_dir, workers=workers, train=train, show_progress=show_progress)
    counts = confirm_rows(data["rows"], out["rows"])
    with open(out["files"]["json"]) as f:
        timing = json.load(f).get("timing")  # its runs are part of the comparison's runtime (scorecard item 7)
    earlier = data.get("confirmation") or {}
    kept = {"timing": timing}
    if not _trained_any(out["timing"]) and _trained_any(earlier.get("timing")):
        # this pass trained nothing (a re-render): the measured confirmation and its note stay (`_kept_timing`)
        kept = {k: earlier[k] for k in ("timing", "timing_note") if k in earlier}
    data["confirmation"] = {"seed": seed, "seeds": settings.training_seeds(), "recipes": decided, "counts": counts,
                            "output_dir": os.path.relpath(output_dir, os.path.dirname(json_path)),
                            **kept}  # fmt: skip
    with open(json_path, "w") as f:
        json.dump(data, f, indent=1)
    with open(os.path.join(os.path.dirname(json_path), "compare.md"), "w") as f:
        f.write(render_compare_json(json_path))
    return {"counts": counts, "rows": out["rows"]}


def draw_compare_plots(rows: list[dict], output_dir: str, title: str) -> dict:
    """`per_difficulty.png` (small multiples by method family, with interval bands) and `checks.png` (useful vs
    useless checks per completion) of the rows that have the fields; `{"per_difficulty", "checks"}` of those drawn."""
    from .plots import checks_plot, per_difficulty_plot

    files = {}
    per_k = [r for r in rows if r.get("floor_ratio_by_difficulty")]
    if per_k:
        path = per_difficulty_plot(per_k, os.path.join(output_dir, "per_difficulty.png"), title)
        if path:
            files["per_difficulty"] = path
    with_checks = [r for r in rows if "useful_checks" in r]
    if with_checks:
        path = checks_plot(with_checks, os.path.join(output_dir, "checks.png"), title)
        if path:
            files["checks"] = path
    return files


def row_scale(name: str, settings: TestbedSettings) -> dict:
    """What `name` trains with at the testbed's scale (`compare.json`'s `scales`): its recipe's scale rule, and a
    protocol row's own reward arguments over it (protocol 10: `constant-penalty-half`'s alpha, `row_reward_kwargs`).

    >>> row_scale("constant-penalty-half", TestbedSettings())["reward_kwargs"]["constant_length"]["alpha"] == 1 / 768
    True
    """
    from .jobs import row_reward_kwargs, trained_recipe
    from .scaling import settings_scale

    scale = settings_scale(trained_recipe(name), settings).to_dict()
    extra = row_reward_kwargs(name)
    if extra:
        kwargs = dict(scale.get("reward_kwargs") or {})
        for builder, values in extra.items():
            kwargs[builder] = {**kwargs.get(builder, {}), **values}
        scale["reward_kwargs"] = kwargs
        scale["rule"] += "; protocol row: " + ", ".join(
            f"{b}.{k} = {v:.5g}" if isinstance(v, float) else f"{b}.{k} = {v}" for b, kw in extra.items()
            for k, v in kw.items()) + " over it"  # fmt: skip
    return scale


def render_compare_json(path: str) -> str:
    """`compare.md` from a `compare.json` (what `compare` wrote), so a committed table can be checked against its
    data."""
    with open(path) as f:
        data = json.load(f)
    protocol = data.get("protocol")
    if protocol is not None:
        protocol = {**protocol, "verdicts": data.get("verdicts")}
    return compare_markdown(data["rows"], data.get("settings"), data.get("scales"), protocol)
