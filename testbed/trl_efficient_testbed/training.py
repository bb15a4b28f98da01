"""
One testbed run's parts: the comparison's settings, evaluation with exact token accounting, and training one recipe
(`TestbedSettings`, `evaluate_testbed`, `evaluate_modes`, `train_recipe`, `build_config`, `failed_row`).

The orchestration above them (`runner.compare`, resumable `jobs`) imports these; nothing here imports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trl_efficient.overthinking import torch_threads

if TYPE_CHECKING:
    from collections.abc import Iterator

    from trl_efficient.recipes.registry import Recipe
    from trl_efficient.trainer import EfficientGRPOConfig

logger = logging.getLogger(__name__)

__all__ = [
    "TestbedSettings",
    "build_config",
    "evaluate_modes",
    "evaluate_testbed",
    "failed_row",
    "hub_offline",
    "num_generations_for",
    "paired_generations",
    "scaled_recipe",
    "torch_threads",
    "train_recipe",
]


@dataclass
class TestbedSettings:
    """One comparison's settings: the same for every recipe (so only the recipe differs).

    `seed` seeds the data (training and evaluation tasks), the evaluation's sampling streams and the bootstrap; the
    recipes train with `seeds` training seeds `seed, seed + 1, ...` (each seeds its training tasks, the GRPO sampling
    and the data order). Every model is evaluated on the same `num_eval` tasks with `eval_samples` samples each,
    drawn from the same per-(task, sample) streams (`sampling.sample_seed`); `bootstrap` task resamples and a Student-t
    interval over the seeds give the 95% intervals (`stats.interval`)."""

    base_model: str = "testbed:v2"  # world v2's base model (it has seen the methods' prompt formats; base.py)
    max_steps: int = 40
    num_train: int = 1024
    num_eval: int = 1024
    eval_samples: int = 1  # samples per eval task
    per_device_train_batch_size: int = 32
    num_generations: int = 8
    max_completion_length: int = 384  # world v2's cap (v1's testbed:formats: 192)
    learning_rate: float = 1e-4
    temperature: float = 1.0
    eval_temperature: float = 1.0  # the sampling temperature (world v2: slips are sampled; v1 compared at 0.6)
    eval_top_p: float = 0.95
    beta: float = 0.0
    seed: int = 0
    seeds: int = 3  # training seeds per recipe: seed, seed + 1, ..., seed + seeds - 1
    max_seeds: int = 0  # compare: an undecided check trains `seeds` more at each look, up to max_seeds (0: none added)
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
        if self.max_seeds and self.max_seeds < self.seeds:
            raise ValueError(f"max_seeds must be 0 (none added) or >= seeds = {self.seeds}, got {self.max_seeds}.")
        return [self.seed + i for i in range(self.seeds)]


# ---------------------------------------------------------------------------------------------------------------
# Evaluation with exact token accounting
# ---------------------------------------------------------------------------------------------------------------


def paired_generations(model, tokenizer, rows, mode, num_samples, max_new_tokens, temperature, top_p, seed,
                       batch_size, show_progress=False,
                       constraint=None) -> list[list[tuple[list[int], str, bool]]]:  # fmt: skip
    """`num_samples` completions `(ids, text, finished)` of every row under `mode`, sample j of task i drawn from the
    stream `sampling.sample_seed(seed, i, j)` (the same for every model: evaluations are paired); `mode`: one
    `EvalMode` for every row, or a list of one per row; `constraint`: a `sampling.SentenceConstraint`. A mode with a
    `control_budget` (`budgetthinker:B`) forces BudgetThinker's control tokens (`BudgetControlProcessor.apply`; the
    tokenizer must hold them), one budget for all rows."""
    from trl_efficient.eval.evaluate import build_prompt_text

    from .streams import generate_paired, sample_seed

    modes = mode if isinstance(mode, list) else [mode] * len(rows)
    processor = None
    budgets = {getattr(m, "control_budget", None) for m in modes}
    if budgets != {None}:
        if len(budgets) > 1:
            raise ValueError(f"paired_generations: one control budget for all rows, got {sorted(map(str, budgets))}.")
        from trl_efficient.rewards.budgetthinker import BudgetControlProcessor, control_token_ids

        processor = BudgetControlProcessor(budgets.pop(), control_token_ids(tokenizer)).apply
    prompt_ids = [tokenizer(build_prompt_text(r["prompt"], m, tokenizer), add_special_tokens=False)["input_ids"]
                  for r, m in zip(rows, modes, strict=True)]  # fmt: skip
    eos = model.generation_config.eos_token_id
    eos_ids = [eos] if isinstance(eos, int) else list(eos or [tokenizer.eos_token_id])
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    flat = [ids for ids in prompt_ids for _ in range(num_samples)]
    seeds = [sample_seed(seed, i, j) for i in range(len(rows)) for j in range(num_samples)]
    gens = generate_paired(model, flat, seeds, max_new_tokens, eos_ids, pad_id, temperature, top_p, batch_size,
                           show_progress=show_progress, constraint=constraint, processor=processor)  # fmt: skip
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
    from trl_efficient.eval.evaluate import EvalMode
    from trl_efficient.overthinking.analysis import analyze_completion
    from trl_efficient.overthinking.data import task_from_row
    from trl_efficient_testbed.summary import summarize

    from .checks import TIGHT_CAP_FRACTION

    rows = list(dataset)
    generations = paired_generations(model, tokenizer, rows, EvalMode(), num_samples, max_new_tokens, temperature,
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


def _with_control_tokens(model, tokenizer, seed: int) -> tuple:
    """`(model, tokenizer)` holding BudgetThinker's control tokens: the originals when they do, else copies with them
    added (`rewards.budgetthinker.add_budget_tokens`, fresh embeddings drawn under `torch.manual_seed(seed)`)."""
    import copy

    import torch

    from trl_efficient.rewards.budgetthinker import BUDGETTHINKER_CONTROL_TOKENS, add_budget_tokens

    if all(t in tokenizer.get_vocab() for t in BUDGETTHINKER_CONTROL_TOKENS):
        return model, tokenizer
    model, tokenizer = copy.deepcopy(model), copy.deepcopy(tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        add_budget_tokens(model, tokenizer)
    return model, tokenizer


def evaluate_modes(model, tokenizer, dataset, modes, max_new_tokens: int = 192, temperature: float = 0.6,
                   top_p: float = 0.95, seed: int = 0, batch_size: int = 128) -> dict:  # fmt: skip
    """One sample per task under each `EvalMode` (a budget prefill, a target in the prompt, a system prompt), task i
    drawn from the stream `sampling.sample_seed(seed, i, 0)` under every mode and for every model (so differences
    between modes and between models are paired by task): `{mode.name: {"value", "lengths", "thinking", "correct",
    "accuracy"}}` with per-sample generated tokens, thinking tokens (up to the last `</think>`) and correctness.
    Feeds `checks.method_check`. A `budgetthinker:B` mode on a model without BudgetThinker's control tokens (the
    base model) runs on a copy with them added as `BudgetThinkerTrainer` adds them before its first step
    (`add_budget_tokens`: fresh embeddings, drawn under `torch.manual_seed(seed)`): its starting point."""
    from trl_efficient.core.lengths import LengthMeter
    from trl_efficient.rewards import is_correct

    rows = list(dataset)
    out = {}
    controlled = None  # (model, tokenizer) with the control tokens, built on first need
    for mode in modes:
        m, tok = model, tokenizer
        if getattr(mode, "control_budget", None) is not None:
            controlled = controlled or _with_control_tokens(model, tokenizer, seed)
            m, tok = controlled
        meter = LengthMeter("tokens", "thinking", tok)
        gens = paired_generations(m, tok, rows, mode, 1, max_new_tokens, temperature, top_p, seed,
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


def build_config(
    recipe, settings: TestbedSettings, output_dir: str, overrides: dict | None = None, scale=None
) -> EfficientGRPOConfig:
    """The recipe's `EfficientGRPOConfig` on the testbed: recipe overrides < testbed scale < common settings <
    `settings.extra` < `overrides`, except that a scale's own `max_completion_length` (a training cap that is part
    of the method) wins over the common cap, and a scale's own `beta` over the common KL coefficient. Every recipe
    trains on the same number of prompts per step (`per_device_train_batch_size / num_generations` of the settings);
    a recipe with its own G samples more."""
    from trl_efficient import methods  # noqa: F401  (the estimators, plans and samplers a recipe's config names)
    from trl_efficient.trainer import EfficientGRPOConfig

    from .scaling import apply_scale, settings_scale

    scale = scale or settings_scale(recipe.name, settings)
    g = num_generations_for(scale, settings)
    prompts_per_step = max(1, settings.per_device_train_batch_size // settings.num_generations)
    kwargs = apply_scale(recipe.config_overrides, scale)
    kwargs.update(
        output_dir=output_dir,
        max_steps=settings.max_steps,
        per_device_train_batch_size=prompts_per_step * g,
        num_generations=g,
        # a scale's own training cap wins (Frugal: the paper's tight context is part of the method)
        max_completion_length=scale.config.get("max_completion_length", settings.max_completion_length),
        learning_rate=settings.learning_rate,
        temperature=settings.temperature,
        # a scale's own KL coefficient wins (ProRL: the KL to a reference that is reset is the method)
        beta=scale.config.get("beta", settings.beta),
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

    from trl_efficient.methods.saber import profile_dataset

    model = AutoModelForCausalLM.from_pretrained(base_path)
    return profile_dataset(model, tokenizer, train_dataset, max_new_tokens=settings.max_completion_length + 1,
                           batch_size=64, temperature=settings.eval_temperature, top_p=settings.eval_top_p,
                           seed=settings.seed, show_progress=False)  # fmt: skip


def _frugal_pass_rates(base_path: str, tokenizer, train_dataset, settings: TestbedSettings, n: int = 4) -> list[dict]:
    """Frugal-Thinking's curation step on the testbed: the base model's pass rate on each training task from `n`
    samples at the cap, at the training temperature (methods.md §30: 16 samples at 16k; 4 on tiny setups)."""
    from transformers import AutoModelForCausalLM

    from trl_efficient.methods.frugal import estimate_pass_rate

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
    from transformers import AutoTokenizer

    from trl_efficient.overthinking.base import resolve_base_model
    from trl_efficient.overthinking.data import load_testbed_dataset
    from trl_efficient.recipes import get_recipe

    from .scaling import resolve_placeholders, settings_scale
    from .streams import rollout_model

    scale = settings_scale(recipe_name, settings)
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
    model = rollout_model(base)  # its generate drops finished rows (streams.py): the same sampling, less decoding
    trainer_cls = recipe.trainer_cls
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


@contextlib.contextmanager
def hub_offline() -> Iterator[None]:
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
