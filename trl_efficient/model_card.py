"""Model cards: TRL's card plus a section saying how the model was trained to reason efficiently.

`EfficientGRPOTrainer.create_model_card` calls `finalize_model_card` after TRL has written `README.md` (at every
checkpoint and on `push_to_hub`), so it is cheap and idempotent: the section is rebuilt, not appended twice.
The section template is `trl_efficient/hub_cards/method_section.md` (package data, shipped in the wheel).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from string import Template

from huggingface_hub import ModelCard

SECTION_MARKER = "## Efficient reasoning with trl-efficient"
HYPERPARAMETERS = (
    "num_generations",
    "max_completion_length",
    "learning_rate",
    "loss_type",
    "beta",
    "epsilon",
    "epsilon_high",
    "scale_rewards",
    "multi_objective_aggregation",
    "temperature",
    "budgets",
    "budget_placement",
    "budget_hard_cap",
    "target_length_range",
    "target_length_mode",
    "advantage_kwargs",
    "filter_kwargs",
)


@dataclass(frozen=True)
class ModelCardInfo:
    """What the model card says beyond the trainer's own config: everything `render_method_section` and
    `finalize_model_card` read from a trainer besides `args`, reward functions and rollout plan.

    Held by `EfficientGRPOTrainer` as `trainer.card_info` (constructor kwarg `card_info=`, or
    `trainer.update_card_info(**fields)`); `trl-efficient train` fills it in.

    Attributes:
        recipe: the `Recipe` trained (its name, method, papers, `proposed_defaults`, `usage`), or `None` ("custom").
        datasets (`tuple[str, ...]`): dataset names listed in the card.
        base_model_id (`str` or `None`): Hub id written as the card's `base_model` (TRL writes a local path otherwise).
        summary (`str` or `None`): Markdown appended to the section (e.g. before/after evaluation).

    >>> ModelCardInfo(datasets=("gsm8k",)).datasets
    ('gsm8k',)
    """

    recipe: object | None = None
    datasets: tuple[str, ...] = ()
    base_model_id: str | None = None
    summary: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "datasets", tuple(self.datasets or ()))


def _template() -> Template:
    path = resources.files("trl_efficient").joinpath("hub_cards", "method_section.md")
    return Template(path.read_text())


def _bullets(items) -> str:
    items = list(items)
    return "\n".join(f"- {x}" for x in items) if items else "- none"


def render_method_section(trainer) -> str:
    """The Markdown section for `trainer` (an `EfficientGRPOTrainer`; recipe, datasets and summary from its
    `card_info`)."""
    args = trainer.args
    info: ModelCardInfo = trainer.card_info
    recipe = info.recipe
    weights = trainer.reward_weights.tolist()
    rewards = ", ".join(f"`{n}` ({w:g})" for n, w in zip(trainer.reward_func_names, weights))
    proposed = list(getattr(recipe, "proposed_defaults", ()) or ())
    for func in trainer.reward_funcs:
        proposed += list(getattr(func, "proposed_defaults", ()) or ())
    plan = trainer.rollout_plan
    if plan is None:
        rollout, usage = (
            "none",
            getattr(recipe, "usage", None) or "Use the same chat template and instruction as in training.",
        )
    else:
        rollout = f"`{plan.name}`"
        usage = getattr(recipe, "usage", None) or "Add the same budget or target statement as in training."
    hyper = "\n".join(f"- `{k}`: `{getattr(args, k)}`" for k in HYPERPARAMETERS if getattr(args, k, None) is not None)
    summary = info.summary or ""
    return _template().substitute(
        recipe=getattr(recipe, "name", "custom"),
        method=getattr(recipe, "method", "custom"),
        papers=", ".join(f"arXiv:{p}" for p in getattr(recipe, "papers", ())) or "-",
        rewards=rewards,
        advantage=getattr(args, "advantage_estimator", "grpo"),
        filter=getattr(args, "completion_filter", None),
        rollout=rollout,
        length_unit=getattr(args, "length_unit", "tokens"),
        length_scope=getattr(args, "length_scope", "total"),
        datasets=", ".join(info.datasets) or "-",
        hyperparameters=hyper,
        proposed_defaults=_bullets(dict.fromkeys(proposed)),
        usage=usage,
        summary=summary,
    )


def finalize_model_card(trainer, path: str, license: str = "apache-2.0", **kwargs) -> ModelCard | None:
    """Fix TRL's card metadata (`licence` typo, `base_model` of local directories) and add our section."""
    if not os.path.exists(path):
        return None
    card = ModelCard.load(path)
    card.data.pop("licence", None)
    card.data.license = license
    base_model = trainer.card_info.base_model_id
    if base_model:
        card.data.base_model = base_model
    elif card.data.get("base_model") in (None, "None"):
        card.data.pop("base_model", None)
    tags = list(card.data.get("tags") or [])
    for tag in ("trl-efficient", "efficient-reasoning", *(kwargs.get("tags") or [])):
        if tag not in tags:
            tags.append(tag)
    card.data.tags = tags
    text = card.text.split(SECTION_MARKER)[0].rstrip() + "\n"
    text = text.replace("https://huggingface.co/None", "the base model")
    card.text = text + render_method_section(trainer)
    card.save(path)
    return card
