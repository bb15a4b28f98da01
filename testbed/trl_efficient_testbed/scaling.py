"""
Testbed scale of every compared recipe. Each recipe's spec declares its rule (`specs.RecipeSpec.scale`, under
`specs/`; the shared vocabulary, `RecipeScale`, `scale_length`, `scale_per_token`, and the rationale are in
`trl_efficient_testbed/scale.py`); this module applies them at a comparison's settings: `recipe_scale`,
`apply_scale`, `resolve_placeholders`.

A recipe without a spec fails `recipe_scale` (and `tests/testbed/test_scaling.py`), so nothing silently runs at paper
scale on the testbed.

>>> s = recipe_scale("hbpo", cap=192)
>>> s.config["budgets"], s.config["advantage_kwargs"]["l_max"], s.num_generations
([24, 48, 96, 120], 192, 16)
>>> round(recipe_scale("l1-exact", cap=192).reward_kwargs["l1"]["alpha"], 5)  # 0.0003 * 4096 / 192
0.0064
"""

from __future__ import annotations

from typing import Any

from . import specs
from .scale import (
    BASE_MODEL_PLACEHOLDER,
    DEFAULT_PAPER_CAP,
    TESTBED_V3_BASE_MEAN,
    RecipeScale,
    revisit_tasks,
    scale_length,
    scale_per_token,
)

__all__ = [
    "BASE_MODEL_PLACEHOLDER",
    "DEFAULT_PAPER_CAP",
    "ONE_RULE_BASE_MEANS",
    "RecipeScale",
    "apply_scale",
    "recipe_scale",
    "resolve_placeholders",
    "revisit_tasks",
    "scale_length",
    "scale_per_token",
    "settings_scale",
]


# The base models whose comparisons map paper length constants by the one rule (`scale.apply_one_rule`), with their
# mean response length at `TESTBED_BASE_CAP` on their world's training tasks (`scale.TESTBED_V3_BASE_MEAN`). World
# v2's committed comparison ran under each recipe's own rule and its run files hash those settings, so testbed:v2
# (and the smaller worlds) keep them.
ONE_RULE_BASE_MEANS = {"testbed:v3": TESTBED_V3_BASE_MEAN}


def recipe_scale(recipe: str, cap: int = 192, max_steps: int = 40, base_model: str | None = None) -> RecipeScale:
    """The testbed scale of `recipe` at completion cap `cap` and `max_steps` steps: its spec's own rule
    (`specs.recipe_scale`), with its paper length constants at the one rule's values where `base_model`'s
    comparison uses it (`ONE_RULE_BASE_MEANS`).

    >>> recipe_scale("dler", 384, 40, "testbed:v2").config, recipe_scale("dler", 384, 40, "testbed:v3").config
    ({'max_completion_length': 192}, {'max_completion_length': 116})

    >>> recipe_scale("no-such-recipe")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Unknown recipe 'no-such-recipe'. Valid choices: [...].
    """
    return specs.recipe_scale(recipe, int(cap), int(max_steps), ONE_RULE_BASE_MEANS.get(base_model or ""))


def settings_scale(recipe: str, settings: Any) -> RecipeScale:
    """`recipe_scale` at a comparison's settings (`TestbedSettings`: its cap, steps and base model)."""
    return recipe_scale(recipe, settings.max_completion_length, settings.max_steps, settings.base_model)


def apply_scale(overrides: dict, scale: RecipeScale) -> dict:
    """The recipe's `config_overrides` with the scale's `config` on top. Dict-valued fields (`advantage_kwargs`,
    `filter_kwargs`) merge key by key, so a rule states only the constants it scales and the recipe's other method
    settings (DA-DLER's correct-sample boost, say) stay as the recipe has them.

    >>> s = RecipeScale("x", "rule", config={"max_completion_length": 192, "advantage_kwargs": {"truncate_to": 96}})
    >>> apply_scale({"advantage_kwargs": {"truncate_to": 2000, "correct_boost": 0.1}, "loss_type": "dapo"}, s)
    {'advantage_kwargs': {'truncate_to': 96, 'correct_boost': 0.1}, 'loss_type': 'dapo', 'max_completion_length': 192}
    """
    out = dict(overrides)
    for key, value in scale.config.items():
        base = out.get(key)
        out[key] = {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
    return out


def resolve_placeholders(value: Any, base_model: str) -> Any:
    """`value` with `BASE_MODEL_PLACEHOLDER` replaced by `base_model` in every string (dicts and lists walked).

    >>> resolve_placeholders({"scorer": "self-information:{base_model}", "n": 2}, "/m")
    {'scorer': 'self-information:/m', 'n': 2}
    """
    if isinstance(value, str):
        return value.replace(BASE_MODEL_PLACEHOLDER, base_model)
    if isinstance(value, dict):
        return {k: resolve_placeholders(v, base_model) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(resolve_placeholders(v, base_model) for v in value)
    return value
