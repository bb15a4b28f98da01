"""Recipe registry. `registry.py` holds the registry (`Recipe`, reward builders) and the core recipes; each other
module registers one method family's recipes when it is imported, and this file imports every one of them,
explicitly: the one place the recipe layer registers. Importing this package also registers the method layer
(`trl_efficient.methods`), whose parts the recipes name. A new family module is added to the list below."""

from .. import methods  # noqa: F401  (the method layer's registrations: estimators, filters, plans, samplers)
from . import (  # noqa: F401
    adaptive,
    advantage,
    bingo,
    brorl,
    budget,
    budgetthinker,
    controls,
    curriculum,
    dler,
    dot,
    entropy,
    lapo,
    laser,
    o1_pruner,
    prorl,
    sampling,
    sar,
    solve_rate,
    steps,
)
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
