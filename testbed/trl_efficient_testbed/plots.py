"""
Testbed plots (matplotlib, Agg backend), drawn from the JSON rows only (`compare.json`, `sweep_<recipe>.json`).

- `per_difficulty_plot(rows, path)`: small multiples over the difficulty k = number of operations, one column per
  method family (`Recipe.family`; base and grpo drawn in every column as references), the tokens-to-floor ratio
  (mean tokens at k / the floor at k; 1 = the shortest correct trace) on top and the accuracy at k below, each line
  with its 95% interval as a band (rows with `ci_by_difficulty`). "Spends tokens where they are needed" reads as a
  ratio near 1 on easy k at an unchanged accuracy.
- `frontier_plot(sweeps, path)`: accuracy vs mean tokens with 95% error bars, each recipe's sweep points connected
  in sweep order, the Pareto-optimal points (`pareto_flags`: interval-aware, over every point drawn, base and grpo
  included) ringed, base and grpo as single marked points.
- `checks_plot(rows, path)`: useful vs useless checks per completion kept by each model (`useful_checks`,
  `useless_checks` of the rows, 0 before the world counts them), with 95% error bars.

Bad input (no rows, a row without the fields the plot draws) raises `ValueError`; without matplotlib the functions
log how to install it and return `None` (the JSON and Markdown outputs never depend on a plot).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .specs import BASE_RECIPE

logger = logging.getLogger(__name__)

__all__ = ["checks_plot", "frontier_plot", "pareto_flags", "per_difficulty_plot"]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from trl_efficient.eval.plots import MATPLOTLIB_MISSING

        logger.warning(MATPLOTLIB_MISSING)
        return None
    return plt


def pareto_flags(points: Sequence[dict], x: str = "mean_tokens", y: str = "accuracy") -> list[bool]:
    """For each point, whether it is Pareto-optimal among `points`: no other point dominates it beyond the intervals
    (`stats.interval_pareto_flags`: better in both tokens and accuracy, the intervals clear of each other; points
    without intervals: fewer or equal tokens and higher or equal accuracy, one strictly). Equal points are both
    optimal.

    >>> pareto_flags([{"mean_tokens": 60, "accuracy": 0.5}, {"mean_tokens": 70, "accuracy": 0.5},
    ...               {"mean_tokens": 80, "accuracy": 0.6}])
    [True, False, True]
    """
    from .stats import interval_pareto_flags

    return interval_pareto_flags(points, x, y)


def _levels(rows: Sequence[dict]) -> list[str]:
    return sorted({k for r in rows for k in r["floor_ratio_by_difficulty"]}, key=int)


REFERENCE_STYLES = {"base": dict(color="black", linestyle="--", linewidth=2),
                    BASE_RECIPE: dict(color="gray", linestyle="-", linewidth=2)}  # fmt: skip


def _family_panels(rows: Sequence[dict]) -> list[tuple[str, list[dict]]]:
    """`[(family, rows)]`: one panel per method family present (`checks.family_of`), the references (base, grpo) in
    every panel; a comparison of references only is one panel."""
    from .checks import family_of

    refs = [r for r in rows if r["recipe"] in REFERENCE_STYLES]
    panels: dict[str, list[dict]] = {}
    for r in rows:
        if r["recipe"] not in REFERENCE_STYLES:
            panels.setdefault(family_of(r["recipe"]), []).append(r)
    if not panels:
        return [("references", refs)]
    return [(name, refs + members) for name, members in panels.items()]


def _band(ax, ks, row, key_ci, color):
    ci = (row.get("ci_by_difficulty") or {}).get(key_ci) or {}
    pts = [(int(k), ci[k][0], ci[k][1]) for k in ks if ci.get(k) and None not in ci[k][:2]]
    if pts:
        ax.fill_between([p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts], color=color, alpha=0.15,
                        linewidth=0)  # fmt: skip


def per_difficulty_plot(rows: Sequence[dict], path: str, title: str = "Testbed: tokens and accuracy by difficulty"
                        ) -> str | None:  # fmt: skip
    """Write the per-difficulty small multiples of `rows` (compare rows with `floor_ratio_by_difficulty` and
    `accuracy_by_difficulty`, as `runner.panel_row` writes them; bands from `ci_by_difficulty` when present) to
    `path`; returns `path` (`None` without matplotlib).

    Raises `ValueError` when `rows` is empty or a row lacks the per-difficulty fields (a `compare.json` written
    before they existed: rerun `trl-efficient testbed compare`).
    """
    rows = list(rows)
    if not rows:
        raise ValueError(f"per_difficulty_plot: no rows to draw into {path}.")
    for r in rows:
        if not r.get("floor_ratio_by_difficulty") or not r.get("accuracy_by_difficulty"):
            raise ValueError(f"per_difficulty_plot: row {r.get('recipe')!r} has no floor_ratio_by_difficulty / "
                             "accuracy_by_difficulty (written before they existed); rerun the comparison.")  # fmt: skip
    plt = _pyplot()
    if plt is None:
        return None
    levels = _levels(rows)
    panels = _family_panels(rows)
    fig, axes = plt.subplots(2, len(panels), figsize=(4.2 * len(panels) + 1, 8), dpi=110, squeeze=False,
                             sharex=True, sharey="row")  # fmt: skip
    cmap = plt.get_cmap("tab10")
    for col, (family, members) in enumerate(panels):
        ax_ratio, ax_acc = axes[0][col], axes[1][col]
        i = 0
        for r in members:
            style = REFERENCE_STYLES.get(r["recipe"])
            if style is None:
                style, i = dict(color=cmap(i % 10), linewidth=1.4), i + 1
            for ax, key, ci_key in ((ax_ratio, "floor_ratio_by_difficulty", "floor_ratio"),
                                    (ax_acc, "accuracy_by_difficulty", "accuracy")):  # fmt: skip
                ks = [k for k in levels if r[key].get(k) is not None]
                ax.plot([int(k) for k in ks], [r[key][k] for k in ks], marker="o", markersize=3, label=r["recipe"],
                        **style)  # fmt: skip
                _band(ax, ks, r, ci_key, style["color"])
        ax_ratio.axhline(1.0, color="gray", linestyle=":", linewidth=1)
        ax_ratio.set_title(family)
        ax_acc.set_ylim(-0.02, 1.02)
        ax_acc.set_xlabel("difficulty k (operations)")
        ax_acc.legend(fontsize=7, loc="best")
        for ax in (ax_ratio, ax_acc):
            ax.set_xticks([int(k) for k in levels])
            ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("mean tokens / floor (1 = shortest correct trace)")
    axes[1][0].set_ylabel("accuracy")
    fig.suptitle(title + " (bands: 95% intervals over tasks and seeds)" if any(r.get("ci_by_difficulty") for r in rows)
                 else title)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _err(points: Sequence[dict], key: str) -> list[list[float]] | None:
    """matplotlib's asymmetric error bars `[[below...], [above...]]` from the points' `ci[key]` (0 without one);
    `None` when no point has an interval."""
    if not any(((p.get("ci") or {}).get(key) or [None])[0] is not None for p in points):
        return None
    below, above = [], []
    for p in points:
        low, high = ((p.get("ci") or {}).get(key) or [None, None])[:2]
        below.append(0.0 if low is None else max(0.0, p[key] - low))
        above.append(0.0 if high is None else max(0.0, high - p[key]))
    return [below, above]


def checks_plot(rows: Sequence[dict], path: str, title: str = "Testbed: checks kept per completion") -> str | None:
    """Write a grouped bar chart of the useful and useless checks per completion of each row (`useful_checks`,
    `useless_checks`, with 95% error bars from `ci` when present) to `path`; returns `path` (`None` without
    matplotlib). A useful check changed the running value (it caught a slip), a useless one did not: a method that
    keeps thinking where it pays keeps the first and drops the second. Raises `ValueError` without rows."""
    rows = list(rows)
    if not rows:
        raise ValueError(f"checks_plot: no rows to draw into {path}.")
    plt = _pyplot()
    if plt is None:
        return None
    for r in rows:
        r.setdefault("useful_checks", 0.0)
        r.setdefault("useless_checks", 0.0)
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(rows) + 2), 4.5), dpi=110)
    xs = list(range(len(rows)))
    width = 0.4
    for offset, key, color in ((-width / 2, "useful_checks", "tab:green"), (width / 2, "useless_checks", "tab:red")):
        ax.bar([x + offset for x in xs], [r[key] or 0.0 for r in rows], width, yerr=_err(rows, key), capsize=2,
               color=color, label=key.replace("_", " ") + " / completion")  # fmt: skip
    ax.set_xticks(xs)
    ax.set_xticklabels([r["recipe"] for r in rows], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("checks per completion")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def frontier_plot(sweeps: Sequence[dict], path: str, title: str = "Testbed frontier: accuracy vs mean tokens"
                  ) -> str | None:  # fmt: skip
    """Write the frontier of one or more sweeps (`sweep.run_sweep` results: `{"recipe", "points", "references"}`,
    points with `label`, `mean_tokens`, `accuracy`) to `path`; returns `path` (`None` without matplotlib).

    Each recipe's points are connected in sweep order and labelled, with their 95% intervals as error bars (points
    with `ci`); the points on the interval-aware Pareto front of everything drawn (the references included) are
    ringed; base (black square) and grpo (grey diamond) are single points.
    Raises `ValueError` without sweep points or on a point without accuracy / mean tokens.
    """
    sweeps = list(sweeps)
    ok = [[p for p in s.get("points", []) if p.get("status", "ok") == "ok"] for s in sweeps]
    if not any(ok):
        raise ValueError(f"frontier_plot: no successful sweep points to draw into {path}.")
    references = {}
    for s in sweeps:
        for r in s.get("references", []):
            if r.get("status", "ok") == "ok":
                references.setdefault(r["recipe"], r)
    everything = [p for pts in ok for p in pts] + list(references.values())
    flags = pareto_flags(everything)
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(8, 6), dpi=120)
    cmap = plt.get_cmap("tab10")
    front = [p for p, f in zip(everything, flags, strict=True) if f]
    for i, (s, pts) in enumerate(zip(sweeps, ok, strict=True)):
        if not pts:
            continue
        color = cmap(i % 10)
        ax.errorbar([p["mean_tokens"] for p in pts], [p["accuracy"] for p in pts], xerr=_err(pts, "mean_tokens"),
                    yerr=_err(pts, "accuracy"), marker="o", color=color, capsize=2, elinewidth=0.8,
                    label=f"{s['recipe']} ({', '.join(s.get('keys', []))})")  # fmt: skip
        for p in pts:
            ax.annotate(str(p.get("label", "")), (p["mean_tokens"], p["accuracy"]), textcoords="offset points",
                        xytext=(4, 4), fontsize=6, color=color)  # fmt: skip
    styles = {"base": dict(marker="s", color="black"), BASE_RECIPE: dict(marker="D", color="gray")}
    for name, r in references.items():
        style = styles.get(name, dict(marker="^", color="brown"))
        ax.errorbar([r["mean_tokens"]], [r["accuracy"]], xerr=_err([r], "mean_tokens"), yerr=_err([r], "accuracy"),
                    linestyle="none", markersize=7, zorder=3, capsize=2, label=name, **style)  # fmt: skip
    if front:
        ax.scatter([p["mean_tokens"] for p in front], [p["accuracy"] for p in front], s=160, facecolors="none",
                   edgecolors="red", linewidths=1.5, zorder=4, label="Pareto-optimal")  # fmt: skip
    floors = [p.get("mean_floor_tokens") for p in everything if p.get("mean_floor_tokens")]
    if floors:
        ax.axvline(floors[0], color="black", linestyle=":", linewidth=1)
        ax.annotate("floor", (floors[0], ax.get_ylim()[0]), textcoords="offset points", xytext=(3, 3), fontsize=8)
    ax.set_xlabel("mean completion tokens")
    ax.set_ylabel("accuracy (pass@1)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
