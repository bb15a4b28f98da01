"""Recipes of adaptive length penalties: HAPO (per-prompt history, methods.md §12) and A-DLP (accuracy-driven
penalty coefficient, methods.md §18), with their reward builders `hapo_length` and `adlp_length`.

Both recipes pair the length term with the plain correctness reward (weight 1), so the trainer's correctness column
is exact and the totals are the papers': HAPO `1[correct] + w_lr * r_len`, A-DLP `c - lambda_t * L`. Builder kwargs
come from the recipe's `RewardSpec` kwargs, then the config's `reward_kwargs` (e.g.
`reward_kwargs: {hapo_length: {variant: linear}}` in a YAML).

Values taken from a paper or its code cite methods.md; our own choices are listed in `proposed_defaults`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..rewards.controller import get_adlp_reward
from ..rewards.history import get_hapo_length_reward
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder
from .scale import PaperLength, RecipeScale, Reference, revisits, scale_per_token

reward_builder(
    "hapo_length",
    get_hapo_length_reward,
    "HAPO, arXiv:2505.11225 (cosine/linear term vs the prompt's shortest correct length so far)",
    needs=("solution", "idx"),
    receives=("length",),
)


@reward_builder(
    "adlp_length",
    get_adlp_reward,
    "A-DLP, arXiv:2505.18298 (-lambda_t L, lambda driven by batch accuracy)",
    needs=(),
    receives=("length",),
)
def build_adlp_length_reward(args, **kwargs) -> Callable:
    """`adlp_length` builder: A-DLP's `-lambda_t * L`, lambda unbounded above as in the released code (methods.md
    §18). The option `cap_lambda: true` caps it at `1 / max_completion_length` (the config's, passed here)."""
    kwargs.setdefault("max_completion_length", args.max_completion_length)
    return get_adlp_reward(**kwargs)


# ---------------------------------------------------------- testbed scale (applied by testbed/trl_efficient_testbed/scaling.py)


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


register_recipe(
    Recipe(
        name="hapo",
        testbed_specific="difficulty-aware",
        section=Section(12, "HAPO: history-aware policy optimization", ("HCY123902/HAPO",)),
        family="adaptive / history",
        testbed_scale=revisits("hapo", "the length term depends on L / h only"),
        method="HAPO (history-aware length reward)",
        description="Correctness plus a cosine length term against each prompt's shortest correct length so far, "
        "kept across steps and epochs by the trainer (§12).",
        rewards=(RewardSpec("correctness"), RewardSpec("hapo_length", kwargs={"variant": "cosine", "w_lr": 1.0})),
        papers=("2505.11225",),
        # the "repeat" sampler is TRL's prompt order, resumed exactly across epochs (the history is per prompt)
        config_overrides={"track_prompt_history": True, "prompt_sampler": "repeat"},
        proposed_defaults=(
            "HAPO history kept by the trainer (PromptHistory), updated from the gathered batch in training only",
            "HAPO: prompt_sampler 'repeat' (TRL's order, resumed exactly across epochs; TRL's own sampler replays "
            "epoch 0's order after a resume)",
            "HAPO length term 0 in evaluation (evaluation prompts have no training history)",
            "HAPO lengths in policy tokens including the EOS (the paper re-tokenises the text without it)",
        ),
    )
)
register_recipe(
    Recipe(
        name="a-dlp",
        testbed_specific="adaptive-penalty",
        section=Section(18, "A-DLP: adaptive direct length penalty", ("JinyanSu1/A-DLP",)),
        family="adaptive / history",
        testbed_scale=_adlp_scale,
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
        method="A-DLP (adaptive direct length penalty)",
        description="r = 1[correct] - lambda_t L, lambda_0 = 1e-3, lambda_{t+1} = max(0, lambda_t + 1e-3 (acc_t - "
        "0.62)) from the gathered batch accuracy, unbounded above as the released code (§18).",
        rewards=(
            RewardSpec("correctness"),
            # [code] scripts/train.sh: lambda_init 1e-3, lr 1e-3, acc_init 0.62; no cap (cap_lambda: true is ours)
            RewardSpec("adlp_length", kwargs={"lambda_init": 1e-3, "eta": 1e-3, "acc_ref": 0.62}),
        ),
        papers=("2505.18298",),
        proposed_defaults=(
            "A-DLP option reward_kwargs {adlp_length: {cap_lambda: true}}: lambda capped at 1 / max_completion_length "
            "(off by default, as the released code)",
            "A-DLP update skipped for a batch with no scorable row",
        ),
    )
)
