"""Resume equivalence: stop at step k, resume from the checkpoint, and the stateful components and the next steps'
rewards equal those of an uninterrupted run (real transformers generation, sampled)."""

import json
import os

import torch
from helpers import resume_trainer


def _make(tiny_model_dir, out, tok, max_steps):
    return resume_trainer(tiny_model_dir, out, tok, max_steps)


def test_resume_matches_uninterrupted_run(tiny_model_dir, tiny_tokenizer, tmp_path):
    full = _make(tiny_model_dir, tmp_path / "full", tiny_tokenizer, max_steps=4)
    full.train()
    ckpt = os.path.join(tmp_path, "full", "checkpoint-2")
    with open(os.path.join(ckpt, "trl_efficient_state.json")) as f:
        saved = json.load(f)
    assert saved["prompt_history"]["attempts"]

    resumed = _make(tiny_model_dir, tmp_path / "resumed", tiny_tokenizer, max_steps=4)
    resumed.train(resume_from_checkpoint=ckpt)
    # the resumed trainer restored the step-2 state before its first new batch, then continued identically
    assert len(resumed.records) == 2
    for a, b in zip(full.records[2:], resumed.records, strict=True):
        assert a["lengths"] == b["lengths"]
        assert a["metadata"] == b["metadata"]  # same target lengths (a pure function of seed and example)
        torch.testing.assert_close(torch.tensor(a["rewards"]), torch.tensor(b["rewards"]), equal_nan=True)
        torch.testing.assert_close(torch.tensor(a["advantages"]), torch.tensor(b["advantages"]))
    assert (
        full.stateful_components["prompt_history"].state_dict()
        == resumed.stateful_components["prompt_history"].state_dict()
    )


def test_resume_without_state_file_warns_and_starts_fresh(tiny_model_dir, tiny_tokenizer, tmp_path, caplog):
    full = _make(tiny_model_dir, tmp_path / "full", tiny_tokenizer, max_steps=2)
    full.train()
    ckpt = os.path.join(tmp_path, "full", "checkpoint-2")
    os.remove(os.path.join(ckpt, "trl_efficient_state.json"))
    resumed = _make(tiny_model_dir, tmp_path / "resumed", tiny_tokenizer, max_steps=3)
    with caplog.at_level("WARNING"):
        resumed.train(resume_from_checkpoint=ckpt)
    assert "no trl_efficient state" in caplog.text
