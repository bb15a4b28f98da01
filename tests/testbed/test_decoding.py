"""`decoding.FastDecoder`: the testbed's decode steps in plain torch must be `transformers`' forward, logit for logit,
and `_generate_batch` must sample the same ids with it as through `transformers`; `sampling._top_p_keep` must keep the
same tokens as sorting the whole vocabulary."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from trl_efficient_testbed.decoding import FastDecoder
from trl_efficient_testbed.streams import _generate_batch, _top_p_keep

SIZES = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=128)  # fmt: skip


def _model(family: str, **overrides):
    torch.manual_seed(0)
    if family == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**SIZES, **overrides))  # q/k/v biases, tied embeddings off
    else:
        model = LlamaForCausalLM(LlamaConfig(**SIZES, **overrides))
    with torch.no_grad():  # larger weights than the init: logits far from uniform, so a wrong step shows
        for p in model.parameters():
            p.mul_(4.0) if p.dim() > 1 else p.add_(0.1 * torch.randn_like(p))
    return model.eval()


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_decode_steps_are_the_transformers_forward(family):
    """Three left-padded prompts, then 6 decode steps of given tokens (a row leaves after step 3): the logits of
    every step equal the last-position logits of `transformers`' forward on the whole sequence."""
    model = _model(family)
    assert FastDecoder.supports(model)
    prompts = [[5, 9, 14, 3, 7], [11, 2], [4, 4, 8, 1]]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
    decoder = FastDecoder(model)
    decoder.start(out.past_key_values, mask, max_new_tokens=8)
    rows, seqs = torch.arange(3), [list(p) for p in prompts]
    last = positions[:, -1]
    generator = torch.Generator().manual_seed(1)
    for step in range(6):
        if step == 3:  # row 1 finishes: it leaves the batch
            keep = torch.tensor([0, 2])
            decoder.select(keep)
            rows, last = rows[keep], last[keep]
        tokens = torch.randint(1, SIZES["vocab_size"], (len(rows),), generator=generator)
        last = last + 1
        logits = decoder.step(tokens, last)
        for b, row in enumerate(rows.tolist()):
            seqs[row].append(int(tokens[b]))
            with torch.no_grad():
                expected = model(input_ids=torch.tensor([seqs[row]])).logits[0, -1]
            torch.testing.assert_close(logits[b], expected, atol=1e-4, rtol=1e-4)


def test_fast_generation_samples_the_transformers_ids(small_base):
    """`_generate_batch` on the small testbed base: 12 prompts of different lengths, 48 tokens at temperature 1 and
    top-p 0.95 from the same uniforms, with and without the decoder: the same ids."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(small_base).eval()
    tok = AutoTokenizer.from_pretrained(small_base)
    assert FastDecoder.supports(model)
    texts = [f"Start at {i}. Apply + {i % 5 + 1} to it {i % 3 + 1} times" + " ok" * (i % 4) for i in range(12)]
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    uniforms = torch.rand(len(prompts), 48, generator=torch.Generator().manual_seed(0))
    eos = torch.tensor([tok.eos_token_id])
    runs = [_generate_batch(model, prompts, uniforms, 48, eos, tok.pad_token_id, 1.0, 0.95, "cpu", fast=fast)
            for fast in (True, False)]  # fmt: skip
    assert runs[0] == runs[1]
    assert sum(map(len, runs[0])) > 12 * 10  # they did generate


def test_decoder_declines_what_it_does_not_reproduce():
    assert not FastDecoder.supports(_model("qwen2", use_sliding_window=True, sliding_window=4))
    assert not FastDecoder.supports(_model("llama", mlp_bias=True))
    assert not FastDecoder.supports(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.95, 0.999])
def test_top_p_set_is_the_full_sort_set(top_p):
    """Peaked rows (decided among the 32 candidates) and flat rows (past them: the full sort) alike keep exactly the
    tokens that sorting the whole vocabulary keeps (transformers' `TopPLogitsWarper` rule)."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 300, generator=generator) * torch.linspace(0.05, 8.0, 64)[:, None]
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs
    expected = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before < top_p)
    keep = _top_p_keep(probs, top_p)
    assert torch.equal(keep, expected)
    sizes = keep.sum(-1)
    assert sizes.min() < 32 < sizes.max()  # both paths ran


def test_budgetthinker_modes_force_the_control_tokens_in_paired_generation(small_base):
    """`evaluate_modes` under `budgetthinker:B` on a model without the control tokens (the base): they are added to a
    copy (the caller's tokenizer keeps its vocabulary), and the paired sampler forces the k-th control token at
    generated position k (delta + 1) - 1 with delta = floor(B / 8) + 1, never elsewhere (methods.md §23)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_efficient.eval.evaluate import parse_mode
    from trl_efficient.overthinking.data import load_testbed_dataset
    from trl_efficient.rewards.budgetthinker import add_budget_tokens, budget_interval
    from trl_efficient_testbed.training import evaluate_modes, paired_generations

    model = AutoModelForCausalLM.from_pretrained(small_base).eval()
    tok = AutoTokenizer.from_pretrained(small_base)
    vocab = len(tok)
    rows = load_testbed_dataset("test", 6, 0, 1, 8)
    mode = parse_mode("budgetthinker:24")[0]
    out = evaluate_modes(model, tok, rows, [mode], max_new_tokens=40, temperature=1.0)
    assert len(tok) == vocab and set(out) == {"budgetthinker:24"} and len(out["budgetthinker:24"]["lengths"]) == 6
    controlled_model, controlled_tok = model, tok
    control = add_budget_tokens(controlled_model, controlled_tok)  # as the copy got them: same ids
    delta = budget_interval(24)
    gens = paired_generations(controlled_model, controlled_tok, list(rows), mode, 1, 40, 1.0, 0.95, 0, 8)
    forced = {k * (delta + 1) - 1: control[k - 1] for k in range(1, 8)}
    for ((ids, _, _),) in gens:
        for position, token in enumerate(ids):
            assert (token == forced.get(position)) == (position in forced), (position, token)
        assert len(ids) < 2 * (delta + 1) or ids[delta] == control[0]
