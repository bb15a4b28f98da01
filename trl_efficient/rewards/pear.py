r"""PEAR, Phase Entropy Aware Reward (arXiv 2510.08026, ICLR 2026; methods.md §29; `iNLP-Lab/PEAR` `README.md`):
the phase-entropy penalty, a plain reward callable fed by per-row columns.

The exact equation and $\alpha$ are not published in the sources cited (methods.md §29); the form below is the
**proposed default**:

$$ R = c - \lambda \max\bigl(0,\; \bar H_{think} - \alpha\,\bar H_{answer}\bigr), \qquad
   \lambda = 0.5,\ \alpha = 1.0 \text{ (proposed default)} $$

with $\bar H$ the mean per-token entropy (nats) of the policy at generation time over the thinking phase (up to and
including the last `</think>`) and over the answer phase (after it). This callable returns the penalty term
$-\lambda \max(0, \bar H_{think} - \alpha \bar H_{answer})$; the recipe `pear` adds the correctness reward $c$
(weight 1 each), so TRL's weighted sum is $R$. The entropies come from the columns `pear_think_entropy` and
`pear_answer_entropy`, which `trl_efficient.methods.pear.PEARTrainer` provides (a plain trainer fails at
construction naming the column). Edge values (PEARTrainer): no `</think>` -> whole completion is thinking and
$\bar H_{answer} = 0$ (methods.md §29); an empty phase has mean entropy 0.
"""

from __future__ import annotations

from ..core.checks import check_number

__all__ = ["PEAR_COLUMNS", "get_pear_reward"]

PEAR_COLUMNS = ("pear_think_entropy", "pear_answer_entropy")


class _PEARReward:
    __name__ = "pear_reward"

    def __init__(self, lam: float, alpha: float) -> None:
        self.lam, self.alpha = lam, alpha

    def __call__(self, completions, pear_think_entropy, pear_answer_entropy, **kwargs) -> list[float]:
        out = []
        for h_think, h_answer in zip(pear_think_entropy, pear_answer_entropy, strict=True):
            h_think = float(h_think or 0.0)  # None (a missing value) counts as no entropy: no penalty from it
            h_answer = float(h_answer or 0.0)
            penalty = self.lam * max(0.0, h_think - self.alpha * h_answer)
            out.append(-penalty if penalty > 0 else 0.0)
        return out


def get_pear_reward(lam: float = 0.5, alpha: float = 1.0) -> _PEARReward:
    r"""PEAR's phase-entropy penalty $-\lambda \max(0, \bar H_{think} - \alpha \bar H_{answer})$ (module docstring;
    $\lambda = 0.5$, $\alpha = 1.0$ are proposed defaults). Needs the columns `pear_think_entropy`,
    `pear_answer_entropy` (`PEARTrainer`).

    >>> reward = get_pear_reward()
    >>> reward(["a", "b", "c"], pear_think_entropy=[1.2, 0.4, 2.0], pear_answer_entropy=[0.2, 0.9, 0.0])
    [-0.5, 0.0, -1.0]
    """
    lam = check_number("lam", lam, 0.0)
    alpha = check_number("alpha", alpha, 0.0)
    return _PEARReward(float(lam), float(alpha))
