from .registry import RECIPES, REWARD_BUILDERS, Recipe, RewardSpec, get_recipe, register_recipe

__all__ = ["RECIPES", "REWARD_BUILDERS", "Recipe", "RewardSpec", "get_recipe", "register_recipe"]
