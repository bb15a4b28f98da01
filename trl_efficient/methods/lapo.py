"""LAPO, Length-Adaptive Policy Optimization (ZJU, arXiv 2507.15758; methods.md §28): memory, plan and trainer.

Two stages in one training run (the paper runs them as two separate runs, its released code as two scripts):

1. **Discovery** (the first `stage1_fraction` of `max_steps`; proposed default 0.5): the reward favours correct
   answers inside the group's [P30, P70] band of correct lengths (`trl_efficient.rewards.get_lapo_reward`, stage 1),
   and `LAPOMemory` records each prompt's median correct length, keeping the latest entry.
2. **Internalization** (after): `LAPORolloutPlan` prefills `<think> I will answer the question with {L} tokens.`
   (`trl_efficient.prompts.LAPO_TEMPLATE`), `L` = the prompt's recorded length or `unknown_length` (4096) without a
   record; the reward is a Gaussian around `L`; the memory lowers a prompt's record when a group's median correct
   length is below it (and sets it for a prompt without one), as the released `reward_func_stage2.py`.

Data flow: `LAPOMemory.row_columns` gives every row its `lapo_target_length`; the plan decides the stage
(`rewards.lapo.lapo_stage`) and emits the columns `lapo_stage` and `lapo_target_length`, which the reward and
`LAPOMemory.update` (training only, gathered batch) read. One prompt subgroup (K = 1). Documented choices:
- the memory is keyed by `idx` and checkpointed as `lapo_memory` (released: prompt text, a locked JSON file);
- its median is floored to an int (the released stage 2 reads the target back with `(\\d+)`);
- a group without a correct answer leaves the record unchanged (released stage 1 logs 0; documented deviation);
- stage 2 alone: `rollout_plan_kwargs={"stage1_fraction": 0.0, "memory_from": "<stage-1 run>/checkpoint-N"}`;
- evaluation rows use the training record of the same `idx` and never update the memory.
Settings live in `rollout_plan_kwargs` (shared with the reward). Narrative: docs/adaptive-methods.md, "LAPO".
"""

from __future__ import annotations

import json
import os
import statistics

from ..core.checks import check_number
from ..core.state import StatefulComponent
from ..prompts import LAPO_TEMPLATE
from ..rewards.lapo import LAPO_UNKNOWN_LENGTH, lapo_stage
from ..trainer.group import GroupBatch
from ..trainer.rollout import ROLLOUT_PLANS, RolloutAssignment, RolloutPlan
from ..trainer.state import STATE_FILE
from ..trainer.trainer import EfficientGRPOTrainer
from ..trainer.trl_internals import metric_buffer

__all__ = ["LAPOMemory", "LAPORolloutPlan", "LAPOTrainer", "lapo_settings"]

LAPO_STAGE1_FRACTION = 0.5  # proposed default: the paper runs the two stages as separate runs
PLAN_KEYS = ("stage1_fraction", "unknown_length", "memory_from")
REWARD_KEYS = ("band_weight", "band_margin", "target_weight", "sigma", "point_band")


def lapo_settings(args) -> dict:
    """LAPO's settings from `args.rollout_plan_kwargs`, with defaults for `stage1_fraction`, `unknown_length` and
    `memory_from`; unknown keys raise a `ValueError` naming them.

    >>> lapo_settings(None)
    {'stage1_fraction': 0.5, 'unknown_length': 4096, 'memory_from': None}
    """
    kwargs = dict(getattr(args, "rollout_plan_kwargs", None) or {})
    unknown = sorted(set(kwargs) - set(PLAN_KEYS) - set(REWARD_KEYS))
    if unknown:
        raise ValueError(f"rollout_plan_kwargs {unknown} unknown to LAPO (it takes {sorted(PLAN_KEYS + REWARD_KEYS)}).")
    settings = {"stage1_fraction": LAPO_STAGE1_FRACTION, "unknown_length": LAPO_UNKNOWN_LENGTH, "memory_from": None}
    settings.update(kwargs)
    check_number("rollout_plan_kwargs stage1_fraction", settings["stage1_fraction"], 0.0, 1.0)
    check_number("rollout_plan_kwargs unknown_length", settings["unknown_length"], 0, low_open=True, integer=True)
    settings["unknown_length"] = int(settings["unknown_length"])
    return settings


class LAPOMemory(StatefulComponent):
    """Per-prompt target lengths (tokens), keyed by the dataset's `idx` column; a stateful trainer component.

    >>> m = LAPOMemory(unknown_length=4096)
    >>> m.row_columns({"idx": 3})
    {'lapo_target_length': 4096}
    >>> m.observe([3, 3, 3, 3], [10, 21, 30, 99], [1, 1, 0, 1], [1, 1, 1, 1], 4)  # median(10, 21, 99) = 21
    >>> m.row_columns({"idx": 3})
    {'lapo_target_length': 21}
    >>> m.observe([3, 3, 3, 3], [30, 40, 5, 5], [1, 1, 0, 0], [2, 2, 2, 2], 4)  # stage 2: 35 > 21, kept
    >>> m.row_columns({"idx": 3})
    {'lapo_target_length': 21}
    """

    state_key = "lapo_memory"
    provides_columns = ("lapo_target_length",)
    needs_columns = ("idx",)

    def __init__(self, unknown_length: int = LAPO_UNKNOWN_LENGTH) -> None:
        self.unknown_length = int(unknown_length)
        self.targets: dict[int, int] = {}

    def row_columns(self, row: dict) -> dict:
        if "idx" not in row:
            raise ValueError(
                "LAPOMemory needs a stable `idx` column in the training dataset (the trl_efficient data loaders add "
                "one); add it with `dataset.map(lambda _, i: {'idx': i}, with_indices=True)`."
            )
        return {"lapo_target_length": self.targets.get(int(row["idx"]), self.unknown_length)}

    def observe(self, ids, lengths, correct, stages, group_size: int) -> None:
        """Update from whole groups of `group_size` consecutive rows (global order), in order (latest wins).

        Stage 1: record the group's median correct length (floored). Stage 2: record it only if the prompt has no
        record or the median is below it. NaN or wrong rows are not correct; a group without a correct row changes
        nothing."""
        for start in range(0, len(ids), group_size):
            end = start + group_size
            good = [float(n) for n, ok in zip(lengths[start:end], correct[start:end]) if ok == ok and ok >= 0.5]
            if not good:
                continue
            idx, median = int(ids[start]), statistics.median(good)
            stored = self.targets.get(idx)
            if int(stages[start]) == 1 or stored is None or median < stored:
                self.targets[idx] = int(median)

    def update(self, batch: GroupBatch) -> None:
        """From the gathered training batch (every rank sees the same rows, so every rank's memory is identical)."""
        if "idx" not in batch.metadata:
            raise ValueError("LAPOMemory.update needs the `idx` column in the batch metadata.")
        stages = batch.metadata.get("lapo_stage") or [1] * batch.num_rows
        self.observe(batch.metadata["idx"], batch.lengths.tolist(), batch.correct.tolist(), stages, batch.group_size)

    def load_from(self, path: str) -> None:
        """Load the memory of another run: a checkpoint directory or its `trl_efficient_state.json`."""
        file = os.path.join(path, STATE_FILE) if os.path.isdir(path) else path
        if not os.path.isfile(file):
            raise ValueError(f"rollout_plan_kwargs memory_from={path!r}: no {STATE_FILE} there.")
        with open(file) as f:
            saved = json.load(f)
        if self.state_key not in saved:
            raise ValueError(f"rollout_plan_kwargs memory_from={path!r}: {file} holds no {self.state_key!r} state.")
        self.load_state_dict(saved[self.state_key])

    def attach(self, trainer) -> None:
        if not isinstance(trainer.rollout_plan, LAPORolloutPlan):
            raise ValueError("LAPOMemory needs rollout_plan='lapo' (the plan that reads and stages its targets).")
        if trainer.correctness_index is None:
            raise ValueError(
                "LAPOMemory records median *correct* lengths: add a correctness reward (the `lapo` recipe adds "
                "`correctness` with weight 0) or set correctness_reward."
            )

    def state_dict(self) -> dict:
        return {"targets": {str(k): v for k, v in self.targets.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.targets = {int(k): int(v) for k, v in state.get("targets", {}).items()}


@ROLLOUT_PLANS.register("lapo")
class LAPORolloutPlan(RolloutPlan):
    """Stage 1: the prompt as it is; stage 2: the `LAPO_TEMPLATE` prefill with the row's `lapo_target_length`.

    >>> plan = LAPORolloutPlan(stage1_fraction=0.5, max_steps=10)
    >>> plan.assign({"lapo_target_length": 87}, 0, 4, 0, step=4).prefill is None
    True
    >>> a = plan.assign({"lapo_target_length": 87}, 0, 4, 0, step=5)
    >>> a.prefill, a.metadata
    ('<think> I will answer the question with 87 tokens.', {'lapo_stage': 2, 'lapo_target_length': 87})
    """

    name = "lapo"
    metadata_keys = ("lapo_stage", "lapo_target_length")
    uses_prefill = True

    def __init__(self, stage1_fraction: float = LAPO_STAGE1_FRACTION, max_steps: int = 0) -> None:
        check_number("rollout_plan_kwargs stage1_fraction", stage1_fraction, 0.0, 1.0)
        if 0.0 < stage1_fraction and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps <= 0):
            raise ValueError(
                f"rollout_plan='lapo' switches to stage 2 at stage1_fraction * max_steps: set max_steps > 0 (got "
                f"{max_steps!r}), or stage1_fraction=0 to run stage 2 only."
            )
        self.stage1_fraction, self.max_steps = float(stage1_fraction), int(max_steps)

    @classmethod
    def from_config(cls, args) -> LAPORolloutPlan:
        """From `rollout_plan_kwargs` (`stage1_fraction`) and `max_steps`."""
        return cls(lapo_settings(args)["stage1_fraction"], args.max_steps)

    def stage(self, step: int) -> int:
        return lapo_stage(step, self.max_steps, self.stage1_fraction)

    def num_prompt_subgroups(self, group_size: int) -> int:
        return 1

    def assign(self, row, group_pos, group_size, group_id, step) -> RolloutAssignment:
        target = row.get("lapo_target_length")
        if target is None:
            raise ValueError(
                "rollout_plan='lapo' reads the row's `lapo_target_length` from LAPOMemory: train with "
                "trl_efficient.methods.lapo:LAPOTrainer (the `lapo` recipe)."
            )
        stage = self.stage(step)
        prefill = LAPO_TEMPLATE.format(length=int(target)) if stage == 2 else None
        return RolloutAssignment(prefill=prefill, metadata={"lapo_stage": stage, "lapo_target_length": int(target)})


class LAPOTrainer(EfficientGRPOTrainer):
    """`EfficientGRPOTrainer` with a `LAPOMemory` among its stateful components (built from `rollout_plan_kwargs`,
    optionally loaded from `memory_from`); logs `trl_efficient/lapo_stage` and `trl_efficient/lapo_memory_size`."""

    def __init__(self, *args, stateful_components=None, **kwargs) -> None:
        config = kwargs.get("args", args[2] if len(args) > 2 else None)
        settings = lapo_settings(config)
        memory = LAPOMemory(settings["unknown_length"])
        if settings["memory_from"]:
            memory.load_from(settings["memory_from"])
        super().__init__(*args, stateful_components=[*(stateful_components or []), memory], **kwargs)
        self.lapo_memory = memory

    # Extends EfficientGRPOTrainer.log_group_metrics (step 4 of the group-stage pipeline).
    def log_group_metrics(self, batch: GroupBatch, output: dict) -> None:
        super().log_group_metrics(batch, output)
        stages = batch.metadata.get("lapo_stage")
        if stages:
            metric_buffer(self, batch.mode)["trl_efficient/lapo_stage"].append(float(stages[0]))
        metric_buffer(self, batch.mode)["trl_efficient/lapo_memory_size"].append(float(len(self.lapo_memory.targets)))
