"""Frugal-Thinking (methods.md §30): base-model pass rates, the p < 1 filter, the recipe's dataset hook, and the
weighted sampler reading the `pass_rate` column."""

import pytest
from datasets import Dataset
from helpers import make_dataset

from trl_efficient.methods.frugal import (
    FRUGAL_PASS_RATES_ENV,
    FrugalSampler,
    apply_pass_rates,
    estimate_pass_rate,
    pass_rates_from_records,
    prepare_dataset,
)
from trl_efficient.methods.saber import write_profile
from trl_efficient.recipes import get_recipe
from trl_efficient.trainer import EfficientGRPOConfig


def _rates(*values):
    return [{"idx": i, "question": f"q{i}", "pass_rate": p} for i, p in enumerate(values)]


def test_pass_rate_is_the_share_of_correct_rollouts():
    # problem 0: 3 of 4 correct -> 0.75; problem 1: 0 of 4 -> 0.0; problem 2: 4 of 4 -> 1.0
    flags = [True, True, False, True] + [False] * 4 + [True] * 4
    records = [{"idx": i // 4, "question": f"q{i // 4}", "correct": c} for i, c in enumerate(flags)]
    out = pass_rates_from_records(records, n=4)
    assert [(r["idx"], r["correct"], r["pass_rate"]) for r in out] == [(0, 3, 0.75), (1, 0, 0.0), (2, 4, 1.0)]
    with pytest.raises(ValueError, match="groups of n = 5"):
        pass_rates_from_records(records, n=5)


def test_filter_keeps_p_below_one_including_zero():
    ds = make_dataset(4)  # idx 0..3
    out = apply_pass_rates(ds, _rates(0.0, 1.0, 0.5, 0.9375))  # 0.9375 = 15/16: kept; 1.0 (always solved): dropped
    assert out["idx"] == [0, 2, 3] and out["pass_rate"] == [0.0, 0.5, 0.9375]
    assert apply_pass_rates(ds, _rates(0.0, 1.0, 0.5, 0.9), keep_solved=True)["idx"] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="No pass-rate estimate"):
        apply_pass_rates(ds, _rates(0.0, 0.5))  # idx 2, 3 unmatched
    assert apply_pass_rates(ds, _rates(0.0, 0.5), unmatched="drop")["idx"] == [0, 1]
    with pytest.raises(ValueError, match="nothing left"):
        apply_pass_rates(ds, _rates(1.0, 1.0, 1.0, 1.0))
    # without `idx` the join is on the question text (last user message)
    no_idx = ds.remove_columns("idx")
    by_text = [{"question": "What is 2 + 3?", "pass_rate": 0.25}, {"question": "What is 6 * 7?", "pass_rate": 1.0}]
    joined = apply_pass_rates(no_idx, by_text, unmatched="drop")
    assert joined["pass_rate"] == [0.25] and joined["solution"] == ["5"]


def test_estimate_pass_rate_generates_n_rollouts_per_problem(tiny_model_dir, tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ds = make_dataset(3)
    out = estimate_pass_rate(model, tiny_tokenizer, ds, n=2, max_new_tokens=4, batch_size=8, show_progress=False)
    assert [r["idx"] for r in out] == [0, 1, 2] and all(r["n"] == 2 for r in out)
    assert all(r["pass_rate"] == r["correct"] / 2 for r in out)
    with pytest.raises(ValueError, match="positive"):
        estimate_pass_rate(model, tiny_tokenizer, ds, n=0)


def test_recipe_prepare_dataset_and_sampler(tmp_path, monkeypatch):
    args = EfficientGRPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    ds = make_dataset(4)
    path = write_profile(_rates(0.0, 1.0, 0.5, 0.25), str(tmp_path / "rates.jsonl"))
    monkeypatch.delenv(FRUGAL_PASS_RATES_ENV, raising=False)
    with pytest.raises(ValueError, match="pass rates"):
        prepare_dataset(ds, args)
    with pytest.raises(ValueError, match="estimate=True"):
        prepare_dataset(ds, args, n=4)
    out = get_recipe("frugal").apply_prepare_dataset(ds, args, None, pass_rates=path)
    assert out["idx"] == [0, 2, 3]
    monkeypatch.setenv(FRUGAL_PASS_RATES_ENV, path)
    assert prepare_dataset(ds, args)["pass_rate"] == [0.0, 0.5, 0.25]
    # the sampler reads the column: uniform by default (the paper), w = 1 + p with the option alpha = 1
    assert FrugalSampler(out, mini_repeat_count=2, batch_size=1, seed=0).weights.tolist() == [1.0, 1.0, 1.0]
    sampler = FrugalSampler(out, mini_repeat_count=2, batch_size=1, seed=0, alpha=1.0)
    assert sampler.weights.tolist() == [1.0, 1.5, 1.25]
    assert get_recipe("frugal").config_overrides["prompt_sampler"] == "frugal"
    assert get_recipe("frugal").config_overrides["sampler_kwargs"] == {"alpha": 0.0}  # uniform, the paper
    with pytest.raises(ValueError, match="do not exist"):
        prepare_dataset(Dataset.from_dict({"idx": [0]}), args, pass_rates=str(tmp_path / "missing.jsonl"))
