"""GPU check for trl-efficient: a few minutes per check on a machine with one or more CUDA GPUs (docs/gpu-check.md).

    bash scripts/gpu_check.sh                     # default: a tiny random Qwen2 built offline, no download
    MODEL=Qwen/Qwen2.5-0.5B-Instruct bash scripts/gpu_check.sh
    bash scripts/gpu_check.sh --only bf16-train hbpo-budgets

Each check prints one line `PASS|FAIL|SKIP <name>: <reason>`, then a count; the exit status is 1 when a check failed.
Every check runs in its own subprocess (a worker mode of this file) under its own timeout; its full log is kept in
the work directory (printed at the top). With no CUDA device every check is a SKIP and the exit status is 0.

Checks:
- `bf16-train`: `trl-efficient train` of the packaged smoke config (Kimi k1.5 recipe) with transformers generation,
  bf16, on cuda:0, 3 steps on the synthetic testbed data: finite losses, model on CUDA, checkpoint written.
- `hbpo-budgets`: HBPO with 2 budget subgroups (prefill) on cuda:0, transformers generation: each row's budget and
  its subgroup's prompt, rewards and advantages present.
- `ddp-1-vs-2`: >= 2 GPUs: tests/multiprocess/run_hbpo_trainer.py (scripted rollouts) under torchrun with 1 and 2
  processes, nccl on CUDA: same gathered rewards, lengths, budgets, prompts and advantages.
- `zero3`: deepspeed and >= 2 GPUs: tests/multiprocess/run_group_trainer.py under `accelerate launch` with an
  inline ZeRO-3 config vs one plain process: same lengths and advantages.
- `vllm-colocate`: vllm: `use_vllm=True, vllm_mode="colocate"` with TRL's real weight sync; after every sync vLLM's
  weights equal the trainer's, and TRL's logged sampling log-prob difference stays small after updates.
- `vllm-server`: vllm: starts `trl vllm-serve` in the background, waits for /health, trains 2 steps with
  `vllm_mode="server"`, stops the server. With >= 2 GPUs the server gets GPU 0 and the trainer GPU 1, and the NCCL
  weight sync is real; with 1 GPU (NCCL cannot put both ends on one device) the sync is skipped and the line says so.
- `cost`: `perf/trainer_overhead.py --device cuda` for grpo, dler and hbpo on cuda:0 (transformers generation): the
  measured step-time ratio of each with its 95% interval beside the ratio its work counters project
  (`CostModel`), so the projection can be checked against a GPU; with `MODEL=<a local 7B directory>` it is measured
  at the projection's own scale. It reports and does not judge: PASS when all three rows ran.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
RESULT_PREFIX = "GPU_CHECK_RESULT "
DEFAULT_MODEL = "tiny:qwen2"  # hidden 128, 2 heads (head_dim 64, which vLLM accepts), built offline and cached
BUDGETS = [16, 32]
QUESTIONS = [("What is 6 * 7?", "42"), ("What is 2 + 3?", "5"), ("What is 9 - 2?", "7"), ("What is 3 * 3?", "9")]
CHECKS = ["bf16-train", "hbpo-budgets", "ddp-1-vs-2", "zero3", "vllm-colocate", "vllm-server", "cost"]
COST_RECIPES = ("grpo", "dler", "hbpo")
NEEDS = (
    "Needs beyond torch: this package (`pip install -e .` in this checkout, or its wheel; it brings trl 1.16, "
    "transformers, accelerate, datasets). Optional: deepspeed (zero3 check, >= 2 GPUs), vllm<=0.31 (vllm-colocate, "
    "vllm-server). ddp-1-vs-2 and zero3 also need this checkout's tests/ directory."
)


# ---------------------------------------------------------------------------------------------------- helpers
def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _emit(**result) -> None:
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def _finite(values) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dataset(n: int = 32):
    from datasets import Dataset

    rows = [QUESTIONS[i % len(QUESTIONS)] for i in range(n)]
    return Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": q}] for q, _ in rows], "solution": [a for _, a in rows]}
    )


def _distinct_token_share(completion_ids, **kwargs):
    """A reward that varies within every group, so that the policy moves even when every rollout is truncated."""
    return [len(set(ids)) / max(len(ids), 1) for ids in completion_ids]


def _learning_rate(model: str) -> float:
    return 1e-3 if model.startswith("tiny:") else 1e-5


def _resolve(model: str) -> str:
    from trl_efficient.api import resolve_model

    return resolve_model(model)  # tiny: / testbed: registered first


def _hbpo_trainer(model_dir: str, out_dir: str, budgets=BUDGETS, **overrides):
    """An HBPO trainer (budget prefill subgroups) that records, per generation batch, the budgets and the prompts."""
    from transformers import AutoTokenizer

    from trl_efficient.methods.hbpo import HBPOTrainer
    from trl_efficient.recipes.budget import build_hbpo_reward
    from trl_efficient.rewards import get_correctness_reward
    from trl_efficient.trainer import EfficientGRPOConfig

    class Recording(HBPOTrainer):
        def __init__(self, *args, **kwargs) -> None:
            self.records = []
            super().__init__(
                *args, group_stages=[lambda batch, trainer: self.records.append(dict(batch.metadata))], **kwargs
            )

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            self.records[-1]["prompts"] = [
                self.processing_class.decode([t for t, m in zip(ids, mask) if m])
                for ids, mask in zip(out["prompt_ids"].tolist(), out["prompt_mask"].tolist())
            ]
            self.records[-1]["advantages"] = out["advantages"].tolist()
            return out

    settings = dict(
        output_dir=out_dir,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=48,
        max_steps=2,
        learning_rate=1e-6,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        bf16=True,
        gradient_checkpointing=False,
        seed=0,
        beta=0.0,
        rollout_plan="budget",
        budgets=list(budgets),
        budget_placement="prefill",
        advantage_estimator="hbpo",
        reward_weights=[1.0, 0.0, 1.0],
    )
    settings.update(overrides)
    args = EfficientGRPOConfig(**settings)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rewards = [
        build_hbpo_reward(args, tokenizer),
        get_correctness_reward(require_think_close=True),
        _distinct_token_share,
    ]
    return Recording(
        model=model_dir, args=args, train_dataset=_dataset(), processing_class=tokenizer, reward_funcs=rewards
    )


def _check_subgroups(trainer, budgets=BUDGETS, steps: int = 2) -> None:
    from trl_efficient.prompts import HBPO_TEMPLATE

    g, k = trainer.args.num_generations, len(budgets)
    pattern = [b for b in budgets for _ in range(g // k)]
    assert len(trainer.records) == steps, f"{len(trainer.records)} generation batches, expected {steps}"
    for rec in trainer.records:
        assert rec["budget"] == pattern * (len(rec["budget"]) // g), f"row budgets {rec['budget']}"
        for prompt, b in zip(rec["prompts"], rec["budget"], strict=True):
            statement = HBPO_TEMPLATE.format(budget=b)
            assert prompt.rstrip().endswith(statement), f"budget {b} row's prompt ends {prompt[-80:]!r}"
        assert _finite(rec["advantages"]), f"advantages {rec['advantages']}"


# ---------------------------------------------------------------------------------------------------- workers
def worker_train(model: str, out_dir: str) -> None:
    import torch

    from trl_efficient.api.configs import packaged_config
    from trl_efficient.api.training import train_main

    argv = [
        "--config", packaged_config("smoke"),
        "--model_name_or_path", model,
        "--dataset_name", "testbed",
        "--eval_dataset_name", "testbed",
        "--dataset_limit", "64",
        "--eval_before_after", "false",
        "--output_dir", out_dir,
        "--max_steps", "3",
        "--per_device_train_batch_size", "8",
        "--num_generations", "4",
        "--max_completion_length", "32",
        "--learning_rate", str(_learning_rate(model)),
        "--logging_steps", "1",
        "--save_strategy", "steps",
        "--save_steps", "3",
        "--use_cpu", "false",
        "--bf16", "true",
        "--use_vllm", "false",
    ]  # fmt: skip
    train_main(argv)
    checkpoint = os.path.join(out_dir, "checkpoint-3")
    assert os.path.isdir(checkpoint), f"no {checkpoint}"
    weights = [f for f in os.listdir(checkpoint) if f.endswith(".safetensors")]
    assert weights, f"no *.safetensors in {checkpoint}"
    with open(os.path.join(checkpoint, "trainer_state.json")) as f:
        history = json.load(f)["log_history"]
    losses = [e["loss"] for e in history if "loss" in e]
    assert len(losses) == 3 and _finite(losses), f"losses {losses}"
    peak = torch.cuda.max_memory_allocated()
    assert peak > 0, "nothing was allocated on CUDA"
    _emit(reason=f"3 bf16 steps on {torch.cuda.get_device_name(0)}, losses {[round(x, 4) for x in losses]}, "
          f"peak CUDA memory {peak / 2**20:.0f} MiB, {os.path.basename(checkpoint)}/{weights[0]} written")  # fmt: skip


def worker_hbpo(model: str, out_dir: str) -> None:
    import torch

    trainer = _hbpo_trainer(_resolve(model), out_dir, learning_rate=_learning_rate(model))
    device = next(trainer.model.parameters()).device
    assert device.type == "cuda", f"policy on {device}"
    trainer.train()
    _check_subgroups(trainer)
    logged = {k for e in trainer.state.log_history for k in e}
    for b in BUDGETS:
        assert f"trl_efficient/budget_{b}/mean_length" in logged, f"no trl_efficient/budget_{b}/mean_length"
    _emit(reason=f"2 steps on {torch.cuda.get_device_name(0)}: budgets {BUDGETS} x 2 rows per group, each row's "
          "prompt ends with its budget statement, per-budget metrics logged")  # fmt: skip


def worker_harness(script: str, argv: list[str]) -> None:
    """Run a tests/multiprocess harness script on CUDA: its `tiny_config` gets `use_cpu=False, ddp_backend="nccl"`
    (the scripts force gloo for DeepSpeed on CPU, docs/testing.md §6); everything else is the script's own."""
    import runpy

    sys.path.insert(0, TESTS)
    import helpers

    cpu_config = helpers.tiny_config

    def cuda_config(output_dir, **overrides):
        return cpu_config(output_dir, **{**overrides, "use_cpu": False, "ddp_backend": "nccl"})

    helpers.tiny_config = cuda_config
    sys.argv = [script, *argv]
    runpy.run_path(script, run_name="__main__")


def _shared_weights_equal(policy, vllm_model) -> tuple[int, int]:
    """(number of tensors compared, number that differ) between the trainer's parameters and vLLM's parameters of
    the same name, cast to vLLM's dtype (a vocabulary padded by vLLM is compared on the trainer's rows)."""
    import torch

    mine = dict(policy.named_parameters())
    compared = differ = 0
    for name, theirs in vllm_model.named_parameters():
        ours = mine.get(name)
        if ours is None or ours.dim() != theirs.dim() or ours.shape[1:] != theirs.shape[1:]:
            continue
        if theirs.shape[0] < ours.shape[0]:
            continue
        compared += 1
        differ += not torch.equal(theirs[: ours.shape[0]], ours.detach().to(theirs.device, theirs.dtype))
    return compared, differ


def worker_colocate(model: str, out_dir: str) -> None:
    import torch
    from trl.generation import vllm_generation

    syncs = []
    real_sync = vllm_generation.VLLMGeneration.sync_weights

    def checked_sync(self):
        real_sync(self)
        vllm_model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        syncs.append(_shared_weights_equal(self.model, vllm_model))

    vllm_generation.VLLMGeneration.sync_weights = checked_sync
    steps = 3
    trainer = _hbpo_trainer(
        _resolve(model),
        out_dir,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.3,
        vllm_max_model_length=1024,
        max_steps=steps,
        learning_rate=_learning_rate(model),
    )
    initial = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    _check_subgroups(trainer, steps=steps)
    assert len(syncs) == steps, f"TRL's sync_weights ran {len(syncs)} times in {steps} steps"
    for i, (compared, differ) in enumerate(syncs):
        assert compared > 0, "no parameter of the same name in vLLM and the trainer to compare"
        assert differ == 0, f"after sync {i + 1}, {differ}/{compared} shared tensors differ between vLLM and trainer"
    moved = sum(not torch.equal(p.detach(), initial[n]) for n, p in trainer.model.named_parameters())
    assert moved > 0, "the policy did not change: the sync was not exercised with new weights"
    diffs = [
        e["sampling/sampling_logp_difference/mean"]
        for e in trainer.state.log_history
        if "sampling/sampling_logp_difference/mean" in e
    ]
    # bf16 on both sides; 0.05 is ~5x the typical bf16 trainer-vs-vLLM mismatch; a missed sync after one update of
    # the tiny model gives ~0.2 (measured on CPU, docs/vllm-colocate.md)
    assert len(diffs) == steps and max(diffs) < 0.05, f"TRL sampling_logp_difference/mean per step {diffs}"
    _emit(reason=f"{steps} steps, {len(syncs)} real syncs, vLLM == trainer on {syncs[-1][0]} shared tensors after "
          f"each, {moved} tensors updated, sampling logp diff/step {[round(d, 4) for d in diffs]}")  # fmt: skip


def worker_server(model: str, out_dir: str, base_url: str, real_sync: str) -> None:
    from trl.generation import vllm_client, vllm_generation

    if real_sync != "1":  # one GPU: NCCL cannot join two ranks on the same device
        vllm_client.VLLMClient.init_communicator = lambda self, *a, **k: None
        vllm_generation.VLLMGeneration.sync_weights = lambda self: None
    requests_seen = []
    real_generate = vllm_client.VLLMClient.generate

    def spy_generate(self, prompts, *args, **kwargs):
        out = real_generate(self, prompts, *args, **kwargs)
        requests_seen.append((len(prompts), kwargs.get("n"), len(out["completion_ids"])))
        return out

    vllm_client.VLLMClient.generate = spy_generate
    trainer = _hbpo_trainer(
        _resolve(model),
        out_dir,
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=base_url,
        vllm_server_timeout=120,
        learning_rate=_learning_rate(model),
    )
    trainer.train()
    _check_subgroups(trainer)
    # 8 rows = 2 groups x 2 budget subgroups: 4 distinct prompts, n = G // K = 2 each
    assert requests_seen == [(4, 2, 8)] * 2, f"server requests (prompts, n, completions) {requests_seen}"
    diffs = [
        e["sampling/sampling_logp_difference/mean"]
        for e in trainer.state.log_history
        if "sampling/sampling_logp_difference/mean" in e
    ]
    sync = "real NCCL weight sync" if real_sync == "1" else "weight sync skipped (1 GPU)"
    if real_sync == "1":
        assert max(diffs) < 0.05, f"TRL sampling_logp_difference/mean per step {diffs}"
    _emit(reason=f"2 steps against trl vllm-serve, 4 prompts x n=2 per request, {sync}, "
          f"sampling logp diff/step {[round(d, 4) for d in diffs]}")  # fmt: skip


WORKERS = {"train": worker_train, "hbpo": worker_hbpo, "colocate": worker_colocate, "server": worker_server}


# ---------------------------------------------------------------------------------------------------- driver
class Check:
    def __init__(self, work: str, model: str, timeout: int) -> None:
        self.work, self.model, self.timeout = work, model, timeout

    def run(self, name: str, cmd: list[str], env: dict | None = None, timeout: int | None = None) -> tuple[bool, str]:
        """Run `cmd` (a worker, or a script such as perf/trainer_overhead.py) under a timeout, keep its log; (ok,
        reason) from its result line or its error."""
        log_path = os.path.join(self.work, f"{name}.log")
        env = {**os.environ, **(env or {})}
        timeout = timeout or self.timeout
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env, start_new_session=True)
            try:
                stdout, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                return False, f"timed out after {timeout} s (log: {log_path})"
            log.write(stdout)
        results = [line[len(RESULT_PREFIX) :] for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
        if proc.returncode == 0 and results:
            return True, json.loads(results[-1])["reason"]
        return False, f"exit {proc.returncode}: {_last_error(log_path)} (log: {log_path})"

    def worker(self, name: str, mode: str, *args: str, env: dict | None = None) -> tuple[bool, str]:
        out = os.path.join(self.work, name)
        return self.run(
            name, [sys.executable, os.path.abspath(__file__), "--worker", mode, self.model, out, *args], env
        )


def _last_error(log_path: str) -> str:
    with open(log_path, errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error" in line or "assert" in line.lower():
            return line[:300]
    return lines[-1][:300] if lines else "no output"


def check_ddp(c: Check, n_gpus: int) -> tuple[str, str]:
    script = os.path.join(TESTS, "multiprocess", "run_hbpo_trainer.py")
    if n_gpus < 2:
        return "SKIP", f"needs >= 2 GPUs, found {n_gpus}"
    if not os.path.exists(script):
        return "SKIP", f"needs this checkout's {os.path.relpath(script, ROOT)}"
    model_dir = _tiny_16(c.work)
    runs = {}
    for nproc in (1, 2):
        out = os.path.join(c.work, f"ddp-{nproc}")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               os.path.abspath(__file__), "--harness", script, model_dir, out]  # fmt: skip
        ok, reason = c.run(f"ddp-{nproc}", cmd, env={"CUDA_VISIBLE_DEVICES": "0,1"})
        if not os.path.exists(os.path.join(out, f"rank{nproc - 1}.json")):
            return "FAIL", f"{nproc} process(es): {reason}"
        runs[nproc] = [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in range(nproc)]
    (single,), (r0, r1) = runs[1], runs[2]
    for step, rec in enumerate(single["records"]):
        a, b = r0["records"][step], r1["records"][step]
        for key in ("lengths", "metadata"):
            if not a[key] == b[key] == rec[key]:
                return "FAIL", f"step {step}: {key} differ between 1 and 2 processes"
        if not _close(a["rewards"], rec["rewards"], 1e-6):
            return "FAIL", f"step {step}: gathered rewards differ"
        if a["prompts_decoded"] + b["prompts_decoded"] != rec["prompts_decoded"]:
            return "FAIL", f"step {step}: prompts differ"
        if not _close(a["advantages"] + b["advantages"], rec["advantages"], 1e-5):
            return "FAIL", f"step {step}: advantages differ beyond 1e-5"
    return (
        "PASS",
        f"HBPO harness, {len(single['records'])} steps, nccl on 2 GPUs == 1 GPU (rewards 1e-6, advantages 1e-5)",
    )


def _close(xs, ys, tol) -> bool:
    flat = lambda v: [z for row in v for z in (row if isinstance(row, list) else [row])]  # noqa: E731
    xs, ys = flat(xs), flat(ys)
    return len(xs) == len(ys) and all(
        (x is None and y is None) or (x is not None and y is not None and (x == y or abs(x - y) <= tol))
        for x, y in zip(xs, ys)
    )


def check_zero3(c: Check, n_gpus: int) -> tuple[str, str]:
    script = os.path.join(TESTS, "multiprocess", "run_group_trainer.py")
    if not _has("deepspeed"):
        return "SKIP", "deepspeed is not installed (pip install deepspeed)"
    if n_gpus < 2:
        return "SKIP", f"needs >= 2 GPUs, found {n_gpus}"
    if not os.path.exists(script):
        return "SKIP", f"needs this checkout's {os.path.relpath(script, ROOT)}"
    model_dir = _tiny_16(c.work)
    config = os.path.join(c.work, "zero3.yaml")
    with open(config, "w") as f:
        f.write(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n"
            "  zero3_init_flag: true\nmixed_precision: 'no'\nnum_machines: 1\nnum_processes: 2\n"
        )
    estimator = "group_center_batch_whiten"
    one, ds = os.path.join(c.work, "zero3-1"), os.path.join(c.work, "zero3-ds")
    launches = {
        one: [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"],
        ds: [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config],
    }
    for out, launcher in launches.items():
        os.makedirs(out, exist_ok=True)
        cmd = [*launcher, os.path.abspath(__file__), "--harness", script, model_dir, out, estimator]
        ok, reason = c.run(os.path.basename(out), cmd, env={"CUDA_VISIBLE_DEVICES": "0,1"})
        if not os.path.exists(os.path.join(out, "rank0.json")):
            return "FAIL", f"{os.path.basename(out)}: {reason}"
    single = json.load(open(os.path.join(one, "rank0.json")))
    r0, r1 = (json.load(open(os.path.join(ds, f"rank{r}.json"))) for r in range(2))
    for step, rec in enumerate(single["records"]):
        a, b = r0["records"][step], r1["records"][step]
        if a["lengths"] != rec["lengths"]:
            return "FAIL", f"step {step}: lengths differ between ZeRO-3 and one process"
        if not _close(a["advantages"] + b["advantages"], rec["advantages"], 1e-5):
            return "FAIL", f"step {step}: advantages differ beyond 1e-5"
    return "PASS", f"accelerate + DeepSpeed ZeRO-3 on 2 GPUs, {len(single['records'])} steps == 1 process"


def check_server(c: Check, n_gpus: int) -> tuple[str, str]:
    import requests

    model_dir = _resolve(c.model)
    port = _free_port()
    log_path = os.path.join(c.work, "vllm-serve.log")
    trl = shutil.which("trl")
    launcher = [trl] if trl else [sys.executable, "-c", "import sys; from trl.cli import main; sys.exit(main())"]
    cmd = [*launcher, "vllm-serve", "--model", model_dir, "--host", "127.0.0.1", "--port", str(port),
           "--gpu_memory_utilization", "0.3", "--max_model_len", "1024", "--enforce_eager", "true"]  # fmt: skip
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    with open(log_path, "w") as log:
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + min(c.timeout, 400)
        while True:
            try:
                if requests.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if server.poll() is not None:
                return (
                    "FAIL",
                    f"trl vllm-serve exited with {server.returncode}: {_last_error(log_path)} (log: {log_path})",
                )
            if time.time() > deadline:
                return "FAIL", f"trl vllm-serve not healthy after {min(c.timeout, 400)} s (log: {log_path})"
            time.sleep(3)
        real_sync = n_gpus >= 2
        ok, reason = c.worker("vllm-server", "server", url, "1" if real_sync else "0",
                              env={"CUDA_VISIBLE_DEVICES": "1" if real_sync else "0"})  # fmt: skip
        return ("PASS" if ok else "FAIL"), reason
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def check_cost(c: Check) -> tuple[str, str]:
    """The measured ratio of `COST_RECIPES` on cuda:0 vs their projected GPU ratio (perf/trainer_overhead.py)."""
    script = os.path.join(ROOT, "perf", "trainer_overhead.py")
    if not os.path.exists(script):
        return "SKIP", f"needs this checkout's {os.path.relpath(script, ROOT)}"
    out = os.path.join(c.work, "cost.json")
    cmd = [sys.executable, script, "--device", "cuda", "--model", c.model, "--recipe", ",".join(COST_RECIPES),
           "--min-rounds", "3", "--max-rounds", "6", "--json", out]  # fmt: skip
    if not c.model.startswith(("tiny:", "testbed:")):
        cmd.append("--no-lockstep")  # a real model: one side's run at a time, not both resident on the GPU
    proc_ok, reason = c.run("cost", cmd, env={"CUDA_VISIBLE_DEVICES": "0"})
    if not os.path.exists(out):
        return "FAIL", reason
    with open(out) as f:
        rows = json.load(f)["rows"]
    parts = []
    for row in rows:
        if row["status"] != "ok":
            parts.append(f"{row['recipe']} failed: {row['error']}")
            continue
        parts.append(f"{row['recipe']} measured {row['ratio']:.2f} [{row['ratio_low']:.2f}, {row['ratio_high']:.2f}] "
                     f"vs projected {row['projected']:.2f}")  # fmt: skip
    ok = len(rows) == len(COST_RECIPES) and all(row["status"] == "ok" for row in rows)
    return ("PASS" if ok else "FAIL"), "; ".join(parts) + f" (details: {out})"


def _tiny_16(work: str) -> str:
    """The multiprocess harness's model (tests/conftest.py): hidden 16, 4 heads, built offline."""
    from trl_efficient.testing.tiny import save_tiny_model

    return save_tiny_model(os.path.join(work, "tiny-qwen2-16"), hidden_size=16, num_heads=4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=CHECKS, help="run only these checks")
    parser.add_argument(
        "--timeout",
        type=int,
        default=int(os.environ.get("CHECK_TIMEOUT", "600")),
        help="seconds per check (default 600, env CHECK_TIMEOUT)",
    )
    parser.add_argument(
        "--workdir",
        default=os.environ.get("GPU_CHECK_DIR"),
        help="where logs and outputs go (default: a new temporary directory)",
    )
    args = parser.parse_args(argv)
    model = os.environ.get("MODEL") or DEFAULT_MODEL

    print("trl-efficient GPU check")
    print(NEEDS)
    try:
        import torch
    except ImportError:
        print("FAIL setup: torch is not installed (install torch for your CUDA, then `pip install -e .`)")
        print("GPU check: 0 passed, 1 failed, 0 skipped")
        return 1
    n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(n_gpus))
    print(f"torch {torch.__version__}; CUDA GPUs: {n_gpus}{f' ({names})' if names else ''}; "
          f"deepspeed: {'yes' if _has('deepspeed') else 'no'}; vllm: {'yes' if _has('vllm') else 'no'}")  # fmt: skip
    try:
        if n_gpus:  # without a GPU every check is a SKIP: spare the (slow) import
            import trl_efficient  # noqa: F401
        elif not _has("trl_efficient"):
            raise ImportError("no module named 'trl_efficient'")
    except ImportError as err:
        print(f"FAIL setup: cannot import trl_efficient ({err}): run `pip install -e .` in this checkout")
        print("GPU check: 0 passed, 1 failed, 0 skipped")
        return 1
    print(f"model: {model}{' (built offline, no download)' if model.startswith('tiny:') else ''}")
    work = ""
    if n_gpus:
        work = args.workdir or tempfile.mkdtemp(prefix="trl_efficient_gpu_check_")
        os.makedirs(work, exist_ok=True)
        print(f"logs: {work}", flush=True)

    c = Check(work, model, args.timeout)
    selected = args.only or CHECKS
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for name in CHECKS:
        if name not in selected:
            continue
        if n_gpus == 0:
            status, reason = "SKIP", "no CUDA device (torch.cuda.is_available() is False)"
        elif name.startswith("vllm") and not _has("vllm"):
            status, reason = "SKIP", "vllm is not installed (pip install 'vllm<=0.31', TRL 1.16's range)"
        else:
            try:
                status, reason = _dispatch(c, name, n_gpus)
            except Exception as err:  # a check's own setup failed: report it as that check's failure
                status, reason = "FAIL", f"{type(err).__name__}: {err}"
        counts[status] += 1
        print(f"{status} {name}: {reason}", flush=True)
    print(f"GPU check: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    return 1 if counts["FAIL"] else 0


def _dispatch(c: Check, name: str, n_gpus: int) -> tuple[str, str]:
    single = {"CUDA_VISIBLE_DEVICES": "0"}
    if name == "bf16-train":
        ok, reason = c.worker(name, "train", env=single)
    elif name == "hbpo-budgets":
        ok, reason = c.worker(name, "hbpo", env=single)
    elif name == "vllm-colocate":
        ok, reason = c.worker(name, "colocate", env=single)
    elif name == "ddp-1-vs-2":
        return check_ddp(c, n_gpus)
    elif name == "zero3":
        return check_zero3(c, n_gpus)
    elif name == "cost":
        return check_cost(c)
    else:
        return check_server(c, n_gpus)
    return ("PASS" if ok else "FAIL"), reason


if __name__ == "__main__":
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        WORKERS[sys.argv[2]](*sys.argv[3:])
    elif len(sys.argv) > 2 and sys.argv[1] == "--harness":
        worker_harness(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(main())
