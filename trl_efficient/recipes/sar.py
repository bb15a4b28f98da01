"""SAR recipe (Self-Aligned Reward, methods.md §25, arXiv 2509.05489), run by `trl_efficient.methods.sar.SARTrainer`,
with the reward builder `sar`.

The scoring model is the reward's keyword argument `model` (`"policy"`, the released code, or `"reference"`, TRL's
`ref_model`, which needs `beta > 0`), so a run changes it with the config's `reward_kwargs`
(`--reward_kwargs '{"sar": {"model": "reference"}}'`), as it changes `alpha`; `SARTrainer` reads it from the reward
at construction. Values taken from the paper or its code cite methods.md; our own choices are listed in
`proposed_defaults`.
"""

from __future__ import annotations

from ..rewards.sar import get_sar_reward
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder

reward_builder(
    "sar",
    get_sar_reward,
    "SAR, arXiv:2509.05489 (alpha * clip((ppl(a) - ppl(a|q)) / ppl(a), -1, 1); needs SARTrainer)",
    needs=("sar_score",),
)


register_recipe(
    Recipe(
        name="sar",
        section=Section(
            25,
            "SAR: self-aligned reward",
            ("amazon-science/Self-Aligned-Reward-Towards_Effective_and_Efficient_Reasoners",),
            papers=("2509.05489",),
        ),
        method="SAR (self-aligned reward)",
        description="Correctness plus 0.2 * clip((ppl(a) - ppl(a|q)) / ppl(a), -1, 1): answers whose perplexity drops "
        "when the question is given; no std scaling, Dr. GRPO loss (§25).",
        # §25 [code]: reward_types ["base", "ppl_qa"], reward_factors [1, 0.2]
        rewards=(RewardSpec("correctness"), RewardSpec("sar", kwargs={"alpha": 0.2, "model": "policy"})),
        config_overrides={
            "scale_rewards": "none",  # §25 [code]: norm_adv_by_std_in_grpo=False
            "loss_type": "dr_grpo",  # §25 [code]: loss_agg_mode=seq-mean-token-sum-norm
        },
        proposed_defaults=(
            "SAR: both perplexities from the policy at generation time (model='policy', the released code); "
            "model='reference' scores with TRL's ref_model (needs beta > 0)",
            "SAR: standalone prompt = the row's own system message(s) + an empty user message through the chat "
            "template; a plain-text prompt gets the empty prompt (BOS, else EOS, when that has no token)",
            "SAR: perplexities of the sampling distribution (at temperature), as TRL's old log-probs",
            "SAR: an empty completion scores 0; both clips applied (the released code clips only below -1; the upper "
            "bound never binds)",
        ),
        trainer_class="trl_efficient.methods.sar:SARTrainer",
    )
)
