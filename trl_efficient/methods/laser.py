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

Where the monitor lives (layers: `rewards/` cannot import `methods/`): both classes are in this module, and the
recipe's reward builder (`trl_efficient/recipes/laser.py`) builds the reward *with* its monitor. That reward forwards
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

from transformers import TrainerCallback

from ..core.answers import is_correct
from ..core.checks import check_bool as _check_bool
from ..core.checks import check_number as _check_number
from ..core.checks import check_positive_int as _check_positive_int
from ..core.lengths import LengthMeter, completion_text
from ..core.state import StatefulComponent
from ..rewards.group import GroupLengthReward, _check_num_generations
from ..rewards.length import laser_formatted, laser_step
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

BUCKETS = ("low", "medium", "high")
TARGET_COLUMNS = tuple(f"laser_target_{b}" for b in BUCKETS)
NO_TARGET = -1  # column value of a bucket without a monitor target (the reward falls back to the batch maximum)


# ------------------------------------------------------------------------------------------------ bucket rules
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


def training_bucket(n_correct: int, n_total: int) -> str:
    r"""Training bucket of a prompt from its group accuracy $a$: high if $a \ge 2/3$, medium if $1/3 \le a < 2/3$,
    low if $a < 1/3$ (released `compute_length_reward_larse_d`; note the boundaries differ from `monitor_bucket`).

    >>> [training_bucket(c, 6) for c in (1, 2, 3, 4)]
    ['low', 'medium', 'medium', 'high']
    """
    if 3 * n_correct >= 2 * n_total:
        return "high"
    return "medium" if 3 * n_correct >= n_total else "low"


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


# -------------------------------------------------------------------------------------------- repetition flag
def is_repetitive(tokens: Sequence[Any], n: int = 4) -> bool:
    r"""LASER-DE's repetition flag on a token-id sequence (released `detect_token_ngram_repetition_optimized_reversed`
    in `compute_unique_tokens.py`; flagged iff it returns a position before the end).

    - Sequences of at most $2n$ tokens are never flagged. The n-gram size is 2 below 30 tokens, 3 below 100,
      else $n = 4$; the occurrence threshold is 2 below 200 tokens, else 3.
    - Scanning start positions from the end, an n-gram made of one repeated token (when $n > 2$) is skipped; once
      an n-gram has reached the threshold, the text is flagged if two of its (sorted) occurrences are closer than
      $\lfloor len/3 \rfloor$.
    - Otherwise, when the text has at least $4n$ tokens, it is flagged if any $2n$-gram occurs twice (overlaps count).

    >>> is_repetitive(list(range(60)))
    False
    >>> is_repetitive(list(range(30)) + [27, 28, 29] + list(range(100, 107)))  # 40 tokens: 3-gram (27,28,29) at 27, 30
    True
    """
    tokens = list(tokens)
    total = len(tokens)
    if total <= 2 * n:
        return False
    n = 2 if total < 30 else 3 if total < 100 else min(4, n)
    threshold = 2 if total < 200 else 3
    gap = total // 3
    # The released scan, with each n-gram's occurrences kept in descending order: when an n-gram reaches the threshold
    # all its adjacent gaps are checked, after that only the new one (the pairs checked before stay adjacent). The
    # n-grams come from the end, as the scan reads them, out of one lazy `zip` over the reversed tokens (gram m of
    # `zip(r[n-1:], ..., r[0:])` is `tokens[i : i + n]` with `i = total - n - m`), so a sequence flagged near its end
    # builds only the n-grams read (on the flagged completions of perf/reward_throughput.py, half the time of building
    # all of them first). The same verdicts as the released loop (`tests/methods/test_laser_d.py` compares both on
    # random sequences).
    reverse = tokens[::-1]
    positions: dict[tuple, list[int]] = {}
    i = total - n + 1
    for gram in zip(*(reverse[n - 1 - k :] for k in range(n))):
        i -= 1
        if n > 2 and gram[0] == gram[-1] and len(set(gram)) == 1:
            continue
        seen = positions.get(gram)
        if seen is None:
            positions[gram] = [i]
            continue
        seen.append(i)
        if len(seen) == threshold:
            if any(a - b < gap for a, b in zip(seen, seen[1:])):
                return True
        elif len(seen) > threshold and seen[-2] - i < gap:
            return True
    if total >= 4 * n:  # any 2n-gram twice, read from the end likewise
        patterns: set[tuple] = set()
        for pattern in zip(*(reverse[2 * n - 1 - k :] for k in range(2 * n))):
            if pattern in patterns:
                return True
            patterns.add(pattern)
    return False


# ------------------------------------------------------------------------------------------------------ monitor
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
            raise ValueError("LaserMonitor needs a sized dataset with `prompt` and `solution` columns: pass "
                             "monitor_dataset=... (the training dataset is missing or iterable).")  # fmt: skip
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
        from trl.models import unwrap_model_for_generation

        from ..eval.evaluate import TransformersBackend

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
            from accelerate.utils import gather_object

            parts = gather_object([local])
        else:
            parts = [local]
        errors = [detail for kind, detail in parts if kind == "error"]
        if errors:
            self.failures += 1
            self.last_error = errors[0]
            logger.warning("LASER-D monitoring pass at step %d failed (%s); keeping targets %s.", step, errors[0],
                           self.targets)  # fmt: skip
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


# ------------------------------------------------------------------------------------------------------- reward
def get_laser_d_reward(
    exploration: bool = False,
    alpha: float = 0.5,
    correct_reward: float = 1.0,
    wrong_reward: float = -0.5,
    format_reward: float = -1.0,
    num_generations: int | None = None,
    monitor: LaserMonitor | None = None,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _LaserDReward:
    r"""
    LASER-D / LASER-DE reward (arXiv 2505.15612, §3; methods.md §7; released `compute_length_reward_larse_d/_de`).

    With the prompt's bucket $k$ from its group accuracy (`training_bucket`) and the bucket's target $L_k$:

    $$ r = \begin{cases} \texttt{format\_reward} & \text{no } \texttt{</think>} \text{ or no boxed answer after it}\\
    \texttt{correct\_reward} + \alpha\,\mathbb{1}[L \le L_k] & \text{correct} \\
    \texttt{wrong\_reward} + \alpha\,\mathbb{1}[\text{DE} \wedge L > L_k \wedge \neg\text{repetitive}] & \text{wrong}
    \end{cases} $$

    (LASER-DE: `exploration=True`; `is_repetitive` on the completion's token ids, or on its whitespace words when
    no ids are given.) The group accuracy counts correct, well-formatted answers over the group's scorable rows
    (format failures count as wrong, as in the released code). $L_k$ is read from the per-row columns
    `laser_target_<bucket>` that `LaserMonitor` provides; a bucket without a target (-1, before the first pass, or
    no column at all) uses the largest length in the gathered batch (released code). Rows whose gold cannot be
    parsed get `None` and do not count in the group accuracy. Rows are gathered across processes
    (`GroupLengthReward`), so a group that straddles ranks is scored whole.

    `monitor`: the `LaserMonitor` this reward owns (the recipes' builders pass one); the reward then forwards the
    component contract to it (checkpointed state, its columns, `attach`). Without one it is a plain reward.

    Returns a picklable callable named `laser_d_reward` (`laser_de_reward` with `exploration`).

    >>> reward = get_laser_d_reward(exploration=True, num_generations=3)
    >>> done = r"a</think>\boxed{1}"
    >>> # accuracy 2/3 -> high, L_high = 5: 1 + 0.5, 1 (6 > 5), wrong 7 > 5 and not repetitive: -0.5 + 0.5
    >>> reward(completions=[done, done, r"a</think>\boxed{2}"], solution=["1"] * 3,
    ...        completion_ids=[[0] * 5, [1] * 6, list(range(7))], laser_target_low=[-1] * 3,
    ...        laser_target_medium=[-1] * 3, laser_target_high=[5] * 3)
    [1.5, 1.0, 0.0]
    """
    _check_bool("exploration", exploration)
    _check_num_generations(num_generations)
    for name, value in (
        ("alpha", alpha),
        ("correct_reward", correct_reward),
        ("wrong_reward", wrong_reward),
        ("format_reward", format_reward),
    ):
        _check_number(name, value)
    if monitor is not None and not isinstance(monitor, LaserMonitor):
        raise ValueError(f"monitor must be a LaserMonitor or None, got {type(monitor).__name__}.")
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    cls = _LaserDReward if monitor is None else _MonitoredLaserDReward
    reward = cls(num_generations, meter, exploration, float(alpha), float(correct_reward), float(wrong_reward),
                 float(format_reward))  # fmt: skip
    if monitor is not None:
        reward.monitor = monitor
    return reward


class _LaserDReward(GroupLengthReward):
    _factory = "get_laser_d_reward()"

    def __init__(self, num_generations, meter, exploration, alpha, correct_reward, wrong_reward, format_reward) -> None:
        super().__init__(num_generations, meter)
        self.exploration = exploration
        self.__name__ = "laser_de_reward" if exploration else "laser_d_reward"
        self.alpha = alpha
        self.correct_reward, self.wrong_reward, self.format_reward = correct_reward, wrong_reward, format_reward

    def _row_extras(self, completions, completion_ids, kwargs, rows):
        """Per row: LASER's format flag, the row's bucket targets and (LASER-DE) the repetition flag. The flag is
        computed only where `_score_batch` can read it, a formatted wrong answer longer than the smallest of its
        targets (the bonus needs `length > limit`, and `limit` is one of the targets, or without one the batch's
        largest length, which no row exceeds); elsewhere it is `None`. Reading every token, it is the costly part."""
        n = len(completions)
        columns = [
            [None] * n if values is None else [None if v is None or int(v) < 0 else int(v) for v in values]
            for values in (kwargs.get(column) for column in TARGET_COLUMNS)
        ]
        extras = []
        for completion, ids, (correct, length), row_targets in zip(completions, completion_ids, rows, zip(*columns),
                                                                    strict=True):  # fmt: skip
            text = completion_text(completion)  # already a text under GroupLengthReward.__call__
            formatted = laser_formatted(text)
            known = [t for t in row_targets if t is not None]
            repetitive = None
            if self.exploration and formatted and correct is not None and not correct and known and length > min(known):
                repetitive = is_repetitive(ids if ids is not None else text.split())
            targets = dict(zip(BUCKETS, row_targets))
            extras.append({"formatted": formatted, "targets": targets, "repetitive": repetitive})
        return extras

    def _score_batch(self, rows, extras, group_size):
        fallback = max((length for _, length in rows), default=0)  # released: the batch's largest length
        rewards: list[float | None] = []
        for start in range(0, len(rows), group_size):
            group, info = rows[start : start + group_size], extras[start : start + group_size]
            ok = [c is not None and bool(c) and e["formatted"] for (c, _), e in zip(group, info, strict=True)]
            scorable = [c is not None for c, _ in group]
            n_total = sum(scorable)
            bucket = training_bucket(sum(ok), n_total) if n_total else "low"
            target = info[0]["targets"][bucket]
            limit = fallback if target is None else target
            for (correct, length), extra, good in zip(group, info, ok, strict=True):
                if correct is None:
                    rewards.append(None)
                    continue
                reward = laser_step(good, extra["formatted"], length, limit, self.alpha, self.correct_reward,
                                    self.wrong_reward, self.format_reward)  # fmt: skip
                if extra["formatted"] and not good and self.exploration and length > limit and not extra["repetitive"]:
                    reward += self.alpha  # LASER-DE: long, non-repetitive wrong answers keep exploring
                rewards.append(reward)
        return rewards


class _MonitoredLaserDReward(_LaserDReward, StatefulComponent):
    """The reward with its `LaserMonitor`: forwards the stateful-component contract to the monitor."""

    monitor: LaserMonitor
    provides_columns = TARGET_COLUMNS
    needs_columns = ("solution",)

    @property
    def state_key(self) -> str:
        return self.monitor.state_key

    def attach(self, trainer) -> None:
        self.monitor.attach(trainer)

    def row_columns(self, row: dict) -> dict:
        return self.monitor.row_columns(row)

    def state_dict(self) -> dict:
        return self.monitor.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.monitor.load_state_dict(state)
