"""Recipe `dot`: DOT, Dynamic Outlier Truncation (arXiv 2601.03969, methods.md §21), run by
`trl_efficient.methods.dot.DOTTrainer`.

Values taken from the paper or its code cite methods.md; our own choices are listed in `proposed_defaults`.
"""

from __future__ import annotations

from .registry import Recipe, RewardSpec, Section, register_recipe
from .scale import PaperLength, RecipeScale, Reference, scale_length

# ---------------------------------------------------------- testbed scale (applied by testbed/trl_efficient_testbed/scaling.py)


# methods.md §21, headline table: the base model's mean output on MATH-500
DOT_REFERENCE = Reference(5483, "base mean", "methods.md §21: R1-Distill-Qwen-1.5B original, MATH-500 84.0% at 5483 "
                          "tokens")  # fmt: skip


def _dot_scale(cap: int, steps: int) -> RecipeScale:
    paper, margin, window = 4096, 32, 20  # methods.md §21: DOT-4K, m = 32 tokens, 20-step pass-rate window
    alpha = 1.5
    return RecipeScale(
        "dot",
        f"lengths x cap/{paper}: m {margin} -> {scale_length(margin, cap, paper)}; window {window} -> "
        f"{max(2, steps // 4)} steps (1/4 of the run); alpha 3 -> {alpha} (with G = 8 no sample's z-score can exceed "
        "(G-1)/sqrt(G) = 2.47, so alpha = 3 never cuts; 1.5 is the paper's alpha / max z at G = 32, 3/5.48, x 2.47)",
        config={
            "filter_kwargs": {
                "margin": scale_length(margin, cap, paper),
                "alpha": alpha,
                "history_window": max(2, steps // 4),
            }
        },
    )


register_recipe(
    Recipe(
        name="dot",
        section=Section(21, "DOT: dynamic outlier truncation", ("U-rara/DOT",)),
        family="sampling",
        testbed_scale=_dot_scale,
        paper_lengths=(
            PaperLength(
                "training cap (DOT-4K max response)",
                4096,
                "length",
                DOT_REFERENCE,
                "methods.md §21",
                "config.max_completion_length",
                exception="not scaled: DOT trains at the comparison's cap, where the base (mean 161) is never "
                "truncated; the paper's 4096 is 0.75x its base's mean",
            ),
            PaperLength(
                "margin m",
                32,
                "length",
                DOT_REFERENCE,
                "methods.md §21 [code]",
                "config.filter_kwargs.margin",
                exception="x cap/4096 (DOT-4K's cap as the reference)",
            ),
        ),
        method="DOT (outlier truncation, re-scoring, predictive dynamic sampling)",
        description="In all-correct groups, responses longer than mean + 3 std by >= 32 tokens are cut there and "
        "re-scored; zero-variance groups are refilled with a predicted oversampling factor (§21).",
        rewards=(RewardSpec("correctness"),),
        papers=("2601.03969",),
        config_overrides={
            "completion_filter": "dot",
            # §21 [code]: length_truncation.py defaults; run_dot.sh passes max_oversample_factor 5.0
            "filter_kwargs": {
                "success_threshold": 1.0,
                "alpha": 3.0,
                "margin": 32,
                "history_window": 20,
                "initial_factor": 1.5,
                "min_factor": 1.2,
                "max_factor": 5.0,
                "max_generation_batches": 2,
            },
            "correctness_reward": "correctness_reward",
            "epsilon_high": 0.28,
            "loss_type": "dapo",
        },
        proposed_defaults=(
            "TRL's dapo loss with clip-higher 0.28 instead of DOT's KL-Cov loss (left out)",
            "predictive oversampling as one refill pass of floor(B*f) - B prompts after the dataloader's batch, only "
            "when that batch falls short (at most 2 generation batches); a shortfall is masked, not padded",
        ),
        trainer_class="trl_efficient.methods.dot:DOTTrainer",
    )
)
