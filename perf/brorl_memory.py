"""Peak memory and step time of one GRPO step against the rollouts per prompt N (BroRL, arXiv 2510.01180), with and
without `generation_chunk_size`: the same run (model, prompt, seed, rewards) per (N, chunk) arm, each in a fresh
process, printed as a table.

    python perf/brorl_memory.py                                   # tiny random Qwen2, 4 layers x 256, N 8..512, CPU
    python perf/brorl_memory.py --n 8 32 128 512 --chunk 32       # the default grid
    python perf/brorl_memory.py --hidden 1024 --layers 8 --max-completion-length 256   # a GPU-sized run
    python perf/brorl_memory.py --smoke                           # seconds: the test's mode (in-process)

Every arm trains one prompt per optimizer step: N rollouts, `per_device_train_batch_size = min(N, --micro-batch)`
and `gradient_accumulation_steps = N / that` (TRL's own micro-batching of the loss, the same in both arms, so the
arms differ only in generation: one `generate` call over the N rows, or N / C calls of C rows).

Columns, per arm:
- `rows/call`: the most rows one call of TRL's `_generate_single_turn` generated (counted, machine-independent);
- `peak MiB`: `torch.cuda.max_memory_allocated` on a GPU (reset after the model is built), else the peak resident set
  size of the arm's own process (`ru_maxrss`, which includes Python, torch and the libraries: several hundred MiB);
- `over start MiB`: on CPU, the peak minus the resident set size just before training (what the step itself added);
  on a GPU, the peak minus the memory allocated before training;
- `s/step`: median seconds of the optimizer steps after the first (`perf/work.py`: `StepTimer`).
Not a test: the numbers depend on the machine.
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


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(n: int, chunk: int | None, model: str, steps: int, max_len: int, micro: int) -> dict:
    """Train `steps` + 1 optimizer steps with N = `n` rollouts of one prompt in this process; return its numbers."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer
    from work import StepTimer

    from trl_efficient.rewards import correctness_reward
    from trl_efficient.trainer import EfficientGRPOConfig, EfficientGRPOTrainer

    cuda = torch.cuda.is_available()
    qs = [("What is 6 * 7?", "42"), ("What is 2 + 3?", "5"), ("What is 9 - 2?", "7"), ("What is 3 * 3?", "9")]
    data = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": q}] for q, _ in qs * 4], "solution": [a for _, a in qs * 4]}
    )

    def length_reward(completion_ids, **kwargs):  # a signal in every group, whatever the model answers
        return [-len(ids) / max_len for ids in completion_ids]

    class CountRows(GRPOTrainer):
        """Counts the rows of each call of TRL's generation (below `EfficientGRPOTrainer`'s chunking in the MRO)."""

        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            self.rows_per_call.append(len(prompt_ids))
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)

    class Counting(EfficientGRPOTrainer, CountRows):
        pass

    per_device = min(n, micro)
    tokenizer = AutoTokenizer.from_pretrained(model)
    with tempfile.TemporaryDirectory() as out:
        args = EfficientGRPOConfig(
            output_dir=out, per_device_train_batch_size=per_device, gradient_accumulation_steps=n // per_device,
            num_generations=n, max_completion_length=max_len, max_steps=steps + 1, learning_rate=1e-5, beta=0.0,
            use_cpu=not cuda, bf16=False, report_to="none", save_strategy="no", logging_strategy="no",
            disable_tqdm=True, seed=0, gradient_checkpointing=False, generation_chunk_size=chunk,
            generation_kwargs={"sequence_bias": [[[tokenizer.eos_token_id], -100.0]]},  # full-length completions
        )  # fmt: skip
        timer = StepTimer()
        trainer = Counting(
            model=model, reward_funcs=[correctness_reward, length_reward], args=args, train_dataset=data,
            processing_class=tokenizer, callbacks=[timer],
        )  # fmt: skip
        trainer.rows_per_call = []
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            start = torch.cuda.memory_allocated()
        else:
            start = _rss_bytes()
        trainer.train()
        peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "n": n,
        "chunk": chunk,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "rows_per_call": max(trainer.rows_per_call),
        "generate_calls": len(trainer.rows_per_call),
        "micro_batch": per_device,
        "peak_bytes": peak,
        "over_start_bytes": peak - start,
        "params": sum(p.numel() for p in trainer.model.parameters()),
        "s_per_step": statistics.median(timer.durations[1:]) if len(timer.durations) > 1 else timer.durations[0],
    }


def table(rows: list[dict]) -> str:
    mib = 2**20
    lines = [
        f"device: {rows[0]['device']}; model parameters: {rows[0]['params']:,}; one prompt per step",
        "| N | chunk | rows/call | micro-batch | peak MiB | over start MiB | s/step |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['chunk'] or '-'} | {r['rows_per_call']} | {r['micro_batch']} | "
            f"{r['peak_bytes'] / mib:.1f} | {r['over_start_bytes'] / mib:.1f} | {r['s_per_step']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a model name or path; default: a tiny Qwen2 built here")
    parser.add_argument("--hidden", type=int, default=256, help="width of the tiny model built without --model")
    parser.add_argument("--layers", type=int, default=4, help="decoder layers of the tiny model built without --model")
    parser.add_argument("--n", type=int, nargs="+", default=[8, 32, 128, 512], help="rollouts per prompt N")
    parser.add_argument("--chunk", type=int, default=32, help="generation_chunk_size of the chunked arms")
    parser.add_argument("--micro-batch", type=int, default=32, help="per_device_train_batch_size cap (TRL's)")
    parser.add_argument("--steps", type=int, default=1, help="timed optimizer steps (after one warm-up step)")
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--smoke", action="store_true", help="tiny, N 8 and 16, chunk 4, all arms in this process")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # "N,chunk": one arm, JSON out
    opts = parser.parse_args(argv)
    from work import bench_tiny_model, run_arm_in_fresh_process

    if opts.smoke:
        opts.hidden, opts.layers, opts.steps, opts.max_completion_length = 16, 2, 1, 6
        opts.n, opts.chunk, opts.micro_batch = [8, 16], 4, 8
    if opts.model is None:
        opts.model = bench_tiny_model("trl_efficient_brorl_bench", opts.hidden, opts.layers)
    else:
        from trl_efficient.api import resolve_model

        opts.model = resolve_model(opts.model)
    settings = (opts.model, opts.steps, opts.max_completion_length, opts.micro_batch)
    if opts.worker:
        n, chunk = opts.worker.split(",")
        print("BRORL_BENCH_ROW " + json.dumps(measure(int(n), int(chunk) or None, *settings)), flush=True)
        return []
    arms = [(n, chunk) for n in opts.n for chunk in (None, opts.chunk) if chunk is None or chunk < n]
    rows = []
    for n, chunk in arms:
        begin = time.perf_counter()
        if opts.smoke:
            rows.append(measure(n, chunk, *settings))
        else:  # a fresh process per arm: its peak memory is its own
            cmd = ["--worker", f"{n},{chunk or 0}", "--model", opts.model, "--steps", str(opts.steps),
                   "--max-completion-length", str(opts.max_completion_length),
                   "--micro-batch", str(opts.micro_batch)]  # fmt: skip
            label = f"arm N={n} chunk={chunk}"
            rows.append(run_arm_in_fresh_process(os.path.abspath(__file__), cmd, "BRORL_BENCH_ROW", label))
        print(f"N={n} chunk={chunk}: done in {time.perf_counter() - begin:.0f} s", file=sys.stderr, flush=True)
    print(table(rows))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"settings": vars(opts), "rows": rows}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
