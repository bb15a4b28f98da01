r"""
One-token decode steps of the testbed's tiny models in plain torch operations: the same arithmetic as
`transformers`' Qwen2 / Llama forward with a KV cache, without its per-call Python machinery.

Why: a testbed model has 2 layers of width 64, so one decode step of `transformers`' forward costs about 3 ms of
Python (mask construction, output capturing, cache bookkeeping, 14 module calls per layer) for a few microseconds of
arithmetic. Generation is most of a testbed GRPO step and nearly all of an evaluation. `FastDecoder` runs a decode step
as ~25 tensor operations on preallocated cache buffers; `sampling._generate_batch` uses it for every model it accepts
(`FastDecoder.supports`) and `transformers`' forward otherwise. The prompt (prefill) still runs through
`transformers`' forward, whose cache `FastDecoder.start` copies into its buffers.

The step, for the new token's hidden state $h$ at position $p$ (Qwen2, `modeling_qwen2.py` of transformers 5):

$$ x = \mathrm{RMSNorm}(h), \quad q, k, v = W_q x + b_q,\ W_k x + b_k,\ W_v x + b_v, \quad
   q, k \leftarrow \mathrm{RoPE}_p(q), \mathrm{RoPE}_p(k) $$
$$ h \leftarrow h + W_o \, \mathrm{softmax}\!\big(q K^\top / \sqrt{d} + M\big) V, \qquad
   h \leftarrow h + W_d\big(\mathrm{silu}(W_g y) \odot W_u y\big),\ y = \mathrm{RMSNorm}(h) $$

with grouped key/value heads (query head $j$ reads key/value head $\lfloor j / r \rfloor$, $r$ query heads per key
head, as `repeat_kv`), $M$ the padding mask ($-\infty$ on left padding), $\mathrm{RoPE}_p$ the default rotary
embedding ($\cos(p\,\theta), \sin(p\,\theta)$ with `rotate_half`), and the logits $W_e\,\mathrm{RMSNorm}(h)$.
tests/testbed/test_decoding.py checks the logits against `transformers`' forward and the sampled ids against the
`transformers` path of `_generate_batch`.
"""

from __future__ import annotations

import torch

__all__ = ["FastDecoder"]

_FAMILIES = ("qwen2", "llama")


class FastDecoder:
    """Decode steps of `model` (a `Qwen2ForCausalLM` or `LlamaForCausalLM` with default RoPE, no sliding window, no
    attention dropout) on preallocated KV buffers: `start` from a prefill cache, then `step` and `select`."""

    def __init__(self, model) -> None:
        config = model.config
        inner = model.model
        self.num_heads = config.num_attention_heads
        self.num_kv = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.group = self.num_heads // self.num_kv
        self.scaling = self.head_dim**-0.5
        self.eps = config.rms_norm_eps
        self.embed = inner.embed_tokens.weight
        self.final_norm = inner.norm.weight
        self.lm_head = model.lm_head.weight
        self.lm_bias = model.lm_head.bias
        self.inv_freq = inner.rotary_emb.inv_freq.float()
        self.rope_scale = float(inner.rotary_emb.attention_scaling)
        self.layers = [
            (
                layer.input_layernorm.weight,
                layer.self_attn.q_proj,
                layer.self_attn.k_proj,
                layer.self_attn.v_proj,
                layer.self_attn.o_proj,
                layer.post_attention_layernorm.weight,
                layer.mlp.gate_proj,
                layer.mlp.up_proj,
                layer.mlp.down_proj,
            )
            for layer in inner.layers
        ]
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.mask: torch.Tensor | None = None  # (B, capacity) bool: which cache slots a row attends to
        self.length = 0

    @staticmethod
    def supports(model) -> bool:
        """Whether `model` is of a family and configuration this decoder reproduces exactly."""
        config = getattr(model, "config", None)
        inner = getattr(model, "model", None)
        rotary = getattr(inner, "rotary_emb", None)
        return (
            getattr(config, "model_type", None) in _FAMILIES
            and rotary is not None
            and getattr(rotary, "rope_type", "default") == "default"
            and not getattr(config, "use_sliding_window", False)
            and not getattr(config, "attention_dropout", 0.0)
            and getattr(config, "hidden_act", "silu") == "silu"
            and not getattr(config, "mlp_bias", False)
            and all(hasattr(layer, "mlp") and hasattr(layer.mlp, "gate_proj") for layer in inner.layers)
        )

    def start(self, cache, attention_mask: torch.Tensor, max_new_tokens: int) -> None:
        """Copy the prefill `cache` (one layer per decoder layer, keys (B, kv, T, d)) into buffers with room for
        `max_new_tokens` more positions; `attention_mask` (B, T) is the prompt's mask."""
        batch, width = attention_mask.shape
        capacity = width + max_new_tokens
        self.keys, self.values = [], []
        for layer in cache.layers:
            keys = layer.keys.new_zeros(batch, self.num_kv, capacity, self.head_dim)
            values = torch.zeros_like(keys)
            keys[:, :, :width] = layer.keys
            values[:, :, :width] = layer.values
            self.keys.append(keys)
            self.values.append(values)
        self.mask = torch.zeros(batch, capacity, dtype=torch.bool, device=attention_mask.device)
        self.mask[:, :width] = attention_mask.bool()
        self.length = width

    def select(self, keep: torch.Tensor) -> None:
        """Keep only the batch rows `keep` (indices) in the buffers (finished rows leave the batch)."""
        self.keys = [k.index_select(0, keep) for k in self.keys]
        self.values = [v.index_select(0, keep) for v in self.values]
        self.mask = self.mask.index_select(0, keep)

    def _norm(self, hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        variance = hidden.float().pow(2).mean(-1, keepdim=True)
        return weight * (hidden.float() * torch.rsqrt(variance + self.eps)).to(hidden.dtype)

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    @torch.no_grad()
    def step(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits (B, V) of the next token after `tokens` (B,) at `positions` (B,); appends their keys and values."""
        batch = tokens.shape[0]
        slot = self.length
        self.mask[:, slot] = True
        hidden = self.embed[tokens]  # (B, D)
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = (emb.cos() * self.rope_scale).to(hidden.dtype)[:, None, :]  # (B, 1, d)
        sin = (emb.sin() * self.rope_scale).to(hidden.dtype)[:, None, :]
        bias = torch.zeros(self.mask.shape[0], slot + 1, dtype=hidden.dtype, device=hidden.device)
        bias.masked_fill_(~self.mask[:, : slot + 1], float("-inf"))
        bias = bias[:, None, None, :]  # (B, 1, 1, T)
        for i, (norm_in, wq, wk, wv, wo, norm_post, gate, up, down) in enumerate(self.layers):
            x = self._norm(hidden, norm_in)
            q = self._rope(wq(x).view(batch, self.num_heads, self.head_dim), cos, sin)
            k = self._rope(wk(x).view(batch, self.num_kv, self.head_dim), cos, sin)
            self.keys[i][:, :, slot] = k
            self.values[i][:, :, slot] = wv(x).view(batch, self.num_kv, self.head_dim)
            keys = self.keys[i][:, :, : slot + 1]  # (B, kv, T, d)
            values = self.values[i][:, :, : slot + 1]
            q = q.view(batch, self.num_kv, self.group, self.head_dim)  # head j reads key head j // group
            scores = torch.matmul(q, keys.transpose(-1, -2)) * self.scaling + bias  # (B, kv, group, T)
            attn = torch.matmul(torch.softmax(scores.float(), dim=-1).to(q.dtype), values)  # (B, kv, group, d)
            hidden = hidden + wo(attn.reshape(batch, self.num_heads * self.head_dim))
            y = self._norm(hidden, norm_post)
            hidden = hidden + down(torch.nn.functional.silu(gate(y)) * up(y))
        self.length = slot + 1
        logits = torch.nn.functional.linear(self._norm(hidden, self.final_norm), self.lm_head, self.lm_bias)
        return logits
