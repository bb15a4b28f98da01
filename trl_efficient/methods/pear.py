r"""PEAR, Phase Entropy Aware Reward (arXiv 2510.08026, ICLR 2026; methods.md §29; `iNLP-Lab/PEAR` `README.md`,
whose `compute_score(..., old_log_prob={old_log_probs, entropys})` reads the old policy's entropies in verl):
`PEARTrainer`, the phase split and the phase entropies.

The reward (proposed default, `trl_efficient.rewards.pear`):

$$ R = c - \lambda \max\bigl(0,\; \bar H_{think} - \alpha\,\bar H_{answer}\bigr), \quad \lambda = 0.5,\ \alpha = 1.0 $$

`PEARTrainer` is `TokenEntropyTrainer` (the one entropy source: one no-grad forward at generation time,
`methods/entropy.py`) plus the phase split: the thinking phase is the completion's tokens up to and including the
token that completes the **last** `</think>` (the split of `core.lengths.split_thinking`), the answer phase the tokens
after it. Each phase's $\bar H$ is its mean per-token entropy (nats). Edges (documented values, never NaN):

- no `</think>` (unfinished or unformatted): the whole completion is thinking, $\bar H_{answer} = 0$ (methods.md
  §29), so the penalty is $\lambda \bar H_{think}$;
- `</think>` as the last token (empty answer): $\bar H_{answer} = 0$, same penalty;
- an empty completion: $\bar H_{think} = \bar H_{answer} = 0$, no penalty.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from ..core.lengths import LengthMeter
from ..rewards.pear import PEAR_COLUMNS
from ..trainer.trl_internals import metric_buffer, trl_tokenizer
from .entropy import ENTROPY_DECIMALS, TokenEntropyTrainer, mean_entropy

__all__ = ["PEARTrainer", "phase_entropies"]


def phase_entropies(entropies: Sequence[float] | torch.Tensor, n_think: int | None) -> tuple[float, float]:
    r"""$(\bar H_{think}, \bar H_{answer})$ of one completion from its per-token entropies and its number of thinking
    tokens `n_think` (`LengthMeter.thinking_tokens`: all of them without a `</think>`, so $\bar H_{answer} = 0$;
    `None` reads the same); an empty phase has mean 0.

    >>> phase_entropies([2.0, 1.0, 0.5, 0.1], 3), phase_entropies([2.0, 1.0], None), phase_entropies([], None)
    ((1.1667, 0.1), (1.5, 0.0), (0.0, 0.0))
    """
    values = torch.as_tensor(entropies, dtype=torch.float64)
    n = values.numel() if n_think is None else min(int(n_think), values.numel())
    think, answer = mean_entropy(values[:n]), mean_entropy(values[n:])
    return round(think, ENTROPY_DECIMALS), round(answer, ENTROPY_DECIMALS)


class PEARTrainer(TokenEntropyTrainer):
    """`TokenEntropyTrainer` that also provides the columns `pear_think_entropy` and `pear_answer_entropy` (module
    docstring) to the rewards: recipe `pear` (`get_pear_reward` reads them)."""

    provides_columns = (*TokenEntropyTrainer.provides_columns, *PEAR_COLUMNS)

    @functools.cached_property
    def thinking_meter(self) -> LengthMeter:
        """The meter of the phase split (`LengthMeter(scope="thinking")` on the policy tokenizer), built once."""
        return LengthMeter(scope="thinking", tokenizer=trl_tokenizer(self))

    def entropy_columns(self, completion_ids_list, entropies: list[torch.Tensor]) -> dict[str, list]:
        columns = super().entropy_columns(completion_ids_list, entropies)
        meter = self.thinking_meter
        pairs = [phase_entropies(e, meter.thinking_tokens(ids)) for ids, e in zip(completion_ids_list, entropies)]
        columns[PEAR_COLUMNS[0]] = [think for think, _ in pairs]
        columns[PEAR_COLUMNS[1]] = [answer for _, answer in pairs]
        metrics = metric_buffer(self, "train" if self.model.training else "eval")  # this process's rows
        for key, values in zip(("pear/think_entropy", "pear/answer_entropy"), zip(*pairs)) if pairs else ():
            metrics[key].append(sum(values) / len(values))
        return columns
