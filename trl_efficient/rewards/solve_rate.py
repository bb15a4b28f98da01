r"""
Solve-rate-gated length rewards: the length term's strength depends on how accurate the current group (ALP, ASRR)
or its rank among the batch's groups (GRPO-λ) is.

All three are `GroupLengthReward`s: every rank computes `(correct, length)` for its own rows, the rows are
all-gathered in rank order (`gather_rows`), and the reward is computed on whole groups of the global batch, so a group
that straddles processes is seen whole (methods.md "Cross-cutting implementation notes" 1). GRPO-λ ranks all groups
of the gathered generation batch in `_score_batch`.

Common conventions (as the other group rewards in `group.py`):
- A row whose gold answer cannot be parsed (`correct is None`) gets `None`; it counts as *not correct* in the group's
  solve rate / accuracy (the denominator is the group size `G`) and has no correct length. The gold is shared by the
  `G` rollouts of a prompt, so in practice a group is either wholly scorable or wholly unscorable.
- Lengths are measured by `LengthMeter` (`length_unit`, `length_scope`; tokens of the whole completion by default).

>>> reward = get_alp_reward(max_length=100, num_generations=2)
>>> reward(completions=[r"\boxed{1}", r"\boxed{2}"], solution=["1", "1"], completion_ids=[[0] * 40, [0] * 60])
[0.9, -0.15]
"""

from __future__ import annotations

import math
from typing import Any

from ..core.checks import check_number
from ..core.lengths import LengthMeter
from .group import GroupLengthReward, _check_num_generations

__all__ = [
    "ALP_PROPOSED_DEFAULTS",
    "ASRR_PROPOSED_DEFAULTS",
    "GRPO_LAMBDA_PROPOSED_DEFAULTS",
    "GRPO_LAMBDA_ROUNDINGS",
    "asrr_alpha",
    "get_alp_reward",
    "get_asrr_reward",
    "get_grpo_lambda_reward",
    "grpo_lambda_top_groups",
]

ALP_PROPOSED_DEFAULTS = (
    "ALP beta 0.5 and N = max_completion_length (proposed default; the paper's values are not confirmed)",
    "ALP unscorable rows (gold unparseable) get None and count as unsolved in p_solved (K = G)",
)
GRPO_LAMBDA_PROPOSED_DEFAULTS = (
    "GRPO-lambda alpha 0.6, lambda 0.2 (a third-party implementation; the paper's alpha is not confirmed)",
    "GRPO-lambda number of efficiency groups = ceil(lambda * number of groups in the gathered batch), ties in "
    "correctness ratio broken by group index (lower first)",
    "GRPO-lambda std_c: population std of the group's correct lengths (the paper does not say population or sample) "
    "+ eps 1e-6; std 1 with <= 1 correct answer",
)
ASRR_PROPOSED_DEFAULTS = (
    "ASRR eps 1e-6 in the accuracy gate",
    "ASRR length L = the generated completion only (the no-think prefix is a prompt prefill, not counted)",
)


def get_alp_reward(
    max_length: int,
    num_generations: int | None = None,
    beta: float = 0.5,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _ALPReward:
    r"""
    ALP, Adaptive Length Penalty ("Just Enough Thinking", arXiv 2506.05256; methods.md §14; no official code known).

    $$ p_\text{solved}(q) = \frac1K \sum_{k=1}^{K} \mathbb{1}[\text{answer}(y_k) = y^*], \qquad
    r(y, q) = \mathbb{1}[\text{correct}] - \frac{\beta}{N}\,\max\!\big(p_\text{solved}(q), \tfrac1K\big)\,|y| $$

    over the current group's $K = G$ rollouts, applied to every rollout (correct or wrong). Easy prompts
    ($p_\text{solved} \to 1$) pay the full per-token price, hard ones at least $1/K$ of it. `beta = 0.5` and
    `N = max_completion_length` are **proposed defaults** (the paper's β, N are not confirmed; methods.md §14): at
    $p = 1$ a full-length correct answer then still scores 0.5, above every wrong answer (<= 0). A row whose gold
    cannot be parsed gets `None` and counts as unsolved in $p_\text{solved}$ (denominator $K = G$).

    Under group std normalisation an all-correct group is ranked by length alone whatever β is; the `alp` recipe
    therefore sets `scale_rewards="none"` so β acts as a real scale (methods.md §14, cross-cutting note 2).

    Args:
        max_length (`int`): $N$, the length normaliser (the recipe's builder passes `max_completion_length`), > 0.
        num_generations (`int`, *optional*):
            Group size `G`. Leave `None` under `EfficientGRPOTrainer` (it passes a `group_size` column).
        beta (`float`, *optional*, defaults to `0.5`): β, the penalty strength (proposed default), >= 0.
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `alp_reward`.

    >>> reward = get_alp_reward(max_length=100, num_generations=2, beta=0.5)
    >>> # p = 1/2 ; correct, 40 tokens: 1 - 0.005 * 0.5 * 40 = 0.9 ; wrong, 60 tokens: -0.005 * 0.5 * 60 = -0.15
    >>> reward(completions=[r"\boxed{1}", r"\boxed{2}"], solution=["1", "1"], completion_ids=[[0] * 40, [0] * 60])
    [0.9, -0.15]
    """
    _check_num_generations(num_generations)
    check_number("max_length", max_length, 0, low_open=True)
    check_number("beta", beta, 0.0)
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _ALPReward(num_generations, meter, float(max_length), float(beta))


class _ALPReward(GroupLengthReward):
    __name__ = "alp_reward"
    _factory = "get_alp_reward()"

    def __init__(self, num_generations: int | None, meter: LengthMeter, max_length: float, beta: float) -> None:
        super().__init__(num_generations, meter)
        self.max_length = max_length
        self.beta = beta

    def _score_group(self, rows):
        k = len(rows)
        p_solved = sum(1 for correct, _ in rows if correct) / k
        price = self.beta / self.max_length * max(p_solved, 1.0 / k)
        return [None if correct is None else float(correct) - price * length for correct, length in rows]


GRPO_LAMBDA_ROUNDINGS = ("ceil", "round", "floor")


def grpo_lambda_top_groups(ratios: list[float], top_fraction: float, rounding: str = "ceil") -> list[int]:
    """
    Indices of the efficiency-prioritised groups: the `n` groups with the highest correctness ratio, ties broken by
    group index (lower first), `n = rounding(top_fraction * len(ratios))` (`"round"` rounds halves up), returned in
    increasing order.

    >>> grpo_lambda_top_groups([0.5, 1.0, 0.25, 1.0, 0.75], 0.2)  # ceil(0.2 * 5) = 1: the first of the two 1.0
    [1]
    >>> grpo_lambda_top_groups([0.5, 1.0, 0.25, 1.0, 0.75], 0.5, "floor")  # floor(2.5) = 2
    [1, 3]
    >>> grpo_lambda_top_groups([0.5, 1.0, 0.25, 1.0, 0.75], 0.5, "round")  # round(2.5) = 3 (halves up)
    [1, 3, 4]
    """
    if rounding not in GRPO_LAMBDA_ROUNDINGS:
        raise ValueError(f"rounding must be one of {list(GRPO_LAMBDA_ROUNDINGS)}, got {rounding!r}.")
    x = top_fraction * len(ratios)
    x = round(x, 9)  # 0.2 * 15 = 3.0000000000000004 must not ceil to 4
    n = math.ceil(x) if rounding == "ceil" else math.floor(x) if rounding == "floor" else math.floor(x + 0.5)
    order = sorted(range(len(ratios)), key=lambda g: (-ratios[g], g))
    return sorted(order[: min(n, len(ratios))])


def get_grpo_lambda_reward(
    num_generations: int | None = None,
    top_fraction: float = 0.2,
    alpha: float = 0.6,
    eps: float = 1e-6,
    rounding: str = "ceil",
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _GRPOLambdaReward:
    r"""
    GRPO-λ ("Stable Reinforcement Learning for Efficient Reasoning", arXiv 2505.18086; methods.md §17; no official
    code known): a batch-level switch between a length-penalised and the plain 0/1 reward.

    The groups of the **whole gathered generation batch** (all processes: `per_device_train_batch_size x
    num_processes x steps_per_generation / G` prompts, or the evaluation batch) are ranked by correctness ratio
    $\rho_g$; the top $n = \lceil \lambda M \rceil$ of the $M$ groups (proposed default rounding; ties broken by group
    index) are *efficiency-prioritised*, the rest *accuracy-prioritised*:

    $$ r_i = \begin{cases}
    1 - \alpha\,\sigma\!\left(\dfrac{L_i - \mu_c}{\sigma_c + \epsilon}\right) & g \in \text{top-}\lambda,\ o_i
    \text{ correct} \\ 0 & o_i \text{ wrong} \\ 1 & g \notin \text{top-}\lambda,\ o_i \text{ correct}
    \end{cases} $$

    with $\mu_c, \sigma_c$ the mean and **population** standard deviation of the group's *correct* lengths
    (documented choice: the paper does not say which; $\sigma_c = 1$ when <= 1 correct answer) and $\sigma$ the
    logistic function. Wrong answers get 0 in every group, as in the paper (not the third-party class, methods.md
    §17). All-wrong groups sort last (in the top only when fewer than $n$ groups have a correct answer; they score 0
    either way). An unparsable gold gets `None` and counts as wrong in $\rho_g$. `alpha`, `top_fraction`, `eps`, the
    rounding and the population std are **proposed defaults**; reasons, numbers: docs/adaptive-methods.md, "GRPO-λ".

    Args:
        num_generations (`int`, *optional*):
            Group size `G`. Leave `None` under `EfficientGRPOTrainer` (it passes a `group_size` column).
        top_fraction (`float`, *optional*, defaults to `0.2`):
            λ, the fraction of the batch's groups that are efficiency-prioritised, in [0, 1].
        alpha (`float`, *optional*, defaults to `0.6`):
            α, the weight of the sigmoid length penalty (proposed default), in [0, 1] so a correct answer never
            scores below a wrong one.
        eps (`float`, *optional*, defaults to `1e-6`): ε added to $\sigma_c$ (proposed default), > 0.
        rounding (`str`, *optional*, defaults to `"ceil"`):
            How $\lambda M$ becomes a number of groups: `"ceil"` (proposed default: at least one efficiency group
            whenever λ > 0, which matters for small batches), `"round"` (halves up) or `"floor"`.
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `grpo_lambda_reward`.

    >>> reward = get_grpo_lambda_reward(num_generations=2, top_fraction=0.5)
    >>> # group 0: ratio 1/2 (accuracy group: 1, 0) ; group 1: ratio 1 (efficiency group), correct lengths 10, 30:
    >>> # mean 20, std 10, 1 - 0.6 * sigmoid(-1) = 0.838635 and 1 - 0.6 * sigmoid(1) = 0.561365
    >>> [round(r, 6) for r in reward(completions=[r"\boxed{1}", r"\boxed{2}", r"\boxed{1}", r"\boxed{1}"],
    ...  solution=["1"] * 4, completion_ids=[[0] * n for n in (50, 5, 10, 30)])]
    [1.0, 0.0, 0.838635, 0.561365]
    """
    _check_num_generations(num_generations)
    check_number("top_fraction", top_fraction, 0.0, 1.0)
    check_number("alpha", alpha, 0.0, 1.0)
    check_number("eps", eps, 0.0, low_open=True)
    if rounding not in GRPO_LAMBDA_ROUNDINGS:
        raise ValueError(f"rounding must be one of {list(GRPO_LAMBDA_ROUNDINGS)}, got {rounding!r}.")
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _GRPOLambdaReward(num_generations, meter, float(top_fraction), float(alpha), float(eps), rounding)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class _GRPOLambdaReward(GroupLengthReward):
    __name__ = "grpo_lambda_reward"
    _factory = "get_grpo_lambda_reward()"

    def __init__(self, num_generations, meter, top_fraction: float, alpha: float, eps: float, rounding: str) -> None:
        super().__init__(num_generations, meter)
        self.top_fraction, self.alpha, self.eps, self.rounding = top_fraction, alpha, eps, rounding

    def _score_batch(self, rows, extras, group_size):
        groups = [rows[start : start + group_size] for start in range(0, len(rows), group_size)]
        ratios = [sum(1 for correct, _ in group if correct) / len(group) for group in groups]
        top = set(grpo_lambda_top_groups(ratios, self.top_fraction, self.rounding))
        rewards: list[float | None] = []
        for g, group in enumerate(groups):
            rewards.extend(self._efficiency(group) if g in top else self._accuracy(group))
        return rewards

    @staticmethod
    def _accuracy(group):
        return [None if correct is None else float(correct) for correct, _ in group]

    def _efficiency(self, group):
        lengths = [float(length) for correct, length in group if correct]
        if len(lengths) <= 1:
            mean, std = (lengths[0] if lengths else 0.0), 1.0
        else:
            mean = sum(lengths) / len(lengths)
            std = math.sqrt(sum((x - mean) ** 2 for x in lengths) / len(lengths))
        rewards: list[float | None] = []
        for correct, length in group:
            if correct is None:
                rewards.append(None)
            elif correct:
                rewards.append(1.0 - self.alpha * _sigmoid((length - mean) / (std + self.eps)))
            else:
                rewards.append(0.0)
        return rewards


def asrr_alpha(accuracy: float, beta: float = 0.5, tau: float = 1.0, eps: float = 1e-6) -> float:
    r"""
    ASRR's accuracy-gated penalty strength (arXiv 2505.15400, §3; methods.md §24):
    $\alpha = 0$ if $\mathrm{Acc}_G < \tau$, else $\beta\,(\mathrm{Acc}_G - \tau + \epsilon)/(1 - \tau + \epsilon)$.

    >>> asrr_alpha(1.0), asrr_alpha(0.75), round(asrr_alpha(0.75, tau=0.5), 6), round(asrr_alpha(1.0, tau=0.5), 6)
    (0.5, 0.0, 0.25, 0.5)
    """
    if accuracy < tau:
        return 0.0
    return beta * (accuracy - tau + eps) / (1.0 - tau + eps)


def get_asrr_reward(
    num_generations: int | None = None,
    beta: float = 0.5,
    window: int = 2048,
    tau: float = 1.0,
    eps: float = 1e-6,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _ASRRReward:
    r"""
    ASRR, Adaptive Self-Recovery Reasoning ("When to Continue Thinking", arXiv 2505.15400, §3 and App. A.2;
    methods.md §24; no official code known): an accuracy-gated overlong penalty on top of correctness.

    $$ O_i = \mathrm{clip}\!\left(\frac{L_i - L_\text{shortest correct}}{L_\text{window}}, 0, 1\right), \qquad
    \alpha = \begin{cases} 0 & \mathrm{Acc}_G < \tau \\
    \beta\,\dfrac{\mathrm{Acc}_G - \tau + \epsilon}{1 - \tau + \epsilon} & \text{otherwise} \end{cases}, \qquad
    R_i = \mathbb{1}[\text{correct}_i] - \alpha\,O_i $$

    over the `G` rollouts of one prompt (`Acc_G` = the group's solve rate). Paper values: β = 0.5,
    $L_\text{window} = 2048$, τ = 100% (main results; swept over 0/25/50/75/100%); ε = 1e-6 is a **proposed
    default**. As in the paper's formula, $O_i$ is not gated on correctness: wrong answers longer than the shortest
    correct one are penalised too (methods.md §24 pitfall). A group with no correct answer has no shortest correct
    length: $O_i = 0$ there (α is 0 anyway unless τ = 0, where such a group would otherwise be penalised). A row
    whose gold cannot be parsed gets `None` and counts as wrong in $\mathrm{Acc}_G$.

    $L_i$ is the generated completion: with the `asrr` rollout plan the no-think prefix is a prompt prefill, not
    generated, so it is not counted (**proposed default**; it is the same constant for every rollout, so it would
    cancel in $L_i - L_\text{shortest correct}$ anyway).

    Args:
        num_generations (`int`, *optional*):
            Group size `G`. Leave `None` under `EfficientGRPOTrainer` (it passes a `group_size` column).
        beta (`float`, *optional*, defaults to `0.5`): β, the penalty strength at full accuracy, >= 0.
        window (`int`, *optional*, defaults to `2048`): $L_\text{window}$ in `length_unit`, > 0.
        tau (`float`, *optional*, defaults to `1.0`): τ, the accuracy threshold, in [0, 1].
        eps (`float`, *optional*, defaults to `1e-6`): ε of the gate (proposed default), > 0.
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `asrr_reward`.

    >>> reward = get_asrr_reward(num_generations=2, window=100)
    >>> # all correct (Acc 1 >= tau 1: alpha 0.5), shortest 20: O = (20 - 20)/100 = 0 and (70 - 20)/100 = 0.5
    >>> reward(completions=[r"\boxed{1}", r"\boxed{1}"], solution=["1", "1"], completion_ids=[[0] * 20, [0] * 70])
    [1.0, 0.75]
    """
    _check_num_generations(num_generations)
    check_number("beta", beta, 0.0)
    check_number("window", window, 0, low_open=True)
    check_number("tau", tau, 0.0, 1.0)
    check_number("eps", eps, 0.0, low_open=True)
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _ASRRReward(num_generations, meter, float(beta), float(window), float(tau), float(eps))


class _ASRRReward(GroupLengthReward):
    __name__ = "asrr_reward"
    _factory = "get_asrr_reward()"

    def __init__(self, num_generations, meter, beta: float, window: float, tau: float, eps: float) -> None:
        super().__init__(num_generations, meter)
        self.beta, self.window, self.tau, self.eps = beta, window, tau, eps

    def _score_group(self, rows):
        accuracy = sum(1 for correct, _ in rows if correct) / len(rows)
        alpha = asrr_alpha(accuracy, self.beta, self.tau, self.eps)
        correct_lengths = [length for correct, length in rows if correct]
        shortest = min(correct_lengths) if correct_lengths else None
        rewards: list[float | None] = []
        for correct, length in rows:
            if correct is None:
                rewards.append(None)
                continue
            overlong = 0.0 if shortest is None else min(max((length - shortest) / self.window, 0.0), 1.0)
            rewards.append(float(correct) - alpha * overlong)
        return rewards
