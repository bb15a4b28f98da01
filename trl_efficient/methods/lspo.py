"""LSPO (arXiv 2510.01459, methods.md §20): length-aware prompt selection, as the `lspo` prompt sampler
(`EfficientGRPOConfig.prompt_sampler`; the sampler contract is in `trainer/prompt_samplers.py`)."""

from __future__ import annotations

import math

from ..core.sampler_defaults import LSPO_HIGH, LSPO_LOW, LSPO_MAX_RATIO
from ..trainer.filters import zero_std_filter
from ..trainer.group import GroupBatch
from ..trainer.prompt_samplers import PROMPT_SAMPLERS, PromptSampler, dataset_column

__all__ = ["LSPO_HIGH", "LSPO_LOW", "LSPO_MAX_RATIO", "LSPOSampler", "quantile"]


def quantile(values: list[float], q: float) -> float:
    """Empirical quantile with linear interpolation between order statistics (`numpy.quantile`'s default):
    with sorted values `v_0 <= ... <= v_{n-1}`, `h = q (n - 1)`, `Q(q) = v_{floor h} + (h - floor h)(v_{floor h + 1} -
    v_{floor h})`.

    >>> quantile([10, 20, 30, 40, 50], 0.3)  # h = 1.2: 20 + 0.2 * 10
    22.0
    """
    v = sorted(float(x) for x in values)
    h = q * (len(v) - 1)
    lo = math.floor(h)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])


@PROMPT_SAMPLERS.register("lspo")
class LSPOSampler(PromptSampler):
    r"""LSPO's length-aware prompt selection (arXiv 2510.01459; methods.md §20), as a sampler.

    The sampler keeps, per prompt (`idx` column), the mean response length $L(q) = \frac{1}{G}\sum_i |o_i|$ of its
    latest group (from the gathered batch in `update`). When it draws a chunk it skips the prompts with
    $Q(L_{low}) < L(q) < Q(L_{high})$ or $L(q) > L_{max}$, i.e. it keeps

    $$L(q) \le Q(L_{low}) \quad\text{or}\quad Q(L_{high}) \le L(q) \le L_{max},$$

    with $Q$ the empirical quantiles (`quantile`, linear interpolation) of the known lengths of all prompts seen so
    far. Prompts never seen are always eligible. Skipped prompts are consumed for the current pass over the data
    (they come back in the next pass). If fewer than `batch_size` eligible prompts are left in the pass, the chunk is
    filled with the skipped ones in pass order (documented choice; the paper resamples until the batch is full,
    which TRL cannot do). With no history it yields exactly TRL's `RepeatSampler` sequence.

    Zero-variance groups. LSPO first drops the groups whose rewards are all equal (DAPO dynamic sampling) and only
    then computes $L(q)$ and the length quantiles over the groups left (arXiv 2510.01459, the LSPO method: the
    length filter is applied after the accuracy-based filter). So does `update`: a group that `zero_std_filter`
    drops (the same rule as the recipe's `completion_filter: zero_std`, which masks those rows out of the loss; TRL
    cannot resample) gives no length, and its prompt's earlier record is removed, so it neither counts in the
    quantiles nor is skipped for its length (it is unseen again: always eligible, as the paper generates every
    sampled prompt before filtering).

    Args:
        low, high: quantile levels $L_{low}$, $L_{high}$ (proposed defaults 0.3 / 0.7; the paper does not publish them).
        l_max: $L_{max}$ in tokens; `None` -> `l_max_ratio * args.max_completion_length` (proposed default 0.95,
            to exclude mostly-truncated groups), or no cap without `args`.

    Which lengths: the latest group mean per prompt (the current policy) with non-zero reward variance; the quantiles
    are over all such prompts known so far rather than over one batch, since a sampler decides before generating
    (documented choice).
    """

    needs_columns = ("idx",)

    def __init__(
        self,
        data_source,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        shuffle: bool = True,
        seed: int | None = None,
        args=None,
        low: float = LSPO_LOW,
        high: float = LSPO_HIGH,
        l_max: float | None = None,
        l_max_ratio: float = LSPO_MAX_RATIO,
    ) -> None:
        super().__init__(data_source, mini_repeat_count, batch_size, repeat_count, shuffle, seed, args)
        self.check(args, low=low, high=high, l_max=l_max, l_max_ratio=l_max_ratio)
        self.low, self.high = float(low), float(high)
        cap = getattr(args, "max_completion_length", None)
        if l_max is not None:
            self.l_max = float(l_max)
        else:
            self.l_max = float(l_max_ratio) * cap if cap else math.inf
        self.ids = [int(i) for i in dataset_column(data_source, "idx", "lspo")]
        self.lengths: dict[int, float] = {}

    @classmethod
    def check(cls, args=None, low=LSPO_LOW, high=LSPO_HIGH, l_max=None, l_max_ratio=LSPO_MAX_RATIO) -> None:
        if not 0.0 <= float(low) <= float(high) <= 1.0:
            raise ValueError(f"sampler_kwargs low/high must satisfy 0 <= low <= high <= 1, got {low}, {high}.")
        if l_max is not None and float(l_max) <= 0:
            raise ValueError(f"sampler_kwargs l_max must be a positive length in tokens, got {l_max}.")
        if float(l_max_ratio) <= 0:
            raise ValueError(f"sampler_kwargs l_max_ratio must be positive, got {l_max_ratio}.")

    def thresholds(self) -> tuple[float, float] | None:
        """`(Q(L_low), Q(L_high))` of the known lengths, or `None` before any prompt was seen."""
        if not self.lengths:
            return None
        known = list(self.lengths.values())
        return quantile(known, self.low), quantile(known, self.high)

    def eligible(self, idx: int, bounds: tuple[float, float] | None) -> bool:
        """Whether prompt `idx` (its `idx` column value) may be drawn under the thresholds `bounds`."""
        length = self.lengths.get(int(idx))
        if length is None or bounds is None:
            return True  # unseen prompts are always eligible
        q_low, q_high = bounds
        return not (q_low < length < q_high or length > self.l_max)

    def choose(self, remaining: list[int]) -> list[int]:
        bounds = self.thresholds()
        ok = [self.eligible(self.ids[i], bounds) for i in remaining]
        picks = [p for p, e in enumerate(ok) if e][: self.batch_size]
        if len(picks) < self.batch_size:  # too few eligible left in this pass: fill with skipped ones, in order
            picks += [p for p, e in enumerate(ok) if not e][: self.batch_size - len(picks)]
        return sorted(picks)

    def update(self, batch: GroupBatch) -> None:
        if "idx" not in batch.metadata:
            raise ValueError("prompt_sampler='lspo' needs the `idx` column in the gathered batch metadata.")
        keep = zero_std_filter(batch).tolist()  # False on every row of a zero-variance group
        sums: dict[int, list[float]] = {}
        for idx, length, kept in zip(batch.metadata["idx"], batch.lengths.tolist(), keep, strict=True):
            if not kept:  # dropped before L(q) and the quantiles (the paper): forget the prompt's length
                self.lengths.pop(int(idx), None)
                continue
            acc = sums.setdefault(int(idx), [0.0, 0])
            acc[0] += float(length)
            acc[1] += 1
        for idx, (total, count) in sums.items():
            self.lengths[idx] = total / count

    def state_dict(self) -> dict:
        return {**super().state_dict(), "lengths": {str(k): v for k, v in self.lengths.items()}}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.lengths = {int(k): float(v) for k, v in state.get("lengths", {}).items()}
