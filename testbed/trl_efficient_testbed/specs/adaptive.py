"""Specs of the adaptive recipes: length penalties that move with the prompt's history, difficulty or accuracy."""

from __future__ import annotations

from ..scale import (
    PaperLength,
    RecipeScale,
    Reference,
    revisit_tasks,
    revisits,
    scale_free,
    scale_length,
    scale_per_token,
)
from . import RecipeSpec, register
from .length_penalties import DLER_REFERENCE, LASER_REFERENCE, _da_dler_scale, _truncation

# ---------------------------------------------------------- recipes/adaptive.py

ADLP_REFERENCE = Reference(8192, "cap", "methods.md §18: max response 8192")


def _adlp_scale(cap: int, steps: int) -> RecipeScale:
    paper, lam, eta = 8192, 1e-3, 1e-3  # methods.md §18: max response 8192, script lambda_0 and eta
    acc_ref = 0.45
    return RecipeScale(
        "a-dlp",
        f"per-token x {paper}/cap: lambda_0 {lam:g} -> {scale_per_token(lam, cap, paper):.4f}, eta {eta:g} -> "
        f"{scale_per_token(eta, cap, paper):.4f}; cap lambda <= 1/{cap} (option cap_lambda, kept on the testbed: "
        f"= 1/max_completion_length, so lambda_0 starts at the cap; the recipe's default is the released, uncapped "
        f"lambda); acc_ref 0.62 -> {acc_ref} (the testbed policy's training accuracy at temperature 1, "
        "~0.45 in the quickstart's logs, against the paper's base near 0.62: with 0.62 lambda would fall to 0 in one "
        "step and A-DLP would be plain GRPO)",
        # cap_lambda: the scaled lambda_0 (0.0427 at cap 192) would take 8 points off a full-length answer uncapped;
        # the committed testbed results were run with this cap (it was the recipe default then)
        reward_kwargs={
            "adlp_length": {
                "lambda_init": scale_per_token(lam, cap, paper),
                "eta": scale_per_token(eta, cap, paper),
                "acc_ref": acc_ref,
                "cap_lambda": True,
            }
        },
    )


# ---------------------------------------------------------- recipes/lapo.py

# methods.md §28 reports only averages over four benchmarks (MATH-500, AIME24, AMC-23, OlympiadBench)
LAPO_REFERENCE = Reference(6229, "base mean", "methods.md §28: DeepScaleR-1.5B-Preview, 62.5% at 6,229 tokens "
                           "(average of four benchmarks)")  # fmt: skip


_LAPO_CAP_RULE = "x cap/4096 (LAPO's max generation as the reference)"


def _lapo_scale(cap: int, steps: int) -> RecipeScale:
    paper = 4096  # methods.md §28: max generation 4096
    kwargs = {
        "unknown_length": cap,
        "band_margin": scale_length(100, cap, paper),
        "sigma": scale_length(120, cap, paper),
    }
    return RecipeScale(
        "lapo",
        f"lengths x cap/{paper}: unknown target {paper} -> {cap}, band fall-off 100 -> {kwargs['band_margin']}, "
        f"sigma 120 -> {kwargs['sigma']} tokens; trains on {revisit_tasks(steps)} tasks so that each prompt's "
        "stage-1 record is used in stage 2 (about 2 visits per stage)",
        config={"rollout_plan_kwargs": kwargs},
        num_train=revisit_tasks(steps),
    )


# ---------------------------------------------------------- recipes/laser.py


def _laser_d_scale(name: str):
    def build(cap: int, steps: int) -> RecipeScale:
        paper, lower, step = 16384, 2048, 1024  # methods.md §7: context 16384, grid lb 2048, step 1024
        interval = max(1, steps // 8)
        kwargs = {
            "grid_lower": scale_length(lower, cap, paper),
            "grid_step": scale_length(step, cap, paper),
            "monitor_interval": interval,
            "monitor_prompts": 32,
        }
        return RecipeScale(
            name,
            f"lengths x cap/{paper} (context): grid {lower}, {lower + step}, ... -> {kwargs['grid_lower']}, "
            f"{kwargs['grid_lower'] + kwargs['grid_step']}, ... up to the cap; monitor every 20 steps -> every "
            f"{interval} (1/8 of the run), 500 prompts x 8 -> 32 x 8",
            reward_kwargs={name.replace("-", "_"): kwargs},
        )  # fmt: skip

    return build


def _laser_d_lengths(name: str) -> tuple[PaperLength, ...]:
    """LASER-D's paper length constants (methods.md §7: the grid's lower bound and step, in a 16384 context)."""
    field = f"reward_kwargs.{name.replace('-', '_')}"
    return (
        PaperLength("target grid lower bound", 2048, "length", LASER_REFERENCE, "methods.md §7", f"{field}.grid_lower"),
        PaperLength("target grid step", 1024, "length", LASER_REFERENCE, "methods.md §7", f"{field}.grid_step"),
    )


register(
    RecipeSpec(
        "hapo",
        revisits("hapo", "the length term depends on L / h only"),
        family="adaptive / history",
        specific="difficulty-aware",
    )
)
register(
    RecipeSpec(
        "a-dlp",
        _adlp_scale,
        paper_lengths=(
            PaperLength(
                "lambda_0",
                1e-3,
                "per-token",
                ADLP_REFERENCE,
                "methods.md §18 (script)",
                "reward_kwargs.adlp_length.lambda_init",
            ),
            PaperLength(
                "eta (lambda's step per unit of accuracy)",
                1e-3,
                "per-token",
                ADLP_REFERENCE,
                "methods.md §18 (script)",
                "reward_kwargs.adlp_length.eta",
            ),
        ),
        family="adaptive / history",
        specific="adaptive-penalty",
    )
)
register(
    RecipeSpec(
        "da-dler",
        _da_dler_scale,
        paper_lengths=(
            _truncation(
                "x cap/4000 (the paper's cap as the reference): 4000 -> the cap, where the base (mean 161) is never "
                "truncated, so only the easy groups' cut binds; DLER trains at 192"
            ),
            PaperLength(
                "easy groups' cut (truncate_to)",
                2000,
                "length",
                DLER_REFERENCE,
                "methods.md §4, proposed default (DA-DLER is not published)",
                "config.advantage_kwargs.truncate_to",
                exception="x cap/4000 (the paper's cap as the reference), = DLER's training cap 192",
            ),
        ),
        family="adaptive / history",
        claim="tight-cap",
    )
)
register(
    RecipeSpec(
        "lapo",
        _lapo_scale,
        paper_lengths=(
            PaperLength(
                "target of a prompt without a record",
                4096,
                "length",
                LAPO_REFERENCE,
                "methods.md §28 [code]",
                "config.rollout_plan_kwargs.unknown_length",
                exception=f"{_LAPO_CAP_RULE}: the max generation length, kept at the cap",
                keep="it is the paper's max generation length (a prompt without a record has no length target): "
                "it maps to the testbed's cap, as every cap does",
            ),
            PaperLength(
                "band fall-off",
                100,
                "length",
                LAPO_REFERENCE,
                "methods.md §28 [code]",
                "config.rollout_plan_kwargs.band_margin",
                exception=_LAPO_CAP_RULE,
            ),
            PaperLength(
                "sigma",
                120,
                "length",
                LAPO_REFERENCE,
                "methods.md §28 [code]",
                "config.rollout_plan_kwargs.sigma",
                exception=_LAPO_CAP_RULE,
            ),
        ),
        family="adaptive / history",
    )
)
register(
    RecipeSpec(
        "laser-d",
        _laser_d_scale("laser-d"),
        paper_lengths=_laser_d_lengths("laser-d"),
        family="adaptive / history",
        specific="difficulty-aware",
    )
)
register(
    RecipeSpec(
        "laser-de", _laser_d_scale("laser-de"), paper_lengths=_laser_d_lengths("laser-de"), family="adaptive / history"
    )
)
register(
    RecipeSpec(
        "alp",
        scale_free("alp", "per-token price beta / N with N = max_completion_length (= the cap)"),
        family="adaptive / history",
    )
)
