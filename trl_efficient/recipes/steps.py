"""Recipes that count reasoning steps rather than tokens (Step Pruner, GRSP); Dr. GRPO is with GRPO in `registry.py`.

Reward builders `step_pruner` and `grsp` (`trl_efficient.rewards.steps`): each returns the difference from
correctness (`as_penalty=True`), so the recipes pair it with the `correctness` reward (weight 1 each) and the sum is
the paper's reward while the trainer's accuracy metrics keep reading plain correctness. Segments are measured in the
policy's tokens (the trainer's tokenizer). Values taken from a paper or its code cite methods.md; our own choices are
listed in `proposed_defaults`.
"""

from __future__ import annotations

from ..rewards.steps import get_grsp_reward, get_step_pruner_reward
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder
from .scale import DEFAULT_PAPER_CAP, PaperLength, RecipeScale, Reference, scale_length

# Step Pruner (methods.md §19): the group size comes from the trainer's `group_size` column, the stop rule's
# callback is registered by the reward's `attach`.
reward_builder(
    "step_pruner",
    get_step_pruner_reward,
    "Step Pruner, arXiv:2510.03805 (fewer steps than the group's fewest correct earn more; over-long step -> 0; "
    "stop rule)",
    whole_groups=True,
    receives=("length",),
)
reward_builder(  # GRSP's group-relative segment penalty (methods.md §27)
    "grsp",
    get_grsp_reward,
    "GRSP, arXiv:2510.09535 (group z-scores of segment counts per length bucket, descending weights)",
    whole_groups=True,
    receives=("length",),
)


# ---------------------------------------------------------- testbed scale (applied by testbed/trl_efficient_testbed/scaling.py)


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


register_recipe(
    Recipe(
        name="step-pruner",
        section=Section(19, "Step Pruner", ()),
        family="structure / signal",
        testbed_scale=_step_pruner_scale,
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
        method="Step Pruner (step-aware reward, proposed)",
        description="Correct answers earn 1 - 0.5 min(1, (S - S_min)/S_min) in steps S (blank-line paragraphs), "
        "wrong 0, a step over 512 tokens 0; training stops when the length stops falling (§19).",
        rewards=(RewardSpec("correctness"), RewardSpec("step_pruner")),
        papers=("2510.03805",),
        proposed_defaults=(
            "Step Pruner reward c (1 - 0.5 min(1, (S - S_min)/S_min)), S_min over the group's correct answers",
            "Step Pruner steps = blank-line separated paragraphs of the thinking part (at least 1)",
            "Step Pruner guard: a step over 512 tokens -> reward 0 (and not a reference for S_min)",
            "Step Pruner stop: 50-batch moving average of the mean length checked every 10 batches, stop after 3 "
            "checks without a new low",
        ),
    )
)
register_recipe(
    Recipe(
        name="grsp",
        section=Section(27, "GRSP: group relative segment penalization", ()),
        family="structure / signal",
        testbed_scale=_grsp_scale,
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
        method="GRSP (group relative segment penalty, proposed)",
        description="Correct answers lose 0.1 max(0, sum_k w_k z_k), z_k the group z-score of the segment count in "
        "length bucket k (< 32 / 32-128 / > 128 tokens, w = 0.5/0.3/0.2) (§27).",
        rewards=(RewardSpec("correctness"), RewardSpec("grsp")),
        papers=("2510.09535",),
        proposed_defaults=(
            "GRSP segments: blank lines plus lines opening with Wait / Alternatively / But / Hmm / Let me / Actually",
            "GRSP buckets < 32 / 32-128 / > 128 tokens, weights 0.5 / 0.3 / 0.2, coefficient 0.1",
            "GRSP penalty R = c - 0.1 c max(0, P) on correct answers, z-scores over the whole group",
        ),
    )
)
