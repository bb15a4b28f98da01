r"""GFPO, Group Filtered Policy Optimization ("Sample More to Think Less", arXiv 2508.09726; methods.md §13).

Sample a larger group (`num_generations = G`), keep the `k` best completions of each group by a metric, compute
advantages over the kept set only, and take the others out of the loss:

$$ A_i = m_i \, \frac{R_i - \mu_S}{\sigma_S + \epsilon}, \qquad m_i = \mathbb{1}[i \in S] $$

with $S$ the kept set of the group and $\mu_S, \sigma_S$ its mean and (Bessel-corrected) std of the total reward.

Registered parts (they work together; the estimator decides, the filter applies):
- advantage estimator `"gfpo"`: fixed `k` (`advantage_kwargs: {k: 8, metric: shortest}`);
- advantage estimator `"gfpo_adaptive"`: Adaptive-Difficulty GFPO, `k` per group from the quartiles of a streaming
  digest of past per-prompt mean rewards (stateful, checkpointed as `gfpo_adaptive`);
- completion filter `"gfpo"`: masks the completions the estimator dropped (`filter_kwargs: {loss_normalizer: all}`);
- `GFPOTrainer`: honours `loss_normalizer: all` (see below).

**Loss normaliser.** The paper aggregates DAPO-style token losses with the normaliser over **all** `G` responses:
dropped responses add zero to the numerator and their tokens still count in the denominator. With masking, what a
dropped row contributes depends on `loss_type`:

| `loss_type` | `loss_normalizer: all` (default, `GFPOTrainer`) | `loss_normalizer: kept` |
|---|---|---|
| `dapo` (recipe) | tokens of all `G` rows: **the paper's normaliser** | kept rows' tokens (gradient x about `G/k`) |
| `grpo`, `sapo` | per-sequence means averaged over all `B` rows (dropped rows add 0) | same |
| `dr_grpo` | constant `B * max_completion_length`: unaffected | same |

`loss_normalizer: all` keeps `num_items_in_batch` as it was before masking; `EfficientGRPOTrainer` recomputes it
after any filter, so this needs `GFPOTrainer` (recipe `gfpo` uses it). Masked rows also leave the KL, entropy-bonus
and entropy-quantile terms.
"""

from __future__ import annotations

import math

import torch

from ..core.checks import check_number as _check_number
from ..core.state import StatefulComponent
from ..trainer import ADVANTAGE_ESTIMATORS, COMPLETION_FILTERS, EfficientGRPOTrainer, GroupBatch
from ..trainer.trl_internals import metric_buffer

__all__ = [
    "GFPO_METRICS",
    "AdaptiveGFPOAdvantage",
    "GFPOAdvantage",
    "GFPOFilter",
    "GFPOTrainer",
    "TDigest",
    "gfpo_keep_mask",
    "kept_set_advantages",
]

GFPO_METRICS = ("shortest", "token_efficiency")
GFPO_ESTIMATORS = ("gfpo", "gfpo_adaptive")
KEEP_KEY = "gfpo_keep"  # batch.extras key: the estimator leaves its (B,) keep mask there for the filter


def gfpo_keep_mask(
    total: torch.Tensor, lengths: torch.Tensor, group_size: int, k, metric: str = "shortest"
) -> torch.Tensor:
    """`(B,)` bool: the `k` best completions of each group (`k` an int or a `(num_groups,)` tensor).

    `metric="shortest"` ranks by ascending length; `"token_efficiency"` by descending `R / L` (reward per token;
    unscorable rows last). Ties keep the lower index (stable sort).

    >>> gfpo_keep_mask(torch.tensor([1., 0., 1., 1.]), torch.tensor([5., 3., 9., 3.]), 4, 2).tolist()
    [False, True, False, True]
    >>> gfpo_keep_mask(torch.tensor([1., 0., 1., 1.]), torch.tensor([5., 3., 9., 4.]), 4, 2, "token_efficiency")
    tensor([ True, False, False,  True])
    """
    if metric == "shortest":
        score = lengths.float()
    elif metric == "token_efficiency":
        score = torch.nan_to_num(-(total / lengths.float().clamp(min=1)), nan=math.inf)
    else:
        raise ValueError(f"metric must be one of {list(GFPO_METRICS)}, got {metric!r}.")
    grouped = score.view(-1, group_size)
    order = grouped.argsort(dim=1, stable=True)
    ranks = torch.empty_like(order).scatter_(1, order, torch.arange(group_size).expand_as(order).contiguous())
    k = torch.as_tensor(k).view(-1, 1) if torch.as_tensor(k).dim() else torch.as_tensor(k)
    return (ranks < k).view(-1)


def kept_set_advantages(total: torch.Tensor, keep: torch.Tensor, group_size: int, eps: float = 1e-4) -> torch.Tensor:
    r"""$A_i = m_i (R_i - \mu_S) / (\sigma_S + \epsilon)$ per group; $\sigma_S$ is Bessel-corrected (as TRL's),
    $\epsilon$ TRL's 1e-4; unscorable rows are left out of the kept-set statistics and get 0; a kept set of one row
    gets 0.

    >>> kept_set_advantages(torch.tensor([1., 0., 0., 1.]), torch.tensor([True, True, True, False]), 4)
    tensor([ 1.1545, -0.5773, -0.5773,  0.0000])
    """
    r = total.float().view(-1, group_size)
    kept = keep.view(-1, group_size) & ~torch.isnan(r)
    masked = torch.where(kept, r, torch.full_like(r, math.nan))
    count = kept.sum(dim=1, keepdim=True)
    mean = torch.nansum(masked, dim=1, keepdim=True) / count.clamp(min=1)
    var = torch.nansum((masked - mean) ** 2, dim=1, keepdim=True) / (count - 1).clamp(min=1)
    adv = (r - mean) / (var.sqrt() + eps)
    return torch.where(kept & (count > 1), adv, torch.zeros_like(adv)).view(-1)


def _check_k(field: str, k, group_size: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= group_size:
        raise ValueError(
            f"{field} must be an int in [2, num_generations={group_size}] (GFPO keeps k of the G completions of a "
            f"group; k >= 2 so that the kept set has a spread), got {k!r}."
        )
    return k


@ADVANTAGE_ESTIMATORS.register("gfpo")
class GFPOAdvantage:
    """Advantage estimator `"gfpo"` (GFPO "Shortest k/G" or "Token Efficiency k/G").

    `advantage_kwargs`: `k` (8: the paper's Shortest 8/16 with `num_generations: 16`), `metric` (`"shortest"` or
    `"token_efficiency"`), `eps` (1e-4). Dropped rows get 0 here; add `completion_filter: gfpo` to take them out of
    the loss. There is no truncation or zero-variance rule (the paper and the former TRL implementation have none): a
    kept set whose rewards are all equal gets 0 from the formula itself. In evaluation, `k` is capped at the eval
    group size.
    """

    def __init__(self, args, k: int = 8, metric: str = "shortest", eps: float = 1e-4) -> None:
        self.group_size = args.num_generations
        self.k = _check_k("advantage_kwargs['k']", k, self.group_size)
        if metric not in GFPO_METRICS:
            raise ValueError(f"advantage_kwargs['metric'] must be one of {list(GFPO_METRICS)}, got {metric!r}.")
        _check_number("advantage_kwargs['eps']", eps, 0.0)
        self.metric, self.eps = metric, float(eps)
        self.last_k: torch.Tensor | None = None

    def group_k(self, batch: GroupBatch) -> torch.Tensor:
        return torch.full((batch.num_groups,), min(self.k, batch.group_size), dtype=torch.long)

    def __call__(self, batch: GroupBatch) -> torch.Tensor:
        total = batch.total_reward()
        k = self.group_k(batch)
        keep = gfpo_keep_mask(total, batch.lengths, batch.group_size, k, self.metric)
        adv = kept_set_advantages(total, keep, batch.group_size, self.eps)
        batch.extras[KEEP_KEY] = keep
        self.last_k = k
        return adv


class TDigest:
    r"""A merging t-digest (Dunning & Ertl, arXiv 1902.04023) with the $k_1$ scale function
    $k(q) = \frac{\delta}{2\pi} \arcsin(2q - 1)$: a bounded, mergeable summary for streaming quantiles.

    Points are buffered and merged into centroids when the buffer holds `buffer_size` points; `quantile` merges a
    *copy*, so reading a quantile never changes the state (the state is a pure function of the points added, and
    `state_dict`/`load_state_dict` round-trip it exactly through JSON). Quantiles interpolate linearly between
    centroid centres, so with few points (every centroid a single point) they are the sample quantiles with
    positions `(i + 0.5) / n`, clamped to the minimum and maximum.

    >>> d = TDigest()
    >>> d.add([4.0, 1.0, 3.0, 2.0])
    >>> d.quantile(0.25), d.quantile(0.5), d.quantile(0.75), d.quantile(0.0), d.count
    (1.5, 2.5, 3.5, 1.0, 4)
    """

    def __init__(self, compression: float = 100.0, buffer_size: int = 500) -> None:
        self.compression = float(compression)
        self.buffer_size = int(buffer_size)
        self.means: list[float] = []
        self.weights: list[float] = []
        self.buffer: list[float] = []

    @property
    def count(self) -> int:
        return int(round(sum(self.weights))) + len(self.buffer)

    def add(self, values) -> None:
        self.buffer.extend(float(v) for v in values if v == v)  # NaN never enters
        if len(self.buffer) >= self.buffer_size:
            self.means, self.weights = self._merged()
            self.buffer = []

    def _k(self, q: float) -> float:
        return self.compression / (2 * math.pi) * math.asin(min(max(2 * q - 1, -1.0), 1.0))

    def _merged(self) -> tuple[list[float], list[float]]:
        points = sorted(list(zip(self.means, self.weights, strict=True)) + [(v, 1.0) for v in self.buffer])
        if not points:
            return [], []
        total = sum(w for _, w in points)
        means, weights = [], []
        mean, weight = points[0]
        before = 0.0  # weight of the emitted centroids
        for m, w in points[1:]:
            if self._k((before + weight + w) / total) - self._k(before / total) <= 1.0:
                mean = (mean * weight + m * w) / (weight + w)
                weight += w
            else:
                means.append(mean)
                weights.append(weight)
                before += weight
                mean, weight = m, w
        means.append(mean)
        weights.append(weight)
        return means, weights

    def quantile(self, q: float) -> float:
        means, weights = self._merged()
        if not means:
            return math.nan
        total = sum(weights)
        centres, cumulative = [], 0.0
        for w in weights:
            centres.append(cumulative + w / 2)
            cumulative += w
        target = q * total
        if target <= centres[0]:
            return means[0]
        if target >= centres[-1]:
            return means[-1]
        for i in range(len(centres) - 1):
            if centres[i] <= target <= centres[i + 1]:
                span = centres[i + 1] - centres[i]
                frac = 0.0 if span == 0 else (target - centres[i]) / span
                return means[i] + frac * (means[i + 1] - means[i])
        return means[-1]  # pragma: no cover - unreachable

    def state_dict(self) -> dict:
        return {
            "compression": self.compression,
            "buffer_size": self.buffer_size,
            "means": list(self.means),
            "weights": list(self.weights),
            "buffer": list(self.buffer),
        }

    def load_state_dict(self, state: dict) -> None:
        self.compression = float(state["compression"])
        self.buffer_size = int(state["buffer_size"])
        self.means = [float(x) for x in state["means"]]
        self.weights = [float(x) for x in state["weights"]]
        self.buffer = [float(x) for x in state["buffer"]]


@ADVANTAGE_ESTIMATORS.register("gfpo_adaptive")
class AdaptiveGFPOAdvantage(GFPOAdvantage, StatefulComponent):
    """Advantage estimator `"gfpo_adaptive"`: Adaptive-Difficulty GFPO (paper §"Adaptive Difficulty").

    Each training batch streams every prompt's mean reward `mu_R` (over its `G` rollouts) into a `TDigest`. Once the
    digest is ready, a group's `k` comes from the quartiles `q25, q50, q75` of the digest *before* the current
    batch: `k_by_quartile[0]` if `mu_R < q25` (very hard), `[1]` if `< q50`, `[2]` if `< q75`, else `[3]`; a group
    with no scorable reward counts as very hard. Before that, every group keeps `warmup_k`.

    `advantage_kwargs`: `k_by_quartile` ([8, 8, 6, 4], paper), `warmup_k` (8, paper), `warmup_steps` (5) and
    `warmup_prompts` (64): ready after 5 training batches *and* 64 prompts (proposed default: "whichever comes
    later"), `compression` (100), `metric`, `eps`. The digest updates in training only, identically on every rank
    (gathered batch), and is saved in each checkpoint as `gfpo_adaptive`.
    """

    state_key = "gfpo_adaptive"

    def __init__(
        self,
        args,
        k_by_quartile=(8, 8, 6, 4),
        warmup_k: int = 8,
        warmup_steps: int = 5,
        warmup_prompts: int = 64,
        compression: float = 100.0,
        metric: str = "shortest",
        eps: float = 1e-4,
    ) -> None:
        G = args.num_generations
        if not isinstance(k_by_quartile, (list, tuple)) or len(k_by_quartile) != 4:
            raise ValueError(
                f"advantage_kwargs['k_by_quartile'] must be 4 ints (k per reward quartile), got {k_by_quartile!r}."
            )
        for i, k in enumerate(k_by_quartile):
            _check_k(f"advantage_kwargs['k_by_quartile'][{i}]", k, G)
        super().__init__(args, k=_check_k("advantage_kwargs['warmup_k']", warmup_k, G), metric=metric, eps=eps)
        _check_number("advantage_kwargs['warmup_steps']", warmup_steps, 0, None, integer=True)
        _check_number("advantage_kwargs['warmup_prompts']", warmup_prompts, 0, None, integer=True)
        _check_number("advantage_kwargs['compression']", compression, 10.0)
        self.k_by_quartile = [int(k) for k in k_by_quartile]
        self.warmup_steps, self.warmup_prompts = int(warmup_steps), int(warmup_prompts)
        self.digest = TDigest(compression)
        self.steps = 0

    @property
    def ready(self) -> bool:
        return self.steps >= self.warmup_steps and self.digest.count >= self.warmup_prompts

    @staticmethod
    def prompt_means(batch: GroupBatch) -> torch.Tensor:
        return torch.nanmean(batch.grouped(batch.total_reward()), dim=1)

    def group_k(self, batch: GroupBatch) -> torch.Tensor:
        if not self.ready:
            return super().group_k(batch)
        q25, q50, q75 = (self.digest.quantile(q) for q in (0.25, 0.5, 0.75))
        mu = torch.nan_to_num(self.prompt_means(batch), nan=-math.inf)
        k = torch.tensor(self.k_by_quartile, dtype=torch.long)
        index = (mu >= q25).long() + (mu >= q50).long() + (mu >= q75).long()
        return k[index].clamp(max=batch.group_size)

    def update(self, batch: GroupBatch) -> None:
        self.digest.add(self.prompt_means(batch).tolist())
        self.steps += 1

    def state_dict(self) -> dict:
        return {"steps": self.steps, "digest": self.digest.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.steps = int(state["steps"])
        self.digest.load_state_dict(state["digest"])


@COMPLETION_FILTERS.register("gfpo")
class GFPOFilter:
    """Completion filter `"gfpo"`: masks the completions that the `gfpo`/`gfpo_adaptive` estimator dropped on the same
    batch (it reads the estimator's keep mask, so the two never disagree, adaptive `k` included).

    `filter_kwargs`: `loss_normalizer` (`"all"`, the paper's: keep the loss normaliser of all `G` rows, needs
    `GFPOTrainer`; or `"kept"`: normalise over the kept rows, as any other filter does).
    """

    def __init__(self, args, loss_normalizer: str = "all") -> None:
        estimator = getattr(args, "advantage_estimator", None)
        if estimator not in GFPO_ESTIMATORS:
            raise ValueError(
                f"completion_filter='gfpo' masks what advantage_estimator 'gfpo' or 'gfpo_adaptive' dropped, got "
                f"advantage_estimator={estimator!r}; to mask the shortest k without kept-set advantages use "
                "completion_filter='shortest_k'."
            )
        if loss_normalizer not in ("all", "kept"):
            raise ValueError(f"filter_kwargs['loss_normalizer'] must be 'all' or 'kept', got {loss_normalizer!r}.")
        self.loss_normalizer = loss_normalizer

    def __call__(self, batch: GroupBatch) -> torch.Tensor:
        keep = batch.extras.get(KEEP_KEY)
        if keep is None:
            raise RuntimeError("completion_filter='gfpo' found no keep mask: the gfpo estimator must run first.")
        return keep


class GFPOTrainer(EfficientGRPOTrainer):
    """`EfficientGRPOTrainer` that also logs the mean `k` (`trl_efficient/gfpo/mean_k`). The filter's
    `loss_normalizer="all"` (the paper's DAPO aggregation over all `G` rows) is honoured by the base trainer's
    `apply_filter`, so GFPO also works in a plain `EfficientGRPOTrainer`."""

    # Pipeline step 4 (`EfficientGRPOTrainer.log_group_metrics`): the estimator's `k` of this batch, after the base
    # metrics.
    def log_group_metrics(self, batch: GroupBatch, output: dict) -> None:
        super().log_group_metrics(batch, output)
        k = getattr(self.advantage_estimator, "last_k", None)
        if k is not None:
            metric_buffer(self, batch.mode)["trl_efficient/gfpo/mean_k"].append(k.float().mean().item())
