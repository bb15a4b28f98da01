"""Specs of the length penalties (the default family): rewards and estimators that charge length (`RecipeSpec`)."""

from __future__ import annotations

from ..scale import (
    DEFAULT_PAPER_CAP,
    PaperLength,
    RecipeScale,
    Reference,
    scale_free,
    scale_length,
    scale_per_token,
)
from . import RecipeSpec, register

# ---------------------------------------------------------- recipes/dler.py

# methods.md §4, Table 1: the base model's mean output on MATH (the benchmark nearest the testbed's arithmetic)
DLER_REFERENCE = Reference(5500, "base mean", "methods.md §4, Table 1: DeepSeek-R1-1.5B, MATH 84.31% at 5500 tokens")


DLER_TRUNCATION = 4000  # methods.md §4 [code]: max_response_length = 4000


def _truncation(exception: str) -> PaperLength:
    """DLER's 4000-token truncation (shared by dler and da-dler), with the recipe's own reason for its testbed value."""
    return PaperLength("truncation (max_response_length)", DLER_TRUNCATION, "length", DLER_REFERENCE,
                       "methods.md §4 [code]", "config.max_completion_length", exception=exception)  # fmt: skip


def _dler_scale(cap: int, steps: int) -> RecipeScale:
    # DLER's length penalty IS the truncation (methods.md §4), and the paper's 4000 tokens bind: they are 0.73x its
    # base model's mean output on MATH (R1-Distill-Qwen-1.5B, 5,500 tokens) and 0.38x over its five benchmarks. At the
    # testbed's cap (384, 2.4x testbed:v2's mean of 161 tokens) the base is never truncated and DLER would be GRPO
    # with batch whitening. Training truncates at cap/2 instead (192: 35% of the base's answers, the hard tasks' most;
    # DA-DLER's cut and the check's tight cap); looser than the paper's ratio (0.73 x 161 = 117 tokens would leave the
    # 8-op tasks, floor 100, no room to check). Evaluation keeps the comparison's cap, as for FrugalRL.
    train_cap = cap // 2
    return RecipeScale(
        "dler",
        f"truncation at the training cap {train_cap} (cap/2; the paper's 4000 is 0.73x its base model's mean output "
        f"on MATH; at the cap testbed:v2 is never truncated, at {train_cap} 35% of its answers are)",
        config={"max_completion_length": train_cap},
    )


def _da_dler_scale(cap: int, steps: int) -> RecipeScale:
    paper = 4000
    cut = scale_length(2000, cap, paper)
    return RecipeScale(
        "da-dler",
        f"lengths x cap/{paper}: max_completion_length {paper} -> {cap}, truncate_to 2000 -> {cut}",
        config={"max_completion_length": cap, "advantage_kwargs": {"truncate_to": cut}},
    )


# ---------------------------------------------------------- recipes/o1_pruner.py


def _o1_pruner_scale(cap: int, steps: int) -> RecipeScale:
    tasks = 256  # as Frugal: the reference pre-pass samples every training task before step 1
    return RecipeScale(
        "o1-pruner",
        f"reference length and accuracy from the base model on {tasks} training tasks, "
        "K = 4 samples at the cap (paper: 12); alpha 5, clip [-2, 4] (length ratio, scale-free)",
        recipe_kwargs={"k": 4},
        num_train=tasks,
    )


# ---------------------------------------------------------- recipes/registry.py


def _laser_scale(cap: int, steps: int) -> RecipeScale:
    import inspect

    from trl_efficient.rewards.length import get_laser_reward

    paper, target = 16384, inspect.signature(get_laser_reward).parameters["target_length"].default
    scaled = scale_length(target, cap, paper)
    return RecipeScale(
        "laser",
        f"lengths x cap/{paper} (context): L_T {target} -> {scaled}",
        reward_kwargs={"laser": {"target_length": scaled}},
    )


def _shorter_better_scale(cap: int, steps: int) -> RecipeScale:
    paper, beta = DEFAULT_PAPER_CAP, 0.001
    return RecipeScale(
        "shorter-better",
        f"per-token x {paper}/cap (no cap in methods.md; default {paper}): beta {beta:g} -> "
        f"{scale_per_token(beta, cap, paper):.4f} (a deviation of {scale_length(2000, cap, paper)} tokens cancels a "
        "correct answer, as 2000 do at paper scale)",
        reward_kwargs={"shorter_better": {"beta": scale_per_token(beta, cap, paper)}},
    )


LASER_REFERENCE = Reference(16384, "cap", "methods.md §7: context 16384")


register(
    RecipeSpec("drpo", scale_free("drpo", "length normaliser C = max_completion_length"), family="length penalties")
)
register(
    RecipeSpec(
        "grpo-lead",
        scale_free("grpo-lead", "lengths z-scored within the group; 4000-token gate off"),
        family="length penalties",
    )
)
register(RecipeSpec("gdpo", scale_free("gdpo", "length limit = max_completion_length / 2"), family="length penalties"))
register(
    RecipeSpec(
        "dler",
        _dler_scale,
        paper_lengths=(
            _truncation(
                "cap/2: the rule's 117 (the paper's 0.73x its base's mean) leaves the 8-op tasks (floor 100 tokens) "
                "no room to check; 192 truncates 35% of the base's answers"
            ),
        ),
        family="length penalties",
        claim="tight-cap",
    )
)
register(RecipeSpec("o1-pruner", _o1_pruner_scale, family="length penalties"))
register(RecipeSpec("kimi", scale_free("kimi", "group min/max lengths"), family="length penalties"))
register(
    RecipeSpec(
        "cosine", scale_free("cosine", "cosine over max_completion_length (= the cap)"), family="length penalties"
    )
)
register(
    RecipeSpec(
        "laser",
        _laser_scale,
        paper_lengths=(
            PaperLength(
                "target length L_T",
                2048,
                "length",
                LASER_REFERENCE,
                "methods.md §7: L_T in {2048, 4096, 8192}; the reward's default 2048",
                "reward_kwargs.laser.target_length",
            ),
        ),
        family="length penalties",
    )
)
register(
    RecipeSpec(
        "shorter-better",
        _shorter_better_scale,
        paper_lengths=(
            PaperLength(
                "beta",
                0.001,
                "per-token",
                Reference(
                    5226,
                    "base mean",
                    "methods.md §11, repository evaluation: R1-Distill-1.5B, MATH500 67.4% at 5226 tokens",
                ),
                "methods.md §11 (code)",
                "reward_kwargs.shorter_better.beta",
                exception="scaled by DEFAULT_PAPER_CAP (4096) as if it were the paper's cap (the paper's max "
                "response is 6000): 2000 tokens' deviation, 0.52x the cap, cancels a correct answer, against "
                "0.38x the base's mean in the paper",
            ),
        ),
        family="length penalties",
    )
)
register(
    RecipeSpec(
        "dapo-overlong",
        scale_free("dapo-overlong", "punishment over the last cap/4 tokens"),
        family="length penalties",
        claim="no-more-truncations",
    )
)
register(
    RecipeSpec(
        "sar",
        scale_free("sar", "perplexity ratio with and without the question; no length constant"),
        family="length penalties",
    )
)
register(
    RecipeSpec(
        "grpo-lambda",
        scale_free("grpo-lambda", "lengths z-scored among the group's correct answers"),
        family="length penalties",
    )
)
