"""Budget-prompted recipes: HBPO (budget subgroups per prompt) and SABER (budget tiers per example).

Reward builders:
- `hbpo`: `get_hbpo_reward` with HBPO's constants read from `advantage_kwargs` (their one home when
  `advantage_estimator="hbpo"`) and the prefill counted in the length iff `budget_placement="prefill"`;
- `saber`: `get_saber_reward` on thinking tokens of the policy tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable

from ..prompts import (
    BUDGET_PROMPT,
    HBPO_BUDGETS,
    HBPO_MINIMAL_PROMPT,
    HBPO_TEMPLATE,
    NO_THINK_PROMPT,
    UNLIMITED_PROMPT,
    saber_mode_prompts,
)
from ..rewards.budget import (
    HBPO_ALPHA,
    HBPO_BETA,
    HBPO_L_MAX,
    SABER_REWARD_PROPOSED_DEFAULTS,
    get_hbpo_reward,
    get_saber_reward,
)
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder


@reward_builder(
    "hbpo",
    get_hbpo_reward,
    "HBPO, arXiv:2507.15844 (budget-aware cosine reward)",
    needs=("solution", "budget"),
    receives=("length",),
)
def build_hbpo_reward(args, **kwargs) -> Callable:
    """`hbpo` reward builder: recipe kwargs < `advantage_kwargs` (HBPO's constants, shared with the estimator)."""
    from ..methods.hbpo import hbpo_settings

    shared = hbpo_settings(args)
    clash = {k: (kwargs[k], v) for k, v in shared.items() if k in kwargs and kwargs[k] != v}
    if clash:
        raise ValueError(
            f"HBPO reward kwargs {clash} disagree with advantage_kwargs; set HBPO's beta/alpha/l_max/variant only in "
            "advantage_kwargs so reward and advantage agree."
        )
    placement_prefill = getattr(args, "rollout_plan", None) == "budget" and args.budget_placement == "prefill"
    return get_hbpo_reward(**{"count_prefill": placement_prefill, **kwargs, **shared})


@reward_builder(
    "saber",
    get_saber_reward,
    "SABER, arXiv:2508.10026 (tier-aware thinking-length reward, proposed default)",
    needs=("solution", "saber_mode", "saber_budget"),
    receives=("length",),
)
def build_saber_reward(args, length_scope: str, **kwargs) -> Callable:
    """`saber` reward builder: thinking tokens of the policy tokenizer (SABER's tiers and profile are in tokens)."""
    if args.length_unit != "tokens" or length_scope != "thinking":
        raise ValueError(
            "SABER measures thinking tokens, in the same unit as its profile and tiers: set length_unit='tokens' and "
            f"length_scope='thinking' (got length_unit={args.length_unit!r}, length_scope={length_scope!r})."
        )
    return get_saber_reward(**kwargs)  # length_unit "tokens" (checked) and the tokenizer; the scope is its own


register_recipe(
    Recipe(
        name="hbpo",
        section=Section(2, "HBPO: hierarchical budget policy optimization", ("ZJU-REAL/HBPO",), papers=("2507.15844",)),
        method="HBPO (hierarchical budget policy optimization)",
        description=(
            "Budget subgroups 512/1024/2048/2560 per prompt via an assistant prefill, budget-aware cosine reward, "
            "advantage = group z-score + subgroup term (§2)."
        ),
        # the zero-weight correctness reward only feeds accuracy metrics (overall and per budget subgroup)
        rewards=(RewardSpec("hbpo"), RewardSpec("correctness", weight=0.0, kwargs={"require_think_close": True})),
        config_overrides={
            "rollout_plan": "budget",
            "budgets": list(HBPO_BUDGETS),
            "budget_placement": "prefill",
            "advantage_estimator": "hbpo",
            "advantage_kwargs": {"beta": HBPO_BETA, "alpha": HBPO_ALPHA, "l_max": HBPO_L_MAX, "variant": "paper"},
            "epsilon_high": 0.28,  # clip 0.2 / 0.28 [paper][code]
            "loss_type": "dapo",  # token-mean loss [code]
            "beta": 0.0,  # no KL [paper]
        },
        proposed_defaults=(
            "HBPO prefill kept in the prompt (not trained); its token count is added to the length L (the released "
            "code trains the prefix tokens)",
            "HBPO advantage in the paper's form A_inter + A_intra (advantage_kwargs variant='released_code' for the "
            "code's A_inter + 2 A_intra)",
            "HBPO: groups whose rewards are all equal get advantage 0 (advantage_kwargs zero_equal_groups=False for "
            "the literal formula)",
        ),
        usage=(
            "Prompt as in training without a budget statement: the model picks its own budget. For a given budget, "
            f'start the assistant turn with "{HBPO_TEMPLATE.format(budget="{b}")}"; for the paper\'s '
            f'efficiency prompting, with "{HBPO_MINIMAL_PROMPT}".'
        ),
        trainer_class="trl_efficient.methods.hbpo:HBPOTrainer",
    )
)


def _saber_usage() -> str:
    modes = "; ".join(f'{name}: system prompt "{text}"' for name, text in saber_mode_prompts().items())
    return f"Pick a mode with the system prompt. {modes}. (Mode map and prompts are proposed defaults.)"


register_recipe(
    Recipe(
        name="saber",
        section=Section(
            3, "SABER: switchable and balanced budget tiers", ("bilibili/saber_rl",), papers=("2508.10026",)
        ),
        method="SABER (switchable and balanced budget tiers)",
        description=(
            "Base-model profile -> per-example budget tier (128/4096/16384/unlimited) in the system prompt, 10% "
            "NoThink, tier-aware thinking-length reward (§3; reward and thresholds are proposed defaults)."
        ),
        rewards=(RewardSpec("saber"), RewardSpec("correctness", weight=0.0, kwargs={"require_think_close": True})),
        config_overrides={"length_scope": "thinking"},  # SABER measures thinking tokens (§3)
        proposed_defaults=(
            "SABER tier = smallest of 128/4096/16384 tokens >= the base model's thinking length; above 16384 no limit",
            "SABER base-wrong examples: 50% keep their tier without penalty, 50% no limit (seeded per question)",
            "SABER NoThink share: 10% of the examples",
            *SABER_REWARD_PROPOSED_DEFAULTS,
            f'SABER system prompts: "{BUDGET_PROMPT.format(budget="{B}")}" / "{UNLIMITED_PROMPT}" / '
            f'"{NO_THINK_PROMPT}"',
            "SABER modes: NoThink = empty think block, FastThink = 128, CoreThink = 4096, DeepThink = 16384 tokens",
        ),
        usage=_saber_usage(),
        dataset_hook="trl_efficient.methods.saber:prepare_dataset",
    )
)

__all__ = ["HBPO_BUDGETS", "build_hbpo_reward", "build_saber_reward"]
