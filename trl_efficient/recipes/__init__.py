"""Recipe registry. `registry.py` holds the registry and the core recipes; every other module of this package
(one per method family) registers its recipes on import, and all of them are imported here."""

import importlib
import pkgutil

from .registry import (
    RECIPES,
    REWARD_BUILDERS,
    REWARD_INFO,
    Recipe,
    RewardInfo,
    RewardSpec,
    get_recipe,
    register_recipe,
    register_reward_builder,
)

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "RECIPES",
    "REWARD_BUILDERS",
    "REWARD_INFO",
    "Recipe",
    "RewardInfo",
    "RewardSpec",
    "get_recipe",
    "register_recipe",
    "register_reward_builder",
]
