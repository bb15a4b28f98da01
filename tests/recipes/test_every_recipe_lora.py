"""Every registered recipe trains 2 steps with LoRA from its YAML (`--use_peft`, TRL's `ModelConfig` flags on the
`trl-efficient train` command line), like tests/recipes/test_every_recipe.py without LoRA. Registry-driven: a new
recipe is covered by registering it."""

import importlib.util
import json
import os

import pytest

from trl_efficient.api.training import train_main
from trl_efficient.recipes import RECIPES

pytest.importorskip("peft")


def _plain_run_module():
    """tests/recipes/test_every_recipe.py (no package here: pytest's importlib mode), for its tiny-size method values
    and per-recipe extras (scorer, profile, pass rates): one source for both runs."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_every_recipe.py")
    spec = importlib.util.spec_from_file_location("_every_recipe_plain", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PLAIN = _plain_run_module()
EXTRAS, ROOT, _tiny_args = _PLAIN.EXTRAS, _PLAIN.ROOT, _PLAIN._tiny_args

LORA = ["--use_peft", "--lora_r", "4", "--lora_alpha", "8", "--lora_target_modules", "q_proj", "v_proj"]
# Recipes that cannot train with PEFT, each refused in one line when the trainer is built (the message's start):
# ProRL's reference resets copy the policy into a separate reference model, which TRL does not keep under PEFT
# (its reference is the adapter-disabled base), as TRL's own sync_ref_model refuses PEFT.
# BroRL runs ProRL's algorithm (its resets included) with N = 512.
NOT_WITH_PEFT = {
    "prorl": "cannot run with PEFT",  # refused at config time, in one line, before any model loads
    "brorl": "cannot run with PEFT",
}


@pytest.mark.parametrize("name", RECIPES.names())
def test_recipe_trains_two_steps_with_lora(name, tmp_path, monkeypatch):
    from peft import PeftConfig

    monkeypatch.chdir(ROOT)
    extra = EXTRAS[name](tmp_path, monkeypatch) if name in EXTRAS else []
    run = tmp_path / "run"
    argv = ["--config", f"configs/{name}.yaml", *_tiny_args(name, run, max_completion_length=12), *extra, *LORA]
    if name in NOT_WITH_PEFT:
        with pytest.raises(ValueError, match=NOT_WITH_PEFT[name]) as err:
            train_main(argv)
        assert "\n" not in str(err.value)
        return
    train_main(argv)
    with open(run / "trl_efficient_summary.json") as f:
        assert json.load(f)["recipe"] == name
    # save_model of a PEFT model writes the adapter (not full weights), with the requested rank and modules
    config = PeftConfig.from_pretrained(str(run))
    assert config.r == 4 and set(config.target_modules) == {"q_proj", "v_proj"}
    assert os.path.exists(run / "adapter_model.safetensors")
