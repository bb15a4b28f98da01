"""
Pareto plots (accuracy vs mean tokens) with matplotlib's Agg backend.

`pareto_plot(points, path)` draws one curve per group (a model, with one point per inference mode, or a set of
recipes) and the overall Pareto front (dashed): the points no other point beats on both accuracy and tokens.
Without matplotlib it logs how to install it and returns `None`; JSON and Markdown outputs never depend on it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence

logger = logging.getLogger(__name__)

__all__ = ["MATPLOTLIB_MISSING", "pareto_front", "pareto_plot"]

MATPLOTLIB_MISSING = (
    "matplotlib is not installed, so no plot was drawn (the JSON and Markdown results are complete). "
    "Install it with `pip install matplotlib` (or `pip install 'trl-efficient[plot]'`)."
)


def pareto_front(points: Sequence[dict], x: str = "mean_tokens", y: str = "accuracy") -> list[dict]:
    """Points not dominated by another (another has fewer or equal tokens *and* higher or equal accuracy, one of
    them strictly), sorted by tokens.

    >>> pts = [{"mean_tokens": 10, "accuracy": 0.5}, {"mean_tokens": 20, "accuracy": 0.4},
    ...        {"mean_tokens": 30, "accuracy": 0.9}]
    >>> [p["mean_tokens"] for p in pareto_front(pts)]
    [10, 30]
    """
    front = []
    for p in points:
        dominated = any(q is not p and q[x] <= p[x] and q[y] >= p[y] and (q[x] < p[x] or q[y] > p[y]) for q in points)
        if not dominated:
            front.append(p)
    return sorted(front, key=lambda p: p[x])


def pareto_plot(
    points: Sequence[dict],
    path: str,
    title: str = "Accuracy vs mean completion tokens",
    group_key: str = "model",
    label_key: str | None = "mode",
    x: str = "mean_tokens",
    y: str = "accuracy",
    xlabel: str = "mean completion tokens",
    ylabel: str = "accuracy (pass@1)",
    reference_x: dict[str, float] | None = None,
) -> str | None:
    """Write a PNG of `points` (dicts with `x`, `y`, `group_key` and optionally `label_key`) to `path`.

    Each group is a line through its points sorted by `x`; each point is annotated with its label when the
    group has more than one point. `reference_x` draws labelled vertical lines (e.g. `{"floor": 63.6}`). Returns
    `path`, or `None` (with a logged message) without matplotlib or points.
    """
    try:  # a Figure on its own Agg canvas: no pyplot, no global backend switch, nothing left open
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        logger.warning(MATPLOTLIB_MISSING)
        return None
    points = [p for p in points if p.get(x) is not None and p.get(y) is not None]
    if not points:
        logger.warning("No points to plot for %s.", path)
        return None
    groups: dict[str, list[dict]] = defaultdict(list)
    for p in points:
        groups[str(p.get(group_key, ""))].append(p)
    fig = Figure(figsize=(7, 5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for name, pts in groups.items():
        pts = sorted(pts, key=lambda p: p[x])
        ax.plot([p[x] for p in pts], [p[y] for p in pts], marker="o", label=name or "(unnamed)")
        if label_key and len(pts) > 1 or len(groups) == 1:
            for p in pts:
                label = p.get(label_key) if label_key else None
                if label:
                    ax.annotate(str(label), (p[x], p[y]), textcoords="offset points", xytext=(4, 4), fontsize=7)
    front = pareto_front(points, x, y)
    if len(front) > 1:
        ax.plot([p[x] for p in front], [p[y] for p in front], linestyle="--", color="gray", linewidth=1,
                label="Pareto front")  # fmt: skip
    for label, value in (reference_x or {}).items():
        ax.axvline(value, color="black", linestyle=":", linewidth=1)
        ax.annotate(label, (value, ax.get_ylim()[0]), textcoords="offset points", xytext=(3, 3), fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return path
