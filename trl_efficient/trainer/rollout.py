"""Rollout plans: per-rollout prompt rewrites, metadata and hard token caps (hook (a)).

For each of the G rollouts of a prompt, a plan returns a `RolloutAssignment`: optional text to add to the system
message, to the last user message, or as an assistant prefill; metadata that reaches every reward function as a
per-row column (`budget`, `target_length`, `length_mode`, ...); and an optional hard token cap for that rollout.

A plan must give **contiguous, equal-size subgroups of identical prompts** (`num_prompt_subgroups(G)` of them):
TRL's vLLM server mode de-duplicates prompts with `all_prompts[::n]` (docs/trl-integration.md §10), and
`EfficientGRPOTrainer` passes `n = G // K` so every subgroup is generated from its own prompt.

Plans are pure: they never touch the trainer, so they are tested without one.
"""

from __future__ import annotations

import json
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from ..core.registry import Registry
from ..prompts import HBPO_TEMPLATE, l1_instruction

ROLLOUT_PLANS: Registry = Registry("rollout plan", providers=("trl_efficient.methods",))
BUDGET_PLACEMENTS = ("prefill", "system", "user")


@dataclass
class RolloutAssignment:
    """What one rollout gets. Text fields are appended; `None` leaves the prompt as it is."""

    system: str | None = None
    user_suffix: str | None = None
    prefill: str | None = None
    max_tokens: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


class RolloutPlan(ABC):
    """Abstract base: subclasses implement `assign` and `num_prompt_subgroups`.

    Contract of a registered plan (`ROLLOUT_PLANS.register(name)`):
    - `from_config(args)` (classmethod) builds the plan from an `EfficientGRPOConfig`; `build_rollout_plan(args)` calls
      it through the registry entry named by `args.rollout_plan`. The base version calls `cls()`; a plan with
      settings overrides it to read its config fields.
    - `metadata_keys` are the per-row columns the plan adds; they are its `provides_columns` (the reward columns the
      trainer accepts at construction) and reach the `GroupBatch` as `metadata`.
    """

    name = "base"
    metadata_keys: tuple[str, ...] = ()
    uses_prefill = False

    @classmethod
    def from_config(cls, args) -> RolloutPlan:
        """The plan built from the config fields it reads (none for the base class)."""
        return cls()

    @property
    def provides_columns(self) -> tuple[str, ...]:
        """Per-row columns this plan adds to every row (its `metadata_keys`)."""
        return tuple(self.metadata_keys)

    def token_lengths(self) -> dict[str, list[int]]:
        """The lengths in tokens this plan asks of completions (budgets, targets), by the setting that holds them;
        the config warns when one exceeds `max_completion_length`. None for the base class."""
        return {}

    @abstractmethod
    def num_prompt_subgroups(self, group_size: int) -> int:
        """Number K of contiguous, equal-size runs of identical prompts inside a group of `group_size`."""

    @abstractmethod
    def assign(self, row: dict, group_pos: int, group_size: int, group_id: int, step: int) -> RolloutAssignment:
        """What the rollout at `group_pos` of group `group_id` gets at training step `step`."""

    def validate(self, num_generations: int, max_completion_length: int) -> None:  # noqa: B027 (optional hook)
        """Raise `ValueError` at config time if the plan cannot work with these settings."""


def subgroup_of(group_pos: int, group_size: int, num_subgroups: int) -> int:
    """Index of the contiguous, equal-size subgroup that holds `group_pos`.

    >>> [subgroup_of(p, 8, 4) for p in range(8)]
    [0, 0, 1, 1, 2, 2, 3, 3]
    """
    return group_pos * num_subgroups // group_size


@ROLLOUT_PLANS.register("budget")
class BudgetRolloutPlan(RolloutPlan):
    """Split the G rollouts of a prompt into `len(budgets)` subgroups, each told its own token budget.

    The budget statement is `template.format(budget=b)`, placed as an assistant prefill (HBPO's default, arXiv
    2507.15844), appended to the system message, or appended to the user message. Each row gets the metadata
    `budget` (tokens) and `budget_statement`; with `hard_cap=True` the rollout is also cut at `b` tokens after
    generation (equivalent in distribution to stopping there, docs/trl-integration.md §4).

    >>> plan = BudgetRolloutPlan([512, 1024])
    >>> [plan.assign({}, pos, 4, 0, 0).metadata["budget"] for pos in range(4)]
    [512, 512, 1024, 1024]
    >>> plan.assign({}, 3, 4, 0, 0).prefill
    '<think> I will answer the question with 1024 tokens'
    """

    name = "budget"
    metadata_keys = ("budget", "budget_statement")

    def __init__(
        self, budgets, placement: str = "prefill", template: str = HBPO_TEMPLATE, hard_cap: bool = False
    ) -> None:
        budgets = [int(b) for b in budgets]
        if not budgets:
            raise ValueError("budgets must be a non-empty list of positive token counts.")
        if any(b <= 0 for b in budgets):
            raise ValueError(f"budgets must be positive token counts, got {budgets}.")
        if placement not in BUDGET_PLACEMENTS:
            raise ValueError(f"budget_placement must be one of {list(BUDGET_PLACEMENTS)}, got {placement!r}.")
        if "{budget}" not in template:
            raise ValueError(f"budget_template must contain '{{budget}}', got {template!r}.")
        self.budgets, self.placement, self.template, self.hard_cap = budgets, placement, template, hard_cap
        self.uses_prefill = placement == "prefill"

    @classmethod
    def from_config(cls, args) -> BudgetRolloutPlan:
        """From `budgets`, `budget_placement`, `budget_template` and `budget_hard_cap`."""
        return cls(args.budgets, args.budget_placement, args.budget_template, args.budget_hard_cap)

    def num_prompt_subgroups(self, group_size: int) -> int:
        return len(self.budgets)

    def token_lengths(self) -> dict[str, list[int]]:
        return {"budgets": list(self.budgets)}

    def validate(self, num_generations: int, max_completion_length: int) -> None:
        if num_generations % len(self.budgets) != 0:
            raise ValueError(
                f"num_generations ({num_generations}) must be divisible by the number of budgets "
                f"({len(self.budgets)}: {self.budgets}) so that every budget gets an equal subgroup."
            )
        too_big = [b for b in self.budgets if b > max_completion_length]
        if self.hard_cap and too_big:
            raise ValueError(
                f"budgets {too_big} exceed max_completion_length ({max_completion_length}); a hard cap above the "
                "generation limit cannot be reached. Lower the budgets or raise max_completion_length."
            )

    def assign(self, row, group_pos, group_size, group_id, step) -> RolloutAssignment:
        budget = self.budgets[subgroup_of(group_pos, group_size, len(self.budgets))]
        statement = self.template.format(budget=budget)
        return RolloutAssignment(
            system=statement if self.placement == "system" else None,
            user_suffix=statement if self.placement == "user" else None,
            prefill=statement if self.placement == "prefill" else None,
            max_tokens=budget if self.hard_cap else None,
            metadata={"budget": budget, "budget_statement": statement},
        )


@ROLLOUT_PLANS.register("target_length")
class TargetLengthRolloutPlan(RolloutPlan):
    """L1 / LCPO target prompting (arXiv 2503.04697): each rollout is told "Think for N tokens." (Exact) or
    "Think for maximum N tokens." (Max), with N drawn uniformly from the integers `[low, high]`.

    `per="prompt"` (the default, the paper's choice) gives every *example* one target, shared by its G rollouts.
    The L1 code draws `random.randint(100, 4000)` once per example when it builds the training data
    (cmu-l3/l1 `scripts/data/deepscaler_dataset.py`) and stores it with the example, so an example keeps its
    target in every step and epoch. Here the draw is a pure function of `(seed, example)`, the example being its
    `prompt` plus its `idx` column when the dataset has one (the `trl_efficient.data` loaders add it): an example
    gets the same target in every step, epoch, group, process and resumed run, without extra state.

    `per="rollout"` (an extension; not in the paper) draws a target for every rollout, K = G distinct prompts
    per group. It is a pure function of `(seed, step, example, group_pos)`, so these targets are redrawn each
    training step.

    `mode="mixed"` gives each draw Exact or Max with probability 1/2, as the L1-Max data does (`--use_both_both`
    in the same script: one `randint` draw, then a coin flip for the sign). Rows get `target_length` (tokens) and
    `length_mode` columns, which `trl_efficient.rewards.get_l1_reward` reads.

    >>> plan = TargetLengthRolloutPlan(100, 4000, mode="exact", seed=0)
    >>> row = {"prompt": [{"role": "user", "content": "2+2?"}]}
    >>> a = plan.assign(row, 0, 4, 7, 0)
    >>> a.user_suffix == f" Think for {a.metadata['target_length']} tokens."
    True
    >>> len({plan.assign(row, pos, 4, group, step).metadata["target_length"]
    ...      for pos in range(4) for group in (0, 7) for step in (0, 5)})   # one target per example
    1
    """

    name = "target_length"
    metadata_keys = ("target_length", "length_mode")
    MODES = ("exact", "max", "mixed")
    PER = ("prompt", "rollout")

    def __init__(
        self, low: int = 100, high: int = 4000, mode: str = "exact", per: str = "prompt", seed: int = 0
    ) -> None:
        if not 0 < int(low) <= int(high):
            raise ValueError(f"target_length_range must satisfy 0 < low <= high, got [{low}, {high}].")
        if mode not in self.MODES:
            raise ValueError(f"target_length_mode must be one of {list(self.MODES)}, got {mode!r}.")
        if per not in self.PER:
            raise ValueError(f"target_length_per must be one of {list(self.PER)}, got {per!r}.")
        self.low, self.high, self.mode, self.per, self.seed = int(low), int(high), mode, per, seed

    @classmethod
    def from_config(cls, args) -> TargetLengthRolloutPlan:
        """From `target_length_range`, `target_length_mode`, `target_length_per` and `seed`."""
        low, high = args.target_length_range
        return cls(low, high, args.target_length_mode, args.target_length_per, args.seed)

    def num_prompt_subgroups(self, group_size: int) -> int:
        return group_size if self.per == "rollout" else 1

    def token_lengths(self) -> dict[str, list[int]]:
        return {"target_length_range": [self.low, self.high]}

    @staticmethod
    def example_key(row: dict) -> str:
        """The example's identity as canonical JSON: its prompt (string or message list) and its `idx`, if any.

        The G rollouts of an example are copies of one dataset row, on whichever process they run, so they share
        it. With `idx`, two rows with the same question are two examples with their own targets, as in the L1 data
        (`--sample_multiple_for_train` repeats each problem with a fresh target).
        """
        if "prompt" not in row:
            raise ValueError("TargetLengthRolloutPlan needs the row's 'prompt' to key the example's target length.")
        return json.dumps([row.get("idx"), row["prompt"]], sort_keys=True, ensure_ascii=False, default=str)

    def assign(self, row, group_pos, group_size, group_id, step) -> RolloutAssignment:
        example = self.example_key(row)
        # random.Random(str) seeds from the string's SHA-512: stable across processes and PYTHONHASHSEED.
        if self.per == "prompt":
            rng = random.Random(f"{self.seed}:prompt:{example}")
        else:
            rng = random.Random(f"{self.seed}:rollout:{step}:{group_pos}:{example}")
        target = rng.randint(self.low, self.high)
        mode = self.mode if self.mode != "mixed" else rng.choice(("exact", "max"))
        text = l1_instruction(target, mode)
        return RolloutAssignment(user_suffix=text, metadata={"target_length": target, "length_mode": mode})


def apply_assignment(prompt, assignment: RolloutAssignment, render=None) -> str | list[dict]:
    """Return a rewritten copy of `prompt` (string or message list); never mutates the dataset row.

    With a prefill, a conversational prompt is rendered to text with `render(messages) -> str` (the chat template
    with the generation prompt), and the prefill is appended, so generation continues the assistant turn.

    >>> apply_assignment([{"role": "user", "content": "2+2?"}], RolloutAssignment(system="Be brief."))
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': '2+2?'}]
    >>> apply_assignment("Q: 2+2?", RolloutAssignment(user_suffix=" Think for 9 tokens.", prefill="<think>"))
    'Q: 2+2? Think for 9 tokens.<think>'
    """
    if isinstance(prompt, str):
        text = (assignment.system + "\n" if assignment.system else "") + prompt + (assignment.user_suffix or "")
        return text + (assignment.prefill or "")
    messages = [dict(m) for m in prompt]
    if assignment.system:
        if messages and messages[0]["role"] == "system":
            messages[0]["content"] = f"{messages[0]['content']}\n{assignment.system}"
        else:
            messages.insert(0, {"role": "system", "content": assignment.system})
    if assignment.user_suffix:
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        messages[last_user]["content"] = messages[last_user]["content"] + assignment.user_suffix
    if assignment.prefill is None:
        return messages
    if render is None:
        raise ValueError("An assistant prefill on a conversational prompt needs a chat-template renderer.")
    return render(messages) + assignment.prefill
