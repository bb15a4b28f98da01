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

The method samplers live with their methods and register here when `trl_efficient.methods` is imported: `lspo`
(`methods/lspo.py`) and `frugal` (`methods/frugal.py`). Register a sampler with `PROMPT_SAMPLERS.register(name)(cls)`;
`cls(data_source, mini_repeat_count=..., batch_size=..., repeat_count=..., shuffle=..., seed=..., args=...,
**sampler_kwargs)`, and `cls.check(args, **sampler_kwargs)` validates the settings at config time.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler

from ..core.registry import Registry
from ..core.state import StatefulComponent
from .group import GroupBatch

PROMPT_SAMPLERS: Registry[type] = Registry("prompt sampler", providers=("trl_efficient.methods",))


def dataset_column(data_source, column: str, sampler: str) -> list:
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


def build_prompt_sampler(args, dataset, **layout) -> PromptSampler | None:
    """The sampler named by `args.prompt_sampler` over `dataset`, with TRL's layout (`mini_repeat_count`,
    `batch_size`, `repeat_count`, `shuffle`, `seed`) and `args.sampler_kwargs`; `None` when unset."""
    name = getattr(args, "prompt_sampler", None)
    if name is None:
        return None
    if dataset is None or not hasattr(dataset, "__len__"):
        raise ValueError(f"prompt_sampler={name!r} needs a map-style train_dataset (with a length).")
    return PROMPT_SAMPLERS.get(name)(dataset, args=args, **layout, **dict(getattr(args, "sampler_kwargs", None) or {}))
