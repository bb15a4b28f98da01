"""Recipes of the prompt-selection family (family name "sampling"): LSPO (length-aware prompt selection) and
Frugal-Thinking (pass-rate-curated data mix). Both plug in through the prompt-sampler hook
(`EfficientGRPOConfig.prompt_sampler`, `trainer/prompt_samplers.py`) and keep the plain binary correctness reward
(methods.md §20, §30).

Values taken from a paper or its code cite methods.md; our own choices are listed in `proposed_defaults`.
"""

from __future__ import annotations

from ..core.sampler_defaults import FRUGAL_ALPHA, LSPO_HIGH, LSPO_LOW, LSPO_MAX_RATIO
from .registry import Recipe, RewardSpec, Section, register_recipe

register_recipe(
    Recipe(
        name="lspo",
        section=Section(20, "LSPO: length-aware sampling for policy optimization", (), papers=("2510.01459",)),
        method="LSPO (length-aware sampling for policy optimization)",
        description=(
            "DAPO-style training whose prompt sampler skips prompts with mid-range mean response length (between the "
            "0.3 and 0.7 quantiles) or near the cap (> 0.95 cap); zero-variance groups masked (§20). Targets accuracy."
        ),
        rewards=(RewardSpec("correctness"),),
        config_overrides={
            "prompt_sampler": "lspo",
            "sampler_kwargs": {"low": LSPO_LOW, "high": LSPO_HIGH, "l_max_ratio": LSPO_MAX_RATIO},
            "completion_filter": "zero_std",  # LSPO drops zero-variance groups (DAPO dynamic sampling), masked here
            "loss_type": "dapo",  # LSPO runs over DAPO (token-mean loss, clip-higher)
            "epsilon_high": 0.28,
            "beta": 0.0,
        },
        proposed_defaults=(
            f"LSPO quantiles L_low = {LSPO_LOW}, L_high = {LSPO_HIGH} of the known per-prompt mean lengths",
            f"LSPO L_max = {LSPO_MAX_RATIO} x max_completion_length",
            "LSPO as a prompt sampler: the latest group mean length per prompt (zero-variance groups give none, as "
            "the paper drops them first), quantiles over every prompt known so far; unseen prompts always eligible; "
            "a chunk short of eligible prompts is filled with skipped ones in order",
            "LSPO zero-variance groups masked (completion_filter zero_std), not resampled",
        ),
    )
)

register_recipe(
    Recipe(
        name="frugal",
        section=Section(
            30, "Frugal-Thinking: curation by pass rate", ("MBZUAI-Paris/Frugal-Thinking",), papers=("2511.01937",)
        ),
        method="Frugal-Thinking (pass-rate data curation, emergent brevity)",
        description=(
            "Base-model pass rate from n = 16 rollouts per problem; keep p < 1 (p = 0 included) and sample them "
            "uniformly (seeded shuffle); binary correctness, no length term, tight cap (§30)."
        ),
        rewards=(RewardSpec("correctness"),),
        config_overrides={
            "prompt_sampler": "frugal",
            # [paper] uniform over the kept problems (alpha = 0); alpha > 0 weights w(p) = 1 + alpha p (an option)
            "sampler_kwargs": {"alpha": FRUGAL_ALPHA},
            "loss_type": "dapo",  # token-mean [code]
            "epsilon_high": 0.28,  # clip 0.2 / 0.28 [code]
            "temperature": 1.0,  # [code]
            "beta": 0.0,
        },
        proposed_defaults=(
            "Frugal uniform sampling as TRL's seeded shuffle of each pass over the kept problems (the released run "
            "uses verl's shuffled dataloader)",
            "Frugal pass-rate estimate at the training cap and temperature, top_p 1.0, correct = answer after </think>",
        ),
        dataset_hook="trl_efficient.methods.frugal:prepare_dataset",
    )
)
