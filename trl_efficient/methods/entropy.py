r"""The one home of per-token policy entropies at generation time (PEAR, methods.md §29; CANON's entropy variant,
§26): `TokenEntropyTrainer`.

Where TRL 1.16 has what we need (checked against `GRPOTrainer._generate_and_score_completions`):

- **Entropies**: never at generation time. TRL's no-grad `old_per_token_logps` pass (only when
  `gradient_accumulation_steps % (steps_per_generation * num_iterations) != 0`, or with vLLM importance sampling)
  calls `_get_per_token_logps_and_entropies` *without* `compute_entropy` and discards the entropy slot; asking it
  for entropies would mean copying that block. Entropies are computed in `_compute_loss` only (with gradients,
  after the rewards).
- **vLLM sampling log-probabilities** (`sampling_per_token_logps`): the log-probability of the *sampled* token only,
  not the entropy of the distribution ($-\log p(y_t)$ is a one-sample, noisy estimate of $H_t$); the transformers
  backend returns none.

So the cheapest correct source is **one extra no-grad forward pass over this process's rows**, in
`_calculate_rewards` (docs/trl-integration.md §5.1), through TRL's own `_get_per_token_logps_and_entropies(...,
compute_entropy=True)` (the same chunking by `per_device_*_batch_size`, the same fused LM head, entropies of the
sampling distribution at `temperature`, the model in its current mode as in TRL's `old_per_token_logps` pass):

$$ H_t = -\sum_{v} \pi_\theta(v \mid x, y_{<t}) \log \pi_\theta(v \mid x, y_{<t}) \quad\text{(nats)},
   \qquad \bar H(y) = \frac{1}{|y|}\sum_{t=1}^{|y|} H_t \;(0 \text{ for an empty } y). $$

Its cost is one forward of the local prompt+completion rows per generation batch (no backward), measured against
plain TRL by `perf/entropy_overhead.py`. Text-only: multimodal forward arguments are not passed.

`TokenEntropyTrainer` adds the column `mean_token_entropy` ($\bar H$, rounded to `ENTROPY_DECIMALS` so identical
completions tie exactly whatever the batch composition) to every row before the rewards, and the gathered values to
`batch.extras["mean_token_entropy"]` (global rows) before the group stages. Subclasses add more per-row columns by
overriding `entropy_columns` (PEAR: the phase entropies).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from accelerate.utils import gather_object

from ..trainer import EfficientGRPOTrainer
from ..trainer.forward import completion_forward
from ..trainer.trl_internals import metric_buffer

__all__ = ["ENTROPY_COLUMN", "ENTROPY_DECIMALS", "TokenEntropyTrainer", "mean_entropy", "token_entropy"]

ENTROPY_COLUMN = "mean_token_entropy"
ENTROPY_DECIMALS = 4  # 1e-4 nats: batch-composition float noise (~1e-6) never splits identical completions


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    r"""$H = -\sum_v p_v \log p_v$ (nats) over the last dimension of `logits`; the reference for what TRL's fused
    LM head returns (`tests/methods/test_pear.py` checks the trainer's pass against it).

    >>> round(token_entropy(torch.log(torch.tensor([0.5, 0.25, 0.25]))).item(), 4)  # 1.5 ln 2
    1.0397
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def mean_entropy(entropies: Sequence[float] | torch.Tensor) -> float:
    """Mean of per-token entropies; 0.0 for no tokens (an empty completion or phase: documented value, never NaN).

    >>> mean_entropy([0.5, 1.5]), mean_entropy([])
    (1.0, 0.0)
    """
    values = torch.as_tensor(entropies, dtype=torch.float64)
    return float(values.mean()) if values.numel() else 0.0


class TokenEntropyTrainer(EfficientGRPOTrainer):
    """`EfficientGRPOTrainer` that measures the policy's per-token entropies of every completion at generation time
    (module docstring). Columns: `mean_token_entropy` per row (rewards), `batch.extras["mean_token_entropy"]` (group
    stages, estimators). Recipe `canon-entropy` runs on it; `PEARTrainer` extends it."""

    provides_columns = (*EfficientGRPOTrainer.provides_columns, ENTROPY_COLUMN)

    def token_entropies(self, prompt_ids_list, completion_ids_list) -> list[torch.Tensor]:
        """Per-token entropies (nats, CPU float tensors of each completion's length) of the local rows: one no-grad
        forward through TRL's `_get_per_token_logps_and_entropies(compute_entropy=True)`."""
        widths = [len(ids) for ids in completion_ids_list]
        if not widths or max(widths) == 0:
            return [torch.zeros(0) for _ in widths]
        _, entropies = completion_forward(self, self.model, prompt_ids_list, completion_ids_list, compute_entropy=True)
        return [entropies[i, :n] for i, n in enumerate(widths)]

    def entropy_columns(self, completion_ids_list, entropies: list[torch.Tensor]) -> dict[str, list]:
        """Per-row columns from the local rows' token entropies (one list per column, local row order). Subclasses
        extend the dict (call `super()`)."""
        return {ENTROPY_COLUMN: [round(mean_entropy(e), ENTROPY_DECIMALS) for e in entropies]}

    # Wraps GRPOTrainer._calculate_rewards (TRL 1.16.0) (through EfficientGRPOTrainer's wrapper): the entropy columns
    # are added to copies of the rows first, so every reward gets them as keyword arguments
    # (docs/trl-integration.md §5.1); the gathered values then go into the group batch's extras (global rows) with the
    # metric `trl_efficient/mean_token_entropy`, for the group stage.
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        prompt_ids = self.step.prompt_ids if self.step is not None else None
        if prompt_ids is None or len(prompt_ids) != len(completion_ids_list):
            raise RuntimeError(
                f"{type(self).__name__} needs the prompt token ids from `_generate` (a rollout_func or environment "
                "that bypasses it is not supported)."
            )
        entropies = self.token_entropies(prompt_ids, completion_ids_list)
        columns = self.entropy_columns(completion_ids_list, entropies)
        rows = [{**row, **{k: v[i] for k, v in columns.items()}} for i, row in enumerate(inputs)]
        rewards = super()._calculate_rewards(rows, prompts, completions, completion_ids_list)
        local = columns[ENTROPY_COLUMN]
        everything = gather_object(local) if self.accelerator.num_processes > 1 else list(local)
        values = torch.tensor(everything, dtype=torch.float32)
        batch = self.step.group_batch
        if values.numel() == batch.num_rows:
            batch.extras[ENTROPY_COLUMN] = values
            metric_buffer(self, batch.mode)["trl_efficient/mean_token_entropy"].append(values.mean().item())
        return rewards
