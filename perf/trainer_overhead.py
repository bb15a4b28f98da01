"""Training-step time of `EfficientGRPOTrainer` with each recipe vs plain TRL `GRPOTrainer`, side by side.

    python perf/trainer_overhead.py [--recipe all|kimi|...] [--steps 3] [--rounds 1] [--model tiny:qwen2-16]
                                          [--json out.json]

`--recipe all` (the default) runs every registered recipe (`trl_efficient.recipes.RECIPES`) and prints one Markdown
table; a recipe that fails gets its row with the status and a one-line error instead of stopping the others.

Both trainers of a row get the same model weights, data, seed, generation settings (transformers `generate`, an EOS
logit bias so the tiny random model stops at varied lengths), the **same config** and the **same reward functions
with the same weights** (the recipe's reward specs, built by `build_rewards`: group rewards such as Kimi's get
`num_generations` and gather whole groups themselves, so they work in the plain trainer too). The efficient side is
the recipe's trainer class (`Recipe.trainer_cls`, e.g. `DLERTrainer`); plain `GRPOTrainer` ignores the config fields
only `trl_efficient` reads (rollout plan, advantage estimator, completion filter); where a recipe's rewards need
the rollout plan's per-example columns (L1's `target_length`), the plain side gets them in its dataset
(`plain_dataset`). Recipes with a dataset hook get it
on both sides (SABER: a profile of the benchmark prompts made once with the same tiny model; Bingo: an offline tiny
LLMLingua-2-format token classifier as scorer, `save_tiny_token_classifier`).

Config precedence (`config_kwargs`): the benchmark's defaults (`learning_rate`, `beta`, `temperature`) < the
recipe's `config_overrides`, its length constants fitted to `--max-completion-length` by the recipe's testbed scaling
rule (`scaled_overrides`) < the measurement settings that must be the same for every row (`BENCH_FIXED`: batch,
`num_generations`, `max_completion_length`, steps, seed, CPU, logging/saving). A recipe override replaced by a
measurement setting or scaled is listed in the row's notes (e.g. DA-DLER's `max_completion_length` and
`advantage_kwargs`).

To cancel machine noise the two alternate: `--rounds` rounds of (plain: `--steps` steps, efficient: `--steps`
steps), each from a fresh copy of the model; the first step of every run is a warm-up and is not timed. Reported per
recipe: median seconds per optimizer step of each trainer, the ratio efficient / plain, and the tokens each trainer's
policy generated per step (counted at `_generate_single_turn`, every step included): a recipe that generates more
(DLER's dynamic-sampling refill, Bingo's reference samples are not counted as they are a reward's own generation)
shows it there, so its ratio can be read as cost per generated token as well.

Not a test: numbers depend on the machine. Run it on an idle machine (or under `nice` on a shared one).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _timer_callback():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.durations, self._t = [], None

        def on_step_begin(self, args, state, control, **kwargs):
            self._t = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.durations.append(time.perf_counter() - self._t)

    return StepTimer()


def build_rewards(recipe, args, tokenizer):
    """The recipe's reward functions, with `num_generations` given to the group rewards that take it, so they also
    work in a plain `GRPOTrainer` (which passes no `group_size` column); identical objects for both trainers."""
    from trl_efficient.recipes import REWARD_BUILDERS

    funcs = []
    for spec in recipe.rewards:
        builder = REWARD_BUILDERS.get(spec.builder)
        try:
            funcs.append(builder(args, tokenizer, **{**spec.kwargs, "num_generations": args.num_generations}))
        except TypeError:  # not a group reward
            funcs.append(builder(args, tokenizer, **spec.kwargs))
    return funcs, [spec.weight for spec in recipe.rewards]


# Defaults of the benchmark that a recipe's config_overrides may change (e.g. a recipe that needs a KL term).
BENCH_DEFAULTS = {"learning_rate": 1e-3, "beta": 0.0, "temperature": 1.0}
# Measurement settings: the same for every row and both trainers, so they win over a recipe's overrides.
BENCH_FIXED_KEYS = (
    "output_dir", "max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "num_generations",
    "max_completion_length", "logging_steps", "save_strategy", "report_to", "use_cpu", "use_vllm", "bf16", "seed",
    "generation_kwargs", "disable_tqdm",
)  # fmt: skip


def config_kwargs(recipe_overrides: dict, fixed: dict, defaults: dict | None = None) -> tuple[dict, list[str]]:
    """`EfficientGRPOConfig` kwargs, merged with one precedence: `defaults` < `recipe_overrides` < `fixed`.

    Returns the kwargs and the sorted names of recipe overrides that `fixed` replaced (reported in the table's notes).
    Every key appears once, so `EfficientGRPOConfig(**kwargs)` cannot get a keyword twice (the old crash: HBPO's and
    DRPO's `beta: 0.0` next to the benchmark's own `beta=0.0`).

    >>> config_kwargs({"beta": 0.04, "max_completion_length": 4000, "loss_type": "dapo"},
    ...               {"max_completion_length": 64}, {"beta": 0.0, "temperature": 1.0})
    ({'beta': 0.04, 'temperature': 1.0, 'max_completion_length': 64, 'loss_type': 'dapo'}, ['max_completion_length'])
    """
    unknown = sorted(set(fixed) - set(BENCH_FIXED_KEYS))
    if unknown:
        raise ValueError(f"fixed settings {unknown} are not in BENCH_FIXED_KEYS.")
    merged = {**(BENCH_DEFAULTS if defaults is None else defaults), **recipe_overrides, **fixed}
    replaced = sorted(k for k in recipe_overrides if k in fixed and recipe_overrides[k] != fixed[k])
    return merged, replaced


def scaled_overrides(recipe_name: str, max_len: int, steps: int) -> tuple[dict, list[str]]:
    """The recipe's `config_overrides` with its length constants fitted to the benchmark's `max_len` by the recipe's
    testbed scaling rule (`trl_efficient.testbed.scaling`: one rule per recipe, e.g. DA-DLER's `truncate_to` 2000 of
    4000 -> 32 of 64), and the names of the fields the rule set."""
    from trl_efficient.recipes import get_recipe
    from trl_efficient.testbed.scaling import apply_scale, recipe_scale

    scale = recipe_scale(recipe_name, max_len, steps)
    return apply_scale(get_recipe(recipe_name).config_overrides, scale), sorted(scale.config)


def _generation_counter(trainer) -> list[int]:
    """Count the tokens the policy generates: wrap the trainer's `_generate_single_turn` (TRL `GRPOTrainer`; the
    efficient trainers override it and call `super()`, so the outermost call is counted once)."""
    counted = [0]
    inner = trainer._generate_single_turn

    def _generate_single_turn(*args, **kwargs):
        completion_ids, logprobs = inner(*args, **kwargs)
        counted[0] += sum(len(ids) for ids in completion_ids)
        return completion_ids, logprobs

    trainer._generate_single_turn = _generate_single_turn
    return counted


def recipe_kwargs_for(recipe_name: str, model_path: str, dataset, tokenizer, max_len: int, eos_bias: float,
                      seed: int, workdir: str) -> dict:  # fmt: skip
    """`recipe_kwargs` for recipes whose dataset hook needs something made first (made once per `workdir`)."""
    if recipe_name == "bingo":
        from trl_efficient.testing.scorers import save_tiny_token_classifier

        # an offline tiny classifier in the LLMLingua-2 format; llmlingua needs this name in the directory
        path = os.path.join(workdir, "tiny-bert-base-multilingual-cased")
        if not os.path.isdir(path):
            save_tiny_token_classifier(path)
        return {"scorer": path}
    if recipe_name == "saber":
        from transformers import AutoModelForCausalLM

        from trl_efficient.methods.saber import profile_dataset, write_profile

        path = os.path.join(workdir, "saber_profile.jsonl")
        if not os.path.exists(path):
            model = AutoModelForCausalLM.from_pretrained(model_path)
            records = profile_dataset(model, tokenizer, dataset, max_new_tokens=max_len, seed=seed,
                                      generation_kwargs={"sequence_bias": [[[tokenizer.eos_token_id], eos_bias]]},
                                      show_progress=False)  # fmt: skip
            write_profile(records, path)
        return {"profile": path}
    return {}


def plain_dataset(dataset, args):
    """The dataset for plain `GRPOTrainer` when the recipe's rollout plan gives each *example* one assignment (L1's
    target length, `per="prompt"`): TRL has no rollout plan, so each row gets the plan's assignment the way the L1
    code builds its data, the instruction in the prompt and the metadata (`target_length`, `length_mode`) as
    columns for the rewards. Other datasets are returned unchanged (HBPO's per-subgroup budgets cannot be a column)."""
    from trl_efficient.trainer.config import build_rollout_plan
    from trl_efficient.trainer.rollout import apply_assignment

    plan = build_rollout_plan(args)
    if plan is None or getattr(plan, "per", None) != "prompt":
        return dataset

    def assign(row, i):
        assignment = plan.assign(row, 0, args.num_generations, i, 0)
        return {"prompt": apply_assignment(row["prompt"], assignment), **assignment.metadata}

    return dataset.map(assign, with_indices=True)


def run_once(trainer_kind: str, recipe_name: str, model_path: str, steps: int, seed: int, eos_bias: float,
             batch: int, group: int, max_len: int, output_root: str) -> dict:  # fmt: skip
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from trl_efficient.data.loaders import load_math_dataset
    from trl_efficient.recipes import get_recipe
    from trl_efficient.trainer import EfficientGRPOConfig

    recipe = get_recipe(recipe_name)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    fixed = {
        "output_dir": os.path.join(output_root, recipe_name, trainer_kind), "max_steps": steps,
        "per_device_train_batch_size": batch, "gradient_accumulation_steps": 1, "num_generations": group,
        "max_completion_length": max_len, "logging_steps": 1, "save_strategy": "no", "report_to": "none",
        "use_cpu": True, "use_vllm": False, "bf16": False, "seed": seed,
        "generation_kwargs": {"sequence_bias": [[[tokenizer.eos_token_id], eos_bias]]}, "disable_tqdm": True,
    }  # fmt: skip
    overrides, scaled = scaled_overrides(recipe_name, max_len, steps)
    kwargs, replaced = config_kwargs(overrides, fixed)
    replaced = replaced + scaled
    args = EfficientGRPOConfig(**kwargs)
    dataset = load_math_dataset("gsm8k", "train", limit=batch * steps * 2, seed=seed)
    extra = recipe_kwargs_for(recipe_name, model_path, dataset, tokenizer, max_len, eos_bias, seed, output_root)
    dataset = recipe.apply_prepare_dataset(dataset, args, tokenizer, **extra)
    if trainer_kind == "plain":
        dataset = plain_dataset(dataset, args)
    rewards, weights = build_rewards(recipe, args, tokenizer)
    args.reward_weights = weights
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    cls = recipe.load_trainer_cls() if trainer_kind == "efficient" else GRPOTrainer
    timer = _timer_callback()
    trainer = cls(model=model, reward_funcs=rewards, args=args, train_dataset=dataset, processing_class=tokenizer,
                  callbacks=[timer])  # fmt: skip
    generated = _generation_counter(trainer)
    trainer.train()
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    return {
        "step_seconds": timer.durations[1:], "mean_length": lengths[-1] if lengths else None,
        "generated_tokens_per_step": generated[0] / max(len(timer.durations), 1), "replaced": replaced,
        "trainer": f"{cls.__module__}.{cls.__name__}",
    }  # fmt: skip


def bench_recipe(recipe_name: str, model_path: str, args, root: str) -> dict:
    """Alternate plain and efficient runs of one recipe for `args.rounds` rounds; the row of the table."""
    times = {"plain": [], "efficient": []}
    tokens = {"plain": [], "efficient": []}
    row = {"recipe": recipe_name, "G": args.group, "status": "ok", "error": "", "notes": ""}
    try:
        for r in range(args.rounds):
            for kind in ("plain", "efficient"):
                out = run_once(kind, recipe_name, model_path, args.steps, args.seed, args.eos_bias, args.batch,
                               args.group, args.max_completion_length, root)  # fmt: skip
                times[kind] += out["step_seconds"]
                tokens[kind].append(out["generated_tokens_per_step"])
                if kind == "efficient" and out["replaced"]:
                    row["notes"] = "benchmark sets " + ", ".join(out["replaced"])
                print(f"  {recipe_name} round {r + 1}/{args.rounds} {kind:9s}: median step "
                      f"{statistics.median(out['step_seconds']):.3f} s, {out['generated_tokens_per_step']:.0f} "
                      f"generated tokens/step ({out['trainer']})", flush=True)  # fmt: skip
    except Exception as err:  # a failing recipe gets its row; the others still run
        row["status"] = "failed"
        row["error"] = f"{type(err).__name__}: {' '.join(str(err).split())}"[:200]
        print(f"  {recipe_name} FAILED: {row['error']}", flush=True)
    for kind in ("plain", "efficient"):
        row[f"{kind}_s_per_step"] = round(statistics.median(times[kind]), 4) if times[kind] else None
        row[f"{kind}_tokens_per_step"] = round(statistics.mean(tokens[kind]), 1) if tokens[kind] else None
    plain, eff = row["plain_s_per_step"], row["efficient_s_per_step"]
    row["ratio"] = round(eff / plain, 3) if plain and eff else None
    return row


def markdown_table(rows: list[dict]) -> str:
    """One Markdown table of the rows (`-` for a value a failed run did not produce)."""

    def cell(value, fmt="{}"):
        return "-" if value is None else fmt.format(value)

    lines = [
        "| recipe | plain s/step | efficient s/step | ratio | plain gen tokens/step | efficient gen tokens/step | G "
        "| status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        status = row["status"] if not row["error"] else f"{row['status']}: {row['error']}"
        if row["notes"]:
            status += f" ({row['notes']})"
        lines.append(
            f"| {row['recipe']} | {cell(row['plain_s_per_step'], '{:.3f}')} "
            f"| {cell(row['efficient_s_per_step'], '{:.3f}')} "
            f"| {cell(row['ratio'], '{:.2f}')} | {cell(row['plain_tokens_per_step'], '{:.0f}')} "
            f"| {cell(row['efficient_tokens_per_step'], '{:.0f}')} | {row['G']} | {status.replace('|', '/')} |"
        )  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="all", help="a registered recipe, a comma-separated list, or all (default)")
    parser.add_argument("--model", default="tiny:qwen2-16", help="tiny:<arch>[-<hidden>], testbed:base or a path")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps per run (the first is not timed)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--batch", type=int, default=16, help="per-device batch (completions per step)")
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--eos-bias", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step of a run is a warm-up and is not timed).")

    import torch

    from trl_efficient.core.models import resolve_model_name
    from trl_efficient.recipes import RECIPES

    names = list(RECIPES) if args.recipe == "all" else [n.strip() for n in args.recipe.split(",") if n.strip()]
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        parser.error(f"unknown recipe(s) {unknown}; registered: {sorted(RECIPES)}")
    model_path = resolve_model_name(args.model)
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for name in names:
            rows.append(bench_recipe(name, model_path, args, root))
    table = markdown_table(rows)
    command = "python perf/trainer_overhead.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"\nEfficient trainer (recipe's trainer class) vs GRPOTrainer, same config, rewards and generation; "
          f"model {args.model}, batch {args.batch}, G {args.group}, "
          f"max_completion_length {args.max_completion_length}, "
          f"median of {args.rounds} x {args.steps - 1} timed steps; torch threads {torch.get_num_threads()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}\n`{command.strip()}`\n")  # fmt: skip
    print(table, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command.strip(), "model": args.model, "batch": args.batch, "group": args.group,
                       "max_completion_length": args.max_completion_length, "steps": args.steps,
                       "rounds": args.rounds, "rows": rows}, f, indent=1)  # fmt: skip
    return 0 if all(row["status"] == "ok" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
