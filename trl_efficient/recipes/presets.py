"""Run presets: the run settings most recipe YAMLs share, named once, so a YAML holds only what differs from them.

A YAML (or the command line) names one with `run_defaults: <name>`; its settings then apply beneath everything else:

    preset (`run_defaults`) < the recipe's method settings (`Recipe.config_overrides`) < the YAML < the command line

so a YAML key or a flag always wins, and a method setting of the recipe is never undone by a preset. A YAML without
`run_defaults` gets TRL's and `EfficientGRPOConfig`'s defaults for what it does not set, as before. The shipped
recipe YAMLs (`trl-efficient recipes show NAME`) name `math-1.5b` and keep only their own run settings (model, batch,
length, ...) where the paper's differ; `trl-efficient recipes presets` prints the presets.

>>> sorted(RUN_PRESETS), RUN_PRESETS["math-1.5b"]["model_name_or_path"]
(['math-1.5b'], 'deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B')
>>> run_preset(None), run_preset("math-1.5b")["max_completion_length"]
({}, 4096)
"""

from __future__ import annotations

__all__ = ["RUN_PRESETS", "run_preset"]

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
}


def run_preset(name: str | None) -> dict:
    """The settings of the run preset `name` (a copy; `{}` for `None`); an unknown name raises `ValueError` listing
    the presets."""
    if name is None:
        return {}
    if name not in RUN_PRESETS:
        raise ValueError(f"unknown run_defaults {name!r}: one of {sorted(RUN_PRESETS)}")
    return {key: dict(value) if isinstance(value, dict) else value for key, value in RUN_PRESETS[name].items()}
