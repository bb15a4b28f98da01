"""Model cards state what the run used (issue 47): a recipe's own text (its paper's or proposed settings) is labelled
where the run used other values, and a model trl-efficient built from a GGUF package is named by what it is, with its
license, in training and merge cards."""

import os
from types import SimpleNamespace

import torch
from helpers import tiny_config
from huggingface_hub import ModelCard

from trl_efficient.hub import merge
from trl_efficient.hub.card import ModelCardInfo, card_data_from_trainer, finalize_model_card
from trl_efficient.recipes import get_recipe
from trl_efficient.testing.smollm import SMOLLM2_GGUF_FILE, write_smollm2_card


def _card(recipe_name, tmp_path, model_path="/nonexistent/x", **cfg):
    recipe = get_recipe(recipe_name)
    args = tiny_config(tmp_path, **{**recipe.config_overrides, **cfg})
    trainer = SimpleNamespace(
        args=args, card_info=ModelCardInfo(recipe=recipe, datasets=["gsm8k"]), rollout_plan=None, reward_funcs=[],
        reward_func_names=["correctness_reward"], reward_weights=torch.tensor([1.0]), train_dataset=None,
        model=SimpleNamespace(config=SimpleNamespace(_name_or_path=model_path)),
    )  # fmt: skip
    path = os.path.join(tmp_path, "README.md")
    ModelCard("---\nlicense: other\n---\n# TRL's card\n").save(path)
    finalize_model_card(trainer, path)
    return trainer, ModelCard.load(path).text


def _lines_with(text, needle):
    return [line for line in text.splitlines() if needle in line]


def test_prorl_card_states_the_reset_period_the_run_used(tmp_path):
    _, text = _card("prorl", tmp_path, ref_reset_steps=1, beta=1e-4)
    assert "- `ref_reset_steps`: `1`" in text
    stated = _lines_with(text, "every 200 steps") + _lines_with(text, "reset every 200")
    assert stated, "the recipe's own text is kept"
    for line in stated:  # the paper's/recipe's 200 only ever beside the run's value
        assert "this run used `ref_reset_steps` = 1" in line, line
        assert "the paper's setting" in line or "the recipe's default, not this run's" in line


def test_brorl_card_states_the_rollouts_and_batch_the_run_used(tmp_path):
    _, text = _card("brorl", tmp_path, num_generations=8, per_device_train_batch_size=4,
                    gradient_accumulation_steps=2, beta=1e-4)  # fmt: skip
    assert "- `num_generations`: `8`" in text and "- `per_device_train_batch_size`: `4`" in text
    assert "- `gradient_accumulation_steps`: `2`" in text
    stated = _lines_with(text, "512")
    assert any("N = 512" in line for line in stated) and any("16 = 512 rows" in line for line in stated)
    for line in stated:
        assert "this run used" in line, line
    rows = next(line for line in stated if "16 = 512 rows" in line)
    assert "`per_device_train_batch_size` = 4" in rows and "`gradient_accumulation_steps` = 2" in rows


def test_a_card_that_agrees_with_the_run_is_not_labelled(tmp_path):
    trainer, text = _card("prorl", tmp_path)  # the recipe's own settings
    assert "this run used" not in text
    assert card_data_from_trainer(trainer).description == get_recipe("prorl").description


def test_smollm2_is_named_with_its_origin_and_license(tmp_path):
    model = tmp_path / "smollm2-135m-instruct"
    model.mkdir()
    write_smollm2_card(str(model))  # what `save_smollm2` writes next to the converted weights
    _, text = _card("prorl", tmp_path, model_path=str(model))
    assert "not on the Hugging Face Hub" not in text and "No license is set" not in text
    assert "fine-tuned version of [HuggingFaceTB/SmolLM2-135M-Instruct]" in text
    assert f"de-quantised to float32 by trl-efficient from the 4-bit GGUF file `{SMOLLM2_GGUF_FILE}`" in text
    assert "License: `apache-2.0`, as the card of `smollm2-135m-instruct` states." in text


def test_the_merge_card_names_smollm2_by_what_it_is(tmp_path, monkeypatch):
    model = tmp_path / "smollm2-135m-instruct"
    model.mkdir()
    write_smollm2_card(str(model))
    monkeypatch.setattr(merge, "resolve_model_name", lambda name: str(model) if name.startswith("smollm2:") else name)
    hub_id, line = merge.describe_model("smollm2:135m-instruct")
    assert hub_id == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert "offline test model" not in line and "SmolLM2-135M-Instruct (Apache-2.0), de-quantised" in line
    info = merge.card_info("uniform", ["smollm2:135m-instruct", str(model)], {"alpha": 0.5})
    assert info["license"] == "apache-2.0" and "No license is set" not in info["license_text"]
