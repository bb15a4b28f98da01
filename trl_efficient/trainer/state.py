"""Stateful components: per-prompt histories, schedules and adaptive coefficients that must survive resume.

A component is an instance of `StatefulComponent` (`core/state.py`: an explicit base class, or `abc` registration;
never duck typing, so a reward model's `state_dict` stays TRL's) with `state_dict()` (JSON-serialisable) and
`load_state_dict(state)`. Optionally:
- `state_key` (`str`): its name inside the checkpoint file (defaults to `__name__` or the class name);
- `row_columns(row) -> dict`: values fed back to the reward functions as per-row columns, added before generation;
- `update(batch: GroupBatch) -> None`: called once per generation batch in training only, with the **gathered**
  batch, so every rank holds identical state (docs/trl-integration.md §8).

Column declarations (any component: reward function, rollout plan, estimator, filter, stateful component):
- `provides_columns` (`tuple[str, ...]`): per-row columns the component adds to every row before the rewards run
  (`PromptHistory`: `history_best_length`, `history_pass_rate`; a rollout plan: its `metadata_keys`);
- `needs_columns` (`tuple[str, ...]`): dataset columns the component reads (`PromptHistory`: `idx`).
`EfficientGRPOTrainer` accepts a reward argument only if TRL passes it, the dataset has it, or a component declares it
in `provides_columns`, and checks every `needs_columns` against the dataset, all at construction.

Attachment: a component with `attach(trainer)` is called once, at the end of `EfficientGRPOTrainer.__init__`, with the
trainer it runs under; it may read the trainer's settings and type there (e.g. `"da_dler"` checks that a
`DLERTrainer` applies its truncation). The trainer never sets attributes on components.

`EfficientGRPOTrainer` writes all components to `trl_efficient_state.json` in every checkpoint and restores them in
`_load_optimizer_and_scheduler`, so a resumed run continues with exactly the state it stopped with.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..core.state import StatefulComponent, is_stateful
from .group import GroupBatch

__all__ = [
    "STATE_FILE",
    "PromptHistory",
    "StatefulComponent",
    "is_stateful",
    "load_components",
    "needed_columns",
    "provided_columns",
    "save_components",
    "state_key",
]

STATE_FILE = "trl_efficient_state.json"


def state_key(obj: Any) -> str:
    return getattr(obj, "state_key", None) or getattr(obj, "__name__", None) or type(obj).__name__


def provided_columns(obj: Any) -> tuple[str, ...]:
    """The per-row columns `obj` declares it adds (`provides_columns`; empty if it declares none)."""
    return tuple(getattr(obj, "provides_columns", None) or ())


def needed_columns(obj: Any) -> tuple[str, ...]:
    """The dataset columns `obj` declares it reads (`needs_columns`; empty if it declares none)."""
    return tuple(getattr(obj, "needs_columns", None) or ())


def save_components(components: dict[str, Any], directory: str) -> str:
    path = os.path.join(directory, STATE_FILE)
    with open(path, "w") as f:
        json.dump({key: comp.state_dict() for key, comp in components.items()}, f, indent=1, sort_keys=True)
    return path


def load_components(components: dict[str, Any], directory: str) -> bool:
    """Restore every component found in `directory`; returns False when the checkpoint has no state file."""
    path = os.path.join(directory, STATE_FILE)
    if not os.path.exists(path):
        return False
    with open(path) as f:
        saved = json.load(f)
    for key, comp in components.items():
        if key in saved:
            comp.load_state_dict(saved[key])
    return True


class PromptHistory(StatefulComponent):
    """Per-prompt memory across steps: shortest correct length seen so far and the running pass rate.

    This is the state HAPO (arXiv 2505.11225, "min" mode) and difficulty-aware methods need. It is keyed by the
    dataset's stable `idx` column and fed back to the rewards as two per-row columns:
    `history_best_length` (tokens; -1 before the first correct answer) and `history_pass_rate` (-1 before the first
    visit). It is updated **after** scoring, so the first visit of a prompt sees no history (as in HAPO's code).

    >>> h = PromptHistory()
    >>> h.row_columns({"idx": 3})
    {'history_best_length': -1, 'history_pass_rate': -1.0}
    >>> h.observe([3, 3, 3, 3], lengths=[10, 7, 12, 9], correct=[1, 0, 1, float("nan")])
    >>> h.row_columns({"idx": 3})  # best correct length 10; 2 correct of 3 scorable
    {'history_best_length': 10, 'history_pass_rate': 0.6666666666666666}
    """

    state_key = "prompt_history"
    provides_columns = ("history_best_length", "history_pass_rate")
    needs_columns = ("idx",)

    def __init__(self) -> None:
        self.best_length: dict[int, int] = {}
        self.attempts: dict[int, int] = {}
        self.corrects: dict[int, int] = {}

    def row_columns(self, row: dict) -> dict:
        if "idx" not in row:
            raise ValueError(
                "PromptHistory needs a stable `idx` column in the training dataset (the trl_efficient data loaders "
                "add one); add it with `dataset.map(lambda _, i: {'idx': i}, with_indices=True)`."
            )
        idx = int(row["idx"])
        attempts = self.attempts.get(idx, 0)
        return {
            "history_best_length": self.best_length.get(idx, -1),
            "history_pass_rate": self.corrects.get(idx, 0) / attempts if attempts else -1.0,
        }

    def observe(self, ids, lengths, correct) -> None:
        for idx, length, ok in zip(ids, lengths, correct, strict=True):
            if ok != ok:  # NaN: unscorable, no evidence either way
                continue
            idx = int(idx)
            self.attempts[idx] = self.attempts.get(idx, 0) + 1
            if ok >= 0.5:
                self.corrects[idx] = self.corrects.get(idx, 0) + 1
                self.best_length[idx] = min(self.best_length.get(idx, int(length)), int(length))

    def update(self, batch: GroupBatch) -> None:
        if "idx" not in batch.metadata:
            return
        self.observe(batch.metadata["idx"], batch.lengths.tolist(), batch.correct.tolist())

    def state_dict(self) -> dict:
        # JSON object keys are strings: convert back in load_state_dict.
        return {
            "best_length": {str(k): v for k, v in self.best_length.items()},
            "attempts": {str(k): v for k, v in self.attempts.items()},
            "corrects": {str(k): v for k, v in self.corrects.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.best_length = {int(k): int(v) for k, v in state.get("best_length", {}).items()}
        self.attempts = {int(k): int(v) for k, v in state.get("attempts", {}).items()}
        self.corrects = {int(k): int(v) for k, v in state.get("corrects", {}).items()}
