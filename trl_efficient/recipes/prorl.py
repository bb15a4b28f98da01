"""ProRL recipe (Liu et al., NVIDIA, "ProRL: Prolonged Reinforcement Learning Expands Reasoning Boundaries in Large
Language Models", arXiv 2505.24864; the released Nemotron-Research-Reasoning-Qwen-1.5B; methods.md §33).

ProRL is GRPO kept stable over thousands of steps: a KL penalty to a reference policy that is hard-reset to the
current policy (with the optimizer state) during training (`trl_efficient/trainer/reference.py`, options
`ref_reset_*` that any recipe can set), DAPO's decoupled clipping (TRL's `epsilon` / `epsilon_high`) and dynamic
sampling (this library's `dynamic_sampling` filter, refilled by `DLERTrainer` as in the `dler` recipe), token-mean
loss (TRL's `dapo`) and a high rollout temperature. It has no reward of its own: correctness, as in the paper's math
data (binary rewards).

Settings and where they come from:
- `epsilon` 0.2 / `epsilon_high` 0.4: the paper's decoupled clip (§2.2; 0.4, not DAPO's 0.28);
- `temperature` 1.2: the paper's rollout temperature (§2.2, "high sampling temperature");
- `loss_type` `dapo`, `completion_filter` `dynamic_sampling` (refill): the DAPO parts the paper adopts (§2.2);
- `ref_reset_optimizer` True: the paper resets the optimizer state with the reference (§2.2);
- `beta` 1e-4: NVIDIA's released ProRL v2 configuration (`NVIDIA-NeMo/RL`, `examples/configs/prorlv2.yaml`:
  `reference_policy_kl_penalty: 0.0001`); the v1 paper's own coefficient was not in the sources we could read.
  NeMo-RL's KL there is the `k2` estimator, TRL's is `k3` (`exp(r) - r - 1`, `r = log pi_ref - log pi_theta`);
  the same config clips at 0.2 / 0.27 (v2), the v1 paper at 0.2 / 0.4;
- `ref_reset_steps` 200: **proposed default**. The paper resets "when validation performance stagnates or degrades"
  between its hand-run stages, a rule it does not state numerically; ProRL v2 (NVIDIA's blog, Aug. 2025) resets
  every 200-500 steps. 200 is the low end of that range, so a 500-step run resets twice.
  The paper's plateau trigger is there as an option: `ref_reset_metric: eval_reward` with an evaluation set and
  `eval_strategy`, patience 3 (proposed).
"""

from __future__ import annotations

from .registry import Recipe, RewardSpec, Section, register_recipe

__all__ = ["PRORL_BETA", "PRORL_PAPER_STEPS", "PRORL_RESET_STEPS"]

PRORL_BETA = 1e-4  # NVIDIA-NeMo/RL examples/configs/prorlv2.yaml: reference_policy_kl_penalty 0.0001 (ProRL v2)
PRORL_RESET_STEPS = 200  # proposed: the low end of ProRL v2's 200-500 steps between resets
PRORL_PAPER_STEPS = 2000  # the paper's horizon ("more than 2,000 training steps")


register_recipe(
    Recipe(
        name="prorl",
        section=Section(
            33,
            "ProRL: KL with reference resets, clip-higher, dynamic sampling",
            ("NVIDIA-NeMo/RL",),
            papers=("2505.24864",),
        ),
        method="ProRL (KL to a reference hard-reset with the optimizer, clip-higher, dynamic sampling)",
        description="GRPO with a KL term whose reference is hard-reset to the policy (optimizer state too) every 200 "
        "steps or on a plateau; clip 0.2/0.4, dynamic sampling, T 1.2 (§33).",
        rewards=(RewardSpec("correctness"),),
        config_overrides={
            "beta": PRORL_BETA,  # ProRL v2's released config (NeMo-RL prorlv2.yaml); v1's not found
            "ref_reset_steps": PRORL_RESET_STEPS,  # proposed: ProRL v2's 200-500
            "ref_reset_optimizer": True,  # §2.2: optimizer state reset with the reference
            "epsilon": 0.2,  # §2.2 decoupled clip
            "epsilon_high": 0.4,  # §2.2
            "loss_type": "dapo",  # §2.2: DAPO's token-level loss
            "completion_filter": "dynamic_sampling",  # §2.2: DAPO dynamic sampling, refilled by DLERTrainer
            "filter_kwargs": {"max_generation_batches": 4},
            "temperature": 1.2,  # §2.2
        },
        proposed_defaults=(
            "KL coefficient beta = 1e-4 from ProRL v2's released config (NeMo-RL prorlv2.yaml; k2 there, TRL's k3 "
            "here); the v1 paper's value not found",
            "reference reset every 200 steps (ProRL v2's 200-500; the paper resets when validation stalls, by hand)",
            "plateau trigger (ref_reset_metric) patience 3, min_delta 0, off unless an evaluation metric is named",
            "dynamic sampling refill from an independent seeded pass over the data, at most 4 generation batches",
        ),
        trainer_class="trl_efficient.methods.dler:DLERTrainer",
    )
)
