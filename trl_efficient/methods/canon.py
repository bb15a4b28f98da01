r"""CANON, Conditional Advantage Estimation (arXiv 2509.23962, ICLR 2026; methods.md §26; `biuboomc/CANON`,
`core_algos.py`: `compute_dr_length_on_mean_group_outcome_advantage`), length-conditioned regrouping.

Each group is sorted by completion length (stable: ties keep the lower index first) and split into a lower half
(the first $\lfloor n/2 \rfloor$, shorter) and an upper half (the rest, so an odd group's extra sample is upper).
With $\bar r_{lo}, \bar r_{up}$ the halves' mean rewards:

$$ A_i^{up} = \mu\,(\alpha r_i - \bar r_{lo} + \beta) + (1 - \mu)(r_i - \bar r_{up}), \qquad
   A_i^{lo} = \mu\,(r_i - \alpha \bar r_{up} - \beta) + (1 - \mu)(r_i - \bar r_{lo}) $$

$\mu = 1$ compares each response with the *other* half (inter-group), $\mu = 0$ with its own half (intra-group);
$\alpha < 1$ biases towards the shorter half. The repository divides by `max_len` (8192), which only suits a
sum-style loss; we divide only on request (`normalize_by_max_length`), never together with `loss_type="dr_grpo"`
(which already divides by `max_completion_length`). Registered as advantage estimator `"canon"`.

**Entropy variant** (methods.md §26, "a metric (length, or token entropy)"): `advantage_kwargs: {metric: entropy}`
sorts each group by the mean per-token entropy of each completion under the policy at generation time instead of its
length (lower half: the less uncertain completions; $\alpha < 1$ then favours them), same formulas. The entropies come
from the one entropy source, `TokenEntropyTrainer` (`methods/entropy.py`, `batch.extras["mean_token_entropy"]`);
recipe `canon-entropy`. With `metric: entropy` on a trainer that does not provide them, construction fails naming
the trainer class. The paper's $\mu$ schedules (anneal, cosine restart) for this variant are left out: $\mu$ is fixed.

Deviation (edge rule of this package): a group whose scorable rewards are all equal (or that has none) gets 0 even
when `alpha != 1` or `beta != 0` would give its halves a constant push. Truncation plays no part (the paper and the
repository have no truncation rule): a group of truncated completions whose rewards differ is trained on.
"""

from __future__ import annotations

import torch

from ..core.checks import check_number as _check_number
from ..trainer import ADVANTAGE_ESTIMATORS, GroupBatch
from ..trainer.state import provided_columns
from .dler import signal_free_groups
from .entropy import ENTROPY_COLUMN

__all__ = ["CANONAdvantage", "canon_advantages"]


def canon_advantages(
    total: torch.Tensor, lengths: torch.Tensor, group_size: int, alpha: float = 1.0, mu: float = 1.0, beta: float = 0.0
) -> torch.Tensor:
    """`(B,)` CANON advantages (before any `/max_len`); `lengths` is the conditioning metric (lengths, or mean token
    entropies for the entropy variant). Unscorable (NaN) rows are left out of the halves and get 0;
    a group with fewer than two scorable rows gets 0.

    >>> canon_advantages(torch.tensor([1., 1., 0., 1.]), torch.tensor([10., 20., 30., 40.]), 4)
    tensor([ 0.5000,  0.5000, -1.0000,  0.0000])
    """
    r = total.float().view(-1, group_size)
    L = lengths.float().view(-1, group_size)
    out = torch.zeros_like(r)
    for g in range(r.shape[0]):
        scorable = [i for i in range(group_size) if not torch.isnan(r[g, i])]
        if len(scorable) < 2:
            continue
        order = sorted(scorable, key=lambda i: float(L[g, i]))  # Python's sort is stable: ties keep index order
        mid = len(order) // 2
        lower, upper = order[:mid], order[mid:]
        mean_lo = r[g, lower].mean()
        mean_up = r[g, upper].mean()
        for i in upper:
            out[g, i] = mu * (alpha * r[g, i] - mean_lo + beta) + (1 - mu) * (r[g, i] - mean_up)
        for i in lower:
            out[g, i] = mu * (r[g, i] - alpha * mean_up - beta) + (1 - mu) * (r[g, i] - mean_lo)
    return out.view(-1)


@ADVANTAGE_ESTIMATORS.register("canon")
class CANONAdvantage:
    """Advantage estimator `"canon"` (module docstring). `advantage_kwargs`: `alpha` (1.0), `mu` (1.0, in [0, 1]),
    `beta` (0.0), `normalize_by_max_length` (False; True divides by `max_completion_length`, as the repository's
    `/max_len` with a sum-style loss), `metric` (`"length"`, or `"entropy"`: the mean token entropy from
    `TokenEntropyTrainer`)."""

    METRICS = ("length", "entropy")

    def __init__(
        self,
        args,
        alpha: float = 1.0,
        mu: float = 1.0,
        beta: float = 0.0,
        normalize_by_max_length: bool = False,
        metric: str = "length",
    ) -> None:
        if metric not in self.METRICS:
            raise ValueError(f"advantage_kwargs['metric'] must be one of {list(self.METRICS)}, got {metric!r}.")
        self.metric = metric
        _check_number("advantage_kwargs['alpha']", alpha)
        _check_number("advantage_kwargs['mu']", mu, 0.0, 1.0)
        _check_number("advantage_kwargs['beta']", beta)
        if not isinstance(normalize_by_max_length, bool):
            raise ValueError(
                f"advantage_kwargs['normalize_by_max_length'] must be a bool, got {normalize_by_max_length!r}."
            )
        self.scale = 1.0
        if normalize_by_max_length:
            if getattr(args, "loss_type", None) == "dr_grpo":
                raise ValueError(
                    "advantage_kwargs['normalize_by_max_length']=True with loss_type='dr_grpo' divides by "
                    "max_completion_length twice; drop one of the two."
                )
            self.scale = 1.0 / float(args.max_completion_length)
        self.alpha, self.mu, self.beta = float(alpha), float(mu), float(beta)

    def attach(self, trainer) -> None:
        """With `metric: entropy`, check that the trainer provides the entropies (`TokenEntropyTrainer`)."""
        if self.metric == "entropy" and ENTROPY_COLUMN not in provided_columns(trainer):
            raise ValueError(
                f"advantage_kwargs['metric']='entropy' needs per-token entropies, which {type(trainer).__name__} does "
                "not provide; use trainer_cls 'trl_efficient.methods.entropy:TokenEntropyTrainer' (recipe "
                "canon-entropy)."
            )

    def conditioning_metric(self, batch: GroupBatch) -> torch.Tensor:
        """`(B,)` values each group is split by: lengths, or `batch.extras["mean_token_entropy"]`."""
        if self.metric == "length":
            return batch.lengths
        values = batch.extras.get(ENTROPY_COLUMN)
        if values is None:
            raise RuntimeError(
                f"CANON metric 'entropy' found no batch.extras[{ENTROPY_COLUMN!r}]; run it on TokenEntropyTrainer."
            )
        return torch.as_tensor(values, dtype=torch.float32)

    def __call__(self, batch: GroupBatch) -> torch.Tensor:
        metric = self.conditioning_metric(batch)
        adv = canon_advantages(batch.total_reward(), metric, batch.group_size, self.alpha, self.mu, self.beta)
        flat = signal_free_groups(batch).repeat_interleave(batch.group_size)
        return torch.where(flat, torch.zeros_like(adv), adv * self.scale)
