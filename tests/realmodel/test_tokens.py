"""Token accounting on a real tokenizer (SmolLM2's byte-level BPE, where `</think>` is no special token and splits into
ordinary pieces): the thinking/answer split of `LengthMeter` agrees with a brute-force search over decoded prefixes,
on the model's own sampled completions and on adversarial token sequences (tags split across tokens, multi-byte
characters, ids that are not valid UTF-8 alone, the end-of-turn token)."""

import random

import pytest
import torch
from transformers import AutoModelForCausalLM

from trl_efficient.core.lengths import THINK_CLOSE, LengthMeter

pytestmark = pytest.mark.realmodel


def brute_force_thinking_tokens(tokenizer, ids) -> int:
    """The fewest leading tokens whose decoded text holds every `</think>` of the whole completion (all of them when
    there is none): the token that completes the last close tag, found by decoding every prefix."""
    total = tokenizer.decode(ids, skip_special_tokens=False).count(THINK_CLOSE)
    if total == 0:
        return len(ids)
    return next(
        k
        for k in range(len(ids) + 1)
        if tokenizer.decode(ids[:k], skip_special_tokens=False).count(THINK_CLOSE) == total
    )


FRAGMENTS = ["</", "think", ">", "</think>", "<", "/", "th", "ink", " ", "\n", "\n\n", "é", "数学", "🤔", "42", "So",
             " wait", "</think", "/think>", "<think>", "\\boxed{7}", "</ think>", "<<", ">>"]  # fmt: skip


def _adversarial(tokenizer, rng, n_rows=300):
    eos = tokenizer.eos_token_id
    rows = []
    for _ in range(n_rows):
        ids = []
        for _ in range(rng.randint(0, 12)):
            r = rng.random()
            if r < 0.7:
                ids += tokenizer(rng.choice(FRAGMENTS), add_special_tokens=False)["input_ids"]
            elif r < 0.9:
                ids.append(rng.randrange(len(tokenizer)))  # any id: some are bytes that are not UTF-8 alone
            else:  # a tag cut at a random token boundary of a longer text
                text = "".join(rng.choice(FRAGMENTS) for _ in range(4))
                ids += tokenizer(text, add_special_tokens=False)["input_ids"]
        if rng.random() < 0.5:
            ids.append(eos)  # "<|im_end|>" ends in ">" but never completes a tag
        rows.append(ids)
    return rows


def _sampled(model_dir, tokenizer, n=8, cap=48):
    """The model's own completions, a `</think>` spliced into each at a random token position (SmolLM2 never writes
    one by itself)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    messages = [{"role": "user", "content": "Think first, then answer: what is 12 * 13?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    torch.manual_seed(0)
    out = model.generate(**prompt, max_new_tokens=cap, do_sample=True, num_return_sequences=n)
    tag = tokenizer(THINK_CLOSE, add_special_tokens=False)["input_ids"]
    rng, rows = random.Random(1), []
    for row in out[:, prompt["input_ids"].shape[1] :].tolist():
        row = row[: row.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in row else row
        at = rng.randint(0, len(row))
        rows += [row, row[:at] + tag + row[at:]]
    return rows


def test_thinking_split_agrees_with_brute_force(smollm2_dir, smollm2_tokenizer):
    tok = smollm2_tokenizer
    meter = LengthMeter(scope="thinking", tokenizer=tok)
    answer_meter = LengthMeter(scope="answer", tokenizer=tok)
    assert meter._pieces() is not None  # the fast path on ids applies to this byte-level BPE
    rows = _sampled(smollm2_dir, tok) + _adversarial(tok, random.Random(0))
    with_tag = 0
    for ids in rows:
        expected = brute_force_thinking_tokens(tok, ids)
        text = tok.decode(ids, skip_special_tokens=True)
        assert meter(text, ids) == expected, (ids, tok.decode(ids))
        assert answer_meter(text, ids) == len(ids) - expected
        assert meter._thinking_tokens_by_decoding(ids) == expected  # the slow path agrees too
        with_tag += THINK_CLOSE in text
    assert with_tag > 50  # the rows exercise the split, not only the no-tag case (88 of 316 with these seeds)
