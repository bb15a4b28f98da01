"""Shared fixtures for the reward tests: a tiny byte-level BPE tokenizer built in-process (no Hub access)."""

import pytest

CHATML = (
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Strings the tests tokenise (think tags, \boxed{}, digits) so that they become a few pieces each.
CORPUS = [
    "Solve the problem step by step, then answer.",
    "What is 2 + 3? The answer is 5. What is 7 * 6? The answer is 42.",
    "<think> short reasoning </think> The final answer is \\boxed{42}",
    "<think>\nLet me think about it.\n</think>\n\nSo the answer is \\boxed{7}.",
    "0123456789 + - * / = ( )",
] * 20


def build_tokenizer(vocab_size: int = 512):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        CORPUS,
        trainer=trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
        chat_template=CHATML,
    )
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    return tok


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return build_tokenizer()
