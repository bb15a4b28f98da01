r"""
Paired random streams for the testbed's evaluations: every (task, sample) draws from its own random stream, so two
models evaluated on the same tasks see the same random numbers (common random numbers), whatever the batch they run in.

`sample_seed(seed, task, sample)` names the stream (`numpy.random.SeedSequence([seed, task, sample])`); the stream
is `max_new_tokens` uniforms $u_1, u_2, \dots$ (`torch.Generator` seeded with it). At step $i$ the next token is
drawn by inverse CDF in vocabulary order from the temperature-scaled, top-p filtered distribution $p$:

$$ y_i = \min\{ j : \textstyle\sum_{j' \le j} p_{j'} > u_i \} $$

so two models whose next-token distributions are close pick the same token with probability close to 1: their
samples stay coupled, and per-task differences between them measure the models, not the dice. Top-p keeps the
smallest set of most probable tokens whose mass reaches `top_p` (as `transformers`' `TopPLogitsWarper`).

A `SentenceConstraint` restricts what may open a sentence: after a trigger token (a sentence end), only the allowed
tokens may follow, until a release token is drawn (`report.steps_only_constraint`: the model may write steps and
close its thinking, nothing else). The restricted draw renormalises over the allowed tokens (masked logits).

`generate_paired` runs the tiny model itself instead of `model.generate`: prompts are sorted by length and batched
(so little left padding), the KV cache is kept (`use_cache=True`; one token per step after the prompt), and rows that
have emitted EOS leave the batch (`DynamicCache.batch_select_indices`), so a batch costs what its unfinished rows cost.

`rollout_model(path)` loads a testbed model whose `generate` runs the same loop for GRPO's rollouts (uniforms from
torch's global generator, which the trainer seeds) whenever the generation config is plain sampling (temperature,
top-p; no top-k, min-p, repetition penalty, beams or extra processors), and is `transformers`' `generate` otherwise.
TRL's transformers path (`GRPOTrainer._generate_single_turn`) calls `model.generate` on the whole batch and decodes
until its longest row ends; here finished rows leave the batch, with the same sampling distribution
(tests/testbed/test_streams.py). Measured on 8 GRPO steps of `grpo` from `testbed:v2` on the shared 2 cores: 150 s
against 180 s with `transformers`' `generate` (generation is about 70% of a testbed step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm

from .decoding import FastDecoder

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["SentenceConstraint", "generate_paired", "rollout_model", "sample_seed"]


@dataclass(frozen=True)
class SentenceConstraint:
    """After any of `triggers`, the next token is drawn among `allowed` only; a row that draws one of `release`
    is free from then on."""

    triggers: tuple[int, ...]
    allowed: tuple[int, ...]
    release: tuple[int, ...]

    def mask(self, logits: torch.Tensor, previous: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        """`logits` (B, V) with the disallowed tokens at -inf on the rows that are `active` and whose `previous`
        token is a trigger.

        >>> c = SentenceConstraint(triggers=(0,), allowed=(1,), release=(2,))
        >>> c.mask(torch.zeros(2, 3), torch.tensor([0, 1]), torch.tensor([True, True])).tolist()
        [[-inf, 0.0, -inf], [0.0, 0.0, 0.0]]
        """
        rows = active & torch.isin(previous, torch.tensor(self.triggers, device=previous.device))
        if not rows.any():
            return logits
        banned = torch.ones(logits.shape[-1], dtype=torch.bool, device=logits.device)
        banned[list(self.allowed)] = False
        return logits.masked_fill(rows[:, None] & banned[None, :], float("-inf"))


def sample_seed(seed: int, task: int, sample: int) -> int:
    """The random stream of one (task, sample) of an evaluation seeded `seed`: the same for every model.

    >>> sample_seed(0, 3, 1) == sample_seed(0, 3, 1), sample_seed(0, 3, 1) == sample_seed(0, 3, 0)
    (True, False)
    """
    return int(np.random.SeedSequence([seed, task, sample]).generate_state(1, dtype=np.uint64)[0] % (2**63))


def _next_tokens(logits: torch.Tensor, u: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Inverse-CDF draw (module docstring) of one token per row of `logits` (B, V) with uniforms `u` (B,); greedy at
    temperature 0."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        probs = probs * _top_p_keep(probs, top_p)
    cdf = probs.cumsum(dim=-1)
    target = u.to(cdf.dtype) * cdf[:, -1]
    return torch.searchsorted(cdf, target[:, None], right=True).squeeze(-1).clamp_max(probs.shape[-1] - 1)


_TOP_P_CANDIDATES = 32  # the most probable tokens searched first for the top-p set (then the full sort)


def _top_p_keep(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Which tokens of `probs` (B, V) the top-p filter keeps: the smallest set of most probable tokens whose mass
    reaches `top_p` (a token stays when the mass of the tokens more probable than it is below `top_p`; the most
    probable token always stays). Searched among the `_TOP_P_CANDIDATES` most probable tokens (`topk`), with a full
    sort for the rows whose candidates hold less than `top_p`: the same set as sorting every row, faster.

    >>> _top_p_keep(torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.3, 0.2]]), 0.7).tolist()  # 0.6 + 0.3; 0.5 + 0.3
    [[False, True, True], [True, True, False]]
    """

    def keep_of(rows: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        top, order = rows.topk(k, dim=-1)  # descending
        before = top.cumsum(dim=-1) - top  # mass of the more probable tokens
        keep = torch.zeros_like(rows, dtype=torch.bool).scatter(-1, order, before < top_p)
        return keep, before[:, -1] + top[:, -1]

    vocab = probs.shape[-1]
    keep, mass = keep_of(probs, min(_TOP_P_CANDIDATES, vocab))
    short = (mass < top_p).nonzero().squeeze(-1)
    if short.numel() and vocab > _TOP_P_CANDIDATES:
        keep[short] = keep_of(probs[short], vocab)[0]
    return keep


@torch.no_grad()
def generate_paired(model, prompt_ids: list[list[int]], seeds: list[int], max_new_tokens: int, eos_ids,
                    pad_id: int, temperature: float = 0.6, top_p: float = 0.95, batch_size: int = 128,
                    show_progress: bool = False, constraint: SentenceConstraint | None = None,
                    processor=None) -> list[list[int]]:  # fmt: skip
    """Completion ids of every prompt (token ids), sampled with the stream `seeds[i]` (`sample_seed`), cut after the
    first EOS (kept). The result does not depend on `batch_size` or on the other prompts of a batch (up to float
    rounding of batched matrix products). `constraint`: what may open a sentence (`SentenceConstraint`); `processor`:
    `processor(logits, position) -> logits` before each draw, `position` the 0-based index of the generated token
    (BudgetThinker's forced control tokens: `rewards.budgetthinker.BudgetControlProcessor.apply`)."""
    if len(prompt_ids) != len(seeds):
        raise ValueError(f"generate_paired: {len(prompt_ids)} prompts but {len(seeds)} seeds.")
    eos = torch.tensor(sorted(set(eos_ids)))
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[list[int]] = [[] for _ in prompt_ids]
    order = sorted(range(len(prompt_ids)), key=lambda i: (len(prompt_ids[i]), i))  # group by length: little padding
    try:
        for start in tqdm(range(0, len(order), batch_size), desc="generate", disable=not show_progress, leave=False):
            rows = order[start : start + batch_size]
            uniforms = torch.stack(
                [torch.rand(max_new_tokens, generator=torch.Generator().manual_seed(seeds[i])) for i in rows]
            )  # (B, max_new_tokens)
            for i, ids in zip(rows, _generate_batch(model, [prompt_ids[i] for i in rows], uniforms, max_new_tokens,
                                                    eos, pad_id, temperature, top_p, device, constraint,
                                                    processor=processor),
                              strict=True):  # fmt: skip
                out[i] = ids
    finally:
        model.train(was_training)
    return out


def _generate_batch(model, prompts, uniforms, max_new_tokens, eos, pad_id, temperature, top_p, device,
                    constraint=None, fast: bool = True, processor=None):  # fmt: skip
    """The sampled ids of every prompt of one batch. `fast`: decode steps by `decoding.FastDecoder` where it supports
    the model (`transformers`' forward for the prompt either way); `False` runs every step through `transformers`."""
    width = max(len(p) for p in prompts)
    input_ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
    cache, logits = _cache_of(out), out.logits[:, -1, :]
    decoder = FastDecoder(model) if fast and FastDecoder.supports(model) else None
    if decoder is not None:
        decoder.start(cache, mask, max_new_tokens)
    alive = torch.arange(len(prompts))  # batch row -> prompt index in this batch
    last_pos = positions[:, -1]
    generated: list[list[int]] = [[] for _ in prompts]
    eos = eos.to(device)
    previous = input_ids[:, -1]  # the token before the next one (a constraint's trigger)
    bound = torch.ones(len(prompts), dtype=torch.bool, device=device)  # rows still under the constraint
    for step in range(max_new_tokens):
        if constraint is not None:
            logits = constraint.mask(logits, previous, bound)
        if processor is not None:
            logits = processor(logits, step)
        tokens = _next_tokens(logits, uniforms[alive, step].to(device), temperature, top_p)
        if constraint is not None:
            bound = bound & ~torch.isin(tokens, torch.tensor(constraint.release, device=device))
            previous = tokens
        for row, tok in zip(alive.tolist(), tokens.tolist(), strict=True):
            generated[row].append(tok)
        done = torch.isin(tokens, eos)
        if step == max_new_tokens - 1:
            break
        if done.any():
            keep = (~done).nonzero().squeeze(-1)
            if keep.numel() == 0:
                break
            if decoder is not None:
                decoder.select(keep)
            else:
                cache.batch_select_indices(keep)
            alive, tokens, mask, last_pos = alive[keep.cpu()], tokens[keep], mask[keep], last_pos[keep]
            previous, bound = previous[keep], bound[keep]
        last_pos = last_pos + 1
        if decoder is not None:
            logits = decoder.step(tokens, last_pos)
            continue
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=-1)
        out = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=last_pos[:, None], cache=cache,
                    use_cache=True)  # fmt: skip
        cache, logits = _cache_of(out), out.logits[:, -1, :]
    return generated


def _cache_of(output):
    """The KV cache of a forward pass (`cache` in transformers 5, `past_key_values` before)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


class _RolloutSampling:
    """Mixin of `rollout_model`'s class: `generate` by `_generate_batch` for plain sampling."""

    @staticmethod
    def _plain_sampling(config, kwargs) -> bool:
        return (
            not kwargs
            and config is not None
            and bool(config.do_sample)
            and (config.temperature or 0) > 0
            and (config.num_beams or 1) == 1
            and (config.num_return_sequences or 1) == 1
            and not config.top_k
            and config.min_p is None
            and config.repetition_penalty in (None, 1.0)
            and config.max_new_tokens is not None
            and config.eos_token_id is not None
            and not config.suppress_tokens
            and not config.bad_words_ids
        )

    @torch.no_grad()
    def generate(self, input_ids=None, attention_mask=None, generation_config=None, **kwargs):
        config = generation_config if generation_config is not None else self.generation_config
        if input_ids is None or attention_mask is None or not self._plain_sampling(config, kwargs):
            return super().generate(input_ids=input_ids, attention_mask=attention_mask,
                                    generation_config=generation_config, **kwargs)  # fmt: skip
        eos = config.eos_token_id
        eos = torch.tensor(sorted({eos} if isinstance(eos, int) else set(eos)))
        pad_id = config.pad_token_id if config.pad_token_id is not None else int(eos[0])
        prompts = [row[mask.bool()].tolist() for row, mask in zip(input_ids, attention_mask, strict=True)]
        uniforms = torch.rand(len(prompts), config.max_new_tokens)
        top_p = config.top_p if config.top_p is not None else 1.0
        generated = _generate_batch(self, prompts, uniforms, config.max_new_tokens, eos, pad_id,
                                    config.temperature, top_p, input_ids.device)  # fmt: skip
        width = max(len(g) for g in generated)
        out = input_ids.new_full((input_ids.size(0), input_ids.size(1) + width), pad_id)
        out[:, : input_ids.size(1)] = input_ids
        for row, ids in enumerate(generated):
            out[row, input_ids.size(1) : input_ids.size(1) + len(ids)] = torch.tensor(ids, dtype=out.dtype)
        return out


def rollout_model(path: str, **kwargs) -> PreTrainedModel:
    """The causal LM at `path` (a testbed model), as an instance of a subclass of its usual class whose `generate`
    drops finished rows for plain sampling (module docstring); `kwargs` go to `from_pretrained`. Its saved config
    names the usual class, so what it saves loads as usual."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    base_cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(AutoConfig.from_pretrained(path))]
    cls = type(base_cls.__name__, (_RolloutSampling, base_cls), {"__module__": __name__})
    model = cls.from_pretrained(path, **kwargs)
    model.config.architectures = [base_cls.__name__]
    return model
