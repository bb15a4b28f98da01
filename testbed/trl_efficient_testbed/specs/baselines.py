"""Specs of the baselines and controls: GRPO, Dr. GRPO, ProRL, BroRL and the negative controls (`RecipeSpec`)."""

from __future__ import annotations

from trl_efficient.recipes.brorl import BRORL_N
from trl_efficient.recipes.prorl import PRORL_BETA, PRORL_PAPER_STEPS, PRORL_RESET_STEPS

from ..scale import (
    DEFAULT_PAPER_CAP,
    PaperLength,
    RecipeScale,
    Reference,
    scale_free,
    scale_per_token,
)
from . import RecipeSpec, register

# ---------------------------------------------------------- recipes/brorl.py

BRORL_TESTBED_N = 128  # proposed: the low end of "hundreds" that a CPU testbed step affords (issue 33 item 2)


BRORL_TESTBED_CHUNK = 32  # proposed: rows per generate call on the testbed (divides every prompts-per-step x 128)


def _brorl_scale(cap: int, steps: int) -> RecipeScale:
    """ProRL's rule (resets keep their share of the run, the recipe's own beta kept), with N = 128 rollouts per
    prompt (the paper's 512 is more than a CPU step affords; 128 is still 16 times the testbed's common G = 8) and
    generation in chunks of 32 rows; the comparison's prompts per step are kept, so a step generates 16 times the
    tokens of G = 8 (a matched-token row against G = 8 trains that one 16 times as many steps).

    >>> s = _brorl_scale(192, 40)
    >>> s.num_generations, s.config
    (128, {'ref_reset_steps': 4, 'beta': 0.0001, 'generation_chunk_size': 32})
    """
    base = _prorl_scale(cap, steps)
    return RecipeScale(
        "brorl",
        f"{base.rule}; N {BRORL_N} -> {BRORL_TESTBED_N} rollouts per prompt, generated {BRORL_TESTBED_CHUNK} rows "
        "at a time",
        config={**base.config, "generation_chunk_size": BRORL_TESTBED_CHUNK},
        num_generations=BRORL_TESTBED_N,
    )


# ---------------------------------------------------------- recipes/controls.py


def _constant_scale(cap: int, steps: int) -> RecipeScale:
    paper, alpha = DEFAULT_PAPER_CAP, 1 / DEFAULT_PAPER_CAP
    scaled = scale_per_token(alpha, cap, paper)
    return RecipeScale(
        "constant-penalty",
        f"per-token x {paper}/cap: alpha 1/{paper} -> 1/{cap} = {scaled:.5f} (an answer at the cap loses one correct "
        "answer; the value A-DLP's capped controller sits at on the testbed)",
        reward_kwargs={"constant_length": {"alpha": scaled}},
    )


# ---------------------------------------------------------- recipes/prorl.py


def _prorl_scale(cap: int, steps: int) -> RecipeScale:
    """Resets keep their share of the run: every `steps * 200 / 2000` steps (10 resets over the paper's horizon at
    the proposed 200), at least 1; the KL coefficient is the recipe's own (the testbed's common `beta` is 0, and
    without a KL term there is nothing to reset); the rest is scale-free (clip ratios, a per-token KL).

    >>> _prorl_scale(192, 40).config
    {'ref_reset_steps': 4, 'beta': 0.0001}
    """
    every = max(1, round(steps * PRORL_RESET_STEPS / PRORL_PAPER_STEPS))
    return RecipeScale(
        "prorl",
        f"reset period x steps/{PRORL_PAPER_STEPS}: ref_reset_steps {PRORL_RESET_STEPS} -> {every}; beta "
        f"{PRORL_BETA:g} kept (the testbed's common beta is 0); rest scale-free",
        config={"ref_reset_steps": every, "beta": PRORL_BETA},
    )


register(RecipeSpec("brorl", _brorl_scale, family="baselines"))
register(
    RecipeSpec(
        "constant-penalty",
        _constant_scale,
        paper_lengths=(
            PaperLength(
                "alpha",
                1 / DEFAULT_PAPER_CAP,
                "per-token",
                Reference(DEFAULT_PAPER_CAP, "cap", "a control, no paper: DEFAULT_PAPER_CAP"),
                "proposed (an answer at the cap loses one correct answer)",
                "reward_kwargs.constant_length.alpha",
            ),
        ),
        family="baselines",
    )
)
register(RecipeSpec("placebo", scale_free("placebo", "zero-mean noise of a fixed spread"), family="baselines"))
register(RecipeSpec("prorl", _prorl_scale, family="baselines"))
register(RecipeSpec("grpo", scale_free("grpo", "no length constant"), family="baselines", claim="baseline"))
register(
    RecipeSpec(
        "dr-grpo",
        scale_free("dr-grpo", "TRL's dr_grpo loss divides by max_completion_length (= the cap); no std"),
        family="baselines",
        claim="baseline-unbiased",
    )
)
