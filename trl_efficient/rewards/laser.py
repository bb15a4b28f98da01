r"""
LASER-D and LASER-DE's reward (Liu et al., "Learn to Reason Efficiently with Adaptive Length-based Reward Shaping",
arXiv 2505.15612, §3 "LASER-D" / "LASER-DE"; methods.md §7; released code `hkust-nlp/Laser`:
`verl/utils/reward_score/length_penalty.py` (`compute_length_reward_larse_d/_de`),
`verl/utils/reward_score/compute_unique_tokens.py` (repetition flag)).

`get_laser_d_reward` (LASER-D; `exploration=True`: LASER-DE), a `GroupLengthReward`: buckets each prompt by its
gathered group accuracy (>= 2/3 high, [1/3, 2/3) medium, < 1/3 low) and applies the LASER step reward with the
bucket's target, read from the per-row columns `laser_target_low` / `laser_target_medium` / `laser_target_high`
(-1: no target yet); a bucket without a target uses the largest length of the current (gathered) batch.

The monitor that provides those columns (`LaserMonitor`, a `TrainerCallback` that generates with the policy) is a
trainer-level part and lives in `trl_efficient.methods.laser`; this module (the rewards layer, which imports nothing
above it) takes it as any `StatefulComponent` with `attach` and `row_columns`, and forwards the component contract to
it. The reward lives here so that it imports from `trl_efficient.rewards` like every other factory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.checks import check_bool as _check_bool
from ..core.checks import check_number as _check_number
from ..core.lengths import LengthMeter, completion_text
from ..core.state import StatefulComponent
from .group import GroupLengthReward, _check_num_generations
from .length import laser_formatted, laser_step

# what the reward calls on its monitor (`trl_efficient.methods.laser.LaserMonitor`)
_MONITOR_API = ("attach", "row_columns", "state_dict", "load_state_dict")

__all__ = ["BUCKETS", "NO_TARGET", "TARGET_COLUMNS", "get_laser_d_reward", "is_repetitive", "training_bucket"]

BUCKETS = ("low", "medium", "high")
TARGET_COLUMNS = tuple(f"laser_target_{b}" for b in BUCKETS)
NO_TARGET = -1  # column value of a bucket without a monitor target (the reward falls back to the batch maximum)


def training_bucket(n_correct: int, n_total: int) -> str:
    r"""Training bucket of a prompt from its group accuracy $a$: high if $a \ge 2/3$, medium if $1/3 \le a < 2/3$,
    low if $a < 1/3$ (released `compute_length_reward_larse_d`; note the boundaries differ from `monitor_bucket`).

    >>> [training_bucket(c, 6) for c in (1, 2, 3, 4)]
    ['low', 'medium', 'medium', 'high']
    """
    if 3 * n_correct >= 2 * n_total:
        return "high"
    return "medium" if 3 * n_correct >= n_total else "low"


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


def get_laser_d_reward(
    exploration: bool = False,
    alpha: float = 0.5,
    correct_reward: float = 1.0,
    wrong_reward: float = -0.5,
    format_reward: float = -1.0,
    num_generations: int | None = None,
    monitor: Any = None,
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

    LASER-DE logs the term's activity on every call through TRL's `log_metric`, as fractions of the gathered batch's
    scorable rows: `trl_efficient/laser_de/exploration_candidates` (formatted, wrong and longer than $L_k$: the
    paper's condition before the repetition flag) and `trl_efficient/laser_de/exploration_bonus` (those not flagged,
    which get $+\alpha$). In the synthetic world v2 the second reads 0: the detector flags every trace long enough to be
    a candidate (docs/adaptive-methods.md, "LASER-DE's exploration term").

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
    if monitor is not None and not (
        isinstance(monitor, StatefulComponent) and all(callable(getattr(monitor, m, None)) for m in _MONITOR_API)
    ):  # duck-typed: `LaserMonitor` lives in the methods layer, above this one
        raise ValueError(
            f"monitor must be a LaserMonitor (trl_efficient.methods.laser) or None, got {type(monitor).__name__}."
        )
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
        # LASER-DE: `(candidates, bonus, scorable)` of the batch being scored, set by `_score_batch` and cleared by
        # `_post_process` within one call (it logs them)
        self._exploration: tuple[int, int, int] | None = None

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
        for completion, ids, (correct, length), row_targets in zip(
            completions, completion_ids, rows, zip(*columns), strict=True
        ):
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
        candidates = bonus = 0  # LASER-DE's term: rows meeting its condition, and those of them that get +alpha
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
                if extra["formatted"] and not good and self.exploration and length > limit:
                    candidates += 1
                    if not extra["repetitive"]:
                        reward += self.alpha  # LASER-DE: long, non-repetitive wrong answers keep exploring
                        bonus += 1
                rewards.append(reward)
        if self.exploration:
            self._exploration = (candidates, bonus, sum(correct is not None for correct, _ in rows))
        return rewards

    def _post_process(self, rewards, kwargs):
        """LASER-DE: log the exploration term's activity of this call's batch (`get_laser_d_reward`)."""
        counts, self._exploration = self._exploration, None
        log_metric = kwargs.get("log_metric")
        if counts is not None and counts[2] and callable(log_metric):
            candidates, bonus, scorable = counts
            log_metric("trl_efficient/laser_de/exploration_candidates", candidates / scorable)
            log_metric("trl_efficient/laser_de/exploration_bonus", bonus / scorable)
        return rewards


class _MonitoredLaserDReward(_LaserDReward, StatefulComponent):
    """The reward with its `LaserMonitor`: forwards the stateful-component contract to the monitor."""

    monitor: Any  # a trl_efficient.methods.laser.LaserMonitor
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
