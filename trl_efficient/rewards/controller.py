r"""
Controller-driven length penalties: A-DLP, the Adaptive Direct Length Penalty (Su et al., "Thinking Fast and
Right", arXiv 2505.18298; methods.md §18; JinyanSu1/A-DLP).

A per-token penalty $\lambda_t L_i$ whose coefficient follows the batch accuracy: it grows while the accuracy is
above a reference and shrinks below it. The coefficient lives in the reward object, which is **stateful**:
`EfficientGRPOTrainer` saves it with every checkpoint (`trl_efficient_state.json`, key `adlp_length_reward`) and
calls `update(batch)` once per generation batch, in training only, with the gathered batch, after scoring, so every
rank holds the same $\lambda$ and step $t$ is scored with $\lambda_t$.

>>> reward = get_adlp_reward(lambda_init=0.01, eta=0.1, acc_ref=0.5)
>>> reward(completions=["a", "b"], completion_ids=[[0] * 10, [0] * 30])  # -0.01 * 10 ; -0.01 * 30
[-0.1, -0.3]
>>> reward.step(accuracy=1.0)  # 0.01 + 0.1 * (1.0 - 0.5)
0.060000000000000005
"""

from __future__ import annotations

import math
from typing import Any

from ..core.checks import check_number as _check_number
from ..core.checks import ids_or_none as _ids_or_none
from ..core.lengths import LengthMeter, completion_text
from ..core.state import StatefulComponent

__all__ = ["get_adlp_reward"]


def get_adlp_reward(
    lambda_init: float = 1e-3,
    eta: float = 1e-3,
    acc_ref: float = 0.62,
    lambda_max: float | None = None,
    cap_lambda: bool = False,
    max_completion_length: int | None = None,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _ADLPLengthReward:
    r"""
    A-DLP length penalty (arXiv 2505.18298, §3; methods.md §18; JinyanSu1/A-DLP `verl/verl/trainer/main_ppo.py`
    `constrained_reward_fn`, the $\lambda$ update in `verl/verl/trainer/ppo/ray_trainer.py`; defaults from
    `scripts/train.sh`). Returns $-\lambda_t L_i$, to be **added to a correctness reward** of weight 1, so the total
    is the paper's

    $$ R_i = c_i - \lambda_t L_i, \qquad
    \lambda_{t+1} = \min\bigl(\lambda_{\max}, \max(0, \lambda_t + \eta\,(\mathrm{acc}_t - \mathrm{acc}_{ref}))\bigr) $$

    with $L_i$ the raw completion length (every row, correct or not) and $\mathrm{acc}_t$ the fraction correct of the
    gathered training batch (`nanmean(batch.correct)`, the trainer's correctness column: keep correctness a separate
    reward). $\lambda_{\max} = \infty$ by default, as released (`ray_trainer.py`, JinyanSu1/A-DLP `afbc411`);
    `lambda_max` and `cap_lambda=True` ($1/\text{max\_completion\_length}$; `lambda_init` clipped to it) are ours.
    `update(batch)` (training only, after scoring): a batch with no scorable row leaves $\lambda$ and the step count
    unchanged (documented choice); $\lambda$ is logged as `adlp/lambda`. Details: docs/adaptive-methods.md, "A-DLP".

    Args:
        lambda_init (`float`, *optional*, defaults to `1e-3`): $\lambda_0$, >= 0 (script value; the YAML has 0.1).
        eta (`float`, *optional*, defaults to `1e-3`): controller step size $\eta$, >= 0 (script value; YAML 0.01).
        acc_ref (`float`, *optional*, defaults to `0.62`): reference accuracy, in [0, 1] (script value).
        lambda_max (`float`, *optional*): upper bound on $\lambda$, > 0; `None` (default) = unbounded (the paper
            and the released code).
        cap_lambda (`bool`, *optional*, defaults to `False`): set `lambda_max = 1 / max_completion_length` (an
            option, not in the paper); an explicit `lambda_max` wins.
        max_completion_length (`int`, *optional*): the completion cap in tokens, needed by `cap_lambda`.
        length_unit, length_scope, tokenizer: see `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `adlp_length_reward` with `state_dict`/`load_state_dict`/`update` and
    `step(accuracy)` (one controller step, returns the new $\lambda$).

    >>> reward = get_adlp_reward(lambda_init=0.02, eta=0.1, acc_ref=0.5, lambda_max=0.05)
    >>> reward.step(0.0), reward.step(0.0), reward.step(1.0), reward.step(1.0)  # 0.02-0.05 -> 0 ; 0 ; 0.05 ; cap
    (0.0, 0.0, 0.05, 0.05)
    """
    _check_number("lambda_init", lambda_init, 0.0)
    _check_number("eta", eta, 0.0)
    _check_number("acc_ref", acc_ref, 0.0, 1.0)
    _check_number("lambda_max", lambda_max, 0.0, low_open=True, allow_none=True)
    if cap_lambda and lambda_max is None:
        if max_completion_length is None:
            raise ValueError("cap_lambda=True needs max_completion_length (lambda_max = 1 / max_completion_length).")
        _check_number("max_completion_length", max_completion_length, 1)
        lambda_max = 1.0 / max_completion_length
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _ADLPLengthReward(float(lambda_init), float(eta), float(acc_ref), lambda_max, meter)


class _ADLPLengthReward(StatefulComponent):
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "adlp_length_reward"
    state_key = "adlp_length_reward"

    def __init__(self, lambda_init: float, eta: float, acc_ref: float, lambda_max: float | None, meter) -> None:
        self.eta = eta
        self.acc_ref = acc_ref
        self.lambda_max = None if lambda_max is None else float(lambda_max)
        self.meter = meter
        self.lam = self._clip(lambda_init)
        self.steps = 0  # controller updates applied (batches with a scorable row)

    def _clip(self, lam: float) -> float:
        lam = max(0.0, lam)
        return lam if self.lambda_max is None else min(self.lambda_max, lam)

    def step(self, accuracy: float) -> float:
        """One controller update with the batch accuracy `accuracy`; NaN (nothing scorable) leaves it unchanged."""
        if accuracy is None or math.isnan(accuracy):
            return self.lam
        self.lam = self._clip(self.lam + self.eta * (float(accuracy) - self.acc_ref))
        self.steps += 1
        return self.lam

    def update(self, batch) -> None:
        """Called by `EfficientGRPOTrainer` in training only, with the gathered batch, after scoring."""
        import torch

        correct = batch.correct
        accuracy = torch.nanmean(correct).item() if correct.numel() else float("nan")
        self.step(accuracy)

    def state_dict(self) -> dict:
        return {"lambda": self.lam, "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.lam = float(state["lambda"])
        self.steps = int(state.get("steps", 0))

    def __call__(self, completions: list, completion_ids: list | None = None, **kwargs) -> list[float]:
        n = len(completions)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric("adlp/lambda", self.lam)
        lam = self.lam
        return [
            -lam * self.meter(completion_text(c), ids)
            for c, ids in zip(completions, _ids_or_none(completion_ids, n), strict=True)
        ]
