"""
Exact token accounting of testbed completions: every token is a necessary step, a merged (skipped) step, a useful
check, a useless check, filler or frame.

Every completion token is assigned to the segment holding its last character (`world.classify_sentences`):

- `step` and `skip` sentences are **necessary** tokens (a skip does the work of several steps in one sentence);
- `check_useful` sentences (a check that changed the running value: world v2's repaired slips) are necessary too:
  thinking beyond the floor that pays;
- `check_useless` sentences (a check that agrees) and `filler` (restatements, hesitations, framing, repeats, stray
  text inside the think block) are **redundant**;
- `frame`: the think tags, the answer after `</think>`, the EOS token, and anything outside the think block.

`necessary_tokens = step + skip + check_useful + frame` and `redundant_tokens = check_useless + filler` add up to the
completion length. The **floor** of a task is the token count of its shortest correct trace (`world.minimal_trace`
plus EOS), so `tokens - floor` is the excess a perfectly efficient model that never slips would not spend.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from ..rewards import is_correct
from .world import NECESSARY_KINDS, SEGMENT_KINDS, THINK_CLOSE, THINK_OPEN, Task, classify_sentences, minimal_trace

__all__ = [
    "accuracy_by_difficulty",
    "analyze_completion",
    "floor_ratio_by_difficulty",
    "floor_tokens",
    "summarize",
    "token_char_spans",
    "worst_ratio_at_kept_accuracy",
]


def token_char_spans(tokenizer, ids: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """Decoded text of `ids` and the `(start, end)` character span of every token in it."""
    pieces = [tokenizer.decode([i], skip_special_tokens=False) for i in ids]
    text = "".join(pieces)
    if text != tokenizer.decode(ids, skip_special_tokens=False):  # multi-byte characters split across tokens
        spans, prev = [], 0
        for k in range(1, len(ids) + 1):
            end = len(tokenizer.decode(ids[:k], skip_special_tokens=False))
            spans.append((prev, end))
            prev = end
        return tokenizer.decode(ids, skip_special_tokens=False), spans
    spans, pos = [], 0
    for piece in pieces:
        spans.append((pos, pos + len(piece)))
        pos += len(piece)
    return text, spans


_FLOOR_CACHE: dict[tuple[int, Task], int] = {}


def floor_tokens(task: Task, tokenizer) -> int:
    """Tokens of the shortest correct trace of `task`, EOS included."""
    key = (id(tokenizer), task)
    if key not in _FLOOR_CACHE:
        _FLOOR_CACHE[key] = len(tokenizer(minimal_trace(task), add_special_tokens=False)["input_ids"]) + 1
    return _FLOOR_CACHE[key]


def analyze_completion(task: Task, completion_ids: list[int], tokenizer, text: str | None = None) -> dict:
    """Token accounting of one completion (ids as generated, EOS included when emitted).

    Returns a dict with `tokens`, `<kind>_tokens` for every kind of `world.SEGMENT_KINDS` (`step_tokens`,
    `skip_tokens`, `check_useful_tokens`, `check_useless_tokens`, `filler_tokens`, `frame_tokens`),
    `necessary_tokens`, `redundant_tokens`, `floor_tokens`, `redundant_share` (redundant / tokens), `num_steps`,
    `num_skips`, `useful_checks`, `useless_checks` (sentence counts), `correct` (bool) and `difficulty`.
    """
    ids = list(completion_ids)
    decoded, spans = token_char_spans(tokenizer, ids)
    start = decoded.find(THINK_OPEN)
    close = decoded.rfind(THINK_CLOSE)
    kinds = [""] * len(decoded)
    segments = []
    if start >= 0:
        body_start = start + len(THINK_OPEN)
        body_end = close if close > body_start else len(decoded)
        segments = classify_sentences(task, decoded[body_start:body_end], offset=body_start)
        for i in range(body_start, body_end):
            kinds[i] = "filler"  # whitespace between sentences; overwritten by the segments below
        for seg in segments:
            for i in range(seg.start, seg.end):
                kinds[i] = seg.kind
    counts = defaultdict(int)
    for s, e in spans:
        counts[kinds[e - 1] if e > s and kinds[e - 1] else "frame"] += 1
    n = len(ids)
    floor = floor_tokens(task, tokenizer)
    necessary = sum(counts[k] for k in NECESSARY_KINDS)
    return {
        "tokens": n,
        **{f"{k}_tokens": counts[k] for k in SEGMENT_KINDS},
        "redundant_tokens": n - necessary,
        "necessary_tokens": necessary,
        "floor_tokens": floor,
        "redundant_share": (n - necessary) / n if n else 0.0,
        "num_steps": sum(1 for s in segments if s.kind == "step"),
        "num_skips": sum(1 for s in segments if s.kind == "skip"),
        "useful_checks": sum(1 for s in segments if s.kind == "check_useful"),
        "useless_checks": sum(1 for s in segments if s.kind == "check_useless"),
        "correct": bool(is_correct(text if text is not None else decoded, str(task.answer))),
        "difficulty": task.difficulty,
    }


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
    from .checks import ACCURACY_TOLERANCE, fraction_noise

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
