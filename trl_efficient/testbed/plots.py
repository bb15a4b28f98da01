"""
Testbed plots (matplotlib, Agg backend), drawn from the JSON rows only (`compare.json`, `sweep_<recipe>.json`).

- `per_difficulty_plot(rows, path)`: two panels over the difficulty k = number of operations, one line per recipe
  (the base model dashed): the tokens-to-floor ratio (mean tokens at k / the floor at k; 1 = the shortest correct
  trace) and the accuracy at k. "Spends tokens where they are needed" reads as a ratio near 1 on easy k at an
  unchanged accuracy.
- `frontier_plot(sweeps, path)`: accuracy vs mean tokens, each recipe's sweep points connected in sweep order, the
  Pareto-optimal points (`pareto_flags`, over every point drawn, base and grpo included) ringed, base and grpo as
  single marked points.

Bad input (no rows, a row without the fields the plot draws) raises `ValueError`; without matplotlib the functions
log how to install it and return `None` (the JSON and Markdown outputs never depend on a plot).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

logger = logging.getLogger(__name__)

__all__ = ["frontier_plot", "pareto_flags", "per_difficulty_plot"]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from ..eval.plots import MATPLOTLIB_MISSING

        logger.warning(MATPLOTLIB_MISSING)
        return None
    return plt


def pareto_flags(points: Sequence[dict], x: str = "mean_tokens", y: str = "accuracy") -> list[bool]:
    """For each point, whether it is Pareto-optimal among `points` (no other point has fewer or equal tokens and
    higher or equal accuracy, one strictly: `eval.plots.pareto_front`). Equal points are both optimal.

    >>> pareto_flags([{"mean_tokens": 60, "accuracy": 0.5}, {"mean_tokens": 70, "accuracy": 0.5},
    ...               {"mean_tokens": 80, "accuracy": 0.6}])
    [True, False, True]
    """
    from ..eval.plots import pareto_front

    for p in points:
        if p.get(x) is None or p.get(y) is None:
            raise ValueError(f"point {p.get('label') or p.get('recipe')!r} has no {x!r} / {y!r}.")
    front = {id(p) for p in pareto_front(list(points), x, y)}
    return [id(p) in front for p in points]


def _levels(rows: Sequence[dict]) -> list[str]:
    return sorted({k for r in rows for k in r["floor_ratio_by_difficulty"]}, key=int)


def per_difficulty_plot(rows: Sequence[dict], path: str, title: str = "Testbed: tokens and accuracy by difficulty"
                        ) -> str | None:  # fmt: skip
    """Write the two-panel per-difficulty plot of `rows` (compare rows with `floor_ratio_by_difficulty` and
    `accuracy_by_difficulty`, as `runner._row` writes them) to `path`; returns `path` (`None` without matplotlib).

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
    fig, (ax_ratio, ax_acc) = plt.subplots(1, 2, figsize=(12, 5), dpi=120)
    cmap = plt.get_cmap("tab20")
    for i, r in enumerate(rows):
        base = r["recipe"] == "base"
        style = dict(color="black", linestyle="--", linewidth=2) if base else dict(color=cmap(i % 20), linewidth=1.2)
        ks = [k for k in levels if r["floor_ratio_by_difficulty"].get(k) is not None]
        ax_ratio.plot([int(k) for k in ks], [r["floor_ratio_by_difficulty"][k] for k in ks], marker="o",
                      markersize=3, label=r["recipe"], **style)  # fmt: skip
        ks = [k for k in levels if r["accuracy_by_difficulty"].get(k) is not None]
        ax_acc.plot([int(k) for k in ks], [r["accuracy_by_difficulty"][k] for k in ks], marker="o", markersize=3,
                    label=r["recipe"], **style)  # fmt: skip
    ax_ratio.axhline(1.0, color="gray", linestyle=":", linewidth=1)
    ax_ratio.set_ylabel("mean tokens / floor (1 = shortest correct trace)")
    ax_acc.set_ylabel("accuracy")
    ax_acc.set_ylim(-0.02, 1.02)
    for ax, name in ((ax_ratio, "tokens-to-floor ratio"), (ax_acc, "accuracy")):
        ax.set_xlabel("difficulty k (operations)")
        ax.set_xticks([int(k) for k in levels])
        ax.set_title(name)
        ax.grid(True, alpha=0.3)
    ax_acc.legend(fontsize=7, ncol=2, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def frontier_plot(sweeps: Sequence[dict], path: str, title: str = "Testbed frontier: accuracy vs mean tokens"
                  ) -> str | None:  # fmt: skip
    """Write the frontier of one or more sweeps (`sweep.run_sweep` results: `{"recipe", "points", "references"}`,
    points with `label`, `mean_tokens`, `accuracy`) to `path`; returns `path` (`None` without matplotlib).

    Each recipe's points are connected in sweep order and labelled; the points on the Pareto front of everything
    drawn (the references included) are ringed; base (black square) and grpo (grey diamond) are single points.
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
        ax.plot([p["mean_tokens"] for p in pts], [p["accuracy"] for p in pts], marker="o", color=color,
                label=f"{s['recipe']} ({', '.join(s.get('keys', []))})")  # fmt: skip
        for p in pts:
            ax.annotate(str(p.get("label", "")), (p["mean_tokens"], p["accuracy"]), textcoords="offset points",
                        xytext=(4, 4), fontsize=6, color=color)  # fmt: skip
    styles = {"base": dict(marker="s", color="black"), "grpo": dict(marker="D", color="gray")}
    for name, r in references.items():
        ax.scatter([r["mean_tokens"]], [r["accuracy"]], s=50, zorder=3, label=name,
                   **styles.get(name, dict(marker="^", color="brown")))  # fmt: skip
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
