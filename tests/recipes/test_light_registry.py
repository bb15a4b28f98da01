"""The recipe registry imports light (issue 34): `import trl_efficient.recipes`, listing and getting recipes load no
torch and no transformers, because a recipe names its trainer and dataset hook by `"module:attr"` reference
(`Recipe.trainer_class`, `Recipe.dataset_hook`, a builder's `also_receives`), resolved on first use; and every such
reference resolves to what it claims to be."""

import json
import os
import subprocess
import sys

import pytest

from trl_efficient.recipes import RECIPES, get_recipe
from trl_efficient.recipes.registry import DEFAULT_TRAINER, REWARD_RECEIVERS, Recipe, RewardSpec, resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_importing_listing_and_getting_recipes_loads_no_torch_or_transformers():
    code = """
import json, sys
import trl_efficient.recipes as r
names = r.RECIPES.names()
recipes = [r.get_recipe(name) for name in names]
print(json.dumps({"recipes": len(recipes), "trainers": sorted({str(x.trainer_class) for x in recipes}),
                  "loaded": [m for m in ("torch", "transformers", "trl_efficient.methods", "trl_efficient.trainer")
                             if m in sys.modules]}))
"""
    env = {**os.environ, "PYTHONPATH": ROOT, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["loaded"] == []
    assert seen["recipes"] >= 40 and DEFAULT_TRAINER in seen["trainers"] and len(seen["trainers"]) > 5


@pytest.mark.parametrize("name", RECIPES.names())
def test_every_recipes_trainer_and_dataset_hook_resolve(name):
    from trl_efficient.trainer import EfficientGRPOTrainer

    recipe = get_recipe(name)
    cls = recipe.trainer_cls
    assert isinstance(cls, type) and issubclass(cls, EfficientGRPOTrainer)
    if isinstance(recipe.trainer_class, str):  # the reference names the class by its own name, in its package or module
        module, attr = recipe.trainer_class.split(":")
        assert attr == cls.__qualname__ and cls.__module__.startswith(module)
    if recipe.dataset_hook is not None:
        hook = resolve(recipe.dataset_hook)
        assert callable(hook) and hook.__name__ in ("prepare_dataset", "prepare_bingo")


def test_every_builders_further_receivers_resolve_to_callables():
    receivers = [resolve(r) for refs in REWARD_RECEIVERS.values() for r in refs]
    assert receivers and all(callable(r) for r in receivers)
    assert "LaserMonitor" in {r.__name__ for r in receivers}  # laser_d / laser_de's monitor, by reference


def test_a_reference_that_names_nothing_fails_when_resolved_naming_it():
    reference = "trl_efficient.methods.dler:NoSuch"
    recipe = Recipe("no-trainer", "m", "d", (RewardSpec("correctness"),), trainer_class=reference)
    with pytest.raises(AttributeError, match="NoSuch"):
        recipe.trainer_cls  # noqa: B018
    with pytest.raises(ValueError, match="package.module:attr"):
        resolve("trl_efficient.methods.dler.DLERTrainer")
