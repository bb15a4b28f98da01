r"""
HBPO: Hierarchical Budget Policy Optimization (Lyu et al., arXiv 2507.15844; methods.md §2).

The `G` rollouts of a prompt are split into `K` contiguous subgroups, each told a different token budget
(`rollout_plan="budget"`, `BudgetRolloutPlan`: by default the assistant prefill
`"<think> I will answer the question with {b} tokens"` for budgets 512/1024/2048/2560). HBPO has three parts:

1. the budget prefill per subgroup: `BudgetRolloutPlan` (trainer hook (a)); the vLLM server-mode de-duplication
   fix (`n = G // K`) is in `EfficientGRPOTrainer._generate_single_turn`;
2. the budget-aware reward: `trl_efficient.rewards.budget.get_hbpo_reward` (length includes the prefill);
3. the advantage with a per-subgroup term, here: `advantage_estimator="hbpo"`,
   $$ A_i = \underbrace{\frac{R_i - \mu_g}{\sigma_g + \epsilon}}_{A_{\text{inter}}}
      + \underbrace{\mu_{b(i)} - f_2(b(i))}_{A_{\text{intra}}}, \qquad f_2(b) = \beta\cos\frac{\pi b}{2L_{\max}} $$
   with $\mu_g, \sigma_g$ the mean and (Bessel) std of the group's rewards and $\mu_b$ the mean reward of the
   rollout's budget subgroup (paper §3.3). `variant="released_code"` reproduces the released code, which adds
   $A_{\text{intra}}$ twice ($A_{\text{inter}} + 2A_{\text{intra}}$).

`advantage_kwargs` is the one home of HBPO's constants: the `hbpo` reward builder (recipes/budget.py) reads
`beta`, `alpha`, `l_max` and `variant` from it, so reward and advantage always agree.

Departure from the paper (documented, switchable): a group whose rewards are all equal (e.g. all truncated, all
wrong) gets advantage 0 (`zero_equal_groups=True`), as every estimator here does. The paper's formula would give
such a group the non-zero $A_{\text{intra}} = R - f_2(b)$ on every rollout, pushing all of them down by up to ~5;
pass `zero_equal_groups=False` for the literal formula.

`HBPOTrainer` is `EfficientGRPOTrainer` plus HBPO's per-subgroup metrics (`trl_efficient/budget_<b>/reward`,
`trl_efficient/budget_<b>/intra_advantage`, next to the trainer's `mean_length` and `accuracy`) and a check for a
chat template that already opens `<think>` before the prefill.
"""

from __future__ import annotations

import logging
import math

import torch

from ..rewards.budget import HBPO_ALPHA, HBPO_BETA, HBPO_L_MAX, HBPO_VARIANTS
from ..trainer.advantages import ADVANTAGE_ESTIMATORS, group_zscore
from ..trainer.group import GroupBatch
from ..trainer.rollout import ROLLOUT_PLANS, BudgetRolloutPlan
from ..trainer.trainer import EfficientGRPOTrainer
from ..trainer.trl_internals import metric_buffer

logger = logging.getLogger(__name__)

__all__ = ["HBPOAdvantage", "HBPOTrainer", "hbpo_advantages", "hbpo_settings", "subgroup_mean"]

HBPO_EPS = 1e-6  # released code: (R - mean) / (std + 1e-6)
_EQUAL_TOL = 1e-6


def subgroup_mean(values: torch.Tensor, labels: torch.Tensor, group_size: int) -> torch.Tensor:
    """`(B,)` mean of `values` over the rows of the same group with the same label (NaN values left out; NaN
    where a subgroup has no value, or where the row's label is NaN).

    >>> subgroup_mean(torch.tensor([1.0, 3.0, 0.0, float("nan")]), torch.tensor([512.0, 512.0, 1024.0, 1024.0]), 4)
    tensor([2., 2., 0., 0.])
    """
    v = values.float().view(-1, group_size)
    lab = labels.float().view(-1, group_size)
    same = lab[:, :, None] == lab[:, None, :]  # (N, G, G); NaN labels match nothing
    valid = ~torch.isnan(v)
    member = same & valid[:, None, :]
    total = (member * torch.nan_to_num(v, nan=0.0)[:, None, :]).sum(-1)
    count = member.sum(-1)
    mean = torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, torch.nan))
    return mean.view(-1)


def hbpo_advantages(
    rewards: torch.Tensor,
    budgets: torch.Tensor,
    group_size: int,
    beta: float = HBPO_BETA,
    l_max: float = HBPO_L_MAX,
    variant: str = "paper",
    eps: float = HBPO_EPS,
    zero_equal_groups: bool = True,
) -> torch.Tensor:
    r"""
    HBPO advantages $A = A_{\text{inter}} + w\,A_{\text{intra}}$ (module docstring), $w = 1$ for
    `variant="paper"` and $2$ for `"released_code"`.

    `rewards` and `budgets` are `(B,)` in whole groups of `group_size` (NaN reward: unscorable row, left out of the
    statistics, advantage 0; NaN budget: no subgroup term). Rows of a group whose rewards are all equal get 0 when
    `zero_equal_groups`. Never returns NaN.

    >>> r = torch.tensor([3.92, 0.0, 2.22, 2.22])          # budgets 512, 512, 2560, 2560
    >>> a = hbpo_advantages(r, torch.tensor([512.0, 512.0, 2560.0, 2560.0]), 4)
    >>> # inter = (r - 2.09) / 1.6074; intra: mu_512 - f2(512) = 1.96 - 3.9231, mu_2560 - f2(2560) = 2.22 - 2.2223
    >>> [round(x, 4) for x in a.tolist()]
    [-0.8246, -3.2634, 0.0786, 0.0786]
    """
    if variant not in HBPO_VARIANTS:
        raise ValueError(f"variant must be one of {HBPO_VARIANTS}, got {variant!r}.")
    rewards = rewards.float()
    budgets = budgets.float()
    inter = group_zscore(rewards, group_size, eps)  # NaN-aware; unscorable rows 0
    ceiling = beta * torch.cos(math.pi * budgets / (2.0 * l_max))
    intra = subgroup_mean(rewards, budgets, group_size) - ceiling
    intra = torch.nan_to_num(intra, nan=0.0)
    weight = 2.0 if variant == "released_code" else 1.0
    adv = inter + weight * intra
    adv = torch.where(torch.isnan(rewards), torch.zeros_like(adv), adv)
    if zero_equal_groups:
        adv = torch.where(_unequal_groups(rewards, group_size), adv, torch.zeros_like(adv))
    return torch.nan_to_num(adv, nan=0.0, posinf=0.0, neginf=0.0)


def _unequal_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """`(B,)` True on rows of groups whose scorable rewards are not all equal (False: all equal, or none scorable)."""
    grouped = rewards.float().view(-1, group_size)
    high = torch.nan_to_num(grouped, nan=-torch.inf).amax(1)
    low = torch.nan_to_num(grouped, nan=torch.inf).amin(1)
    spread = high - low  # -inf when nothing is scorable
    return (spread > _EQUAL_TOL).repeat_interleave(group_size)


@ADVANTAGE_ESTIMATORS.register("hbpo")
class HBPOAdvantage:
    r"""`advantage_estimator="hbpo"`: HBPO's inter-group z-score plus the budget-subgroup term (`hbpo_advantages`).

    Built from the config with `advantage_kwargs`, which is also where the `hbpo` reward builder reads HBPO's
    reward constants, so both always agree:

    Args:
        beta (`float`, *optional*, defaults to `4.0`): $\beta$ of the reward and of $f_2(b)$.
        alpha (`float`, *optional*, defaults to `1/4096`): the reward's overshoot slope (per token); checked here,
            used by the reward.
        l_max (`int`, *optional*, defaults to `4096`): $L_{\max}$ in tokens.
        variant (`str`, *optional*, defaults to `"paper"`): `"paper"` ($A_{\text{inter}} + A_{\text{intra}}$) or
            `"released_code"` ($A_{\text{inter}} + 2A_{\text{intra}}$; the reward then uses the code's min form).
        eps (`float`, *optional*, defaults to `1e-6`): the z-score's epsilon (released code).
        zero_equal_groups (`bool`, *optional*, defaults to `True`): all-equal groups get advantage 0.

    Config-time checks (errors name the field): the rollout plan must give rows a `budget` (`rollout_plan`), and
    every budget must be in `(0, l_max]`: beyond $L_{\max}$ the ceiling $f_2(b)$ is negative, so a correct answer
    within budget would score below a wrong one (`budgets`, `advantage_kwargs.l_max`).
    """

    def __init__(self, args, beta: float = HBPO_BETA, alpha: float = HBPO_ALPHA, l_max: int = HBPO_L_MAX,
                 variant: str = "paper", eps: float = HBPO_EPS, zero_equal_groups: bool = True) -> None:  # fmt: skip
        for name, value in (("beta", beta), ("alpha", alpha), ("eps", eps)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"advantage_kwargs {name} must be a finite number, got {value!r}.")
        if beta <= 0:
            raise ValueError(f"advantage_kwargs beta must be > 0, got {beta!r}.")
        if alpha < 0 or eps < 0:
            raise ValueError(f"advantage_kwargs alpha and eps must be >= 0, got alpha={alpha!r}, eps={eps!r}.")
        if isinstance(l_max, bool) or not isinstance(l_max, int) or l_max <= 0:
            raise ValueError(f"advantage_kwargs l_max must be a positive int (tokens), got {l_max!r}.")
        if variant not in HBPO_VARIANTS:
            raise ValueError(f"advantage_kwargs variant must be one of {HBPO_VARIANTS}, got {variant!r}.")
        if not isinstance(zero_equal_groups, bool):
            raise ValueError(f"advantage_kwargs zero_equal_groups must be a bool, got {zero_equal_groups!r}.")
        plan = getattr(args, "rollout_plan", None)
        if plan is None or "budget" not in getattr(ROLLOUT_PLANS.get(plan), "metadata_keys", ()):
            raise ValueError(
                f"advantage_estimator='hbpo' needs budget subgroups: set rollout_plan='budget' (with budgets), "
                f"got rollout_plan={plan!r}."
            )
        budgets = list(getattr(args, "budgets", None) or [])
        too_big = [b for b in budgets if int(b) > l_max]
        if too_big:
            raise ValueError(
                f"budgets {too_big} exceed HBPO's L_max ({l_max}, advantage_kwargs l_max): beyond L_max the reward "
                f"ceiling beta*cos(pi*b/(2*L_max)) is negative, so a correct answer would score below a wrong one. "
                "Lower the budgets or raise advantage_kwargs l_max."
            )
        self.beta, self.alpha, self.l_max, self.variant = float(beta), float(alpha), int(l_max), variant
        self.eps, self.zero_equal_groups = float(eps), zero_equal_groups

    def __call__(self, batch: GroupBatch) -> torch.Tensor:
        budgets = batch.metadata.get("budget")
        if budgets is None:
            raise ValueError(
                "advantage_estimator='hbpo' found no `budget` metadata in the batch (needs rollout_plan='budget')."
            )
        budgets = torch.tensor([float("nan") if b is None else float(b) for b in budgets])
        return hbpo_advantages(
            batch.total_reward(),
            budgets,
            batch.group_size,
            self.beta,
            self.l_max,
            self.variant,
            self.eps,
            self.zero_equal_groups,
        )

    def intra_terms(self, batch: GroupBatch) -> dict:
        """Mean $A_{\\text{intra}} = \\mu_b - f_2(b)$ per budget over the rollouts that receive it (groups zeroed by
        `zero_equal_groups` left out), for metrics."""
        budgets = batch.metadata.get("budget") or []
        labels = torch.tensor([float("nan") if b is None else float(b) for b in budgets])
        if labels.numel() == 0:
            return {}
        total = batch.total_reward()
        means = subgroup_mean(total, labels, batch.group_size)
        applied = torch.ones_like(labels, dtype=torch.bool)
        if self.zero_equal_groups:
            applied = _unequal_groups(total, batch.group_size)
        out = {}
        for b in sorted({b for b in budgets if b is not None}):
            mask = (labels == float(b)) & applied
            if not mask.any():
                continue
            ceiling = self.beta * math.cos(math.pi * b / (2.0 * self.l_max))
            value = torch.nanmean(means[mask]).item() - ceiling
            if value == value:
                out[b] = value
        return out


def hbpo_settings(args) -> dict:
    """HBPO's reward constants (`beta`, `alpha`, `l_max`, `variant`) from `args.advantage_kwargs` when
    `advantage_estimator="hbpo"`, else `{}` (the reward's own defaults apply).

    >>> from types import SimpleNamespace
    >>> hbpo_settings(SimpleNamespace(advantage_estimator="hbpo", advantage_kwargs={"beta": 2.0, "eps": 1e-6}))
    {'beta': 2.0}
    """
    if getattr(args, "advantage_estimator", None) != "hbpo":
        return {}
    kwargs = getattr(args, "advantage_kwargs", None) or {}
    return {k: kwargs[k] for k in ("beta", "alpha", "l_max", "variant") if k in kwargs}


class HBPOTrainer(EfficientGRPOTrainer):
    """`EfficientGRPOTrainer` with HBPO's per-budget metrics and a prefill/chat-template check.

    Logs, per budget `b` and generation batch: `trl_efficient/budget_<b>/reward` (mean total reward of the
    subgroup) and, with `advantage_estimator="hbpo"`, `trl_efficient/budget_<b>/intra_advantage` (mean
    $\\mu_b - f_2(b)$). The base trainer already logs `trl_efficient/budget_<b>/mean_length` (completion tokens,
    prefill excluded) and `.../accuracy`.
    """

    _tag_names = ["trl", "grpo", "trl-efficient", "hbpo"]
    _name = "HBPO"
    _paper = {"title": "Hierarchical Budget Policy Optimization for Adaptive Reasoning", "id": "2507.15844"}

    def __init__(self, *args, group_stages=None, **kwargs) -> None:
        super().__init__(*args, group_stages=[*(group_stages or []), self._log_hbpo_metrics], **kwargs)
        self._check_prefill_template()

    def _check_prefill_template(self) -> None:
        plan = self.rollout_plan
        if not isinstance(plan, BudgetRolloutPlan) or plan.placement != "prefill":
            return
        if not plan.template.lstrip().startswith("<think>"):
            return
        try:
            rendered = self._render_chat([{"role": "user", "content": "1 + 1?"}])
        except (ValueError, AttributeError, TypeError):  # a processor without a chat template: nothing to check
            return
        if rendered.rstrip().endswith("<think>"):
            logger.warning(
                "The chat template's generation prompt already ends with '<think>' and budget_template %r starts with "
                "it, so every prompt opens <think> twice (recent R1-Distill templates). Drop the leading '<think>' "
                "from budget_template, e.g. budget_template='I will answer the question with {budget} tokens'.",
                plan.template,
            )

    def _log_hbpo_metrics(self, batch: GroupBatch, trainer) -> None:
        metrics = metric_buffer(self, batch.mode)
        total = batch.total_reward()
        for b, value in batch.subgroup_means("budget", total).items():
            if value == value:
                metrics[f"trl_efficient/budget_{b}/reward"].append(value)
        if isinstance(self.advantage_estimator, HBPOAdvantage):
            for b, value in self.advantage_estimator.intra_terms(batch).items():
                metrics[f"trl_efficient/budget_{b}/intra_advantage"].append(value)
