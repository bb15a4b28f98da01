"""
Train recipes on the testbed and measure them: `evaluate_testbed`, `train_recipe`, `compare`.

`compare(["grpo", "kimi", "shorter-better"], TestbedSettings())` trains every recipe from the same base model with
the same data, seed and number of GRPO steps (recipes come from `trl_efficient.recipes`, built exactly as
`trl-efficient train` builds them: the recipe's config overrides, its reward functions and weights, its trainer
class and dataset preparation), evaluates the base model and every trained model on the same held-out tasks, and
writes `compare.json`, `compare.md`, `pareto.png` and `per_difficulty.png`.

Testbed scale: completions are 20-190 tokens, so every recipe runs with its rule of `testbed.scaling` (lengths scaled
to the cap, per-token coefficients by the inverse, its own G where the method defines it; printed with the table).
Each recipe also gets its method check (`testbed.checks`), evaluated under the recipe's own conditions. A recipe
that raises is recorded as a failed row with its error; the others still run and the table is still written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..recipes.registry import Recipe

logger = logging.getLogger(__name__)

__all__ = [
    "TestbedSettings",
    "compare",
    "evaluate_modes",
    "evaluate_testbed",
    "failed_row",
    "scaled_recipe",
    "train_recipe",
    "worst_ratio_cell",
]


@dataclass
class TestbedSettings:
    """One comparison's settings: the same for every recipe (so only the recipe differs)."""

    base_model: str = "testbed:formats"  # the base model that has seen the methods' prompt formats (base.py)
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
    check_eval: int = 64  # tasks (one sample each) per condition of a method check (budget, target, tier)
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
    and `pass@1`-style `accuracy` (mean over samples), and `tight_truncated_fraction`: the share of completions that
    have not ended (EOS) within `tight_cap` = `TIGHT_CAP_FRACTION` x `max_new_tokens` tokens, i.e. those a generation
    capped there would truncate (sampling is token by token, so the first `tight_cap` tokens are the same)."""
    from ..eval.evaluate import EvalMode, TransformersBackend, build_prompt_text
    from .analysis import analyze_completion, summarize
    from .data import task_from_row

    backend = TransformersBackend(model, tokenizer, batch_size=batch_size, show_progress=show_progress)
    rows = list(dataset)
    prompts = [build_prompt_text(r["prompt"], EvalMode(), tokenizer) for r in rows]
    generations = backend.generate(prompts, num_samples, max_new_tokens, temperature, top_p, seed, "testbed eval")
    from .checks import TIGHT_CAP_FRACTION

    tight_cap = int(max_new_tokens * TIGHT_CAP_FRACTION)
    records, truncated, tight = [], [], []
    for row, samples in zip(rows, generations, strict=True):
        task = task_from_row(row)
        for g in samples:
            records.append(analyze_completion(task, g.ids, tokenizer, text=g.text))
            truncated.append(not g.finished)
            tight.append(not (g.finished and len(g.ids) <= tight_cap))
    out = summarize(records)
    out["truncated_fraction"] = sum(truncated) / len(truncated) if truncated else 0.0
    out["tight_cap"] = tight_cap
    out["tight_truncated_fraction"] = sum(tight) / len(tight) if tight else 0.0
    out["num_samples"] = len(records)
    return out


def evaluate_modes(model, tokenizer, dataset, modes, max_new_tokens: int = 192, temperature: float = 0.6,
                   top_p: float = 0.95, seed: int = 0, batch_size: int = 64) -> dict:  # fmt: skip
    """One sample per task under each `EvalMode` (a budget prefill, a target in the prompt, a system prompt):
    `{mode.name: {"value", "lengths", "thinking", "accuracy"}}` with per-sample generated tokens and thinking tokens
    (up to the last `</think>`). Feeds `checks.method_check`."""
    from ..core.lengths import LengthMeter
    from ..eval.evaluate import TransformersBackend, build_prompt_text
    from ..rewards import is_correct

    backend = TransformersBackend(model, tokenizer, batch_size=batch_size, show_progress=False)
    meter = LengthMeter("tokens", "thinking", tokenizer)
    rows = list(dataset)
    out = {}
    for mode in modes:
        prompts = [build_prompt_text(r["prompt"], mode, tokenizer) for r in rows]
        gens = backend.generate(prompts, 1, max_new_tokens, temperature, top_p, seed, f"check {mode.name}")
        samples = [(row, g) for row, (g,) in zip(rows, gens, strict=True)]
        correct = [bool(is_correct(g.text, row["solution"])) for row, g in samples]
        out[mode.name] = {
            "value": mode.value,
            "lengths": [len(g.ids) for _, g in samples],
            "thinking": [meter.thinking_tokens(g.ids) for _, g in samples],
            "accuracy": sum(correct) / len(correct) if correct else None,
        }
    return out


# ---------------------------------------------------------------------------------------------------------------
# Training one recipe
# ---------------------------------------------------------------------------------------------------------------


def scaled_recipe(recipe: Recipe, scale) -> Recipe:
    """`recipe` with the testbed scale's reward kwargs merged into its `RewardSpec`s (`Recipe.with_reward_kwargs`)."""
    return recipe.with_reward_kwargs(scale.reward_kwargs, f"the testbed scale of {recipe.name!r}")


def num_generations_for(scale, settings: TestbedSettings) -> int:
    return scale.num_generations or settings.num_generations


def build_config(recipe, settings: TestbedSettings, output_dir: str, overrides: dict | None = None, scale=None):
    """The recipe's `EfficientGRPOConfig` on the testbed: recipe overrides < testbed scale < common settings <
    `settings.extra` < `overrides`. Every recipe trains on the same number of prompts per step
    (`per_device_train_batch_size / num_generations` of the settings); a recipe with its own G samples more."""
    from ..trainer import EfficientGRPOConfig
    from .scaling import apply_scale, recipe_scale

    scale = scale or recipe_scale(recipe.name, settings.max_completion_length, settings.max_steps)
    g = num_generations_for(scale, settings)
    prompts_per_step = max(1, settings.per_device_train_batch_size // settings.num_generations)
    kwargs = apply_scale(recipe.config_overrides, scale)
    kwargs.update(
        output_dir=output_dir,
        max_steps=settings.max_steps,
        per_device_train_batch_size=prompts_per_step * g,
        num_generations=g,
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


def _saber_profile(base_path: str, tokenizer, train_dataset, settings: TestbedSettings) -> list[dict]:
    """SABER's profile step on the testbed: the base model, one sample per training task, cap + 1 tokens (so a
    thinking length at the cap is told apart from a longer one)."""
    from transformers import AutoModelForCausalLM

    from ..methods.saber import profile_dataset

    model = AutoModelForCausalLM.from_pretrained(base_path)
    return profile_dataset(model, tokenizer, train_dataset, max_new_tokens=settings.max_completion_length + 1,
                           batch_size=64, temperature=settings.eval_temperature, top_p=settings.eval_top_p,
                           seed=settings.seed, show_progress=False)  # fmt: skip


def _frugal_pass_rates(base_path: str, tokenizer, train_dataset, settings: TestbedSettings, n: int = 4) -> list[dict]:
    """Frugal-Thinking's curation step on the testbed: the base model's pass rate on each training task from `n`
    samples at the cap, at the training temperature (methods.md §30: 16 samples at 16k; 4 on tiny setups)."""
    from transformers import AutoModelForCausalLM

    from ..methods.frugal import estimate_pass_rate

    model = AutoModelForCausalLM.from_pretrained(base_path)
    return estimate_pass_rate(model, tokenizer, train_dataset, n=n, max_new_tokens=settings.max_completion_length,
                              batch_size=64, temperature=settings.temperature, seed=settings.seed,
                              show_progress=False)  # fmt: skip


def train_recipe(recipe_name: str, settings: TestbedSettings, output_dir: str, train_dataset=None,
                 overrides: dict | None = None, reward_overrides: dict | None = None) -> dict:  # fmt: skip
    """Train `recipe_name` at its testbed scale (`testbed.scaling`) from the base model for `settings.max_steps`
    GRPO steps; save the model to `output_dir`. `overrides`: `EfficientGRPOConfig` fields on top of everything;
    `reward_overrides`: `{builder: {kwarg: value}}` merged into the recipe's scaled `RewardSpec`s (`"weight"` sets the
    spec's weight; `Recipe.with_reward_kwargs`). Returns `{"seconds", "log_history", "recipe_scale", "model"}`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..recipes import get_recipe
    from .base import resolve_base_model
    from .data import load_testbed_dataset
    from .scaling import recipe_scale, resolve_placeholders

    scale = recipe_scale(recipe_name, settings.max_completion_length, settings.max_steps)
    recipe = scaled_recipe(get_recipe(recipe_name), scale).with_reward_kwargs(reward_overrides, "reward overrides")
    base = resolve_base_model(settings.base_model)
    tokenizer = AutoTokenizer.from_pretrained(base)
    args = build_config(recipe, settings, output_dir, overrides, scale)
    if train_dataset is None:
        train_dataset = load_testbed_dataset(
            "train", settings.num_train, settings.seed, settings.min_ops, settings.max_ops
        )
    if scale.num_train is not None and scale.num_train < len(train_dataset):
        train_dataset = train_dataset.select(range(scale.num_train))  # the recipe's own task count (its rule)
    recipe_kwargs = resolve_placeholders(dict(scale.recipe_kwargs), base)
    if "saber_profile" in scale.needs:
        recipe_kwargs["profile"] = _saber_profile(base, tokenizer, train_dataset, settings)
    if "frugal_pass_rates" in scale.needs:
        recipe_kwargs["pass_rates"] = _frugal_pass_rates(base, tokenizer, train_dataset, settings)
    train_dataset = recipe.apply_prepare_dataset(train_dataset, args, tokenizer, **recipe_kwargs)
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
    return {"seconds": round(seconds, 1), "log_history": trainer.state.log_history,
            "testbed_scale": scale.to_dict(), "model": trainer.model}  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------------------------


def _row(name: str, summary: dict, seconds: float | None = None, num_generations: int | None = None) -> dict:
    """One table row from `evaluate_testbed`'s summary; per difficulty k also the accuracy and the tokens-to-floor
    ratio (`analysis.floor_ratio_by_difficulty`), from which the worst-ratio column and the per-difficulty plot are
    drawn."""
    from .analysis import accuracy_by_difficulty, floor_ratio_by_difficulty

    return {
        "recipe": name,
        "status": "ok",
        "num_generations": num_generations,
        "accuracy": summary["accuracy"],
        "mean_tokens": summary["mean_tokens"],
        "std_tokens": summary.get("std_tokens"),
        "num_samples": summary.get("n"),
        "mean_floor_tokens": summary["mean_floor_tokens"],
        "excess_over_floor": summary["excess_over_floor"],
        "redundant_share": summary["redundant_share"],
        "skips_per_completion": summary["skips_per_completion"],
        "truncated_fraction": summary["truncated_fraction"],
        "tight_cap": summary.get("tight_cap"),
        "tight_truncated_fraction": summary.get("tight_truncated_fraction"),
        "train_seconds": seconds,
        "by_difficulty": summary["by_difficulty"],
        "accuracy_by_difficulty": accuracy_by_difficulty(summary["by_difficulty"]),
        "floor_ratio_by_difficulty": floor_ratio_by_difficulty(summary["by_difficulty"]),
    }


def failed_row(name: str, error: BaseException, num_generations: int | None = None) -> dict:
    """The row of a recipe that raised: `status` "failed" and its error on one line.

    >>> failed_row("x", ValueError("bad\\nthing"))["error"]
    'ValueError: bad thing'
    """
    message = " ".join(str(error).split())
    if len(message) > 300:
        message = message[:297] + "..."
    return {"recipe": name, "status": "failed", "num_generations": num_generations,
            "error": f"{type(error).__name__}: {message}" if message else type(error).__name__}  # fmt: skip


MISSING = "—"  # a value the row does not have (rows written before the field existed)


def row_reference(row: dict, rows: list[dict]) -> dict | None:
    """The row `row` is compared with (as the method checks do): `grpo` when the rows have it, else the base model;
    the base model for `grpo` itself; `None` for the reference itself (the base model)."""
    reference, _ = _reference(rows)
    if reference is row or row["recipe"] == "base":
        reference = None if row["recipe"] == "base" else next(
            (r for r in rows if r["recipe"] == "base" and r.get("status", "ok") == "ok"), None
        )  # fmt: skip
    return reference


def worst_ratio_cell(row: dict, rows: list[dict]) -> str:
    """`"1.32 (k=7)"`: `analysis.worst_ratio_at_kept_accuracy` of `row` against `row_reference`; `—` when no k keeps
    the reference's accuracy or the row (or its reference) predates the per-difficulty fields."""
    from .analysis import worst_ratio_at_kept_accuracy

    reference = row_reference(row, rows)
    if reference is not None and not reference.get("accuracy_by_difficulty"):
        return MISSING
    worst = worst_ratio_at_kept_accuracy(row, reference)
    return MISSING if worst is None else f"{worst[0]:.2f} (k={worst[1]})"


def _secs(value) -> str:
    return "-" if value is None else f"{value:.0f}"


def _held(value) -> str:
    return {True: "held", False: "**not held**", None: "inconclusive"}[value]


def compare_markdown(rows: list[dict], settings: dict | None = None, scales: dict | None = None) -> str:
    """The comparison table (failed recipes as rows with their error), the method checks, tokens by difficulty
    (mean tokens / accuracy per number of operations) and the testbed scaling rule of every recipe."""
    head = ["recipe", "G", "accuracy", "mean tokens", "floor", "excess over floor", "worst tokens/floor (k)",
            "redundant share", "skips/compl.", "truncated", "method check", "train s"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ok_rows = [r for r in rows if r.get("status", "ok") == "ok"]
    for r in rows:
        g = "-" if r.get("num_generations") is None else str(r["num_generations"])
        if r.get("status", "ok") != "ok":
            error = r["error"].replace("|", "\\|")
            lines.append(f"| {r['recipe']} | {g} | **failed**: {error} |" + " |" * (len(head) - 3))
            continue
        check = r.get("method_check") or {}
        verdict = _held(check["held"]) if check.get("claim") not in (None, "baseline") else "-"
        lines.append(
            f"| {r['recipe']} | {g} | {r['accuracy']:.3f} | {r['mean_tokens']:.1f} | {r['mean_floor_tokens']:.1f} | "
            f"{r['excess_over_floor']:.1f} | {worst_ratio_cell(r, rows)} | {r['redundant_share']:.3f} | "
            f"{r['skips_per_completion']:.2f} | "
            f"{r['truncated_fraction']:.3f} | {verdict} | "
            f"{_secs(r['train_seconds'])} |"
        )
    checked = [r for r in ok_rows if r.get("method_check")]
    if checked:
        lines += ["", "Method checks (does the method do on the testbed what its paper says?):", "",
                  "| recipe | claim | measured | result |", "|---|---|---|---|"]  # fmt: skip
        for r in checked:
            c = r["method_check"]
            if c.get("claim") == "baseline":
                continue
            cells = [str(c[k]).replace("|", "\\|") for k in ("claim", "measured")]  # a "|" would split the cell
            lines.append(f"| {r['recipe']} | {cells[0]} | {cells[1]} | {_held(c['held'])} |")
    levels = sorted({d for r in ok_rows for d in r["by_difficulty"]}, key=int)
    if levels:
        lines += ["", "Mean tokens (accuracy) by difficulty = number of operations; floor = shortest correct trace:",
                  ""]  # fmt: skip
        head = ["recipe", *[f"{d} ops" for d in levels]]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        floor_row = ["floor"] + [
            next((f"{r['by_difficulty'][d]['mean_floor_tokens']:.1f}" for r in ok_rows if d in r["by_difficulty"]),
                 "-")
            for d in levels
        ]  # fmt: skip
        lines.append("| " + " | ".join(floor_row) + " |")
        for r in ok_rows:
            cells = [r["recipe"]] + [
                f"{r['by_difficulty'][d]['mean_tokens']:.1f} ({r['by_difficulty'][d]['accuracy']:.2f})"
                if d in r["by_difficulty"] else "-" for d in levels
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    if any(worst_ratio_cell(r, rows) != MISSING for r in ok_rows):
        lines += ["", "worst tokens/floor (k): the largest ratio of mean tokens to the floor over the difficulties k "
                  f"where the recipe keeps the accuracy of {_reference(rows)[1]} (base for grpo; the base model over "
                  "all k) within max(0.04, two standard errors), and that k: how much it still over-thinks where "
                  "thinking less would cost it nothing (plot: per_difficulty.png)."]  # fmt: skip
    if scales:
        cap = (settings or {}).get("max_completion_length", "the cap")
        lines += ["", f"Testbed scaling rules (trl_efficient/testbed/scaling.py; cap = {cap} tokens):", ""]
        lines += [f"- `{name}`: {scales[name]['rule']}" for name in scales]
    if settings:
        lines += ["", "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items() if k != "extra")]
        if settings.get("extra"):
            lines[-1] += f", extra={settings['extra']}"
    return "\n".join(lines) + "\n"


def compare(recipes: list[str], settings: TestbedSettings | None = None, output_dir: str = "outputs/testbed",
            overwrite: bool = False, keep_models: bool = False, include_base: bool = True) -> dict:  # fmt: skip
    """Train each recipe from the same base with the same budget of steps, evaluate all on the same held-out
    tasks, and write `compare.json`, `compare.md`, `pareto.png` and `per_difficulty.png` under `output_dir`.
    Per-recipe results are cached in `<output_dir>/<recipe>/result.json` (reused unless `overwrite`, and only when
    the settings, the recipe's testbed scale and the base model's directory, which names its config hash, are
    unchanged). A recipe that raises becomes a `failed_row`; the others still run.
    Runs offline (`HF_HUB_OFFLINE=1`) with `torch_threads()`. Returns `{"rows", "files", "failed"}`."""
    from ..recipes import get_recipe
    from .scaling import recipe_scale

    settings = settings or TestbedSettings()
    for name in recipes:
        get_recipe(name)  # fail fast on a typo, before any training
        recipe_scale(name, settings.max_completion_length, settings.max_steps)  # and on a recipe without a rule
    with torch_threads(), hub_offline():
        return _compare(recipes, settings, output_dir, overwrite, keep_models, include_base)


@contextlib.contextmanager
def hub_offline():
    """No network for the duration: `HF_HUB_OFFLINE=1` (environment and huggingface_hub's constant), restored."""
    before = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import huggingface_hub.constants as hub_constants
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        hub_constants = None
    constant = getattr(hub_constants, "HF_HUB_OFFLINE", None)
    if hub_constants is not None:
        hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = before
        if hub_constants is not None and constant is not None:
            hub_constants.HF_HUB_OFFLINE = constant


def _reference(rows: list[dict]) -> tuple[dict | None, str]:
    for name in ("grpo", "base"):
        ref = next((r for r in rows if r["recipe"] == name and r.get("status", "ok") == "ok"), None)
        if ref is not None:
            return ref, name
    return None, "-"


def _compare(recipes, settings, output_dir, overwrite, keep_models, include_base) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..eval.plots import pareto_plot
    from .base import resolve_base_model
    from .checks import CONDITIONED, check_modes, method_check
    from .data import load_testbed_dataset
    from .scaling import recipe_scale

    os.makedirs(output_dir, exist_ok=True)
    base_path = resolve_base_model(settings.base_model)
    tokenizer = AutoTokenizer.from_pretrained(base_path)
    eval_ds = load_testbed_dataset("test", settings.num_eval, settings.seed, settings.min_ops, settings.max_ops)
    check_ds = eval_ds.select(range(min(settings.check_eval, len(eval_ds))))
    sampling = dict(max_new_tokens=settings.max_completion_length, temperature=settings.eval_temperature,
                    top_p=settings.eval_top_p, seed=settings.seed)  # fmt: skip
    rows, modes_by_recipe, scales = [], {}, {}
    names = (["base"] if include_base else []) + list(recipes)
    # the base model is also evaluated under every conditioned recipe's prompts: their checks measure the change
    base_modes = {}
    for name in recipes:
        if name in CONDITIONED:
            for mode in check_modes(name, recipe_scale(name, settings.max_completion_length, settings.max_steps)):
                base_modes.setdefault(mode.name, mode)
    for name in names:
        scale = None if name == "base" else recipe_scale(name, settings.max_completion_length, settings.max_steps)
        g = None if scale is None else num_generations_for(scale, settings)
        if scale is not None:
            scales[name] = scale.to_dict()
        # the base model's directory names its config hash: a retrained base (new world rule) invalidates the cache
        key = {"settings": settings.to_dict(), "testbed_scale": scales.get(name),
               "base_model_dir": os.path.basename(os.path.normpath(base_path))}  # fmt: skip
        if name == "base":
            key["check_modes"] = sorted(base_modes)
        folder = os.path.join(output_dir, name)
        cached = os.path.join(folder, "result.json")
        if os.path.isfile(cached) and not overwrite:
            with open(cached) as f:
                saved = json.load(f)
            recorded = saved.get("check_modes") or {}
            if (saved.get("settings") == key["settings"] and saved.get("testbed_scale") == key["testbed_scale"]
                    and saved.get("base_model_dir") == key["base_model_dir"]
                    and all(m in recorded for m in key.get("check_modes", ()))):  # fmt: skip
                rows.append(saved["row"])
                modes_by_recipe[name] = saved.get("check_modes") or {}
                logger.info("testbed: reusing %s", cached)
                continue
        os.makedirs(folder, exist_ok=True)
        try:
            seconds, info = None, {}
            if name == "base":
                model = AutoModelForCausalLM.from_pretrained(base_path)
            else:
                logger.info("testbed: training %s for %d steps (G=%d)", name, settings.max_steps, g)
                info = train_recipe(name, settings, folder)
                model, seconds = info.pop("model"), info["seconds"]
                if not keep_models:
                    for f_name in os.listdir(folder):
                        if f_name.endswith((".safetensors", ".bin")):
                            os.remove(os.path.join(folder, f_name))
            with torch.no_grad():
                summary = evaluate_testbed(model, tokenizer, eval_ds, num_samples=settings.eval_samples, **sampling)
                modes = check_modes(name, scale) if scale is not None else list(base_modes.values())
                mode_records = evaluate_modes(model, tokenizer, check_ds, modes, **sampling) if modes else {}
        except Exception as err:  # noqa: BLE001 - one recipe's failure must not lose the others
            logger.exception("testbed: %s failed", name)
            rows.append(failed_row(name, err, g))
            continue
        row = _row(name, summary, seconds, g)
        rows.append(row)
        modes_by_recipe[name] = mode_records
        key.pop("check_modes", None)
        with open(cached, "w") as f:
            json.dump({**key, "row": row, "summary": summary, "check_modes": mode_records,
                       "log_history": info.get("log_history")}, f, indent=1)  # fmt: skip
        logger.info("testbed: %s accuracy %.3f mean tokens %.1f redundant share %.3f", name, row["accuracy"],
                    row["mean_tokens"], row["redundant_share"])  # fmt: skip
    reference, reference_name = _reference(rows)
    base_row = next((r for r in rows if r["recipe"] == "base" and r.get("status", "ok") == "ok"), None)
    for row in rows:
        if row["recipe"] != "base" and row.get("status", "ok") == "ok":
            ref = reference if reference is not row else next((r for r in rows if r["recipe"] == "base"), None)
            ref_name = reference_name if reference is not row else "base"
            row["method_check"] = method_check(row["recipe"], row, modes_by_recipe.get(row["recipe"], {}), ref,
                                               ref_name, base_row, modes_by_recipe.get("base"))  # fmt: skip
    failed = [r["recipe"] for r in rows if r.get("status", "ok") != "ok"]
    files = {"json": os.path.join(output_dir, "compare.json"), "markdown": os.path.join(output_dir, "compare.md")}
    with open(files["json"], "w") as f:
        json.dump({"settings": settings.to_dict(), "scales": scales, "rows": rows}, f, indent=1)
    with open(files["markdown"], "w") as f:
        f.write(compare_markdown(rows, settings.to_dict(), scales))
    ok_rows = [r for r in rows if r.get("status", "ok") == "ok"]
    floor = ok_rows[0]["mean_floor_tokens"] if ok_rows else None
    plot = (
        pareto_plot(
            ok_rows,
            os.path.join(output_dir, "pareto.png"),
            group_key="recipe",
            label_key=None,
            title=f"Testbed: accuracy vs tokens after {settings.max_steps} GRPO steps",
            reference_x={"floor (shortest correct traces)": floor} if floor else None,
        )
        if ok_rows
        else None
    )
    if plot:
        files["plot"] = plot
    per_k = [r for r in ok_rows if r.get("floor_ratio_by_difficulty")]
    if per_k:
        from .plots import per_difficulty_plot

        title = f"Testbed after {settings.max_steps} GRPO steps"
        files["per_difficulty"] = per_difficulty_plot(per_k, os.path.join(output_dir, "per_difficulty.png"), title)
    return {"rows": rows, "files": files, "failed": failed}


def render_compare_json(path: str) -> str:
    """`compare.md` from a `compare.json` (what `compare` wrote), so a committed table can be checked against its
    data."""
    with open(path) as f:
        data = json.load(f)
    return compare_markdown(data["rows"], data.get("settings"), data.get("scales"))
