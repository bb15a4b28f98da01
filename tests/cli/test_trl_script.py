"""A recipe is a Python object a TRL script uses (issue 46): `examples/trl_script.py`, the README's first Python
example, runs as written, offline on CPU, on a tiny model; `Recipe.config` records where each value came from."""

import os
import re
import runpy

import datasets
import pytest
import transformers

from trl_efficient.recipes.registry import Recipe

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "trl_script.py")
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"  # the script's model: the test hands the tiny one in its place
# what makes the script's run take seconds on CPU (the test's, on top of the script's own settings)
CPU = {"max_steps": 1, "bf16": False, "use_cpu": True, "per_device_train_batch_size": 4, "num_generations": 4,
       "max_completion_length": 8, "activation_checkpointing": False, "save_strategy": "no",
       "report_to": "none"}  # fmt: skip


def test_the_trl_script_example_trains_offline(tiny_model_dir, tmp_path, monkeypatch):
    rows = {"question": [f"What is {i} + {i}?" for i in range(8)],
            "answer": [f"{i} + {i} = {2 * i}\n#### {2 * i:,}" for i in range(8)]}  # fmt: skip
    asked = []

    def load_dataset(*args, **kwargs):  # GSM8K's raw format, from no Hub
        asked.append((args, kwargs))
        return datasets.Dataset.from_dict(rows)

    configs = []
    real_config, real_trainer = Recipe.config, Recipe.trainer
    real_tokenizer = transformers.AutoTokenizer.from_pretrained

    def config(self, output_dir, run_defaults=None, **yours):
        configs.append(dict(yours))  # what the script asked for, then the test's CPU settings on top
        return real_config(self, output_dir, run_defaults, **{**yours, **CPU})

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(Recipe, "config", config)
    monkeypatch.setattr(Recipe, "trainer", lambda self, model, **kw: real_trainer(self, tiny_model_dir, **kw))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda name, *a, **k: real_tokenizer(
        tiny_model_dir if name == MODEL else name, *a, **k))  # fmt: skip
    monkeypatch.chdir(tmp_path)

    out = runpy.run_path(SCRIPT, run_name="__main__")

    assert asked == [(("openai/gsm8k", "main"), {"split": "train"})] and configs == [{"max_steps": 200}]
    args, train_dataset, trainer = out["args"], out["train_dataset"], out["trainer"]
    assert args.recipe == "kimi" and args.output_dir == "qwen-kimi"
    assert args.sources["max_steps"] == "user" and "learning_rate" not in args.sources  # TRL's default
    assert args.reward_weights == [1.0, 0.4]  # kimi's reward weights, applied as `trl-efficient train` applies them
    # GSM8K rows in the library's format: the gold answer after ####, thousands separators dropped
    assert {"prompt", "solution", "idx"} <= set(train_dataset.column_names)
    assert list(train_dataset["solution"]) == [str(2 * i) for i in range(8)]
    assert "\\boxed{}" in train_dataset[0]["prompt"][-1]["content"]
    assert type(trainer) is out["recipe"].trainer_cls and trainer.card_info.recipe.name == "kimi"
    assert [f.__name__ for f in trainer.reward_funcs] == ["correctness_reward", "kimi_length_reward"]
    assert trainer.state.global_step == 1


def test_the_readme_first_python_block_is_the_script():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    with open(SCRIPT, encoding="utf-8") as f:
        script = f.read()
    if not any("get_recipe(" in block for block in blocks):
        pytest.skip("README.md has no Python block with a recipe yet: examples/trl_script.py is to be its first")
    assert blocks[0] == script


def test_recipe_config_precedence_and_sources():
    """Run preset < recipe < yours, each value's source recorded; the preset's model and data are the script's."""
    from trl_efficient import get_recipe

    recipe = get_recipe("dapo-overlong")
    args = recipe.config("out", run_defaults="math-1.5b", learning_rate=3e-6, bf16=False, use_vllm=False)
    assert (args.num_generations, args.sources["num_generations"]) == (8, "preset")
    assert (args.epsilon_high, args.sources["epsilon_high"]) == (0.28, "recipe")
    assert (args.learning_rate, args.sources["learning_rate"]) == (3e-6, "user")
    assert args.sources["output_dir"] == "user" and args.recipe == "dapo-overlong"
    # the preset's bfloat16 weights go with its bf16: with bf16 off the model loads in float32
    assert args.model_init_kwargs == {"dtype": "float32"} and args.sources["model_init_kwargs.dtype"] == "preset"
    with pytest.raises(ValueError, match="max_stepz is no EfficientGRPOConfig field"):
        recipe.config("out", max_stepz=3)
