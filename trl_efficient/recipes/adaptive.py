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


register_recipe(
    Recipe(
        name="hapo",
        section=Section(12, "HAPO: history-aware policy optimization", ("HCY123902/HAPO",), papers=("2505.11225",)),
        method="HAPO (history-aware length reward)",
        description="Correctness plus a cosine length term against each prompt's shortest correct length so far, "
        "kept across steps and epochs by the trainer (§12).",
        rewards=(RewardSpec("correctness"), RewardSpec("hapo_length", kwargs={"variant": "cosine", "w_lr": 1.0})),
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
        section=Section(18, "A-DLP: adaptive direct length penalty", ("JinyanSu1/A-DLP",), papers=("2505.18298",)),
        method="A-DLP (adaptive direct length penalty)",
        description="r = 1[correct] - lambda_t L, lambda_0 = 1e-3, lambda_{t+1} = max(0, lambda_t + 1e-3 (acc_t - "
        "0.62)) from the gathered batch accuracy, unbounded above as the released code (§18).",
        rewards=(
            RewardSpec("correctness"),
            # [code] scripts/train.sh: lambda_init 1e-3, lr 1e-3, acc_init 0.62; no cap (cap_lambda: true is ours)
            RewardSpec("adlp_length", kwargs={"lambda_init": 1e-3, "eta": 1e-3, "acc_ref": 0.62}),
        ),
        proposed_defaults=(
            "A-DLP option reward_kwargs {adlp_length: {cap_lambda: true}}: lambda capped at 1 / max_completion_length "
            "(off by default, as the released code)",
            "A-DLP update skipped for a batch with no scorable row",
        ),
    )
)
