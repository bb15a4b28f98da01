r"""DLER (Liu et al., NVIDIA, "DLER: Doing Length pEnalty Right", arXiv 2510.15110; methods.md §4) and DAPO's dynamic
sampling with refill (arXiv 2503.14476, §31).

What this module adds to the truncation reward `get_dler_truncation_reward` and the whitening
`group_center_batch_whiten` of `trl_efficient.trainer.advantages` (verl's `masked_whiten`):

- advantage estimator `"dler"`: group-centred rewards whitened as verl's `masked_whiten` does (Bessel-corrected
  variance over the response tokens of the **informative** groups), plus the released script's correct-sample boost
  (`correct_boost`, 0.1 as in `dler_slurm.sh`; 0 turns it off);
- advantage estimator `"da_dler"`: the same, and it asks `DLERTrainer` to apply difficulty-aware truncation
  (our proposal for DA-DLER, whose algorithm is not published: groups with solve rate >= 0.75 are cut to 2000
  tokens and re-scored);
- completion filter `"dynamic_sampling"`: keep groups whose rewards differ; under `DLERTrainer` the batch is
  **refilled** with freshly generated groups (DAPO's `filter_groups`), otherwise it only masks;
- `DLERTrainer`: the refill loop and the post-hoc truncation, as thin overrides of `EfficientGRPOTrainer`.

A group is *signal-free* (`signal_free_groups`) when its scorable rewards are all equal or it has no scorable row:
DAPO's and DLER's dynamic sampling keep a group if and only if its reward standard deviation is above zero
(`NVlabs/DLER`, `verl-dler/recipe/dapo/dapo_ray_trainer.py`: `std > 0`). Truncation plays no part: DLER's reward
scores a truncated correct answer 0.1 and a truncated wrong one 0, and that difference is signal. `dler`, `da_dler`
and the `dynamic_sampling` filter use this rule; `canon` uses it for its documented edge rule; `gfpo`, `drpo` and
`grpo_lead` follow their papers, which have no such rule.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import datasets
import torch
from accelerate.utils import gather_object

from ..core.checks import check_number as _check_number
from ..core.state import StatefulComponent
from ..trainer import ADVANTAGE_ESTIMATORS, COMPLETION_FILTERS, EfficientGRPOTrainer, GroupBatch
from ..trainer.advantages import group_center_batch_whiten
from ..trainer.state import state_key
from ..trainer.step import StepContext
from ..trainer.trl_internals import (
    GENERATE_OUTPUT_KEYS,
    metric_buffer,
    num_items_in_batch,
    remove_unused_columns,
    trl_tokenizer,
)

logger = logging.getLogger(__name__)

__all__ = [
    "DADLERAdvantage",
    "DLERAdvantage",
    "DLERTrainer",
    "DynamicSamplingFilter",
    "RefillSampler",
    "assemble_group_batch",
    "difficulty_cut_lengths",
    "dler_advantages",
    "select_groups",
    "signal_free_groups",
]


def signal_free_groups(batch: GroupBatch, tol: float = 1e-6) -> torch.Tensor:
    """`(num_groups,)` bool: groups that carry no learning signal: the spread (max - min) of the group's scorable
    total rewards is at most `tol`, or the group has no scorable row (a single scorable row has spread 0).

    This is DAPO's dynamic-sampling rule as DLER runs it (`NVlabs/DLER`, `verl-dler/recipe/dapo/dapo_ray_trainer.py`:
    a group is kept iff `np.std` of its rewards is `> 0`); `tol` (1e-6) only absorbs float noise. Whether the
    completions were truncated does not matter: a group of truncated completions whose rewards differ (DLER scores a
    truncated correct answer 0.1, a truncated wrong one 0) is kept.

    >>> b = GroupBatch(rewards=torch.tensor([[1.0], [0.0], [1.0], [1.0], [0.1], [0.0], [0.1], [0.1]]),
    ...                reward_names=["r"], reward_weights=torch.ones(1), lengths=torch.ones(8),
    ...                truncated=torch.tensor([False, False, False, False, True, True, True, True]), group_size=2)
    >>> signal_free_groups(b).tolist()   # differ | equal | all truncated, 0.1 vs 0 (std .05 > 0) | all truncated, equal
    [False, True, False, True]
    """
    r = batch.grouped(batch.total_reward())
    high = torch.nan_to_num(r, nan=-math.inf).amax(dim=1)
    low = torch.nan_to_num(r, nan=math.inf).amin(dim=1)
    spread = torch.where(torch.isfinite(high) & torch.isfinite(low), high - low, torch.zeros_like(high))
    return spread <= tol


def dler_advantages(
    batch: GroupBatch,
    eps: float = 1e-8,
    token_weighted: bool = True,
    correct_boost: float = 0.0,
    boost_threshold: float = 1.0,
    tol: float = 1e-6,
) -> torch.Tensor:
    r"""DLER's advantage: verl's `reinforce_plus_plus_baseline` (`NVlabs/DLER`, `verl-dler/verl/trainer/ppo/
    core_algos.py`, `compute_reinforce_plus_plus_baseline_outcome_advantage`) after DAPO dynamic sampling
    (methods.md §4):

    $$ \tilde A_i = R_i - \mathrm{mean}_{g(i)} R, \qquad
       A_i = (\tilde A_i - \mu)\,(\sigma^2 + \epsilon)^{-1/2} + b\,\mathbb{1}[R_i \ge \theta - 10^{-5}] $$

    The whitening is verl's `masked_whiten(values, response_mask)` (`verl/utils/torch_functional.py`): $\tilde A_i$ is
    broadcast to every response token, $\mu$ is the mean over the batch's response tokens and $\sigma^2$ their
    **Bessel-corrected** variance (`masked_var(..., unbiased=True)`: the token mean of the squared deviations times
    $N/(N-1)$, $N$ the number of tokens), and $\epsilon = 10^{-8}$ is added to the variance, inside the `rsqrt`. Each
    row therefore counts with its length in tokens (`token_weighted=True`); `token_weighted=False` counts rows
    instead ($N$ = number of rows). The batch is the informative groups: signal-free groups (`signal_free_groups`)
    are left out of $\mu, \sigma$ and get exactly 0, boost included, because in DLER dynamic sampling removes them
    before the advantage is computed. `b = correct_boost` and $\theta$ = `boost_threshold` are `NVlabs/DLER`'s
    `correct_sample_advantage_boost_value/threshold` (the released script uses 0.1 on a score >= 1.0, i.e. correct
    and stopped); the boost is added after whitening, as in its actor.

    >>> b = GroupBatch(rewards=torch.tensor([[1.0], [0.0], [1.0], [1.0], [0.1], [0.0]]), reward_names=["r"],
    ...                reward_weights=torch.ones(1), lengths=torch.tensor([2.0, 4.0, 3.0, 3.0, 4.0, 2.0]),
    ...                truncated=torch.zeros(6, dtype=torch.bool), group_size=2)
    >>> dler_advantages(b, correct_boost=0.1)  # centred [.5,-.5 | 0,0 | .05,-.05]; 12 tokens: mean -.075, var 1.4475/11
    tensor([ 1.6851, -1.1716,  0.0000,  0.0000,  0.3446,  0.0689])
    """
    r = batch.total_reward()
    flat = signal_free_groups(batch, tol).repeat_interleave(batch.group_size)
    adv = group_center_batch_whiten(batch, eps, token_weighted, exclude=flat)
    if correct_boost:
        adv = adv + correct_boost * (torch.nan_to_num(r, nan=-math.inf) >= boost_threshold - 1e-5).float()
    return torch.where(torch.isnan(r) | flat, torch.zeros_like(adv), adv)


@ADVANTAGE_ESTIMATORS.register("dler")
class DLERAdvantage:
    """Advantage estimator `"dler"` (see `dler_advantages`). `advantage_kwargs`: `eps` (1e-8, added to the variance as
    in verl's `masked_whiten`), `token_weighted` (True), `correct_boost` (0.1, `NVlabs/DLER`'s released training
    script `dler_slurm.sh`, `correct_sample_advantage_boost_value=0.1`; 0.0 is the paper-described variant),
    `boost_threshold` (1.0), `tol` (1e-6, spread below which a group is signal-free)."""

    def __init__(
        self,
        args,
        eps: float = 1e-8,
        token_weighted: bool = True,
        correct_boost: float = 0.1,
        boost_threshold: float = 1.0,
        tol: float = 1e-6,
    ) -> None:
        _check_number("advantage_kwargs['eps']", eps, 0.0)
        _check_number("advantage_kwargs['correct_boost']", correct_boost)
        _check_number("advantage_kwargs['boost_threshold']", boost_threshold)
        _check_number("advantage_kwargs['tol']", tol, 0.0)
        if not isinstance(token_weighted, bool):
            raise ValueError(f"advantage_kwargs['token_weighted'] must be a bool, got {token_weighted!r}.")
        self.eps, self.token_weighted, self.tol = float(eps), token_weighted, float(tol)
        self.correct_boost, self.boost_threshold = float(correct_boost), float(boost_threshold)

    def __call__(self, batch: GroupBatch) -> torch.Tensor:
        return dler_advantages(batch, self.eps, self.token_weighted, self.correct_boost, self.boost_threshold, self.tol)


def difficulty_cut_lengths(
    correct: torch.Tensor, lengths: torch.Tensor, group_size: int, solve_rate_threshold: float, truncate_to: int
) -> torch.Tensor:
    """DA-DLER proposal (methods.md §4, proposed default): `(B,)` cut length per row, 0 = keep. Rows longer than
    `truncate_to` tokens in groups whose solve rate (over scorable rows) is >= `solve_rate_threshold` are cut.

    >>> nan = float("nan")
    >>> difficulty_cut_lengths(torch.tensor([1., 1., 1., 0., 1., 0., nan, 1.]),
    ...                        torch.tensor([5., 9., 3., 12., 9., 9., 9., 9.]), 4, 0.75, 8).tolist()
    [0, 8, 0, 8, 0, 0, 0, 0]
    """
    acc = torch.nanmean(correct.float().view(-1, group_size), dim=1)
    easy = torch.nan_to_num(acc, nan=-1.0) >= solve_rate_threshold
    cut = easy.repeat_interleave(group_size) & (lengths > truncate_to)
    return torch.where(cut, torch.full_like(lengths, truncate_to), torch.zeros_like(lengths)).long()


@ADVANTAGE_ESTIMATORS.register("da_dler")
class DADLERAdvantage(DLERAdvantage):
    """Advantage estimator `"da_dler"`: `"dler"` plus difficulty-aware truncation applied by `DLERTrainer` before the
    rewards are final. Extra `advantage_kwargs`: `solve_rate_threshold` (0.75) and `truncate_to` (2000 tokens), both
    **proposed defaults** (DA-DLER's schedule is not published). Under any other trainer it raises, rather than
    silently training plain DLER."""

    def __init__(self, args, solve_rate_threshold: float = 0.75, truncate_to: int = 2000, **kwargs) -> None:
        super().__init__(args, **kwargs)
        _check_number("advantage_kwargs['solve_rate_threshold']", solve_rate_threshold, 0.0, 1.0)
        cap = getattr(args, "max_completion_length", None)
        _check_number("advantage_kwargs['truncate_to']", truncate_to, 1, integer=True)
        if cap is not None and truncate_to >= cap:
            raise ValueError(
                f"advantage_kwargs['truncate_to']={truncate_to} must be below max_completion_length={cap} (tokens), "
                "otherwise difficulty-aware truncation never cuts anything."
            )
        self.difficulty_truncation = (float(solve_rate_threshold), int(truncate_to))
        self.trainer_applies_truncation = False  # True once attached to a DLERTrainer

    def attach(self, trainer) -> None:
        """Component contract (`EfficientGRPOTrainer.__init__` calls it): the truncation is applied only by a
        `DLERTrainer` (which applies it whenever its estimator is `"da_dler"`)."""
        self.trainer_applies_truncation = isinstance(trainer, DLERTrainer)

    def __call__(self, batch: GroupBatch) -> torch.Tensor:
        if not self.trainer_applies_truncation:
            raise RuntimeError(
                "advantage_estimator='da_dler' needs trl_efficient.methods.dler.DLERTrainer, which applies the "
                "difficulty-aware truncation before scoring (recipe 'da-dler' uses it)."
            )
        return super().__call__(batch)


@COMPLETION_FILTERS.register("dynamic_sampling")
class DynamicSamplingFilter:
    """Completion filter `"dynamic_sampling"` (DAPO, methods.md §31): keep the groups that carry signal
    (`signal_free_groups` is False), mask the others.

    Under `DLERTrainer` the training batch is first **refilled**: further generation batches are drawn until it holds
    enough informative groups (at most `max_generation_batches` in all), so this mask only removes the shortfall.
    Under a trainer without refill it only masks (the proposed default of methods.md §4 and §31) and warns once.

    `filter_kwargs`: `max_generation_batches` (4, proposed default; DLER's script sets no limit), `tol` (1e-6),
    `on_shortfall` (`"mask"`: train on the informative groups found and mask the rest; `"error"`: raise, as verl
    does).
    """

    def __init__(self, args, max_generation_batches: int = 4, tol: float = 1e-6, on_shortfall: str = "mask") -> None:
        _check_number("filter_kwargs['max_generation_batches']", max_generation_batches, 1, integer=True)
        _check_number("filter_kwargs['tol']", tol, 0.0)
        if on_shortfall not in ("mask", "error"):
            raise ValueError(f"filter_kwargs['on_shortfall'] must be 'mask' or 'error', got {on_shortfall!r}.")
        self.max_generation_batches = int(max_generation_batches)
        self.tol = float(tol)
        self.on_shortfall = on_shortfall
        self.refill_active = False  # True once attached to a DLERTrainer
        self._warned = False

    def attach(self, trainer) -> None:
        """Component contract (`EfficientGRPOTrainer.__init__` calls it): a `DLERTrainer` refills the batch whenever
        its filter is `"dynamic_sampling"`; under any other trainer this filter only masks."""
        self.refill_active = isinstance(trainer, DLERTrainer)

    def informative_groups(self, batch: GroupBatch) -> torch.Tensor:
        return ~signal_free_groups(batch, self.tol)

    def __call__(self, batch: GroupBatch) -> torch.Tensor:
        if not self.refill_active and batch.mode == "train" and not self._warned:
            logger.warning(
                "completion_filter='dynamic_sampling' without DLERTrainer masks signal-free groups but cannot refill "
                "the batch; use trl_efficient.methods.dler.DLERTrainer for DAPO-style refill."
            )
            self._warned = True
        return self.informative_groups(batch).repeat_interleave(batch.group_size)


def select_groups(informative: list[torch.Tensor], need: int) -> list[tuple[int, int]]:
    """Choose `need` groups from several generation batches: the informative groups in generation order first (as
    verl concatenates them and cuts at the batch size), then, on a shortfall, signal-free groups in generation order.
    Returns `(batch, group)` pairs sorted in generation order, so a single batch keeps its own order.

    >>> select_groups([torch.tensor([True, False, False]), torch.tensor([False, True, True])], 3)
    [(0, 0), (1, 1), (1, 2)]
    >>> select_groups([torch.tensor([False, True, False])], 3)
    [(0, 0), (0, 1), (0, 2)]
    """
    pairs = [(k, g) for k, inf in enumerate(informative) for g in range(len(inf))]
    chosen = [(k, g) for k, g in pairs if bool(informative[k][g])][:need]
    chosen += [(k, g) for k, g in pairs if not bool(informative[k][g])][: need - len(chosen)]
    return sorted(chosen)


def assemble_group_batch(
    batches: list[GroupBatch], sources: list[tuple[int, int]], local_size: int, process_index: int
) -> GroupBatch:
    """The `GroupBatch` of the refilled generation batch: global row `t` is row `sources[t] = (batch, row)`.

    >>> def gb(r, m):
    ...     return GroupBatch(rewards=torch.tensor(r).view(-1, 1), reward_names=["r"], reward_weights=torch.ones(1),
    ...                       lengths=torch.tensor(r) * 10, truncated=torch.zeros(len(r), dtype=torch.bool),
    ...                       group_size=2, metadata={"idx": m})
    >>> out = assemble_group_batch([gb([1., 2.], [7, 7]), gb([3., 4.], [8, 8])], [(1, 0), (1, 1)], 1, 0)
    >>> out.rewards.view(-1).tolist(), out.lengths.tolist(), out.metadata
    ([3.0, 4.0], [30.0, 40.0], {'idx': [8, 8]})
    """
    first = batches[0]
    offsets, total = [], 0
    for b in batches:
        offsets.append(total)
        total += b.num_rows
    index = torch.tensor([offsets[k] + r for k, r in sources], dtype=torch.long)
    keys = list(dict.fromkeys(key for b in batches for key in b.metadata))
    metadata = {}
    for key in keys:
        values = [v for b in batches for v in b.metadata.get(key, [None] * b.num_rows)]
        metadata[key] = [values[i] for i in index.tolist()]
    extras = {}
    for key in dict.fromkeys(key for b in batches for key in b.extras):
        if not all(key in b.extras for b in batches):
            continue  # per-row data some batch lacks cannot be moved; stages add it again on the assembled batch
        values = [b.extras[key] for b in batches]
        if all(isinstance(v, torch.Tensor) for v in values):
            extras[key] = torch.cat(values)[index]
        else:
            flat = [x for v in values for x in v]
            extras[key] = [flat[i] for i in index.tolist()]
    return GroupBatch(
        rewards=torch.cat([b.rewards for b in batches])[index],
        reward_names=list(first.reward_names),
        reward_weights=first.reward_weights,
        lengths=torch.cat([b.lengths for b in batches])[index],
        truncated=torch.cat([b.truncated for b in batches])[index],
        group_size=first.group_size,
        metadata=metadata,
        correctness_index=first.correctness_index,
        process_index=process_index,
        local_size=local_size,
        mode=first.mode,
        extras=extras,
    )


class RefillSampler(StatefulComponent):
    """Where refill prompts come from: an independent, seeded, shuffled pass over the training dataset (epoch `e`
    uses `torch.randperm(N)` seeded with `seed + 1 + 7919 * e`). It is identical on every rank, saved in every
    checkpoint (`dynamic_sampling_refill`) and restored on resume, so refill draws resume exactly.

    >>> s = RefillSampler(num_prompts=3, seed=0)
    >>> a = s.next_prompts(2); b = s.next_prompts(2)   # the second call wraps into epoch 1
    >>> sorted(a + b[:1]), s.state_dict()
    ([0, 1, 2], {'epoch': 1, 'position': 1})
    """

    state_key = "dynamic_sampling_refill"

    def __init__(self, num_prompts: int, seed: int = 0) -> None:
        if num_prompts < 1:
            raise ValueError("dynamic sampling needs a non-empty train_dataset to refill from.")
        self.num_prompts = num_prompts
        self.seed = seed
        self.epoch = 0
        self.position = 0
        self._cache: tuple[int, list[int]] | None = None

    def _permutation(self, epoch: int) -> list[int]:
        if self._cache is None or self._cache[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed + 1 + 7919 * epoch)
            self._cache = (epoch, torch.randperm(self.num_prompts, generator=generator).tolist())
        return self._cache[1]

    def next_prompts(self, count: int) -> list[int]:
        out: list[int] = []
        while len(out) < count:
            take = self._permutation(self.epoch)[self.position : self.position + count - len(out)]
            out += take
            self.position += len(take)
            if self.position >= self.num_prompts:
                self.epoch, self.position = self.epoch + 1, 0
        return out

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


# How the refill moves the outputs of GRPOTrainer._generate_and_score_completions between generation batches. It is
# generic over whatever tensors TRL returns (`row_layouts`): a (n,) tensor is per row; a (n, width) tensor whose width
# is the prompt's is left-padded like `prompt_ids`, one whose width is the completion's is right-padded like
# `completion_ids`. Only the padding *values* of TRL 1.16's own keys are listed (`trl_internals.GENERATE_OUTPUT_KEYS`,
# checked at start against TRL's source); any other key is padded with the value it already holds in a padded
# position (0 when the batch has none). `num_items_in_batch` is recomputed.
_PAD_VALUES = {key: pad for key, pad in GENERATE_OUTPUT_KEYS.items() if pad is not None}  # the border's table
_RECOMPUTED = {key for key, pad in GENERATE_OUTPUT_KEYS.items() if pad is None}


def row_layouts(output: dict, per_row: tuple[str, ...] = ()) -> dict[str, tuple[str, object]]:
    """`{key: (layout, pad value)}` for every key of a `_generate_and_score_completions` output the refill moves,
    with layout `"row"`, `"left"` (prompt-width, padded on the left) or `"right"` (completion-width, padded on the
    right), detected from shapes; `num_items_in_batch` is left out (recomputed). Keys in `per_row` are moved as one
    value per row whatever their shape (TRL's sequence-level `importance_sampling_ratio`, shape (rows, 1)). A pad
    value of `"pad"` means the
    tokenizer's pad id. A width equal to both the prompt's and the completion's is resolved by the name (`prompt_*`
    is left-padded). Raises `NotImplementedError`, naming the key, for what cannot be moved row by row (a
    non-tensor, a tensor whose first dimension is not the batch's rows, 3-D tensors such as multimodal inputs).

    >>> out = {"prompt_ids": torch.tensor([[0, 5], [6, 7]]), "prompt_mask": torch.tensor([[0, 1], [1, 1]]),
    ...        "completion_ids": torch.tensor([[8, 9, 0], [8, 0, 0]]),
    ...        "completion_mask": torch.tensor([[1, 1, 0], [1, 0, 0]]), "advantages": torch.zeros(2),
    ...        "my_token_scores": torch.tensor([[.5, .5, -1.], [.5, -1., -1.]]), "num_items_in_batch": torch.tensor(3)}
    >>> layouts = row_layouts(out)   # my_token_scores: unknown to TRL, padded with what its padded cells hold
    >>> layouts["prompt_ids"], layouts["completion_ids"], layouts["advantages"], layouts["my_token_scores"]
    (('left', 'pad'), ('right', 'pad'), ('row', None), ('right', -1.0))
    """
    rows = output["completion_ids"].shape[0]
    widths = {"left": output["prompt_ids"].shape[1], "right": output["completion_ids"].shape[1]}
    masks = {"left": output["prompt_mask"], "right": output["completion_mask"]}
    layouts = {}
    for key, value in output.items():
        if key in _RECOMPUTED:
            continue
        if not isinstance(value, torch.Tensor):
            raise NotImplementedError(
                f"dynamic sampling cannot move the output key {key!r} between generation batches: "
                f"expected a tensor, got {type(value).__name__}."
            )
        if value.dim() == 0 or value.shape[0] != rows or value.dim() > 2:
            raise NotImplementedError(
                f"dynamic sampling cannot move the output key {key!r} (shape {tuple(value.shape)}) between generation "
                f"batches: only (rows,) and (rows, width) tensors are moved (multimodal inputs are not supported)."
            )
        if value.dim() == 1 or key in per_row:
            layouts[key] = ("row", None)
            continue
        candidates = [side for side, width in widths.items() if value.shape[1] == width]
        if not candidates:
            raise NotImplementedError(
                f"dynamic sampling cannot move the output key {key!r}: its width {value.shape[1]} is neither the "
                f"prompt's ({widths['left']}) nor the completion's ({widths['right']})."
            )
        side = candidates[0] if len(candidates) == 1 else ("left" if key.startswith("prompt") else "right")
        if key in _PAD_VALUES:
            fill = _PAD_VALUES[key]
        else:
            padded = masks[side] == 0
            fill = value[padded][0].item() if bool(padded.any()) else 0
        layouts[key] = (side, fill)
    return layouts


@dataclass
class DLERStep(StepContext):
    """`DLERTrainer`'s step context (`trainer/step.py`).

    Attributes:
        deferred: per training batch, while refilling: the `(batch, output)` of each generation batch, held back
            from the group stage, which then runs once on the refilled batch.
        cuts: per generation batch: this process's cut lengths (0 = keep), from `_calculate_rewards` to the group
            stage.
    """

    deferred: list | None = None
    cuts: list[int] | None = None

    def begin_generation_batch(self) -> None:
        super().begin_generation_batch()
        self.cuts = None


class DLERTrainer(EfficientGRPOTrainer):
    """`EfficientGRPOTrainer` with DAPO dynamic sampling **with refill** and DA-DLER difficulty-aware truncation.

    Both switch on from the config: `completion_filter: dynamic_sampling` turns on the refill, `advantage_estimator:
    da_dler` the truncation; with neither, this is `EfficientGRPOTrainer`.

    Refill (training only), in `_generate_and_score_completions`:
    1. generate and score the dataloader's batch as usual (`super()`), holding back the group stage (`group_stage`);
    2. while it has fewer informative groups than the batch holds, generate and score another batch of prompts from
       `RefillSampler` (same layout: groups of `G` consecutive global rows that may straddle processes; a whole batch
       of prompts unless `refill_prompt_count` says otherwise), at most `max_generation_batches` batches in all;
    3. choose the groups (`select_groups`), move their rows so that every process again holds exactly `n` rows in
       TRL's process-major order (rows whose new position is on another process travel with `gather_object`; the
       tensors are re-padded to a common width), and recompute `num_items_in_batch`;
    4. run the group-stage pipeline (`group_stage`: stages, estimator, filter, metrics, stateful updates) once, on the
       refilled batch.
    TRL's shuffle and split then see an ordinary batch. TRL's own per-batch metrics and completion logs cover every
    generated batch, discarded groups included; `trl_efficient/dynamic_sampling/*` describe the refill.

    Truncation (training only), in `_calculate_rewards`: after scoring, rows longer than `truncate_to` tokens in
    groups with solve rate >= `solve_rate_threshold` are cut, decoded and scored again (every reward function runs a
    second time on the whole batch; all ranks take the same decision from gathered data). The cut rows keep their
    tokens but their `completion_mask` is zeroed past the cut before the group stage.

    Not supported with refill: multimodal inputs, and `advantage_estimator: grpo` with batch-level statistics
    (`scale_rewards='batch'` or GDPO), whose TRL advantages were computed over the wrong rows. Not supported with
    truncation: tools, environments and `rollout_func`.
    """

    step_context = DLERStep

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        is_ds = isinstance(self.completion_filter, DynamicSamplingFilter)
        self.dynamic_sampling = self.completion_filter if is_ds else None
        estimator = self.advantage_estimator
        self.difficulty_truncation = estimator.difficulty_truncation if isinstance(estimator, DADLERAdvantage) else None
        if self.difficulty_truncation is not None:
            if self.correctness_index is None:
                raise ValueError(
                    "advantage_estimator='da_dler' reads each group's solve rate from the correctness reward: set "
                    "correctness_reward (e.g. 'dler_truncation_reward')."
                )
            if self.tools or self.environment_factories is not None or self.rollout_func is not None:
                raise NotImplementedError(
                    "DA-DLER truncation re-decodes and re-scores plain completions; tools, environment_factory and "
                    "rollout_func are not supported with advantage_estimator='da_dler'."
                )
        self.refill_sampler = None
        if self.dynamic_sampling is not None:
            dataset = self.train_dataset
            if dataset is None or not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
                raise NotImplementedError("Dynamic sampling refill needs a map-style train_dataset (not iterable).")
            if self.advantage_estimator is None and (
                self.scale_rewards == "batch" or self.multi_objective_aggregation == "normalize_then_sum"
            ):
                raise NotImplementedError(
                    "completion_filter='dynamic_sampling' with advantage_estimator='grpo' keeps TRL's advantages, "
                    "which scale_rewards='batch' / multi_objective_aggregation='normalize_then_sum' compute over each "
                    "generation batch, not the refilled one; use scale_rewards='group' or a registered estimator."
                )
            if isinstance(dataset, datasets.Dataset):  # as Trainer._get_dataloader does for the main dataloader
                dataset = remove_unused_columns(self, dataset, "training")
            self._refill_dataset = dataset
            self.refill_sampler = RefillSampler(len(self._refill_dataset), seed=self.args.seed)
            self.stateful_components[state_key(self.refill_sampler)] = self.refill_sampler

    def _generate_and_score_completions(self, inputs):
        if self.dynamic_sampling is None or not self.model.training:
            return super()._generate_and_score_completions(inputs)
        n, G = len(inputs), self.num_generations
        need = n * self.accelerator.num_processes // G
        parts: list[tuple[GroupBatch, dict, torch.Tensor]] = []
        with self.step_scope() as step:
            step.deferred = []
            rows = inputs
            for attempt in range(self.dynamic_sampling.max_generation_batches):
                if attempt > 0:
                    found = sum(int(p[2].sum()) for p in parts)
                    rows = self._refill_rows(self.refill_prompt_count(attempt, need, found))
                output = super()._generate_and_score_completions(rows)
                if not step.deferred:
                    raise RuntimeError("dynamic sampling found no gathered batch: no reward functions were called.")
                batch, _ = step.deferred.pop()
                parts.append((batch, output, self.dynamic_sampling.informative_groups(batch)))
                if sum(int(p[2].sum()) for p in parts) >= need:
                    break
        self.refill_finished([p[2] for p in parts])
        found = sum(int(p[2].sum()) for p in parts)
        if found < need and self.dynamic_sampling.on_shortfall == "error":
            raise RuntimeError(
                f"dynamic sampling found {found} informative groups of the {need} needed in {len(parts)} generation "
                "batches (filter_kwargs max_generation_batches); the data may be too hard or too easy."
            )
        selection = select_groups([p[2] for p in parts], need)
        batch, output = self._assemble(parts, selection, n)
        self.group_stage(batch, output)
        metrics = metric_buffer(self, "train")
        metrics["trl_efficient/dynamic_sampling/generation_batches"].append(float(len(parts)))
        metrics["trl_efficient/dynamic_sampling/informative_fraction"].append(parts[0][2].float().mean().item())
        metrics["trl_efficient/dynamic_sampling/shortfall_groups"].append(float(max(need - found, 0)))
        return output

    def refill_prompt_count(self, attempt: int, need: int, found: int) -> int:
        """How many prompts refill pass `attempt` (1, 2, ...) draws, given `need` groups per batch and `found`
        informative so far: a whole batch (`need`). Subclasses may draw more or fewer (`DOTTrainer`: its predicted
        oversampling); the count must make `count * G` a multiple of the number of processes."""
        return need

    def refill_finished(self, informative: list[torch.Tensor]) -> None:
        """Called once per refilled training batch (same on every rank) with each generation batch's `(groups,)`
        informative mask, before the groups are chosen. No-op here; `DOTTrainer` records its pass rate."""

    def _refill_rows(self, prompts: int) -> list[dict]:
        G, world, rank = self.num_generations, self.accelerator.num_processes, self.accelerator.process_index
        n = prompts * G // world  # rows per process
        chosen = self.refill_sampler.next_prompts(prompts)
        global_rows = [i for i in chosen for _ in range(G)]  # RepeatSampler layout: G consecutive copies
        return [dict(self._refill_dataset[i]) for i in global_rows[rank * n : (rank + 1) * n]]

    # Overrides the pipeline entry `EfficientGRPOTrainer.group_stage` (documented as the hook for *when* the pipeline
    # runs): DA-DLER's cuts are applied to each generation batch's output first; while refilling, the batch is held
    # back and the whole pipeline runs once, on the refilled batch (`_generate_and_score_completions`).
    def group_stage(self, batch: GroupBatch, output: dict) -> None:
        step = self.step
        if step is not None and step.cuts is not None:
            self._apply_cuts(output, step.cuts)
            step.cuts = None
        if step is not None and step.deferred is not None:
            step.deferred.append((batch, output))
            return
        super().group_stage(batch, output)

    def _assemble(self, parts, selection, n):
        G, world, rank = self.num_generations, self.accelerator.num_processes, self.accelerator.process_index
        if len(parts) == 1 and selection == [(0, g) for g in range(parts[0][0].num_groups)]:
            return parts[0][0], parts[0][1]  # the dataloader's batch, unchanged
        sources = [(k, g * G + j) for k, g in selection for j in range(G)]  # target global row -> (batch, row)
        batch = assemble_group_batch([p[0] for p in parts], sources, n, rank)
        kinds = [self._row_kinds(p[1]) for p in parts]
        sizes = [p[0].local_size for p in parts]  # rows per process of each generation batch (refills may differ)
        received: dict = {}
        if world > 1:
            send = {
                (k, r): self._row_payload(parts[k][1], r - rank * sizes[k], kinds[k], to_cpu=True)
                for t, (k, r) in enumerate(sources)
                if r // sizes[k] == rank and t // n != rank
            }
            for part in gather_object([send]):
                received.update(part)
        rows = []
        for k, r in sources[rank * n : (rank + 1) * n]:
            mine = r // sizes[k] == rank
            rows.append(self._row_payload(parts[k][1], r - rank * sizes[k], kinds[k]) if mine else received[(k, r)])
        output = self._stack_rows(rows, kinds[0], parts[0][1])
        output["num_items_in_batch"] = num_items_in_batch(output)
        return batch, output

    def _row_kinds(self, output: dict) -> dict:
        sequence_level = self.vllm_importance_sampling_mode in ("sequence_mask", "sequence_truncate")
        return row_layouts(output, per_row=("importance_sampling_ratio",) if sequence_level else ())

    @staticmethod
    def _row_payload(output: dict, i: int, kinds: dict, to_cpu: bool = False) -> dict:
        return {key: (output[key][i].cpu() if to_cpu else output[key][i]) for key in kinds}

    def _stack_rows(self, rows: list[dict], kinds: dict, template: dict) -> dict:
        pad_id = trl_tokenizer(self).pad_token_id
        out = {}
        for key, (kind, fill) in kinds.items():
            like = template[key]
            values = [row[key].to(like.device) for row in rows]
            if kind == "row":
                out[key] = torch.stack(values).to(like.dtype)
                continue
            width = max(v.shape[0] for v in values)
            if self.pad_to_multiple_of:
                width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
            fill = pad_id if fill == "pad" else fill
            padded = like.new_full((len(values), width), fill)
            for i, v in enumerate(values):
                if kind == "left":
                    padded[i, width - v.shape[0] :] = v
                else:
                    padded[i, : v.shape[0]] = v
            out[key] = padded
        return out

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if not self.model.training:
            return rewards
        batch = self.step.group_batch
        cuts = self.cut_lengths(batch)
        if cuts is None or not bool((cuts > 0).any()):  # same decision on every rank: `cuts` comes from gathered data
            return rewards
        local = cuts[batch.local_slice].tolist()
        new_ids = [list(ids[:c]) if c else ids for ids, c in zip(completion_ids_list, local, strict=True)]
        new_completions = list(completions)
        for i, c in enumerate(local):
            if c:
                text = self.processing_class.decode(new_ids[i], skip_special_tokens=True)
                conversational = isinstance(completions[i], list)
                new_completions[i] = [{"role": "assistant", "content": text}] if conversational else text
        self.step.cuts = local
        return super()._calculate_rewards(inputs, prompts, new_completions, new_ids)

    def cut_lengths(self, batch: GroupBatch) -> torch.Tensor | None:
        """`(B,)` cut length of every gathered row (0 = keep) for this training batch, or None for no truncation;
        read from gathered data only, so every rank decides alike. DA-DLER's `difficulty_cut_lengths` here;
        `DOTTrainer` overrides it with DOT's outlier cut-off."""
        if self.difficulty_truncation is None:
            return None
        threshold, truncate_to = self.difficulty_truncation
        cuts = difficulty_cut_lengths(batch.correct, batch.lengths, batch.group_size, threshold, truncate_to)
        metric_buffer(self, "train")["trl_efficient/da_dler/cut_fraction"].append(float((cuts > 0).float().mean()))
        return cuts

    def _apply_cuts(self, output: dict, cuts: list[int]) -> None:
        mask = output["completion_mask"]
        for i, c in enumerate(cuts):
            if c:
                mask[i, c:] = 0
        output["num_items_in_batch"] = num_items_in_batch(output)
