"""
Train recipes on the testbed and measure them: `evaluate_testbed`, `train_recipe`, `compare`.

`compare(["grpo", "kimi", "shorter-better"], TestbedSettings())` trains every recipe with `settings.seeds` training
seeds from the same base model with the same data and number of GRPO steps (recipes come from
`trl_efficient.recipes`, built exactly as `trl-efficient train` builds them: the recipe's config overrides, its reward
functions and weights, its trainer class and dataset preparation), evaluates the base model and every trained model
on the same held-out tasks with the same sampling streams (paired: `sampling`), and writes `compare.json`,
`compare.md`, `pareto.png`, `per_difficulty.png` and `checks.png`. Every number of a row is a mean with its 95%
bootstrap interval over tasks and seeds (`stats`), every recipe-minus-reference difference is paired by task and
seed. The runs are `jobs.Job`s: resumable, and run on several processes with `workers`.

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
    """One comparison's settings: the same for every recipe (so only the recipe differs).

    `seed` seeds the data (training and evaluation tasks), the evaluation's sampling streams and the bootstrap; the
    recipes train with `seeds` training seeds `seed, seed + 1, ...` (each seeds its training tasks, the GRPO sampling
    and the data order). Every model is evaluated on the same `num_eval` tasks with `eval_samples` samples each,
    drawn from the same per-(task, sample) streams (`sampling.sample_seed`); `bootstrap` resamples give the 95%
    intervals (`stats`)."""

    base_model: str = "testbed:formats"  # the base model that has seen the methods' prompt formats (base.py)
    max_steps: int = 40
    num_train: int = 1024
    num_eval: int = 1024
    eval_samples: int = 1  # samples per eval task
    per_device_train_batch_size: int = 32
    num_generations: int = 8
    max_completion_length: int = 192
    learning_rate: float = 1e-4
    temperature: float = 1.0
    eval_temperature: float = 0.6
    eval_top_p: float = 0.95
    beta: float = 0.0
    seed: int = 0
    seeds: int = 3  # training seeds per recipe: seed, seed + 1, ..., seed + seeds - 1
    min_ops: int = 1
    max_ops: int = 8
    check_eval: int = 256  # the first check_eval eval tasks (one sample each) per condition of a method check
    bootstrap: int = 2000  # bootstrap resamples of every interval
    extra: dict = field(default_factory=dict)  # more EfficientGRPOConfig fields, for every recipe

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def training_seeds(self) -> list[int]:
        """`[seed, seed + 1, ..., seed + seeds - 1]`.

        >>> TestbedSettings(seed=5, seeds=3).training_seeds()
        [5, 6, 7]
        """
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}.")
        return [self.seed + i for i in range(self.seeds)]


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


def _paired_generations(model, tokenizer, rows, mode, num_samples, max_new_tokens, temperature, top_p, seed,
                        batch_size, show_progress=False) -> list[list[tuple[list[int], str, bool]]]:  # fmt: skip
    """`num_samples` completions `(ids, text, finished)` of every row under `mode`, sample j of task i drawn from the
    stream `sampling.sample_seed(seed, i, j)` (the same for every model: evaluations are paired)."""
    from ..eval.evaluate import build_prompt_text
    from .sampling import generate_paired, sample_seed

    prompt_ids = [tokenizer(build_prompt_text(r["prompt"], mode, tokenizer), add_special_tokens=False)["input_ids"]
                  for r in rows]  # fmt: skip
    eos = model.generation_config.eos_token_id
    eos_ids = [eos] if isinstance(eos, int) else list(eos or [tokenizer.eos_token_id])
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    flat = [ids for ids in prompt_ids for _ in range(num_samples)]
    seeds = [sample_seed(seed, i, j) for i in range(len(rows)) for j in range(num_samples)]
    gens = generate_paired(model, flat, seeds, max_new_tokens, eos_ids, pad_id, temperature, top_p, batch_size,
                           show_progress=show_progress)  # fmt: skip
    out = [(ids, tokenizer.decode(ids, skip_special_tokens=True), bool(ids) and ids[-1] in eos_ids) for ids in gens]
    return [out[i * num_samples : (i + 1) * num_samples] for i in range(len(rows))]


def evaluate_testbed(model, tokenizer, dataset, num_samples: int = 2, max_new_tokens: int = 192,
                     temperature: float = 0.6, top_p: float = 0.95, seed: int = 0, batch_size: int = 128,
                     show_progress: bool = False) -> dict:  # fmt: skip
    """Sample `num_samples` completions per task (paired streams: `sampling.sample_seed(seed, task, sample)`) and
    return `analysis.summarize` of their exact token accounting (accuracy, mean tokens, redundant share, floor, excess
    over floor, per difficulty), plus `truncated_fraction`, `pass@1`-style `accuracy` (mean over samples),
    `tight_truncated_fraction` (the share of completions that have not ended (EOS) within `tight_cap` =
    `TIGHT_CAP_FRACTION` x `max_new_tokens` tokens, i.e. those a generation capped there would truncate: sampling is
    token by token, so the first `tight_cap` tokens are the same), and `records`: one entry per completion, as
    columns (`task`, `sample`, `difficulty`, `tokens`, `correct`, `redundant_tokens`, `floor_tokens`, `num_skips`,
    `truncated`, `tight_truncated`, `useful_checks`, `useless_checks`), from which `stats.Panel` builds the
    per-(seed, task) cells of the intervals."""
    from ..eval.evaluate import EvalMode
    from .analysis import analyze_completion, summarize
    from .checks import TIGHT_CAP_FRACTION
    from .data import task_from_row

    rows = list(dataset)
    generations = _paired_generations(model, tokenizer, rows, EvalMode(), num_samples, max_new_tokens, temperature,
                                      top_p, seed, batch_size, show_progress)  # fmt: skip
    tight_cap = int(max_new_tokens * TIGHT_CAP_FRACTION)
    records, columns = [], {k: [] for k in RECORD_COLUMNS}
    for i, (row, samples) in enumerate(zip(rows, generations, strict=True)):
        task = task_from_row(row)
        for j, (ids, text, finished) in enumerate(samples):
            rec = analyze_completion(task, ids, tokenizer, text=text)
            records.append(rec)
            values = {"task": i, "sample": j, "truncated": int(not finished),
                      "tight_truncated": int(not (finished and len(ids) <= tight_cap)),
                      "correct": int(rec["correct"])}  # fmt: skip
            for key in RECORD_COLUMNS:
                columns[key].append(values[key] if key in values else rec.get(key, 0))
    out = summarize(records)
    n = len(records)
    out["truncated_fraction"] = sum(columns["truncated"]) / n if n else 0.0
    out["tight_cap"] = tight_cap
    out["tight_truncated_fraction"] = sum(columns["tight_truncated"]) / n if n else 0.0
    out["num_samples"] = n
    out["records"] = columns
    return out


# the per-completion columns of `evaluate_testbed`'s records (`useful_checks` / `useless_checks`: 0 until the world's
# analysis counts them)
RECORD_COLUMNS = ("task", "sample", "difficulty", "tokens", "correct", "redundant_tokens", "floor_tokens", "num_skips",
                  "truncated", "tight_truncated", "useful_checks", "useless_checks")  # fmt: skip


def evaluate_modes(model, tokenizer, dataset, modes, max_new_tokens: int = 192, temperature: float = 0.6,
                   top_p: float = 0.95, seed: int = 0, batch_size: int = 128) -> dict:  # fmt: skip
    """One sample per task under each `EvalMode` (a budget prefill, a target in the prompt, a system prompt), task i
    drawn from the stream `sampling.sample_seed(seed, i, 0)` under every mode and for every model (so differences
    between modes and between models are paired by task): `{mode.name: {"value", "lengths", "thinking", "correct",
    "accuracy"}}` with per-sample generated tokens, thinking tokens (up to the last `</think>`) and correctness.
    Feeds `checks.method_check`."""
    from ..core.lengths import LengthMeter
    from ..rewards import is_correct

    meter = LengthMeter("tokens", "thinking", tokenizer)
    rows = list(dataset)
    out = {}
    for mode in modes:
        gens = _paired_generations(model, tokenizer, rows, mode, 1, max_new_tokens, temperature, top_p, seed,
                                   batch_size)  # fmt: skip
        samples = [(row, g) for row, (g,) in zip(rows, gens, strict=True)]
        correct = [int(bool(is_correct(text, row["solution"]))) for row, (_, text, _) in samples]
        out[mode.name] = {
            "value": mode.value,
            "lengths": [len(ids) for _, (ids, _, _) in samples],
            "thinking": [meter.thinking_tokens(ids) for _, (ids, _, _) in samples],
            "correct": correct,
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


# row field: (numerator record, denominator record or None); a ratio of sums when there is a denominator
ROW_METRICS = {
    "accuracy": ("correct", None),
    "mean_tokens": ("tokens", None),
    "mean_floor_tokens": ("floor_tokens", None),
    "excess_over_floor": ("excess", None),
    "redundant_share": ("redundant_tokens", "tokens"),
    "skips_per_completion": ("num_skips", None),
    "truncated_fraction": ("truncated", None),
    "tight_truncated_fraction": ("tight_truncated", None),
    "useful_checks": ("useful_checks", None),
    "useless_checks": ("useless_checks", None),
}
DIFFICULTY_METRICS = {  # per difficulty k: the same, over the tasks of difficulty k
    "accuracy": ("correct", None),
    "mean_tokens": ("tokens", None),
    "mean_floor_tokens": ("floor_tokens", None),
    "redundant_share": ("redundant_tokens", "tokens"),
    "floor_ratio": ("tokens", "floor_tokens"),
    "useful_checks": ("useful_checks", None),
    "useless_checks": ("useless_checks", None),
}


def _estimate(panel, boot, num: str, den: str | None, mask=None) -> tuple:
    import numpy as np

    from .stats import interval, wratio

    x = panel.metrics[num]
    d = np.ones_like(x) if den is None else panel.metrics[den]
    return interval(boot, lambda w, v: wratio(x, d, w, v, mask))


def _difference(panel, reference, resamples: int, seed: int, num: str, den: str | None = None, mask=None) -> list:
    """`[point, low, high]` of `panel - reference` (paired: `Panel.aligned`, one joint resample for both)."""
    import numpy as np

    from .stats import Bootstrap, interval, wratio

    a, b = panel.aligned(reference)
    xa, xb = a.metrics[num], b.metrics[num]
    da = np.ones_like(xa) if den is None else a.metrics[den]
    db = np.ones_like(xb) if den is None else b.metrics[den]
    boot = Bootstrap(len(a.seeds), a.num_tasks, resamples, seed)
    return list(interval(boot, lambda w, v: wratio(xa, da, w, v, mask) - wratio(xb, db, w, v, mask)))


def panel_row(name: str, panel, settings: TestbedSettings, reference=None, reference_name: str | None = None,
              train_seconds: float | None = None, num_generations: int | None = None,
              tight_cap: int | None = None) -> dict:  # fmt: skip
    """One table row from a model's per-(seed, task) `stats.Panel`: every `ROW_METRICS` field is the point estimate
    (the mean over seeds and tasks, a ratio of sums for the shares) and `ci[field]` its 95% bootstrap interval
    (tasks and seeds resampled jointly, `settings.bootstrap` resamples seeded with `settings.seed`); per difficulty k
    the same for `DIFFICULTY_METRICS` (`by_difficulty[k]`, with `accuracy_by_difficulty`, `floor_ratio_by_difficulty`
    and `ci_by_difficulty`). With a `reference` panel, `vs_reference` holds the paired differences (this - the
    reference: per task and seed) of mean tokens and accuracy, overall and per k, as `[point, low, high]`."""
    from .stats import Bootstrap

    boot = Bootstrap(len(panel.seeds), panel.num_tasks, settings.bootstrap, settings.seed)
    row = {"recipe": name, "status": "ok", "num_generations": num_generations,
           "seeds": [s for s in panel.seeds if s is not None], "num_tasks": panel.num_tasks,
           "num_samples": len(panel.seeds) * panel.num_tasks * panel.samples, "tight_cap": tight_cap,
           "train_seconds": train_seconds}  # fmt: skip
    ci = {}
    for field_name, (num, den) in ROW_METRICS.items():
        point, low, high = _estimate(panel, boot, num, den)
        row[field_name], ci[field_name] = point, [low, high]
    row["ci"] = ci
    by, ci_by = {}, {key: {} for key in DIFFICULTY_METRICS}
    for k in sorted(set(panel.difficulty.tolist())):
        mask = panel.difficulty == k
        cell = {"n": int(mask.sum()) * len(panel.seeds) * panel.samples, "ci": {}}
        for key, (num, den) in DIFFICULTY_METRICS.items():
            point, low, high = _estimate(panel, boot, num, den, mask)
            cell[key], cell["ci"][key] = point, [low, high]
            ci_by[key][str(k)] = [low, high]
        by[str(k)] = cell
    row["by_difficulty"] = by
    row["accuracy_by_difficulty"] = {k: c["accuracy"] for k, c in by.items()}
    row["floor_ratio_by_difficulty"] = {k: c["floor_ratio"] for k, c in by.items()}
    row["ci_by_difficulty"] = ci_by
    if reference is not None:
        args = (settings.bootstrap, settings.seed)
        row["vs_reference"] = {
            "reference": reference_name,
            "mean_tokens": _difference(panel, reference, *args, "tokens"),
            "accuracy": _difference(panel, reference, *args, "correct"),
            "accuracy_by_difficulty": {
                str(k): _difference(panel, reference, *args, "correct", mask=panel.difficulty == k)
                for k in sorted(set(panel.difficulty.tolist()))
            },
        }
    return row


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


def worst_ratio_with_intervals(row: dict) -> tuple[float, str] | None:
    """`(ratio, k)`: the largest tokens-to-floor ratio over the difficulties k where a row with intervals keeps its
    reference's accuracy: the upper end of the interval of the paired accuracy difference at k
    (`vs_reference["accuracy_by_difficulty"][k]`) is >= -`checks.ACCURACY_TOLERANCE` (it is not decisively less
    accurate by more than the tolerance). A row without a reference (the base model) takes every k.

    >>> row = {"floor_ratio_by_difficulty": {"1": 1.5, "2": 2.0},
    ...        "vs_reference": {"accuracy_by_difficulty": {"1": [0.0, -0.03, 0.03], "2": [-0.2, -0.3, -0.1]}}}
    >>> worst_ratio_with_intervals(row)  # k=2 is decisively 0.1-0.3 less accurate: only k=1 counts
    (1.5, '1')
    """
    from .checks import ACCURACY_TOLERANCE

    ratios = row.get("floor_ratio_by_difficulty") or {}
    diffs = (row.get("vs_reference") or {}).get("accuracy_by_difficulty")
    worst = None
    for k, ratio in ratios.items():
        if ratio is None:
            continue
        if diffs is not None:
            high = (diffs.get(k) or [None, None, None])[2]
            if high is None or high < -ACCURACY_TOLERANCE:
                continue
        if worst is None or ratio > worst[0]:
            worst = (float(ratio), k)
    return worst


def worst_ratio_cell(row: dict, rows: list[dict]) -> str:
    """`"1.32 (k=7)"`: the worst ratio at kept accuracy, `worst_ratio_with_intervals` for rows with intervals, else
    `analysis.worst_ratio_at_kept_accuracy` against `row_reference` (rows written before the intervals); `—` when no
    k keeps the reference's accuracy or the row (or its reference) predates the per-difficulty fields."""
    from .analysis import worst_ratio_at_kept_accuracy

    if row.get("ci") is not None:
        worst = worst_ratio_with_intervals(row)
        return MISSING if worst is None else f"{worst[0]:.2f} (k={worst[1]})"
    reference = row_reference(row, rows)
    if reference is not None and not reference.get("accuracy_by_difficulty"):
        return MISSING
    worst = worst_ratio_at_kept_accuracy(row, reference)
    return MISSING if worst is None else f"{worst[0]:.2f} (k={worst[1]})"


def _secs(value) -> str:
    return "-" if value is None else f"{value:.0f}"


def _held(value) -> str:
    return {True: "held", False: "**not held**", None: "inconclusive"}[value]


def _num(row: dict, key: str, digits: int) -> str:
    """`0.512 [0.497, 0.527]` (the value and its 95% interval) for a row with intervals, else `0.512`."""
    value = row[key]
    low, high = ((row.get("ci") or {}).get(key) or [None, None])[:2]
    if value is None:
        return "-"
    if low is None or high is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _diff_cell(estimate, digits: int) -> str:
    if not estimate or estimate[0] is None:
        return "-"
    point, low, high = estimate
    if low is None:
        return f"{point:+.{digits}f}"
    return f"{point:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def _pm(cell: dict, key: str, digits: int) -> str:
    """`61.2±1.4`: a per-difficulty value and half the width of its interval (`61.2` without one)."""
    value = cell.get(key)
    if value is None:
        return "-"
    low, high = ((cell.get("ci") or {}).get(key) or [None, None])[:2]
    if low is None or high is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f}±{(high - low) / 2:.{digits}f}"


def compare_markdown(rows: list[dict], settings: dict | None = None, scales: dict | None = None) -> str:
    """The comparison table (failed recipes as rows with their error), the method checks, tokens by difficulty
    (mean tokens / accuracy per number of operations) and the testbed scaling rule of every recipe. Rows with
    intervals (`panel_row`) show every number as `mean [95% interval]` plus their paired differences from the
    reference; rows written before the intervals render as they always did."""
    intervals = any(r.get("ci") for r in rows)
    head = ["recipe", "G", "accuracy", "mean tokens", "floor", "excess over floor", "worst tokens/floor (k)",
            "redundant share", "skips/compl.", "truncated", "method check", "train s"]  # fmt: skip
    if intervals:
        head[2:2] = ["seeds"]
        head[-2:-2] = ["Δ tokens vs ref.", "Δ accuracy vs ref."]
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
        if intervals:
            vs = r.get("vs_reference") or {}
            ref = f" ({vs['reference']})" if vs.get("reference") else ""
            cells = [r["recipe"], g, str(len(r.get("seeds") or [])), _num(r, "accuracy", 3), _num(r, "mean_tokens", 1),
                     _num(r, "mean_floor_tokens", 1), _num(r, "excess_over_floor", 1), worst_ratio_cell(r, rows),
                     _num(r, "redundant_share", 3), _num(r, "skips_per_completion", 2),
                     _num(r, "truncated_fraction", 3), _diff_cell(vs.get("mean_tokens"), 1) + ref,
                     _diff_cell(vs.get("accuracy"), 3) + ref, verdict, _secs(r["train_seconds"])]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
            continue
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
        if intervals:
            judged = [r["method_check"]["held"] for r in checked
                      if r["method_check"].get("claim") not in (None, "baseline", "baseline (unbiased)")]  # fmt: skip
            counts = {v: sum(1 for held in judged if held is v) for v in (True, None, False)}
            lines += ["", f"Verdicts: {counts[True]} held, {counts[None]} inconclusive, {counts[False]} not held "
                      "(held: the 95% interval of the claimed paired difference excludes 0 on the claimed side; not "
                      "held: it excludes the claimed side or lies within the equivalence margin; "
                      "trl_efficient/testbed/checks.py)."]  # fmt: skip
    levels = sorted({d for r in ok_rows for d in r["by_difficulty"]}, key=int)
    if levels:
        note = " (value±half its 95% interval)" if intervals else ""
        lines += ["", "Mean tokens (accuracy) by difficulty = number of operations; floor = shortest correct trace"
                  f"{note}:", ""]  # fmt: skip
        head = ["recipe", *[f"{d} ops" for d in levels]]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        floor_row = ["floor"] + [
            next((f"{r['by_difficulty'][d]['mean_floor_tokens']:.1f}" for r in ok_rows if d in r["by_difficulty"]),
                 "-")
            for d in levels
        ]  # fmt: skip
        lines.append("| " + " | ".join(floor_row) + " |")
        for r in ok_rows:
            if intervals:
                cells = [r["recipe"]] + [
                    f"{_pm(r['by_difficulty'][d], 'mean_tokens', 1)} ({_pm(r['by_difficulty'][d], 'accuracy', 2)})"
                    if d in r["by_difficulty"] else "-" for d in levels
                ]  # fmt: skip
            else:
                cells = [r["recipe"]] + [
                    f"{r['by_difficulty'][d]['mean_tokens']:.1f} ({r['by_difficulty'][d]['accuracy']:.2f})"
                    if d in r["by_difficulty"] else "-" for d in levels
                ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    if any(worst_ratio_cell(r, rows) != MISSING for r in ok_rows):
        if intervals:
            lines += ["", "worst tokens/floor (k): the largest ratio of mean tokens to the floor over the difficulties "
                      "k where the recipe keeps its reference's accuracy (the 95% interval of the paired accuracy "
                      "difference at k reaches above -0.04; the base model over all k), and that k: how much it "
                      "still over-thinks where thinking less would cost it nothing (plot: per_difficulty.png). "
                      "Δ: recipe minus its reference (grpo; the base for grpo), paired by task and seed."]  # fmt: skip
        else:
            lines += ["", "worst tokens/floor (k): the largest ratio of mean tokens to the floor over the difficulties "
                      f"k where the recipe keeps the accuracy of {_reference(rows)[1]} (base for grpo; the base model "
                      "over all k) within max(0.04, two standard errors), and that k: how much it still over-thinks "
                      "where thinking less would cost it nothing (plot: per_difficulty.png)."]  # fmt: skip
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
            overwrite: bool = False, keep_models: bool = False, include_base: bool = True, workers: int = 1,
            show_progress: bool = True) -> dict:  # fmt: skip
    """Train each recipe with `settings.seeds` training seeds from the same base with the same budget of steps,
    evaluate all on the same held-out tasks and sampling streams, and write `compare.json`, `compare.md`,
    `pareto.png`, `per_difficulty.png` and `checks.png` under `output_dir`. Every (recipe, seed) run and the base
    model's evaluation is a `jobs.Job` with its result file under `<output_dir>/runs/` named by the hash of its
    config: a rerun skips the finished ones (`overwrite` recomputes), `workers` > 1 runs them on that many spawned
    processes. Rows carry means and 95% bootstrap intervals (`panel_row`), checks paired differences
    (`checks.method_check`). A recipe whose run raises becomes a `failed_row`; the others still run.
    Runs offline (`HF_HUB_OFFLINE=1`) with `torch_threads()`. Returns `{"rows", "files", "failed"}`."""
    from ..recipes import get_recipe
    from .scaling import recipe_scale

    settings = settings or TestbedSettings()
    settings.training_seeds()  # fail fast on seeds < 1
    for name in recipes:
        get_recipe(name)  # fail fast on a typo, before any training
        recipe_scale(name, settings.max_completion_length, settings.max_steps)  # and on a recipe without a rule
    with torch_threads(), hub_offline():
        return _compare(recipes, settings, output_dir, overwrite, keep_models, include_base, workers, show_progress)


def plan_runs(names: list[str], settings: TestbedSettings, output_dir: str, keep_models: bool = False,
              overwrite: bool = False) -> dict[str, list]:  # fmt: skip
    """`{name: [jobs.Job, ...]}`: the base model's one evaluation (`"base"`) and every recipe's training seeds. The
    base model is resolved (trained on first use) here, before any worker starts. `overwrite` deletes their result
    files first."""
    from .base import resolve_base_model
    from .jobs import BASE, plan_job

    base_dir = os.path.basename(os.path.normpath(resolve_base_model(settings.base_model)))
    plan = {}
    for name in names:
        seeds = [None] if name == BASE else settings.training_seeds()
        plan[name] = [plan_job(name, s, settings, output_dir, base_dir, keep_models=keep_models) for s in seeds]
    if overwrite:
        for job in (j for js in plan.values() for j in js):
            if os.path.isfile(job.path):
                os.remove(job.path)
    return plan


def load_panels(plan: dict[str, list], outcomes: dict[str, dict]) -> tuple[dict, dict, dict]:
    """`(panels, infos, errors)` of planned runs: a `stats.Panel` per name whose runs all finished, with `infos[name]`
    = `{"train_seconds" (mean over seeds), "num_generations", "tight_cap"}`; `errors[name]` the first error of a
    name with a missing run."""
    from .jobs import load_result
    from .stats import Panel

    panels, infos, errors = {}, {}, {}
    for name, jobs in plan.items():
        missing = [j for j in jobs if not j.finished()]
        if missing:
            errors[name] = next((outcomes[j.path]["error"] for j in missing if outcomes.get(j.path, {}).get("error")),
                                f"no result for {missing[0].label}")  # fmt: skip
            continue
        results = [load_result(j) for j in jobs]
        panels[name] = Panel.from_runs(results)
        secs = [r["train_seconds"] for r in results if r.get("train_seconds") is not None]
        infos[name] = {"train_seconds": sum(secs) / len(secs) if secs else None,
                       "num_generations": results[0].get("num_generations"),
                       "tight_cap": results[0]["summary"].get("tight_cap")}  # fmt: skip
    return panels, infos, errors


def reference_of(name: str, names) -> str | None:
    """The row `name` is compared with: `grpo` when the comparison has it, the base model for `grpo` (and when there
    is no grpo), nothing for the base model.

    >>> reference_of("kimi", ["base", "grpo", "kimi"]), reference_of("grpo", ["base", "grpo"]), reference_of("base", [])
    ('grpo', 'base', None)
    """
    if name == "base":
        return None
    if name != "grpo" and "grpo" in names:
        return "grpo"
    return "base" if "base" in names else None


def panel_rows(panels: dict, infos: dict, errors: dict, names: list[str], settings: TestbedSettings,
               checks: bool = True) -> list[dict]:  # fmt: skip
    """The rows of `names` in order (failed ones as `failed_row`), each against `reference_of` it, with its method
    check (`checks.method_check` on the panels) when `checks`."""
    from .checks import CheckInputs, method_check

    rows = []
    floor = None
    for name in names:
        if name in errors:
            g = None
            if name != "base":
                from .scaling import recipe_scale

                g = num_generations_for(recipe_scale(name, settings.max_completion_length, settings.max_steps),
                                        settings)  # fmt: skip
            rows.append({"recipe": name, "status": "failed", "num_generations": g, "error": errors[name]})
            continue
        ref = reference_of(name, [n for n in names if n in panels])
        info = infos[name]
        row = panel_row(name, panels[name], settings, panels.get(ref), ref, info["train_seconds"],
                        info["num_generations"], info["tight_cap"])  # fmt: skip
        floor = floor if floor is not None else row["mean_floor_tokens"]
        if checks and name != "base":
            inputs = CheckInputs(panels[name], panels.get(ref), ref or "-", panels.get("base"), floor or 0.0,
                                 settings.bootstrap, settings.seed)  # fmt: skip
            row["method_check"] = method_check(name, inputs, info["tight_cap"])
        rows.append(row)
    return rows


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


def _compare(recipes, settings, output_dir, overwrite, keep_models, include_base, workers, show_progress) -> dict:
    from ..eval.plots import pareto_plot
    from .jobs import run_jobs
    from .scaling import recipe_scale

    os.makedirs(output_dir, exist_ok=True)
    names = (["base"] if include_base else []) + list(recipes)
    plan = plan_runs(names, settings, output_dir, keep_models, overwrite)
    outcomes = run_jobs([j for js in plan.values() for j in js], workers, show_progress, "testbed compare")
    panels, infos, errors = load_panels(plan, outcomes)
    rows = panel_rows(panels, infos, errors, names, settings)
    scales = {n: recipe_scale(n, settings.max_completion_length, settings.max_steps).to_dict() for n in recipes}
    failed = [r["recipe"] for r in rows if r.get("status", "ok") != "ok"]
    files = {"json": os.path.join(output_dir, "compare.json"), "markdown": os.path.join(output_dir, "compare.md")}
    runs = {name: [os.path.relpath(j.path, output_dir) for j in jobs] for name, jobs in plan.items()}
    with open(files["json"], "w") as f:
        json.dump({"settings": settings.to_dict(), "scales": scales, "rows": rows, "runs": runs}, f, indent=1)
    with open(files["markdown"], "w") as f:
        f.write(compare_markdown(rows, settings.to_dict(), scales))
    for row in rows:
        if row.get("status", "ok") == "ok":
            logger.info("testbed: %s accuracy %.3f mean tokens %.1f redundant share %.3f", row["recipe"],
                        row["accuracy"], row["mean_tokens"], row["redundant_share"])  # fmt: skip
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
    files.update(draw_compare_plots(ok_rows, output_dir, f"Testbed after {settings.max_steps} GRPO steps"))
    return {"rows": rows, "files": files, "failed": failed}


def draw_compare_plots(rows: list[dict], output_dir: str, title: str) -> dict:
    """`per_difficulty.png` (small multiples by method family, with interval bands) and `checks.png` (useful vs
    useless checks per completion) of the rows that have the fields; `{"per_difficulty", "checks"}` of those drawn."""
    from .plots import checks_plot, per_difficulty_plot

    files = {}
    per_k = [r for r in rows if r.get("floor_ratio_by_difficulty")]
    if per_k:
        path = per_difficulty_plot(per_k, os.path.join(output_dir, "per_difficulty.png"), title)
        if path:
            files["per_difficulty"] = path
    with_checks = [r for r in rows if "useful_checks" in r]
    if with_checks:
        path = checks_plot(with_checks, os.path.join(output_dir, "checks.png"), title)
        if path:
            files["checks"] = path
    return files


def render_compare_json(path: str) -> str:
    """`compare.md` from a `compare.json` (what `compare` wrote), so a committed table can be checked against its
    data."""
    with open(path) as f:
        data = json.load(f)
    return compare_markdown(data["rows"], data.get("settings"), data.get("scales"))
