"""The pinned testbed base model: `testbed:v2` ships its weights (training it again on another CPU gives another
model), `resolve_base_model` copies them instead of training, a pin from another config is never used, and a run's
key names the base by its weights (`base_model_id`), so results from two bases never mix."""

import dataclasses
import json
import os

import pytest

from trl_efficient.overthinking import base
from trl_efficient.overthinking.base import (
    BASE_MODEL_SIZES,
    MARKER,
    base_model_id,
    pinned_model_dir,
    resolve_base_model,
)


@pytest.mark.parametrize("size", ["v2", "v3"])
def test_v2_and_v3_ship_weights_trained_from_their_current_config(size):
    path = pinned_model_dir(size)
    assert path is not None and path.endswith(os.path.join("testbed", "pinned", size))
    with open(os.path.join(path, MARKER)) as f:
        info = json.load(f)
    assert info["config"] == json.loads(json.dumps(BASE_MODEL_SIZES[size].to_dict()))
    assert info["format_version"] == base.FORMAT_VERSION and info["cpu_capability"] == "AVX2"
    assert pinned_model_dir("small") is None  # tests train it in seconds: nothing shipped


def test_resolve_copies_the_pinned_weights_instead_of_training(tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("the pinned model must not be trained again")

    monkeypatch.setattr(base, "train_base_model", no_training)
    path = resolve_base_model("testbed:v2", cache_dir=str(tmp_path))
    assert os.path.dirname(path) == str(tmp_path) and os.path.basename(path) == f"v2-{BASE_MODEL_SIZES['v2'].key()}"
    # the same weights, byte for byte, under the cache's directory name
    assert base_model_id(path).split("@")[1] == base_model_id(pinned_model_dir("v2")).split("@")[1]
    assert sorted(os.listdir(path)) == sorted(os.listdir(pinned_model_dir("v2")))
    assert resolve_base_model("testbed:v2", cache_dir=str(tmp_path)) == path  # cached: no second copy

    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    assert model.config.vocab_size >= len(tokenizer) and model.config.hidden_size == BASE_MODEL_SIZES["v2"].hidden_size


def test_a_pin_from_another_config_is_not_used(monkeypatch):
    changed = dataclasses.replace(BASE_MODEL_SIZES["v2"], max_steps=BASE_MODEL_SIZES["v2"].max_steps + 1)
    monkeypatch.setitem(BASE_MODEL_SIZES, "v2", changed)
    assert pinned_model_dir("v2") is None
    monkeypatch.setattr(base, "FORMAT_VERSION", base.FORMAT_VERSION + 1)
    monkeypatch.setitem(BASE_MODEL_SIZES, "v2", dataclasses.replace(changed, max_steps=changed.max_steps - 1))
    assert pinned_model_dir("v2") is None


def test_a_result_from_another_bases_weights_is_not_finished(tmp_path, small_base):
    from trl_efficient_testbed.jobs import plan_job
    from trl_efficient_testbed.runner import TestbedSettings

    other = tmp_path / os.path.basename(small_base)  # the same config directory name, other weights
    other.mkdir()
    for name in os.listdir(small_base):
        data = open(os.path.join(small_base, name), "rb").read()
        (other / name).write_bytes(data + b"x" if name == "model.safetensors" else data)
    assert base_model_id(str(other)).split("@")[0] == base_model_id(small_base).split("@")[0]
    assert base_model_id(str(other)) != base_model_id(small_base)
    settings = TestbedSettings(base_model="testbed:small")
    one = plan_job("kimi", 0, settings, str(tmp_path / "out"), base_model_id(small_base))
    two = plan_job("kimi", 0, settings, str(tmp_path / "out"), base_model_id(str(other)))
    assert one.key == two.key and one.path == two.path and one.base_id != two.base_id  # the same file name
    os.makedirs(os.path.dirname(one.path))
    with open(one.path, "w") as f:
        json.dump({"hash": one.hash, "base_model_id": one.base_id}, f)
    assert one.finished() and not two.finished()  # computed from one's weights: two recomputes it
    with open(one.path, "w") as f:
        json.dump({"hash": one.hash}, f)  # a file that does not name its base is not trusted
    assert not one.finished()
