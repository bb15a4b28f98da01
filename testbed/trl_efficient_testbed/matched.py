r"""
Readings at matched tokens and at matched accuracy on a sweep (issue 35, item 4, "Frontiers, not points"): papers
compare methods at matched length or along sweeps, so a pair with a swept recipe is also read against that recipe's
curve, not only at its one operating point.

**The curve** (`load_curves`) of a swept recipe is its sweep's points in `frontier.json` (`sweep.write_frontier`),
each on its own runs, ordered by mean tokens and joined by straight segments. The point equal to the recipe as
`compare` trains it is one of them (the same runs: `sweep.changed_overrides`). A point's runs are the files in
`runs/<recipe>/` whose job key is the comparison row's (the same settings, protocol, base model and testbed scale)
with the swept values put in (`point_key`; a swept config value as `sweep.run_sweep` keys it, `_sweep_overrides`);
the runs found must give the sweep's recorded accuracy and mean tokens.

**Accuracy at matched tokens.** With the curve's points $(L_i, a_i)$ in token order and the other recipe at
$(L_o, a_o)$, the segment $i, i+1$ with $L_i \le L_o \le L_{i+1}$, and

$$ a_S(L_o) = a_i + (a_{i+1} - a_i)\,\frac{L_o - L_i}{L_{i+1} - L_i} $$

compared with $a_o$. **Tokens at matched accuracy**: the first segment in token order (the fewest tokens at which the
curve reaches it) with $a_o$ between $a_i$ and $a_{i+1}$, and
$L_S(a_o) = L_i + (L_{i+1} - L_i)\,(a_o - a_i) / (a_{i+1} - a_i)$ compared with $L_o$. When the other recipe's value
lies outside the curve's range the reading is "out of the sweep's range": nothing is extrapolated (`segment`).

**Interval** (`matched_difference`): the interpolated difference is one statistic of the three runs' per-(seed, task)
records (the two points of the segment and the other recipe), every mean a `stats.wmean` at the same weights, on the
seeds all points of the curve and the other recipe share; it goes through `stats.interval` exactly as
`runner._difference` does (the same `Bootstrap` of `settings.bootstrap` task resamples seeded with `settings.seed`,
Student t over the per-seed values): each task resample and each seed alone recompute all six means and the
interpolation, so the spread of $L_o$ relative to the segment and of the segment's own ends is in the interval. The
segment is the one chosen at the point estimate; a resample or a seed whose $L_o$ falls beyond it reads the same line
a little past its end (the point estimate never does). A resample whose segment has equal ends on the matched axis
is undefined and left out (a seed's: no interval), as `stats.interval` leaves out undefined values.

>>> interpolate(100.0, 0.5, 120.0, 1.0, 110.0)  # halfway along the segment: (0.5 + 1.0) / 2
0.75
>>> curve = [(100.0, 0.90), (120.0, 0.94), (140.0, 0.92)]  # (tokens, accuracy), in token order
>>> segment(curve, "tokens", 130.0), segment(curve, "accuracy", 0.93), segment(curve, "tokens", 150.0)
((1, 2), (0, 1), None)
"""

from __future__ import annotations

import glob
import json
import math
import os

import numpy as np

__all__ = [
    "AXES",
    "interpolate",
    "load_curves",
    "matched_difference",
    "point_key",
    "read_matched",
    "segment",
]

# reading -> (the axis the curve is matched on, the axis it is read on): the run records' fields (the `stats.Panel`
# metrics). "accuracy": the curve's accuracy at the other's tokens; "tokens": its tokens at the other's accuracy.
AXES = {"accuracy": ("tokens", "correct"), "tokens": ("correct", "tokens")}
POSITION = {"tokens": 0, "accuracy": 1}  # where each axis sits in a curve point `(tokens, accuracy)`
HIGHER_IS_BETTER = {"accuracy": True, "tokens": False}
MATCH_TOLERANCE = 1e-9  # a point's runs must reproduce the sweep's recorded means to this relative tolerance


def interpolate(x0, y0, x1, y1, at) -> float | np.ndarray:
    r"""$y_0 + (y_1 - y_0)\,(x - x_0) / (x_1 - x_0)$ at $x$ = `at`: the line through $(x_0, y_0)$ and $(x_1, y_1)$,
    elementwise on arrays; NaN where $x_1 = x_0$ (no line).

    >>> interpolate(136.0, 0.94, 143.2, 0.93, 140.0)  # 0.94 - 0.01 x 4 / 7.2
    0.9344444444444444
    >>> interpolate(np.array([1.0, 1.0]), 0.0, np.array([3.0, 1.0]), 1.0, 2.0).tolist()
    [0.5, nan]
    """
    x0, y0, x1, y1, at = (np.asarray(a, dtype=float) for a in (x0, y0, x1, y1, at))
    span = x1 - x0
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(span != 0, y0 + (y1 - y0) * (at - x0) / np.where(span != 0, span, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


def segment(curve: list[tuple[float, float]], axis: str, value: float) -> tuple[int, int] | None:
    """The segment `(i, i + 1)` of `curve` (`(tokens, accuracy)` points in token order) on which the curve's `axis`
    (`"tokens"` or `"accuracy"`) takes `value`, ends included: the first in token order (on the token axis there is
    only one); `None` when `value` is outside the curve's range on that axis (out of the sweep's range) or the curve
    has fewer than two points. A segment with equal ends on `axis` has no line to read and is passed over.

    >>> curve = [(100.0, 0.90), (120.0, 0.94), (140.0, 0.92)]
    >>> segment(curve, "accuracy", 0.925), segment(curve, "accuracy", 0.95)  # first crossing; above every point
    ((0, 1), None)
    """
    k = POSITION[axis]
    for i in range(len(curve) - 1):
        a, b = curve[i][k], curve[i + 1][k]
        if a != b and min(a, b) <= value <= max(a, b):
            return i, i + 1
    return None


def _sign(reading: str, swept_is_winner: bool) -> int:
    """+1 when (swept - other) is already the paper's direction (winner - loser in accuracy, loser - winner in
    tokens), else -1."""
    return 1 if swept_is_winner == HIGHER_IS_BETTER[reading] else -1


def matched_difference(ends: tuple, other, reading: str, swept_is_winner: bool, resamples: int, seed: int) -> list:
    r"""`[point, low, high]` of the swept recipe's interpolated value minus the other's, signed to the paper's
    direction (module docstring): `reading` `"accuracy"` (the curve's accuracy at the other's tokens; positive: the
    winner more accurate) or `"tokens"` (its tokens at the other's accuracy; positive: the winner shorter). `ends`
    are the segment's two `stats.Panel`s, `other` the other recipe's, all on the same seeds and tasks; the interval is
    `stats.interval` over `resamples` task resamples seeded with `seed` and Student t over the seeds.

    $$ \Delta = \pm\,\Big(y_i + (y_j - y_i)\,\frac{x_o - x_i}{x_j - x_i} - y_o\Big) $$

    with $x$ the matched axis and $y$ the read one, every term a `wmean` at the same weights."""
    from .stats import Bootstrap, interval, wmean

    x_key, y_key = AXES[reading]
    p, q = ends
    if not (p.seeds == q.seeds == other.seeds):
        raise ValueError(f"matched_difference: the panels must be on the same seeds, got {p.seeds}, {q.seeds} and "
                         f"{other.seeds}.")  # fmt: skip
    sign = _sign(reading, swept_is_winner)

    def statistic(w, v):
        xi, yi = wmean(p.metrics[x_key], w, v), wmean(p.metrics[y_key], w, v)
        xj, yj = wmean(q.metrics[x_key], w, v), wmean(q.metrics[y_key], w, v)
        xo, yo = wmean(other.metrics[x_key], w, v), wmean(other.metrics[y_key], w, v)
        return sign * (interpolate(xi, yi, xj, yj, xo) - yo)

    return list(interval(Bootstrap(len(p.seeds), p.num_tasks, resamples, seed), statistic))


def point_key(template: dict, point: dict, seed, config_overrides: dict | None = None) -> dict:
    """The job key of a sweep point's run with training seed `seed`: `template` (the key of a comparison run of the
    recipe) with `train_seed` set, every swept reward value of `point` (`{"reward.<builder>.<kwarg>": value}`, the
    sweep's resolved point; `weight` is the reward's weight) put in, and, for a point that sweeps config keys,
    `config_overrides` as the point's job key holds them (`_sweep_overrides`: what `sweep.run_sweep` keyed it with,
    so a swept entry of a dict field, `advantage_kwargs.lam`, comes with the field's other entries). `point`'s config
    keys are read only through `config_overrides`.

    >>> key = {"train_seed": 0, "rewards": [["correctness", 1.0, {}], ["alp", 1.0, {}]], "config_overrides": {}}
    >>> point_key(key, {"reward.alp.beta": 0.25}, 2)["rewards"]
    [['correctness', 1.0, {}], ['alp', 1.0, {'beta': 0.25}]]
    >>> cap = {"max_completion_length": 200}
    >>> out = point_key(key, {"reward.alp.weight": 0.4, **cap}, 1, cap)
    >>> out["train_seed"], out["rewards"][1], out["config_overrides"]
    (1, ['alp', 0.4, {}], {'max_completion_length': 200})
    >>> drpo = {"advantage_kwargs": {"lam": 0.05, "tau": 10.0}}  # the whole dict field, as run_sweep keys it
    >>> point_key(key, {"advantage_kwargs.lam": 0.05}, 0, drpo)["config_overrides"]
    {'advantage_kwargs': {'lam': 0.05, 'tau': 10.0}}
    """
    key = json.loads(json.dumps(template))
    key["train_seed"] = seed
    if config_overrides is not None:
        key["config_overrides"] = json.loads(json.dumps(config_overrides))
    for name, value in point.items():
        parts = name.split(".")
        if parts[0] != "reward":
            continue  # a config key: in `config_overrides`
        spec = next((s for s in key["rewards"] if s[0] == parts[1]), None)
        if spec is None:
            raise ValueError(f"sweep key {name!r}: the comparison's runs have no reward {parts[1]!r}.")
        if parts[2] == "weight":
            spec[1] = value
        else:
            spec[2][parts[2]] = value
    return key


def _canonical(key: dict) -> str:
    return json.dumps(key, sort_keys=True)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=MATCH_TOLERANCE, abs_tol=MATCH_TOLERANCE)


def _config_overrides(sweep: dict, point: dict) -> dict | None:
    """`_sweep_overrides` of a point that sweeps a config key; None for one that sweeps only reward keys (its job key
    is the comparison's with the reward values put in: `point_key`)."""
    if all(k.split(".")[0] == "reward" for k in point["point"]):
        return None
    return _sweep_overrides(sweep, point)


def _sweep_overrides(sweep: dict, point: dict) -> dict:
    """The config overrides `sweep.run_sweep` put in the job key of `point` (a point of `sweep`, a `frontier.json`
    sweep): `sweep.resolve_point` at the sweep's settings and testbed scale, then `sweep.changed_overrides` (a value
    equal to the recipe's own is not in the key, so that point's runs are the comparison's)."""
    from .scaling import settings_scale
    from .sweep import changed_overrides, resolve_point
    from .training import TestbedSettings

    settings = TestbedSettings(**sweep["settings"])
    scale = settings_scale(sweep["recipe"], settings)
    config_overrides = resolve_point(sweep["recipe"], point["point"], settings, scale)[0]
    return changed_overrides(sweep["recipe"], config_overrides, settings, scale)


def _point_panel(point: dict, template: dict, by_key: dict, recipe: str, config_overrides: dict | None = None):
    """The `stats.Panel` of one sweep point: the run of every seed of `point["seeds"]` whose key is `point_key` (with
    `config_overrides`, the point's as `_sweep_overrides` gives them, when it sweeps a config key). Raises
    `ValueError` when a seed's run is missing or the runs do not give the sweep's recorded accuracy and mean tokens."""
    from .stats import Panel

    runs = []
    for seed in point["seeds"]:
        found = by_key.get(_canonical(point_key(template, point["point"], seed, config_overrides)))
        if found is None:
            raise ValueError(f"frontier.json's {recipe} point {point['label']!r}: no run of seed {seed} in "
                             f"runs/{recipe}/ with its key.")  # fmt: skip
        runs.append(found)
    panel = Panel.from_runs(runs)
    tokens, accuracy = _means(panel)
    if not (_close(accuracy, point["accuracy"]) and _close(tokens, point["mean_tokens"])):
        raise ValueError(f"frontier.json's {recipe} point {point['label']!r} records accuracy {point['accuracy']} and "
                         f"{point['mean_tokens']} tokens, its runs give {accuracy} and {tokens}.")  # fmt: skip
    return panel


def load_curves(results_dir: str, recipes, templates: dict[str, dict]) -> dict[str, list[dict]]:
    """The curve of every recipe of `recipes` swept in `results_dir/frontier.json`: `{recipe: [{"label", "panel"},
    ...]}` (the sweep's finished points, each with the `stats.Panel` of its runs, matched by `point_key` on
    `templates[recipe]`, the job key of one of the comparison's runs of the recipe). Recipes without a sweep, without a
    template or without two finished points are left out; no `frontier.json`, no curves."""
    path = os.path.join(results_dir, "frontier.json")
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        sweeps = json.load(f)["sweeps"]
    curves = {}
    for sweep in sweeps:
        recipe = sweep["recipe"]
        points = [p for p in sweep["points"] if p.get("status", "ok") == "ok"]
        if recipe not in recipes or recipe not in templates or len(points) < 2:
            continue
        by_key = {}
        for run_path in sorted(glob.glob(os.path.join(results_dir, "runs", recipe, "*.json"))):
            with open(run_path) as f:
                run = json.load(f)
            by_key.setdefault(_canonical(run["key"]), run)
        curves[recipe] = [{"label": p["label"], "panel": _point_panel(p, templates[recipe], by_key, recipe,
                                                                      _config_overrides(sweep, p))}
                          for p in points]  # fmt: skip
    return curves


def _common(panels: list) -> list:
    """`panels` restricted to the seeds all of them have (`stats.Panel.aligned`, pairwise)."""
    first = panels[0]
    for other in panels[1:]:
        first, _ = first.aligned(other)
    return [p.aligned(first)[0] for p in panels]


def _means(panel) -> tuple[float, float]:
    from .stats import wmean

    w, v = np.ones((1, len(panel.seeds))), np.ones((1, panel.num_tasks))
    return float(wmean(panel.metrics["tokens"], w, v)[0]), float(wmean(panel.metrics["correct"], w, v)[0])


def _read_on(curve: list[dict], swept: str, other_panel, other: str, reading: str, swept_is_winner: bool,
             settings: dict) -> dict:  # fmt: skip
    """One matched reading of `other`'s comparison row against `swept`'s curve (module docstring)."""
    shared = [s for s in other_panel.seeds if all(s in c["panel"].seeds for c in curve)]
    if not shared:
        note = f"no training seed of {other}'s row is in every point of the sweep"
        return {"swept": swept, "other": other, "seeds": [], "at": None, "range": None, "segment": None,
                "difference": None, "note": note}  # fmt: skip
    aligned = _common([c["panel"] for c in curve] + [other_panel])
    *points, other_aligned = aligned
    means = [_means(p) for p in points]
    order = sorted(range(len(points)), key=lambda i: means[i])
    ordered = [means[i] for i in order]
    other_means = _means(other_aligned)
    x_axis = "tokens" if reading == "accuracy" else "accuracy"
    at = other_means[POSITION[x_axis]]
    out = {"swept": swept, "other": other, "seeds": list(other_aligned.seeds), "at": at,
           "range": [min(m[POSITION[x_axis]] for m in means), max(m[POSITION[x_axis]] for m in means)],
           "segment": None, "difference": None, "note": ""}  # fmt: skip
    found = segment(ordered, x_axis, at)
    if found is None:
        return out
    i, j = order[found[0]], order[found[1]]
    out["segment"] = [curve[i]["label"], curve[j]["label"]]
    estimate = matched_difference((points[i], points[j]), other_aligned, reading, swept_is_winner,
                                  settings["bootstrap"], settings["seed"])  # fmt: skip
    if None in estimate:  # a seed alone (or every resample) has equal segment ends: no interval, no reading
        out["note"] = f"no interval: the segment's ends are equal on {x_axis} under a seed or every task resample"
    else:
        out["difference"] = estimate
    return out


def read_matched(pair: dict, curves: dict[str, list[dict]], panels: dict, settings: dict) -> dict:
    """Both matched readings of `pair` (a `literature.yaml` entry): `{"accuracy": ..., "tokens": ...}`, each `None`
    when neither recipe has a curve (or the other has no row: `panels`, the comparison's panels by recipe), else
    `{"swept", "other", "seeds", "at" (the other's value on the matched axis), "range" (the curve's range on it),
    "segment" (the two points' labels; `None`: out of the sweep's range), "difference" ([point, low, high] signed to
    the paper's direction; `None` out of range or without an interval), "note"}`. When both recipes are swept, the
    winner's row is read against the loser's curve (a paper places its method against the baseline's trade-off),
    and when that is out of range the loser's row against the winner's curve; out of both, the first is reported."""
    winner, loser = pair["winner"], pair["loser"]
    options = [(s, o) for s, o in ((loser, winner), (winner, loser)) if s in curves and o in panels]
    out = {}
    for reading in AXES:
        result = None
        for swept, other in options:
            attempt = _read_on(curves[swept], swept, panels[other], other, reading, swept == winner, settings)
            result = result or attempt  # out of range everywhere: report the first option's range
            if attempt["difference"] is not None:
                result = attempt
                break
        out[reading] = result
    return out
