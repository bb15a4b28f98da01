"""Recipes of the advantage family: GFPO, adaptive GFPO, DRPO, GRPO-LEAD, CANON and GDPO (DLER and DA-DLER are in
`dler.py`), with the reward builders they need (`lead`, `gdpo_length`). User guide: `docs/advantage-methods.md`.

Values taken from a paper or its code cite methods.md; our own choices are listed in `proposed_defaults`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..rewards.gdpo import get_gdpo_length_reward
from ..rewards.lead import get_lead_reward
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder

reward_builder(
    "lead",
    get_lead_reward,
    "GRPO-LEAD, arXiv:2504.09696 (length-shaped accuracy among the group's correct answers)",
    whole_groups=True,
    receives=("length",),
)


@reward_builder(
    "gdpo_length", get_gdpo_length_reward, "GDPO, arXiv:2601.05242 (1[correct and L <= L_limit])", receives=("length",)
)
def build_gdpo_length_reward(args, **kwargs) -> Callable:
    """`gdpo_length` builder: `1[correct and L <= L_limit]` with `L_limit = max_completion_length // 2` unless
    `length_limit` is given (methods.md §5, proposed default)."""
    limit = kwargs.pop("length_limit", max(1, args.max_completion_length // 2))
    return get_gdpo_length_reward(length_limit=limit, **kwargs)


_GFPO_BASE = {
    "completion_filter": "gfpo",
    "filter_kwargs": {"loss_normalizer": "all"},
    "loss_type": "dapo",
}


GFPO_SECTION = Section(
    13, "GFPO: group filtered policy optimization", (), papers=("2508.09726",)
)  # methods.md §13, shared by gfpo, gfpo-adaptive
CANON_SECTION = Section(
    26, "CANON: conditional advantage estimation", ("biuboomc/CANON",), papers=("2509.23962",)
)  # methods.md §26, shared by canon, canon-entropy

register_recipe(
    Recipe(
        name="gfpo",
        section=GFPO_SECTION,
        method="GFPO (Shortest k/G)",
        description="Sample G, keep the k shortest per group, advantages over the kept set, the rest masked (§13).",
        rewards=(RewardSpec("correctness"),),
        config_overrides={
            **_GFPO_BASE,
            "advantage_estimator": "gfpo",
            "advantage_kwargs": {"k": 8, "metric": "shortest"},
        },
        proposed_defaults=(
            "GFPO reward: binary correctness (the paper's Phi-4 length-scaled reward is not reproduced)",
            "GFPO loss normaliser over all G rows (paper) via GFPOTrainer; masking, not dropping",
        ),
        trainer_class="trl_efficient.methods.gfpo:GFPOTrainer",
    )
)
register_recipe(
    Recipe(
        name="gfpo-adaptive",
        section=GFPO_SECTION,
        method="Adaptive-Difficulty GFPO",
        description="GFPO with k per group from the quartiles of a streaming digest of prompt mean rewards (§13).",
        rewards=(RewardSpec("correctness"),),
        config_overrides={
            **_GFPO_BASE,
            "advantage_estimator": "gfpo_adaptive",
            "advantage_kwargs": {
                "k_by_quartile": [8, 8, 6, 4],  # §13: k for mean reward < q25, < q50, < q75, else (mean k ~ 6.5)
                "warmup_k": 8,  # §13: k = 8 until the digest is ready
                "warmup_steps": 5,  # proposed default: ready after 5 training batches ...
                "warmup_prompts": 64,  # ... and 64 prompts (whichever comes later)
                "metric": "shortest",
            },
        },
        proposed_defaults=(
            "GFPO-AD digest ready after 5 training batches and 64 prompts (whichever comes later)",
            "GFPO reward: binary correctness (the paper's Phi-4 length-scaled reward is not reproduced)",
            "GFPO loss normaliser over all G rows (paper) via GFPOTrainer; masking, not dropping",
        ),
        trainer_class="trl_efficient.methods.gfpo:GFPOTrainer",
    )
)
register_recipe(
    Recipe(
        name="drpo",
        section=Section(
            16, "DRPO: decoupled reward policy optimization", ("Optimization-AI/DRPO",), papers=("2510.04474",)
        ),
        method="DRPO (advantage-level, exact at the sampling policy)",
        description="Correct responses weighted by a softmax of 1 - L/C within the correct set, wrong ones by a "
        "softmax of their scores; TRL's grpo loss then has DRPO's gradient (§16).",
        rewards=(RewardSpec("correctness"),),
        config_overrides={
            "advantage_estimator": "drpo",
            "advantage_kwargs": {"lam": 0.1, "tau": 10.0},
            "loss_type": "grpo",
            "beta": 0.0,
            # TRL's vLLM importance ratio would reweight DRPO's gradient; DRPO's code has no such correction (§16)
            "vllm_importance_sampling_correction": False,
        },
        proposed_defaults=(
            "DRPO length normaliser C = max_completion_length",
            "DRPO as an advantage-level formulation (exact when one optimizer step per generation batch)",
        ),
        trainer_class="trl_efficient.methods.drpo:DRPOTrainer",
    )
)
register_recipe(
    Recipe(
        name="grpo-lead",
        section=Section(15, "GRPO-LEAD", ("aeroplanepaper/GRPO-LEAD",), papers=("2504.09696",)),
        method="GRPO-LEAD",
        description="Length-shaped accuracy within the group's correct answers, -1 for wrong, difficulty-aware "
        "advantage reweighting (§15).",
        rewards=(RewardSpec("lead"),),
        config_overrides={
            "advantage_estimator": "grpo_lead",
            "completion_filter": "zero_std",
            "correctness_reward": "lead_reward",
        },
        proposed_defaults=(
            "GRPO-LEAD format failure -> -1 (repository: 0)",
            "GRPO-LEAD 4000-token shaping gate off",
            "all-equal groups masked (zero_std) instead of rejected",
        ),
    )
)
register_recipe(
    Recipe(
        name="canon",
        section=CANON_SECTION,
        method="CANON (length-conditioned advantages)",
        description="Each response compared with the mean reward of the other length half of its group (§26).",
        rewards=(RewardSpec("correctness"),),
        config_overrides={
            "advantage_estimator": "canon",
            # §26 [code]: alpha 1, mu 1; proposed: no /max_len division with the token-mean loss
            "advantage_kwargs": {"alpha": 1.0, "mu": 1.0, "beta": 0.0, "normalize_by_max_length": False},
            "epsilon_high": 0.28,
            "loss_type": "dapo",
        },
        proposed_defaults=("CANON without the /max_len division under loss_type='dapo'",),
    )
)
register_recipe(
    Recipe(
        name="gdpo",
        section=Section(5, "GDPO: group reward-decoupled normalization", ("NVlabs/GDPO",), papers=("2601.05242",)),
        method="GDPO (TRL's normalize_then_sum) with a correctness-gated length reward",
        description="Correctness and 1[correct and L <= max_completion_length/2], each z-scored per group, summed, "
        "batch z-scored (§5).",
        rewards=(RewardSpec("correctness"), RewardSpec("gdpo_length")),
        config_overrides={"multi_objective_aggregation": "normalize_then_sum"},
        proposed_defaults=("GDPO length reward 1[correct and L <= L_limit], L_limit = max_completion_length / 2",),
    )
)
