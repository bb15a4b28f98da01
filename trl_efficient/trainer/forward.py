"""One extra no-grad forward over this process's prompt+completion rows, through TRL's own
`GRPOTrainer._get_per_token_logps_and_entropies`: the one home of the generation-time signal passes of
`TokenEntropyTrainer` (PEAR, CANON-entropy; methods.md §29, §26) and `SARTrainer` (§25).

The rows are padded exactly as TRL pads them in `GRPOTrainer._generate_and_score_completions` (TRL 1.16.0): prompts on
the left, completions on the right, with the tokenizer's pad id; the pass is chunked by `per_device_train_batch_size`
(training) or `per_device_eval_batch_size` (evaluation), runs with gradient checkpointing disabled (as TRL's own no-grad
`old_per_token_logps` pass does) and applies TRL's temperature, so the log-probabilities and entropies are those of the
sampling distribution.
"""

from __future__ import annotations

import torch
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import pad

from .trl_internals import trl_tokenizer

__all__ = ["completion_forward"]


def completion_forward(
    trainer,
    model,
    prompt_ids_list: list[list[int]],
    completion_ids_list: list[list[int]],
    compute_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`(logps, entropies)` of every completion token, CPU float tensors of shape `(rows, longest completion)` (the
    entries past a row's length are padding); `entropies` is `None` unless `compute_entropy`. `model` is the policy
    (`trainer.model`) or another model of the same tokenizer (SAR's reference). Callers handle empty batches."""
    device = trainer.accelerator.device
    pad_id = trl_tokenizer(trainer).pad_token_id
    prompts = [torch.tensor(ids, dtype=torch.long) for ids in prompt_ids_list]
    completions = [torch.tensor(ids, dtype=torch.long) for ids in completion_ids_list]
    prompt_ids = pad(prompts, padding_value=pad_id, padding_side="left")
    prompt_mask = pad([torch.ones_like(p) for p in prompts], padding_value=0, padding_side="left")
    completion_ids = pad(completions, padding_value=pad_id, padding_side="right")
    completion_mask = pad([torch.ones_like(c) for c in completions], padding_value=0, padding_side="right")
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1).to(device)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1).to(device)
    args = trainer.args
    batch_size = args.per_device_train_batch_size if trainer.model.training else args.per_device_eval_batch_size
    with torch.no_grad(), disable_gradient_checkpointing(trainer.model, args.gradient_checkpointing_kwargs):
        logps, entropies, _ = trainer._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_ids.size(1), batch_size=batch_size,
            compute_entropy=compute_entropy,
        )  # fmt: skip
    return logps.float().cpu(), (entropies.float().cpu() if entropies is not None else None)
