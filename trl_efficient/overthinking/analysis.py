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

from collections import defaultdict

from ..rewards import is_correct
from .world import NECESSARY_KINDS, SEGMENT_KINDS, THINK_CLOSE, THINK_OPEN, Task, classify_sentences, minimal_trace

__all__ = ["analyze_completion", "floor_tokens", "token_char_spans"]


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
