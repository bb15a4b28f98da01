"""LoRA runs (TRL's `peft_config`, as `trl-efficient train --use_peft` passes it): resume from a checkpoint equals
the uninterrupted run, with the KL reference being the adapter-disabled model (beta > 0); and the merged adapter
(`merge_and_unload()`) gives the trained PEFT model's logits."""

import os

import pytest
import torch
from helpers import resume_trainer

peft = pytest.importorskip("peft")


def _make(tiny_model_dir, out, tok, max_steps):
    lora = peft.LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.05)
    # beta > 0: KL to the reference, which with PEFT is TRL's model with its adapter disabled
    return resume_trainer(tiny_model_dir, out, tok, max_steps, peft_config=lora, learning_rate=5e-2, beta=0.04)


def _adapter(trainer) -> dict:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items() if "lora_" in k}


def test_lora_resume_matches_uninterrupted_run_and_merges(tiny_model_dir, tiny_tokenizer, tmp_path):
    full = _make(tiny_model_dir, tmp_path / "full", tiny_tokenizer, max_steps=4)
    assert isinstance(full.model, peft.PeftModel) and full.ref_model is None  # adapter-disabled reference
    full.train()
    ckpt = os.path.join(tmp_path, "full", "checkpoint-2")
    assert os.path.exists(os.path.join(ckpt, "adapter_model.safetensors"))
    assert os.path.exists(os.path.join(ckpt, "trl_efficient_state.json"))

    resumed = _make(tiny_model_dir, tmp_path / "resumed", tiny_tokenizer, max_steps=4)
    resumed.train(resume_from_checkpoint=ckpt)
    assert len(resumed.records) == 2
    for a, b in zip(full.records[2:], resumed.records, strict=True):
        assert a["lengths"] == b["lengths"]
        assert a["metadata"] == b["metadata"]
        torch.testing.assert_close(torch.tensor(a["rewards"]), torch.tensor(b["rewards"]), equal_nan=True)
        torch.testing.assert_close(torch.tensor(a["advantages"]), torch.tensor(b["advantages"]))
    full_adapter, resumed_adapter = _adapter(full), _adapter(resumed)
    assert full_adapter and full_adapter.keys() == resumed_adapter.keys()
    for key in full_adapter:
        torch.testing.assert_close(full_adapter[key], resumed_adapter[key], msg=key)
    # the adapter trained: lora_B starts at zero (LoRA's init), and is not zero after 4 steps
    assert any(v.abs().sum() > 0 for k, v in full_adapter.items() if "lora_B" in k)

    # "The merged adapter equals the trained model's outputs": merge_and_unload() folds B @ A * alpha / r into the
    # base weights, so the merged plain model's logits equal the PEFT model's (eval mode: no LoRA dropout)
    model = full.model.eval()
    ids = tiny_tokenizer("What is 6 * 7? The answer is", return_tensors="pt").input_ids
    with torch.no_grad():
        peft_logits = model(input_ids=ids).logits
        with model.disable_adapter():
            base_logits = model(input_ids=ids).logits
        merged = model.merge_and_unload()
        assert not isinstance(merged, peft.PeftModel)
        merged_logits = merged(input_ids=ids).logits
    torch.testing.assert_close(merged_logits, peft_logits, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(base_logits, peft_logits, atol=1e-4)  # the comparison could fail: the adapter matters
