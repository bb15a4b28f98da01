"""Advantage estimators (hook (c)): pure functions of a gathered `GroupBatch`, selected by name.

`"grpo"` means *TRL's own computation, untouched*: the trainer leaves `output["advantages"]` as TRL computed it
(including `scale_rewards` and `multi_objective_aggregation`, so GDPO is `normalize_then_sum`). Any other name
replaces it: the estimator returns global `(B,)` advantages, the trainer replaces NaN by 0 and takes this process's
slice exactly as TRL does (`grpo_trainer.py`, ~:2813). TRL's logged `advantages` column then shows the base
computation (docs/trl-integration.md §5); ours is logged as `trl_efficient/advantage_mean|std`.

Every estimator has the signature `(batch: GroupBatch, **kwargs) -> torch.Tensor` and must return zeros, never
NaN, for a group whose rewards are all equal.
"""

from __future__ import annotations

import torch

from ..core.registry import Registry
from .group import GroupBatch

ADVANTAGE_ESTIMATORS: Registry = Registry("advantage estimator", providers=("trl_efficient.methods",))
TRL_DEFAULT = "grpo"
EPS = 1e-4  # TRL's epsilon in (r - mean) / (std + eps)


def _nanstd(x: torch.Tensor, dim=None, keepdim=False) -> torch.Tensor:
    """Sample std ignoring NaN (Bessel-corrected, as torch.std and TRL's nanstd)."""
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    count = (
        (~torch.isnan(x)).sum(dim=dim, keepdim=True).clamp(min=2)
        if dim is not None
        else max((~torch.isnan(x)).sum().item(), 2)
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
def group_center_batch_whiten(
    batch: GroupBatch, eps: float = 1e-8, token_weighted: bool = True, exclude: torch.Tensor | None = None
) -> torch.Tensor:
    r"""Group-centred rewards whitened over the whole batch: verl's `reinforce_plus_plus_baseline` outcome advantage
    (`verl/trainer/ppo/core_algos.py`, `compute_reinforce_plus_plus_baseline_outcome_advantage`), which DLER uses
    (arXiv 2510.15110, methods.md §4):
    $$ \tilde A_i = r_i - \mathrm{mean}_{g(i)}\, r, \qquad A_i = (\tilde A_i - \mu)\,(\sigma^2 + \epsilon)^{-1/2} $$
    The whitening is verl's `masked_whiten(values, response_mask)` (`verl/utils/torch_functional.py`): $\tilde A_i$
    is broadcast to every response token, $\mu$ is the mean over the batch's response tokens and $\sigma^2$ their
    **Bessel-corrected** variance (`masked_var(..., unbiased=True)`: the sum of squared deviations over $N - 1$, $N$
    the number of tokens), and $\epsilon$ (1e-8) is added to the variance inside the `rsqrt`. Each row counts with
    its length in tokens when `token_weighted`, else once ($N$ = number of rows). Rows in `exclude` (a `(B,)` bool
    mask, e.g. groups dynamic sampling drops) and unscorable rows are left out of $\mu, \sigma^2$ and get 0.
    Differs from TRL's `scale_rewards="batch"`, which is row-weighted and divides by the std of the raw rewards.

    >>> b = GroupBatch(rewards=torch.tensor([[1.0], [0.0], [1.0], [1.0]]), reward_names=["r"],
    ...                reward_weights=torch.ones(1), lengths=torch.tensor([1, 1, 1, 1]),
    ...                truncated=torch.zeros(4, dtype=torch.bool), group_size=2)
    >>> group_center_batch_whiten(b)   # centred [0.5, -0.5, 0, 0]; 4 tokens: mean 0, var 0.5/3, 0.5 * sqrt(6) = 1.2247
    tensor([ 1.2247, -1.2247,  0.0000,  0.0000])
    """
    r = batch.total_reward()
    grouped = r.view(-1, batch.group_size)
    centred = torch.nan_to_num(grouped - torch.nanmean(grouped, dim=1, keepdim=True), nan=0.0).view(-1)
    dropped = torch.isnan(r) if exclude is None else torch.isnan(r) | exclude
    weight = batch.lengths.float().clamp(min=1) if token_weighted else torch.ones_like(centred)
    weight = torch.where(dropped, torch.zeros_like(weight), weight)
    total = weight.sum()
    mean = (weight * centred).sum() / total.clamp(min=1e-12)
    # masked_var(unbiased=True): sum of squared deviations / (N - 1); N < 2 only when nothing is left to whiten,
    # and then every row is zeroed below anyway.
    var = (weight * (centred - mean) ** 2).sum() / (total - 1).clamp(min=1.0)
    adv = (centred - mean) * torch.rsqrt(var + eps)
    return torch.where(dropped, torch.zeros_like(adv), adv)


def finalize_advantages(advantages: torch.Tensor, num_rows: int) -> torch.Tensor:
    """Check the row count and replace NaN/inf by 0 (an estimator must never produce NaN advantages)."""
    if advantages.shape[0] != num_rows:
        raise ValueError(f"The advantage estimator returned {advantages.shape[0]} rows, expected {num_rows}.")
    return torch.nan_to_num(advantages.float(), nan=0.0, posinf=0.0, neginf=0.0)
