r"""
Step-level rewards: the reasoning is cut into **steps** (segments) and the reward counts them instead of tokens.

- `segment_reasoning`, the one segmenter: the thinking part (before the last `</think>`, `<think>` removed; else the
  whole completion, as `core.lengths.split_thinking`) split by one of `SEGMENTERS`: `"paragraphs"` (blank lines;
  methods.md §19 [inferred], proposed default), `"keywords"` (paragraphs, also split before lines opening with one of
  `GRSP_KEYWORDS`; methods.md §27, proposed default), `"lines"` or `"sentences"` (after `.`/`!`/`?` + white space:
  the synthetic traces). Empty segments are dropped; an empty or undelimited thinking part is **one step**.
- A step's length in tokens is the number of the completion's own tokens it overlaps (`LengthMeter.token_text`,
  `overlapping_tokens`); a tokenizer without a byte-piece table re-tokenises each step (`count_segment_length`),
  which can differ by a token at a boundary.
- `get_step_pruner_reward` (Step Pruner, arXiv 2510.03805, methods.md §19) and `get_grsp_reward` (GRSP, arXiv
  2510.09535, methods.md §27). Narrative: docs/structure-methods.md ("Common machinery", "Step Pruner", "GRSP").

Both are whole-group rewards (`GroupLengthReward`: rows are gathered across processes, so a group that straddles
ranks is scored whole). By default (`as_penalty=True`) each returns the **difference from correctness**, $R_i - c_i$,
to be added to the correctness reward (weight 1 each, as the recipes do): the sum is the paper's $R_i$ and the
trainer's accuracy metrics keep reading the plain correctness reward. `as_penalty=False` returns $R_i$ itself.

>>> segment_reasoning("<think>a: 4 + 7 = 1. b: 1 + 7 = 8.</think> \\boxed{8}", "sentences")
['a: 4 + 7 = 1.', 'b: 1 + 7 = 8.']
>>> segment_reasoning("<think>First.\n\nSecond.\nWait, no.</think>5", "keywords")
['First.', 'Second.', 'Wait, no.']
>>> segment_reasoning("no thinking block at all")  # no </think>: the whole text is the reasoning
['no thinking block at all']
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

from ..core.checks import check_number as _check_number
from ..core.lengths import THINK_CLOSE, LengthMeter, completion_text, split_thinking
from ..core.state import StatefulComponent
from .group import GroupLengthReward, _check_num_generations

__all__ = [
    "GRSP_KEYWORDS",
    "SEGMENTERS",
    "SEGMENT_UNITS",
    "count_segment_length",
    "get_grsp_reward",
    "get_step_pruner_reward",
    "reasoning_text",
    "segment_reasoning",
    "segment_spans",
]

SEGMENTERS = ("paragraphs", "keywords", "lines", "sentences")
SEGMENT_UNITS = ("tokens", "chars", "words")
GRSP_KEYWORDS = ("Wait", "Alternatively", "But", "Hmm", "Let me", "Actually")  # methods.md §27, proposed default
THINK_OPEN = "<think>"

_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _reasoning_span(text: str) -> tuple[int, int]:
    """`(start, end)` of the thinking part in `text` (see `reasoning_text`)."""
    thinking, _, closed = split_thinking(text)
    end = len(thinking) - (len(THINK_CLOSE) if closed else 0)
    start = text.find(THINK_OPEN, 0, end)
    return (0 if start < 0 else start + len(THINK_OPEN)), end


def reasoning_text(completion: Any) -> str:
    """The thinking part of a completion without its tags: the text before the last `</think>` (an opening
    `<think>` removed), or the whole text when there is no `</think>`.

    >>> reasoning_text("<think> a. b. </think> \\\\boxed{1}"), reasoning_text("just text")
    (' a. b. ', 'just text')
    """
    text = completion_text(completion)
    start, end = _reasoning_span(text)
    return text[start:end]


@functools.lru_cache(maxsize=32)
def _keyword_pattern(keywords: tuple[str, ...]) -> re.Pattern:
    alternatives = "|".join(re.escape(k) for k in keywords)
    return re.compile(rf"\n(?=[ \t]*(?:{alternatives})\b)")


def _split_spans(pattern: re.Pattern | str, text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The pieces of `text[start:end]` between the matches of `pattern` (a regex, or `"\\n"`), as spans of `text`."""
    spans, at = [], start
    if isinstance(pattern, str):
        cut = text.find(pattern, at, end)
        while cut >= 0:
            spans.append((at, cut))
            at = cut + len(pattern)
            cut = text.find(pattern, at, end)
    else:
        for match in pattern.finditer(text, start, end):
            spans.append((at, match.start()))
            at = match.end()
    spans.append((at, end))
    return spans


def segment_spans(
    text: str, segmenter: str = "paragraphs", keywords: tuple[str, ...] = GRSP_KEYWORDS
) -> list[tuple[int, int]]:
    r"""
    The reasoning steps of one completion's text as `(start, end)` spans of `text`: its thinking part
    (`reasoning_text`) split by `segmenter` (one of `SEGMENTERS`, see the module docstring), each span stripped of
    white space, empty ones dropped. `segment_reasoning` is these spans' text; the token counts of the steps
    (`segment_unit="tokens"`) map them onto the completion's own tokens.

    >>> text = "<think>One.\n\nTwo.</think>x"
    >>> [(a, b, text[a:b]) for a, b in segment_spans(text)]
    [(7, 11, 'One.'), (13, 17, 'Two.')]
    """
    if segmenter not in SEGMENTERS:
        raise ValueError(f"segmenter must be one of {SEGMENTERS}, got {segmenter!r}.")
    start, end = _reasoning_span(text)
    if segmenter == "paragraphs":
        spans = _split_spans(_PARAGRAPH, text, start, end)
    elif segmenter == "keywords":
        pattern = _keyword_pattern(tuple(keywords))
        spans = [
            piece for a, b in _split_spans(_PARAGRAPH, text, start, end) for piece in _split_spans(pattern, text, a, b)
        ]
    elif segmenter == "lines":
        spans = _split_spans("\n", text, start, end)
    else:
        spans = _split_spans(_SENTENCE_END, text, start, end)
    stripped = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            stripped.append((a, b))
    return stripped


def segment_reasoning(
    completion: Any, segmenter: str = "paragraphs", keywords: tuple[str, ...] = GRSP_KEYWORDS
) -> list[str]:
    r"""
    The reasoning steps of one completion: its thinking part (`reasoning_text`) split by `segmenter` (one of
    `SEGMENTERS`, see the module docstring), each segment stripped, empty ones dropped. An empty thinking part gives
    `[]` (callers count it as one step).

    >>> segment_reasoning("<think>One.\n\n  \nTwo.\nMore of two.</think>x")
    ['One.', 'Two.\nMore of two.']
    >>> segment_reasoning("<think>One.\nTwo.</think>x", "lines"), segment_reasoning("<think></think>x")
    (['One.', 'Two.'], [])
    """
    text = completion_text(completion)
    return [text[a:b] for a, b in segment_spans(text, segmenter, keywords)]


def count_segment_length(segment: str, unit: str = "tokens", tokenizer: Any = None) -> int:
    """The length of one segment: policy tokens (`tokenizer(segment, add_special_tokens=False)`, re-tokenised on its
    own, so a token that straddles a segment boundary may count on both sides), characters, or white-space words.

    >>> count_segment_length("a: 4 + 7 = 1.", "words"), count_segment_length("a: 4", "chars")
    (6, 4)
    """
    if unit == "chars":
        return len(segment)
    if unit == "words":
        return len(segment.split())
    if tokenizer is None:
        raise ValueError(
            "segment_unit='tokens' needs the policy tokenizer: pass tokenizer=... (or segment_unit='chars')."
        )
    return len(tokenizer(segment, add_special_tokens=False)["input_ids"])


def _check_segmentation(segmenter: str, keywords: Any, segment_unit: str, tokenizer: Any) -> tuple[str, ...]:
    if segmenter not in SEGMENTERS:
        raise ValueError(f"segmenter must be one of {SEGMENTERS}, got {segmenter!r}.")
    if segment_unit not in SEGMENT_UNITS:
        raise ValueError(f"segment_unit must be one of {SEGMENT_UNITS}, got {segment_unit!r}.")
    if segment_unit == "tokens" and tokenizer is None:
        raise ValueError(
            "segment_unit='tokens' needs the policy tokenizer: pass tokenizer=... (or segment_unit='chars')."
        )
    if isinstance(keywords, str) or not all(isinstance(k, str) and k for k in keywords):
        raise ValueError(f"keywords must be a list of non-empty strings, got {keywords!r}.")
    return tuple(keywords)


class _SegmentedReward(GroupLengthReward):
    """A group reward whose per-row extra is the lengths of the row's segments (gathered with `(correct, length)`)."""

    def __init__(self, num_generations, meter, segmenter, keywords, segment_unit, tokenizer, as_penalty) -> None:
        super().__init__(num_generations, meter)
        self.segmenter = segmenter
        self.keywords = keywords
        self.segment_unit = segment_unit
        self.tokenizer = tokenizer
        self.as_penalty = as_penalty

    def _row_extra(self, completion, ids, kwargs, i):
        """The lengths of the row's steps. In tokens, counted on the completion's own ids where the tokenizer allows
        it (the steps are found in the text of the ids, `LengthMeter.token_text`, and each counts the tokens it
        overlaps, `LengthMeter.overlapping_tokens`); otherwise each step's text is re-tokenised
        (`count_segment_length`)."""
        if self.segment_unit == "tokens" and ids is not None:
            text = self.meter.token_text(ids)
            if text is not None:
                spans = segment_spans(text, self.segmenter, self.keywords)
                counts = self.meter.overlapping_tokens([ids], [text], [spans])[0]
                if counts is not None:
                    return counts
        segments = segment_reasoning(completion, self.segmenter, self.keywords)
        return [count_segment_length(s, self.segment_unit, self.tokenizer) for s in segments]

    def _row_extras(self, completions, completion_ids, kwargs, rows):
        """`_row_extra` of every row, the token counts of the whole call at once where the completion's text is its
        ids' text (`LengthMeter.overlapping_tokens`: the same counts, vectorised); other rows one by one."""
        if self.segment_unit != "tokens" or any(ids is None for ids in completion_ids):
            return super()._row_extras(completions, completion_ids, kwargs, rows)
        texts = [completion_text(c) for c in completions]  # already texts under GroupLengthReward.__call__
        spans = [segment_spans(text, self.segmenter, self.keywords) for text in texts]
        counts = self.meter.overlapping_tokens(completion_ids, texts, spans)
        return [
            self._row_extra(completions[i], completion_ids[i], kwargs, i) if row is None else row
            for i, row in enumerate(counts)
        ]

    def _score_batch(self, rows, extras, group_size):
        rewards: list[float | None] = []
        for start in range(0, len(rows), group_size):
            rewards.extend(self._score_segments(rows[start : start + group_size], extras[start : start + group_size]))
        return rewards

    def _finish(self, correct: bool | None, reward: float) -> float | None:
        """`None` for an unscorable row; `R_i - c_i` with `as_penalty`, else `R_i`."""
        if correct is None:
            return None
        return reward - float(correct) if self.as_penalty else reward


def get_step_pruner_reward(
    num_generations: int | None = None,
    kappa: float = 0.5,
    max_step_length: int | None = 512,
    segmenter: str = "paragraphs",
    keywords: tuple[str, ...] | list[str] = GRSP_KEYWORDS,
    segment_unit: str = "tokens",
    stop_window: int = 50,
    stop_check_every: int = 10,
    stop_patience: int | None = 3,
    as_penalty: bool = True,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _StepPrunerReward:
    r"""
    Step Pruner's step-aware reward (arXiv 2510.03805; methods.md §19; no code is known, so the formula, κ, the step
    limit and the stop rule are all **proposed defaults**).

    $$ R_i = c_i\left(1 - \kappa\,\min\!\left(1, \frac{S_i - S_{\min}}{S_{\min}}\right)\right), \qquad
    S_{\min} = \min\{S_j : o_j \text{ correct},\ \max_s \ell_{j,s} \le \ell_{\max}\} $$

    with $S_i$ the number of steps of response $i$ (`segment_reasoning` with `segmenter`, at least 1) and $c_i$ its
    correctness; wrong answers get 0. Guard (methods.md §19, replacing the paper's "halt updates"): a step longer than
    `max_step_length` (in `segment_unit`) gives $R_i = 0$ and (our choice) excludes the response from $S_{\min}$; a
    group with no correct, unguarded answer scores 0 everywhere; `max_step_length=None`: no guard.

    **Stop rule** (proposed default): `update(batch)` (gathered training batches) appends the mean completion length;
    every `stop_check_every` batches the mean of the last `stop_window` is non-improving unless below every earlier
    one; after `stop_patience` in a row, `stop_requested` and `attach(trainer)`'s callback stops training (state is
    checkpointed; `stop_patience=None` disables it). Details: docs/structure-methods.md, "Step Pruner".

    Args:
        num_generations (`int`, *optional*): group size; leave `None` under `EfficientGRPOTrainer`.
        kappa (`float`, defaults to `0.5`): the largest share of the reward lost to extra steps (proposed default).
        max_step_length (`int`, *optional*, defaults to `512`): step-length guard in `segment_unit` (proposed
            default); a limit smaller than every segment zeroes every response.
        segmenter (`str`, defaults to `"paragraphs"`): one of `SEGMENTERS` (blank lines: proposed default).
        keywords: the step-opening words of the `"keywords"` segmenter.
        segment_unit (`str`, defaults to `"tokens"`): unit of `max_step_length` (`"tokens"` needs `tokenizer`).
        stop_window, stop_check_every, stop_patience: the stop rule (50, 10, 3 training batches; proposed defaults).
        as_penalty (`bool`, defaults to `True`): return $R_i - c_i$ (added to the correctness reward) instead of $R_i$.
        length_unit, length_scope, tokenizer: see `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `step_pruner_reward`.

    >>> reward = get_step_pruner_reward(num_generations=4, segmenter="sentences", segment_unit="words",
    ...                                 max_step_length=6, as_penalty=False)
    >>> # steps 2, 3, 4 (correct), 1 (wrong): S_min = 2 -> 1, 1 - 0.5 * 1/2, 1 - 0.5 * min(1, 2/2), 0
    >>> reward(completions=["A. B.</think>\\boxed{1}", "A. B. C.</think>\\boxed{1}", "A. B. C. D.</think>\\boxed{1}",
    ...                     "A.</think>\\boxed{2}"], solution=["1"] * 4, completion_ids=[[0]] * 4)
    [1.0, 0.75, 0.5, 0.0]
    """
    _check_num_generations(num_generations)
    _check_number("kappa", kappa, 0.0, 1.0)
    if max_step_length is not None:
        _check_number("max_step_length", max_step_length, 1)
    for name, value in (("stop_window", stop_window), ("stop_check_every", stop_check_every)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}.")
    if stop_patience is not None and (
        isinstance(stop_patience, bool) or not isinstance(stop_patience, int) or stop_patience < 1
    ):
        raise ValueError(f"stop_patience must be a positive int or None (no stop rule), got {stop_patience!r}.")
    keywords = _check_segmentation(segmenter, keywords, segment_unit, tokenizer)
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    reward = _StepPrunerReward(num_generations, meter, segmenter, keywords, segment_unit, tokenizer, bool(as_penalty))
    reward.kappa = float(kappa)
    reward.max_step_length = None if max_step_length is None else float(max_step_length)
    reward.stop_window, reward.stop_check_every, reward.stop_patience = stop_window, stop_check_every, stop_patience
    return reward


class _StepPrunerReward(_SegmentedReward, StatefulComponent):
    __name__ = "step_pruner_reward"
    _factory = "get_step_pruner_reward()"
    state_key = "step_pruner_reward"

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.kappa = 0.5
        self.max_step_length: float | None = 512.0
        self.stop_window, self.stop_check_every, self.stop_patience = 50, 10, 3
        self.recent_lengths: list[float] = []  # the last stop_window training batches' mean completion lengths
        self.batches = 0  # training batches seen
        self.best_average: float | None = None  # lowest moving average at an evaluation so far
        self.non_improving = 0  # consecutive non-improving evaluations
        self.stop_requested = False

    def _score_segments(self, rows, extras):
        steps = [max(1, len(seg)) for seg in extras]
        guarded = [self.max_step_length is not None and any(n > self.max_step_length for n in seg) for seg in extras]
        references = [s for (correct, _), s, g in zip(rows, steps, guarded) if correct and not g]
        s_min = min(references) if references else None
        out = []
        for (correct, _), s, g in zip(rows, steps, guarded):
            if not correct or g or s_min is None:
                value = 0.0
            else:
                value = 1.0 - self.kappa * min(1.0, (s - s_min) / s_min)
            out.append(self._finish(correct, value))
        return out

    # --- stateful component: the stop rule ----------------------------------------------------------------------
    def update(self, batch) -> None:
        lengths = [float(x) for x in batch.lengths.tolist()] if hasattr(batch.lengths, "tolist") else batch.lengths
        if not lengths:
            return
        self.recent_lengths = (self.recent_lengths + [sum(lengths) / len(lengths)])[-self.stop_window :]
        self.batches += 1
        if self.batches % self.stop_check_every:
            return
        average = sum(self.recent_lengths) / len(self.recent_lengths)
        if self.best_average is None or average < self.best_average:
            self.best_average, self.non_improving = average, 0
        else:
            self.non_improving += 1
        if self.stop_patience is not None and self.non_improving >= self.stop_patience:
            self.stop_requested = True

    def state_dict(self) -> dict:
        return {
            "recent_lengths": list(self.recent_lengths),
            "batches": self.batches,
            "best_average": self.best_average,
            "non_improving": self.non_improving,
            "stop_requested": self.stop_requested,
        }

    def load_state_dict(self, state: dict) -> None:
        self.recent_lengths = [float(x) for x in state["recent_lengths"]]
        self.batches = int(state["batches"])
        self.best_average = None if state["best_average"] is None else float(state["best_average"])
        self.non_improving = int(state["non_improving"])
        self.stop_requested = bool(state["stop_requested"])

    def attach(self, trainer) -> None:
        """Register the stop-rule callback (once) on the trainer."""
        if self.stop_patience is None:
            return
        stop = _step_pruner_stop()
        if not any(isinstance(c, stop) and c.reward is self for c in trainer.callback_handler.callbacks):
            trainer.add_callback(stop(self))


@functools.cache
def _step_pruner_stop() -> type:
    """`StepPrunerStop`, defined on first use: it subclasses transformers' `TrainerCallback`, which this module does
    not import at import time, so that the reward (and the recipe registry that declares it) loads without
    transformers. The module's `__getattr__` hands it out as `StepPrunerStop`."""
    from transformers import TrainerCallback

    class StepPrunerStop(TrainerCallback):
        """Ends training (`control.should_training_stop`) once the Step Pruner reward's stop rule has fired; the
        state lives in the reward (checkpointed with it), so this callback holds nothing of its own."""

        def __init__(self, reward: _StepPrunerReward) -> None:
            self.reward = reward

        def on_step_end(self, args, state, control, **kwargs):
            if self.reward.stop_requested:
                control.should_training_stop = True
            return control

    StepPrunerStop.__qualname__ = "StepPrunerStop"  # pickled and shown as the module's attribute
    return StepPrunerStop


def __getattr__(name: str):
    """`StepPrunerStop` (PEP 562), built on first access by `_step_pruner_stop`."""
    if name == "StepPrunerStop":
        return _step_pruner_stop()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_grsp_reward(
    num_generations: int | None = None,
    bucket_bounds: tuple[int, int] | list[int] = (32, 128),
    bucket_weights: tuple[float, ...] | list[float] = (0.5, 0.3, 0.2),
    coefficient: float = 0.1,
    segmenter: str = "keywords",
    keywords: tuple[str, ...] | list[str] = GRSP_KEYWORDS,
    segment_unit: str = "tokens",
    as_penalty: bool = True,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _GRSPReward:
    r"""
    GRSP, Group Relative Segment Penalization (arXiv 2510.09535; methods.md §27; no code is known and the sources
    publish neither formula nor weights, so everything below is a **proposed default**, following methods.md §27).

    Each response's segments (`segment_reasoning`, default `"keywords"`: blank lines plus lines opening with "Wait",
    "Alternatively", "But", "Hmm", "Let me" or "Actually") are counted per length bucket $k$ (`bucket_bounds`
    $(b_1, b_2)$: $\ell < b_1$, $b_1 \le \ell \le b_2$, $\ell > b_2$; default < 32 / 32-128 / > 128 tokens) into
    $n_{i,k}$, and z-scored over the $G$ responses of the group:

    $$ z_{i,k} = \frac{n_{i,k} - \mu_k}{\sigma_k}\ (0 \text{ when } \sigma_k = 0), \qquad
    P_i = \sum_k w_k z_{i,k}, \qquad R_i = c_i - \lambda\, c_i \max(0, P_i) $$

    with descending weights $w = (0.5, 0.3, 0.2)$ (short segments, typical of dithering, cost most; ascending weights
    collapsed accuracy, §27) and $\lambda = 0.1$. $\mu_k, \sigma_k$ (population std) are over every row of the group
    (wrong ones too: they are the group's samples); the penalty applies to correct answers only, wrong ones get 0.
    A response with an empty thinking part has no segments (all counts 0).

    Args:
        num_generations (`int`, *optional*): group size; leave `None` under `EfficientGRPOTrainer`.
        bucket_bounds (defaults to `(32, 128)`): the two bucket edges in `segment_unit`, increasing.
        bucket_weights (defaults to `(0.5, 0.3, 0.2)`): one weight per bucket, short to long.
        coefficient (`float`, defaults to `0.1`): $\lambda$.
        segmenter, keywords, segment_unit: see `segment_reasoning` and `count_segment_length`.
        as_penalty (`bool`, defaults to `True`): return $R_i - c_i$ (added to the correctness reward) instead of $R_i$.
        length_unit, length_scope, tokenizer: see `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `grsp_reward`.

    >>> reward = get_grsp_reward(num_generations=2, bucket_bounds=(2, 4), segment_unit="words", as_penalty=False)
    >>> # short-segment counts 3 vs 1: z = +1 / -1 (other buckets 0 and 0): P = 0.5, -0.5 -> 1 - 0.1 * 0.5, 1
    >>> reward(completions=["<think>A.\nWait.\nHmm.</think>\\boxed{1}", "<think>A.</think>\\boxed{1}"],
    ...        solution=["1", "1"], completion_ids=[[0], [0]])
    [0.95, 1.0]
    """
    _check_num_generations(num_generations)
    bounds = tuple(bucket_bounds)
    if len(bounds) != 2 or not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds):
        raise ValueError(f"bucket_bounds must be two numbers (b1, b2), got {bucket_bounds!r}.")
    if not 0 < bounds[0] <= bounds[1]:
        raise ValueError(f"bucket_bounds must satisfy 0 < b1 <= b2, got {bucket_bounds!r}.")
    weights = tuple(bucket_weights)
    if len(weights) != 3:
        raise ValueError(f"bucket_weights must hold 3 weights (short, medium, long), got {bucket_weights!r}.")
    for w in weights:
        _check_number("bucket_weights", w, 0.0)
    _check_number("coefficient", coefficient, 0.0)
    keywords = _check_segmentation(segmenter, keywords, segment_unit, tokenizer)
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    reward = _GRSPReward(num_generations, meter, segmenter, keywords, segment_unit, tokenizer, bool(as_penalty))
    reward.bucket_bounds = (float(bounds[0]), float(bounds[1]))
    reward.bucket_weights = tuple(float(w) for w in weights)
    reward.coefficient = float(coefficient)
    return reward


class _GRSPReward(_SegmentedReward):
    __name__ = "grsp_reward"
    _factory = "get_grsp_reward()"
    bucket_bounds: tuple[float, float] = (32.0, 128.0)
    bucket_weights: tuple[float, ...] = (0.5, 0.3, 0.2)
    coefficient = 0.1

    def bucket_counts(self, segment_lengths: list[int]) -> tuple[int, int, int]:
        low, high = self.bucket_bounds
        short = sum(1 for n in segment_lengths if n < low)
        long = sum(1 for n in segment_lengths if n > high)
        return short, len(segment_lengths) - short - long, long

    def _score_segments(self, rows, extras):
        counts = [self.bucket_counts(seg) for seg in extras]
        g = len(counts)
        penalties = [0.0] * g
        for k, weight in enumerate(self.bucket_weights):
            column = [c[k] for c in counts]
            mean = sum(column) / g
            std = math.sqrt(sum((x - mean) ** 2 for x in column) / g)
            if std > 0:
                for i, x in enumerate(column):
                    penalties[i] += weight * (x - mean) / std
        return [
            self._finish(correct, float(bool(correct)) * (1.0 - self.coefficient * max(0.0, p)))
            for (correct, _), p in zip(rows, penalties)
        ]
