"""
Testbed scale: how the instrument puts a recipe's papers' constants at the CPU testbed's size. Each recipe's spec
declares its own rule (`specs.RecipeSpec.scale`, a function `(cap, max_steps) -> RecipeScale` next to the spec, in
`specs/`); this module holds the vocabulary those rules share, and `specs.recipe_scale` applies them.

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

**The one rule** (issue 35, item 1; `paper_to_testbed`). Every paper length constant is declared with its recipe's
spec (`RecipeSpec.paper_lengths`, a tuple of `PaperLength`) together with the paper's own `Reference` length: its base
model's mean response length where the paper states one (on MATH/MATH-500 where it reports benchmarks apart, the
benchmark nearest the testbed's arithmetic; else the average it states), its response cap otherwise. A base mean maps
to the testbed base model's mean response length, a cap to the testbed's cap. World v3's comparison applies it
(`apply_one_rule`, with testbed:v3's mean `TESTBED_V3_BASE_MEAN`): every declared constant at the rule's value but
those whose `PaperLength.keep` states a reason of the world. The rules above (`RecipeSpec.scale`) still set what the
rule does not cover, and are what world v2's committed comparison ran under (at v2's mean, `TESTBED_BASE_MEAN`); where
they differed from the rule the constant says why (`PaperLength.exception`). `trl-efficient testbed scale-table`
(docs/scale.md) lists the paper value, the rule's, world v3's and world v2's.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

__all__ = [
    "BASE_MODEL_PLACEHOLDER",
    "DEFAULT_PAPER_CAP",
    "TESTBED_BASE_CAP",
    "TESTBED_BASE_MEAN",
    "TESTBED_V3_BASE_MEAN",
    "PaperLength",
    "RecipeScale",
    "Reference",
    "ScaleRule",
    "apply_one_rule",
    "paper_to_testbed",
    "revisit_tasks",
    "revisits",
    "scale_free",
    "scale_length",
    "scale_per_token",
]

DEFAULT_PAPER_CAP = 4096  # recipes whose paper states no response cap
BASE_MODEL_PLACEHOLDER = "{base_model}"  # replaced by the testbed base model's directory in recipe_kwargs
# The testbed base model's mean response length (tokens) at its cap: testbed:v2 on world v2's training tasks,
# `perf/testbed/results/world_report_v2.json` (summary.mean_tokens 160.82 at max_new_tokens 384; docs/testbed.md);
# tests/testbed/test_scale_rule.py checks both against the report.
TESTBED_BASE_MEAN, TESTBED_BASE_CAP = 160.8, 384
# testbed:v3's, the world whose comparison applies the one rule (`apply_one_rule`): 159.37 tokens at 384,
# `perf/testbed/results_v3/world_report_v3.json` (tests/testbed/test_scale_rule.py checks it)
TESTBED_V3_BASE_MEAN = 159.4


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
        """What a run's key holds of the scale (`jobs.plan_job`: `testbed_scale`, hashed; keep it byte-identical)."""
        return {
            "rule": self.rule,
            "config": self.config,
            "reward_kwargs": self.reward_kwargs,
            "recipe_kwargs": self.recipe_kwargs,
            "num_generations": self.num_generations,
            "needs": list(self.needs),
            "num_train": self.num_train,
        }


ScaleRule = Callable[[int, int], RecipeScale]  # (cap, max_steps) -> RecipeScale: a spec's `scale`


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
        rule = (f"scale-free ({why}); trains on {tasks} tasks so that each is visited about 4 times in the run (the "
                "paper trains for several epochs)")  # fmt: skip
        return RecipeScale(name, rule, num_train=tasks)

    return build


REFERENCE_KINDS = ("cap", "base mean")  # what a paper's reference length is; `Reference.kind`
LENGTH_UNITS = ("length", "per-token")  # `PaperLength.unit`


@dataclass(frozen=True)
class Reference:
    """A paper's own reference length and the testbed length it stands for.

    `tokens`: the paper's reference length; `kind`: `"base mean"` (its base model's mean response length, mapped to
    the testbed base model's, `TESTBED_BASE_MEAN`) or `"cap"` (its response cap, mapped to the testbed's cap);
    `source`: where the paper states it (docs/methods.md section and table).

    The testbed base's mean is measured at `TESTBED_BASE_CAP`; at another cap it is taken in proportion to the cap
    (as the curriculum's start is), so that every reference moves with the cap the same way.

    >>> Reference(5500, "base mean", "§4").testbed_tokens(384), Reference(4096, "cap", "§6").testbed_tokens(192)
    (160.8, 192)
    """

    tokens: float
    kind: str
    source: str

    def __post_init__(self) -> None:
        if self.kind not in REFERENCE_KINDS:
            raise ValueError(f"Reference.kind must be one of {REFERENCE_KINDS}, got {self.kind!r}.")
        if self.tokens <= 0:
            raise ValueError(f"Reference.tokens must be > 0, got {self.tokens}.")

    def testbed_tokens(self, cap: int, base_mean: float = TESTBED_BASE_MEAN) -> float:
        """The testbed length this reference stands for at completion cap `cap` (tokens), the testbed base writing
        `base_mean` tokens on average at `TESTBED_BASE_CAP`.

        >>> Reference(5500, "base mean", "§4").testbed_tokens(384, base_mean=159.4)
        159.4
        """
        return cap if self.kind == "cap" else base_mean * cap / TESTBED_BASE_CAP


def paper_to_testbed(
    value: float | tuple[float, ...],
    reference: Reference,
    cap: int,
    unit: str = "length",
    minimum: int = 1,
    base_mean: float = TESTBED_BASE_MEAN,
) -> int | float | tuple:
    r"""The one rule: a paper's length constant at the testbed, by the ratio of the testbed's reference length
    $T = $ `reference.testbed_tokens(cap)` to the paper's $P = $ `reference.tokens` (issue 35, item 1):

    $$ \text{length: } v' = \max(\text{minimum}, \operatorname{round}(v \cdot T / P)) \qquad
       \text{per-token: } c' = c \cdot P / T $$

    so that a length is the same fraction of the reference on both sides, and a per-token coefficient costs the same
    reward for a deviation of the same fraction of the reference. `value` may be a tuple (budgets, tiers), mapped
    element by element; `minimum` is the constant's declared floor (SABER's NoThink limit of 16 tokens); `base_mean`
    is the testbed base model's mean response length at `TESTBED_BASE_CAP` (world v2's by default).

    >>> dler = Reference(5500, "base mean", "methods.md §4, Table 1")  # R1-Distill-Qwen-1.5B on MATH
    >>> paper_to_testbed(4000, dler, 384)  # round(4000 * 160.8 / 5500) = round(116.9)
    117
    >>> paper_to_testbed((128, 4096, 16384), Reference(16384, "cap", "§3"), 384, minimum=16)  # 3 -> 16, 96, 384
    (16, 96, 384)
    >>> paper_to_testbed(0.0003, Reference(4096, "cap", "§6"), 384, unit="per-token")  # 0.0003 * 4096 / 384
    0.0031999999999999997
    """
    if unit not in LENGTH_UNITS:
        raise ValueError(f"unit must be one of {LENGTH_UNITS}, got {unit!r}.")
    if isinstance(value, tuple):
        return tuple(paper_to_testbed(v, reference, cap, unit, minimum, base_mean) for v in value)
    ratio = reference.testbed_tokens(cap, base_mean) / reference.tokens
    if unit == "per-token":
        return float(value) / ratio
    return max(int(minimum), int(round(value * ratio)))


@dataclass(frozen=True)
class PaperLength:
    """A paper length constant of a recipe (`RecipeSpec.paper_lengths`), mapped to the testbed by `paper_to_testbed`.

    `name`: what it is (with the paper's symbol); `paper`: its paper value (tokens, or reward per token; a tuple for a
    set of budgets or tiers); `unit`: `"length"` or `"per-token"`; `reference`: the paper's `Reference`; `source`:
    where the paper states the constant; `field`: where the testbed's value sits in the recipe's `RecipeScale`, a
    dotted path (`"config.filter_kwargs.margin"`; `"config.max_completion_length"` absent means the comparison's
    cap); `minimum`: its floor at the testbed; `exception`: why the recipe's own rule (`RecipeSpec.scale`, what
    world v2's comparison ran under) differs from the one rule's, empty when they agree; `keep`: why the one rule
    keeps the recipe's own value instead of its own (`apply_one_rule`, world v3's comparison), empty when it does
    not: a reason of the world (a budget below every trace's floor), stated in docs/scale.md's table.
    """

    name: str
    paper: float | tuple[float, ...]
    unit: str
    reference: Reference
    source: str
    field: str
    minimum: int = 1
    exception: str = ""
    keep: str = ""

    def __post_init__(self) -> None:
        if self.unit not in LENGTH_UNITS:
            raise ValueError(f"PaperLength {self.name!r}: unit must be one of {LENGTH_UNITS}, got {self.unit!r}.")
        if self.field.split(".")[0] not in ("config", "reward_kwargs", "recipe_kwargs"):
            raise ValueError(f"PaperLength {self.name!r}: field must start with config., reward_kwargs. or "
                             f"recipe_kwargs., got {self.field!r}.")  # fmt: skip

    def rule(self, cap: int, base_mean: float = TESTBED_BASE_MEAN) -> int | float | tuple:
        """The one rule's testbed value at completion cap `cap` (`paper_to_testbed`)."""
        return paper_to_testbed(self.paper, self.reference, cap, self.unit, self.minimum, base_mean)

    def today(self, scale: RecipeScale, cap: int) -> int | float | tuple:
        """The value the testbed uses today: `field` read from the recipe's `scale` (lists as tuples).

        >>> p = PaperLength("m", 32, "length", Reference(4096, "cap", "§21"), "§21", "config.filter_kwargs.margin")
        >>> p.today(RecipeScale("dot", "r", config={"filter_kwargs": {"margin": 3}}), 384)
        3
        >>> p = PaperLength("cap", 4096, "length", Reference(4096, "cap", "§21"), "§21", "config.max_completion_length")
        >>> p.today(RecipeScale("dot", "r"), 384)  # not set by the rule: the comparison's cap
        384
        """
        head, *path = self.field.split(".")
        value = getattr(scale, head)
        for i, key in enumerate(path):
            if not isinstance(value, dict) or key not in value:
                if self.field == "config.max_completion_length":
                    return cap
                raise KeyError(f"recipe {scale.recipe!r}: its testbed scale has no {'.'.join([head, *path[:i + 1]])} "
                               f"(PaperLength {self.name!r}, field {self.field!r})")  # fmt: skip
            value = value[key]
        return tuple(value) if isinstance(value, list) else value

    def agrees(self, scale: RecipeScale, cap: int, base_mean: float = TESTBED_BASE_MEAN) -> bool:
        """Whether today's value is the one rule's (per-token coefficients to 1e-9, relative)."""
        rule, today = self.rule(cap, base_mean), self.today(scale, cap)
        if self.unit == "per-token":
            pairs = zip(rule, today, strict=True) if isinstance(rule, tuple) else [(rule, today)]
            return all(math.isclose(a, b, rel_tol=1e-9) for a, b in pairs)
        return rule == today


def _with_field(scale: RecipeScale, path: str, value) -> RecipeScale:
    """`scale` with the dotted `path` (`PaperLength.field`) set to `value` (tuples written as lists, as the run files
    hold them); the dicts on the way are copied, never mutated."""
    head, *keys = path.split(".")
    root = copy.deepcopy(getattr(scale, head))
    node = root
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = list(value) if isinstance(value, tuple) else value
    return replace(scale, **{head: root})


def apply_one_rule(scale: RecipeScale, lengths: tuple[PaperLength, ...], cap: int, base_mean: float) -> RecipeScale:
    """`scale` (a recipe's own rule, `RecipeSpec.scale`) with every paper length constant at the one rule's value
    (`PaperLength.rule` with the testbed base's mean `base_mean`), except those whose `keep` states why the recipe's
    own value stays; the rule line says which were set and which kept. Where the one rule gives every constant the
    value the recipe's own rule gives, `scale` is returned as it is (its rule line, and so its run files' keys, stay).

    >>> ref = Reference(5500, "base mean", "§4")
    >>> cut = PaperLength("truncation", 4000, "length", ref, "§4", "config.max_completion_length")
    >>> s = apply_one_rule(RecipeScale("dler", "cap/2", config={"max_completion_length": 192}), (cut,), 384, 159.4)
    >>> s.config, s.rule  # round(4000 x 159.4 / 5500) = round(115.9)
    ({'max_completion_length': 116}, 'one rule (base mean 159.4): truncation 4000 -> 116')
    """
    if all(length.keep or length.agrees(scale, cap, base_mean) for length in lengths):
        return scale
    done, kept = [], []
    for length in lengths:
        if length.keep:
            kept.append(f"{length.name} kept at {_show(length.today(scale, cap))} ({length.keep})")
            continue
        value = length.rule(cap, base_mean)
        scale = _with_field(scale, length.field, value)
        done.append(f"{length.name} {_show(length.paper)} -> {_show(value)}")
    rule = f"one rule (base mean {base_mean:g}): " + "; ".join(done + kept)
    return replace(scale, rule=rule)


def _show(value) -> str:
    """A constant for a rule line: tuples comma-separated, floats to 3 significant digits."""
    if isinstance(value, tuple):
        return ", ".join(_show(v) for v in value)
    return f"{value:.3g}" if isinstance(value, float) else str(value)
