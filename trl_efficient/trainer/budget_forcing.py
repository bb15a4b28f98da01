r"""
s1 budget forcing (Muennighoff et al., arXiv 2501.19393, §3.1 "Budget forcing"; methods.md, inference control under
BudgetThinker §23): control the thinking length at decoding time, with no training.

- `force:B` ("maximum"): the thinking stops at $B$ generated tokens. If the end-of-thinking delimiter `</think>` has
  not appeared within the first $B$ completion tokens (and the completion has not ended), the completion is cut at
  position $B$, `</think>` plus the answer prefix (`prompts.BUDGET_FORCING_ANSWER_PREFIX`, "\n\nThe final answer is
  \boxed{") is appended, and generation continues from that prefix for at most `answer_cap` tokens (proposed
  default 32: the answer of a math problem after an opened `\boxed{`). Completions that close the thinking within
  $B$ tokens (or end) are left as generated.
- `wait:N` ("minimum"): an early end of thinking (the first `</think>`, or EOS before any `</think>`) is removed and
  replaced by "Wait" (s1's `ignore_str`), and generation continues; after $N$ replacements the model may finish.
  The whole completion keeps the `max_new_tokens` cap.

Both run as batched multi-phase generation over token ids through a `generate(prefixes, max_new_tokens)` callable
(HF `generate`, vLLM `generate` or TRL's generation path), so the sampled tokens follow the model's distribution
exactly: continuing from the extended prefix is the same as one call with the inserted tokens. The inserted tokens
are reported as `ForcedCompletion.inserted` spans (for training, `EfficientGRPOTrainer` masks them out of the loss).

Token accounting (s1's definition): $B$ counts generated thinking tokens, so a forced completion has exactly $B$
generated thinking tokens followed by the inserted delimiter; `LengthMeter` (thinking up to and including
`</think>`) reports $B + |\text{tok}(\texttt{</think>})|$ for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..core.lengths import LengthMeter
from ..prompts import BUDGET_FORCING_ANSWER_PREFIX, BUDGET_FORCING_END_THINK, BUDGET_FORCING_WAIT

__all__ = ["DEFAULT_ANSWER_CAP", "FORCED_TEXT", "BudgetForcing", "ForcedCompletion", "budget_force", "think_end_span"]

DEFAULT_ANSWER_CAP = 32  # proposed default: answer tokens generated after a forced `</think>` + answer prefix

FORCED_TEXT = BUDGET_FORCING_END_THINK + BUDGET_FORCING_ANSWER_PREFIX  # what `force:B` inserts at position B
GenerateFn = Callable[[list[list[int]], int], list[list[int]]]


@dataclass(frozen=True)
class BudgetForcing:
    """One budget-forcing setting: `kind` "force" (value = thinking budget B) or "wait" (value = N replacements).

    >>> BudgetForcing.parse("force:64"), BudgetForcing.parse("wait:2").kind, BudgetForcing.parse(None)
    (BudgetForcing(kind='force', value=64, answer_cap=32), 'wait', None)
    >>> BudgetForcing.parse("force:0")
    Traceback (most recent call last):
    ...
    ValueError: budget forcing 'force:0': use force:<B> or wait:<N> with a positive integer (e.g. force:512, wait:1).
    """

    kind: str
    value: int
    answer_cap: int = DEFAULT_ANSWER_CAP

    @classmethod
    def parse(cls, spec: str | None, answer_cap: int = DEFAULT_ANSWER_CAP) -> BudgetForcing | None:
        if spec is None or (isinstance(spec, str) and not spec.strip()):
            return None
        kind, _, arg = str(spec).strip().partition(":")
        try:
            value = int(arg)
        except ValueError:
            value = 0
        if kind.lower() not in ("force", "wait") or value <= 0:
            raise ValueError(
                f"budget forcing {spec!r}: use force:<B> or wait:<N> with a positive integer (e.g. force:512, wait:1)."
            )
        if answer_cap < 1:
            raise ValueError(f"budget forcing answer_cap must be >= 1, got {answer_cap}.")
        return cls(kind.lower(), value, answer_cap)

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.value}"


@dataclass
class ForcedCompletion:
    ids: list[int]
    finished: bool  # ended with an EOS id
    inserted: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of the tokens we inserted
    forced: bool = False  # force: the thinking was closed by us; wait: at least one "Wait" was inserted


def think_end_span(ids: Sequence[int], tokenizer, tag: str = BUDGET_FORCING_END_THINK) -> tuple[int, int] | None:
    """Token span `[start, end)` of the FIRST `tag` in `ids` (`None` if absent): `end` is the smallest prefix whose
    decoding holds the tag, `start` the largest cut before it whose suffix still decodes to it."""
    ids = list(ids)
    meter = LengthMeter(scope="thinking", tokenizer=tokenizer, close_tag=tag)
    backend = getattr(tokenizer, "backend_tokenizer", None)

    def decode(a: int, b: int) -> str:
        if backend is not None:
            return backend.decode(ids[a:b], skip_special_tokens=False)
        return tokenizer.decode(ids[a:b], skip_special_tokens=False)

    if tag not in decode(0, len(ids)):
        return None
    end = meter._smallest_prefix_with(lambda k: decode(0, k), tag, 1, lo=1, hi=len(ids))
    start = end - 1
    while start > 0 and tag not in decode(start, end):
        start -= 1
    return start, end


def _cut_at_eos(ids: list[int], eos_ids: set[int]) -> list[int]:
    for i, t in enumerate(ids):
        if t in eos_ids:
            return ids[: i + 1]
    return ids


def budget_force(
    prompts: list[list[int]],
    generate: GenerateFn,
    forcing: BudgetForcing,
    tokenizer,
    eos_ids: Sequence[int],
    max_new_tokens: int,
    first: list[list[int]] | None = None,
) -> list[ForcedCompletion]:
    """Generate completions of `prompts` (token ids) under `forcing`.

    `generate(prefixes, max_new)` returns one completion per prefix (ids after the prefix, at most `max_new`,
    ending at the first EOS). `first` optionally holds phase-1 completions already generated (e.g. by TRL with its
    own length cap); for `force` they must be at least `min(B, max_new_tokens)` tokens long unless ended, and are cut
    at B when forced. Without `first`, phase 1 generates `min(B, max_new_tokens)` tokens and rows that closed their
    thinking in time continue up to `max_new_tokens`.
    """
    eos = set(int(e) for e in eos_ids)
    if forcing.kind == "force":
        return _force(prompts, generate, forcing, tokenizer, eos, max_new_tokens, first)
    if forcing.kind == "wait":
        return _wait(prompts, generate, forcing, tokenizer, eos, max_new_tokens)
    raise ValueError(f"unknown budget forcing kind {forcing.kind!r}")


def _force(prompts, generate, forcing, tokenizer, eos, max_new_tokens, first):
    budget = forcing.value
    if first is None:
        first = generate(prompts, min(budget, max_new_tokens)) if prompts else []
    forced_ids = list(tokenizer.encode(FORCED_TEXT, add_special_tokens=False))
    out: list[ForcedCompletion] = []
    natural, forced = [], []  # rows to continue: closed in time (up to max_new_tokens) / forced (answer_cap)
    for i, g in enumerate(first):
        g = _cut_at_eos(list(g), eos)
        head = g[:budget]
        if head and head[-1] in eos or think_end_span(head, tokenizer) is not None or len(g) < budget:
            # ended, closed its thinking within B tokens, or shorter than B without EOS (max_new_tokens < B)
            done = bool(g) and g[-1] in eos
            out.append(ForcedCompletion(g, done))
            if not done and len(g) < max_new_tokens and len(g) == budget:
                natural.append(i)  # phase 1 stopped at B (no `first` given): let it finish its answer
            continue
        out.append(ForcedCompletion(head + forced_ids, False, [(budget, budget + len(forced_ids))], True))
        forced.append(i)
    for rows, cap_of in ((natural, lambda c: max_new_tokens - len(c.ids)), (forced, lambda c: forcing.answer_cap)):
        if not rows:
            continue
        caps = [cap_of(out[i]) for i in rows]
        more = generate([list(prompts[i]) + out[i].ids for i in rows], max(caps))
        for i, cap, extra in zip(rows, caps, more, strict=True):
            extra = _cut_at_eos(list(extra), eos)[:cap]
            out[i].ids = out[i].ids + extra
            out[i].finished = bool(extra) and extra[-1] in eos
    return out


def _wait(prompts, generate, forcing, tokenizer, eos, max_new_tokens):
    wait_ids = list(tokenizer.encode(BUDGET_FORCING_WAIT, add_special_tokens=False))
    out = [ForcedCompletion([], False) for _ in prompts]
    waits = [0] * len(prompts)
    active = [i for i in range(len(prompts)) if max_new_tokens > 0]
    while active:
        caps = [max_new_tokens - len(out[i].ids) for i in active]
        more = generate([list(prompts[i]) + out[i].ids for i in active], max(caps))
        nxt = []
        for i, cap, g in zip(active, caps, more, strict=True):
            g = _cut_at_eos(list(g), eos)[:cap]
            c = out[i]
            span = think_end_span(g, tokenizer)
            start = span[0] if span is not None else (len(g) - 1 if g and g[-1] in eos else None)
            if start is not None and waits[i] < forcing.value:
                c.inserted.append((len(c.ids) + start, len(c.ids) + start + len(wait_ids)))
                c.ids = c.ids + g[:start] + wait_ids
                c.forced, waits[i] = True, waits[i] + 1
                if len(c.ids) < max_new_tokens:
                    nxt.append(i)
                continue
            c.ids = c.ids + g
            c.finished = bool(g) and g[-1] in eos
        active = nxt
    return out
