"""
Testbed scale of every registered recipe: one documented rule per recipe, in one place.

Recipes carry their papers' constants, set for completions of thousands of tokens; the testbed caps completions at
`max_completion_length` (192 by default) and trains for tens of steps. Run unchanged, a recipe would show its units
rather than its method (HBPO's cosine over `l_max = 4096` is flat below 192 tokens; L1's 0.0003 per token is worth
0.015 reward at testbed lengths). So each recipe has a `ScalingRule` here:

- **lengths** (budgets, targets, tiers, truncation points, `l_max`) scale by `cap / paper_cap`, rounded;
- **per-token coefficients** (L1's alpha, ShorterBetter's beta, HBPO's alpha) scale by the inverse, `paper_cap / cap`,
  so that a deviation of the same *fraction of the cap* costs the same reward as in the paper;
- **scale-free** recipes (group-relative, or already written in terms of `max_completion_length`) keep their values;
- **G**: where the method itself is about the group size (GFPO samples 16 and keeps 8; HBPO's 4 budget subgroups of
  4), the recipe gets its own `num_generations`; everyone else uses the comparison's common G. The number of prompts
  per step is the same for every recipe, so a larger G means more samples per step, which is the method's point.

`paper_cap` is the paper's response cap where methods.md states one (HBPO 4096, L1 4096, DLER/DA-DLER 4000,
LASER's context 16384, SABER's largest tier 16384); `DEFAULT_PAPER_CAP = 4096` otherwise (said so in the rule).

A new recipe without a rule fails `recipe_scale` (and `tests/testbed/test_scaling.py`), so nothing silently runs at
paper scale on the testbed.

>>> s = recipe_scale("hbpo", cap=192)
>>> s.config["budgets"], s.config["advantage_kwargs"]["l_max"], s.num_generations
([24, 48, 96, 120], 192, 16)
>>> round(recipe_scale("l1-exact", cap=192).reward_kwargs["l1"]["alpha"], 5)  # 0.0003 * 4096 / 192
0.0064
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BASE_MODEL_PLACEHOLDER",
    "DEFAULT_PAPER_CAP",
    "SCALING_RULES",
    "ScalingRule",
    "RecipeScale",
    "scale_length",
    "scale_per_token",
    "recipe_scale",
]

DEFAULT_PAPER_CAP = 4096  # recipes whose paper states no response cap
BASE_MODEL_PLACEHOLDER = "{base_model}"  # replaced by the testbed base model's directory in recipe_kwargs


def scale_length(value: float, cap: int, paper_cap: int, minimum: int = 1) -> int:
    """A paper-scale length at the testbed's cap: `round(value * cap / paper_cap)`, at least `minimum`.

    >>> scale_length(2000, 192, 4000), scale_length(128, 192, 16384, minimum=16)
    (96, 16)
    """
    return max(int(minimum), int(round(value * cap / paper_cap)))


def scale_per_token(value: float, cap: int, paper_cap: int) -> float:
    """A paper-scale per-token coefficient at the testbed's cap: `value * paper_cap / cap`.

    >>> scale_per_token(0.001, 192, 4096)  # ShorterBetter's beta
    0.021333333333333333
    """
    return float(value) * paper_cap / cap


@dataclass(frozen=True)
class RecipeScale:
    """What a recipe changes on the testbed (applied on top of the recipe's own overrides).

    `config`: `EfficientGRPOConfig` fields; `reward_kwargs`: builder name -> extra kwargs of that `RewardSpec`;
    `recipe_kwargs`: keyword arguments of the recipe's `prepare_dataset` (strings may hold `BASE_MODEL_PLACEHOLDER`);
    `num_generations`: the recipe's own G, `None` for the comparison's common G; `num_train`: the recipe's own number
    of training tasks, `None` for the comparison's (methods with per-prompt state need revisits); `needs`: testbed
    steps to run first (`"saber_profile"`: profile the base model on the training set; `"frugal_pass_rates"`: the
    base model's pass rate per training task); `rule`: the one-line rule.
    """

    recipe: str
    rule: str
    config: dict = field(default_factory=dict)
    reward_kwargs: dict = field(default_factory=dict)
    recipe_kwargs: dict = field(default_factory=dict)
    num_generations: int | None = None
    needs: tuple[str, ...] = ()
    num_train: int | None = None

    def to_dict(self) -> dict:
        return {"rule": self.rule, "config": self.config, "reward_kwargs": self.reward_kwargs,
                "recipe_kwargs": self.recipe_kwargs, "num_generations": self.num_generations,
                "needs": list(self.needs), "num_train": self.num_train}  # fmt: skip


@dataclass(frozen=True)
class ScalingRule:
    """`build(cap, max_steps) -> RecipeScale` for one recipe."""

    build: Callable[[int, int], RecipeScale]


def _scale_free(name: str, why: str) -> ScalingRule:
    return ScalingRule(lambda cap, steps: RecipeScale(name, f"scale-free: {why}; unchanged"))


def _hbpo(cap: int, steps: int) -> RecipeScale:
    from ..recipes.budget import HBPO_BUDGETS
    from ..rewards.budget import HBPO_ALPHA, HBPO_BETA, HBPO_L_MAX

    paper = HBPO_L_MAX  # 4096
    budgets = [scale_length(b, cap, paper) for b in HBPO_BUDGETS]
    kwargs = {"beta": HBPO_BETA, "alpha": scale_per_token(HBPO_ALPHA, cap, paper), "l_max": cap, "variant": "paper"}
    return RecipeScale(
        "hbpo",
        f"lengths x cap/{paper}: budgets {list(HBPO_BUDGETS)} -> {budgets}, l_max {paper} -> {cap}; alpha "
        f"1/{paper} -> 1/{cap}; beta {HBPO_BETA:g} kept; G = 16 (4 rollouts per budget, paper)",
        config={"budgets": budgets, "advantage_kwargs": kwargs},
        num_generations=16,
    )


def _l1(mode: str):
    def build(cap: int, steps: int) -> RecipeScale:
        from ..rewards.length import _L1_DEFAULT_ALPHA

        paper = 4096
        low, high = 100, 4000  # EfficientGRPOConfig.target_length_range default = the paper's U(100, 4000)
        target = [scale_length(low, cap, paper), scale_length(high, cap, paper)]
        alpha = _L1_DEFAULT_ALPHA[mode]
        name = "l1-exact" if mode == "exact" else "l1-max"
        return RecipeScale(
            name,
            f"lengths x cap/{paper}: targets U({low}, {high}) -> U({target[0]}, {target[1]}); alpha {alpha:g}/token "
            f"x {paper}/cap -> {scale_per_token(alpha, cap, paper):.4f}",
            config={"target_length_range": target},
            reward_kwargs={"l1": {"alpha": scale_per_token(alpha, cap, paper)}},
        )

    return ScalingRule(build)


def _laser(cap: int, steps: int) -> RecipeScale:
    import inspect

    from ..rewards.length import get_laser_reward

    paper, target = 16384, inspect.signature(get_laser_reward).parameters["target_length"].default
    scaled = scale_length(target, cap, paper)
    return RecipeScale("laser", f"lengths x cap/{paper} (context): L_T {target} -> {scaled}",
                        reward_kwargs={"laser": {"target_length": scaled}})  # fmt: skip


def _shorter_better(cap: int, steps: int) -> RecipeScale:
    paper, beta = DEFAULT_PAPER_CAP, 0.001
    return RecipeScale(
        "shorter-better",
        f"per-token x {paper}/cap (no cap in methods.md; default {paper}): beta {beta:g} -> "
        f"{scale_per_token(beta, cap, paper):.4f} (a deviation of {scale_length(2000, cap, paper)} tokens cancels a "
        "correct answer, as 2000 do at paper scale)",
        reward_kwargs={"shorter_better": {"beta": scale_per_token(beta, cap, paper)}},
    )


def _da_dler(cap: int, steps: int) -> RecipeScale:
    paper = 4000
    cut = scale_length(2000, cap, paper)
    return RecipeScale(
        "da-dler",
        f"lengths x cap/{paper}: max_completion_length {paper} -> {cap}, truncate_to 2000 -> {cut}",
        config={"max_completion_length": cap, "advantage_kwargs": {"truncate_to": cut}},
    )  # fmt: skip


def _saber(cap: int, steps: int) -> RecipeScale:
    from ..prompts import SABER_TIERS

    paper = SABER_TIERS[-1]  # 16384: the deepest tier
    tiers = [scale_length(t, cap, paper, minimum=16) for t in SABER_TIERS]
    return RecipeScale(
        "saber",
        f"tiers x cap/{paper} (largest tier = cap), at least 16 (the NoThink limit): {list(SABER_TIERS)} -> {tiers}; "
        "profile = the base model on the testbed training set",
        recipe_kwargs={"tiers": tiers},
        needs=("saber_profile",),
    )


def _bingo(cap: int, steps: int) -> RecipeScale:
    start, window = max(1, steps // 4), max(2, steps // 8)
    return RecipeScale(
        "bingo",
        "lengths relative to the frozen reference (scale-free); scorer = self-information under the testbed base "
        f"model (offline, no LLMLingua-2 download); schedule 50/10 steps -> {start}/{window} (1/4 and 1/8 of the "
        "steps)",
        recipe_kwargs={"scorer": f"self-information:{BASE_MODEL_PLACEHOLDER}", "schedule_start": start,
                       "schedule_window": window, "reference_batch_size": 64},
    )  # fmt: skip


def _gfpo(name: str, extra: str = ""):
    def build(cap: int, steps: int) -> RecipeScale:
        return RecipeScale(name, f"G = 16 (paper: sample 16, keep k <= 8{extra}); lengths: none", num_generations=16)

    return ScalingRule(build)


def _adlp(cap: int, steps: int) -> RecipeScale:
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
        reward_kwargs={"adlp_length": {"lambda_init": scale_per_token(lam, cap, paper),
                                       "eta": scale_per_token(eta, cap, paper), "acc_ref": acc_ref,
                                       "cap_lambda": True}},
    )  # fmt: skip


def _asrr(cap: int, steps: int) -> RecipeScale:
    paper, window = 24576, 2048  # methods.md §24: App. A.2 max length 24k, L_window 2048
    return RecipeScale("asrr", f"lengths x cap/{paper}: L_window {window} -> {scale_length(window, cap, paper)}; "
                       "beta, tau kept; the no-think prefix as in the paper",
                       reward_kwargs={"asrr": {"window": scale_length(window, cap, paper)}})  # fmt: skip


def _dot(cap: int, steps: int) -> RecipeScale:
    paper, margin, window = 4096, 32, 20  # methods.md §21: DOT-4K, m = 32 tokens, 20-step pass-rate window
    alpha = 1.5
    return RecipeScale(
        "dot",
        f"lengths x cap/{paper}: m {margin} -> {scale_length(margin, cap, paper)}; window {window} -> "
        f"{max(2, steps // 4)} steps (1/4 of the run); alpha 3 -> {alpha} (with G = 8 no sample's z-score can exceed "
        "(G-1)/sqrt(G) = 2.47, so alpha = 3 never cuts; 1.5 is the paper's alpha / max z at G = 32, 3/5.48, x 2.47)",
        config={"filter_kwargs": {"margin": scale_length(margin, cap, paper), "alpha": alpha,
                                  "history_window": max(2, steps // 4)}},
    )  # fmt: skip


def _laser_d(name: str):
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

    return ScalingRule(build)


def revisit_tasks(steps: int) -> int:
    """Training tasks for a recipe with per-prompt state: the run draws 4 prompts per step (the testbed's 32
    completions at G = 8), so `steps` tasks are each visited about 4 times; at least 16, so that a short run still
    fills its 4-prompt batches from several tasks.

    >>> revisit_tasks(40), revisit_tasks(2)
    (40, 16)
    """
    return max(int(steps), 16)


def _revisits(name: str, why: str):
    # Methods whose state is per prompt only act on prompts they have seen: at the testbed's 4 prompts per step and
    # 40 steps, 1024 training tasks are never revisited, so these recipes train on `steps` tasks (4 visits each).
    def build(cap: int, steps: int) -> RecipeScale:
        tasks = revisit_tasks(steps)
        return RecipeScale(name, f"scale-free ({why}); trains on {tasks} tasks so that each is visited about 4 times "
                           "in the run (the paper trains for several epochs)", num_train=tasks)  # fmt: skip

    return ScalingRule(build)


def _frugal(cap: int, steps: int) -> RecipeScale:
    tasks = 256  # the run draws 4 prompts x 40 steps; 256 tasks keep the base model's profiling pass short
    return RecipeScale("frugal", f"pass rates from the base model on {tasks} training tasks, n = 4 samples at the cap "
                       "(paper: 16 at 16k; methods.md proposes 4 on tiny setups); keep p < 1, sampled uniformly "
                       "(the paper)",
                       needs=("frugal_pass_rates",), num_train=tasks)  # fmt: skip


def _o1_pruner(cap: int, steps: int) -> RecipeScale:
    tasks = 256  # as Frugal: the reference pre-pass samples every training task before step 1
    return RecipeScale("o1-pruner", f"reference length and accuracy from the base model on {tasks} training tasks, "
                       "K = 4 samples at the cap (paper: 12); alpha 5, clip [-2, 4] (length ratio, scale-free)",
                       recipe_kwargs={"k": 4}, num_train=tasks)  # fmt: skip


def _curriculum(cap: int, steps: int) -> RecipeScale:
    # methods.md §22 states no cap; its two budgets are anchored to the task: the start (256) is about the base
    # model's GSM8K length (258.4 tokens) and the end (87) about what GSM8K needs (the trained model: 86.2% at 88.8
    # tokens). The testbed keeps both anchors: start at its base model's length (~84 tokens: cap / 2) and end at its
    # tasks' mean floor (64 tokens: 87 x cap / 256). One ratio cannot do both here, because the testbed base is only
    # ~25% over the floor where the paper's was ~3x: cap / 512 (96 -> 33) ends under the floor of every task but k = 1
    # (accuracy 0.38); cap / 256 (192 -> 65) starts above the base's length, so the triangular reward first pays for
    # longer answers (84 tokens, accuracy 0.49).
    start, final = cap // 2, scale_length(87, cap, 256)
    budgets = {"initial_budget": start, "final_budget": final}
    return RecipeScale(
        "curriculum",
        f"budgets anchored as in the paper (start ~ the base model's length, end ~ what the tasks need): 256 -> 87 "
        f"becomes {start} (cap/2, the testbed base's ~84 tokens) -> {final} (87 x cap/256, the tasks' mean floor 64); "
        "n = 3 decay points over the run",
        config={"rollout_plan_kwargs": budgets},
    )


def _budgetthinker(cap: int, steps: int) -> RecipeScale:
    # methods.md §23: max response 10000 (budgets up to 6000), 8 epochs (6 curriculum budgets, then 2 of random
    # choices). A testbed run is a fraction of one data epoch (4 prompts a step over 1024 tasks), so the curriculum's
    # epochs are counted in steps instead (`epoch_steps`): the run goes through all 8 of them, as the paper's does.
    paper, epochs = 10000, 8
    by_epoch = [scale_length(b, cap, paper) for b in (6000, 4000, 3500, 3000, 2500, 2000)]
    choices = [scale_length(b, cap, paper) for b in (2000, 4000, 6000)]
    epoch_steps = max(1, steps // epochs)
    return RecipeScale(
        "budgetthinker",
        f"budgets x cap/{paper}: {by_epoch}, then one of {choices}; the paper's {epochs} epochs compressed into the "
        f"run (one curriculum epoch = steps/{epochs} = {epoch_steps} steps); the 1500-token threshold -> "
        f"{scale_length(1500, cap, paper)}",
        config={"rollout_plan_kwargs": {"budgets_by_epoch": by_epoch, "final_choices": choices,
                                        "epoch_steps": epoch_steps}},
        reward_kwargs={"budgetthinker": {"long_budget": scale_length(1500, cap, paper)}},
    )  # fmt: skip


def _lapo(cap: int, steps: int) -> RecipeScale:
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


def _step_pruner(cap: int, steps: int) -> RecipeScale:
    # methods.md §19 states no cap (DEFAULT_PAPER_CAP) and no run length: the stop rule's batch counts are scaled from
    # the recipe YAML's 500 steps. The testbed's traces are one line of sentences, so steps are sentences there.
    limit = scale_length(512, cap, DEFAULT_PAPER_CAP)
    window, every = max(2, round(50 * steps / 500)), max(2, round(10 * steps / 500))
    kwargs = {"segmenter": "sentences", "max_step_length": limit, "stop_window": window, "stop_check_every": every}
    return RecipeScale(
        "step-pruner",
        f"steps = sentences (the testbed's traces have no blank lines); step limit 512 -> {limit} tokens (x cap/"
        f"{DEFAULT_PAPER_CAP}); stop rule's 50-batch window / 10-batch checks x max_steps/500 -> {window} / {every} "
        "(at least 2), patience 3 checks; kappa 0.5 scale-free",
        reward_kwargs={"step_pruner": kwargs},
    )


def _grsp(cap: int, steps: int) -> RecipeScale:
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


SCALING_RULES: dict[str, ScalingRule] = {
    "grpo": _scale_free("grpo", "no length constant"),
    "dr-grpo": _scale_free("dr-grpo", "TRL's dr_grpo loss divides by max_completion_length (= the cap); no std"),
    "step-pruner": ScalingRule(_step_pruner),
    "grsp": ScalingRule(_grsp),
    "kimi": _scale_free("kimi", "group min/max lengths"),
    "cosine": _scale_free("cosine", "cosine over max_completion_length (= the cap)"),
    "dler": _scale_free("dler", "truncation at max_completion_length (= the cap)"),
    "dapo-overlong": _scale_free("dapo-overlong", "punishment over the last cap/4 tokens"),
    "drpo": _scale_free("drpo", "length normaliser C = max_completion_length"),
    "grpo-lead": _scale_free("grpo-lead", "lengths z-scored within the group; 4000-token gate off"),
    "canon": _scale_free("canon", "length halves of the group"),
    "canon-entropy": _scale_free("canon-entropy", "mean-token-entropy halves of the group"),
    "pear": _scale_free("pear", "mean per-token entropies (nats) of the two phases; no length constant"),
    "sar": _scale_free("sar", "perplexity ratio with and without the question; no length constant"),
    "gdpo": _scale_free("gdpo", "length limit = max_completion_length / 2"),
    "hbpo": ScalingRule(_hbpo),
    "l1-exact": _l1("exact"),
    "l1-max": _l1("max"),
    "laser": ScalingRule(_laser),
    "shorter-better": ScalingRule(_shorter_better),
    "da-dler": ScalingRule(_da_dler),
    "saber": ScalingRule(_saber),
    "bingo": ScalingRule(_bingo),
    "gfpo": _gfpo("gfpo", ", Shortest 8/16"),
    "gfpo-adaptive": _gfpo("gfpo-adaptive", ", k by difficulty quartile 8/8/6/4"),
    "hapo": _revisits("hapo", "the length term depends on L / h only"),
    "a-dlp": ScalingRule(_adlp),
    "alp": _scale_free("alp", "per-token price beta / N with N = max_completion_length (= the cap)"),
    "grpo-lambda": _scale_free("grpo-lambda", "lengths z-scored among the group's correct answers"),
    "asrr": ScalingRule(_asrr),
    "dot": ScalingRule(_dot),
    "laser-d": _laser_d("laser-d"),
    "laser-de": _laser_d("laser-de"),
    "lspo": _revisits("lspo", "length quantiles of the batch; L_max = 0.95 x the cap"),
    "frugal": ScalingRule(_frugal),
    "o1-pruner": ScalingRule(_o1_pruner),
    "curriculum": ScalingRule(_curriculum),
    "lapo": ScalingRule(_lapo),
    "budgetthinker": ScalingRule(_budgetthinker),
}


def recipe_scale(recipe: str, cap: int = 192, max_steps: int = 40) -> RecipeScale:
    """The testbed scale of `recipe` at completion cap `cap` and `max_steps` steps.

    >>> recipe_scale("no-such-recipe")
    Traceback (most recent call last):
    ...
    ValueError: recipe 'no-such-recipe' has no testbed scaling rule; add one to trl_efficient/testbed/scaling.py.
    """
    if recipe not in SCALING_RULES:
        raise ValueError(f"recipe {recipe!r} has no testbed scaling rule; add one to trl_efficient/testbed/scaling.py.")
    return SCALING_RULES[recipe].build(int(cap), int(max_steps))


def apply_scale(overrides: dict, scale: RecipeScale) -> dict:
    """The recipe's `config_overrides` with the scale's `config` on top. Dict-valued fields (`advantage_kwargs`,
    `filter_kwargs`) merge key by key, so a rule states only the constants it scales and the recipe's other method
    settings (DA-DLER's correct-sample boost, say) stay as the recipe has them.

    >>> s = RecipeScale("x", "rule", config={"max_completion_length": 192, "advantage_kwargs": {"truncate_to": 96}})
    >>> apply_scale({"advantage_kwargs": {"truncate_to": 2000, "correct_boost": 0.1}, "loss_type": "dapo"}, s)
    {'advantage_kwargs': {'truncate_to': 96, 'correct_boost': 0.1}, 'loss_type': 'dapo', 'max_completion_length': 192}
    """
    out = dict(overrides)
    for key, value in scale.config.items():
        base = out.get(key)
        out[key] = {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
    return out


def resolve_placeholders(value: Any, base_model: str) -> Any:
    """`value` with `BASE_MODEL_PLACEHOLDER` replaced by `base_model` in every string (dicts and lists walked).

    >>> resolve_placeholders({"scorer": "self-information:{base_model}", "n": 2}, "/m")
    {'scorer': 'self-information:/m', 'n': 2}
    """
    if isinstance(value, str):
        return value.replace(BASE_MODEL_PLACEHOLDER, base_model)
    if isinstance(value, dict):
        return {k: resolve_placeholders(v, base_model) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(resolve_placeholders(v, base_model) for v in value)
    return value
