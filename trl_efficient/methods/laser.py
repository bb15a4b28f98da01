r"""
LASER-D and LASER-DE (Liu et al., "Learn to Reason Efficiently with Adaptive Length-based Reward Shaping",
arXiv 2505.15612, §3 "LASER-D" / "LASER-DE"; methods.md §7; released code `hkust-nlp/Laser`:
`verl/utils/reward_score/length_penalty.py` (`compute_length_reward_larse_d/_de`, `_choose_target_length`),
`verl/trainer/ppo/ray_trainer.py` (`_monitor`, `_calculate_length_coverage_statistics`),
`verl/utils/reward_score/compute_unique_tokens.py` (repetition flag)).

Two parts, joined by a declared column contract:

- `LaserMonitor`, a stateful component and `TrainerCallback`: before training and every `monitor_interval` steps it
  generates `monitor_rollouts` samples for each of `monitor_prompts` fixed prompts (drawn once, seeded, from the
  training set), buckets each monitor question by accuracy (low <= 1/3 < medium <= 2/3 < high), and picks per
  bucket the target $L_k$ = the smallest grid length whose coverage passes `floor(c_k(L) m_k) >= 1`
  (`choose_target`). It provides the per-row columns `laser_target_low` / `laser_target_medium` /
  `laser_target_high` (-1: no target yet).
- `get_laser_d_reward` (LASER-D; `exploration=True`: LASER-DE), a `GroupLengthReward`: buckets each prompt by its
  gathered group accuracy (>= 2/3 high, [1/3, 2/3) medium, < 1/3 low) and applies the LASER step reward with the
  bucket's target, read from those columns; a bucket without a target uses the largest length of the current
  (gathered) batch.

Where each part lives (layers: `rewards/` cannot import `methods/`): the monitor is here; the reward (and the bucket
rule and repetition flag it uses) is in `trl_efficient/rewards/laser.py`, re-exported here, so that it imports from
`trl_efficient.rewards` like every reward factory. The recipe's reward builder (`trl_efficient/recipes/laser.py`)
builds the reward *with* its monitor. That reward forwards
the component contract (`state_dict`/`load_state_dict`, `row_columns`, `provides_columns`, `attach`) to its monitor,
so the trainer checkpoints it and feeds its columns like any stateful reward, and `attach` registers the monitor as a
callback (`trainer.add_callback`). Python users may instead pass a `LaserMonitor` in `stateful_components` and a
monitor-less `get_laser_d_reward()`: the reward only reads the columns.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Sequence
from typing import Any

from accelerate.utils import gather_object
from transformers import TrainerCallback
from trl.models import unwrap_model_for_generation

from ..core.answers import is_correct
from ..core.checks import check_positive_int as _check_positive_int
from ..core.lengths import LengthMeter
from ..core.state import StatefulComponent
from ..eval.evaluate import TransformersBackend
from ..rewards.laser import BUCKETS, NO_TARGET, TARGET_COLUMNS, get_laser_d_reward, is_repetitive, training_bucket
from ..trainer.trl_internals import metric_buffer

logger = logging.getLogger(__name__)

__all__ = [
    "BUCKETS",
    "LaserMonitor",
    "choose_target",
    "coverage",
    "coverage_multipliers",
    "get_laser_d_reward",
    "is_repetitive",
    "length_grid",
    "monitor_bucket",
    "targets_from_records",
    "training_bucket",
]


def monitor_bucket(n_correct: int, n_total: int) -> str:
    r"""Monitor bucket of a question from its accuracy $a = n_{correct}/n_{total}$: low if $a \le 1/3$, medium if
    $1/3 < a \le 2/3$, high if $a > 2/3$ (methods.md §7; released `_calculate_length_coverage_statistics`). Integer
    arithmetic, so the boundaries are exact.

    >>> [monitor_bucket(c, 6) for c in (2, 3, 4, 5)]
    ['low', 'medium', 'medium', 'high']
    """
    if 3 * n_correct <= n_total:
        return "low"
    return "medium" if 3 * n_correct <= 2 * n_total else "high"


def coverage_multipliers(n_rollouts: int = 8) -> dict[str, int]:
    r"""$m_k$ of the target rule. Released `_choose_target_length` (round_method 'floor'): $m_{high} = \lfloor
    2n/3 \rfloor$, $m_{medium} = \lfloor n/3 \rfloor$, $m_{low} = 1$ for $n$ monitor rollouts, i.e. 5 / 2 / 1 at the
    paper's $n = 8$ (coverage >= 0.2 / 0.5 / 1.0). Clamped to >= 1 (our choice: with $m = 0$ no grid length could
    qualify).

    >>> coverage_multipliers(8), coverage_multipliers(4)
    ({'low': 1, 'medium': 2, 'high': 5}, {'low': 1, 'medium': 1, 'high': 2})
    """
    return {"low": 1, "medium": max(1, n_rollouts // 3), "high": max(1, (2 * n_rollouts) // 3)}


def length_grid(lower: int, step: int, cap: int) -> list[int]:
    r"""Threshold grid $T = \{lb, lb + step, \dots\} \cap [0, cap]$, with `cap` always the last point (paper: lb
    2048, step 1024 up to the 16384 context, which is on the grid). A `lower` above `cap` gives `[cap]` (our choice,
    so a short run still has a grid; every length <= cap, so the cap covers all responses).

    >>> length_grid(2048, 1024, 8192)
    [2048, 3072, 4096, 5120, 6144, 7168, 8192]
    >>> length_grid(4, 4, 10), length_grid(2048, 1024, 24)
    ([4, 8, 10], [24])
    """
    grid = list(range(lower, cap + 1, step))
    if not grid or grid[-1] < cap:
        grid.append(cap)
    return grid


def coverage(lengths: Sequence[int], limit: int) -> float:
    r"""$c_k(L)$: the fraction of *all* responses of a bucket (correct or not) with length $\le L$.

    >>> coverage([3, 5, 9, 12], 9)
    0.75
    """
    return sum(1 for n in lengths if n <= limit) / len(lengths) if lengths else 0.0


def choose_target(lengths: Sequence[int], grid: Sequence[int], multiplier: int) -> int | None:
    r"""$L_k = \min\{L \in T : \lfloor c_k(L)\, m_k \rfloor \ge 1\}$ (methods.md §7; released
    `_choose_target_length`); `None` when the bucket has no responses or no grid length qualifies.

    >>> choose_target([3, 5, 9, 12, 14], [4, 8, 12, 16], multiplier=2)  # c(4)=0.2, c(8)=0.4, c(12)=0.8 -> floor(1.6)=1
    12
    >>> choose_target([], [4, 8], 1) is None
    True
    """
    for limit in sorted(grid):
        if math.floor(coverage(lengths, limit) * multiplier) >= 1:
            return int(limit)
    return None


def targets_from_records(
    records: Sequence[tuple[Sequence[bool], Sequence[int]]], grid: Sequence[int], multipliers: dict[str, int]
) -> tuple[dict[str, int | None], dict[str, dict]]:
    """Per-bucket targets and statistics from the monitor's records, one `(correct flags, lengths)` per question.

    >>> targets, stats = targets_from_records([([1, 1, 1], [4, 6, 20]), ([0, 0, 1], [30, 30, 30])], [8, 16, 32],
    ...                                       coverage_multipliers(3))
    >>> targets, stats["high"]
    ({'low': 32, 'medium': None, 'high': 8}, {'questions': 1, 'responses': 3, 'accuracy': 1.0})
    """
    lengths: dict[str, list[int]] = {b: [] for b in BUCKETS}
    correct: dict[str, int] = dict.fromkeys(BUCKETS, 0)
    questions: dict[str, int] = dict.fromkeys(BUCKETS, 0)
    for flags, lens in records:
        if not flags:
            continue
        bucket = monitor_bucket(sum(bool(f) for f in flags), len(flags))
        questions[bucket] += 1
        correct[bucket] += sum(bool(f) for f in flags)
        lengths[bucket].extend(int(n) for n in lens)
    targets = {b: choose_target(lengths[b], grid, multipliers[b]) for b in BUCKETS}
    stats = {
        b: {
            "questions": questions[b],
            "responses": len(lengths[b]),
            "accuracy": correct[b] / len(lengths[b]) if lengths[b] else None,
        }
        for b in BUCKETS
    }
    return targets, stats


class LaserMonitor(TrainerCallback, StatefulComponent):
    r"""LASER-D's monitoring pass (methods.md §7; released `ray_trainer._monitor`): a stateful component and a
    `TrainerCallback`.

    At train begin (when it holds no target yet, e.g. not restored from a checkpoint) and at every step end with
    `global_step % monitor_interval == 0`, it generates `monitor_rollouts` samples of each monitor prompt with the
    trainer's model (transformers `generate` under `trl.models.unwrap_model_for_generation`, so ZeRO-3 works; the
    trainer's temperature, top_p, `max_completion_length`, `generation_kwargs` and chat template), checks them with
    LASER's checker (`is_correct` after the last `</think>`, which must be present) against `solution`, and sets
    the per-bucket targets with `targets_from_records`. The prompts are generated in seeded chunks, each rank its
    share of the chunks (`chunks`), and the records are all-gathered, so every rank computes identical targets,
    equal to a single process's.

    A pass that raises (on any rank) keeps the previous targets, logs a warning, and counts in `failures` /
    `last_error` (metric `trl_efficient/laser_d/monitor_failures`); training goes on. State changes only when a
    pass completes, so a run killed mid-pass resumes with the checkpoint's targets. `KeyboardInterrupt` is not
    caught (it stops training as usual).

    Args:
        monitor_interval (`int`, defaults to `20`): steps between passes (paper 20).
        monitor_prompts (`int`, defaults to `64`): prompts per pass (paper 500; proposed default 64 for small runs);
            capped at the dataset size.
        monitor_rollouts (`int`, defaults to `8`): samples per prompt (paper 8).
        grid_lower, grid_step (`int`, defaults `2048`, `1024`): the grid $T$ (paper lb 2048, step 1024).
        grid_cap (`int`, *optional*): last grid point; defaults to the trainer's `max_completion_length`.
        multipliers (`dict`, *optional*): $m_k$; defaults to `coverage_multipliers(monitor_rollouts)`.
        seed (`int`, *optional*): draws the monitor prompts and seeds generation; defaults to the trainer's seed.
        monitor_dataset (*optional*): a dataset with `prompt` and `solution` to monitor on instead of the training
            set (the paper samples training prompts; they are not removed from training).
        batch_size (`int`, defaults to `64`): sequences per `generate` call.
        meter (`LengthMeter`, *optional*): how lengths are measured (tokens by default), as the reward does.

    >>> m = LaserMonitor(monitor_interval=1, grid_lower=4, grid_step=4, grid_cap=16)
    >>> m.row_columns({})
    {'laser_target_low': -1, 'laser_target_medium': -1, 'laser_target_high': -1}
    >>> m.apply_records([([1, 1, 1], [4, 6, 20]), ([0, 0, 0], [9, 12, 14])], step=0)
    >>> m.row_columns({}), m.state_dict()["last_step"]  # high: c(4) = 1/3, floor(5/3) = 1; low: c(16) = 1
    ({'laser_target_low': 16, 'laser_target_medium': -1, 'laser_target_high': 4}, 0)
    """

    state_key = "laser_d_monitor"
    provides_columns = TARGET_COLUMNS
    needs_columns = ("solution",)

    def __init__(
        self,
        monitor_interval: int = 20,
        monitor_prompts: int = 64,
        monitor_rollouts: int = 8,
        grid_lower: int = 2048,
        grid_step: int = 1024,
        grid_cap: int | None = None,
        multipliers: dict[str, int] | None = None,
        seed: int | None = None,
        monitor_dataset: Any = None,
        batch_size: int = 64,
        meter: LengthMeter | None = None,
    ) -> None:
        for name, value in (
            ("monitor_interval", monitor_interval),
            ("monitor_prompts", monitor_prompts),
            ("monitor_rollouts", monitor_rollouts),
            ("grid_lower", grid_lower),
            ("grid_step", grid_step),
            ("batch_size", batch_size),
        ):
            _check_positive_int(name, value)
        if grid_cap is not None:
            _check_positive_int("grid_cap", grid_cap)
        multipliers = dict(multipliers) if multipliers is not None else coverage_multipliers(monitor_rollouts)
        if set(multipliers) != set(BUCKETS) or any(not isinstance(v, int) or v < 1 for v in multipliers.values()):
            raise ValueError(f"multipliers must map each of {BUCKETS} to a positive int, got {multipliers!r}.")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an int or None, got {seed!r}.")
        self.monitor_interval = monitor_interval
        self.monitor_prompts = monitor_prompts
        self.monitor_rollouts = monitor_rollouts
        self.grid_lower, self.grid_step, self.grid_cap = grid_lower, grid_step, grid_cap
        self.multipliers = multipliers
        self.seed = seed
        self.monitor_dataset = monitor_dataset
        self.batch_size = batch_size
        self.meter = meter if meter is not None else LengthMeter()
        self.trainer = None
        self._dataset = None
        self.prompt_indices: list[int] = []
        # state (state_dict)
        self.targets: dict[str, int | None] = dict.fromkeys(BUCKETS)
        self.last_step: int | None = None
        self.stats: dict[str, dict] = {}
        self.passes = 0
        self.failures = 0
        self.last_error: str | None = None

    def __getstate__(self) -> dict:  # picklable (TRL's async rollout worker): without the trainer and its dataset
        state = dict(self.__dict__)
        state["trainer"], state["_dataset"] = None, None
        return state

    # --- component contract --------------------------------------------------------------------------------------
    def attach(self, trainer) -> None:
        """Bind to the trainer, check the monitor dataset, draw the monitor prompts, register as a callback."""
        self.trainer = trainer
        args = trainer.args
        if self.grid_cap is None:
            self.grid_cap = int(args.max_completion_length)
        if self.seed is None:
            self.seed = int(args.seed)
        dataset = self.monitor_dataset if self.monitor_dataset is not None else trainer.train_dataset
        columns = getattr(dataset, "column_names", None)
        if dataset is None or columns is None:
            raise ValueError(
                "LaserMonitor needs a sized dataset with `prompt` and `solution` columns: pass "
                "monitor_dataset=... (the training dataset is missing or iterable)."
            )
        missing = [c for c in ("prompt", "solution") if c not in columns]
        if missing:
            raise ValueError(f"LaserMonitor needs the column(s) {missing} in its monitor dataset, which has {columns}.")
        count = min(self.monitor_prompts, len(dataset))
        self.prompt_indices = sorted(random.Random(self.seed).sample(range(len(dataset)), count))
        self._dataset = dataset
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)

    def grid(self) -> list[int]:
        if self.grid_cap is None:
            raise ValueError("LaserMonitor.grid() needs grid_cap (set at attach from max_completion_length).")
        return length_grid(self.grid_lower, self.grid_step, self.grid_cap)

    def row_columns(self, row: dict) -> dict:
        return {f"laser_target_{b}": NO_TARGET if self.targets[b] is None else self.targets[b] for b in BUCKETS}

    def state_dict(self) -> dict:
        return {
            "targets": dict(self.targets),
            "last_step": self.last_step,
            "stats": self.stats,
            "passes": self.passes,
            "failures": self.failures,
            "last_error": self.last_error,
        }

    def load_state_dict(self, state: dict) -> None:
        targets = state.get("targets", {})
        self.targets = {b: None if targets.get(b) is None else int(targets[b]) for b in BUCKETS}
        self.last_step = state.get("last_step")
        self.stats = dict(state.get("stats", {}))
        self.passes = int(state.get("passes", 0))
        self.failures = int(state.get("failures", 0))
        self.last_error = state.get("last_error")

    # --- the pass ------------------------------------------------------------------------------------------------
    def apply_records(self, records, step: int) -> None:
        """Set the targets from gathered `(correct flags, lengths)` records of a completed pass at `step`."""
        targets, stats = targets_from_records(records, self.grid(), self.multipliers)
        self.targets, self.stats, self.last_step = targets, stats, int(step)
        self.passes += 1

    def chunks(self) -> list[list[int]]:
        """The monitor prompts (dataset indices) in generation chunks of `max(1, batch_size // monitor_rollouts)`
        prompts; chunk `c` is generated by rank `c % world` with a seed of its own, so the records do not depend on
        the number of processes."""
        size = max(1, self.batch_size // self.monitor_rollouts)
        return [self.prompt_indices[i : i + size] for i in range(0, len(self.prompt_indices), size)]

    def _generate_records(self, step: int) -> list:
        """This rank's records, `(chunk, correct flags, lengths)` per prompt of its chunks."""
        trainer = self.trainer
        accelerator, args = trainer.accelerator, trainer.args
        tokenizer = trainer.processing_class
        records = []
        mine = list(enumerate(self.chunks()))[accelerator.process_index :: accelerator.num_processes]
        with unwrap_model_for_generation(
            trainer.model_wrapped,
            accelerator,
            gather_deepspeed3_params=args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
        ) as model:
            backend = TransformersBackend(model, tokenizer, batch_size=self.batch_size,
                                          generation_kwargs=args.generation_kwargs, show_progress=False)  # fmt: skip
            for chunk_id, chunk in mine:
                rows = [self._dataset[i] for i in chunk]
                texts = [p if isinstance(p, str) else trainer._render_chat(p) for p in (r["prompt"] for r in rows)]
                samples = backend.generate(
                    texts, n=self.monitor_rollouts, max_new_tokens=args.max_completion_length,
                    temperature=args.temperature, top_p=args.top_p,
                    seed=self.seed + 1_000_003 * step + chunk_id, description="laser monitor",
                )  # fmt: skip
                for row, group in zip(rows, samples, strict=True):
                    flags = [bool(is_correct(g.text, row["solution"], True, True)) for g in group]
                    records.append((chunk_id, flags, [self.meter(g.text, g.ids) for g in group]))
        return records

    def run_pass(self, step: int) -> bool:
        """One monitoring pass at `step` (every rank must call it). Returns whether it completed."""
        try:
            local: Any = ("ok", self._generate_records(step))
        except Exception as exc:  # never crash training: keep the previous targets
            local = ("error", f"{type(exc).__name__}: {exc}")
        trainer = self.trainer
        if trainer.accelerator.num_processes > 1:
            parts = gather_object([local])
        else:
            parts = [local]
        errors = [detail for kind, detail in parts if kind == "error"]
        if errors:
            self.failures += 1
            self.last_error = errors[0]
            logger.warning(
                "LASER-D monitoring pass at step %d failed (%s); keeping targets %s.", step, errors[0], self.targets
            )
            return False
        gathered = sorted((r for _, records in parts for r in records), key=lambda r: r[0])  # stable: chunk order
        self.apply_records([(flags, lengths) for _, flags, lengths in gathered], step)
        return True

    def _log(self) -> None:
        metrics = metric_buffer(self.trainer, "train")  # TRL's metric buffer, averaged and flushed at each log
        for bucket in BUCKETS:
            if self.targets[bucket] is not None:
                metrics[f"trl_efficient/laser_d/target_{bucket}"].append(float(self.targets[bucket]))
        metrics["trl_efficient/laser_d/monitor_failures"].append(float(self.failures))

    # --- TrainerCallback ------------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs) -> None:
        if self.trainer is not None and all(t is None for t in self.targets.values()):
            self.run_pass(state.global_step)

    def on_step_end(self, args, state, control, **kwargs) -> None:
        if self.trainer is None:
            return
        step = state.global_step
        if step % self.monitor_interval == 0 and self.last_step != step:
            self.run_pass(step)
        self._log()
