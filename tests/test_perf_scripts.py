"""Cheap checks of the speed scripts in perf/ (the timings themselves are not tested)."""

import importlib.util
import os

import pytest

from trl_efficient.recipes import RECIPES, get_recipe
from trl_efficient.trainer import EfficientGRPOConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(script):
    spec = importlib.util.spec_from_file_location(script, os.path.join(ROOT, "perf", f"{script}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


overhead = _load("trainer_overhead")


class TestConfigKwargs:
    def test_precedence(self):
        # defaults < recipe overrides < fixed measurement settings, each key once
        kwargs, replaced = overhead.config_kwargs(
            {"beta": 0.04, "max_completion_length": 4000, "loss_type": "dapo"},
            {"max_completion_length": 64, "seed": 1},
            {"beta": 0.0, "temperature": 1.0},
        )
        assert kwargs == {"beta": 0.04, "temperature": 1.0, "max_completion_length": 64, "loss_type": "dapo", "seed": 1}
        assert replaced == ["max_completion_length"]  # the recipe's 4000 was replaced by the benchmark's 64

    def test_an_equal_value_is_not_reported_as_replaced(self):
        assert overhead.config_kwargs({"seed": 1}, {"seed": 1}, {})[1] == []

    def test_fixed_keys_are_checked(self):
        with pytest.raises(ValueError, match="BENCH_FIXED_KEYS"):
            overhead.config_kwargs({}, {"beta": 0.0})

    @pytest.mark.parametrize("name", list(RECIPES))
    def test_every_recipe_builds_a_config(self, name, tmp_path):
        # The old crash: EfficientGRPOConfig() got multiple values for keyword argument 'beta' (hbpo, drpo).
        recipe = get_recipe(name)
        fixed = {"output_dir": str(tmp_path), "max_steps": 3, "per_device_train_batch_size": 16,
                 "num_generations": 8, "max_completion_length": 64, "use_cpu": True, "report_to": "none"}  # fmt: skip
        overrides, scaled = overhead.scaled_overrides(name, 64, 3)
        kwargs, replaced = overhead.config_kwargs(overrides, fixed)
        args = EfficientGRPOConfig(**kwargs)  # the recipe's own validation passes at the benchmark's lengths
        for key, value in overrides.items():
            expected = fixed.get(key, value)
            assert kwargs[key] == expected
            assert (key in replaced) == (key in fixed and value != fixed[key])
        for key, value in overhead.BENCH_DEFAULTS.items():
            assert getattr(args, key) == recipe.config_overrides.get(key, value)
        assert args.max_completion_length == 64 and args.num_generations == 8


def test_scaled_overrides_fit_the_cap_and_keep_the_recipe_settings():
    # DA-DLER: truncate_to 2000 of max_completion_length 4000 is half: 32 of 64; the released +0.1 correct-sample
    # boost and the solve-rate threshold stay as the recipe has them (methods.md §4)
    overrides, names = overhead.scaled_overrides("da-dler", 64, 3)
    assert overrides["advantage_kwargs"] == {"solve_rate_threshold": 0.75, "truncate_to": 32, "correct_boost": 0.1}
    assert overrides["max_completion_length"] == 64 and "advantage_kwargs" in names
    assert get_recipe("da-dler").config_overrides["advantage_kwargs"]["truncate_to"] == 2000  # not mutated


def test_markdown_table_has_one_row_per_recipe_and_failures_inline():
    ok = {
        "recipe": "kimi",
        "G": 8,
        "status": "ok",
        "error": "",
        "notes": "",
        "plain_s_per_step": 1.0,
        "efficient_s_per_step": 1.5,
        "ratio": 1.5,
        "plain_tokens_per_step": 100.0,
        "efficient_tokens_per_step": 100.0,
    }
    failed = {**ok, "recipe": "x", "status": "failed", "error": "ValueError: a | b", "plain_s_per_step": None,
              "efficient_s_per_step": None, "ratio": None, "plain_tokens_per_step": None,
              "efficient_tokens_per_step": None}  # fmt: skip
    lines = overhead.markdown_table([ok, failed]).splitlines()
    assert len(lines) == 4 and lines[0].count("|") == lines[2].count("|") == lines[3].count("|") == 9
    assert lines[2] == "| kimi | 1.000 | 1.500 | 1.50 | 100 | 100 | 8 | ok |"
    assert lines[3] == "| x | - | - | - | - | - | 8 | failed: ValueError: a / b |"  # a "|" would split the cell


def test_plain_dataset_carries_l1_targets(tmp_path):
    # L1 (arXiv 2503.04697): each example gets one target N in target_length_range, the instruction
    # " Think for N tokens." (exact) appended to the user turn, and N as the reward's 'target_length' column.
    from helpers import make_dataset

    args = EfficientGRPOConfig(
        output_dir=str(tmp_path), rollout_plan="target_length", target_length_mode="exact",
        target_length_range=[10, 20], num_generations=4, use_cpu=True, report_to="none",
    )  # fmt: skip
    dataset = make_dataset(6)
    out = overhead.plain_dataset(dataset, args)
    for before, row in zip(dataset, out, strict=True):
        assert 10 <= row["target_length"] <= 20 and row["length_mode"] == "exact"
        suffix = f" Think for {row['target_length']} tokens."
        assert row["prompt"][-1]["content"] == before["prompt"][-1]["content"] + suffix
    plain_args = EfficientGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    assert overhead.plain_dataset(dataset, plain_args) is dataset  # no rollout plan: unchanged
