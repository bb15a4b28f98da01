"""Recipe registry. `registry.py` holds the registry (`Recipe`, reward builders) and the core recipes; each other
module registers one method family's recipes when it is imported, and this package imports every one of its modules
by discovery, in sorted order (`core.registry.import_submodules`): a new family module is found, not listed, and the
registration order (which docs/methods.md follows within a section) is the modules' alphabetical order. `RECIPES` and
`REWARD_BUILDERS` name this package as their provider, so a lookup fills them whoever imported what.

Importing this package loads no torch, TRL or transformers (`tests/recipes/test_light_registry.py`): a recipe names
its trainer and dataset hook by reference (`Recipe.trainer_class`, `"trl_efficient.methods.dler:DLERTrainer"`,
imported by `Recipe.trainer_cls` on first use), and the method layer's registrations (estimators, filters, plans,
samplers, which a config naming e.g. `advantage_estimator: hbpo` needs) are imported by their own registries on the
first lookup that misses, not by this package."""

from ..core.registry import import_submodules
from .registry import (
    RECIPES,
    REWARD_BUILDERS,
    REWARD_INFO,
    Recipe,
    RewardInfo,
    RewardSpec,
    Section,
    get_recipe,
    register_recipe,
    reward_builder,
)

import_submodules(__name__, __path__)  # every family module, sorted (after registry.py's core recipes)

__all__ = [
    "RECIPES",
    "REWARD_BUILDERS",
    "REWARD_INFO",
    "Recipe",
    "RewardInfo",
    "RewardSpec",
    "Section",
    "get_recipe",
    "register_recipe",
    "reward_builder",
]
