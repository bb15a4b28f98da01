"""The prompt samplers' paper values that their recipes state too: LSPO's length quantiles and L_max ratio (methods.md
§20) and Frugal-Thinking's sampling weight alpha (§30). Their one home sits below both the samplers
(`trl_efficient.methods.lspo`, `trl_efficient.methods.frugal`, which load torch) and the recipes
(`trl_efficient.recipes.prompt_selection`), so registering the recipes imports no method module.
"""

__all__ = ["FRUGAL_ALPHA", "LSPO_HIGH", "LSPO_LOW", "LSPO_MAX_RATIO"]

LSPO_LOW = 0.3  # proposed default (methods.md §20: quantiles not published)
LSPO_HIGH = 0.7  # proposed default
LSPO_MAX_RATIO = 0.95  # proposed default: L_max = 0.95 * max_completion_length

FRUGAL_ALPHA = 0.0  # [paper] uniform over the kept problems; alpha > 0 (option) weights w(p) = 1 + alpha * p
