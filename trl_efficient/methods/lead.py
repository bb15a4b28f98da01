r"""GRPO-LEAD difficulty-aware advantage reweighting (arXiv 2504.09696; methods.md §15; `aeroplanepaper/GRPO-LEAD`,
`core_algos.py`: `compute_grpo_outcome_advantage`, `logistic_reweight`).

$$ \hat A_i = \frac{R_i - \mathrm{mean}_{g(i)} R}{\mathrm{std}_{g(i)} R + 10^{-6}}, \qquad
   A_i = \begin{cases} \hat A_i\, w(\rho) & \hat A_i > 0 \\ \hat A_i\, w(1 - \rho) & \text{otherwise} \end{cases},
   \qquad w(x) = 0.4 + \frac{1.1}{1 + e^{10 (x - 0.75)}} $$

with std the sample (Bessel) std and $\rho$ the fraction of the group's scorable rollouts with a positive reward
(the solve rate under the GRPO-LEAD reward, `trl_efficient.rewards.get_lead_reward`, which does the length shaping
on gathered groups). Correct answers on hard prompts get up to 1.5x, wrong answers on easy prompts up to 1.5x.
Registered as advantage estimator `"grpo_lead"`.
"""

from __future__ import annotations

import torch

from ..core.checks import check_number as _check_number
from ..trainer import ADVANTAGE_ESTIMATORS, GroupBatch

__all__ = ["LEADAdvantage", "lead_advantages", "logistic_weight"]


def logistic_weight(
    x: torch.Tensor, w_min: float = 0.4, w_max: float = 1.5, center: float = 0.75, slope: float = 10.0
) -> torch.Tensor:
    """`w(x) = w_min + (w_max - w_min) / (1 + exp(slope (x - center)))` (`logistic_reweight`).

    >>> logistic_weight(torch.tensor([0.0, 0.5, 0.75, 1.0]))
    tensor([1.4994, 1.4166, 0.9500, 0.4834])
    """
    return w_min + (w_max - w_min) / (1 + torch.exp(slope * (x - center)))


def lead_advantages(
    total: torch.Tensor,
    group_size: int,
    eps: float = 1e-6,
    w_min: float = 0.4,
    w_max: float = 1.5,
    center: float = 0.75,
    slope: float = 10.0,
) -> torch.Tensor:
    """`(B,)` GRPO-LEAD advantages from the `(B,)` total rewards. NaN rows are left out and get 0; so does a group
    with fewer than two scorable rows (the repository gives a lone sample `R / 1`; that only happens in evaluation).

    >>> lead_advantages(torch.tensor([1.0, 1.0, -1.0, -1.0]), 4)  # A-hat +/-0.8660, rho 0.5, w(0.5) = 1.4166
    tensor([ 1.2268,  1.2268, -1.2268, -1.2268])
    """
    r = total.float().view(-1, group_size)
    valid = ~torch.isnan(r)
    count = valid.sum(dim=1, keepdim=True)
    mean = torch.nansum(r, dim=1, keepdim=True) / count.clamp(min=1)
    std = (torch.nansum((r - mean) ** 2, dim=1, keepdim=True) / (count - 1).clamp(min=1)).sqrt()
    a_hat = (r - mean) / (std + eps)
    rho = ((r > 0) & valid).sum(dim=1, keepdim=True) / count.clamp(min=1)
    weight = torch.where(
        a_hat > 0,
        logistic_weight(rho, w_min, w_max, center, slope),
        logistic_weight(1 - rho, w_min, w_max, center, slope),
    )
    adv = a_hat * weight
    return torch.where(valid & (count > 1), adv, torch.zeros_like(adv)).view(-1)


@ADVANTAGE_ESTIMATORS.register("grpo_lead")
class LEADAdvantage:
    """Advantage estimator `"grpo_lead"` (module docstring). `advantage_kwargs`: `eps` (1e-6), `w_min` (0.4), `w_max`
    (1.5), `center` (0.75), `slope` (10), all repository values. No truncation rule (the paper and
    `compute_grpo_outcome_advantage` have none); a group whose rewards are all equal gets 0 from the formula."""

    def __init__(
        self, args, eps: float = 1e-6, w_min: float = 0.4, w_max: float = 1.5, center: float = 0.75, slope: float = 10.0
    ) -> None:
        for name, value in (("eps", eps), ("w_min", w_min), ("w_max", w_max), ("center", center), ("slope", slope)):
            _check_number(f"advantage_kwargs['{name}']", value)
        if eps < 0 or w_min < 0 or w_max < w_min:
            raise ValueError(
                f"advantage_kwargs needs eps >= 0 and 0 <= w_min <= w_max, got eps={eps}, w_min={w_min}, w_max={w_max}."
            )
        self.kwargs = dict(
            eps=float(eps), w_min=float(w_min), w_max=float(w_max), center=float(center), slope=float(slope)
        )

    def __call__(self, batch: GroupBatch) -> torch.Tensor:
        return lead_advantages(batch.total_reward(), batch.group_size, **self.kwargs)
