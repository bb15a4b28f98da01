"""BroRL recipe (Hu et al., NVIDIA, "BroRL: Scaling Reinforcement Learning via Broadened Exploration", arXiv
2510.01180; methods.md §34).

BroRL scales the rollouts per prompt N to the hundreds instead of the training steps: it continues models that ProRL
trained until they saturated (about 3K steps) with N = 512, which its mass-balance analysis says makes every update
expand the probability mass of correct tokens (the unsampled-token term shrinks as N grows). The algorithm is
ProRL's (§33): KL to a reference that is hard-reset with the optimizer, DAPO's clip-higher and dynamic sampling,
correctness rewards; only N changes. So this recipe is `prorl`'s `config_overrides` (read from that recipe, one
home) with `num_generations` 512.

What the library adds for it is memory, not math (`trl_efficient/trainer/chunking.py`): TRL 1.16 already computes
the group statistics on the gathered generation batch and runs the loss in micro-batches of
`per_device_train_batch_size` (a group may span many), so a group of 512 needs only generation in chunks of rows,
`generation_chunk_size`, on the transformers path (vLLM schedules its own batches: the GPU YAML uses vLLM and leaves
the option unset).

Settings and where they come from:
- `num_generations` 512: the paper's N (abstract, §1: "N = 512"; the ProRL baseline samples 16);
- everything else: `prorl`'s settings (beta 1e-4, resets every 200 steps, clip 0.2/0.4, `dapo` loss, dynamic
  sampling with refill, temperature 1.2), since BroRL continues ProRL's training with its algorithm. Which of them
  the paper changes for its BroRL phase (the reset period, the KL coefficient, the prompts per step) was not in the
  sources we could read: **proposed defaults**, as they are in `prorl`;
- the base model: ProRL's released checkpoint (`configs/brorl.yaml`); the paper starts from an internal ProRL
  checkpoint after about 3K steps.
"""

from __future__ import annotations

from . import prorl as _prorl  # noqa: F401  (registers `prorl`, whose settings this recipe reuses)
from .registry import Recipe, RewardSpec, Section, get_recipe, register_recipe

__all__ = ["BRORL_N"]

BRORL_N = 512  # the paper's rollouts per prompt (arXiv 2510.01180, abstract and §1)


register_recipe(
    Recipe(
        name="brorl",
        section=Section(34, "BroRL: hundreds of rollouts per prompt", (), papers=("2510.01180", "2505.24864")),
        method="BroRL (ProRL with hundreds of rollouts per prompt, N = 512)",
        description="ProRL's algorithm (KL with reference resets, clip 0.2/0.4, dynamic sampling, T 1.2) with N = 512 "
        "rollouts per prompt; generation_chunk_size bounds transformers generation memory (§34).",
        rewards=(RewardSpec("correctness"),),
        config_overrides={
            **get_recipe("prorl").config_overrides,  # ProRL's algorithm, which BroRL continues (§33)
            "num_generations": BRORL_N,  # the paper's N = 512
        },
        proposed_defaults=(
            "every setting besides N is ProRL's (the recipe `prorl`, with its own proposed defaults); what the BroRL "
            "phase changes besides N was not in the sources we read",
            "prompts per step: one per process (per_device_train_batch_size 32 x gradient_accumulation_steps 16 = "
            "512 rows), not the paper's, which was not in the sources we read",
        ),
        trainer_class=get_recipe("prorl").trainer_class,  # DLERTrainer: dynamic sampling with refill, as in prorl
    )
)
