"""Budget forcing on the testbed: does the number of thinking tokens follow the budget?

    nice -n 10 python perf/testbed/budget_forcing.py [--budgets 16 32 64 ...] [--num-eval 128] [--budgetthinker]
        [--base-model testbed:v2] [--max-new-tokens 384]

For every budget B, one sample per held-out testbed task (`--base-model`, by default the comparison's over-thinking
base model `testbed:v2`, cached under ~/.cache/trl_efficient/overthinking; temperature 0.6, top-p 0.95, the comparison's
cap of 384 new tokens, seed 0) under s1 budget forcing
`force:B` (`trl_efficient.trainer.budget_forcing`, the same code `trl-efficient eval --modes force:B` and training
with `budget_forcing="force:B"` run), measuring the mean thinking tokens (`LengthMeter("tokens", "thinking")`: up
to and including `</think>`, so a forced completion counts B + |tok("</think>")|), the share of forced completions
and the accuracy. The unforced base model is the reference (dashed lines).

With `--budgetthinker` it also trains BudgetThinker (recipe `budgetthinker`, testbed scale, `--bt-steps` GRPO steps
from the same base model; a few minutes on two CPU cores) and measures it under `budgetthinker:B` (budget in the prompt
plus forced control tokens), next to its starting point: the base model with the control tokens added (fresh
embeddings, as the trainer adds them) under the same `budgetthinker:B` prompts and forcing, so that what the
prompt and the forced tokens do to an untrained model is not read as an effect of training. Writes
`results/budget_forcing.{json,md,png}`: budget on x, measured thinking tokens on y with the y = x line, accuracy on
the second panel.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time

os.environ["HF_HUB_OFFLINE"] = "1"  # the testbed never touches the network
if platform.machine() in ("x86_64", "AMD64"):  # the CPU kernels of the committed runs (docs/testbed.md, "One base")
    os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BUDGETS = [16, 32, 48, 64, 96, 128, 192, 256]  # testbed:v2 thinks ~150 tokens unforced (world v1's: ~84)


def measure(backend, tokenizer, rows, prompts, forcing, max_new_tokens: int, seed: int = 0) -> dict:
    """Mean thinking tokens, mean generated tokens, forced share and accuracy of one sample per prompt."""
    from trl_efficient.core.lengths import LengthMeter
    from trl_efficient.rewards import is_correct

    meter = LengthMeter("tokens", "thinking", tokenizer)
    gens = backend.generate(prompts, 1, max_new_tokens, 0.6, 0.95, seed, "budget forcing", forcing=forcing)
    samples = [(row, g) for row, (g,) in zip(rows, gens, strict=True)]
    thinking = [meter.thinking_tokens(g.ids) for _, g in samples]
    correct = [bool(is_correct(g.text, row["solution"])) for row, g in samples]
    n = len(samples)
    return {
        "thinking_tokens": sum(thinking) / n,
        "max_thinking_tokens": max(thinking),
        "tokens": sum(len(g.ids) for _, g in samples) / n,
        "forced_fraction": sum(bool(getattr(g, "forced", False)) for _, g in samples) / n,
        "accuracy": sum(correct) / n,
        "n": n,
    }


def floor_thinking_tokens(rows, tokenizer) -> float:
    """Mean thinking tokens of the shortest correct trace (`world.minimal_trace`) of `rows`' tasks: the least a
    correct completion needs; below it a budget can only be met by dropping steps."""
    from trl_efficient.core.lengths import LengthMeter
    from trl_efficient.overthinking.data import task_from_row
    from trl_efficient.overthinking.world import minimal_trace

    meter = LengthMeter("tokens", "thinking", tokenizer)
    ids = [tokenizer(minimal_trace(task_from_row(r)), add_special_tokens=False)["input_ids"] for r in rows]
    return sum(meter.thinking_tokens(i) for i in ids) / len(ids)


def run_force(budgets, num_eval: int, seed: int, base_model: str, max_new_tokens: int) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_efficient.eval.evaluate import EvalMode, TransformersBackend, build_prompt_text
    from trl_efficient.overthinking.base import resolve_base_model
    from trl_efficient.overthinking.data import load_testbed_dataset
    from trl_efficient.trainer.budget_forcing import BudgetForcing

    path = resolve_base_model(base_model)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    rows = list(load_testbed_dataset("test", num_eval, seed))
    prompts = [build_prompt_text(r["prompt"], EvalMode(), tok) for r in rows]
    backend = TransformersBackend(model, tok, batch_size=64, show_progress=False)
    close = len(tok.encode("</think>", add_special_tokens=False))
    floor = floor_thinking_tokens(rows, tok)
    out = {"model": base_model, "close_tag_tokens": close, "floor_thinking_tokens": floor,
           "unforced": measure(backend, tok, rows, prompts, None, max_new_tokens)}  # fmt: skip
    out["points"] = []
    for b in budgets:
        t0 = time.time()
        point = {"budget": b, **measure(backend, tok, rows, prompts, BudgetForcing("force", b), max_new_tokens, seed)}
        point["seconds"] = round(time.time() - t0, 1)
        print(f"force:{b}: {point}", flush=True)
        out["points"].append(point)
    return out


def run_budgetthinker(
    budgets, num_eval: int, seed: int, steps: int, workdir: str, settings, reuse: bool = False
) -> dict:
    """Train BudgetThinker at testbed scale from `settings.base_model` (a `TestbedSettings`), then measure it under
    `budgetthinker:B` (one torch thread throughout, as the testbed runs: `runner.torch_threads`)."""
    from trl_efficient_testbed.runner import torch_threads, train_recipe

    settings = dataclasses.replace(settings, max_steps=steps, seed=seed)
    meta_path = os.path.join(workdir, "perf_budget_forcing.json")
    with torch_threads():
        if reuse and os.path.exists(os.path.join(workdir, "model.safetensors")):
            from transformers import AutoModelForCausalLM

            from trl_efficient_testbed.scaling import settings_scale

            meta = {
                "seconds": None,
                "testbed_scale": settings_scale("budgetthinker", settings).to_dict(),
            }
            if os.path.exists(meta_path):
                with open(meta_path) as f:
                    meta = json.load(f)
            trained = {**meta, "model": AutoModelForCausalLM.from_pretrained(workdir)}
        else:
            trained = train_recipe("budgetthinker", settings, workdir)
            with open(meta_path, "w") as f:
                json.dump({"seconds": trained["seconds"], "testbed_scale": trained["testbed_scale"]}, f)
        out = _budgetthinker_points(trained, settings, budgets, num_eval, seed, steps, workdir)
        out["start"] = _budgetthinker_start_points(settings, budgets, num_eval, seed)
        return out


def _budgetthinker_start_points(settings, budgets, num_eval, seed) -> dict:
    """`settings.base_model` with the control tokens added (`add_budget_tokens`: fresh embeddings, as
    `BudgetThinkerTrainer` adds them before step 1) under `budgetthinker:B`: where the training starts."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_efficient.overthinking.base import resolve_base_model
    from trl_efficient.rewards.budgetthinker import add_budget_tokens

    path = resolve_base_model(settings.base_model)
    tok = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(path)
    add_budget_tokens(model, tok)
    trained = {"model": model, "seconds": 0.0, "testbed_scale": None}
    out = _budgetthinker_points(trained, settings, budgets, num_eval, seed, 0, None, tok=tok)
    few = [b for b in budgets if b in (min(budgets), max(budgets))] or budgets[:1]  # the ablation: two budgets
    for parts in (("prompt",), ("forcing",)):
        out[f"{parts[0]}_only"] = _budgetthinker_points(trained, settings, few, num_eval, seed, 0, None, tok, parts)
    return out


def _budgetthinker_points(
    trained, settings, budgets, num_eval, seed, steps, workdir, tok=None, parts=("prompt", "forcing")
) -> dict:
    """`budgetthinker:B` at each budget: the budget prompt and the forced control tokens (`parts`: one of them
    alone for the ablation of the starting point)."""
    from transformers import AutoTokenizer

    from trl_efficient.eval.evaluate import (
        EvalMode,
        TransformersBackend,
        budget_control_backend,
        build_prompt_text,
        parse_mode,
    )
    from trl_efficient.overthinking.data import load_testbed_dataset

    model, tok = trained["model"], tok if tok is not None else AutoTokenizer.from_pretrained(workdir)
    model.eval()
    rows = list(load_testbed_dataset("test", num_eval, seed))
    backend = TransformersBackend(model, tok, batch_size=64, show_progress=False)
    out = {"model": f"budgetthinker ({steps} steps from {settings.base_model})", "train_seconds": trained["seconds"],
           "testbed_scale": trained["testbed_scale"], "points": []}  # fmt: skip
    for b in budgets:
        mode = parse_mode(f"budgetthinker:{b}")[0] if "prompt" in parts else EvalMode()
        prompts = [build_prompt_text(r["prompt"], mode, tok) for r in rows]
        generator = budget_control_backend(backend, b, tok) if "forcing" in parts else backend
        point = {"budget": b, **measure(generator, tok, rows, prompts, None, settings.max_completion_length, seed)}
        print(f"budgetthinker:{b} {'+'.join(parts)} ({steps} steps): {point}", flush=True)
        out["points"].append(point)
    return out


def markdown(result: dict) -> str:
    force = result["force"]
    lines = [
        "# Budget forcing on the testbed: thinking tokens vs budget",
        "",
        f"Model `{force['model']}`, {result['num_eval']} held-out tasks, one sample each (temperature 0.6, top-p "
        f"0.95, {result['max_new_tokens']} new tokens, seed {result['seed']}). Thinking tokens: `LengthMeter` (up to "
        f"and including `</think>`, {force['close_tag_tokens']} tokens, so a forced completion counts "
        f"B + {force['close_tag_tokens']}). Shortest correct traces of these tasks (`world.minimal_trace`, the "
        f"floor): {force.get('floor_thinking_tokens', float('nan')):.1f} thinking tokens on average; under a budget "
        "below a task's floor only dropped steps fit. "
        f"Command: `{result['command']}` ({result['seconds']} s).",
        "",
        "| mode | budget B | mean thinking tokens | max thinking tokens | mean tokens | forced | accuracy |",
        "|---|---|---|---|---|---|---|",
    ]
    u = force["unforced"]
    lines.append(
        f"| unforced | - | {u['thinking_tokens']:.1f} | {u['max_thinking_tokens']} | {u['tokens']:.1f} | - | "
        f"{u['accuracy']:.3f} |"
    )
    bt = result.get("budgetthinker")
    start = (bt or {}).get("start") or {}
    blocks = [("force", "", force), ("budgetthinker", " (step 0)", start),
              ("budgetthinker", " prompt only (step 0)", start.get("prompt_only")),
              ("budgetthinker", " forcing only (step 0)", start.get("forcing_only")),
              ("budgetthinker", " (trained)", bt)]  # fmt: skip
    for name, tag, block in blocks:
        for p in (block or {}).get("points", []):
            lines.append(
                f"| {name}:{p['budget']}{tag} | {p['budget']} | {p['thinking_tokens']:.1f} | "
                f"{p['max_thinking_tokens']} | {p['tokens']:.1f} | {p['forced_fraction']:.2f} | {p['accuracy']:.3f} |"
            )
    if bt is None:
        lines += ["", "BudgetThinker is not in this run (`--budgetthinker` trains it first)."]
    else:
        scale = (bt.get("testbed_scale") or {}).get("rule", "")
        lines += [
            "",
            f"BudgetThinker: {bt['model']}, {bt['train_seconds']} s of training (None: reused); testbed scale: "
            f"{scale}. Its `forced` column is 0 by construction (control tokens are not budget forcing). "
            "`(step 0)`: the base model it trains from, with the control tokens added (fresh embeddings), under the "
            "same `budgetthinker:B` prompt and forcing (`prompt only`: the budget instruction without forcing; "
            "`forcing only`: the control tokens forced into the plain prompt's completion); compare the trained "
            "model with these rows, not with `unforced` (the prompt and the forced tokens alone change the base "
            "model).",
        ]
        notes = result.get("notes")
        if notes:
            lines += ["", notes]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    force, bt = result["force"], result.get("budgetthinker")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    xs = [p["budget"] for p in force["points"]]
    top = max(xs)
    ax1.plot([0, top], [0, top], color="grey", lw=1, label="y = x")
    c = force["close_tag_tokens"]
    ax1.plot([0, top], [c, top + c], color="grey", lw=1, ls=":", label=f"y = x + {c} (</think>)")
    ax1.plot(xs, [p["thinking_tokens"] for p in force["points"]], "o-", label="force:B (s1)")
    ax1.axhline(force["unforced"]["thinking_tokens"], ls="--", color="C0", lw=1, label="unforced")
    if force.get("floor_thinking_tokens"):
        ax1.axhline(force["floor_thinking_tokens"], ls="-.", color="k", lw=1, label="shortest correct trace (mean)")
    ax2.plot(xs, [p["accuracy"] for p in force["points"]], "o-", label="force:B (s1)")
    ax2.axhline(force["unforced"]["accuracy"], ls="--", color="C0", lw=1, label="unforced")
    if bt and bt.get("start"):
        start, label = bt["start"]["points"], "budgetthinker:B, step 0"
        sx = [p["budget"] for p in start]
        ax1.plot(sx, [p["thinking_tokens"] for p in start], "^:", color="C2", label=label)
        ax2.plot(sx, [p["accuracy"] for p in start], "^:", color="C2", label=label)
    if bt:
        bx = [p["budget"] for p in bt["points"]]
        ax1.plot(bx, [p["thinking_tokens"] for p in bt["points"]], "s-", color="C1", label="budgetthinker:B")
        ax2.plot(bx, [p["accuracy"] for p in bt["points"]], "s-", color="C1", label="budgetthinker:B")
    ax1.set(xlabel="budget B (tokens)", ylabel="mean thinking tokens", title="Thinking tokens vs budget")
    ax2.set(xlabel="budget B (tokens)", ylabel="accuracy", title="Accuracy vs budget", ylim=(0, 1))
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Testbed ({force['model']}, {result['num_eval']} tasks): budget forcing")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=DEFAULT_BUDGETS)
    parser.add_argument("--num-eval", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budgetthinker", action="store_true", help="also train and measure BudgetThinker")
    parser.add_argument("--bt-steps", type=int, default=40)
    parser.add_argument("--bt-reuse", action="store_true", help="reuse the model of an earlier --budgetthinker run")
    parser.add_argument("--base-model", default=None, help="default: the comparison's (TestbedSettings.base_model)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: the comparison's cap")
    parser.add_argument("--output-dir", default=os.path.join(HERE, "results"))
    parser.add_argument("--from-json", help="only redraw the .md and .png from this budget_forcing.json")
    args = parser.parse_args(argv)
    if args.from_json is None:
        from trl_efficient_testbed.runner import TestbedSettings

        defaults = TestbedSettings()
        args.base_model = args.base_model or defaults.base_model
        args.max_new_tokens = args.max_new_tokens or defaults.max_completion_length
    if args.from_json:
        with open(args.from_json) as f:
            result = json.load(f)
        base = os.path.join(args.output_dir, "budget_forcing")
        with open(base + ".md", "w") as f:
            f.write(markdown(result))
        plot(result, base + ".png")
        return 0
    from trl_efficient_testbed.runner import TestbedSettings, torch_threads

    settings = TestbedSettings(base_model=args.base_model, max_completion_length=args.max_new_tokens)
    t0 = time.time()
    with torch_threads():
        force = run_force(args.budgets, args.num_eval, args.seed, args.base_model, args.max_new_tokens)
        result = {"num_eval": args.num_eval, "seed": args.seed, "budgets": args.budgets,
                  "max_new_tokens": args.max_new_tokens, "force": force}  # fmt: skip
    if args.budgetthinker:
        workdir = os.path.join(os.path.expanduser("~/.cache/trl_efficient"), "perf-budgetthinker")
        result["budgetthinker"] = run_budgetthinker(
            args.budgets, args.num_eval, args.seed, args.bt_steps, workdir, settings, reuse=args.bt_reuse
        )
    result["seconds"] = round(time.time() - t0, 1)
    result["command"] = "python perf/testbed/budget_forcing.py " + " ".join(argv if argv is not None else sys.argv[1:])
    os.makedirs(args.output_dir, exist_ok=True)
    base = os.path.join(args.output_dir, "budget_forcing")
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(markdown(result))
    plot(result, base + ".png")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
