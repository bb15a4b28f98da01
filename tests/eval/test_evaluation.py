"""Metrics, modes, prompt building and scoring of `trl_efficient.eval.evaluate` (scripted backend: exact values)."""

import pytest
from datasets import Dataset

from trl_efficient.eval.evaluate import (
    EvalMode,
    EvalResult,
    GeneratedSample,
    ScoredSample,
    build_prompt_text,
    evaluate_model,
    evaluate_samples,
    parse_mode,
    parse_modes,
    pass_at_k,
    percentile,
)


def test_pass_at_k_unbiased_estimator():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # k=1 is the fraction correct: 2/5
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 4, 2) == 1.0 and pass_at_k(5, 0, 3) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_percentile_matches_numpy_linear():
    # p90 of 1..10: position 0.9 * 9 = 8.1 -> 9 + 0.1 * (10 - 9) = 9.1
    assert percentile(range(1, 11), 90) == pytest.approx(9.1)


def test_evaluate_samples_by_hand():
    s = [
        ScoredSample(0, 1, 10, 6, False, True),
        ScoredSample(0, 1, 20, 16, False, True),
        ScoredSample(1, 3, 30, 30, True, False),
        ScoredSample(1, 3, 40, 35, False, True),
        ScoredSample(2, -1, 50, 50, False, None),
        ScoredSample(2, -1, 60, 60, False, None),
    ]
    r = evaluate_samples(s, ks=(1, 2))
    # scorable samples: 4, correct 3 -> accuracy 0.75; problem 2 is unscorable
    assert r.accuracy == 0.75 and r.num_unscorable == 1 and r.num_problems == 3 and r.samples_per_problem == 2
    # pass@1 = mean(2/2, 1/2) = 0.75; pass@2 = mean(1, 1 - C(1,2)/C(2,2) = 1) = 1.0
    assert r.pass_at_k == {"pass@1": 0.75, "pass@2": 1.0}
    assert r.mean_tokens == 35.0  # (10+20+30+40+50+60)/6
    assert r.median_tokens == 35.0
    assert r.p90_tokens == pytest.approx(55.0)  # position 4.5 -> 50 + 0.5 * 10
    assert r.truncated_fraction == pytest.approx(1 / 6)
    assert r.mean_thinking_tokens == pytest.approx((6 + 16 + 30 + 35 + 50 + 60) / 6)
    assert r.mean_answer_tokens == pytest.approx((4 + 4 + 0 + 5 + 0 + 0) / 6)
    assert r.mean_tokens_correct == pytest.approx((10 + 20 + 40) / 3) and r.mean_tokens_incorrect == 30.0
    assert set(r.by_level) == {"1", "3"}  # level -1 means "no level"
    assert r.by_level["3"] == {"num_problems": 1, "accuracy": 0.5, "mean_tokens": 35.0, "truncated_fraction": 0.5}


def test_parse_modes_families_and_errors():
    names = [m.name for m in parse_modes(["plain", "saber", "l1:100", "l1-max:50", "hbpo:64", "plain"])]
    assert names == [
        "plain",
        "saber:nothink",
        "saber:fastthink",
        "saber:corethink",
        "saber:deepthink",
        "l1:100",
        "l1-max:50",
        "hbpo:64",
    ]
    assert [m.value for m in parse_mode("l1")] == [512, 1024, 2048, 3600]
    assert parse_mode("saber:fastthink")[0].system.startswith(
        "Think step by step, keeping your reasoning strictly under 128"
    )
    for bad in ("hbpo:0", "l1:abc", "saber:turbo", "fancy"):
        with pytest.raises(ValueError):
            parse_mode(bad)


def test_build_prompt_text_per_mode(tiny_tokenizer):
    prompt = [{"role": "user", "content": "What is 2 + 3?"}]
    plain = build_prompt_text(prompt, EvalMode(), tiny_tokenizer)
    assert plain == "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    hbpo = build_prompt_text(prompt, parse_mode("hbpo:minimal")[0], tiny_tokenizer)
    assert hbpo == plain + "<think> I will answer the question with minimal tokens"
    l1 = build_prompt_text(prompt, parse_mode("l1:300")[0], tiny_tokenizer)
    assert "What is 2 + 3? Think for 300 tokens.<|im_end|>" in l1
    saber = build_prompt_text(prompt, parse_mode("saber:nothink")[0], tiny_tokenizer)
    assert saber == "<|im_start|>system\nAnswer directly without reasoning.<|im_end|>\n" + plain


def test_saber_modes_match_the_saber_module():
    from trl_efficient.eval.evaluate import SABER_MODES
    from trl_efficient.prompts import saber_mode_prompts

    assert {k.lower(): v for k, v in saber_mode_prompts().items()} == {k: v[0] for k, v in SABER_MODES.items()}


class ScriptedBackend:
    """Returns fixed completions (per prompt, cycling) and records what it was asked."""

    def __init__(self, tokenizer, texts, finished=True):
        self.tokenizer, self.texts, self.finished, self.calls = tokenizer, texts, finished, []

    def generate(self, prompts, n, max_new_tokens, temperature, top_p, seed=0, description=""):
        self.calls.append((prompts, n, max_new_tokens, temperature, top_p))
        out = []
        for p_i, _ in enumerate(prompts):
            samples = []
            for j in range(n):
                text = self.texts[(p_i * n + j) % len(self.texts)]
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
                ids = ids + [self.tokenizer.eos_token_id] if self.finished else ids
                samples.append(GeneratedSample(ids, text, self.finished))
            out.append(samples)
        return out


def test_evaluate_model_with_scripted_backend(tiny_tokenizer):
    ds = Dataset.from_dict({
        "prompt": [[{"role": "user", "content": "6 * 7?"}], [{"role": "user", "content": "2 + 3?"}]],
        "solution": ["42", "5"], "level": [1, 2],
    })  # fmt: skip
    texts = [
        "<think> 6 * 7 = 42 </think> \\boxed{42}",
        "\\boxed{41}",
        "<think> 2 + 3 </think> \\boxed{5}",
        "\\boxed{5}",
    ]
    backend = ScriptedBackend(tiny_tokenizer, texts)
    result, records = evaluate_model(None, tiny_tokenizer, ds, max_new_tokens=32, num_samples=2, ks=(1, 2),
                                     backend=backend, return_records=True)  # fmt: skip
    assert isinstance(result, EvalResult)
    assert backend.calls[0][1:] == (2, 32, 0.6, 0.95)  # seeds' sampling defaults
    # problem 0: 1 of 2 correct; problem 1: 2 of 2 -> accuracy 3/4; pass@2 = mean(1, 1) = 1
    assert result.accuracy == 0.75 and result.pass_at_k == {"pass@1": 0.75, "pass@2": 1.0}
    lengths = [len(tiny_tokenizer(t, add_special_tokens=False)["input_ids"]) + 1 for t in texts]
    assert result.mean_tokens == pytest.approx(sum(lengths) / 4) and result.truncated_fraction == 0.0
    # thinking tokens: up to and including </think> for the two think completions, whole completion otherwise
    think0 = len(tiny_tokenizer("<think> 6 * 7 = 42 </think>", add_special_tokens=False)["input_ids"])
    assert records[0]["thinking_tokens"] == think0 and records[1]["thinking_tokens"] == lengths[1]
    assert result.by_level["1"]["accuracy"] == 0.5 and result.by_level["2"]["accuracy"] == 1.0
    assert [r["correct"] for r in records] == [True, False, True, True]


def test_prefilled_empty_think_block_counts_no_thinking(tiny_tokenizer):
    ds = Dataset.from_dict({"prompt": [[{"role": "user", "content": "2 + 3?"}]], "solution": ["5"]})
    backend = ScriptedBackend(tiny_tokenizer, ["\\boxed{5}"], finished=False)
    mode = EvalMode("nothink-prefill", prefill="<think>\n\n</think>\n\n")
    result = evaluate_model(None, tiny_tokenizer, ds, backend=backend, mode=mode)
    assert result.accuracy == 1.0 and result.mean_thinking_tokens == 0.0 and result.truncated_fraction == 1.0
    assert backend.calls[0][0][0].endswith("<think>\n\n</think>\n\n")


def test_transformers_backend_on_tiny_model(tiny_model_dir, tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    from trl_efficient.testing.tiny import eos_bias_generation_kwargs

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ds = Dataset.from_dict({"prompt": [[{"role": "user", "content": "1 + 1?"}]] * 3, "solution": ["2"] * 3})
    kwargs = dict(max_new_tokens=6, num_samples=2, generation_kwargs=eos_bias_generation_kwargs(tiny_tokenizer, 3.0),
                  show_progress=False, batch_size=4)  # fmt: skip
    a, records = evaluate_model(model, tiny_tokenizer, ds, seed=1, return_records=True, **kwargs)
    b = evaluate_model(model, tiny_tokenizer, ds, seed=1, **kwargs)
    assert a == b  # seeded
    assert a.num_samples == 6 and a.num_problems == 3 and len(records) == 6
    # the aggregate is the records' own: mean of the 6 lengths; a sample is truncated iff it used all 6 new tokens
    # without generating EOS (a finished sample ends with EOS, so it has at most 6 tokens, EOS included)
    tokens = [r["tokens"] for r in records]
    assert all(1 <= n <= 6 for n in tokens) and a.mean_tokens == pytest.approx(sum(tokens) / 6)
    assert all(r["tokens"] == 6 for r in records if r["truncated"])
    assert a.truncated_fraction == pytest.approx(sum(r["truncated"] for r in records) / 6)
    assert a.p90_tokens <= max(tokens)
