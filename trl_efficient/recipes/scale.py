"""
Testbed scale: how a recipe puts its papers' constants at the CPU testbed's size. Each recipe declares its own rule
(`Recipe.testbed_scale`, a function `(cap, max_steps) -> RecipeScale` next to the recipe); this module holds the
vocabulary those rules share, and `trl_efficient.testbed.scaling.recipe_scale` applies them.

Recipes carry their papers' constants, set for completions of thousands of tokens; the testbed caps completions at
`max_completion_length` (192 by default) and trains for tens of steps. Run unchanged, a recipe would show its units
rather than its method (HBPO's cosine over `l_max = 4096` is flat below 192 tokens; L1's 0.0003 per token is worth
0.015 reward at testbed lengths). So:

- **lengths** (budgets, targets, tiers, truncation points, `l_max`) scale by `cap / paper_cap`, rounded
  (`scale_length`);
- **per-token coefficients** (L1's alpha, ShorterBetter's beta, HBPO's alpha) scale by the inverse, `paper_cap / cap`
  (`scale_per_token`), so that a deviation of the same *fraction of the cap* costs the same reward as in the paper;
- **scale-free** recipes (group-relative, or already written in terms of `max_completion_length`) keep their values
  (`scale_free`);
- **G**: where the method itself is about the group size (GFPO samples 16 and keeps 8; HBPO's 4 budget subgroups of
  4), the recipe gets its own `num_generations`; everyone else uses the comparison's common G. The number of prompts
  per step is the same for every recipe, so a larger G means more samples per step, which is the method's point.

`paper_cap` is the paper's response cap where docs/methods.md states one (HBPO 4096, L1 4096, DLER/DA-DLER 4000,
LASER's context 16384, SABER's largest tier 16384); `DEFAULT_PAPER_CAP = 4096` otherwise (said so in the rule).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "BASE_MODEL_PLACEHOLDER",
    "DEFAULT_PAPER_CAP",
    "RecipeScale",
    "ScaleRule",
    "revisit_tasks",
    "revisits",
    "scale_free",
    "scale_length",
    "scale_per_token",
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


ScaleRule = Callable[[int, int], RecipeScale]  # (cap, max_steps) -> RecipeScale: a recipe's `testbed_scale`


def scale_free(name: str, why: str) -> ScaleRule:
    """The rule of a recipe with no constant to scale; `why` says why.

    >>> scale_free("kimi", "group min/max lengths")(192, 40).rule
    'scale-free: group min/max lengths; unchanged'
    """
    return lambda cap, steps: RecipeScale(name, f"scale-free: {why}; unchanged")


def revisit_tasks(steps: int) -> int:
    """Training tasks for a recipe with per-prompt state: the run draws 4 prompts per step (the testbed's 32
    completions at G = 8), so `steps` tasks are each visited about 4 times; at least 16, so that a short run still
    fills its 4-prompt batches from several tasks.

    >>> revisit_tasks(40), revisit_tasks(2)
    (40, 16)
    """
    return max(int(steps), 16)


def revisits(name: str, why: str) -> ScaleRule:
    """The rule of a scale-free recipe with per-prompt state: it trains on `revisit_tasks(steps)` tasks.

    Methods whose state is per prompt only act on prompts they have seen: at the testbed's 4 prompts per step and 40
    steps, 1024 training tasks are never revisited, so these recipes train on `steps` tasks (4 visits each).
    """

    def build(cap: int, steps: int) -> RecipeScale:
        tasks = revisit_tasks(steps)
        return RecipeScale(name, f"scale-free ({why}); trains on {tasks} tasks so that each is visited about 4 times "
                           "in the run (the paper trains for several epochs)", num_train=tasks)  # fmt: skip

    return build
