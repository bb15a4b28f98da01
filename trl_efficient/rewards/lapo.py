r"""
LAPO, Length-Adaptive Policy Optimization (ZJU, arXiv 2507.15758; methods.md §28): the two-stage reward.

Released code: ZJU-REAL/LAPO `examples/scripts/reward_func_stage1.py` (stage 1, "discovery") and
`examples/scripts/reward_func_stage2.py` (stage 2, "internalization"). Both are whole-group rewards: they are
`GroupLengthReward`s, so the `(correct, length)` rows are all-gathered across processes and a group that straddles
processes is scored whole.

Stage 1 (per group, over the lengths of its correct rollouts):

$$ P_{30}, P_{70} = \text{30th / 70th percentile of the correct lengths},\qquad
\ell_{\text{len}}(L) = \begin{cases} 1 & P_{30} \le L \le P_{70} \\
\max\!\big(0,\ 1 - \min(|L - P_{30}|, |L - P_{70}|)/100\big) & \text{otherwise} \end{cases} $$

$$ R = \mathbb{1}[\text{correct}] + 0.7\,\mathbb{1}[\text{correct}]\,\ell_{\text{len}}(L) $$

Stage 2 (target `L*` = the prompt's recorded length, the one stated in the prefill):

$$ R = \mathbb{1}[\text{correct}]\,\Big(1 + 0.8\,\exp\!\big(-\tfrac{(L - L^*)^2}{2\sigma^2}\big)\Big),
\quad \sigma = 120 $$

with the group's median correct length as `L*` when the prompt has no record (`L*` equals the unknown default 4096).

Choices where the paper is silent (documented, following the released code; reasons: docs/adaptive-methods.md,
"LAPO"):
- percentiles: `numpy.percentile`'s default linear interpolation (`lapo_percentile`), as released;
- a degenerate band (`P30 == P70`): `len_reward = 0` as released (`lower_q < upper_q`); `point_band=True` makes it a
  point;
- no correct rollout: every scorable row gets 0; an unparsable gold gets `None` and is not a correct length;
- the unknown target is recognised by value (`L* == unknown_length`, as the released `tokens == 4096`);
- lengths are the completion's policy tokens; the released prefill offset (a few tokens) is left out (§28 pitfalls);
- one reward per sample (the released stage 1 appends two).

The stage comes from the plan's `lapo_stage` column, else `lapo_stage(global_step, max_steps, stage1_fraction)`, else
stage 1; the target from `lapo_target_length` (`trl_efficient.methods.lapo`).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from ..core.checks import check_bool, check_number
from ..core.lengths import LengthMeter
from .group import GroupLengthReward, _check_num_generations

__all__ = [
    "LAPO_UNKNOWN_LENGTH",
    "get_lapo_reward",
    "lapo_percentile",
    "lapo_stage",
    "lapo_stage1_rewards",
    "lapo_stage2_rewards",
]

LAPO_UNKNOWN_LENGTH = 4096  # released code: the target of a prompt without a record (= its max generation length)


def lapo_percentile(values, q: float) -> float:
    """The `q`-th percentile (0..100) with `numpy.percentile`'s default linear interpolation.

    Position `p = q/100 * (n - 1)` in the sorted values; the result interpolates between ranks `floor(p)` and
    `ceil(p)`.

    >>> lapo_percentile([10, 20, 30, 40], 30), round(lapo_percentile([10, 20, 30, 40], 70), 9)  # p = 0.9 and 2.1
    (19.0, 31.0)
    >>> lapo_percentile([7], 30)
    7.0
    """
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("lapo_percentile needs at least one value.")
    pos = q / 100.0 * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def lapo_stage(step: int, max_steps: int, stage1_fraction: float) -> int:
    """LAPO stage at global step `step`: 1 for the first `stage1_fraction` of `max_steps`, then 2.

    >>> [lapo_stage(s, 10, 0.5) for s in (0, 4, 5, 9)]
    [1, 1, 2, 2]
    >>> lapo_stage(0, 10, 0.0), lapo_stage(9, 10, 1.0)
    (2, 1)
    """
    return 1 if step < stage1_fraction * max_steps else 2


def lapo_stage1_rewards(
    rows: list[tuple[bool | None, int]], band_weight: float = 0.7, margin: float = 100.0, point_band: bool = False
) -> list[float | None]:
    """Stage-1 rewards of one group from its `(correct, length)` rows (module docstring for the formula).

    >>> # band [P30, P70] = [19, 31]; lengths 10 and 40 are d = 9 outside: 1 + 0.7 * (1 - 9/100) = 1.637
    >>> lapo_stage1_rewards([(True, 10), (True, 20), (True, 30), (True, 40), (False, 5)])
    [1.637, 1.7, 1.7, 1.637, 0.0]
    """
    correct_lengths = [length for correct, length in rows if correct]
    lower = lapo_percentile(correct_lengths, 30) if correct_lengths else 0.0
    upper = lapo_percentile(correct_lengths, 70) if correct_lengths else 0.0
    band = bool(correct_lengths) and (lower < upper or point_band)
    out: list[float | None] = []
    for correct, length in rows:
        if correct is None:
            out.append(None)
            continue
        if not correct:
            out.append(0.0)
            continue
        len_reward = 0.0
        if band:
            if lower <= length <= upper:
                len_reward = 1.0
            else:
                len_reward = max(0.0, 1.0 - min(abs(length - lower), abs(length - upper)) / margin)
        out.append(1.0 + band_weight * len_reward)
    return out


def lapo_stage2_rewards(
    rows: list[tuple[bool | None, int]],
    target: float,
    unknown_length: int = LAPO_UNKNOWN_LENGTH,
    target_weight: float = 0.8,
    sigma: float = 120.0,
) -> list[float | None]:
    """Stage-2 rewards of one group (one prompt, one target) from its `(correct, length)` rows.

    >>> lapo_stage2_rewards([(True, 100), (True, 220), (False, 100)], target=100)  # exp(-0.5) for d = sigma
    [1.8, 1.4852245277701068, 0.0]
    """
    correct_lengths = [length for correct, length in rows if correct]
    goal = float(target)
    if target == unknown_length and correct_lengths:
        goal = float(statistics.median(correct_lengths))
    out: list[float | None] = []
    for correct, length in rows:
        if correct is None:
            out.append(None)
        elif not correct:
            out.append(0.0)
        else:
            out.append(1.0 + target_weight * math.exp(-((length - goal) ** 2) / (2.0 * sigma**2)))
    return out


def get_lapo_reward(
    stage1_fraction: float = 0.5,
    unknown_length: int = LAPO_UNKNOWN_LENGTH,
    band_weight: float = 0.7,
    band_margin: float = 100.0,
    target_weight: float = 0.8,
    sigma: float = 120.0,
    point_band: bool = False,
    num_generations: int | None = None,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _LAPOReward:
    r"""
    LAPO's two-stage reward (arXiv 2507.15758, methods.md §28; ZJU-REAL/LAPO `reward_func_stage1.py`,
    `reward_func_stage2.py`). See the module docstring for the formulas and edge cases.

    Args:
        stage1_fraction (`float`, *optional*, defaults to `0.5`):
            Fraction of `max_steps` run as stage 1 when no `lapo_stage` column is given (proposed default: the paper
            runs the stages as two separate runs).
        unknown_length (`int`, *optional*, defaults to `4096`):
            Target of a prompt without a record (released code: 4096, its max generation length; a length, scale it
            with the cap).
        band_weight (`float`, *optional*, defaults to `0.7`), band_margin (`float`, defaults to `100`):
            Stage-1 weight of the length reward and its linear fall-off in tokens outside `[P30, P70]` (released
            code; the margin is a length).
        target_weight (`float`, *optional*, defaults to `0.8`), sigma (`float`, defaults to `120`):
            Stage-2 weight and width (tokens) of the Gaussian around the target (released code; sigma is a length).
        point_band (`bool`, *optional*, defaults to `False`):
            Treat a degenerate band `P30 == P70` as a point band instead of the released code's `len_reward = 0`.
        num_generations (`int`, *optional*):
            Group size `G`; leave `None` under `EfficientGRPOTrainer` (it passes a `group_size` column).
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `lapo_reward`.

    >>> reward = get_lapo_reward(num_generations=2)
    >>> reward(completions=[r"\boxed{1}", r"\boxed{1}"], solution=["1", "1"], completion_ids=[[0] * 10, [0] * 30],
    ...        lapo_stage=[2, 2], lapo_target_length=[30, 30])  # exp(-400 / 28800)
    [1.788965693395133, 1.8]
    """
    _check_num_generations(num_generations)
    check_number("stage1_fraction", stage1_fraction, 0.0, 1.0)
    check_number("unknown_length", unknown_length, 0, low_open=True, integer=True)
    check_number("band_weight", band_weight)
    check_number("band_margin", band_margin, 0.0, low_open=True)
    check_number("target_weight", target_weight)
    check_number("sigma", sigma, 0.0, low_open=True)
    check_bool("point_band", point_band)
    return _LAPOReward(
        num_generations,
        LengthMeter(length_unit, length_scope, tokenizer),
        float(stage1_fraction),
        int(unknown_length),
        float(band_weight),
        float(band_margin),
        float(target_weight),
        float(sigma),
        point_band,
    )


class _LAPOReward(GroupLengthReward):
    __name__ = "lapo_reward"
    _factory = "get_lapo_reward()"

    def __init__(
        self,
        num_generations,
        meter,
        stage1_fraction,
        unknown_length,
        band_weight,
        band_margin,
        target_weight,
        sigma,
        point_band,
    ) -> None:
        super().__init__(num_generations, meter)
        self.stage1_fraction = stage1_fraction
        self.unknown_length = unknown_length
        self.band_weight, self.band_margin, self.point_band = band_weight, band_margin, point_band
        self.target_weight, self.sigma = target_weight, sigma

    def _row_extra(self, completion, ids, kwargs, i):
        stages = kwargs.get("lapo_stage")
        if stages is not None:
            stage = int(stages[i])
        else:
            state = kwargs.get("trainer_state")
            max_steps = (getattr(state, "max_steps", 0) or 0) if state is not None else 0
            stage = lapo_stage(state.global_step, max_steps, self.stage1_fraction) if max_steps > 0 else 1
        targets = kwargs.get("lapo_target_length")
        target = int(targets[i]) if targets is not None and targets[i] is not None else self.unknown_length
        return stage, target

    def _score_batch(self, rows, extras, group_size):
        rewards: list[float | None] = []
        for start in range(0, len(rows), group_size):
            group = rows[start : start + group_size]
            stage, target = extras[start]  # one prompt, one step: every row of a group shares both
            if stage == 1:
                rewards.extend(lapo_stage1_rewards(group, self.band_weight, self.band_margin, self.point_band))
            else:
                rewards.extend(lapo_stage2_rewards(group, target, self.unknown_length, self.target_weight, self.sigma))
        return rewards
