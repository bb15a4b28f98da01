"""The converted SmolLM2-135M-Instruct checkpoint (`trl_efficient/testing/smollm.py`): its logits are the GGUF load's,
it is a plain float32 Llama with no quantisation left, it carries the real chat template, and it answers like a chat
model."""

import json
import os

import pytest
import torch
from transformers import AutoModelForCausalLM

from trl_efficient.testing.smollm import SMOLLM2_GGUF_FILE, smollm2_gguf_path

pytestmark = pytest.mark.realmodel

PROMPTS = [
    [{"role": "user", "content": "What is 7 * 6? Put the final answer in \\boxed{}."}],
    [{"role": "system", "content": "Think step by step."}, {"role": "user", "content": "Is 91 a prime? é, 数学."}],
]


def _ids(tokenizer, messages):
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    return out["input_ids"]


def test_checkpoint_logits_equal_the_gguf_load(smollm2_dir, smollm2_tokenizer):
    gguf = smollm2_gguf_path()
    assert os.path.basename(gguf) == SMOLLM2_GGUF_FILE
    reference = AutoModelForCausalLM.from_pretrained(os.path.dirname(gguf), gguf_file=SMOLLM2_GGUF_FILE).eval()
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir).eval()
    with torch.no_grad():
        for messages in PROMPTS:
            ids = _ids(smollm2_tokenizer, messages)
            torch.testing.assert_close(model(input_ids=ids).logits, reference(input_ids=ids).logits, rtol=0, atol=0)
    with open(os.path.join(smollm2_dir, "trl_efficient_smollm2.json")) as f:
        assert json.load(f)["max_logit_difference"] == 0.0  # what the conversion itself measured


def test_checkpoint_is_a_plain_float32_llama(smollm2_dir):
    with open(os.path.join(smollm2_dir, "config.json")) as f:
        config = json.load(f)
    assert "quantization_config" not in config  # save_pretrained refuses a GGUF load that keeps it
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "float32"
    # SmolLM2-135M's shape: 30 layers of width 576, 9 query and 3 key/value heads, tied embeddings, 49,152 tokens
    shape = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "vocab_size")
    assert [config[k] for k in shape] == [30, 576, 9, 3, 49152]
    assert config["tie_word_embeddings"] is True
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir)
    assert model.dtype == torch.float32 and sum(p.numel() for p in model.parameters()) == 134_515_008


def test_tokenizer_has_the_real_chat_template(smollm2_tokenizer):
    tok = smollm2_tokenizer
    assert (tok.eos_token, tok.pad_token, tok.bos_token) == ("<|im_end|>", "<|im_end|>", "<|im_start|>")
    text = tok.apply_chat_template(PROMPTS[0], tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nWhat is 7 * 6? Put the final answer in \\boxed{}.<|im_end|>\n<|im_start|>assistant\n"
    )
    # a system message of the caller's replaces SmolLM's own
    assert tok.apply_chat_template(PROMPTS[1], tokenize=False).startswith("<|im_start|>system\nThink step by step.")
    # </think> is not a special token here: it is split into ordinary byte-level pieces
    assert len(tok("</think>", add_special_tokens=False)["input_ids"]) > 1


def test_greedy_answer_is_a_chat_models(smollm2_dir, smollm2_tokenizer):
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir).eval()
    ids = _ids(smollm2_tokenizer, PROMPTS[0])
    out = model.generate(input_ids=ids, max_new_tokens=40, do_sample=False)
    answer = smollm2_tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    assert "42" in answer, answer  # greedy decoding is deterministic: "... 7 * 6 equals 42."
    assert out[0, -1].item() == smollm2_tokenizer.eos_token_id  # it ends its turn by itself
