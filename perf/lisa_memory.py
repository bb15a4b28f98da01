"""Memory and step time of LISA (`lisa_activated_layers`, arXiv 2403.17919) against full fine-tuning and LoRA: the
same GRPO run (model, data, seed, rewards, generation) three times, each arm in a fresh process, printed as a table
with the ratios to full fine-tuning.

    python perf/lisa_memory.py                                   # tiny random Qwen2, 8 layers x 256 wide, CPU
    python perf/lisa_memory.py --hidden 1024 --layers 24 --steps 6   # ~0.3B parameters (a GPU, or patience)
    python perf/lisa_memory.py --model smollm2:135m-instruct     # any name `trl-efficient train` resolves
    python perf/lisa_memory.py --smoke                           # seconds: the test's mode (in-process)

Columns, per arm:
- `peak MiB`: the process's peak memory while training: `torch.cuda.max_memory_allocated` on a GPU (reset after the
  model is built), else the peak resident set size of the arm's own process (`ru_maxrss`, which includes Python, torch
  and the libraries, several hundred MiB, so on CPU it only separates the arms on a model that outweighs them);
- `grads+Adam MiB`: the exact bytes of the gradients and the optimizer state at the optimizer step (max over steps),
  counted from the tensors (machine-independent: this is what LISA and LoRA save);
- `trained params`: parameters with a gradient at the last step;
- `s/step`: median seconds of the optimizer steps after the first (`perf/work.py`: `StepTimer`).

LISA trains gamma decoder layers (`--gamma`, default 2 as LMFlow's `lisa_activated_layers`) plus embeddings, head
and final norm; LoRA is PEFT's LoRA (`--lora-r`, on every linear layer of the decoder, TRL's `--use_peft` with
`--lora_target_modules all-linear`). Not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time

ARMS = ("full", "lisa", "lora")


def measure(arm: str, model: str, steps: int, gamma: int, interval: int, lora_r: int, max_len: int) -> dict:
    """Train `steps` + 1 optimizer steps of `arm` in this process and return its numbers."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from work import StepTimer

    from trl_efficient.rewards import correctness_reward
    from trl_efficient.trainer import EfficientGRPOConfig, EfficientGRPOTrainer

    cuda = torch.cuda.is_available()
    qs = [("What is 6 * 7?", "42"), ("What is 2 + 3?", "5"), ("What is 9 - 2?", "7"), ("What is 3 * 3?", "9")]
    data = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": q}] for q, _ in qs * 16], "solution": [a for _, a in qs * 16]}
    )

    def length_reward(completion_ids, **kwargs):  # a signal in every group, whatever the model answers
        return [-len(ids) / max_len for ids in completion_ids]

    class TrainState(TrainerCallback):
        """Bytes of gradients and optimizer state right after each optimizer step (before `zero_grad`)."""

        def __init__(self):
            self.bytes, self.trained = 0, 0

        def on_optimizer_step(self, args, state, control, model=None, optimizer=None, **kwargs):
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            opt = optimizer.optimizer if hasattr(optimizer, "optimizer") else optimizer
            moments = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]
            total = sum(t.numel() * t.element_size() for t in grads + moments)
            self.bytes, self.trained = max(self.bytes, total), sum(g.numel() for g in grads)

    tokenizer = AutoTokenizer.from_pretrained(model)
    with tempfile.TemporaryDirectory() as out:
        args = EfficientGRPOConfig(
            output_dir=out, per_device_train_batch_size=8, num_generations=4, max_completion_length=max_len,
            max_steps=steps + 1, learning_rate=1e-5, beta=0.0, use_cpu=not cuda, bf16=False, report_to="none",
            save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=0, gradient_checkpointing=False,
            generation_kwargs={"sequence_bias": [[[tokenizer.eos_token_id], 2.0]]},
            lisa_activated_layers=gamma if arm == "lisa" else None, lisa_interval_steps=interval,
        )  # fmt: skip
        peft_config = None
        if arm == "lora":
            from peft import LoraConfig

            peft_config = LoraConfig(
                r=lora_r, lora_alpha=2 * lora_r, target_modules="all-linear", task_type="CAUSAL_LM"
            )
        timer, train_state = StepTimer(), TrainState()
        trainer = EfficientGRPOTrainer(
            model=model, reward_funcs=[correctness_reward, length_reward], args=args, train_dataset=data,
            processing_class=tokenizer, peft_config=peft_config, callbacks=[timer, train_state],
        )  # fmt: skip
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        trainer.train()
        peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "arm": arm,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "peak_bytes": peak,
        "train_state_bytes": train_state.bytes,
        "trained_params": train_state.trained,
        "total_params": sum(p.numel() for p in trainer.model.parameters()),
        "s_per_step": statistics.median(timer.durations[1:]) if len(timer.durations) > 1 else timer.durations[0],
    }


def table(rows: list[dict]) -> str:
    full = next(r for r in rows if r["arm"] == "full")
    mib = 2**20
    lines = [
        f"device: {full['device']}; model parameters: {full['total_params']:,}",
        "| arm | peak MiB | grads+Adam MiB | trained params | s/step | peak / full | grads+Adam / full | time / full |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['arm']} | {r['peak_bytes'] / mib:.1f} | {r['train_state_bytes'] / mib:.2f} | "
            f"{r['trained_params']:,} | {r['s_per_step']:.3f} | {r['peak_bytes'] / full['peak_bytes']:.2f} | "
            f"{r['train_state_bytes'] / full['train_state_bytes']:.3f} | {r['s_per_step'] / full['s_per_step']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a model name or path; default: a tiny Qwen2 built here")
    parser.add_argument("--hidden", type=int, default=256, help="width of the tiny model built without --model")
    parser.add_argument("--layers", type=int, default=8, help="decoder layers of the tiny model built without --model")
    parser.add_argument("--steps", type=int, default=4, help="timed optimizer steps (after one warm-up step)")
    parser.add_argument("--gamma", type=int, default=2, help="lisa_activated_layers (LMFlow's default 2)")
    parser.add_argument("--interval", type=int, default=2, help="lisa_interval_steps (small: a draw within the run)")
    parser.add_argument("--lora-r", type=int, default=16, help="LoRA rank (TRL's --lora_r default)")
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--smoke", action="store_true", help="tiny, 1 timed step, all arms in this process")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # one arm, in this process, JSON out
    opts = parser.parse_args(argv)
    from work import bench_tiny_model, run_arm_in_fresh_process

    if opts.smoke:
        opts.hidden, opts.layers, opts.steps, opts.max_completion_length = 16, 4, 1, 8
        opts.gamma = min(opts.gamma, opts.layers)
    if opts.model is None:
        opts.model = bench_tiny_model("trl_efficient_lisa_bench", opts.hidden, opts.layers, num_kv_heads=1)
    else:
        from trl_efficient.api import resolve_model

        opts.model = resolve_model(opts.model)
    settings = (opts.model, opts.steps, opts.gamma, opts.interval, opts.lora_r, opts.max_completion_length)
    if opts.worker:
        print("LISA_BENCH_ROW " + json.dumps(measure(opts.worker, *settings)), flush=True)
        return []
    rows = []
    for arm in opts.arms:
        start = time.perf_counter()
        if opts.smoke:
            rows.append(measure(arm, *settings))
        else:  # a fresh process per arm: its peak memory is its own
            cmd = ["--worker", arm, "--model", opts.model]
            for flag, value in (
                ("--steps", opts.steps),
                ("--gamma", opts.gamma),
                ("--interval", opts.interval),
                ("--lora-r", opts.lora_r),
                ("--max-completion-length", opts.max_completion_length),
            ):
                cmd += [flag, str(value)]  # fmt: skip
            rows.append(run_arm_in_fresh_process(os.path.abspath(__file__), cmd, "LISA_BENCH_ROW", f"arm {arm}"))
        print(f"{arm}: done in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    if "full" in opts.arms:
        print(table(rows))
    else:
        print(json.dumps(rows, indent=1))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"settings": vars(opts), "rows": rows}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
