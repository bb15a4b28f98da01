"""
Train recipes on the testbed and measure them: `evaluate_testbed`, `train_recipe`, `compare`.

`compare(["grpo", "kimi", "shorter-better"], TestbedSettings())` trains every recipe from the same base model with
the same data, seed and number of GRPO steps (recipes come from `trl_efficient.recipes`, built exactly as
`trl-efficient train` builds them: the recipe's config overrides, its reward functions and weights, its trainer
class and dataset preparation), evaluates the base model and every trained model on the same held-out tasks, and
writes `compare.json`, `compare.md` and `pareto.png`.

Testbed scale: completions are 20-150 tokens, so recipes whose defaults assume thousands of tokens get the
testbed-scale overrides of `TESTBED_RECIPE_OVERRIDES` (reported in the output); add more with `--set key=value`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

__all__ = ["TESTBED_RECIPE_OVERRIDES", "TestbedSettings", "compare", "evaluate_testbed", "train_recipe"]

# Config fields whose recipe defaults are at long-CoT scale; the testbed's completions are ~20-150 tokens.
TESTBED_RECIPE_OVERRIDES: dict[str, dict] = {
    "l1-exact": {"target_length_range": [16, 160]},
    "l1-max": {"target_length_range": [16, 160]},
    "hbpo": {"budgets": [32, 64, 96, 128]},
}


@dataclass
class TestbedSettings:
    """One comparison's settings: the same for every recipe (so only the recipe differs)."""

    base_model: str = "testbed:base"
    max_steps: int = 40
    num_train: int = 1024
    num_eval: int = 128
    eval_samples: int = 2  # samples per eval task
    per_device_train_batch_size: int = 32
    num_generations: int = 8
    max_completion_length: int = 192
    learning_rate: float = 1e-4
    temperature: float = 1.0
    eval_temperature: float = 0.6
    eval_top_p: float = 0.95
    beta: float = 0.0
    seed: int = 0
    min_ops: int = 1
    max_ops: int = 8
    extra: dict = field(default_factory=dict)  # more EfficientGRPOConfig fields, for every recipe

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@contextlib.contextmanager
def torch_threads(num_threads: int | None = None):
    """Run with `num_threads` torch intra-op threads (default `$TRL_EFFICIENT_TESTBED_THREADS`, else 1), then restore.

    The testbed's matrices are tiny: a second thread barely helps on an idle machine, and on a busy one OpenMP
    threads waiting for each other make a GRPO step several times slower (measured: 7 s vs 0.5 s per step).
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(num_threads or int(os.environ.get("TRL_EFFICIENT_TESTBED_THREADS", "0") or 0) or 1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------------------------
# Evaluation with exact token accounting
# ---------------------------------------------------------------------------------------------------------------


def evaluate_testbed(model, tokenizer, dataset, num_samples: int = 2, max_new_tokens: int = 192,
                     temperature: float = 0.6, top_p: float = 0.95, seed: int = 0, batch_size: int = 64,
                     show_progress: bool = False) -> dict:  # fmt: skip
    """Sample `num_samples` completions per task and return `analysis.summarize` of their exact token accounting
    (accuracy, mean tokens, redundant share, floor, excess over floor, per difficulty), plus `truncated_fraction`
    and `pass@1`-style `accuracy` (mean over samples)."""
    from ..evaluation import TransformersBackend, build_prompt_text, EvalMode
    from .analysis import analyze_completion, summarize
    from .data import task_from_row

    backend = TransformersBackend(model, tokenizer, batch_size=batch_size, show_progress=show_progress)
    rows = list(dataset)
    prompts = [build_prompt_text(r["prompt"], EvalMode(), tokenizer) for r in rows]
    generations = backend.generate(prompts, num_samples, max_new_tokens, temperature, top_p, seed, "testbed eval")
    records, truncated = [], []
    for row, samples in zip(rows, generations, strict=True):
        task = task_from_row(row)
        for g in samples:
            records.append(analyze_completion(task, g.ids, tokenizer, text=g.text))
            truncated.append(not g.finished)
    out = summarize(records)
    out["truncated_fraction"] = sum(truncated) / len(truncated) if truncated else 0.0
    out["num_samples"] = len(records)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Training one recipe
# ---------------------------------------------------------------------------------------------------------------


def build_config(recipe, settings: TestbedSettings, output_dir: str, overrides: dict | None = None):
    from ..trainer import EfficientGRPOConfig

    kwargs = dict(recipe.config_overrides)
    kwargs.update(TESTBED_RECIPE_OVERRIDES.get(recipe.name, {}))
    kwargs.update(
        output_dir=output_dir,
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.per_device_train_batch_size,
        num_generations=settings.num_generations,
        max_completion_length=settings.max_completion_length,
        learning_rate=settings.learning_rate,
        temperature=settings.temperature,
        beta=settings.beta,
        seed=settings.seed,
        logging_steps=5,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        lr_scheduler_type="constant",
        warmup_steps=0,
    )
    kwargs.update(settings.extra)
    kwargs.update(overrides or {})
    return EfficientGRPOConfig(**kwargs)


def train_recipe(recipe_name: str, settings: TestbedSettings, output_dir: str, train_dataset=None,
                 overrides: dict | None = None) -> dict:  # fmt: skip
    """Train `recipe_name` from the base model for `settings.max_steps` GRPO steps; save the model to
    `output_dir`. Returns `{"seconds": ..., "log_history": [...], "config": {...}}`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..recipes import get_recipe
    from .base import resolve_base_model
    from .data import load_testbed_dataset

    recipe = get_recipe(recipe_name)
    base = resolve_base_model(settings.base_model)
    tokenizer = AutoTokenizer.from_pretrained(base)
    args = build_config(recipe, settings, output_dir, overrides)
    if train_dataset is None:
        train_dataset = load_testbed_dataset(
            "train", settings.num_train, settings.seed, settings.min_ops, settings.max_ops
        )
    train_dataset = recipe.apply_prepare_dataset(train_dataset, args, tokenizer)
    reward_funcs, weights = recipe.build_reward_funcs(args, tokenizer)
    if args.reward_weights is None:
        args.reward_weights = weights
    torch.manual_seed(settings.seed)
    model = AutoModelForCausalLM.from_pretrained(base)
    trainer_cls = recipe.load_trainer_cls()
    trainer = trainer_cls(model=model, reward_funcs=reward_funcs, args=args, train_dataset=train_dataset,
                          processing_class=tokenizer)  # fmt: skip
    t0 = time.time()
    trainer.train()
    seconds = time.time() - t0
    trainer.save_model(output_dir)
    tokenizer.save_pretrained(output_dir)
    applied = {k: v for k, v in TESTBED_RECIPE_OVERRIDES.get(recipe.name, {}).items()}
    return {"seconds": round(seconds, 1), "log_history": trainer.state.log_history, "testbed_overrides": applied,
            "model": trainer.model}  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------------------------


def _row(name: str, summary: dict, seconds: float | None = None) -> dict:
    return {
        "recipe": name,
        "accuracy": summary["accuracy"],
        "mean_tokens": summary["mean_tokens"],
        "mean_floor_tokens": summary["mean_floor_tokens"],
        "excess_over_floor": summary["excess_over_floor"],
        "redundant_share": summary["redundant_share"],
        "skips_per_completion": summary["skips_per_completion"],
        "truncated_fraction": summary["truncated_fraction"],
        "train_seconds": seconds,
        "by_difficulty": summary["by_difficulty"],
    }


def _secs(value) -> str:
    return "-" if value is None else f"{value:.0f}"


def compare_markdown(rows: list[dict], settings: dict | None = None) -> str:
    """The comparison table, then tokens by difficulty (mean tokens / accuracy per number of operations)."""
    head = ["recipe", "accuracy", "mean tokens", "floor", "excess over floor", "redundant share", "skips/compl.",
            "truncated", "train s"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append(
            f"| {r['recipe']} | {r['accuracy']:.3f} | {r['mean_tokens']:.1f} | {r['mean_floor_tokens']:.1f} | "
            f"{r['excess_over_floor']:.1f} | {r['redundant_share']:.3f} | {r['skips_per_completion']:.2f} | "
            f"{r['truncated_fraction']:.3f} | {_secs(r['train_seconds'])} |"
        )
    levels = sorted({d for r in rows for d in r["by_difficulty"]}, key=int)
    lines += ["", "Mean tokens (accuracy) by difficulty = number of operations; floor = shortest correct trace:", ""]
    head = ["recipe", *[f"{d} ops" for d in levels]]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    floor_row = ["floor"] + [
        next((f"{r['by_difficulty'][d]['mean_floor_tokens']:.1f}" for r in rows if d in r["by_difficulty"]), "-")
        for d in levels
    ]
    lines.append("| " + " | ".join(floor_row) + " |")
    for r in rows:
        cells = [r["recipe"]] + [
            f"{r['by_difficulty'][d]['mean_tokens']:.1f} ({r['by_difficulty'][d]['accuracy']:.2f})"
            if d in r["by_difficulty"] else "-" for d in levels
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    if settings:
        lines += ["", "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items() if k != "extra")]
    return "\n".join(lines) + "\n"


def compare(recipes: list[str], settings: TestbedSettings | None = None, output_dir: str = "outputs/testbed",
            overwrite: bool = False, keep_models: bool = False, include_base: bool = True) -> dict:  # fmt: skip
    """Train each recipe from the same base with the same budget of steps, evaluate all on the same held-out
    tasks, and write `compare.json`, `compare.md` and `pareto.png` under `output_dir`. Per-recipe results are
    cached in `<output_dir>/<recipe>/result.json` (reused unless `overwrite`). Runs with `torch_threads()`."""
    from ..recipes import get_recipe

    settings = settings or TestbedSettings()
    for name in recipes:
        get_recipe(name)  # fail fast on a typo, before any training
    with torch_threads():
        return _compare(recipes, settings, output_dir, overwrite, keep_models, include_base)


def _compare(recipes, settings, output_dir, overwrite, keep_models, include_base) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..plots import pareto_plot
    from .base import resolve_base_model
    from .data import load_testbed_dataset

    os.makedirs(output_dir, exist_ok=True)
    base_path = resolve_base_model(settings.base_model)
    tokenizer = AutoTokenizer.from_pretrained(base_path)
    eval_ds = load_testbed_dataset("test", settings.num_eval, settings.seed, settings.min_ops, settings.max_ops)
    eval_kwargs = dict(num_samples=settings.eval_samples, max_new_tokens=settings.max_completion_length,
                       temperature=settings.eval_temperature, top_p=settings.eval_top_p,
                       seed=settings.seed)  # fmt: skip
    rows = []
    names = (["base"] if include_base else []) + list(recipes)
    for name in names:
        folder = os.path.join(output_dir, name)
        cached = os.path.join(folder, "result.json")
        if os.path.isfile(cached) and not overwrite:
            with open(cached) as f:
                saved = json.load(f)
            if saved.get("settings") == settings.to_dict():
                rows.append(saved["row"])
                logger.info("testbed: reusing %s", cached)
                continue
        os.makedirs(folder, exist_ok=True)
        seconds = None
        if name == "base":
            model = AutoModelForCausalLM.from_pretrained(base_path)
            info = {}
        else:
            logger.info("testbed: training %s for %d steps", name, settings.max_steps)
            info = train_recipe(name, settings, folder)
            model, seconds = info.pop("model"), info["seconds"]
            if not keep_models:
                for f_name in os.listdir(folder):
                    if f_name.endswith((".safetensors", ".bin")):
                        os.remove(os.path.join(folder, f_name))
        with torch.no_grad():
            summary = evaluate_testbed(model, tokenizer, eval_ds, **eval_kwargs)
        row = _row(name, summary, seconds)
        rows.append(row)
        with open(cached, "w") as f:
            json.dump({"settings": settings.to_dict(), "row": row, "summary": summary,
                       "log_history": info.get("log_history"), "testbed_overrides": info.get("testbed_overrides")},
                      f, indent=1)  # fmt: skip
        logger.info("testbed: %s accuracy %.3f mean tokens %.1f redundant share %.3f", name, row["accuracy"],
                    row["mean_tokens"], row["redundant_share"])  # fmt: skip
    files = {"json": os.path.join(output_dir, "compare.json"), "markdown": os.path.join(output_dir, "compare.md")}
    with open(files["json"], "w") as f:
        json.dump({"settings": settings.to_dict(), "rows": rows}, f, indent=1)
    with open(files["markdown"], "w") as f:
        f.write(compare_markdown(rows, settings.to_dict()))
    floor = rows[0]["mean_floor_tokens"] if rows else None
    plot = pareto_plot(rows, os.path.join(output_dir, "pareto.png"), group_key="recipe", label_key=None,
                       title=f"Testbed: accuracy vs tokens after {settings.max_steps} GRPO steps",
                       reference_x={"floor (shortest correct traces)": floor} if floor else None)  # fmt: skip
    if plot:
        files["plot"] = plot
    return {"rows": rows, "files": files}
