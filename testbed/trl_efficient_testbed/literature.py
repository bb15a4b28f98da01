r"""
Agreement with the literature (issue 35, item 5): every published head-to-head between implemented recipes
(`literature.yaml`), read on a testbed comparison, and the Kendall tau of the two orders.

`trl-efficient testbed literature [RESULTS_DIR]` prints the table and the tau lines; docs/literature.md holds the
committed comparison's rendering and the diagnosis of every disagreement.

**The published metric** (`published_metric`, checked for every entry by the tests): a pair is read on `accuracy`
when the paper's winner is not shorter than its loser, on `tokens` when it is not more accurate, and when it is
better on both, on `tokens` if it saves at least 20% of the loser's tokens ($1 - L_w / L_l \ge 0.2$), else on
`accuracy` (the lengths are then comparable and the claim is accuracy at comparable length). No entry is a combined
score: every source here reports accuracy and length separately, and one rule over the published numbers keeps the
choice from following the testbed's result.

**The testbed's difference** (`read_pair`): the rows' runs as the comparison recorded them (`compare.json`'s `runs`,
the seeds each row was trained with), paired by training seed on the seeds both rows have and by task (the same
evaluation tasks and sampling streams), exactly as `compare.md` computes a recipe minus grpo
(`runner._difference`: one statistic on the same task resamples for both rows, Student t over the per-seed
differences, the two combined as in `stats.interval`; 95%, `settings.bootstrap` resamples seeded with
`settings.seed`):

$$ \Delta_{acc} = \mathrm{acc}_w - \mathrm{acc}_l, \qquad \Delta_{tok} = \mathrm{tokens}_l - \mathrm{tokens}_w $$

so that a positive difference is the paper's direction on either metric (more accurate; fewer tokens).

**Readings.** `agrees` when the interval lies above 0, `disagrees` when it lies below 0, `undecided` when it holds 0;
`cannot be judged` when a row is missing or failed in the comparison, or when the two rows measured the same runs
(`compare.json` marks a row `duplicate_of` its twin: laser-de = laser-d in world v2, the same records seed by seed).
A pair with one duplicated row is read on that row's own runs: its numbers are its twin's on the seeds it has.

**Kendall tau** (`kendall_tau`), over pairs each of which the paper orders one way:

$$ \tau = \frac{C - D}{C + D} $$

- *all pairs*: $C$ the pairs whose point estimate is in the paper's direction ($\Delta > 0$), $D$ those against it
  ($\Delta < 0$); a point exactly 0 is a tie, counted and printed but in neither $C$ nor $D$;
- *decided pairs*: $C$ the pairs that agree, $D$ those that disagree (undecided pairs left out).

Pairs that cannot be judged are in neither. With no pair counted, tau is undefined (`None`, printed "-").

**Matched readings** (issue 35, item 4; `matched.py`, its formulas and choices in its docstring): a pair with a swept
recipe (`frontier.json`) is also read against that recipe's curve, as papers compare at matched length or along
sweeps: the curve's accuracy at the other recipe's mean tokens minus the other's accuracy (*accuracy at matched
tokens*), and the curve's tokens at the other's accuracy against the other's tokens (*tokens at matched accuracy*),
interpolated linearly between the two sweep points that bracket the other's value, signed as $\Delta_{acc}$ and
$\Delta_{tok}$ above, with the interval of the same paired bootstrap and Student t over the seeds; "out of the
sweep's range" when no two points bracket it (nothing is extrapolated). The third tau (`concordance` again) counts
the pairs with a matched reading on their own metric (accuracy at matched tokens for accuracy pairs, tokens at
matched accuracy for tokens pairs) by that reading, beside the same pairs' point readings.

>>> kendall_tau(3, 1), kendall_tau(0, 2), kendall_tau(0, 0) is None
(0.5, -1.0, True)
>>> published_metric({"accuracy": 64.8, "tokens": 3832}, {"accuracy": 56.2, "tokens": 2278})  # LAPO vs L1-Exact
'accuracy'
>>> published_metric({"accuracy": 34.38, "tokens": 3551}, {"accuracy": 30.62, "tokens": 8194})  # DLER vs LASER-DE
'tokens'
"""

from __future__ import annotations

import json
import os
from importlib import resources

from .matched import AXES, load_curves, read_matched

__all__ = [
    "DEFAULT_RESULTS",
    "READINGS",
    "concordance",
    "kendall_tau",
    "literature",
    "literature_markdown",
    "load_pairs",
    "matched_concordance",
    "published_metric",
    "read_pair",
    "reading",
]

DEFAULT_RESULTS = os.path.join("perf", "testbed", "results")  # the committed comparison (world v2)
METRICS = {"accuracy": "correct", "tokens": "tokens"}  # the pair's metric: the run records' field
SHORTER_BY = 0.2  # better on both: tokens when the winner saves at least this share of the loser's tokens
READINGS = ("agrees", "disagrees", "undecided", "cannot be judged")
KINDS = ("own", "third-party")
FIELDS = ("winner", "loser", "metric", "model", "benchmark", "winner_result", "loser_result", "approximate",
          "source", "cite", "kind", "how")  # fmt: skip


def published_metric(winner: dict, loser: dict) -> str:
    """The metric a published pair is read on, from its numbers (`{"accuracy", "tokens"}` of each; module
    docstring): accuracy when the winner is not shorter, tokens when it is not more accurate, else tokens if it saves
    at least `SHORTER_BY` of the loser's tokens."""
    if winner["tokens"] >= loser["tokens"]:
        return "accuracy"
    if winner["accuracy"] <= loser["accuracy"]:
        return "tokens"
    return "tokens" if winner["tokens"] <= (1 - SHORTER_BY) * loser["tokens"] else "accuracy"


def load_pairs(path: str | None = None) -> list[dict]:
    """The entries of `literature.yaml` (or `path`), each checked: every field present, `metric` one of `METRICS`,
    `kind` one of `KINDS`, numbers for both sides, no pair twice (either order). Recipe names are checked against
    the registry by the tests, which may import it."""
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
        if pair["metric"] not in METRICS or pair["kind"] not in KINDS:
            raise ValueError(f"{where}: metric must be one of {sorted(METRICS)} and kind one of {list(KINDS)}, got "
                             f"{pair['metric']!r} and {pair['kind']!r}")  # fmt: skip
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


def kendall_tau(concordant: int, discordant: int) -> float | None:
    """$(C - D) / (C + D)$, `None` when both are 0 (module docstring)."""
    total = concordant + discordant
    return None if total == 0 else (concordant - discordant) / total


def concordance(readings: list[dict]) -> dict:
    """Counts and both taus over `read_pair` results: `all` (point estimates: concordant, discordant, ties) and
    `decided` (agrees, disagrees; undecided left out), pairs that cannot be judged in neither.

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
        "pairs": len(readings),
        "cannot_judge": counts["cannot be judged"],
        "all": {"concordant": c, "discordant": d, "ties": len(points) - c - d, "tau": kendall_tau(c, d)},
        "decided": {"agrees": counts["agrees"], "disagrees": counts["disagrees"], "undecided": counts["undecided"],
                    "tau": kendall_tau(counts["agrees"], counts["disagrees"])},
    }  # fmt: skip


def _runs(results_dir: str, paths: list[str]) -> list[dict]:
    """One row's run files (paths relative to `results_dir`, as `compare.json` records them)."""
    runs = []
    for path in paths:
        with open(os.path.join(results_dir, path)) as f:
            runs.append(json.load(f))
    return runs


def read_pair(pair: dict, rows: dict[str, dict], panels: dict, settings: dict) -> dict:
    """One pair on the comparison: `{"pair", "difference" ([point, low, high] signed to the paper's direction, or
    None), "seeds" (the common training seeds), "reading", "note"}`. `rows` are `compare.json`'s rows by recipe,
    `panels` the loaded panels by recipe (`stats.Panel`), `settings` the comparison's settings (bootstrap, seed)."""
    from .runner import _difference

    winner, loser = pair["winner"], pair["loser"]
    out = {"pair": pair, "difference": None, "seeds": [], "note": ""}
    absent = [n for n in (winner, loser) if n not in panels]
    twins = {n: (rows[n].get("method_check") or {}).get("duplicate_of") for n in (winner, loser) if n in rows}
    if absent:
        out["note"] = f"no finished row for {' and '.join(absent)} in this comparison"
    elif twins.get(winner) == loser or twins.get(loser) == winner:
        out["note"] = "the two rows measured the same runs"
    else:
        first, second = (winner, loser) if pair["metric"] == "accuracy" else (loser, winner)
        a, _ = panels[first].aligned(panels[second])
        out["seeds"] = list(a.seeds)
        out["difference"] = _difference(panels[first], panels[second], settings["bootstrap"], settings["seed"],
                                        METRICS[pair["metric"]])  # fmt: skip
        out["note"] = "; ".join(f"{n} = {t} (the same runs)" for n, t in twins.items() if t)
    out["reading"] = reading(out["difference"])
    return out


def literature(results_dir: str = DEFAULT_RESULTS, pairs: list[dict] | None = None) -> dict:
    """Every pair of `pairs` (default `load_pairs()`) read on the comparison in `results_dir` (its `compare.json`
    and run files) and, where a recipe of the pair is swept (`frontier.json`), on its curve (`matched.read_matched`,
    under each reading's `matched`): `{"results_dir", "readings", "summary" (concordance), "matched_summary"
    (`matched_concordance`)}`. Only the rows and sweeps the pairs name are loaded."""
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
        judged = r["difference"] is not None
        r["matched"] = read_matched(r["pair"], curves, panels, data["settings"]) if judged else dict.fromkeys(AXES)
    return {"results_dir": results_dir, "readings": readings, "summary": concordance(readings),
            "matched_summary": matched_concordance(readings)}  # fmt: skip


def matched_concordance(readings: list[dict]) -> dict:
    """`concordance` over the pairs with a matched reading on their own metric (`reading["matched"][metric]` in the
    sweep's range), by that reading (`matched`) and by the same pairs' point readings (`point`).

    >>> m = lambda d: {"difference": d}
    >>> r = [{"pair": {"metric": "accuracy"}, "reading": "disagrees", "difference": [-1, -2, -0.5],
    ...       "matched": {"accuracy": m([0.5, 0.1, 0.9]), "tokens": None}},
    ...      {"pair": {"metric": "accuracy"}, "reading": "undecided", "difference": [1, -1, 3],
    ...       "matched": {"accuracy": m(None), "tokens": m([2, 1, 3])}}]  # out of range on its own metric
    >>> out = matched_concordance(r)
    >>> out["matched"]["pairs"], out["matched"]["decided"]["tau"], out["point"]["decided"]["tau"]
    (1, 1.0, -1.0)
    """
    with_matched = [r for r in readings if ((r.get("matched") or {}).get(r["pair"]["metric"]) or {}).get("difference")]
    matched = [{"reading": reading(d), "difference": d}
               for d in (r["matched"][r["pair"]["metric"]]["difference"] for r in with_matched)]  # fmt: skip
    return {"matched": concordance(matched), "point": concordance(with_matched)}


def _published(side: dict) -> str:
    return f"{side['accuracy']:g}% / {side['tokens']:g} tok"


def _difference_cell(metric: str, estimate: list | None) -> str:
    """Accuracy in points (x100), tokens as they are; `-` without an estimate."""
    if estimate is None:
        return "-"
    scale, unit = (100, " pts") if metric == "accuracy" else (1, " tok")
    point, low, high = (v * scale for v in estimate)
    return f"{point:+.1f} [{low:+.1f}, {high:+.1f}]{unit}"


def _matched_cell(metric: str, matched: dict | None) -> str:
    """A matched reading (`matched.read_matched`): the difference, its reading, the curve's segment and the seeds;
    the other's value and the curve's range when out of the sweep's range; `-` without a sweep."""
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
    return (f"{_difference_cell(metric, matched['difference'])}, {reading(matched['difference'])} ({swept}: "
            f"{' to '.join(matched['segment'])}, {len(matched['seeds'])} seeds)")  # fmt: skip


def _tau_counts(s: dict) -> str:
    a, d = s["all"], s["decided"]
    return (f"all ({a['concordant']} - {a['discordant']}) / ({a['concordant']} + {a['discordant']}) = "
            f"{_tau(a['tau'])}, {a['ties']} tied; decided ({d['agrees']} - {d['disagrees']}) / ({d['agrees']} + "
            f"{d['disagrees']}) = {_tau(d['tau'])}, {d['undecided']} undecided")  # fmt: skip


def _tau(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def literature_markdown(result: dict) -> str:
    """The table (one row per pair: pair, metric, source, the paper's numbers, the testbed's difference with its
    95% interval and seeds, the reading, and the two matched readings: `_matched_cell`) and the tau lines (all pairs,
    decided pairs, and the pairs with a matched reading)."""
    lines = ["| # | pair (paper's winner > loser) | metric | source | paper: winner vs loser | testbed difference "
             "[95% interval] | seeds | reading | accuracy at matched tokens [95%] | tokens at matched accuracy "
             "[95%] |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for i, r in enumerate(result["readings"], 1):
        p = r["pair"]
        source = f"{p['cite']} ({p['kind']})"
        paper = f"{_published(p['winner_result'])} vs {_published(p['loser_result'])}, {p['model']}"
        paper += " (read off a figure)" if p["approximate"] else ""
        label = r["reading"] if r["reading"] in ("agrees", "undecided") else f"**{r['reading']}**"
        label += f" ({r['note']})" if r["note"] else ""
        difference = _difference_cell(p["metric"], r["difference"])
        matched = r.get("matched") or {}
        lines.append(f"| {i} | {p['winner']} > {p['loser']} | {p['metric']} | {source} | {paper} | {difference} | "
                     f"{len(r['seeds']) or '-'} | {label} | {_matched_cell('accuracy', matched.get('accuracy'))} | "
                     f"{_matched_cell('tokens', matched.get('tokens'))} |")  # fmt: skip
    s = result["summary"]
    a, d = s["all"], s["decided"]
    lines += [
        "",
        f"Kendall tau, all pairs (point estimates): ({a['concordant']} - {a['discordant']}) / ({a['concordant']} + "
        f"{a['discordant']}) = {_tau(a['tau'])} ({a['concordant']} concordant, {a['discordant']} discordant, "
        f"{a['ties']} tied, {s['cannot_judge']} cannot be judged, of {s['pairs']} pairs)",
        f"Kendall tau, decided pairs: ({d['agrees']} - {d['disagrees']}) / ({d['agrees']} + {d['disagrees']}) = "
        f"{_tau(d['tau'])} ({d['agrees']} agree, {d['disagrees']} disagree, {d['undecided']} undecided)",
    ]
    if "matched_summary" in result:
        m = result["matched_summary"]
        lines.append(f"Kendall tau, matched readings (the {m['matched']['pairs']} pairs with one on their metric: "
                     "accuracy at matched tokens for accuracy pairs, tokens at matched accuracy for tokens pairs): "
                     f"{_tau_counts(m['matched'])}; the same pairs' point readings: "
                     f"{_tau_counts(m['point'])}")  # fmt: skip
    return "\n".join(lines)
