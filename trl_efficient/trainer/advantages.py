"""Advantage estimators (hook (c)): pure functions of a gathered `GroupBatch`, selected by name.

`"grpo"` means *TRL's own computation, untouched*: the trainer leaves `output["advantages"]` as TRL computed it
(including `scale_rewards` and `multi_objective_aggregation`, so GDPO is `normalize_then_sum`). Any other name
replaces it: the estimator returns global `(B,)` advantages, the trainer replaces NaN by 0 and takes this process's
slice exactly as TRL does (`grpo_trainer.py`, ~:2813). TRL's logged `advantages` column then shows the base
computation (trl-hooks.md §5); ours is logged as `trl_efficient/advantage_mean|std`.

Every estimator has the signature `(batch: GroupBatch, **kwargs) -> torch.Tensor` and must return zeros, never
NaN, for a group whose rewards are all equal.
"""

from __future__ import annotations

import torch

from .._registry import Registry
from .group import GroupBatch

ADVANTAGE_ESTIMATORS: Registry = Registry("advantage estimator")
TRL_DEFAULT = "grpo"
EPS = 1e-4  # TRL's epsilon in (r - mean) / (std + eps)


def _nanstd(x: torch.Tensor, dim=None, keepdim=False) -> torch.Tensor:
    """Sample std ignoring NaN (Bessel-corrected, as torch.std and TRL's nanstd)."""
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    count = (~torch.isnan(x)).sum(dim=dim, keepdim=True).clamp(min=2) if dim is not None else max(
        (~torch.isnan(x)).sum().item(), 2
    )
    var = torch.nansum((x - mean) ** 2, dim=dim, keepdim=True) / (count - 1)
    std = var.sqrt()
    return std if keepdim or dim is None else std.squeeze(dim)


def group_zscore(rewards: torch.Tensor, group_size: int, eps: float = EPS) -> torch.Tensor:
    r"""GRPO's group-normalised advantage (arXiv 2402.03300, §4.1.2):
    $$ A_i = \frac{r_i - \mathrm{mean}_{g(i)}\,r}{\mathrm{std}_{g(i)}\,r + \epsilon} $$
    NaN-aware (unscorable rows are left out of the statistics and get 0).

    >>> group_zscore(torch.tensor([1.0, 0.0, 1.0, 1.0]), 2)   # group 1: mean 0.5, std 0.7071
    tensor([ 0.7070, -0.7070,  0.0000,  0.0000])
    """
    grouped = rewards.view(-1, group_size)
    mean = torch.nanmean(grouped, dim=1, keepdim=True)
    std = _nanstd(grouped, dim=1, keepdim=True)
    return torch.nan_to_num((grouped - mean) / (std + eps), nan=0.0).view(-1)


@ADVANTAGE_ESTIMATORS.register("group_zscore")
def group_zscore_estimator(batch: GroupBatch, eps: float = EPS) -> torch.Tensor:
    """`group_zscore` of the weighted reward sum: the same numbers as TRL's default path with
    `scale_rewards="group"` (tested), as a base for estimators that post-process it."""
    return group_zscore(batch.total_reward(), batch.group_size, eps)


@ADVANTAGE_ESTIMATORS.register("group_center_batch_whiten")
def group_center_batch_whiten(batch: GroupBatch, eps: float = 1e-6, token_weighted: bool = True) -> torch.Tensor:
    r"""Group-centred rewards whitened over the whole batch (DLER, arXiv 2510.15110; verl's
    `reinforce_plus_plus_baseline`):
    $$ \tilde A_i = r_i - \mathrm{mean}_{g(i)}\, r, \qquad A_i = \frac{\tilde A_i - \mu}{\sigma + \epsilon} $$
    with $\mu, \sigma$ over all response **tokens** of the batch (each row weighted by its length) when
    `token_weighted`, else over rows. Differs from TRL's `scale_rewards="batch"`, which is row-weighted and divides
    by the std of the raw rewards (methods.md §4).

    >>> b = GroupBatch(rewards=torch.tensor([[1.0], [0.0], [1.0], [1.0]]), reward_names=["r"],
    ...                reward_weights=torch.ones(1), lengths=torch.tensor([1, 1, 1, 1]),
    ...                truncated=torch.zeros(4, dtype=torch.bool), group_size=2)
    >>> group_center_batch_whiten(b)   # centred [0.5, -0.5, 0, 0]; token mean 0, std sqrt(0.5/4)
    tensor([ 1.4142, -1.4142,  0.0000,  0.0000])
    """
    r = batch.total_reward()
    centred = torch.nan_to_num(r.view(-1, batch.group_size) - torch.nanmean(r.view(-1, batch.group_size), 1, True))
    centred = centred.view(-1)
    w = batch.lengths.float().clamp(min=1) if token_weighted else torch.ones_like(centred)
    w = torch.where(torch.isnan(r), torch.zeros_like(w), w)
    mean = (centred * w).sum() / w.sum().clamp(min=1e-12)
    var = (w * (centred - mean) ** 2).sum() / w.sum().clamp(min=1e-12)
    adv = (centred - mean) / (var.sqrt() + eps)
    return torch.where(torch.isnan(r), torch.zeros_like(adv), adv)


def finalize_advantages(advantages: torch.Tensor, num_rows: int) -> torch.Tensor:
    """Check the row count and replace NaN/inf by 0 (an estimator must never produce NaN advantages)."""
    if advantages.shape[0] != num_rows:
        raise ValueError(f"The advantage estimator returned {advantages.shape[0]} rows, expected {num_rows}.")
    return torch.nan_to_num(advantages.float(), nan=0.0, posinf=0.0, neginf=0.0)
