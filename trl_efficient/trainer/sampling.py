"""Prompt samplers: which prompts each generation batch trains on (`EfficientGRPOConfig.prompt_sampler`).

TRL's `GRPOTrainer._get_train_sampler` (TRL 1.16.0) returns a `RepeatSampler`: one seeded permutation of the dataset
per epoch, cut into chunks of `batch_size = generation_batch_size // num_generations` prompts (a last partial chunk is
dropped), each prompt index repeated `mini_repeat_count = num_generations` times consecutively and each chunk repeated
`repeat_count = num_iterations * steps_per_generation` times. A `PromptSampler` keeps exactly that layout and that
length, and only changes *which* prompts form the next chunk (`choose` / `draw_chunk`), so it composes with TRL's
generation buffering and with several processes (accelerate shards the index stream; every rank iterates the whole
sampler).

Contracts (see `trainer/state.py`):
- identical on every rank: the order is seeded, and the state changes only in `update(batch)`, called by the trainer
  with the **gathered** batch in training, so all ranks hold the same state when they draw the next chunk;
- exact resume: the state (`state_dict`) holds the stream position and the chunks drawn in the current epoch. On
  resume, HF `Trainer` iterates the sampler again from the epoch's start and skips the batches already trained, so
  `__iter__` first **replays** the recorded chunks of the epoch, then continues live;
- chunks are drawn lazily, when the dataloader asks for the chunk's first index (with accelerate's one-batch look-ahead,
  one step before that chunk's generation), so a chunk sees the `update`s of the batches generated before that point.

Register a sampler with `PROMPT_SAMPLERS.register(name)(cls)`; `cls(data_source, mini_repeat_count=..., batch_size=...,
repeat_count=..., shuffle=..., seed=..., args=..., **sampler_kwargs)`, and `cls.check(args, **sampler_kwargs)` validates
the settings at config time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch.utils.data import Sampler

from ..core.registry import Registry
from ..core.state import StatefulComponent
from .filters import zero_std_filter
from .group import GroupBatch

PROMPT_SAMPLERS: Registry[type] = Registry("prompt sampler")

LSPO_LOW = 0.3  # proposed default (methods.md §20: quantiles not published)
LSPO_HIGH = 0.7  # proposed default
LSPO_MAX_RATIO = 0.95  # proposed default: L_max = 0.95 * max_completion_length
FRUGAL_ALPHA = 0.0  # [paper] uniform over the kept problems; alpha > 0 (option) weights w(p) = 1 + alpha * p


def _dataset_column(data_source, column: str, sampler: str) -> list:
    names = getattr(data_source, "column_names", None)
    if names is None or column not in names:
        raise ValueError(
            f"prompt_sampler={sampler!r} needs a {column!r} column in train_dataset, which has only {names}."
            + (" Add it with `dataset.map(lambda _, i: {'idx': i}, with_indices=True)`." if column == "idx" else "")
        )
    return list(data_source[column])


class PromptSampler(Sampler[int], StatefulComponent):
    """TRL's `RepeatSampler` layout over a stream of chunks; subclasses choose the chunks.

    The stream walks seeded permutations ("passes") of the dataset: pass `p` is the `(p+1)`-th `torch.randperm` of a
    generator seeded with `seed`, exactly TRL's epoch-`p` permutation. `choose(remaining)` picks `batch_size` positions
    of what is left of the current pass (in pass order); everything before the last pick is consumed; when fewer than
    `batch_size` prompts are left the pass ends (the rest dropped, as TRL drops a partial chunk) and the next begins.
    The base class picks the first `batch_size`, so it yields exactly TRL's `RepeatSampler` sequence.

    >>> s = PromptSampler(list(range(5)), mini_repeat_count=2, batch_size=2, repeat_count=1, shuffle=False, seed=0)
    >>> list(s), len(s)
    ([0, 0, 1, 1, 2, 2, 3, 3], 8)
    >>> s.state_dict()["epoch_chunks"]
    [[0, 1], [2, 3]]
    """

    state_key = "prompt_sampler"

    def __init__(
        self,
        data_source,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        shuffle: bool = True,
        seed: int | None = None,
        args=None,
    ) -> None:
        self.data_source = data_source
        self.mini_repeat_count = int(mini_repeat_count)
        self.batch_size = int(batch_size)
        self.repeat_count = int(repeat_count)
        self.num_samples = len(data_source)
        self.shuffle = bool(shuffle)
        if self.num_samples < self.batch_size:
            raise ValueError(
                f"train_dataset has {self.num_samples} prompts, fewer than one generation batch "
                f"({self.batch_size} prompts = generation_batch_size // num_generations)."
            )
        # an unseeded TRL sampler draws a fresh seed; ours draws it once and keeps it in the state (exact resume)
        self.seed = int(seed) if seed is not None else int(torch.randint(0, 2**31 - 1, (1,)).item())
        self.epoch = 0
        self.epoch_chunks: list[list[int]] = []
        self.pass_index = 0
        self.offset = 0
        self.chunks_drawn = 0
        self._generator: torch.Generator | None = None
        self._perm_pass = -1
        self._perm: list[int] = []

    @classmethod
    def check(cls, args=None, **kwargs) -> None:
        """Validate the sampler's settings (`sampler_kwargs`) at config time; the base class takes none."""
        if kwargs:
            raise ValueError(f"sampler_kwargs {sorted(kwargs)} given, but prompt sampler {cls.__name__} takes none.")

    # ---------------------------------------------------------------------------------------------- the stream
    @property
    def chunks_per_epoch(self) -> int:
        return self.num_samples // self.batch_size

    def __len__(self) -> int:  # RepeatSampler.__len__
        return self.chunks_per_epoch * self.batch_size * self.mini_repeat_count * self.repeat_count

    def _pass_permutation(self, p: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.num_samples))
        if self._generator is None or self._perm_pass > p:
            self._generator = torch.Generator()
            self._generator.manual_seed(self.seed)
            self._perm_pass = -1
        while self._perm_pass < p:
            self._perm = torch.randperm(self.num_samples, generator=self._generator).tolist()
            self._perm_pass += 1
        return self._perm

    def choose(self, remaining: list[int]) -> list[int]:
        """Positions (increasing) of `batch_size` prompts in `remaining` (dataset indices left in the pass, in
        order, at least `batch_size` of them). Base class: the first `batch_size`, TRL's order."""
        return list(range(self.batch_size))

    def draw_chunk(self) -> list[int]:
        """The next chunk of `batch_size` dataset indices from the stream."""
        while True:
            remaining = self._pass_permutation(self.pass_index)[self.offset :]
            if len(remaining) < self.batch_size:
                self.pass_index, self.offset = self.pass_index + 1, 0
                continue
            picks = self.choose(remaining)
            self.offset += picks[-1] + 1
            return [remaining[p] for p in picks]

    def _expand(self, chunk: list[int]) -> Iterator[int]:
        for _ in range(self.repeat_count):
            for index in chunk:
                for _ in range(self.mini_repeat_count):
                    yield index

    def set_epoch(self, epoch: int) -> None:
        """Called by HF `Trainer` before each epoch: a new epoch forgets the previous epoch's record."""
        if int(epoch) != self.epoch:
            self.epoch, self.epoch_chunks = int(epoch), []

    def __iter__(self) -> Iterator[int]:
        if len(self.epoch_chunks) >= self.chunks_per_epoch:  # previous epoch complete (no set_epoch call)
            self.epoch, self.epoch_chunks = self.epoch + 1, []
        for chunk in list(self.epoch_chunks):  # resume: replay what this epoch already drew
            yield from self._expand(chunk)
        while len(self.epoch_chunks) < self.chunks_per_epoch:
            chunk = [int(i) for i in self.draw_chunk()]
            self.chunks_drawn += 1
            self.epoch_chunks.append(chunk)
            yield from self._expand(chunk)

    # ---------------------------------------------------------------------------------------------- state
    def update(self, batch: GroupBatch) -> None:
        """Called in training with every gathered batch; the base class keeps no statistics."""

    def state_dict(self) -> dict:
        return {
            "seed": self.seed,
            "epoch": self.epoch,
            "epoch_chunks": [list(c) for c in self.epoch_chunks],
            "pass_index": self.pass_index,
            "offset": self.offset,
            "chunks_drawn": self.chunks_drawn,
        }

    def load_state_dict(self, state: dict) -> None:
        self.seed = int(state.get("seed", self.seed))
        self.epoch = int(state.get("epoch", 0))
        self.epoch_chunks = [[int(i) for i in c] for c in state.get("epoch_chunks", [])]
        self.pass_index = int(state.get("pass_index", 0))
        self.offset = int(state.get("offset", 0))
        self.chunks_drawn = int(state.get("chunks_drawn", 0))
        self._generator, self._perm_pass = None, -1


PROMPT_SAMPLERS.register("repeat", PromptSampler)


def quantile(values: list[float], q: float) -> float:
    """Empirical quantile with linear interpolation between order statistics (`numpy.quantile`'s default):
    with sorted values `v_0 <= ... <= v_{n-1}`, `h = q (n - 1)`, `Q(q) = v_{floor h} + (h - floor h)(v_{floor h + 1} -
    v_{floor h})`.

    >>> quantile([10, 20, 30, 40, 50], 0.3)  # h = 1.2: 20 + 0.2 * 10
    22.0
    """
    v = sorted(float(x) for x in values)
    h = q * (len(v) - 1)
    lo = math.floor(h)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])


@PROMPT_SAMPLERS.register("lspo")
class LSPOSampler(PromptSampler):
    r"""LSPO's length-aware prompt selection (arXiv 2510.01459; methods.md §20), as a sampler.

    The sampler keeps, per prompt (`idx` column), the mean response length $L(q) = \frac{1}{G}\sum_i |o_i|$ of its
    latest group (from the gathered batch in `update`). When it draws a chunk it skips the prompts with
    $Q(L_{low}) < L(q) < Q(L_{high})$ or $L(q) > L_{max}$, i.e. it keeps

    $$L(q) \le Q(L_{low}) \quad\text{or}\quad Q(L_{high}) \le L(q) \le L_{max},$$

    with $Q$ the empirical quantiles (`quantile`, linear interpolation) of the known lengths of all prompts seen so
    far. Prompts never seen are always eligible. Skipped prompts are consumed for the current pass over the data
    (they come back in the next pass). If fewer than `batch_size` eligible prompts are left in the pass, the chunk is
    filled with the skipped ones in pass order (documented choice; the paper resamples until the batch is full,
    which TRL cannot do). With no history it yields exactly TRL's `RepeatSampler` sequence.

    Zero-variance groups. LSPO first drops the groups whose rewards are all equal (DAPO dynamic sampling) and only
    then computes $L(q)$ and the length quantiles over the groups left (arXiv 2510.01459, the LSPO method: the
    length filter is applied after the accuracy-based filter). So does `update`: a group that `zero_std_filter`
    drops (the same rule as the recipe's `completion_filter: zero_std`, which masks those rows out of the loss; TRL
    cannot resample) gives no length, and its prompt's earlier record is removed, so it neither counts in the
    quantiles nor is skipped for its length (it is unseen again: always eligible, as the paper generates every
    sampled prompt before filtering).

    Args:
        low, high: quantile levels $L_{low}$, $L_{high}$ (proposed defaults 0.3 / 0.7; the paper does not publish them).
        l_max: $L_{max}$ in tokens; `None` -> `l_max_ratio * args.max_completion_length` (proposed default 0.95,
            to exclude mostly-truncated groups), or no cap without `args`.

    Which lengths: the latest group mean per prompt (the current policy) with non-zero reward variance; the quantiles
    are over all such prompts known so far rather than over one batch, since a sampler decides before generating
    (documented choice).
    """

    needs_columns = ("idx",)

    def __init__(
        self,
        data_source,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        shuffle: bool = True,
        seed: int | None = None,
        args=None,
        low: float = LSPO_LOW,
        high: float = LSPO_HIGH,
        l_max: float | None = None,
        l_max_ratio: float = LSPO_MAX_RATIO,
    ) -> None:
        super().__init__(data_source, mini_repeat_count, batch_size, repeat_count, shuffle, seed, args)
        self.check(args, low=low, high=high, l_max=l_max, l_max_ratio=l_max_ratio)
        self.low, self.high = float(low), float(high)
        cap = getattr(args, "max_completion_length", None)
        if l_max is not None:
            self.l_max = float(l_max)
        else:
            self.l_max = float(l_max_ratio) * cap if cap else math.inf
        self.ids = [int(i) for i in _dataset_column(data_source, "idx", "lspo")]
        self.lengths: dict[int, float] = {}

    @classmethod
    def check(cls, args=None, low=LSPO_LOW, high=LSPO_HIGH, l_max=None, l_max_ratio=LSPO_MAX_RATIO) -> None:
        if not 0.0 <= float(low) <= float(high) <= 1.0:
            raise ValueError(f"sampler_kwargs low/high must satisfy 0 <= low <= high <= 1, got {low}, {high}.")
        if l_max is not None and float(l_max) <= 0:
            raise ValueError(f"sampler_kwargs l_max must be a positive length in tokens, got {l_max}.")
        if float(l_max_ratio) <= 0:
            raise ValueError(f"sampler_kwargs l_max_ratio must be positive, got {l_max_ratio}.")

    def thresholds(self) -> tuple[float, float] | None:
        """`(Q(L_low), Q(L_high))` of the known lengths, or `None` before any prompt was seen."""
        if not self.lengths:
            return None
        known = list(self.lengths.values())
        return quantile(known, self.low), quantile(known, self.high)

    def eligible(self, idx: int, bounds: tuple[float, float] | None) -> bool:
        """Whether prompt `idx` (its `idx` column value) may be drawn under the thresholds `bounds`."""
        length = self.lengths.get(int(idx))
        if length is None or bounds is None:
            return True  # unseen prompts are always eligible
        q_low, q_high = bounds
        return not (q_low < length < q_high or length > self.l_max)

    def choose(self, remaining: list[int]) -> list[int]:
        bounds = self.thresholds()
        ok = [self.eligible(self.ids[i], bounds) for i in remaining]
        picks = [p for p, e in enumerate(ok) if e][: self.batch_size]
        if len(picks) < self.batch_size:  # too few eligible left in this pass: fill with skipped ones, in order
            picks += [p for p, e in enumerate(ok) if not e][: self.batch_size - len(picks)]
        return sorted(picks)

    def update(self, batch: GroupBatch) -> None:
        if "idx" not in batch.metadata:
            raise ValueError("prompt_sampler='lspo' needs the `idx` column in the gathered batch metadata.")
        keep = zero_std_filter(batch).tolist()  # False on every row of a zero-variance group
        sums: dict[int, list[float]] = {}
        for idx, length, kept in zip(batch.metadata["idx"], batch.lengths.tolist(), keep, strict=True):
            if not kept:  # dropped before L(q) and the quantiles (the paper): forget the prompt's length
                self.lengths.pop(int(idx), None)
                continue
            acc = sums.setdefault(int(idx), [0.0, 0])
            acc[0] += float(length)
            acc[1] += 1
        for idx, (total, count) in sums.items():
            self.lengths[idx] = total / count

    def state_dict(self) -> dict:
        return {**super().state_dict(), "lengths": {str(k): v for k, v in self.lengths.items()}}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.lengths = {int(k): float(v) for k, v in state.get("lengths", {}).items()}


def frugal_weight(p: float, alpha: float = FRUGAL_ALPHA) -> float:
    r"""Sampling weight of a problem with base-model pass rate $p$: $w(p) = 1 + \alpha p$ for $p < 1$, $0$ for
    $p \ge 1$ (problems the base model always solves are out, arXiv 2511.01937 Stage 1). $\alpha = 0$ (default) is
    the paper's uniform sampling over the kept problems; $\alpha > 0$ is an option of ours (not in the paper) that
    draws moderately easy problems more often ($\alpha = 1$: up to twice as often as never-solved ones).

    >>> [frugal_weight(p) for p in (0.0, 0.25, 0.9375, 1.0)]
    [1.0, 1.0, 1.0, 0.0]
    >>> [frugal_weight(p, alpha=1.0) for p in (0.0, 0.25, 0.9375, 1.0)]
    [1.0, 1.25, 1.9375, 0.0]
    """
    p = float(p)
    if p != p or not 0.0 <= p <= 1.0:
        raise ValueError(f"pass_rate must be in [0, 1], got {p}.")
    return 0.0 if p >= 1.0 else 1.0 + float(alpha) * p


@PROMPT_SAMPLERS.register("frugal")
class FrugalSampler(PromptSampler):
    r"""Frugal-Thinking's data mix as a sampler (arXiv 2511.01937; methods.md §30): prompts whose `pass_rate` column
    (the base model's estimated pass rate, `trl_efficient.methods.frugal.estimate_pass_rate`) is 1 are never drawn.

    - `alpha = 0` (default, the paper): **uniform** over the kept problems ($p < 1$). The paper's Stage 1 samples its
      kept set uniformly; the released run (MBZUAI-Paris/Frugal-Thinking `7348824b`,
      `src/train/verl_0.4/slurm_xp/informal_maths/stage_1/q3_4b_it_math_xp.slurm`: `SHUFFLE=true`,
      `data.shuffle=$SHUFFLE`) reads it with verl's shuffled dataloader, one random permutation per epoch. So do we:
      TRL's seeded permutation of each pass (`PromptSampler`), skipping the rows with $p = 1$; when the dataset holds
      only kept problems (the `frugal` recipe's `prepare_dataset` filters them) the sequence is exactly TRL's
      `RepeatSampler`'s.
    - `alpha > 0` (option, not in the paper): every chunk draws `batch_size` distinct prompts with probability
      proportional to $w(p) = 1 + \alpha p$ (`frugal_weight`), without replacement inside a chunk and independently
      across chunks; chunk $k$ uses a generator seeded with `seed + k` (`k` = chunks drawn so far, in the state), so
      the draws are identical on every rank and resume exactly.

    Args:
        alpha: $\alpha$ in $w(p) = 1 + \alpha p$, >= 0 (default 0: uniform, the paper).

    >>> from datasets import Dataset
    >>> s = FrugalSampler(Dataset.from_dict({"pass_rate": [0.0, 1.0, 0.5, 0.25, 0.75]}), 2, batch_size=2, seed=0,
    ...                   shuffle=False)
    >>> len(s), s.weights.tolist(), list(s)  # 5 // 2 = 2 chunks of 2 prompts x 2 repeats; row 1 (p = 1) skipped
    (8, [1.0, 0.0, 1.0, 1.0, 1.0], [0, 0, 2, 2, 3, 3, 4, 4])
    """

    needs_columns = ("pass_rate",)

    def __init__(
        self,
        data_source,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        shuffle: bool = True,
        seed: int | None = None,
        args=None,
        alpha: float = FRUGAL_ALPHA,
    ) -> None:
        super().__init__(data_source, mini_repeat_count, batch_size, repeat_count, shuffle, seed, args)
        self.check(args, alpha=alpha)
        self.alpha = float(alpha)
        rates = _dataset_column(data_source, "pass_rate", "frugal")
        self.weights = torch.tensor([frugal_weight(p, self.alpha) for p in rates], dtype=torch.float64)
        positive = int((self.weights > 0).sum())
        if positive < self.batch_size:
            raise ValueError(
                f"prompt_sampler='frugal': only {positive} prompts have pass_rate < 1, fewer than one generation batch "
                f"({self.batch_size} prompts); filter with prepare_dataset or use a smaller generation batch."
            )

    @classmethod
    def check(cls, args=None, alpha=FRUGAL_ALPHA) -> None:
        if float(alpha) < 0:
            raise ValueError(f"sampler_kwargs alpha must be >= 0 (w = 1 + alpha * pass_rate), got {alpha}.")

    def draw_chunk(self) -> list[int]:
        if self.alpha > 0:  # option: weighted, independent chunks
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.chunks_drawn)
            return torch.multinomial(self.weights, self.batch_size, replacement=False, generator=generator).tolist()
        # uniform (the paper): the next batch_size kept prompts of the pass's permutation
        while True:
            remaining = self._pass_permutation(self.pass_index)[self.offset :]
            kept = [pos for pos, index in enumerate(remaining) if self.weights[index] > 0]
            if len(kept) < self.batch_size:  # the pass is spent (a partial chunk dropped, as TRL does)
                self.pass_index, self.offset = self.pass_index + 1, 0
                continue
            picks = kept[: self.batch_size]
            self.offset += picks[-1] + 1
            return [remaining[pos] for pos in picks]


def build_prompt_sampler(args, dataset, **layout) -> PromptSampler | None:
    """The sampler named by `args.prompt_sampler` over `dataset`, with TRL's layout (`mini_repeat_count`,
    `batch_size`, `repeat_count`, `shuffle`, `seed`) and `args.sampler_kwargs`; `None` when unset."""
    name = getattr(args, "prompt_sampler", None)
    if name is None:
        return None
    if dataset is None or not hasattr(dataset, "__len__"):
        raise ValueError(f"prompt_sampler={name!r} needs a map-style train_dataset (with a length).")
    return PROMPT_SAMPLERS.get(name)(dataset, args=args, **layout, **dict(getattr(args, "sampler_kwargs", None) or {}))
