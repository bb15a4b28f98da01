import json
import os

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trl_efficient.testing.tiny import (
    TINY_MODEL_NAME,
    build_tiny_model,
    build_tiny_tokenizer,
    eos_bias_generation_kwargs,
    resolve_tiny_model,
    save_tiny_model,
)


@pytest.fixture(scope="module")
def tok():
    return build_tiny_tokenizer()


# ---------------------------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------------------------


class TestTokenizer:
    @pytest.mark.parametrize(
        "text",
        [
            "<think> 7 * 6 = 42 </think> The final answer is \\boxed{42}",
            "Think for 512 tokens.",
            "I will answer the question with 1024 tokens",
            "Janet's ducks lay 16 eggs per day. #### 18",
            "unseen words, ünïcödé and 世界 still round-trip byte by byte",
        ],
    )
    def test_round_trip(self, tok, text):
        assert tok.decode(tok(text)["input_ids"]) == text

    def test_specials(self, tok):
        assert tok.convert_ids_to_tokens([0, 1, 2]) == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        assert (tok.eos_token, tok.eos_token_id) == ("<|im_end|>", 2)
        assert (tok.pad_token, tok.pad_token_id) == ("<|endoftext|>", 0)
        assert tok.padding_side == "left"
        assert len(tok) <= 512

    def test_corpus_phrases_are_few_tokens(self, tok):
        # the default corpus makes these short; a random byte string would be ~1 token per byte
        assert len(tok("Think for 512 tokens.")["input_ids"]) <= 6
        assert len(tok("I will answer the question with 1024 tokens")["input_ids"]) <= 10

    def test_deterministic_and_extra_corpus(self, tok):
        assert build_tiny_tokenizer().get_vocab() == tok.get_vocab()
        phrase = "zyxwvut qponmlk"
        extended = build_tiny_tokenizer(extra_corpus=[phrase])
        assert len(extended(phrase)["input_ids"]) < len(tok(phrase)["input_ids"])

    def test_chat_template(self, tok):
        messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "What is 2 + 3?"}]
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert text == (
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
        )
        without = tok.apply_chat_template(messages, tokenize=False)
        assert without == text[: -len("<|im_start|>assistant\n")]
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
        assert ids[0] == 1 and tok.decode(ids) == text  # <|im_start|> is one special token


# ---------------------------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------------------------


class TestModel:
    def test_default_size_has_head_dim_64(self, tok):
        model = build_tiny_model(tok)
        assert (model.config.hidden_size, model.config.num_attention_heads, model.config.head_dim) == (128, 2, 64)
        assert model.config.vocab_size == len(tok) and model.dtype == torch.float32
        assert model.generation_config.eos_token_id == 2 and model.generation_config.pad_token_id == 0

    def test_llama_and_bad_arch(self, tok):
        model = build_tiny_model(tok, arch="llama", hidden_size=16, num_heads=4)
        assert type(model).__name__ == "LlamaForCausalLM" and model.config.head_dim == 4
        with pytest.raises(ValueError, match=r"Unknown tiny arch 'gpt9'.*\['llama', 'qwen2'\]"):
            build_tiny_model(tok, arch="gpt9")
        with pytest.raises(ValueError, match="divisible"):
            build_tiny_model(tok, hidden_size=18, num_heads=4)

    def test_seeded_without_touching_global_rng(self, tok):
        torch.manual_seed(123)
        expected_next = torch.rand(1)
        torch.manual_seed(123)
        a = build_tiny_model(tok, hidden_size=16, num_heads=4, seed=0)
        assert torch.equal(torch.rand(1), expected_next)  # the caller's RNG stream is unchanged
        b = build_tiny_model(tok, hidden_size=16, num_heads=4, seed=0)
        c = build_tiny_model(tok, hidden_size=16, num_heads=4, seed=1)
        for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values()):
            assert torch.equal(pa, pb), name
        assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)

    def test_eos_bias_makes_generation_stop(self, tok):
        model = build_tiny_model(tok, hidden_size=16, num_heads=4)
        prompts = [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(8)]
        enc = tok.apply_chat_template(prompts, add_generation_prompt=True, padding=True, return_tensors="pt")
        max_new = 16

        def lengths(**kwargs):
            torch.manual_seed(0)
            out = model.generate(**enc, max_new_tokens=max_new, **kwargs)[:, enc["input_ids"].shape[1] :]
            is_eos = out == tok.eos_token_id
            return [int(row.nonzero()[0]) + 1 if row.any() else max_new for row in is_eos]

        biased = lengths(**eos_bias_generation_kwargs(tok))
        assert sum(biased) / len(biased) < max_new / 2  # with +4 on the EOS logit most completions are 1-6 tokens
        assert sum(lengths()) > sum(biased)  # without it a random model rarely stops

    def test_eos_bias_kwargs_format(self, tok):
        assert eos_bias_generation_kwargs(tok, bias=2) == {"sequence_bias": [[[2], 2.0]]}


# ---------------------------------------------------------------------------------------------------------------
# Saving and resolving
# ---------------------------------------------------------------------------------------------------------------


class TestSaveAndResolve:
    def test_save_load_round_trip_and_idempotent(self, tmp_path, tok):
        path = save_tiny_model(str(tmp_path / "tiny"), hidden_size=16, num_heads=4, seed=0)
        assert path == str(tmp_path / "tiny")
        loaded = AutoModelForCausalLM.from_pretrained(path)
        loaded_tok = AutoTokenizer.from_pretrained(path)
        assert loaded_tok.eos_token == "<|im_end|>" and loaded_tok.pad_token == "<|endoftext|>"
        assert loaded_tok.padding_side == "left"
        assert loaded_tok.get_vocab() == tok.get_vocab()
        messages = [{"role": "user", "content": "Hi"}]
        rendered = loaded_tok.apply_chat_template(messages, tokenize=False)
        assert rendered == tok.apply_chat_template(messages, tokenize=False)

        in_memory = build_tiny_model(tok, hidden_size=16, num_heads=4, seed=0)
        ids = torch.tensor([tok("What is 2 + 3?")["input_ids"]])
        torch.testing.assert_close(loaded(ids).logits, in_memory(ids).logits)
        assert loaded.generation_config.eos_token_id == tok.eos_token_id

        with open(os.path.join(path, "trl_efficient_tiny.json")) as f:
            assert json.load(f)["model"] == {"hidden_size": 16, "num_heads": 4, "seed": 0}
        mtime = os.path.getmtime(os.path.join(path, "model.safetensors"))
        assert save_tiny_model(path, hidden_size=999) == path  # already holds a model: returned as is
        assert os.path.getmtime(os.path.join(path, "model.safetensors")) == mtime
        assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]  # temporary directory cleaned up

    def test_save_into_existing_nonempty_dir(self, tmp_path):
        target = tmp_path / "out"
        target.mkdir()
        (target / "notes.txt").write_text("keep me")
        save_tiny_model(str(target), hidden_size=16, num_heads=4)
        assert (target / "notes.txt").read_text() == "keep me"
        assert (target / "config.json").is_file()

    def test_resolve_passes_real_names_through(self, tmp_path):
        assert resolve_tiny_model("Qwen/Qwen2.5-Math-1.5B") == "Qwen/Qwen2.5-Math-1.5B"
        assert resolve_tiny_model(str(tmp_path)) == str(tmp_path)

    def test_resolve_builds_once_into_cache(self, tmp_path):
        path = resolve_tiny_model("tiny:llama-16", cache_dir=str(tmp_path))
        assert path == str(tmp_path / "tiny-llama-16")
        config = AutoModelForCausalLM.from_pretrained(path).config
        assert (config.model_type, config.hidden_size, config.num_attention_heads) == ("llama", 16, 4)
        mtime = os.path.getmtime(os.path.join(path, "model.safetensors"))
        assert resolve_tiny_model("tiny:llama-16", cache_dir=str(tmp_path)) == path
        assert os.path.getmtime(os.path.join(path, "model.safetensors")) == mtime

    def test_resolve_default_name_and_env_cache(self, tmp_path, monkeypatch):
        monkeypatch.setenv("TRL_EFFICIENT_CACHE", str(tmp_path))
        path = resolve_tiny_model(TINY_MODEL_NAME)
        assert path == str(tmp_path / "tiny-qwen2-128") == resolve_tiny_model("tiny:")
        config = AutoModelForCausalLM.from_pretrained(path).config
        assert (config.model_type, config.head_dim) == ("qwen2", 64)

    @pytest.mark.parametrize("name", ["tiny:gpt9", "tiny:qwen2-abc", "tiny:qwen2-0"])
    def test_resolve_bad_tiny_name(self, name, tmp_path):
        with pytest.raises(ValueError, match="tiny:<arch>"):
            resolve_tiny_model(name, cache_dir=str(tmp_path))


def test_saving_a_model_prints_no_progress_bar_and_keeps_the_setting(tok, tmp_path, capfd):
    # A tiny model built on first use inside a CLI command must leave stderr to the command's own one-line error
    # (transformers 5.24 draws a "Writing model shards" bar in save_pretrained, even for one shard).
    from transformers.utils import logging as hf_logging

    from trl_efficient.testing.tiny import save_pretrained_atomic

    assert hf_logging.is_progress_bar_enabled()
    model = build_tiny_model(tok, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1)
    capfd.readouterr()
    save_pretrained_atomic(str(tmp_path / "m"), model, tok, "marker.json", {"ok": True})
    err = capfd.readouterr().err
    assert "Writing model shards" not in err and "%|" not in err
    assert os.path.isfile(tmp_path / "m" / "model.safetensors") and hf_logging.is_progress_bar_enabled()
