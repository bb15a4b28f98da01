"""Quick accuracy-and-tokens evaluation with transformers generation (used before and after `trl-efficient train`).

Reports accuracy (one sample per problem), mean / median completion tokens and the truncation rate, so every run
states what it did to *both* accuracy and length.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

import torch
from tqdm.auto import tqdm

from .lengths import completion_text
from .rewards import is_correct


@dataclass
class EvalResult:
    num_samples: int
    accuracy: float
    mean_tokens: float
    median_tokens: float
    truncated_fraction: float
    mean_tokens_correct: float | None
    mean_tokens_incorrect: float | None

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def evaluate_model(
    model,
    tokenizer,
    dataset,
    max_new_tokens: int = 256,
    batch_size: int = 16,
    temperature: float = 0.6,
    top_p: float = 0.95,
    generation_kwargs: dict | None = None,
    chat_template_kwargs: dict | None = None,
    seed: int = 0,
    show_progress: bool = True,
    description: str = "eval",
) -> EvalResult:
    """Sample one completion per row of `dataset` (columns `prompt`, `solution`) and score it.

    Sampling defaults follow the seeds' evaluations (temperature 0.6, top-p 0.95); `temperature=0` is greedy.
    Lengths are completion tokens including the EOS token when generated.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    pad_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    eos_ids = model.generation_config.eos_token_id
    eos_ids = set([eos_ids] if isinstance(eos_ids, int) else (eos_ids or [tokenizer.eos_token_id]))
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    lengths, correct, truncated = [], [], []
    try:
        rows = list(dataset)
        for start in tqdm(range(0, len(rows), batch_size), desc=description, disable=not show_progress):
            chunk = rows[start : start + batch_size]
            texts = [
                tokenizer.apply_chat_template(
                    r["prompt"], tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
                )
                if not isinstance(r["prompt"], str)
                else r["prompt"]
                for r in chunk
            ]
            enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            sample = temperature > 0
            out = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=sample,
                temperature=temperature if sample else None,
                top_p=top_p if sample else None,
                pad_token_id=tokenizer.pad_token_id,
                **(generation_kwargs or {}),
            )
            for row, seq in zip(chunk, out[:, enc["input_ids"].shape[1] :].tolist(), strict=True):
                ids = []
                for tok in seq:
                    if tok == tokenizer.pad_token_id and tok not in eos_ids:
                        break
                    ids.append(tok)
                    if tok in eos_ids:
                        break
                text = tokenizer.decode(ids, skip_special_tokens=True)
                ok = is_correct(completion_text(text), row["solution"])
                lengths.append(len(ids))
                correct.append(bool(ok))
                truncated.append(not ids or ids[-1] not in eos_ids)
    finally:
        torch.random.set_rng_state(generator_state)
        tokenizer.padding_side = pad_side
        model.train(was_training)
    n = len(lengths)

    def _mean(xs):
        return float(sum(xs) / len(xs)) if xs else None

    return EvalResult(
        num_samples=n,
        accuracy=_mean(correct) or 0.0,
        mean_tokens=_mean(lengths) or 0.0,
        median_tokens=float(statistics.median(lengths)) if lengths else 0.0,
        truncated_fraction=_mean(truncated) or 0.0,
        mean_tokens_correct=_mean([n_ for n_, c in zip(lengths, correct) if c]),
        mean_tokens_incorrect=_mean([n_ for n_, c in zip(lengths, correct) if not c]),
    )
