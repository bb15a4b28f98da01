"""Completion filters (hook (d)): choose rows to remove from the loss, after the whole group is known.

A filter is `(batch: GroupBatch, **kwargs) -> torch.BoolTensor (B,)` (True = keep). The trainer *masks* rather than
drops (docs/trl-integration.md §6): removed rows get a zero `completion_mask` and zero advantage, the row count is
unchanged
(so TRL's shuffle and split keep working), and `num_items_in_batch` is recomputed.
"""

from __future__ import annotations

import torch

from ..core.registry import Registry
from .group import GroupBatch

COMPLETION_FILTERS: Registry = Registry("completion filter", providers=("trl_efficient.methods",))


@COMPLETION_FILTERS.register("zero_std")
def zero_std_filter(batch: GroupBatch, tol: float = 1e-6) -> torch.Tensor:
    """DAPO dynamic sampling without resampling (arXiv 2503.14476; methods.md §31): drop every group whose total
    rewards are all equal, since it carries no group-relative signal.

    >>> b = GroupBatch(rewards=torch.tensor([[1.0], [0.0], [1.0], [1.0]]), reward_names=["r"],
    ...                reward_weights=torch.ones(1), lengths=torch.ones(4), truncated=torch.zeros(4).bool(),
    ...                group_size=2)
    >>> zero_std_filter(b).tolist()
    [True, True, False, False]
    """
    r = batch.grouped(batch.total_reward())
    spread = torch.nan_to_num(r.nan_to_num(nan=torch.inf).amin(1) - r.nan_to_num(nan=-torch.inf).amax(1), nan=0.0)
    keep_group = spread.abs() > tol
    return keep_group.repeat_interleave(batch.group_size)


@COMPLETION_FILTERS.register("shortest_k")
class ShortestKFilter:
    """GFPO "Shortest k/G" (arXiv 2508.09726, §3): keep the `k` shortest completions of each group (stable ties).

    >>> from types import SimpleNamespace
    >>> f = ShortestKFilter(SimpleNamespace(num_generations=4), k=2)
    >>> b = GroupBatch(rewards=torch.zeros(4, 1), reward_names=["r"], reward_weights=torch.ones(1),
    ...                lengths=torch.tensor([5, 3, 9, 3]), truncated=torch.zeros(4).bool(), group_size=4)
    >>> f(b).tolist()
    [False, True, False, True]
    """

    def __init__(self, args, k: int = 8) -> None:
        if not 1 <= k <= args.num_generations:
            raise ValueError(f"filter_kwargs k must be in [1, num_generations={args.num_generations}], got {k}.")
        self.k = k

    def __call__(self, batch: GroupBatch) -> torch.Tensor:
        k = min(self.k, batch.group_size)  # eval groups may be smaller (num_generations_eval)
        order = batch.grouped(batch.lengths.float()).argsort(dim=1, stable=True)
        keep = torch.zeros_like(order, dtype=torch.bool).scatter_(1, order[:, :k], True)
        return keep.view(-1)
