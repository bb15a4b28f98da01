"""The recipes the instrument itself names (light: the command line reads them without loading any recipe)."""

BASE_RECIPE = "grpo"  # the comparison's reference row: plain GRPO, every length method is compared against it
PLACEBO = "placebo"  # the negative control that carries no information: a check it passes is broken
FIXED_PENALTY = "constant-penalty"  # the negative control a method must beat to credit more than a length penalty
QUICK_COMPARISON = (BASE_RECIPE, "kimi", "shorter-better")  # `trl-efficient testbed compare`'s default recipes
SCORECARD_RECIPE = "hbpo"  # the recipe whose verdict the scorecard's item 6 names (docs/testbed.md)
