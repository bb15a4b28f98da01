"""LAPO recipe (arXiv 2507.15758, methods.md §28): stage 1 then stage 2 in one run.

Reward builder `lapo`: `get_lapo_reward` with LAPO's settings read from `rollout_plan_kwargs` (their one home, shared
with `LAPORolloutPlan` and `LAPOMemory`), on whole-completion policy tokens (the unit of the memory's lengths).
"""

from __future__ import annotations

from collections.abc import Callable

from ..prompts import LAPO_TEMPLATE
from ..rewards.lapo import get_lapo_reward
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder


@reward_builder(
    "lapo",
    get_lapo_reward,
    "LAPO, arXiv:2507.15758 (stage 1: [P30, P70] band of correct lengths; stage 2: Gaussian around the prompt's "
    "recorded length)",
    needs=("solution", "lapo_stage", "lapo_target_length"),
    whole_groups=True,
    receives=("length",),
)
def build_lapo_reward(args, **kwargs) -> Callable:
    """`lapo` reward builder: `rollout_plan_kwargs` (stage split, unknown target, reward constants) < nothing else:
    passing a LAPO setting as a reward kwarg is an error (it would disagree with the plan)."""
    if args.length_unit != "tokens" or args.length_scope != "total":
        raise ValueError(
            "LAPO compares completion lengths with the per-prompt memory, which records policy tokens of the whole "
            f"completion: set length_unit='tokens' and length_scope='total' (got {args.length_unit!r}, "
            f"{args.length_scope!r})."
        )
    from ..methods.lapo import lapo_settings

    settings = lapo_settings(args)
    clash = sorted(set(kwargs) & set(settings))
    if clash:
        raise ValueError(f"LAPO settings {clash} belong in rollout_plan_kwargs (shared with the plan and memory).")
    options = {k: v for k, v in settings.items() if k != "memory_from"}
    return get_lapo_reward(**options, **kwargs)


register_recipe(
    Recipe(
        name="lapo",
        section=Section(28, "LAPO: length-adaptive policy optimization", ("ZJU-REAL/LAPO",), papers=("2507.15758",)),
        method="LAPO (length-adaptive policy optimization, two stages)",
        description=(
            "Stage 1 (first half of max_steps): R = acc + 0.7 len_reward in the group's [P30, P70] correct-length "
            "band, per-prompt median correct length recorded; stage 2: prefill '<think> I will answer the question "
            "with {L} tokens.' and R = 1 + 0.8 exp(-(len - L)^2 / (2 120^2)) for correct answers (§28)."
        ),
        # the zero-weight correctness reward feeds the memory (median *correct* length) and the accuracy metrics
        rewards=(RewardSpec("lapo"), RewardSpec("correctness", weight=0.0)),
        config_overrides={
            "prompt_sampler": "repeat",  # TRL's prompt order, resumed exactly across epochs (per-prompt memory)
            "rollout_plan": "lapo",
            "rollout_plan_kwargs": {
                "stage1_fraction": 0.5,  # proposed default (the paper: two separate runs)
                "unknown_length": 4096,  # [code] target of a prompt without a record (max generation length)
                "band_weight": 0.7,  # [code] reward_func_stage1.py
                "band_margin": 100,  # [code] linear fall-off in tokens outside [P30, P70]
                "target_weight": 0.8,  # [code] reward_func_stage2.py
                "sigma": 120,  # [code] tokens
            },
        },
        proposed_defaults=(
            "LAPO: both stages in one run, stage 1 for the first half of max_steps (stage1_fraction 0.5)",
            "LAPO: percentiles with numpy's linear interpolation (as the released np.percentile); a degenerate band "
            "P30 == P70 gives no length bonus (released code; point_band=True for a point band)",
            "LAPO: a group without a correct answer leaves the prompt's recorded length unchanged",
            "LAPO: the recorded median is floored to whole tokens; the prefill is not counted in the length",
            "LAPO: prompt_sampler 'repeat' (TRL's order, resumed exactly across epochs; TRL's own sampler replays "
            "epoch 0's order after a resume)",
        ),
        usage=(
            "Prompt as in training. For a chosen budget L, start the assistant turn with "
            f'"{LAPO_TEMPLATE.format(length="{L}")}"; without it the model picks its own length.'
        ),
        trainer_class="trl_efficient.methods.lapo:LAPOTrainer",
    )
)

__all__ = ["build_lapo_reward"]
