"""A tiny LLMLingua-2-format token classifier built offline, in-process: the Bingo scorer of smoke runs, tests and
benchmarks (no download). Its significances are random; only the plumbing is meaningful."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import BertConfig, BertForTokenClassification, BertTokenizerFast

__all__ = ["TINY_CLASSIFIER_WORDS", "save_tiny_token_classifier"]

TINY_CLASSIFIER_WORDS = tuple(
    "the a an so then wait step check first we need to compute sum of and is are let me think again answer final "
    "The So Let We First Then Wait Therefore equation x y z value number total each two three four five because "
    "therefore hence boxed think = + - * / ( ) { } < > \\ . , ? ! : ;".split()
) + tuple(str(i) for i in range(100))


def save_tiny_token_classifier(
    path: str,
    words: Sequence[str] = TINY_CLASSIFIER_WORDS,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 2,
    intermediate_size: int = 64,
    seed: int = 0,
) -> str:
    """
    Save a random BERT token classifier in the LLMLingua-2 format (2 labels, WordPiece tokenizer) to `path`, built
    offline (docs/testing.md §9), for smoke runs, tests and benchmarks. Its significances are random (near 0.5);
    only the plumbing is meaningful. Words outside `words` become `[UNK]`. Name the directory with
    `bert-base-multilingual-cased` in it if llmlingua will load it. Returns `path`.
    """
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, "##s", "##ed", "##ing"]
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(dict.fromkeys(vocab))}, do_lower_case=False)
    torch.manual_seed(seed)
    model = BertForTokenClassification(
        BertConfig(
            vocab_size=len(tok),
            hidden_size=hidden_size,
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            intermediate_size=intermediate_size,
            max_position_embeddings=512,
            num_labels=2,
        )
    )
    model.save_pretrained(path)
    tok.save_pretrained(path)  # vocab passed as a dict: BertTokenizerFast(vocab_file=...) is ignored in transformers 5
    return path
