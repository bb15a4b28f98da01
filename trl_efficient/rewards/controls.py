r"""
Rewards of two negative controls: what a comparison of methods must see a method beat before it credits it.

- `get_constant_length_penalty`: a fixed per-token penalty $-\alpha L$, the simplest length penalty. A method whose
  claim is more than "a length penalty shortens" must beat it (A-DLP with its controller frozen is this reward).
- `get_placebo_reward`: a reward term of zero mean that carries no information about length or correctness: a
  uniform draw in $[-s, s]$ keyed by the completion's token ids and a seed (SHA-256), so it is reproducible,
  stateless (nothing to checkpoint) and the same on every process. Trained with it, GRPO gets noisier advantages and
  nothing else: a check that the placebo passes is a broken check.

>>> penalty = get_constant_length_penalty(alpha=0.01)
>>> penalty(completions=["a", "b"], completion_ids=[[0] * 10, [0] * 30])  # -0.01 * 10 ; -0.01 * 30
[-0.1, -0.3]
>>> placebo = get_placebo_reward(scale=0.1, seed=0)
>>> values = placebo(completions=["a"] * 4, completion_ids=[[1], [2], [1, 2], [1]])
>>> values[0] == values[3], all(-0.1 <= v <= 0.1 for v in values)  # the same ids give the same draw
(True, True)
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..core.checks import check_number as _check_number
from ..core.checks import ids_or_none as _ids_or_none
from ..core.lengths import LengthMeter, completion_text

__all__ = ["get_constant_length_penalty", "get_placebo_reward"]


def get_constant_length_penalty(
    alpha: float = 1 / 4096, length_unit: str = "tokens", length_scope: str = "total", tokenizer: Any = None
) -> _ConstantLengthPenalty:
    r"""
    A constant per-token length penalty (the negative control `constant-penalty`; no paper), to be **added
    to a correctness reward** of weight 1:

    $$ R_i = c_i - \alpha L_i $$

    with $L_i$ the completion's length (tokens by default; every row, correct or not). `alpha` (`float`, per token,
    defaults to `1/4096`: an answer at a 4,096-token cap loses one correct answer; a comparison scales it to `1/cap`,
    the value A-DLP's capped controller sits at) never changes during training: what every adaptive penalty is
    compared with. Never `None`.

    >>> get_constant_length_penalty(alpha=0.5)(completions=["x"], completion_ids=[[7, 7, 7, 7]])  # -0.5 * 4
    [-2.0]
    """
    _check_number("alpha", alpha, minimum=0.0)
    return _ConstantLengthPenalty(float(alpha), LengthMeter(length_unit, length_scope, tokenizer))


class _ConstantLengthPenalty:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "constant_length_penalty"  # stable metric key: rewards/constant_length_penalty/mean

    def __init__(self, alpha: float, meter: LengthMeter) -> None:
        self.alpha, self.meter = alpha, meter

    def __call__(self, completions, completion_ids=None, **kwargs) -> list[float]:
        ids = _ids_or_none(completion_ids, len(completions))
        lengths = [self.meter(completion_text(c), i) for c, i in zip(completions, ids, strict=True)]
        return [-self.alpha * n for n in lengths]


def get_placebo_reward(scale: float = 0.1, seed: int = 0) -> _PlaceboReward:
    r"""
    A placebo reward term (the negative control `placebo`; no paper): $u_i \in [-s, s]$, uniform, drawn from
    SHA-256 of `seed` and the completion's token ids, so that it has mean 0 and is independent of the completion's
    length and correctness (two completions with the same ids get the same value; any other pair, independent
    draws). `scale` (`float`, defaults to `0.1`: about the within-group spread of `constant-penalty`'s term in the
    synthetic world, 40 tokens x 1/384) sets $s$. Added to a correctness reward, it only adds noise to the advantages.
    Never `None`.

    >>> reward = get_placebo_reward(scale=1.0, seed=3)
    >>> first = reward(completions=["x", "y"], completion_ids=[[5], [5]])
    >>> first == reward(completions=["u", "v"], completion_ids=[[5], [5]]), first[0] == first[1]
    (True, True)
    """
    _check_number("scale", scale, minimum=0.0)
    return _PlaceboReward(float(scale), int(seed))


class _PlaceboReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "placebo_reward"  # stable metric key: rewards/placebo_reward/mean

    def __init__(self, scale: float, seed: int) -> None:
        self.scale, self.seed = scale, seed

    def draw(self, ids) -> float:
        """The value of a completion with token ids `ids`: 8 bytes of SHA-256 as a uniform in [-scale, scale]."""
        digest = hashlib.sha256(f"{self.seed}:{','.join(str(int(t)) for t in ids)}".encode()).digest()
        return self.scale * (2.0 * int.from_bytes(digest[:8], "big") / 2**64 - 1.0)

    def __call__(self, completions, completion_ids=None, **kwargs) -> list[float]:
        ids = _ids_or_none(completion_ids, len(completions))
        return [
            self.draw(i if i is not None else completion_text(c).encode())
            for c, i in zip(completions, ids, strict=True)
        ]
