"""Summaries of the exact token accounting (`trl_efficient.overthinking.analysis.analyze_completion` records):
accuracy, tokens, redundant share and floor, overall and per difficulty, and the worst tokens-to-floor ratio at kept
accuracy."""

from __future__ import annotations

import statistics
from collections import defaultdict

from trl_efficient.overthinking.world import SEGMENT_KINDS

from .checks import ACCURACY_TOLERANCE, fraction_noise

__all__ = ["accuracy_by_difficulty", "floor_ratio_by_difficulty", "summarize", "worst_ratio_at_kept_accuracy"]


def _mean(xs):
    return float(statistics.fmean(xs)) if xs else None


def summarize(records: list[dict]) -> dict:
    """Aggregate `analyze_completion` records: accuracy, mean tokens, redundant share (of all tokens), mean floor,
    excess over floor, skip rate, and the same per difficulty."""

    def agg(rs):
        tokens = sum(r["tokens"] for r in rs)
        return {
            "n": len(rs),
            "accuracy": _mean([float(r["correct"]) for r in rs]),
            "mean_tokens": _mean([r["tokens"] for r in rs]),
            "std_tokens": float(statistics.pstdev([r["tokens"] for r in rs])) if rs else None,
            "mean_floor_tokens": _mean([r["floor_tokens"] for r in rs]),
            "mean_redundant_tokens": _mean([r["redundant_tokens"] for r in rs]),
            "redundant_share": (sum(r["redundant_tokens"] for r in rs) / tokens) if tokens else 0.0,
            "excess_over_floor": _mean([r["tokens"] - r["floor_tokens"] for r in rs]),
            "skips_per_completion": _mean([r["num_skips"] for r in rs]),
            "useful_checks_per_completion": _mean([r.get("useful_checks", 0) for r in rs]),
            "useless_checks_per_completion": _mean([r.get("useless_checks", 0) for r in rs]),
            **{
                f"{k}_share": (sum(r.get(f"{k}_tokens", 0) for r in rs) / tokens) if tokens else 0.0
                for k in SEGMENT_KINDS
            },  # fmt: skip
        }

    out = agg(records)
    by = defaultdict(list)
    for r in records:
        by[r["difficulty"]].append(r)
    out["by_difficulty"] = {str(d): agg(by[d]) for d in sorted(by)}
    return out


# ---------------------------------------------------------------------------------------------------------------
# Per difficulty: tokens-to-floor ratio and the worst ratio at kept accuracy
# ---------------------------------------------------------------------------------------------------------------


def floor_ratio_by_difficulty(by_difficulty: dict) -> dict[str, float | None]:
    """Tokens-to-floor ratio per difficulty: mean tokens of the completions at k / mean floor tokens at k (the floor
    of a task = `floor_tokens`: `world.minimal_trace` tokenised with the testbed tokenizer, plus EOS). 1.0 is a model
    that writes exactly the shortest correct trace; `None` where the floor is missing or 0.

    >>> floor_ratio_by_difficulty({"1": {"mean_tokens": 30.0, "mean_floor_tokens": 20.0}, "2": {"mean_tokens": 5}})
    {'1': 1.5, '2': None}
    """
    out = {}
    for k, cell in by_difficulty.items():
        tokens, floor = cell.get("mean_tokens"), cell.get("mean_floor_tokens")
        out[k] = float(tokens) / float(floor) if tokens is not None and floor else None
    return out


def accuracy_by_difficulty(by_difficulty: dict) -> dict[str, float | None]:
    """Accuracy per difficulty (`{k: accuracy}`), from `summarize(...)["by_difficulty"]`."""
    return {k: cell.get("accuracy") for k, cell in by_difficulty.items()}


def worst_ratio_at_kept_accuracy(row: dict, reference: dict | None = None) -> tuple[float, str] | None:
    """The largest tokens-to-floor ratio over the difficulties k where `row` keeps the reference's accuracy, as
    `(ratio, k)`; `None` when no k qualifies or the row lacks the per-difficulty fields (rows written before they
    existed).

    "Keeps accuracy" at k: `row`'s accuracy at k is not below `reference`'s by more than the tolerance at k,
    `max(checks.ACCURACY_TOLERANCE, two standard errors of the difference at k)` (`checks.fraction_noise` with the
    sample counts of `by_difficulty[k]["n"]`; about 32 samples per k on the default evaluation, so the noise term
    dominates). `reference=None` (the reference row itself) takes every k. A small worst ratio means the recipe
    spends tokens only where they buy accuracy; a large one names the difficulty where it still over-thinks.

    >>> row = {"accuracy_by_difficulty": {"1": 0.9, "2": 0.5}, "floor_ratio_by_difficulty": {"1": 1.4, "2": 2.0}}
    >>> ref = {"accuracy_by_difficulty": {"1": 0.9, "2": 0.9}, "floor_ratio_by_difficulty": {"1": 1.5, "2": 1.6}}
    >>> worst_ratio_at_kept_accuracy(row, ref)  # k=2 lost 0.4 > 0.04 (no counts: tolerance 0.04), so only k=1
    (1.4, '1')
    """
    accuracy, ratios = row.get("accuracy_by_difficulty"), row.get("floor_ratio_by_difficulty")
    if not accuracy or not ratios:
        return None
    ref_accuracy = (reference or {}).get("accuracy_by_difficulty") if reference is not None else None
    if reference is not None and not ref_accuracy:
        return None
    counts = {k: c.get("n") for k, c in (row.get("by_difficulty") or {}).items()}
    ref_counts = {k: c.get("n") for k, c in ((reference or {}).get("by_difficulty") or {}).items()}
    worst = None
    for k, ratio in ratios.items():
        if ratio is None or accuracy.get(k) is None:
            continue
        if reference is not None:
            ref_acc = ref_accuracy.get(k)
            if ref_acc is None:
                continue
            tolerance = max(ACCURACY_TOLERANCE, fraction_noise(accuracy[k], counts.get(k), ref_acc, ref_counts.get(k)))
            if accuracy[k] < ref_acc - tolerance:
                continue
        if worst is None or ratio > worst[0]:
            worst = (float(ratio), k)
    return worst
