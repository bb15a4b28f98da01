"""Specs of the recipes that read the completion's structure, or a signal other than length (`RecipeSpec`)."""

from __future__ import annotations

from ..scale import (
    BASE_MODEL_PLACEHOLDER,
    DEFAULT_PAPER_CAP,
    PaperLength,
    RecipeScale,
    Reference,
    scale_free,
    scale_length,
)
from . import RecipeSpec, register

# ---------------------------------------------------------- recipes/bingo.py


def _bingo_scale(cap: int, steps: int) -> RecipeScale:
    start, window = max(1, steps // 4), max(2, steps // 8)
    return RecipeScale(
        "bingo",
        "lengths relative to the frozen reference (scale-free); scorer = self-information under the testbed base "
        f"model (offline, no LLMLingua-2 download); schedule 50/10 steps -> {start}/{window} (1/4 and 1/8 of the "
        "steps)",
        recipe_kwargs={
            "scorer": f"self-information:{BASE_MODEL_PLACEHOLDER}",
            "schedule_start": start,
            "schedule_window": window,
            "reference_batch_size": 64,
        },
    )


# ---------------------------------------------------------- recipes/steps.py

# methods.md §19 and §27 state neither a cap nor their base model's mean length
STEPS_REFERENCE = Reference(DEFAULT_PAPER_CAP, "cap", "no cap stated (methods.md §19, §27): DEFAULT_PAPER_CAP")


def _step_pruner_scale(cap: int, steps: int) -> RecipeScale:
    # methods.md §19 states no cap (DEFAULT_PAPER_CAP). The testbed's traces are one line of sentences, so steps are
    # sentences there. The stop rule (a proposed default: stop once the moving average of the length has not set a
    # new low for 3 checks) is off: scaled to the run (window 4 and checks every 2 of 40 batches, from the YAML's
    # 50 / 10 of 500), a 4-batch average of 32 completions is noise-dominated and stopped all three seeds at step
    # 10 of 40 (`git show 1802ea2:perf/testbed/results/compare.md`: -0.051 accuracy and +0.6 tokens against grpo,
    # RL cut short), long before lengths level off; it guards long runs against step-merging late in training.
    limit = scale_length(512, cap, DEFAULT_PAPER_CAP)
    kwargs = {"segmenter": "sentences", "max_step_length": limit, "stop_patience": None}
    return RecipeScale(
        "step-pruner",
        f"steps = sentences (the testbed's traces have no blank lines); step limit 512 -> {limit} tokens (x cap/"
        f"{DEFAULT_PAPER_CAP}); stop rule off (scaled to {steps} batches, a 4-batch moving average of the length is "
        "noise and stopped every seed at step 10: docs/testbed.md); kappa 0.5 scale-free",
        reward_kwargs={"step_pruner": kwargs},
    )


def _grsp_scale(cap: int, steps: int) -> RecipeScale:
    # methods.md §27 states no cap (DEFAULT_PAPER_CAP); the testbed's segments (~8 tokens on average, ~200 in the
    # paper's 5k-token answers of ~27 segments) are about cap/4096 of the paper's, as the bucket edges become.
    bounds = [scale_length(32, cap, DEFAULT_PAPER_CAP, minimum=2), scale_length(128, cap, DEFAULT_PAPER_CAP, minimum=2)]
    return RecipeScale(
        "grsp",
        f"segments = sentences (no line-initial keywords on the testbed's one-line traces); bucket edges 32 / 128 -> "
        f"{bounds[0]} / {bounds[1]} tokens (x cap/{DEFAULT_PAPER_CAP}, at least 2); weights, coefficient and "
        "z-scores scale-free",
        reward_kwargs={"grsp": {"segmenter": "sentences", "bucket_bounds": bounds}},
    )


register(
    RecipeSpec(
        "canon",
        scale_free("canon", "length halves of the group"),
        family="structure / signal",
        claim="better-trade-off",
    )
)
register(
    RecipeSpec(
        "bingo",
        _bingo_scale,
        family="structure / signal",
        claim="redundant-share",
        specific="redundant-vs-fixed-penalty",
    )
)
register(
    RecipeSpec(
        "pear",
        scale_free("pear", "mean per-token entropies (nats) of the two phases; no length constant"),
        family="structure / signal",
    )
)
register(
    RecipeSpec(
        "canon-entropy",
        scale_free("canon-entropy", "mean-token-entropy halves of the group"),
        family="structure / signal",
        claim="not-less-accurate",
    )
)
register(
    RecipeSpec(
        "step-pruner",
        _step_pruner_scale,
        paper_lengths=(
            PaperLength(
                "step limit",
                512,
                "length",
                STEPS_REFERENCE,
                "methods.md §19",
                "reward_kwargs.step_pruner.max_step_length",
            ),
        ),
        family="structure / signal",
    )
)
register(
    RecipeSpec(
        "grsp",
        _grsp_scale,
        paper_lengths=(
            PaperLength(
                "segment-length bucket edges",
                (32, 128),
                "length",
                STEPS_REFERENCE,
                "methods.md §27",
                "reward_kwargs.grsp.bucket_bounds",
                minimum=2,
            ),
        ),
        family="structure / signal",
    )
)
