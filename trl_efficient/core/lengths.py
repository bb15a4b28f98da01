r"""
Completion text and length measurement shared by every length-aware reward.

Almost every public efficient-reasoning implementation counts the **whole completion in policy tokens**
(thinking and answer, EOS included when the generator emitted it); that is the default here
(`unit="tokens"`, `scope="total"`, i.e. `len(completion_ids)`). Two variants exist in the literature and are
user-visible options: characters (the open-r1 reimplementations) and the thinking part only (SABER). See
`methods.md`, "Cross-cutting implementation notes", note 3.

>>> meter = LengthMeter()  # tokens, whole completion
>>> meter("<think>a</think>42", [5, 6, 7, 8])
4
>>> LengthMeter(unit="chars", scope="answer")("<think>a</think>42", None)
2
"""

from __future__ import annotations

import array
import logging
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger(__name__)

__all__ = [
    "LENGTH_SCOPES",
    "LENGTH_UNITS",
    "NO_THINK_CLOSE_METRIC",
    "LengthMeter",
    "ThinkCloseMonitor",
    "completion_eos_token_ids",
    "completion_finished",
    "completion_text",
    "flat_ids",
    "split_thinking",
    "validate_length_options",
]

LENGTH_UNITS = ("tokens", "chars")
LENGTH_SCOPES = ("total", "thinking", "answer")

THINK_CLOSE = "</think>"


def completion_text(completion: Any) -> str:
    r"""
    Return the text of one completion, whether it is a plain string or a conversational message list.

    Conversational completions (`[{"role": "assistant", "content": ...}]`) are joined over all their messages'
    `content`; `None` or an empty list gives `""`.

    >>> completion_text("abc")
    'abc'
    >>> completion_text([{"role": "assistant", "content": "abc"}])
    'abc'
    >>> completion_text(None), completion_text([])
    ('', '')
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        content = completion.get("content")
        return content if isinstance(content, str) else ""
    parts = []
    for message in completion:
        if isinstance(message, dict):
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
        elif isinstance(message, str):
            parts.append(message)
    return "".join(parts)


def split_thinking(text: str, close_tag: str = THINK_CLOSE) -> tuple[str, str, bool]:
    r"""
    Split a completion at the **last** `close_tag` into `(thinking, answer, closed)`.

    `thinking` runs up to and including the last close tag (an opening `<think>`, if any, stays in it);
    `answer` is everything after it. Without a close tag the whole text is thinking, the answer is `""` and
    `closed` is `False` (a truncated or unformatted response).

    >>> split_thinking("<think>a</think>b</think>c")
    ('<think>a</think>b</think>', 'c', True)
    >>> split_thinking("still thinking")
    ('still thinking', '', False)
    """
    text = text or ""
    index = text.rfind(close_tag)
    if index < 0:
        return text, "", False
    end = index + len(close_tag)
    return text[:end], text[end:], True


NO_THINK_CLOSE_METRIC = "trl_efficient/no_think_close_fraction"


class ThinkCloseMonitor:
    r"""
    The one watch on a reward whose value depends on `</think>`: it logs, per reward call, the fraction of
    completions without `</think>` (TRL's `log_metric`, as `trl_efficient/no_think_close_fraction`) and warns
    **once per run** (per reward object) the first time no completion of a call has one.

    Why: such a reward gives every completion without `</think>` one fixed value (HBPO its format reward -1, DLER
    0 even for a right answer, SABER 0, LASER its format reward). A model that never writes `</think>` (a chat
    template or prompt that does not ask for it, a base model) or a cap that cuts every completion then gets the
    same reward for all its rollouts: zero advantage, no learning signal, and nothing said. A plain class, so the
    reward holding it still pickles.

    >>> monitor, logged = ThinkCloseMonitor("hbpo_reward", "format_reward=-1"), {}
    >>> monitor(["a</think>4", "no close", "still thinking", "b</think>5"], lambda k, v: logged.update({k: v}))
    0.5
    >>> logged
    {'trl_efficient/no_think_close_fraction': 0.5}
    >>> monitor.warned, monitor(["x", "y"]), monitor.warned  # no completion closes: one warning line, then silent
    (False, 1.0, True)
    """

    def __init__(self, owner: str, consequence: str, close_tag: str = THINK_CLOSE) -> None:
        self.owner = owner  # the reward's __name__
        self.consequence = consequence  # what a completion without the tag gets, e.g. "format_reward=-1.0"
        self.close_tag = close_tag
        self.warned = False

    def __call__(self, texts: Sequence[str], log_metric: Callable[[str, float], None] | None = None) -> float:
        """Fraction of `texts` without the close tag (0 for none); logged when `log_metric` is TRL's callable."""
        if not texts:
            return 0.0
        missing = sum(self.close_tag not in (text or "") for text in texts) / len(texts)
        if callable(log_metric):
            log_metric(NO_THINK_CLOSE_METRIC, missing)
        if missing == 1.0 and not self.warned:
            self.warned = True
            logger.warning(
                "%s: none of the %d completions of this batch contains %s, so each gets %s, the same for all: no "
                "learning signal. The model may never write %s (check the chat template and the prompt) or every "
                "completion was cut at max_completion_length; %s logs the fraction per step. Warned once per run.",
                self.owner, len(texts), self.close_tag, self.consequence, self.close_tag, NO_THINK_CLOSE_METRIC,
            )  # fmt: skip
        return missing


def validate_length_options(unit: str, scope: str) -> None:
    """
    Raise a `ValueError` naming the field and the choices when `unit` or `scope` is not supported.

    >>> validate_length_options("tokens", "total")
    >>> validate_length_options("words", "total")
    Traceback (most recent call last):
    ...
    ValueError: length_unit must be one of ('tokens', 'chars'), got 'words'.
    """
    if unit not in LENGTH_UNITS:
        raise ValueError(f"length_unit must be one of {LENGTH_UNITS}, got {unit!r}.")
    if scope not in LENGTH_SCOPES:
        raise ValueError(f"length_scope must be one of {LENGTH_SCOPES}, got {scope!r}.")


def flat_ids(ids_list: list[list[int]]) -> Any:
    """All rows' ids in one int64 array: each Python list copied by `array.fromlist` (a C loop), about 20% faster
    than `numpy.fromiter` over the chained lists; this copy is most of the per-token cost of counting on the ids
    TRL passes as lists."""
    import numpy as np

    buffer = array.array("q")
    for ids in ids_list:
        buffer.fromlist(ids if isinstance(ids, list) else list(ids))
    return np.frombuffer(buffer, dtype=np.int64)


class LengthMeter:
    r"""
    Measures one completion's length in the configured unit and scope.

    Args:
        unit (`str`, *optional*, defaults to `"tokens"`):
            `"tokens"` (policy tokens, from `completion_ids`) or `"chars"` (characters of the decoded text).
        scope (`str`, *optional*, defaults to `"total"`):
            `"total"` (whole completion), `"thinking"` (up to and including the last `</think>`) or `"answer"`
            (after the last `</think>`). Without a `</think>` the whole completion counts as thinking and the
            answer is empty (length 0).
        tokenizer (*optional*):
            The policy tokenizer. Required for `unit="tokens"` with scope `"thinking"` or `"answer"`: the meter
            then finds the exact token boundary of the last `</think>` inside `completion_ids` by binary search
            over `tokenizer.decode(ids[:k])`. The thinking part is the first `k` tokens (the close tag's tokens
            included) and the answer is the remaining `len(ids) - k` tokens, **including a trailing EOS** if the
            generator emitted one (it belongs to the completion as TRL measures it). The trainer passes its
            `processing_class`.
        close_tag (`str`, *optional*, defaults to `"</think>"`): The string that closes the thinking part.

    Calling `meter(text, ids)` returns an `int`. `ids` may be `None` only for `unit="chars"`.

    >>> LengthMeter(unit="chars")("<think>ab</think>c", None)
    18
    >>> LengthMeter(unit="chars", scope="thinking")("<think>ab</think>c", None)
    17
    >>> LengthMeter(scope="thinking")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: length_unit='tokens' with length_scope='thinking' needs the policy tokenizer: pass tokenizer=...
    """

    def __init__(
        self, unit: str = "tokens", scope: str = "total", tokenizer: Any = None, close_tag: str = THINK_CLOSE
    ) -> None:
        validate_length_options(unit, scope)
        if unit == "tokens" and scope != "total" and tokenizer is None:
            raise ValueError(
                f"length_unit={unit!r} with length_scope={scope!r} needs the policy tokenizer: pass tokenizer=... "
                "(EfficientGRPOTrainer passes its processing_class)."
            )
        if not close_tag:
            raise ValueError(f"close_tag must be a non-empty string, got {close_tag!r}.")
        self.unit = unit
        self.scope = scope
        self.tokenizer = tokenizer
        self.close_tag = close_tag

    def __repr__(self) -> str:
        return f"LengthMeter(unit={self.unit!r}, scope={self.scope!r})"

    def __call__(self, text: str, ids: list[int] | None) -> int:
        if self.unit == "chars":
            if self.scope == "total":
                return len(text or "")
            thinking, answer, _ = split_thinking(text or "", self.close_tag)
            return len(thinking) if self.scope == "thinking" else len(answer)
        if ids is None:
            raise ValueError("length_unit='tokens' needs completion_ids (TRL passes them to every reward function).")
        n = len(ids)
        if self.scope == "total":
            return n
        k = self.thinking_tokens(ids)
        return k if self.scope == "thinking" else n - k

    def thinking_tokens(self, ids: list[int]) -> int:
        """Number of leading tokens of `ids` up to and including the last close tag (`len(ids)` if none)."""
        ids = ids if isinstance(ids, list) else list(ids)
        n = len(ids)
        if n == 0:
            return 0
        fast = self._thinking_tokens_from_pieces(ids)
        if fast is not None:
            return fast
        return self._thinking_tokens_by_decoding(ids)

    # A byte-level BPE decoder (GPT-2, Qwen, Llama 3 tokenizers) decodes a sequence to the UTF-8 decoding of its
    # tokens' bytes joined; when every token's bytes are valid UTF-8 on their own, that is the join of the tokens
    # decoded one by one. The thinking part is then found on the ids with a table of those pieces (built once per
    # meter), without decoding: the text is the join, the last tag is `rfind`, and the token completing it is the
    # first whose cumulative length reaches the tag's end. It gives exactly what the decoding search gives
    # (`tests/rewards/test_lengths.py` compares both on varied ids), and falls back to it for a token that is not
    # valid UTF-8 alone (part of a multi-byte character), an id outside the table, or a tag that can overlap itself.
    def _pieces(self) -> tuple[list, list[int]] | None:
        if getattr(self, "_piece_table", None) is None:
            self._piece_table = False
            backend = getattr(self.tokenizer, "backend_tokenizer", None)
            decoder = getattr(backend, "decoder", None)
            tag = self.close_tag
            border_free = all(tag[:i] != tag[-i:] for i in range(1, len(tag)))  # occurrences cannot overlap
            if decoder is not None and type(decoder).__name__ == "ByteLevel" and border_free:
                pieces = [backend.decode([i], skip_special_tokens=False) for i in range(backend.get_vocab_size())]
                pieces = [None if "\ufffd" in piece else piece for piece in pieces]  # not valid UTF-8 alone
                self._piece_table = (pieces, [0 if piece is None else len(piece) for piece in pieces])
        return self._piece_table or None

    def _plain_table(self) -> tuple[list, Any] | None:
        """The byte-level pieces with special tokens skipped (as TRL decodes completions) and their lengths as an
        array (-1 for a piece that is not text alone), built once; `None` where the piece table does not apply."""
        table = self._pieces()
        if table is None:
            return None
        if getattr(self, "_plain", None) is None:
            import numpy as np

            plain = list(table[0])
            for special in getattr(self.tokenizer, "all_special_ids", ()):
                if 0 <= special < len(plain):
                    plain[special] = ""
            self._plain = (plain, np.array([-1 if p is None else len(p) for p in plain], dtype=np.int64))
        return self._plain

    def token_text(self, ids: list[int]) -> str | None:
        r"""
        The text of `ids` with special tokens skipped (as TRL decodes completions), read from the meter's table of
        byte-level pieces without decoding (a join of precomputed pieces: no per-token Python work); `None` where the
        table does not apply (not a byte-level BPE tokenizer, a token that is not valid UTF-8 alone, an id outside
        the vocabulary). `overlapping_tokens` counts the tokens under spans of it.
        """
        table = self._plain_table()
        if table is None:
            return None
        try:
            return "".join(map(table[0].__getitem__, ids))
        except (TypeError, IndexError):
            return None

    def overlapping_tokens(
        self, ids_list: list[list[int]], texts: list[str], spans_list: list[list[tuple[int, int]]]
    ) -> list[list[int] | None]:
        r"""
        For each row, how many of its tokens `ids_list[r]` overlap each span `(a, b)` of `spans_list[r]`, spans of
        the row's text `texts[r]`, for a whole batch in a few vectorised passes (no per-token Python work). The text
        must be the ids' text with special tokens skipped (`token_text`; TRL decodes a completion so); a row whose
        text does not have that length (an assistant prefix, a tokenizer's clean-up of spaces), that holds a piece
        that is not text alone or an id outside the vocabulary, or any row when the table does not apply (not a
        byte-level BPE tokenizer), gets `None`.

        With the ends $E$ of the non-empty tokens in order, the tokens overlapping $[a, b)$ run from the first with
        $E > a$ to the first with $E \ge b$: $1 + \#\{E < b\} - \#\{E \le a\}$.
        """
        import numpy as np

        rows = len(ids_list)
        table = self._plain_table()
        if table is None or rows == 0:
            return [None] * rows
        plain = table[1]
        counts = [len(ids) for ids in ids_list]
        flat = flat_ids(ids_list)
        bounds = np.concatenate(([0], np.cumsum(counts)))  # row r's tokens are flat[bounds[r]:bounds[r + 1]]
        if flat.size and 0 <= flat.min() and flat.max() < len(plain):  # two reductions instead of a mask
            lengths = plain[flat]
            broken = lengths < 0
        else:
            outside = (flat < 0) | (flat >= len(plain))
            lengths = plain[np.where(outside, 0, flat)]
            broken = outside | (lengths < 0)
        unusable = np.concatenate(([0], np.cumsum(broken)))[bounds].tolist()  # per row: a step where a row is broken
        lengths = np.maximum(lengths, 0)
        running = np.cumsum(lengths)
        chars = np.concatenate(([0], running))[bounds].tolist()  # text offset of each row's start
        token_ends = running[lengths > 0]
        ok, starts, stops, owners = [], [], [], []
        for r in range(rows):
            base = chars[r]
            row_ok = unusable[r + 1] == unusable[r] and chars[r + 1] - base == len(texts[r])
            ok.append(row_ok)
            if row_ok:
                for a, b in spans_list[r]:
                    starts.append(base + a)
                    stops.append(base + b)
                    owners.append(r)
        overlap = (
            1 + np.searchsorted(token_ends, stops, side="left") - np.searchsorted(token_ends, starts, side="right")
        ).tolist()
        out: list[list[int] | None] = [[] if row_ok else None for row_ok in ok]
        for r, n in zip(owners, overlap):
            out[r].append(n)
        return out

    def _thinking_tokens_from_pieces(self, ids: list[int]) -> int | None:
        # Every occurrence of the tag ends inside a token whose piece can end it (`_tag_suspects`), so the ids are
        # scanned from the end for such tokens (a set lookup each); at each, the few preceding pieces that an
        # occurrence ending there can span are joined and searched. The first hit from the end completes the last
        # tag (occurrences cannot overlap, so the last to end is the last to start). A piece that is not text alone
        # is a suspect too and sends the whole completion to the decoding search (`None`).
        table = self._pieces()
        if table is None:
            return None
        pieces, lengths = table
        suspects = self._tag_suspects()
        tag, width = self.close_tag, len(self.close_tag)
        try:
            for pos in range(len(ids) - 1, -1, -1):
                if ids[pos] not in suspects:
                    continue
                last = pieces[ids[pos]]
                start, have, need = pos, len(last), len(last) + width - 1
                while start > 0 and have < need:
                    start -= 1
                    have += lengths[ids[start]]
                window = "".join(map(pieces.__getitem__, ids[start : pos + 1]))
                index = window.rfind(tag)
                if index >= 0 and index + width > len(window) - len(last):
                    return pos + 1
        except (TypeError, IndexError):  # a piece that is not text alone, or an id beyond the table
            return None
        return len(ids)

    def _tag_suspects(self) -> frozenset:
        """Ids whose piece can end an occurrence of the close tag (at some character of the piece, the piece's text
        up to there ends with the tag, or is a suffix of it: the tag's start lies in earlier tokens), or is not
        text alone (`None`). `"<|im_end|>"` ends in `>` but cannot end `"</think>"`."""
        if getattr(self, "_suspects", None) is None:
            tag = self.close_tag

            def can_end(piece: str) -> bool:
                return any(piece[: p + 1].endswith(tag) or tag.endswith(piece[: p + 1]) for p in range(len(piece)))

            pieces = self._pieces()[0]
            self._suspects = frozenset(i for i, piece in enumerate(pieces) if piece is None or can_end(piece))
        return self._suspects

    def _thinking_tokens_by_decoding(self, ids: list[int]) -> int:
        n = len(ids)
        tag = self.close_tag

        # The fast tokenizer's Rust backend decodes without transformers' per-element type checks (most of the
        # cost on long completions); counting a tag is unaffected by the wrapper's whitespace clean-up.
        backend = getattr(self.tokenizer, "backend_tokenizer", None)

        def decode(k: int) -> str:
            if backend is not None:
                return backend.decode(ids[:k], skip_special_tokens=False)
            return self.tokenizer.decode(ids[:k], skip_special_tokens=False)

        total = decode(n).count(tag)
        if total == 0:
            return n
        # Fast path: when the tag's own token ids occur in `ids` (e.g. a special token such as Qwen's `</think>`),
        # the answer is the end of their last occurrence if that prefix holds every tag and one token less does not
        # (two decodes instead of O(log n)); otherwise the binary search below decides.
        tag_ids = self._tag_ids()
        width = len(tag_ids)
        for start in range(n - width, -1, -1) if width else ():
            if ids[start : start + width] == tag_ids:
                end = start + width
                if decode(end).count(tag) >= total > decode(end - 1).count(tag):
                    return end
                break
        return self._smallest_prefix_with(decode, tag, total, lo=1, hi=n)

    def _tag_ids(self) -> list[int]:
        if getattr(self, "_tag_ids_cache", None) is None:
            self._tag_ids_cache = list(self.tokenizer.encode(self.close_tag, add_special_tokens=False))
        return self._tag_ids_cache

    @staticmethod
    def _smallest_prefix_with(decode, tag: str, total: int, lo: int, hi: int) -> int:
        # Smallest k whose decoded prefix already holds every close tag of the full completion, i.e. the token
        # that completes the LAST tag. The count is monotone in k, so a binary search needs O(log n) decodes.
        while lo < hi:
            mid = (lo + hi) // 2
            if decode(mid).count(tag) >= total:
                hi = mid
            else:
                lo = mid + 1
        return lo


def completion_finished(ids, eos_ids) -> bool:
    """Whether a completion finished within its limit: its last id is one of the ids generation stops on
    (`eos_ids`, the trainer's `eos_token_ids`; TRL 1.16 keeps that id last). A completion cut by
    `max_completion_length`, a rollout plan's hard cap or budget forcing's cap did not. The one rule behind the reward
    keyword `finished` that `EfficientGRPOTrainer` passes every reward, `GroupBatch.truncated` (its negation) and DLER's
    stop check (docs/adding-a-method.md, "Component contracts").

    >>> completion_finished([5, 2], {2, 7}), completion_finished([5, 5], {2, 7}), completion_finished([], {2})
    (True, False, False)
    """
    return len(ids) > 0 and ids[-1] in eos_ids


def completion_eos_token_ids(generation_config, tokenizer) -> list[int]:
    """The ids that end a completion, by TRL 1.16's rule (`GRPOTrainer.__init__`, `self.eos_token_ids`): every id of
    the model's `generation_config.eos_token_id` (None, an int or a list; chat models often declare an end-of-turn
    and an end-of-text token), with the tokenizer's `eos_token_id` in front when it is not among them. Generation
    stops on any of them, and TRL counts a completion whose last id is one of them as not truncated.
    `generation_config` may be None (then only the tokenizer's id).

    >>> from types import SimpleNamespace as NS
    >>> completion_eos_token_ids(NS(eos_token_id=[7, 9]), NS(eos_token_id=2))
    [2, 7, 9]
    >>> tok = NS(eos_token_id=2)
    >>> completion_eos_token_ids(NS(eos_token_id=2), tok), completion_eos_token_ids(None, tok)
    ([2], [2])
    """
    ids = getattr(generation_config, "eos_token_id", None)
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is not None and eos not in ids:
        ids = [eos, *ids]
    return ids
