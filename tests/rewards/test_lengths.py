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


def test_piece_table_path_equals_decoding_on_varied_ids(tiny_tokenizer):
    # issue 20: the thinking count on token ids (a table of decoded pieces) gives what the decoding search gives,
    # on text with tags, multi-byte characters split over byte tokens, and random ids (incl. the EOS)
    meter = LengthMeter("tokens", "thinking", tiny_tokenizer)
    assert meter._pieces() is not None  # the tiny tokenizer is byte-level BPE: the fast path is on
    rng = random.Random(1)
    words = ["<think>", "</think>", "so", " 12", "wait", " é", "日本", "🙂", "</", "think>", " the answer", "\n\n"]
    vocab = len(tiny_tokenizer)
    used_fast = 0
    for i in range(300):
        if i % 3 == 2:
            ids = [rng.randrange(vocab) for _ in range(rng.randint(0, 40))]
        elif i % 5 == 0:  # the tag far from the end (past the backward walk), or absent from a long text
            text = "<think> so 12 </think>" * (i % 2) + " the answer 12 wait" * rng.randint(10, 30)
            ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            text = "".join(rng.choice(words) for _ in range(rng.randint(0, 20)))
            ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"] + [tiny_tokenizer.eos_token_id] * (i % 2)
        fast = meter._thinking_tokens_from_pieces(ids)
        used_fast += fast is not None
        expected = meter._thinking_tokens_by_decoding(ids) if ids else 0
        assert meter.thinking_tokens(ids) == expected == brute_force(tiny_tokenizer, ids)
        assert fast is None or fast == expected
    assert 30 < used_fast < 300  # both paths are exercised: split multi-byte characters fall back


def test_piece_table_is_off_for_a_tag_that_overlaps_itself(tiny_tokenizer):
    # "aba" can overlap itself ("ababa"): str.count and rfind disagree on which occurrence is last
    assert LengthMeter("tokens", "thinking", tiny_tokenizer, close_tag="aba")._pieces() is None
