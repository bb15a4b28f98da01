"""Fixtures of the command-line and library-API tests."""

import shutil

import pytest


@pytest.fixture
def offline_run(tiny_model_dir, tmp_path, monkeypatch):
    """A trained run's directory (the tiny model and its summary) with the Hub offline and any request a failure:
    what `push` must refuse in one line before it calls the Hub, by the command or the API."""
    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run)
    (run / "trl_efficient_summary.json").write_text('{"recipe": "grpo", "model": "Qwen/Qwen2.5-0.5B-Instruct"}')
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("huggingface_hub.HfApi.create_repo", lambda *a, **k: pytest.fail("no request offline"))
    return run
