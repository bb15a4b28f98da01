r"""
Agreement with the literature (issue 35, item 5; issue 48): every published head-to-head between implemented recipes
(`literature.yaml`), read on a testbed comparison on **both** metrics, and the agreement counts per metric.

`trl-efficient testbed literature [RESULTS_DIR]` prints the table and the count lines; docs/literature.md holds the
committed comparisons' renderings and the diagnosis of every disagreement.

**The published signs** (`published_signs`, from the two arms' published numbers alone, checked for every entry by
the tests): one per metric, signed in the winner's favour,

- accuracy: $s_{acc} = +$ when $a_w - a_l \ge 1$ point, $-$ when $a_w - a_l \le -1$ point, else no clear difference;
- tokens: $s_{tok} = +$ when the winner is shorter by at least 10% of the loser's tokens ($1 - L_w / L_l \ge 0.1$),
  $-$ when it is longer by at least 10% ($L_w / L_l - 1 \ge 0.1$), else no clear difference.

A metric without a clear published difference is **not read**. A winner that is more accurate *and* longer gets two
readings, accuracy (+) and tokens (-): it is never judged on accuracy alone.

**The testbed's difference** (`read_pair`): the rows' runs as the comparison recorded them (`compare.json`'s `runs`,
the seeds each row was trained with), paired by training seed on the seeds both rows have and by task (the same
evaluation tasks and sampling streams), exactly as `compare.md` computes a recipe minus grpo
(`runner._difference`: one statistic on the same task resamples for both rows, Student t over the per-seed
differences, the two combined as in `stats.interval`; 95%, `settings.bootstrap` resamples seeded with
`settings.seed`), signed to the paper's sign on each metric:

$$ \Delta_{acc} = s_{acc} (\mathrm{acc}_w - \mathrm{acc}_l), \qquad
   \Delta_{tok} = s_{tok} (\mathrm{tokens}_l - \mathrm{tokens}_w) $$

so that a positive difference is what the paper shows on that metric (for a winner published longer, $\Delta_{tok} > 0$
means the testbed's winner is longer too).

**Readings** (`reading`, one per read metric): `agrees` when the interval lies above 0, `disagrees` when it lies below
0, `undecided` when it holds 0; `cannot be judged` when a row is missing or failed in the comparison, or when the two
rows measured the same runs (`compare.json` marks a row `duplicate_of` its twin: laser-de = laser-d in world v2, the
same records seed by seed). A pair with one duplicated row is read on that row's own runs.

**Counts** (`concordance`, per world): over the readings of pairs whose source measured both arms (`run: measured`;
`copied` pairs are read and printed but counted apart), per metric and over all read metrics together: agree,
disagree, undecided (the decided readings are those that agree or disagree), cannot be judged; and Kendall tau

$$ \tau = \frac{C - D}{C + D} $$

- *all readings*: $C$ the readings whose point estimate is in the paper's direction ($\Delta > 0$), $D$ those against
  it ($\Delta < 0$); a point exactly 0 is a tie, counted and printed but in neither $C$ nor $D$;
- *decided readings*: $C$ the agreements, $D$ the disagreements (undecided readings left out).

With nothing counted, tau is undefined (`None`, printed "-").

**Matched readings** (issue 35, item 4; `matched.py`, its formulas and choices in its docstring): a pair with a swept
recipe (`frontier.json`) is also read against that recipe's curve: the curve's accuracy at the other recipe's mean
tokens minus the other's accuracy (*accuracy at matched tokens*), and the curve's tokens at the other's accuracy
against the other's tokens (*tokens at matched accuracy*), with the interval of the same paired bootstrap and
Student t over the seeds; "out of the sweep's range" when no two points bracket it. `matched.read_matched` signs
both in the winner's favour; the matched count line (`matched_concordance`) reads, for every read metric, the matched
reading on that metric signed by its published sign, beside the same readings' point readings.

>>> kendall_tau(3, 1), kendall_tau(0, 2), kendall_tau(0, 0) is None
(0.5, -1.0, True)
>>> published_signs({"accuracy": 64.8, "tokens": 3832}, {"accuracy": 56.2, "tokens": 2278})  # LAPO vs L1-Exact
{'accuracy': 1, 'tokens': -1}
>>> published_signs({"accuracy": 34.37, "tokens": 2888}, {"accuracy": 34.38, "tokens": 3551})  # DA-DLER vs DLER
{'accuracy': 0, 'tokens': 1}
"""

from __future__ import annotations

import json
import os
from importlib import resources

from .matched import AXES, load_curves, read_matched

__all__ = [
    "ACCURACY_POINTS",
    "DEFAULT_RESULTS",
    "METRICS",
    "READINGS",
    "TOKENS_SHARE",
    "concordance",
    "kendall_tau",
    "literature",
    "literature_markdown",
    "load_pairs",
    "matched_concordance",
    "published_signs",
    "read_pair",
    "reading",
]

DEFAULT_RESULTS = os.path.join("perf", "testbed", "results")  # the committed comparison (world v2)
METRICS = {"accuracy": "correct", "tokens": "tokens"}  # each metric read: the run records' field
ACCURACY_POINTS = 1.0  # a clear published accuracy difference: at least this many points
TOKENS_SHARE = 0.10  # a clear published tokens difference: at least this share of the loser's tokens
READINGS = ("agrees", "disagrees", "undecided", "cannot be judged")
KINDS = ("own", "third-party")
RUNS = ("measured", "copied")
FIELDS = ("winner", "loser", "model", "benchmark", "winner_result", "loser_result", "approximate", "source", "table",
          "cite", "kind", "run", "how")  # fmt: skip


def published_signs(winner: dict, loser: dict) -> dict[str, int]:
    """The paper's sign on each metric, from the two arms' numbers (`{"accuracy" (%), "tokens"}`; module docstring):
    `{"accuracy": s, "tokens": s}`, each +1 (the winner better: more accurate, shorter), -1 (the winner worse: less
    accurate, longer) or 0 (no clear difference: under `ACCURACY_POINTS` points, under `TOKENS_SHARE` of the loser's
    tokens). A tolerance of 1e-9 keeps a difference of exactly 1 point or 10% on the clear side."""
    gap = winner["accuracy"] - loser["accuracy"]
    accuracy = 1 if gap >= ACCURACY_POINTS - 1e-9 else -1 if gap <= -ACCURACY_POINTS + 1e-9 else 0
    share = (winner["tokens"] - loser["tokens"]) / loser["tokens"]
    tokens = 1 if share <= -TOKENS_SHARE + 1e-9 else -1 if share >= TOKENS_SHARE - 1e-9 else 0
    return {"accuracy": accuracy, "tokens": tokens}


def load_pairs(path: str | None = None) -> list[dict]:
    """The entries of `literature.yaml` (or `path`), each checked: every field present, `kind` one of `KINDS`, `run`
    one of `RUNS`, numbers for both sides, no pair twice (either order). Recipe names are checked against the
    registry by the tests, which may import it."""
    import yaml

    if path is None:
        text = resources.files("trl_efficient_testbed").joinpath("literature.yaml").read_text()
    else:
        with open(path) as f:
            text = f.read()
    pairs = yaml.safe_load(text) or []
    seen = set()
    for i, pair in enumerate(pairs):
        where = f"literature.yaml entry {i + 1} ({pair.get('winner')} > {pair.get('loser')})"
        missing = [k for k in FIELDS if pair.get(k) in (None, "")]
        if missing:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        if pair["kind"] not in KINDS or pair["run"] not in RUNS:
            raise ValueError(f"{where}: kind must be one of {list(KINDS)} and run one of {list(RUNS)}, got "
                             f"{pair['kind']!r} and {pair['run']!r}")  # fmt: skip
        for side in ("winner_result", "loser_result"):
            if not all(isinstance(pair[side].get(k), (int, float)) for k in ("accuracy", "tokens")):
                raise ValueError(f"{where}: {side} needs numeric accuracy and tokens, got {pair[side]}")
        key = frozenset((pair["winner"], pair["loser"]))
        if key in seen or len(key) < 2:
            raise ValueError(f"{where}: the pair is listed twice (or a recipe against itself)")
        seen.add(key)
    return pairs


def reading(estimate: list | None) -> str:
    """`agrees` / `disagrees` / `undecided` from `[point, low, high]` of a difference signed so that positive is the
    paper's direction; `cannot be judged` without one.

    >>> reading([0.4, 0.1, 0.7]), reading([-0.4, -0.7, -0.1]), reading([0.4, -0.1, 0.9]), reading(None)
    ('agrees', 'disagrees', 'undecided', 'cannot be judged')
    """
    if estimate is None:
        return "cannot be judged"
    _, low, high = estimate
    return "agrees" if low > 0 else "disagrees" if high < 0 else "undecided"


def _signed(estimate: list | None, sign: int) -> list | None:
    """`[point, low, high]` times `sign` (the interval's ends swapped when negative)."""
    if estimate is None or sign > 0:
        return estimate
    point, low, high = estimate
    return [-point, -high, -low]


def kendall_tau(concordant: int, discordant: int) -> float | None:
    """$(C - D) / (C + D)$, `None` when both are 0 (module docstring)."""
    total = concordant + discordant
    return None if total == 0 else (concordant - discordant) / total


def concordance(readings: list[dict]) -> dict:
    """Counts and both taus over readings (`{"reading", "difference"}`, one per pair and read metric): `all` (point
    estimates: concordant, discordant, ties) and `decided` (agrees, disagrees; undecided left out), the readings that
    cannot be judged in neither.

    >>> r = [{"reading": "agrees", "difference": [1, 0.5, 2]}, {"reading": "undecided", "difference": [1, -1, 3]},
    ...      {"reading": "undecided", "difference": [0.0, -1, 1]}, {"reading": "disagrees", "difference": [-1, -2, -1]},
    ...      {"reading": "cannot be judged", "difference": None}]
    >>> out = concordance(r)  # all: C 2, D 1, one tie -> 1/3; decided: 1 agrees, 1 disagrees -> 0
    >>> out["all"]
    {'concordant': 2, 'discordant': 1, 'ties': 1, 'tau': 0.3333333333333333}
    >>> out["decided"]
    {'agrees': 1, 'disagrees': 1, 'undecided': 2, 'tau': 0.0}
    """
    judged = [r for r in readings if r["difference"] is not None]
    points = [r["difference"][0] for r in judged]
    c, d = sum(p > 0 for p in points), sum(p < 0 for p in points)
    counts = {k: sum(r["reading"] == k for r in readings) for k in READINGS}
    return {
        "readings": len(readings),
        "cannot_judge": counts["cannot be judged"],
        "all": {"concordant": c, "discordant": d, "ties": len(points) - c - d, "tau": kendall_tau(c, d)},
        "decided": {"agrees": counts["agrees"], "disagrees": counts["disagrees"], "undecided": counts["undecided"],
                    "tau": kendall_tau(counts["agrees"], counts["disagrees"])},
    }  # fmt: skip


def metric_readings(readings: list[dict], metric: str | None = None, run: str = "measured") -> list[dict]:
    """The per-metric readings of `read_pair` results (`metric` one of `METRICS`, or None for both), of the pairs
    whose `run` is `run` (None: every pair), leaving out metrics not read (no clear published difference)."""
    out = []
    for r in readings:
        if run is not None and r["pair"]["run"] != run:
            continue
        for name in METRICS if metric is None else (metric,):
            one = r["metrics"][name]
            if one["sign"]:
                matched = (r.get("matched") or {}).get(name)
                out.append({"pair": r["pair"], "metric": name, "sign": one["sign"], "reading": one["reading"],
                            "difference": one["difference"], "matched": matched})  # fmt: skip
    return out


def summary(readings: list[dict]) -> dict:
    """`concordance` per metric and over both (`accuracy`, `tokens`, `all`) for the measured pairs, the same for the
    copied pairs (`copied`), and the number of pairs and of metrics not read."""
    measured = [r for r in readings if r["pair"]["run"] == "measured"]
    return {
        "pairs": len(readings),
        "measured_pairs": len(measured),
        "not_read": {m: sum(1 for r in measured if not r["metrics"][m]["sign"]) for m in METRICS},
        **{m: concordance(metric_readings(readings, m)) for m in METRICS},
        "all": concordance(metric_readings(readings)),
        "copied": concordance(metric_readings(readings, run="copied")),
    }


def _runs(results_dir: str, paths: list[str]) -> list[dict]:
    """One row's run files (paths relative to `results_dir`, as `compare.json` records them)."""
    runs = []
    for path in paths:
        with open(os.path.join(results_dir, path)) as f:
            runs.append(json.load(f))
    return runs


def read_pair(pair: dict, rows: dict[str, dict], panels: dict, settings: dict) -> dict:
    """One pair on the comparison: `{"pair", "signs" (`published_signs`), "metrics": {metric: {"sign", "difference"
    ([point, low, high] signed to the paper's sign; None when not read or not judged), "reading"}}, "seeds" (the
    common training seeds), "note"}`. A metric whose sign is 0 is not read (`reading` "not read"). `rows` are
    `compare.json`'s rows by recipe, `panels` the loaded panels by recipe (`stats.Panel`), `settings` the
    comparison's settings (bootstrap, seed)."""
    from .runner import _difference

    winner, loser = pair["winner"], pair["loser"]
    signs = published_signs(pair["winner_result"], pair["loser_result"])
    out = {"pair": pair, "signs": signs, "seeds": [], "note": "",
           "metrics": {m: {"sign": signs[m], "difference": None, "reading": "not read"} for m in METRICS}}  # fmt: skip
    absent = [n for n in (winner, loser) if n not in panels]
    twins = {n: (rows[n].get("method_check") or {}).get("duplicate_of") for n in (winner, loser) if n in rows}
    judged = False
    if absent:
        out["note"] = f"no finished row for {' and '.join(absent)} in this comparison"
    elif twins.get(winner) == loser or twins.get(loser) == winner:
        out["note"] = "the two rows measured the same runs"
    else:
        judged = True
        a, _ = panels[winner].aligned(panels[loser])
        out["seeds"] = list(a.seeds)
        out["note"] = "; ".join(f"{n} = {t} (the same runs)" for n, t in twins.items() if t)
    for metric, one in out["metrics"].items():
        if not one["sign"]:
            continue
        if judged:
            first, second = (winner, loser) if metric == "accuracy" else (loser, winner)  # the winner's favour
            estimate = _difference(panels[first], panels[second], settings["bootstrap"], settings["seed"],
                                   METRICS[metric])  # fmt: skip
            one["difference"] = _signed(estimate, one["sign"])
        one["reading"] = reading(one["difference"])
    return out


def literature(results_dir: str = DEFAULT_RESULTS, pairs: list[dict] | None = None) -> dict:
    """Every pair of `pairs` (default `load_pairs()`) read on the comparison in `results_dir` (its `compare.json`
    and run files) on both metrics and, where a recipe of the pair is swept (`frontier.json`), on its curve
    (`matched.read_matched`, under each reading's `matched`, signed in the winner's favour): `{"results_dir",
    "readings", "summary" (`summary`), "matched_summary" (`matched_concordance`)}`. Only the rows and sweeps the
    pairs name are loaded."""
    from .stats import Panel

    pairs = load_pairs() if pairs is None else pairs
    with open(os.path.join(results_dir, "compare.json")) as f:
        data = json.load(f)
    rows = {r["recipe"]: r for r in data["rows"] if r.get("status", "ok") == "ok"}
    names = {n for p in pairs for n in (p["winner"], p["loser"])}
    runs = {n: _runs(results_dir, data["runs"][n]) for n in sorted(names) if n in rows and data["runs"].get(n)}
    panels = {n: Panel.from_runs(r) for n, r in runs.items()}
    curves = load_curves(results_dir, names, {n: r[0]["key"] for n, r in runs.items()})
    readings = [read_pair(p, rows, panels, data["settings"]) for p in pairs]
    for r in readings:
        judged = bool(r["seeds"])
        r["matched"] = read_matched(r["pair"], curves, panels, data["settings"]) if judged else dict.fromkeys(AXES)
    return {"results_dir": results_dir, "readings": readings, "summary": summary(readings),
            "matched_summary": matched_concordance(readings)}  # fmt: skip


def matched_concordance(readings: list[dict]) -> dict:
    """`concordance` over the read metrics of measured pairs with a matched reading on that metric (accuracy at
    matched tokens for accuracy, tokens at matched accuracy for tokens; in the sweep's range), the matched difference
    signed by the published sign (`matched`), and over the same readings' point readings (`point`).

    >>> m = lambda d: {"difference": d}
    >>> pair = {"run": "measured"}
    >>> r = [{"pair": pair, "metrics": {"accuracy": {"sign": 1, "reading": "disagrees", "difference": [-1, -2, -0.5]},
    ...                                 "tokens": {"sign": 0, "reading": "not read", "difference": None}},
    ...       "matched": {"accuracy": m([0.5, 0.1, 0.9]), "tokens": m([2, 1, 3])}},  # tokens not read: left out
    ...      {"pair": pair, "metrics": {"accuracy": {"sign": -1, "reading": "undecided", "difference": [1, -1, 3]},
    ...                                 "tokens": {"sign": 0, "reading": "not read", "difference": None}},
    ...       "matched": {"accuracy": m(None), "tokens": None}}]  # out of range on its metric
    >>> out = matched_concordance(r)
    >>> out["matched"]["readings"], out["matched"]["decided"]["tau"], out["point"]["decided"]["tau"]
    (1, 1.0, -1.0)
    """
    with_matched = [r for r in metric_readings(readings) if (r["matched"] or {}).get("difference")]
    matched = [{"reading": reading(d), "difference": d}
               for d in (_signed(r["matched"]["difference"], r["sign"]) for r in with_matched)]  # fmt: skip
    return {"matched": concordance(matched), "point": concordance(with_matched)}


def _published(side: dict) -> str:
    return f"{side['accuracy']:g}% / {side['tokens']:g} tok"


def _sign(value: int) -> str:
    return {1: "+", -1: "-", 0: "none"}[value]


def _difference_cell(metric: str, estimate: list | None) -> str:
    """Accuracy in points (x100), tokens as they are; `-` without an estimate."""
    if estimate is None:
        return "-"
    scale, unit = (100, " pts") if metric == "accuracy" else (1, " tok")
    point, low, high = (v * scale for v in estimate)
    return f"{point:+.1f} [{low:+.1f}, {high:+.1f}]{unit}"


def _metric_cell(metric: str, one: dict, pair: dict) -> str:
    """One metric of a pair: the paper's sign, the testbed's difference signed to it and the reading; `not read`
    with the paper's difference (winner - loser: points, or share of the loser's tokens) when it is not clear."""
    win, lose = pair["winner_result"], pair["loser_result"]
    if not one["sign"]:
        gap = (f"{win['accuracy'] - lose['accuracy']:+.1f} pts" if metric == "accuracy"
               else f"{(win['tokens'] - lose['tokens']) / lose['tokens']:+.0%} tok")  # fmt: skip
        return f"not read (paper {gap})"
    label = one["reading"] if one["reading"] in ("agrees", "undecided", "cannot be judged") else f"**{one['reading']}**"
    return f"paper {_sign(one['sign'])}: {_difference_cell(metric, one['difference'])}, {label}"


def _matched_cell(metric: str, matched: dict | None, sign: int = 1) -> str:
    """A matched reading (`matched.read_matched`): the difference signed by the published `sign` (0: shown in the
    winner's favour, no reading), its reading, the curve's segment and the seeds; the other's value and the curve's
    range when out of the sweep's range; `-` without a sweep."""
    if matched is None:
        return "-"
    swept, other = matched["swept"], matched["other"]
    if matched["difference"] is None and matched["segment"] is None and not matched["note"]:
        (low, high), at = matched["range"], matched["at"]
        if metric == "accuracy":  # matched on tokens
            return f"out of the sweep's range ({other} {at:.1f} tok, {swept}'s sweep {low:.1f}-{high:.1f})"
        return f"out of the sweep's range ({other} {100 * at:.1f}%, {swept}'s sweep {100 * low:.1f}-{100 * high:.1f}%)"
    if matched["difference"] is None:
        return f"{matched['note']} ({swept}: {' to '.join(matched['segment'] or ['its curve'])})"
    signed = _signed(matched["difference"], sign or 1)
    label = reading(signed) if sign else "not read, in the winner's favour"
    return (f"{_difference_cell(metric, signed)}, {label} ({swept}: "
            f"{' to '.join(matched['segment'])}, {len(matched['seeds'])} seeds)")  # fmt: skip


def _tau(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def _count_line(name: str, s: dict) -> str:
    """One count line: the readings, agree / disagree / undecided / cannot be judged, and both taus."""
    a, d = s["all"], s["decided"]
    return (f"{name}: {s['readings']} readings: {d['agrees']} agree, {d['disagrees']} disagree, {d['undecided']} "
            f"undecided, {s['cannot_judge']} cannot be judged; decided ({d['agrees']} - {d['disagrees']}) / "
            f"({d['agrees']} + {d['disagrees']}) = {_tau(d['tau'])}; point estimates ({a['concordant']} - "
            f"{a['discordant']}) / ({a['concordant']} + {a['discordant']}) = {_tau(a['tau'])}, "
            f"{a['ties']} tied")  # fmt: skip


def literature_markdown(result: dict) -> str:
    """The table (one row per pair: pair, source and run, the paper's numbers, each metric's published sign with the
    testbed's difference signed to it, its 95% interval and reading, the seeds, and the two matched readings:
    `_matched_cell`) and the count lines: per metric and over all readings of the measured pairs, the copied pairs
    apart, and the matched readings."""
    lines = ["| # | pair (paper's winner > loser) | source | run | paper: winner vs loser | accuracy: paper's sign, "
             "testbed difference [95%], reading | tokens: paper's sign, testbed difference [95%], reading | seeds | "
             "accuracy at matched tokens [95%] | tokens at matched accuracy [95%] |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for i, r in enumerate(result["readings"], 1):
        p = r["pair"]
        paper = f"{_published(p['winner_result'])} vs {_published(p['loser_result'])}, {p['model']}"
        paper += " (read off a figure)" if p["approximate"] else ""
        seeds = f"{len(r['seeds']) or '-'}" + (f" ({r['note']})" if r["note"] else "")
        matched = r.get("matched") or {}
        cells = [_metric_cell(m, r["metrics"][m], p) for m in METRICS]
        lines.append(f"| {i} | {p['winner']} > {p['loser']} | {p['cite']} ({p['kind']}) | {p['run']} | {paper} | "
                     f"{cells[0]} | {cells[1]} | {seeds} | "
                     f"{_matched_cell('accuracy', matched.get('accuracy'), r['metrics']['accuracy']['sign'])} | "
                     f"{_matched_cell('tokens', matched.get('tokens'), r['metrics']['tokens']['sign'])} |")  # fmt: skip
    s = result["summary"]
    lines += [
        "",
        f"Measured pairs: {s['measured_pairs']} of {s['pairs']} (the other {s['pairs'] - s['measured_pairs']} copy "
        f"one arm's numbers from earlier work: counted apart); metrics not read (no clear published difference): "
        f"accuracy {s['not_read']['accuracy']}, tokens {s['not_read']['tokens']}",
        "",
        _count_line("Accuracy", s["accuracy"]),
        "",
        _count_line("Tokens", s["tokens"]),
        "",
        _count_line("All read metrics", s["all"]),
        "",
        _count_line("Copied pairs (not counted above)", s["copied"]),
    ]
    if "matched_summary" in result:
        m = result["matched_summary"]
        lines += ["", _count_line("Matched readings (measured pairs' read metrics with a matched reading on that "
                                  "metric)", m["matched"]),
                  "", _count_line("The same readings' point readings", m["point"])]  # fmt: skip
    return "\n".join(lines)
