r"""SAR, Self-Aligned Reward (arXiv 2509.05489, ICLR 2026; methods.md §25; released code
`amazon-science/Self-Aligned-Reward-Towards_Effective_and_Efficient_Reasoners`,
`verl/utils/reward_score/efficiency_reward.py` `compute_ppl_qa_log`): the score and the reward callable.

$$ R = R_{VR} + \alpha R_{SA}, \qquad
   R_{SA} = \operatorname{clip}\Bigl(\frac{ppl(a) - ppl(a \mid q)}{ppl(a)},\, -1,\, 1\Bigr), \qquad \alpha = 0.2 $$

with $ppl(a \mid q) = \exp(-\frac{1}{|a|}\sum_t \log \pi(a_t \mid q, a_{<t}))$ and $ppl(a)$ the same with the question
removed (the "standalone" prompt, `trl_efficient.methods.sar`). The released code (`use_log=False`,
`use_denominator=True`, `clip_value=-1`) computes `max((A - QA) / (A + 1e-9), -1)`: only the lower clip, the upper
bound 1 holds since ppl > 0. We compute the same value in log space, $1 - \exp(\log ppl(a|q) - \log ppl(a))$ (no
overflow of $ppl$ on long, unlikely answers; the 1e-9 is dropped: $ppl \ge 1$), and apply both clips (the upper one
never binds). Documented values (no paper rule; proposed defaults): an empty answer ($|a| = 0$, the released code
divides 0 by 0) and a non-finite log-perplexity score **0**.

`get_sar_reward` returns $\alpha R_{SA}$ from the column `sar_score`, which `trl_efficient.methods.sar.SARTrainer`
provides (a plain trainer fails at construction naming the column); the recipe `sar` adds the correctness reward
$R_{VR}$ (weight 1 each), so TRL's weighted sum is $R$.
"""

from __future__ import annotations

import math

from ..core.checks import check_number

__all__ = ["SAR_COLUMN", "SAR_MODELS", "get_sar_reward", "sar_score"]

SAR_COLUMN = "sar_score"
SAR_MODELS = ("policy", "reference")  # which model scores the perplexities (SARTrainer)


def sar_score(log_ppl_a_given_q: float | None, log_ppl_a: float | None) -> float:
    r"""$\operatorname{clip}((ppl(a) - ppl(a|q)) / ppl(a), -1, 1)$ from the two log-perplexities (mean token NLL, nats),
    as $1 - \exp(\log ppl(a|q) - \log ppl(a))$; 0.0 when either is `None` (an empty answer) or not finite.

    >>> sar_score(math.log(2.0), math.log(4.0)), sar_score(math.log(10.0), math.log(2.0)), sar_score(None, 1.0)
    (0.5, -1.0, 0.0)
    """
    if log_ppl_a_given_q is None or log_ppl_a is None:
        return 0.0
    qa, a = float(log_ppl_a_given_q), float(log_ppl_a)
    if not (math.isfinite(qa) and math.isfinite(a)):
        return 0.0
    diff = qa - a
    value = -1.0 if diff > 700.0 else 1.0 - math.exp(diff)  # exp overflows past ~709: the score is clipped anyway
    return min(1.0, max(-1.0, value))


class _SARReward:
    __name__ = "sar_reward"

    def __init__(self, alpha: float, model: str) -> None:
        self.alpha = alpha
        self.sar_model = model  # read by SARTrainer at construction: which model scores the perplexities

    def __call__(self, completions, sar_score, **kwargs) -> list[float]:
        # None (a missing value) counts as score 0, the empty-answer value
        return [self.alpha * float(s) if s is not None and math.isfinite(float(s)) else 0.0 for s in sar_score]


def get_sar_reward(alpha: float = 0.2, model: str = "policy") -> _SARReward:
    r"""SAR's self-aligned term $\alpha R_{SA}$ (module docstring; $\alpha = 0.2$, methods.md §25 [code]
    `reward_factors=[1,0.2]`). Needs the column `sar_score` (`SARTrainer`).

    Args:
        alpha: weight of $R_{SA}$ (>= 0).
        model: which model scores both perplexities: `"policy"` (the released code: the rollout's old log-probs, i.e.
            the policy at generation time) or `"reference"` (TRL's `ref_model`, which exists only with `beta > 0`;
            `SARTrainer` fails at construction otherwise).

    >>> get_sar_reward()(["a", "b", "c"], sar_score=[0.5, -1.0, None])
    [0.1, -0.2, 0.0]
    """
    alpha = check_number("alpha", alpha, 0.0)
    if model not in SAR_MODELS:
        raise ValueError(f"SAR model must be one of {list(SAR_MODELS)}, got {model!r}.")
    return _SARReward(float(alpha), model)
