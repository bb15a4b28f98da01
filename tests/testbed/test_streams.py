"""`streams.rollout_model`: the testbed model whose `generate` drops finished rows for GRPO's rollouts. It must be a
drop-in for `transformers`' `generate` on TRL's path: the same output layout, the same sampling distribution, and
`transformers`' own `generate` for anything but plain sampling."""

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from trl_efficient_testbed.streams import rollout_model


def _trl_config(tok, **overrides) -> GenerationConfig:
    """The generation config GRPOTrainer builds on its transformers path (TRL 1.16 defaults)."""
    kwargs = dict(max_new_tokens=24, do_sample=True, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                  eos_token_id=[tok.eos_token_id], temperature=1.0, top_p=1.0, top_k=0, min_p=None,
                  repetition_penalty=1.0, cache_implementation=None)  # fmt: skip
    kwargs.update(overrides)
    return GenerationConfig(**kwargs, disable_compile=True)


def _batch(tok, texts):
    tok.padding_side = "left"
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    return enc["input_ids"], enc["attention_mask"]


def test_rollout_generate_has_transformers_layout(small_base, tmp_path):
    tok = AutoTokenizer.from_pretrained(small_base)
    model = rollout_model(small_base)
    ids, mask = _batch(tok, ["Start at 4. Apply + 7 to it 3 times", "Start at 1."])
    torch.manual_seed(0)
    out = model.generate(input_ids=ids, attention_mask=mask, generation_config=_trl_config(tok))
    assert out.shape[0] == 2 and ids.shape[1] < out.shape[1] <= ids.shape[1] + 24
    assert torch.equal(out[:, : ids.shape[1]], ids)  # the prompt, padding included, as transformers returns it
    for row in out[:, ids.shape[1] :]:
        eos = (row == tok.eos_token_id).nonzero()
        if len(eos):  # after the first EOS only padding
            assert (row[eos[0, 0] + 1 :] == tok.pad_token_id).all()
    model.save_pretrained(tmp_path / "saved")  # saves as the usual class, loads as usual
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "saved")
    assert type(reloaded).__name__ == type(model).__name__ and type(reloaded) is not type(model)


def test_rollout_sampling_matches_the_model_distribution(small_base):
    """2,000 first tokens of one prompt at temperature 1 and top-p 0.9: their frequencies are the model's
    top-p-filtered next-token distribution (total variation under 0.05 where sampling noise alone gives about 0.026;
    a sampler off by one token in the CDF would be far above). The small base is nearly uniform after its few steps,
    so its output layer is scaled x 13 first: a peaked distribution (30 tokens in the top-p set, the first at 0.85)."""
    tok = AutoTokenizer.from_pretrained(small_base)
    model = rollout_model(small_base)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(13.0)
    n = 2000
    ids, mask = _batch(tok, ["Start at 4. Apply + 7 to it 3 times"] * n)
    torch.manual_seed(0)
    out = model.generate(input_ids=ids, attention_mask=mask,
                         generation_config=_trl_config(tok, max_new_tokens=1, temperature=1.0, top_p=0.9))  # fmt: skip
    counts = torch.bincount(out[:, -1], minlength=len(tok)).float() / n
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=ids[:1]).logits[0, -1], dim=-1)
    sorted_probs, order = probs.sort(descending=True)
    keep = (sorted_probs.cumsum(0) - sorted_probs) < 0.9
    expected = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
    expected /= expected.sum()
    assert (counts[expected == 0] == 0).all()  # nothing outside the top-p set
    noise = 0.5 * torch.sqrt(2 * expected / (torch.pi * n)).sum()  # expected total variation of n exact draws
    assert 0.5 < expected.max() < 0.9 and noise < 0.03  # a test that can tell samplers apart
    assert 0.5 * (counts - expected).abs().sum() < 0.05


def test_rollout_generate_falls_back_to_transformers(small_base):
    """A repetition penalty (or top-k, beams, ...) is not plain sampling: transformers' own generate runs, so the
    output is exactly what the usual class returns under the same seed."""
    tok = AutoTokenizer.from_pretrained(small_base)
    fast, usual = rollout_model(small_base), AutoModelForCausalLM.from_pretrained(small_base)
    ids, mask = _batch(tok, ["Start at 4.", "Start at 1. Apply"])
    for config in (_trl_config(tok, repetition_penalty=1.3), _trl_config(tok, top_k=5)):
        torch.manual_seed(0)
        a = fast.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        torch.manual_seed(0)
        b = usual.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        assert torch.equal(a, b)
