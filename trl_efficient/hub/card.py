"""Model cards a reader can use: what the model is, how it was trained, how to prompt it, how it scored.

Two callers render the same card from the same plain data (`CardData`): the trainer
(`EfficientGRPOTrainer.create_model_card` -> `finalize_model_card`, after TRL wrote `README.md`: TRL's text is
replaced by ours, so re-rendering is idempotent; `card_data_from_trainer` reads the trainer and the `Recipe` in its
`card_info` by attribute only, and the data is saved next to the card as `trl_efficient_card.json`) and
`trl-efficient push` (`hub.push`: that JSON, the run's summary and the evaluation results, rendered again for the
target repository). What the card says and where each part comes from: docs/publish.md, "The model card".

Templates: `trl_efficient/hub_cards/model_card.md` (the page) and `method_section.md` (everything after the title),
package data shipped in the wheel.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from string import Template
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData, constants, try_to_load_from_cache

from ..core.models import model_scheme
from ..prompts import (
    DEFAULT_INSTRUCTION,
    HBPO_MINIMAL_PROMPT,
    HBPO_TEMPLATE,
    L1_TARGETS,
    SABER_TIERS,
    UNLIMITED_PROMPT,
    format_prompt,
    l1_instruction,
    saber_mode_prompts,
)
from .papers import arxiv_url, bibtex, trl_bibtex

logger = logging.getLogger(__name__)

__all__ = [
    "CARD_DATA_FILE",
    "MERGE_DATA_FILE",
    "RUN_FILES",
    "CardDataError",
    "load_card_data",
    "CORE_HYPERPARAMETERS",
    "EVAL_RESULTS_PATH",
    "QUICKSTART_QUESTION",
    "SECTION_MARKER",
    "CardData",
    "ModelCardInfo",
    "PromptMode",
    "adapter_config_of",
    "card_data_from_trainer",
    "card_label",
    "base_model_license",
    "choose_license",
    "eval_results_metadata",
    "eval_table",
    "finalize_model_card",
    "hub_cache_id",
    "load_eval_results",
    "mark_adapter",
    "own_entries",
    "model_license",
    "render_card",
    "render_method_section",
    "resolve_base_model",
    "summary_markdown",
]

SECTION_MARKER = "## Efficient reasoning with trl-efficient"
CARD_DATA_FILE = "trl_efficient_card.json"
SUMMARY_FILE = "trl_efficient_summary.json"  # written by `trl-efficient train` (api.training.run_training)
EVAL_RESULTS_PATH = os.path.join("eval", "results.json")  # `trl-efficient eval --output-dir OUTPUT_DIR/eval`
# Every GRPO run reads these; a recipe's own fields come from its overrides and parts (`used_hyperparameters`).
CORE_HYPERPARAMETERS = (
    "learning_rate",
    "num_generations",
    "max_completion_length",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "max_steps",
    "num_train_epochs",
    "beta",
    "epsilon",
    "epsilon_high",
    "loss_type",
    "temperature",
    "generation_kwargs",  # e.g. the EOS logit bias (`--eos_logit_bias`: `sequence_bias`) a run sampled with
)
SECRET_FIELDS = ("hub_token", "push_to_hub_token", "token")  # never rendered, whatever a recipe overrides
QUICKSTART_QUESTION = "What is the sum of the first 10 positive integers?"
_HUB_CACHE_SNAPSHOT = re.compile(r"models--([^/\\]+)--([^/\\]+)[/\\]snapshots[/\\]")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class ModelCardInfo:
    """What the model card says beyond the trainer's own config: everything `card_data_from_trainer` reads from a
    trainer besides `args`, reward functions and rollout plan.

    Held by `EfficientGRPOTrainer` as `trainer.card_info` (constructor kwarg `card_info=`, or
    `trainer.update_card_info(**fields)`); `trl-efficient train` fills it in.

    Attributes:
        recipe: the `Recipe` trained (read by attribute: `name`, `method`, `description`, `papers`, `rewards`,
            `config_overrides`, `proposed_defaults`, `usage`), or `None` ("custom").
        datasets (`tuple[str, ...]`): the datasets the run used, by name (short names such as `gsm8k`, or Hub ids):
            what it trained on, and its evaluation set only once it was evaluated on; duplicates dropped.
        base_model_id (`str` or `None`): Hub id written as the card's `base_model` (else found from the model path).
        summary (`str` or `None`): Markdown of the evaluation before/after training.
        instruction (`str` or `None`): the instruction the training prompts carried (the data loaders' default).
        system_prompt (`str` or `None`): the training prompts' system message, if any.

    >>> ModelCardInfo(datasets=("gsm8k", "gsm8k")).datasets
    ('gsm8k',)
    """

    recipe: object | None = None
    datasets: tuple[str, ...] = ()
    base_model_id: str | None = None
    summary: str | None = None
    instruction: str | None = DEFAULT_INSTRUCTION
    system_prompt: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "datasets", tuple(dict.fromkeys(d for d in (self.datasets or ()) if d)))


@dataclass
class PromptMode:
    """One way to prompt the trained model: text added to the system message, to the user message, or as the start
    of the assistant turn (as the trainer's rollout plans place it, `trainer.rollout.apply_assignment`)."""

    name: str
    system: str | None = None
    user_suffix: str | None = None
    prefill: str | None = None

    def placement(self) -> str:
        parts = [("system prompt", self.system), ("appended to the question", self.user_suffix)]
        parts.append(("start of the assistant turn", self.prefill))
        return "; ".join(f"{where} {text!r}" for where, text in parts if text) or "no extra text"


@dataclass
class CardData:
    """Everything a card shows, as plain JSON-able data (saved as `trl_efficient_card.json`, re-read by `push`)."""

    model_name: str = "model"
    recipe: str = "custom"
    method: str = "custom"
    description: str = ""
    papers: list[str] = field(default_factory=list)
    rewards: list[dict[str, Any]] = field(default_factory=list)  # {"name", "weight", "kwargs"}
    rollout_plan: str | None = None
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    proposed_defaults: list[str] = field(default_factory=list)
    usage: str = ""
    instruction: str | None = DEFAULT_INSTRUCTION
    system_prompt: str | None = None
    prompt_modes: list[PromptMode] = field(default_factory=list)
    modes_note: str = ""  # what the modes were trained on, when they are a sample of it (L1's target range)
    datasets: list[str] = field(default_factory=list)
    base_model: str | None = None
    base_model_text: str = "It was fine-tuned from a model that is not on the Hugging Face Hub."
    license: str | None = None  # the base model's (`choose_license`); None: no `license` metadata, said in the text
    license_text: str = ""  # the sentence saying where the license comes from, or that there is none
    summary: str | None = None
    example_question: str | None = None  # a training prompt's user text, when the data has its own format
    model_id: str = "path/to/this/model"
    max_new_tokens: int = 1024
    tags: list[str] = field(default_factory=list)
    library_name: str = "transformers"  # "peft" for a LoRA/PEFT adapter (set by `push` for an adapter directory)
    evaluation: str = ""  # Markdown of the evaluation results, filled by `render_card`

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict) -> CardData:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            logger.warning("card data: ignoring unknown fields %s", unknown)
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["prompt_modes"] = [PromptMode(**m) for m in kwargs.get("prompt_modes") or []]
        return cls(**kwargs)

    @classmethod
    def load(cls, path: str) -> CardData:
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))


# ---------------------------------------------------------------------------------------------------------------
# From a trainer to CardData
# ---------------------------------------------------------------------------------------------------------------


class _ReadRecorder:
    """Wraps a config and records the attribute names read from it (to learn which fields a part reads)."""

    def __init__(self, obj) -> None:
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "names", [])

    def __getattr__(self, name: str) -> Any:
        self.names.append(name)
        return getattr(self._obj, name)


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return getattr(value, "value", None) if hasattr(value, "value") else str(value)  # enums -> their value


def _plan_reads(plan, args) -> list[str]:
    """The config fields `type(plan).from_config` reads (plans are pure; nothing else runs)."""
    if plan is None or not callable(getattr(type(plan), "from_config", None)):
        return []
    recorder = _ReadRecorder(args)
    try:
        type(plan).from_config(recorder)
    except Exception:  # a plan that cannot be rebuilt from this config: show its overrides only
        return []
    return list(dict.fromkeys(recorder.names))


def _own_changed_fields(args) -> list[str]:
    """Fields our config adds to TRL's `GRPOConfig` whose value differs from the default (options in use)."""
    if not dataclasses.is_dataclass(args):
        return []
    try:
        from trl import GRPOConfig

        trl_fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    except ImportError:  # pragma: no cover - trl is a dependency
        return []
    out = []
    for f in dataclasses.fields(args):
        if f.name in trl_fields or f.name.startswith("_"):
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            continue
        if getattr(args, f.name, default) != default:
            out.append(f.name)
    return out


def used_hyperparameters(args, recipe=None, plan=None) -> dict[str, Any]:
    """The hyperparameters this run used, in order: `CORE_HYPERPARAMETERS`, the recipe's `config_overrides`, the
    fields its rollout plan reads, our fields set away from their default. Never a token (`SECRET_FIELDS`).

    `max_steps` is shown when positive, else `num_train_epochs` (TRL trains by one or the other).
    """
    names = list(CORE_HYPERPARAMETERS)
    names += list(getattr(recipe, "config_overrides", None) or {})
    names += _plan_reads(plan, args)
    names += _own_changed_fields(args)
    out: dict[str, Any] = {}
    for name in dict.fromkeys(names):
        if name not in SECRET_FIELDS and getattr(args, name, None) is not None:
            out[name] = _jsonable(getattr(args, name))
    if isinstance(out.get("max_steps"), int) and out["max_steps"] > 0:
        out.pop("num_train_epochs", None)
    else:
        out.pop("max_steps", None)
    return out


def _reward_rows(trainer, recipe, args) -> list[dict[str, Any]]:
    names = list(getattr(trainer, "reward_func_names", None) or [])
    weights = getattr(trainer, "reward_weights", None)
    weights = weights.tolist() if hasattr(weights, "tolist") else list(weights or [1.0] * len(names))
    kwargs = [{} for _ in names]
    specs = list(getattr(recipe, "rewards", None) or ())
    if specs and len(specs) == len(names) and callable(getattr(recipe, "reward_kwargs", None)):
        try:
            kwargs = [_jsonable(kw) for kw in recipe.reward_kwargs(args)]
        except Exception:  # the recipe does not accept this config's reward_kwargs: show names and weights only
            kwargs = [_jsonable(getattr(s, "kwargs", {}) or {}) for s in specs]
    funcs = list(getattr(trainer, "reward_funcs", None) or [])
    if len(funcs) == len(names):  # a reward's own record of what it runs with wins over the recipe's kwargs
        for i, func in enumerate(funcs):
            settings = getattr(func, "card_settings", None)
            if isinstance(settings, dict):
                kwargs[i] = {**(kwargs[i] or {}), **_jsonable(settings)}
    return [{"name": n, "weight": float(w), "kwargs": _without_secrets(kw)} for n, w, kw in zip(names, weights, kwargs)]


def _without_secrets(value):
    """`value` with every `SECRET_FIELDS` key removed, at any depth (a scorer's `scorer_kwargs` may hold a token)."""
    if isinstance(value, dict):
        return {k: _without_secrets(v) for k, v in value.items() if k not in SECRET_FIELDS}
    if isinstance(value, list):
        return [_without_secrets(v) for v in value]
    return value


def card_targets(low: int, high: int) -> tuple[int, ...]:
    """The L1 target lengths (tokens) a card offers for a run that drew its targets from the integers
    `[low, high]`: L1's evaluation targets (`L1_TARGETS`) that lie in the range when at least two do, else four
    targets evenly spaced over it, both ends included. Never a target the run could not have drawn.

    >>> card_targets(100, 4000), card_targets(32, 128), card_targets(50, 52), card_targets(64, 64)
    ((512, 1024, 2048, 3600), (32, 64, 96, 128), (50, 51, 52), (64,))
    """
    inside = tuple(t for t in L1_TARGETS if low <= t <= high)
    if len(inside) >= 2:
        return inside
    return tuple(dict.fromkeys(round(low + (high - low) * i / 3) for i in range(4)))


def _plan_modes(plan, args, question_row: dict) -> list[PromptMode]:
    """Each prompting mode of a rollout plan with its exact text: L1 targets for a target-length plan, otherwise
    the distinct assignments the plan gives the G rollouts of one prompt (each budget of a budget plan)."""
    if plan is None:
        return []
    if "target_length" in tuple(getattr(plan, "metadata_keys", ())) and hasattr(plan, "mode"):
        kinds = ("exact", "max") if plan.mode == "mixed" else (plan.mode,)
        return [
            PromptMode(f"{t} tokens ({kind})", user_suffix=l1_instruction(t, kind))
            for kind in kinds
            for t in card_targets(*_target_range(plan))
        ]
    group = int(getattr(args, "num_generations", 0) or 0)
    modes: dict[tuple, PromptMode] = {}
    try:
        for pos in range(group):
            a = plan.assign(question_row, pos, group, 0, 0)
            key = (a.system, a.user_suffix, a.prefill)
            if key in modes or not any(key):
                continue
            meta = getattr(a, "metadata", {}) or {}
            name = f"budget {meta['budget']}" if "budget" in meta else f"{getattr(plan, 'name', 'plan')} {len(modes)}"
            modes[key] = PromptMode(name, a.system, a.user_suffix, a.prefill)
    except Exception as exc:  # a plan that needs training state to assign: the recipe's usage text stays
        logger.info("model card: rollout plan %s gives no static prompting modes (%s)", type(plan).__name__, exc)
        return []
    out = list(modes.values())
    if getattr(plan, "template", None) == HBPO_TEMPLATE and getattr(plan, "uses_prefill", False):
        # HBPO's "efficiency prompting" (arXiv 2507.15844) and no statement at all: the model picks its budget
        out += [PromptMode("minimal", prefill=HBPO_MINIMAL_PROMPT), PromptMode("own budget")]
    return out


def _target_range(plan) -> tuple[int, int]:
    """The `[low, high]` token range a target-length plan draws from (`token_lengths()["target_length_range"]`),
    else L1's evaluation targets' span."""
    lengths = plan.token_lengths() if callable(getattr(plan, "token_lengths", None)) else {}
    low, high = (lengths or {}).get("target_length_range") or (min(L1_TARGETS), max(L1_TARGETS))
    return int(low), int(high)


def _modes_note(plan) -> str:
    """What a plan's listed modes are a sample of: the target range of a target-length plan, else nothing."""
    if plan is None or "target_length" not in tuple(getattr(plan, "metadata_keys", ())):
        return ""
    low, high = _target_range(plan)
    return (
        f"Training drew each prompt's target length from the integers [{low}, {high}] (`target_length_range`); the "
        "targets above lie in that range, and a target outside it was never trained."
    )


def _saber_modes(trainer, recipe) -> list[PromptMode]:
    """SABER's inference modes (system prompts, `prompts.saber_mode_prompts`) for a run that trained with them: a
    `saber` reward in the recipe or a `saber_mode` column in the data. Tiers: the budgets in the data when they
    are not the default tiers."""
    builders = {getattr(s, "builder", None) for s in getattr(recipe, "rewards", None) or ()}
    dataset = getattr(trainer, "train_dataset", None)
    columns = set(getattr(dataset, "column_names", None) or ())
    if "saber" not in builders and "saber_mode" not in columns:
        return []
    tiers = SABER_TIERS
    trained: dict[tuple, str] = {}  # (saber_mode, budget) -> the system message the data carried
    if {"saber_mode", "saber_budget", "prompt"} <= columns:
        for mode, budget, prompt in zip(dataset["saber_mode"], dataset["saber_budget"], dataset["prompt"]):
            first = prompt[0] if isinstance(prompt, list) and prompt else {}
            if first.get("role") == "system" and first.get("content"):  # saber_budget: -1 unlimited, 0 NoThink
                trained.setdefault((mode, int(budget) if mode == "budget" else None), first["content"])
        seen = sorted({b for m, b in trained if m == "budget" and b})
        if seen and not set(seen) <= set(SABER_TIERS):
            tiers = tuple(seen)
    modes = []
    for (name, text), tier in zip(saber_mode_prompts(tiers).items(), (None, *tiers)):
        key = ("nothink", None) if tier is None else ("budget", tier)
        modes.append(PromptMode(name, system=trained.get(key, text)))
    return modes + [PromptMode("Unlimited", system=trained.get(("unlimited", None), UNLIMITED_PROMPT))]


def hub_cache_id(path: str | None) -> str | None:
    """The Hub id of a local Hub-cache snapshot path (`.../models--org--name/snapshots/<sha>`), else `None`.

    >>> hub_cache_id("/cache/models--Qwen--Qwen3-0.6B/snapshots/abc"), hub_cache_id("outputs/run")
    ('Qwen/Qwen3-0.6B', None)
    """
    found = _HUB_CACHE_SNAPSHOT.search(str(path or "").replace("\\", "/"))
    return f"{found.group(1)}/{found.group(2)}" if found else None


def resolve_base_model(base_model_id: str | None, name_or_path: str | None) -> tuple[str | None, str]:
    """`(hub id or None, sentence)` for the card's base model. See the module docstring for the rules.

    >>> resolve_base_model("Qwen/Qwen2.5-0.5B", None)[0]
    'Qwen/Qwen2.5-0.5B'
    >>> resolve_base_model(None, "/cache/models--Qwen--Qwen3-0.6B/snapshots/abc")[0]
    'Qwen/Qwen3-0.6B'
    >>> import trl_efficient.testing.tiny  # registers the `tiny:` model scheme
    >>> resolve_base_model(None, "tiny:qwen2")
    (None, 'It was trained from an offline test model (`tiny:qwen2`), not a model on the Hugging Face Hub.')
    """

    def hub(repo_id: str, how: str = "") -> tuple[str, str]:
        return repo_id, f"It is a fine-tuned version of [{repo_id}](https://huggingface.co/{repo_id}){how}."

    if base_model_id:
        return hub(base_model_id)
    path = str(name_or_path or "")
    if not path or path == "None":
        return None, "It was fine-tuned from a model that is not on the Hugging Face Hub."
    if found := hub_cache_id(path):
        return hub(found)
    if os.path.isdir(path):
        name = os.path.basename(os.path.normpath(path))
        readme = os.path.join(path, "README.md")
        if os.path.isfile(readme):
            meta = _card_metadata(readme)  # an unreadable local card: the model is local only
            base = meta.get("base_model")
            base = base[0] if isinstance(base, list) and base else base
            if isinstance(base, str) and _HUB_ID.match(base):
                origin = meta.get("trl_efficient_origin")  # what a model trl-efficient built holds
                how = f": {origin}" if origin else " (whose own card names it as its base model)"
                return hub(base, f", through the local model `{name}`{how}")
        return None, f"It was fine-tuned from a local model (`{name}`) that is not on the Hugging Face Hub."
    if model_scheme(path) is not None:  # `tiny:` / `testbed:`: built locally (core.models)
        return None, f"It was trained from an offline test model (`{path}`), not a model on the Hugging Face Hub."
    if _HUB_ID.match(path):
        return hub(path)
    return None, f"It was fine-tuned from `{path}`, which is not a Hugging Face Hub id."


def _card_metadata(readme: str) -> dict:
    try:
        data = ModelCard.load(readme).data.to_dict()
    except Exception:  # an unreadable card: nothing known from it
        return {}
    return data if isinstance(data, dict) else {}


@functools.lru_cache(maxsize=64)  # every checkpoint writes the card: look each model up once
def model_license(name_or_path: str | None) -> str | None:
    """The `license` a model's own card states, or `None` when no card states one or none can be read.

    The card is `README.md` of a local directory or of a Hub-cache snapshot (offline); for a Hub id, its cached
    `README.md`, else (not in offline mode) the Hub's. `tiny:`/`testbed:` models have no card.

    >>> model_license("tiny:qwen2") is None
    True
    """
    path = str(name_or_path or "")
    if not path or model_scheme(path) is not None:
        return None
    if os.path.isdir(os.path.expanduser(path)):
        readme = os.path.join(os.path.expanduser(path), "README.md")
        found = _card_metadata(readme).get("license") if os.path.isfile(readme) else None
        return str(found) if found else None
    repo_id = hub_cache_id(path) or path
    if not _HUB_ID.match(repo_id):
        return None
    readme = try_to_load_from_cache(repo_id, "README.md")
    if isinstance(readme, str):
        found = _card_metadata(readme).get("license")
    elif constants.HF_HUB_OFFLINE:
        return None
    else:
        try:
            found = ModelCard.load(repo_id).data.to_dict().get("license")
        except Exception:  # no card, no network, a private repo: the license is not known
            return None
    return str(found) if found else None


def base_model_license(
    name_or_path: str | None, base_model: str | None, given: str | None = None
) -> tuple[str | None, str]:
    """`choose_license` for a model fine-tuned from `name_or_path` (its local card, offline, first) whose Hub base is
    `base_model` (`resolve_base_model`); the sentence names the card the license was read from."""
    sources = [str(s) for s in dict.fromkeys((name_or_path, base_model)) if s and str(s) != "None"]
    found = {} if given else next(({s: lic} for s in sources if (lic := model_license(s))), {})
    if not found:
        found = {str(base_model or name_or_path or "the base model"): None}
    label = {name: card_label(name) for name in found}
    return choose_license({label[name]: lic for name, lic in found.items()}, given)


def card_label(name: str) -> str:
    """How a card names a model it read: a Hub id, or a local directory's name (not this machine's path)."""
    if hub_id := hub_cache_id(name):
        return hub_id
    return os.path.basename(os.path.normpath(name)) if os.path.isdir(os.path.expanduser(name)) else name


def choose_license(found: dict[str, str | None], given: str | None = None) -> tuple[str | None, str]:
    """`(license or None, sentence for the card)`. `found`: the license each source model's card states
    (`model_license`), by the name the card shows. `given` (`push --license`, `push_to_hub(license=...)`) wins;
    else the one license the cards state (when they state different ones, none is chosen); else none.

    >>> choose_license({"Qwen/Qwen3-0.6B": "apache-2.0"})
    ('apache-2.0', 'License: `apache-2.0`, as the card of `Qwen/Qwen3-0.6B` states.')
    >>> choose_license({"tiny:qwen2": None})[0] is None
    True
    """
    if given:
        return given, f"License: `{given}`, as given by whoever published this model."
    known = {name: lic for name, lic in found.items() if lic}
    names = ("the cards of " if len(found) > 1 else "the card of ") + (
        " and ".join(f"`{n}`" for n in found) or "the base model"
    )
    fix = "check the terms of the models it derives from; `trl-efficient push --license <id>` sets one."
    if len(set(known.values())) == 1:
        lic = next(iter(known.values()))
        cards = ("the cards of " if len(known) > 1 else "the card of ") + " and ".join(f"`{n}`" for n in known)
        return lic, f"License: `{lic}`, as {cards} {'state' if len(known) > 1 else 'states'}."
    if known:
        listed = ", ".join(f"`{lic}` ({n})" for n, lic in known.items())
        return None, f"No license is set: the cards of the source models state different licenses ({listed}); {fix}"
    return None, f"No license is set: none could be read from {names}; {fix}"


def adapter_config_of(model) -> dict | None:
    """The active PEFT adapter's config of `model` (a `peft.PeftModel`) as `adapter_config.json` holds it, else
    `None` (a full model)."""
    configs = getattr(model, "peft_config", None)
    if not isinstance(configs, dict) or not configs or not hasattr(model, "get_base_model"):
        return None
    config = configs.get(getattr(model, "active_adapter", None)) or next(iter(configs.values()))
    out = config.to_dict() if hasattr(config, "to_dict") else dict(vars(config))
    return {k: getattr(v, "value", v) for k, v in out.items()}  # PeftType / TaskType enums -> their value


def mark_adapter(data: CardData, adapter_config: dict) -> None:
    """Make `data` the card of a PEFT adapter: `base_model` the adapter's base (its `base_model_name_or_path`
    resolved by `resolve_base_model`; when that is no Hub id, the base the card already names),
    `library_name: peft`, PEFT's own tags (`peft_model.create_or_update_model_card`: `transformers`, `lora`,
    `base_model:adapter:<base>`) and `peft`, and a sentence saying how to load it. The trainer's card (from its
    `PeftModel`, `adapter_config_of`) and `push` (from `adapter_config.json`) both mark it here."""
    base_path = adapter_config.get("base_model_name_or_path")
    base = resolve_base_model(None, base_path)[0] or data.base_model
    peft_type = str(adapter_config.get("peft_type") or "")
    label = {"LORA": "LoRA"}.get(peft_type, peft_type or "PEFT")
    data.base_model, data.library_name = base, "peft"
    extra = ["peft", "transformers", *(["lora"] if peft_type == "LORA" else [])]
    data.tags = list(dict.fromkeys([*data.tags, *extra, *([f"base_model:adapter:{base}"] if base else [])]))
    where = f"[{base}](https://huggingface.co/{base})" if base else f"`{base_path}`, which is not on the Hub"
    data.base_model_text = (
        f"This repository holds a {label} adapter (PEFT), not a full model; its base model is {where}. With `peft` "
        "installed, `AutoModelForCausalLM.from_pretrained` (quick start below) loads the base and applies the "
        "adapter; `trl-efficient merge --method lora --adapter <this repo>` merges it into a full model."
    )


def _training_prompt_format(trainer, info: ModelCardInfo, per_row_system: bool) -> tuple:
    """`(instruction, system_prompt, example_question)` of the training prompts, read from the first training row.

    Rows in the math format (question, then `info.instruction` on its own line) keep that instruction, and their
    system message when it is the same for every row (not with per-row system prompts such as SABER's); rows in
    another format (the synthetic world's digit chains) give their own user text as the quick start's example, as is."""
    try:
        prompt = trainer.train_dataset[0]["prompt"]
    except Exception:  # no dataset, an iterable one, or no `prompt` column: the card info as given
        return info.instruction, info.system_prompt, None
    messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    system = next((m.get("content") for m in messages if m.get("role") == "system"), None)
    system = info.system_prompt or (None if per_row_system else system)
    user = users[-1] if users else ""
    instruction = info.instruction
    if instruction and (user.endswith("\n" + instruction) or user.startswith(instruction + "\n")):
        return instruction, system, None
    if not instruction and users:
        return None, system, None
    return None, system, user or None


_NAMED_VALUE = re.compile(r"\b([a-z][a-z0-9_]*)\s*[=:]?\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)(?![\w.])")


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run_differences(text: str, args, recipe) -> dict[str, Any]:
    """The run's own values of the settings a recipe's `text` (its description, a proposed default) states otherwise:
    a config field named with another number (`per_device_train_batch_size 32`), and a method setting of the recipe
    (`config_overrides`) whose value the text states (`every 200 steps` for `ref_reset_steps: 200`) where the run used
    another. `{}` when the text agrees with the run.

    >>> from types import SimpleNamespace as A
    >>> recipe = A(config_overrides={"ref_reset_steps": 200, "beta": 1e-4})
    >>> run_differences("reference reset every 200 steps", A(ref_reset_steps=1, beta=1e-4), recipe)
    {'ref_reset_steps': 1}
    >>> run_differences("batch_size 32 x 16 = 512 rows", A(batch_size=4, ref_reset_steps=200, beta=1e-4), recipe)
    {'batch_size': 4}
    """
    out = {}
    for name, stated in _NAMED_VALUE.findall(text):
        if hasattr(args, name) and _number(getattr(args, name)) is not None and float(stated) != getattr(args, name):
            out[name] = getattr(args, name)
    for name, value in (getattr(recipe, "config_overrides", None) or {}).items():
        run, paper = _number(getattr(args, name, None)), _number(value)
        if paper is None or run is None or run == paper:
            continue
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        if re.search(rf"(?<![\w.]){re.escape(shown)}(?![\w.])", text):
            out[name] = getattr(args, name)
    return out


def label_run_differences(text: str, args, recipe, label: str) -> str:
    """`text` as is when the run used what it states, else followed by `label` and the run's values.

    >>> from types import SimpleNamespace as A
    >>> label_run_differences("N = 512", A(num_generations=8), A(config_overrides={"num_generations": 512}), "x")
    'N = 512 (x; this run used `num_generations` = 8)'
    """
    differ = run_differences(text, args, recipe)
    if not differ:
        return text
    used = ", ".join(f"`{k}` = {json.dumps(_jsonable(v))}" for k, v in differ.items())
    return f"{text} ({label}; this run used {used})"


def cited_papers(trainer, recipe) -> list[str]:
    """The arXiv ids a card cites: the recipe's `papers`, then the `papers` each of the trainer's components declares
    (`trainer.components()`; LISA's layer sampler: 2403.17919, whatever the recipe), each once."""
    papers = list(getattr(recipe, "papers", ()) or ())
    components = trainer.components() if callable(getattr(trainer, "components", None)) else ()
    for comp in components:
        papers += [p for p in getattr(comp, "papers", ()) or () if p not in papers]
    return papers


def card_data_from_trainer(trainer, license: str | None = None, tags=None) -> CardData:
    """The `CardData` of a trainer (an `EfficientGRPOTrainer` or anything with its attributes). `license`: given
    explicitly, else the base model's (`model_license`), else none (`choose_license`)."""
    args = getattr(trainer, "args", None)
    info = getattr(trainer, "card_info", None) or ModelCardInfo()
    recipe = info.recipe
    plan = getattr(trainer, "rollout_plan", None)
    model = getattr(trainer, "model", None)
    config = getattr(model, "config", None)
    name_or_path = getattr(config, "_name_or_path", None) or getattr(config, "name_or_path", None)
    base_model, base_text = resolve_base_model(info.base_model_id, name_or_path)
    license, license_text = base_model_license(name_or_path, base_model, license)
    output_dir = getattr(args, "output_dir", None)
    hub_id = getattr(args, "hub_model_id", None) if getattr(args, "push_to_hub", False) else None
    saber_modes = _saber_modes(trainer, recipe)
    instruction, system_prompt, example = _training_prompt_format(trainer, info, per_row_system=bool(saber_modes))
    question = format_prompt(example or QUICKSTART_QUESTION, instruction, system_prompt)
    # the recipe's text states its own (paper or proposed) settings: where this run used others, it says so
    proposed = [label_run_differences(p, args, recipe, "the recipe's default, not this run's")
                for p in getattr(recipe, "proposed_defaults", ()) or ()]  # fmt: skip
    for func in getattr(trainer, "reward_funcs", None) or ():
        proposed += list(getattr(func, "proposed_defaults", ()) or ())
    paper = "the paper's setting"
    return CardData(
        model_name=os.path.basename(os.path.normpath(hub_id or output_dir or "model")),
        recipe=getattr(recipe, "name", "custom"),
        method=label_run_differences(getattr(recipe, "method", "custom"), args, recipe, paper),
        description=label_run_differences(getattr(recipe, "description", "") or "", args, recipe, paper),
        papers=cited_papers(trainer, recipe),
        rewards=_reward_rows(trainer, recipe, args),
        rollout_plan=getattr(plan, "name", None) if plan is not None else None,
        hyperparameters=used_hyperparameters(args, recipe, plan),
        proposed_defaults=list(dict.fromkeys(proposed)),
        usage=getattr(recipe, "usage", None) or "",
        instruction=instruction,
        system_prompt=system_prompt,
        example_question=example,
        prompt_modes=_plan_modes(plan, args, {"prompt": question, "idx": 0}) + saber_modes,
        modes_note=_modes_note(plan),
        datasets=list(info.datasets),
        base_model=base_model,
        base_model_text=base_text,
        license=license,
        license_text=license_text,
        summary=info.summary,
        model_id=hub_id or (os.path.abspath(output_dir) if output_dir else "path/to/this/model"),
        max_new_tokens=int(getattr(args, "max_completion_length", None) or 1024),
        tags=[str(t) for t in ([tags] if isinstance(tags, str) else (tags or []))],
    )


# ---------------------------------------------------------------------------------------------------------------
# Evaluation results (`trl-efficient eval`)
# ---------------------------------------------------------------------------------------------------------------


def summary_markdown(summary: dict) -> str | None:
    """The card's before/after table from a run summary (`SUMMARY_FILE`, as `trl-efficient train` writes and prints
    it); None without both evaluations."""
    before, after = summary.get("before"), summary.get("after")
    if not before or not after:
        return None
    measured = f"Measured by `trl-efficient train` on {_eval_set(summary)}: {_eval_size(after)}, the same before"
    lines = ["### Evaluation before and after training", "", f"{measured} and after training.", ""]
    lines += ["| | accuracy | mean tokens | truncated |", "|---|---|---|---|"]
    for tag, r in (("before", before), ("after", after)):
        lines.append(f"| {tag} | {r['accuracy']:.3f} | {r['mean_tokens']:.1f} | {r['truncated_fraction']:.2f} |")
    return "\n".join(lines) + "\n"


def _eval_set(summary: dict) -> str:
    """The evaluation set of a run summary (`eval_dataset`: `{"name", "split"}`, as `trl-efficient train` saves it)."""
    eval_set = summary.get("eval_dataset") or {}
    if not eval_set.get("name"):
        return "the run's evaluation set (not named in its summary)"
    return f"`{eval_set['name']}`" + (f" (split `{eval_set['split']}`)" if eval_set.get("split") else "")


def _eval_size(result: dict) -> str:
    """n of an evaluation (`EvalResult.to_dict()`): problems x samples per problem, or samples alone."""
    problems, per, total = result.get("num_problems"), result.get("samples_per_problem"), result.get("num_samples")
    if problems and per:
        return f"n = {problems} problems x {per} sample{'s' if per != 1 else ''} = {problems * per} samples"
    return f"n = {total} samples" if total else "n not recorded"


def load_eval_results(path: str) -> list[dict]:
    """Entries of `trl-efficient eval`: `path` is its `results.json`, a folder holding one, or one per-benchmark
    `<benchmark>.json`. A missing or malformed file is a `ValueError` naming it."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"evaluation results {path}: cannot read a trl-efficient eval results.json ({err})") from err
    entries = data.get("results") if isinstance(data, dict) and "results" in data else [data]
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "result" in e for e in entries):
        raise ValueError(f"evaluation results {path}: expected trl-efficient eval entries with a 'result' field.")
    return entries


def _benchmark_hub_id(name: str) -> str | None:
    """Hub dataset id of a benchmark or training dataset name (`gsm8k` -> `openai/gsm8k`); `None` if it has none."""
    from ..data.benchmarks import get_benchmark

    name = str(name)
    if _HUB_ID.match(name) and not os.path.exists(name):
        return name
    key = {"math": "math_train"}.get(name.lower(), name)
    try:
        return get_benchmark(key).hub_id
    except ValueError:
        return None


def own_entries(entries: list[dict], model_refs: tuple[str, ...]) -> list[dict]:
    """The entries of this model: its path or repo id is the entry's model; all of them when only one model ran."""
    refs = {r for r in model_refs if r}
    refs |= {os.path.realpath(r) for r in refs if os.path.exists(r)}

    def mine(e):
        path = str(e.get("model_name_or_path") or "")
        return path in refs or (os.path.exists(path) and os.path.realpath(path) in refs) or e.get("model") in refs

    own = [e for e in entries if mine(e)]
    if not own and len({e.get("model_name_or_path") or e.get("model") for e in entries}) == 1:
        own = list(entries)
    return own


def eval_results_metadata(entries: list[dict]) -> list[EvalResult]:
    """`model-index` results: accuracy and mean tokens per benchmark and inference mode."""
    out = []
    for e in entries:
        r = e["result"]
        bench = str(e.get("benchmark", "benchmark"))
        mode = str(e.get("mode", "plain"))
        common = dict(
            task_type="text-generation",
            task_name="Mathematical reasoning",
            dataset_type=_benchmark_hub_id(bench) or bench,
            dataset_name=bench,
            dataset_args={"mode": mode},
        )
        for metric_type, metric_name in (("accuracy", "accuracy"), ("mean_tokens", "mean tokens")):
            if (value := r.get(metric_type)) is not None:
                metric_name = f"{metric_name} ({mode})"
                out.append(EvalResult(metric_type=metric_type, metric_name=metric_name, metric_value=value, **common))
    return out


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))


def eval_table(entries: list[dict]) -> str:
    """The Markdown table of `trl-efficient eval` entries: model, mode, benchmark, n, accuracy, tokens, truncation."""
    lines = ["| model | mode | benchmark | problems x samples | accuracy | mean tokens | truncated |", "|" + "---|" * 7]
    for e in entries:
        r = e["result"]
        size = f"{r.get('num_problems', '-')}x{r.get('samples_per_problem', '-')}"
        cells = [e.get("model", "-"), e.get("mode", "plain"), e.get("benchmark", "-"), size]
        cells += [_fmt(r.get("accuracy")), _fmt(r.get("mean_tokens"), 1), _fmt(r.get("truncated_fraction"))]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------------------------


def _template(name: str = "method_section.md") -> Template:
    path = resources.files("trl_efficient").joinpath("hub_cards", name)
    return Template(path.read_text(encoding="utf-8"))


def _bullets(items) -> str:
    items = list(items)
    return "\n".join(f"- {x}" for x in items) if items else "- none"


def _quickstart(data: CardData) -> str:
    modes = {"plain": {}}
    for m in data.prompt_modes:
        modes[m.name] = {k: v for k, v in dataclasses.asdict(m).items() if k != "name" and v}
    mode_lines = "\n".join(f"    {name!r}: {spec!r}," for name, spec in modes.items())
    prompt_note = "the question, then the instruction on its own line" if data.instruction else "the question alone"
    if data.example_question:
        prompt_note = "the training data's own format; the question below is a prompt of the training data, as is"
    if data.system_prompt:
        prompt_note += ", after a system message"
    mode_example = next((m.name for m in data.prompt_modes if m.system or m.user_suffix or m.prefill), "plain")
    code = f"""```python
from transformers import AutoModelForCausalLM, AutoTokenizer

model_id = {data.model_id!r}
tokenizer = AutoTokenizer.from_pretrained(model_id)
model = AutoModelForCausalLM.from_pretrained(model_id)

# The prompt of training: {prompt_note}.
INSTRUCTION = {data.instruction or ""!r}
SYSTEM_PROMPT = {data.system_prompt or ""!r}
# Prompting modes: exact text added to the system message, the question, or the start of the answer.
MODES = {{
{mode_lines}
}}


def build_prompt(question, mode="plain"):
    extra = MODES[mode]
    user = f"{{question}}\\n{{INSTRUCTION}}" if INSTRUCTION else question
    system = "\\n".join(s for s in (SYSTEM_PROMPT, extra.get("system")) if s)
    messages = ([{{"role": "system", "content": system}}] if system else []) + [
        {{"role": "user", "content": user + extra.get("user_suffix", "")}}
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text + extra.get("prefill", "")


text = build_prompt({data.example_question or QUICKSTART_QUESTION!r}, mode={mode_example!r})
inputs = tokenizer(text, return_tensors="pt", add_special_tokens=False).to(model.device)
output = model.generate(**inputs, max_new_tokens={data.max_new_tokens})
print(tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))
```"""
    listing = ""
    if data.prompt_modes:
        listing = "\n\nModes, each with the exact text it was trained with:\n\n" + _bullets(
            f"`{m.name}`: {m.placement()}" for m in data.prompt_modes
        )
        if data.modes_note:
            listing += f"\n\n{data.modes_note}"
    note = f"\n\n{data.usage}" if data.usage else ""
    return code + listing + note


def render_method_section(source) -> str:
    """The card's body after the title (from `hub_cards/method_section.md`) for a `CardData`, or for a trainer
    (read through `card_data_from_trainer`)."""
    data = source if isinstance(source, CardData) else card_data_from_trainer(source)
    rewards = ", ".join(
        f"`{r['name']}` ({r['weight']:g})" + (f" `{json.dumps(r['kwargs'])}`" if r.get("kwargs") else "")
        for r in data.rewards
    )
    hyper = "\n".join(f"- `{k}`: `{json.dumps(v)}`" for k, v in data.hyperparameters.items())
    papers = ", ".join(f"[arXiv:{p}]({arxiv_url(p)})" for p in data.papers) or "-"
    cites = [bibtex(p) for p in data.papers] + [c for c in (trl_bibtex(),) if c]
    return _template().substitute(
        recipe=data.recipe,
        method=data.method,
        description=data.description,
        papers=papers,
        rewards=rewards or "-",
        rollout=f"`{data.rollout_plan}`" if data.rollout_plan else "none",
        datasets=", ".join(data.datasets) or "-",
        hyperparameters=hyper or "- none",
        proposed_defaults=_bullets(data.proposed_defaults),
        quickstart=_quickstart(data),
        evaluation="\n\n".join(part for part in (data.summary, data.evaluation) if part),
        citations="\n\n".join(f"```bibtex\n{c}\n```" for c in cites),
    )


def render_card(data: CardData, eval_entries: list[dict] | None = None, model_refs: tuple[str, ...] = ()) -> ModelCard:
    """The whole card: metadata (`huggingface_hub.ModelCardData`) and text. `eval_entries`: `trl-efficient eval`
    results; those of this model (`model_refs`: its paths and repo id) also become `model-index` metadata."""
    entries = list(eval_entries or [])
    own = own_entries(entries, (data.model_id, *model_refs))
    eval_results = eval_results_metadata(own) or None
    datasets = [d for d in dict.fromkeys(_benchmark_hub_id(n) for n in data.datasets) if d]
    tags = list(dict.fromkeys(["trl", "grpo", "trl-efficient", "efficient-reasoning", *data.tags]))
    meta = ModelCardData(
        base_model=data.base_model,
        datasets=datasets or None,
        library_name=data.library_name,
        license=data.license,
        model_name=data.model_name,
        pipeline_tag="text-generation",
        tags=tags,
        eval_results=eval_results,
    )
    evaluation = "Results of `trl-efficient eval`:\n\n" + eval_table(entries) if entries else ""
    if not evaluation and not data.summary:
        evaluation = "No evaluation was run with this model (see `trl-efficient eval`)."
    section = render_method_section(dataclasses.replace(data, evaluation=evaluation))
    license_text = data.license_text  # card data saved before licenses were looked up has none: say what it has
    if not license_text:
        license_text = choose_license({str(data.base_model or "the base model"): None}, data.license)[1]
    text = _template("model_card.md").substitute(
        model_name=data.model_name, base_model_text=data.base_model_text, license_text=license_text, section=section
    )
    return ModelCard(f"---\n{meta.to_yaml()}\n---\n\n{text.strip()}\n")


def finalize_model_card(trainer, path: str, license: str | None = None, **kwargs) -> ModelCard | None:
    """Replace the card TRL wrote at `path` by ours, and save its data next to it (`trl_efficient_card.json`).

    Evaluation results in `<card folder>/eval/results.json` are included when present. A PEFT model's card is an
    adapter's (`mark_adapter`), as `push` renders it; the saved data stays the model's, so that a `merge --method
    lora` of the adapter gets a full model's card. Extra keyword arguments of TRL's `push_to_hub` card call are
    ignored, except `tags`."""
    if not os.path.exists(path):
        return None
    data = card_data_from_trainer(trainer, license=license, tags=kwargs.get("tags"))
    folder = os.path.dirname(os.path.abspath(path))
    with open(os.path.join(folder, CARD_DATA_FILE), "w", encoding="utf-8") as f:
        f.write(data.to_json())
    adapter = adapter_config_of(getattr(trainer, "model", None))
    if adapter is not None:
        mark_adapter(data, adapter)
    results = os.path.join(folder, EVAL_RESULTS_PATH)
    entries = load_eval_results(results) if os.path.isfile(results) else None
    card = render_card(data, entries, model_refs=(folder,))
    card.save(path)
    return card


RUN_FILES = (CARD_DATA_FILE, SUMMARY_FILE)  # a trl-efficient run's card data
MERGE_DATA_FILE = "trl_efficient_merge.json"  # written by `trl-efficient merge`: `hub.merge.card_info`


class CardDataError(RuntimeError):
    """An output directory without the card data `push` and `merge` need; the message names what to push instead."""


def load_card_data(output_dir: str) -> CardData:
    """The card data the trainer saved, completed from `trl_efficient_summary.json`; a run without either is an
    error (it was not written by trl-efficient)."""
    card_path = os.path.join(output_dir, CARD_DATA_FILE)
    summary_path = os.path.join(output_dir, SUMMARY_FILE)
    summary = None
    if os.path.isfile(summary_path):
        with open(summary_path, encoding="utf-8") as f:
            summary = json.load(f)
    if os.path.isfile(card_path):
        data = CardData.load(card_path)
    elif summary is not None:
        base, text = resolve_base_model(None, summary.get("model"))
        data = CardData(recipe=summary.get("recipe", "custom"), base_model=base, base_model_text=text)
    else:
        raise CardDataError(
            f"{output_dir} has none of {CARD_DATA_FILE}, {SUMMARY_FILE} or {MERGE_DATA_FILE}: push the output "
            "directory of `trl-efficient train` or `trl-efficient merge` (or of an EfficientGRPOTrainer that wrote "
            "its model card)."
        )
    if summary is not None and not data.summary:
        data.summary = summary_markdown(summary)
    return data
