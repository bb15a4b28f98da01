"""
What the instrument declares per recipe, by recipe name: its testbed scale rule, its papers' length constants, its
method family and its claims (`RecipeSpec`, registered in `SPECS`). The library's `Recipe` knows none of it: a recipe
registered in `trl_efficient` without a spec here costs the library nothing, and the instrument refuses to compare it
(`spec_of`). The specs are split by method family (`FAMILIES`): `baselines.py`, `length_penalties.py`, `budget.py`,
`adaptive.py`, `structure.py`, `sampling.py`; the scale vocabulary they share is `trl_efficient_testbed.scale`.

The recipes the instrument itself names (the comparison's reference, its negative controls, ...) are the constants
below; no other module of the instrument spells a recipe's name.

>>> recipe_scale("shorter-better", 192, 40).reward_kwargs
{'shorter_better': {'beta': 0.021333333333333333}}
>>> spec_of("hapo").family, spec_of("hapo").claim, spec_of("hapo").specific
('adaptive / history', 'shorter', 'difficulty-aware')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..scale import PaperLength, RecipeScale, ScaleRule, apply_one_rule

__all__ = [
    "BASE_RECIPE",
    "FAMILIES",
    "FIXED_PENALTY",
    "PLACEBO",
    "QUICK_COMPARISON",
    "SCORECARD_RECIPE",
    "SPECS",
    "RecipeSpec",
    "compared_recipes",
    "recipe_scale",
    "register",
    "spec_of",
]

# The method families of the testbed's per-family plots and tables (`RecipeSpec.family`).
FAMILIES = (
    "baselines",
    "length penalties",
    "budget / prompted",
    "adaptive / history",
    "structure / signal",
    "sampling",
)

from ..names import BASE_RECIPE, FIXED_PENALTY, PLACEBO, QUICK_COMPARISON, SCORECARD_RECIPE  # noqa: E402


@dataclass(frozen=True)
class RecipeSpec:
    """What the instrument declares for library recipe `recipe`.

    `scale`: `(cap, max_steps) -> RecipeScale`, the recipe at the testbed's size (world v2's comparison ran under it);
    `paper_lengths`: its papers' length constants and the reference each scales by (`scale.paper_to_testbed`, the
    one rule: world v3's comparison; `trl-efficient testbed scale-table`, docs/scale.md); `family`: one of
    `FAMILIES` (the plots group recipes by it); `claim`: the key of its method check (`checks.CHECKS`; "shorter":
    shorter at similar accuracy, its paper's claim); `specific`: the key of protocol 3's check of what it adds to a
    fixed length penalty (`checks.SPECIFIC_CHECKS`), `None` when it has none; `claim_options`: what its check reads
    of the recipe (L1's evaluation prompt family and error kind).
    """

    recipe: str
    scale: ScaleRule
    paper_lengths: tuple[PaperLength, ...] = ()
    family: str = "length penalties"
    claim: str = "shorter"
    specific: str | None = None
    claim_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"spec {self.recipe!r}: family must be one of {FAMILIES}, got {self.family!r}.")
        object.__setattr__(self, "claim_options", MappingProxyType(dict(self.claim_options)))

    def at(self, cap: int, max_steps: int, base_mean: float | None = None) -> RecipeScale:
        """The recipe at completion cap `cap` and `max_steps` steps (`scale`); with `base_mean` (the testbed base
        model's mean response length), its paper length constants go through the one rule (`scale.apply_one_rule`:
        world v3's comparison); without, they stay at the recipe's own rule (world v2's)."""
        own = self.scale(int(cap), int(max_steps))
        return own if base_mean is None else apply_one_rule(own, self.paper_lengths, int(cap), float(base_mean))


SPECS: dict[str, RecipeSpec] = {}


def register(spec: RecipeSpec) -> RecipeSpec:
    """Add `spec` to `SPECS` under its recipe's name (one spec per recipe)."""
    existing = SPECS.get(spec.recipe)
    if existing is not None and existing is not spec:
        raise ValueError(f"recipe {spec.recipe!r} already has a testbed spec.")
    SPECS[spec.recipe] = spec
    return spec


def spec_of(name: str) -> RecipeSpec:
    """The spec of library recipe `name`; an unknown recipe is the library's error (listing its recipes), a recipe
    without a spec is refused in one line naming where specs are declared.

    >>> spec_of("no-such-recipe")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Unknown recipe 'no-such-recipe'. Valid choices: [...].
    """
    if name not in SPECS:
        from trl_efficient.recipes import get_recipe

        get_recipe(name)  # not a recipe at all: the library's error, which lists the registered recipes
        raise ValueError(f"recipe {name!r} has no testbed spec: the instrument compares only recipes declared in "
                         "trl_efficient_testbed/specs (RecipeSpec(...), registered in SPECS)")  # fmt: skip
    return SPECS[name]


def recipe_scale(name: str, cap: int, max_steps: int, base_mean: float | None = None) -> RecipeScale:
    """The testbed scale of recipe `name` at completion cap `cap` and `max_steps` steps, its paper length constants
    at the one rule's values where `base_mean` (the testbed base model's mean response length) is given
    (`RecipeSpec.at`).

    >>> recipe_scale("dler", 384, 40).config, recipe_scale("dler", 384, 40, 159.4).config
    ({'max_completion_length': 192}, {'max_completion_length': 116})
    """
    return spec_of(name).at(cap, max_steps, base_mean)


def compared_recipes() -> list[str]:
    """The library recipes the instrument compares (`--recipes all`): every registered recipe that has a spec, sorted.
    A library recipe without one (a new method nobody has declared a testbed claim for) costs the library nothing:
    it is left out here (`uncompared_recipes`), and naming it to `compare` is refused in one line (`spec_of`)."""
    from trl_efficient.recipes import RECIPES

    return [name for name in RECIPES.names() if name in SPECS]


def uncompared_recipes() -> list[str]:
    """The registered library recipes without a spec: not compared until one is declared here."""
    from trl_efficient.recipes import RECIPES

    return [name for name in RECIPES.names() if name not in SPECS]


from . import adaptive, baselines, budget, length_penalties, sampling, structure  # noqa: E402, F401  (register)
