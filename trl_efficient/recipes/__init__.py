"""Recipe registry. `registry.py` holds the registry (`Recipe`, reward builders) and the core recipes; each other
module registers one method family's recipes when it is imported, and this file imports every one of them,
explicitly: the one place the recipe layer registers. A new family module is added to the list below.

Importing this package loads no torch, TRL or transformers (`tests/recipes/test_light_registry.py`): a recipe names
its trainer and dataset hook by reference (`Recipe.trainer_class`, `"trl_efficient.methods.dler:DLERTrainer"`, imported by
`Recipe.trainer_cls` on first use), and the method layer's registrations (estimators, filters, plans, samplers, which
a config naming e.g. `advantage_estimator: hbpo` needs) are made by `import trl_efficient.methods`, which a run does
(`trl_efficient.api.register_everything`), not by this package."""

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
    prompt_selection,
    prorl,
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
