"""Specs of the sampling recipes: group filters, prompt selection, outlier truncation (`RecipeSpec`)."""

from __future__ import annotations

from ..scale import (
    PaperLength,
    RecipeScale,
    Reference,
    revisits,
    scale_length,
)
from . import RecipeSpec, register

# ---------------------------------------------------------- recipes/advantage.py


def _gfpo_scale(name: str, extra: str = ""):
    def build(cap: int, steps: int) -> RecipeScale:
        return RecipeScale(name, f"G = 16 (paper: sample 16, keep k <= 8{extra}); lengths: none", num_generations=16)

    return build


# ---------------------------------------------------------- recipes/dot.py

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


# ---------------------------------------------------------- recipes/prompt_selection.py


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


register(RecipeSpec("gfpo", _gfpo_scale("gfpo", ", Shortest 8/16"), family="sampling"))
register(
    RecipeSpec("gfpo-adaptive", _gfpo_scale("gfpo-adaptive", ", k by difficulty quartile 8/8/6/4"), family="sampling")
)
register(
    RecipeSpec(
        "dot",
        _dot_scale,
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
        family="sampling",
    )
)
register(
    RecipeSpec(
        "lspo",
        revisits("lspo", "length quantiles of the batch; L_max = 0.95 x the cap"),
        family="sampling",
        claim="not-less-accurate",
    )
)
register(
    RecipeSpec(
        "frugal",
        _frugal_scale,
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
        family="sampling",
    )
)
