"""Recipes that read the policy's per-token entropies at generation time: `pear` (PEAR, methods.md §29, run by
`trl_efficient.methods.pear.PEARTrainer`) and `canon-entropy` (CANON's entropy variant, §26, run by
`trl_efficient.methods.entropy.TokenEntropyTrainer`), with the reward builder `pear`.

Values taken from a paper or its code cite methods.md; our own choices are listed in `proposed_defaults`.
"""

from __future__ import annotations

from ..rewards.pear import get_pear_reward
from .advantage import CANON_SECTION
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder

reward_builder(
    "pear",
    get_pear_reward,
    "PEAR, arXiv:2510.08026 (thinking- vs answer-phase token entropy; needs PEARTrainer)",
    needs=("pear_think_entropy", "pear_answer_entropy"),
)


register_recipe(
    Recipe(
        name="pear",
        section=Section(29, "PEAR: phase entropy aware reward", (), papers=("2510.08026",)),
        method="PEAR (phase entropy aware reward)",
        description="Correctness minus 0.5 * max(0, H_think - H_answer), the policy's mean token entropies of the "
        "thinking and answer phases at generation time (§29).",
        rewards=(RewardSpec("correctness"), RewardSpec("pear", kwargs={"lam": 0.5, "alpha": 1.0})),
        config_overrides={},
        proposed_defaults=(
            "PEAR reward c - lam * max(0, H_think - alpha * H_answer) with lam = 0.5, alpha = 1.0 (mean nats/token)",
            "phases split at the last </think> (the tag counts as thinking); no </think> -> H_answer = 0; an empty "
            "phase has mean entropy 0",
            "entropies from one extra no-grad forward pass at generation time (the policy before the update)",
        ),
        trainer_class="trl_efficient.methods.pear:PEARTrainer",
    )
)
register_recipe(
    Recipe(
        name="canon-entropy",
        section=CANON_SECTION,
        method="CANON (entropy-conditioned advantages)",
        description="Each response compared with the mean reward of the other mean-token-entropy half of its group "
        "(§26).",
        rewards=(RewardSpec("correctness"),),
        config_overrides={
            "advantage_estimator": "canon",
            # §26 [code]: alpha 1, mu 1; the entropy metric; proposed: no /max_len division with the token-mean loss
            "advantage_kwargs": {
                "alpha": 1.0,
                "mu": 1.0,
                "beta": 0.0,
                "normalize_by_max_length": False,
                "metric": "entropy",
            },
            "epsilon_high": 0.28,
            "loss_type": "dapo",
        },
        proposed_defaults=(
            "CANON without the /max_len division under loss_type='dapo'",
            "fixed mu = 1 (the paper's mu schedules for the entropy variant are left out)",
            "mean token entropy from one extra no-grad forward pass at generation time, rounded to 1e-4 nats; ties "
            "break stably by index",
        ),
        trainer_class="trl_efficient.methods.entropy:TokenEntropyTrainer",
    )
)
