"""LengthMeter.thinking_tokens against a brute-force definition (its fast path and its binary search)."""

import random

from trl_efficient.core.lengths import LengthMeter


def brute_force(tokenizer, ids, tag="</think>"):
    total = tokenizer.decode(ids, skip_special_tokens=False).count(tag)
    if total == 0:
        return len(ids)
    return next(
        k for k in range(1, len(ids) + 1) if tokenizer.decode(ids[:k], skip_special_tokens=False).count(tag) >= total
    )


def test_thinking_tokens_equals_brute_force(tiny_tokenizer):
    meter = LengthMeter("tokens", "thinking", tiny_tokenizer)
    rng = random.Random(0)
    words = ["<think>", "</think>", "so", " 12", "+", "wait", r"\boxed{4}", " the answer", "</think", ">"]
    for _ in range(200):
        text = "".join(rng.choice(words) for _ in range(rng.randint(0, 14)))
        ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
        assert meter.thinking_tokens(ids) == brute_force(tiny_tokenizer, ids), text


def test_fast_path_on_a_tag_token(tiny_tokenizer):
    # "</think>" tokenised on its own, in the middle of a completion: the answer is the end of its ids
    meter = LengthMeter("tokens", "thinking", tiny_tokenizer)
    head = tiny_tokenizer("<think> so 12 ", add_special_tokens=False)["input_ids"]
    tag = tiny_tokenizer("</think>", add_special_tokens=False)["input_ids"]
    tail = tiny_tokenizer(" the answer", add_special_tokens=False)["input_ids"]
    assert meter.thinking_tokens(head + tag + tail) == len(head) + len(tag)
