"""The `testbed:formats` base model's data: the methods' prompt formats with random values, traces unchanged."""

from trl_efficient.testbed.base import BASE_MODEL_SIZES, BaseModelConfig, _encode_examples, build_testbed_tokenizer


def test_formats_change_prompts_not_traces():
    tok = build_testbed_tokenizer()
    plain = _encode_examples(tok, BaseModelConfig(num_train_tasks=40))
    mixed = _encode_examples(tok, BaseModelConfig(num_train_tasks=40, method_prompt_share=1.0))
    seen = set()
    for (p0, c0), (p1, c1) in zip(plain, mixed, strict=True):
        prompt = tok.decode(p1)
        assert p0 != p1  # every prompt carries a format at share 1.0
        if prompt.rstrip().endswith("tokens"):  # HBPO prefill: the trace continues after its "<think>"
            seen.add("hbpo")
            assert "<think> I will answer the question with" in prompt
            assert tok.decode(c0) == "<think>" + tok.decode(c1)
        else:
            assert c0 == c1  # the same trace: the value in the prompt means nothing to the base model
            seen.add("l1-max" if "Think for maximum" in prompt else "l1" if "Think for " in prompt else "saber")
    assert seen == {"hbpo", "l1", "l1-max", "saber"}


def test_plain_base_key_is_unchanged_by_the_new_field():
    assert "method_prompt_share" not in BASE_MODEL_SIZES["base"].to_dict()
    assert BASE_MODEL_SIZES["formats"].to_dict()["method_prompt_share"] == 0.3
    assert BASE_MODEL_SIZES["formats"].key() != BASE_MODEL_SIZES["base"].key()
