"""Recipes of the prompt-selection family (family name "sampling"): LSPO (length-aware prompt selection) and
Frugal-Thinking (pass-rate-curated data mix). Both plug in through the prompt-sampler hook
(`EfficientGRPOConfig.prompt_sampler`, `trainer/prompt_samplers.py`) and keep the plain binary correctness reward
(methods.md §20, §30).

Values taken from a paper or its code cite methods.md; our own choices are listed in `proposed_defaults`.
"""

from __future__ import annotations

from ..core.sampler_defaults import FRUGAL_ALPHA, LSPO_HIGH, LSPO_LOW, LSPO_MAX_RATIO
from .registry import Recipe, RewardSpec, Section, register_recipe
from .scale import PaperLength, RecipeScale, Reference, revisits

# ---------------------------------------------------------- testbed scale (applied by testbed/trl_efficient_testbed/scaling.py)


def _frugal_scale(cap: int, steps: int) -> RecipeScale:
    tasks = 256  # the run draws 4 prompts x 40 steps; 256 tasks keep the base model's profiling pass short
    # The paper's brevity comes from the data *and* a tight context (methods.md §30: "the tight context cap is part of
    # the pressure"): 16k tokens against the base model's mean output of 11,491 (Qwen3-4B-Thinking), 1.43x. The
    # testbed's 384-token cap is 2.4x testbed:v2's mean (161 tokens), no pressure at all, so training runs at
    # 0.6 x cap = 230 tokens (1.43 x 161); evaluation keeps the comparison's cap.
    train_cap = round(cap * 0.6)
    return RecipeScale(
        "frugal",
        f"pass rates from the base model on {tasks} training tasks, n = 4 samples at the cap "
        "(paper: 16 at 16k; methods.md proposes 4 on tiny setups); keep p < 1, sampled uniformly "
        f"(the paper); training cap {train_cap} (0.6 x cap: the paper's 16k is 1.43x its base model's mean "
        "output, as 230 is testbed:v2's)",
        config={"max_completion_length": train_cap},
        needs=("frugal_pass_rates",),
        num_train=tasks,
    )


register_recipe(
    Recipe(
        name="lspo",
        testbed_check="not-less-accurate",
        section=Section(20, "LSPO: length-aware sampling for policy optimization", ()),
        family="sampling",
        testbed_scale=revisits("lspo", "length quantiles of the batch; L_max = 0.95 x the cap"),
        method="LSPO (length-aware sampling for policy optimization)",
        description=(
            "DAPO-style training whose prompt sampler skips prompts with mid-range mean response length (between the "
            "0.3 and 0.7 quantiles) or near the cap (> 0.95 cap); zero-variance groups masked (§20). Targets accuracy."
        ),
        rewards=(RewardSpec("correctness"),),
        papers=("2510.01459",),
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
        section=Section(30, "Frugal-Thinking: curation by pass rate", ("MBZUAI-Paris/Frugal-Thinking",)),
        family="sampling",
        testbed_scale=_frugal_scale,
        paper_lengths=(
            PaperLength(
                "training context",
                16384,
                "length",
                Reference(11491, "base mean", "methods.md §30: Qwen3-4B-Thinking-2507, average output 11,491 tokens"),
                "methods.md §30",
                "config.max_completion_length",
                exception="0.6 x cap = 230: the paper's ratio (1.43) times the base's mean rounded to 161",
            ),
        ),
        method="Frugal-Thinking (pass-rate data curation, emergent brevity)",
        description=(
            "Base-model pass rate from n = 16 rollouts per problem; keep p < 1 (p = 0 included) and sample them "
            "uniformly (seeded shuffle); binary correctness, no length term, tight cap (§30)."
        ),
        rewards=(RewardSpec("correctness"),),
        papers=("2511.01937",),
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
