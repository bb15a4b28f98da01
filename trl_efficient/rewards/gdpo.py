r"""
The length reward of the GDPO recipe (GDPO: Liu et al., NVIDIA, arXiv 2601.05242; methods.md §5). GDPO itself is
TRL's `multi_objective_aggregation="normalize_then_sum"`: each reward is z-scored within its group, the weighted sum
is z-scored over the batch. The length reward of the paper's efficiency experiment is not published; this is the
**proposed default** of methods.md §5, a correctness-gated length reward.
"""

from __future__ import annotations

from typing import Any

from ..core.answers import is_correct
from ..core.lengths import LengthMeter, completion_text

__all__ = ["get_gdpo_length_reward"]


def get_gdpo_length_reward(
    length_limit: int,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
    require_think_close: bool = False,
) -> _GDPOLengthReward:
    r"""
    Correct-and-short indicator (methods.md §5, proposed default):

    $$ r_i = \mathbb{1}[\text{correct}_i \wedge L_i \le L_{\text{limit}}] $$

    Args:
        length_limit (`int`):
            $L_{\text{limit}}$ in `length_unit` (tokens by default). methods.md proposes 4000 for R1-Distill-1.5B
            scale runs, else `max_completion_length / 2` (what the `gdpo_length` recipe builder passes).
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.
        require_think_close (`bool`, *optional*, defaults to `False`):
            A completion without `</think>` counts as not correct.

    Returns a picklable callable named `gdpo_length_reward`; `None` for rows whose gold cannot be parsed.

    >>> reward = get_gdpo_length_reward(length_limit=4)
    >>> reward(completions=[r"\boxed{3}", r"\boxed{3}", r"\boxed{2}", r"\boxed{3}"], solution=["3", "3", "3", ""],
    ...        completion_ids=[[0] * 4, [0] * 5, [0] * 2, [0] * 2])
    [1.0, 0.0, 0.0, None]
    """
    if isinstance(length_limit, bool) or not isinstance(length_limit, int) or length_limit <= 0:
        raise ValueError(f"length_limit must be a positive int, got {length_limit!r}.")
    if not isinstance(require_think_close, bool):
        raise ValueError(f"require_think_close must be a bool, got {require_think_close!r}.")
    return _GDPOLengthReward(length_limit, LengthMeter(length_unit, length_scope, tokenizer), require_think_close)


class _GDPOLengthReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "gdpo_length_reward"
    proposed_defaults = ("GDPO length reward 1[correct and L <= L_limit], L_limit = max_completion_length / 2",)

    def __init__(self, length_limit: int, meter: LengthMeter, require_think_close: bool) -> None:
        self.length_limit = length_limit
        self.meter = meter
        self.require_think_close = require_think_close

    def __call__(
        self, completions: list, solution: list, completion_ids: list | None = None, **kwargs
    ) -> list[float | None]:
        ids_list = [None] * len(completions) if completion_ids is None else completion_ids
        rewards: list[float | None] = []
        for completion, gold, ids in zip(completions, solution, ids_list, strict=True):
            correct = is_correct(completion, gold, require_think_close=self.require_think_close)
            if correct is None:
                rewards.append(None)
                continue
            short = self.meter(completion_text(completion), ids) <= self.length_limit
            rewards.append(1.0 if correct and short else 0.0)
        return rewards
