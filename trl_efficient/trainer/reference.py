r"""Reference resets (ProRL, Liu et al., "ProRL: Prolonged Reinforcement Learning Expands Reasoning Boundaries in Large
Language Models", arXiv 2505.24864, §2.2 "KL regularization" and "Reference policy reset"; methods.md §33): the
reference policy of TRL's KL term is **hard-reset** to the current policy, and the optimizer's state is reset with it.

ProRL keeps GRPO's KL penalty to a reference policy (TRL's `beta`, `ref_model`):

$$ \mathcal{L}_{\text{KL-RL}}(\theta) = \mathcal{L}_{\text{GRPO}}(\theta)
   - \beta\, D_{\mathrm{KL}}\big(\pi_\theta \,\|\, \pi_{\text{ref}}\big), \qquad
   \pi_{\text{ref}} \leftarrow \pi_\theta \text{ at a reset} $$

and, "to keep the KL term from dominating the loss", resets $\pi_{\text{ref}}$ and the optimizer state "when
validation performance stagnates or degrades" (by hand in the paper). Triggers: `ref_reset_steps = K` (every K-th
optimizer step) and/or `ref_reset_metric` (a plateau, `PlateauMonitor`: `ref_reset_patience` values without beating
the best by `ref_reset_min_delta` in direction `ref_reset_mode`; patience 3 and threshold 0 are proposed defaults).
A reset is TRL's `SyncRefModelCallback.sync_target_model(model, ref_model, alpha=1.0)` plus, with
`ref_reset_optimizer` (default), cleared optimizer state (the LR schedule goes on). Documented choices, one line each:
- resumes exactly (state in `trl_efficient_state.json`, reference weights in `ref_model.safetensors`);
- `sync_ref_model` together with a reset schedule is a config error;
- a reset runs in `on_step_end`, only where TRL generates the next batch (`ref_reset_steps *
  gradient_accumulation_steps` a multiple of `steps_per_generation * num_iterations`; a plateau waits for it);
- PEFT, DeepSpeed and FSDP are refused in one line at construction.
Narrative and sources: docs/advantage-methods.md, "ProRL".
"""

from __future__ import annotations

import logging
import math
import os

from transformers import TrainerCallback

from ..core.state import StatefulComponent
from .trl_internals import metric_buffer

logger = logging.getLogger(__name__)

__all__ = [
    "REF_MODEL_FILE",
    "PlateauMonitor",
    "ReferenceReset",
    "check_reference_reset",
    "check_reference_reset_peft",
    "generation_period",
]

REF_MODEL_FILE = "ref_model.safetensors"  # the reference weights in a checkpoint, once a reset has happened
MODES = ("max", "min")


class PlateauMonitor(StatefulComponent):
    """Plateau detection on a sequence of metric values, as `ReduceLROnPlateau` counts it: a value *improves* when it
    beats the best so far by more than `min_delta` (above it for `mode="max"`, below for `"min"`); after `patience`
    values in a row without improvement, `observe` returns True once and the count starts again (the best is kept, so
    the next trigger again needs `patience` non-improving values). NaN values are ignored.

    >>> m = PlateauMonitor(mode="max", patience=2, min_delta=0.05)
    >>> [m.observe(v) for v in [0.5, 0.6, 0.62, 0.64, 0.7, 0.7, 0.69]]  # 0.62, 0.64: +0.02, +0.04 <= 0.05 over 0.6
    [False, False, False, True, False, False, True]
    """

    state_key = "plateau_monitor"

    def __init__(self, mode: str = "max", patience: int = 3, min_delta: float = 0.0) -> None:
        if mode not in MODES:
            raise ValueError(f"ref_reset_mode must be one of {list(MODES)}, got {mode!r}.")
        if int(patience) != patience or patience < 1:
            raise ValueError(f"ref_reset_patience must be an integer >= 1, got {patience!r}.")
        if not min_delta >= 0:
            raise ValueError(f"ref_reset_min_delta must be >= 0, got {min_delta!r}.")
        self.mode, self.patience, self.min_delta = mode, int(patience), float(min_delta)
        self.best: float | None = None
        self.bad = 0  # values in a row without improvement

    def improves(self, value: float) -> bool:
        if self.best is None:
            return True
        return value > self.best + self.min_delta if self.mode == "max" else value < self.best - self.min_delta

    def observe(self, value: float) -> bool:
        """Record one value; True when it completes a plateau of `patience` values."""
        value = float(value)
        if math.isnan(value):
            return False
        if self.improves(value):
            self.best, self.bad = value, 0
            return False
        self.bad += 1
        if self.bad >= self.patience:
            self.bad = 0
            return True
        return False

    def state_dict(self) -> dict:
        return {"best": self.best, "bad": self.bad}

    def load_state_dict(self, state: dict) -> None:
        self.best = None if state.get("best") is None else float(state["best"])
        self.bad = int(state.get("bad", 0))


def generation_period(args) -> int:
    """Optimizer steps between two of TRL's generations, when that is whole (TRL 1.16 `_prepare_inputs` generates
    every `steps_per_generation * num_iterations` micro-batches; an optimizer step is `gradient_accumulation_steps`
    of them); 0 when generations do not fall on optimizer steps at a fixed period.

    >>> from types import SimpleNamespace as A
    >>> generation_period(A(steps_per_generation=4, num_iterations=1, gradient_accumulation_steps=4))
    1
    >>> generation_period(A(steps_per_generation=4, num_iterations=2, gradient_accumulation_steps=4))
    2
    >>> generation_period(A(steps_per_generation=4, num_iterations=1, gradient_accumulation_steps=3))
    0
    """
    micro = int(args.steps_per_generation) * int(args.num_iterations)
    accumulation = int(args.gradient_accumulation_steps)
    return micro // accumulation if micro % accumulation == 0 else 0


def resets_enabled(args) -> bool:
    return getattr(args, "ref_reset_steps", None) is not None or getattr(args, "ref_reset_metric", None) is not None


def _reset_option(args) -> str:
    """The reset option that is set, as an error quotes it (`ref_reset_steps` first)."""
    steps, metric = getattr(args, "ref_reset_steps", None), getattr(args, "ref_reset_metric", None)
    return f"ref_reset_steps={steps!r}" if steps is not None else f"ref_reset_metric={metric!r}"


def check_reference_reset(args) -> None:
    """Config-time checks of the reset options (`EfficientGRPOConfig.__post_init__`, after `GRPOConfig` derived
    `steps_per_generation`); each failure is one line naming the field."""
    steps, metric = getattr(args, "ref_reset_steps", None), getattr(args, "ref_reset_metric", None)
    PlateauMonitor(args.ref_reset_mode, args.ref_reset_patience, args.ref_reset_min_delta)  # own checks
    if steps is not None and (int(steps) != steps or steps < 1):
        raise ValueError(f"ref_reset_steps must be a positive number of optimizer steps or None, got {steps!r}.")
    if not resets_enabled(args):
        return
    what = _reset_option(args)
    if not args.beta > 0:
        raise ValueError(
            f"{what} resets the reference model of the KL term, but beta={args.beta}: TRL builds no reference model "
            "without a KL term; set beta > 0 (the prorl recipe uses 1e-4) or drop the reset options."
        )
    if args.sync_ref_model:
        raise ValueError(
            f"{what} and sync_ref_model=True both rewrite the reference model: use TRL's soft sync "
            "(sync_ref_model, ref_model_mixup_alpha, ref_model_sync_steps) or the hard resets, not both."
        )
    if getattr(args, "deepspeed", None) or getattr(args, "fsdp", None):
        raise ValueError(f"{what} clears the optimizer state, which DeepSpeed and FSDP shard: not supported with them.")
    period = generation_period(args)
    if period == 0 or (steps is not None and steps % period):
        raise ValueError(
            f"{what}: a reset must fall where TRL generates the next batch (every steps_per_generation * "
            f"num_iterations = {args.steps_per_generation * args.num_iterations} micro-batches, "
            f"gradient_accumulation_steps={args.gradient_accumulation_steps} per optimizer step), so that every batch "
            "after it is scored against the new reference; use a ref_reset_steps that is a multiple of "
            f"{period or 'a whole number of optimizer steps (make them divide evenly)'}."
        )
    if str(metric).startswith("eval_") and getattr(args.eval_strategy, "value", args.eval_strategy) == "no":
        raise ValueError(
            f"ref_reset_metric={metric!r} is an evaluation metric but eval_strategy='no': set eval_strategy "
            "(and an eval dataset) or monitor a training metric such as 'reward'."
        )


def check_reference_reset_peft(args, use_peft: bool) -> None:
    """Refuse reference resets with PEFT in one line, at config time (`trl-efficient train`: the parsed config and
    `--use_peft`) and in `EfficientGRPOTrainer.__init__` before the model loads (a `peft_config`).

    With PEFT, TRL's reference is the base model with the adapter disabled. A reset could fold the adapter into the
    base and start a new one (policy unchanged, reference = policy), but the saved adapter would then apply to a base
    no one has, so resets are refused rather than supported.

    >>> from types import SimpleNamespace as A
    >>> check_reference_reset_peft(A(ref_reset_steps=None, ref_reset_metric=None), True)
    >>> check_reference_reset_peft(A(ref_reset_steps=200, ref_reset_metric=None), True)
    Traceback (most recent call last):
    ...
    ValueError: ref_reset_steps=200 (reference resets, the prorl/brorl recipes) cannot run with PEFT ...
    """
    if not use_peft or args is None or not resets_enabled(args):
        return
    what = _reset_option(args)
    raise ValueError(
        f"{what} (reference resets, the prorl/brorl recipes) cannot run with PEFT (--use_peft / peft_config): TRL's "
        "reference is then the adapter-disabled base, which a reset cannot move without changing the base the saved "
        "adapter applies to; train without --use_peft (full fine-tuning, or --lisa_activated_layers for less memory) "
        f"or set --{what.split('=')[0]} None."
    )


class ReferenceReset(TrainerCallback, StatefulComponent):
    """The reset schedule and its application (see the module docstring). Built by `from_config(args)` (`None` when
    no reset option is set), registered by `EfficientGRPOTrainer` as a callback and a stateful component; `attach`
    gives it the trainer, whose `model`, `ref_model` and `optimizer` it resets.

    State (in `trl_efficient_state.json` under `reference_reset`): `count`, `last_step` (global step of the last
    reset, -1 before any), `pending` (a plateau reset waiting for a generation boundary), `events` (`[step, reason]`
    per reset) and the `monitor`.
    """

    state_key = "reference_reset"
    papers = ("2505.24864",)  # ProRL: cited by the model card of every run that resets (`hub.card.cited_papers`)

    def __init__(
        self,
        every_steps: int | None = None,
        metric: str | None = None,
        mode: str = "max",
        patience: int = 3,
        min_delta: float = 0.0,
        reset_optimizer: bool = True,
        period: int = 1,
    ) -> None:
        self.every_steps = every_steps
        self.metric = metric
        self.monitor = PlateauMonitor(mode, patience, min_delta) if metric is not None else None
        self.reset_optimizer = reset_optimizer
        self.period = max(int(period), 1)  # optimizer steps between TRL's generations
        self.count = 0
        self.last_step = -1
        self.pending = False
        self.events: list[list] = []
        self.trainer = None

    @classmethod
    def from_config(cls, args) -> ReferenceReset | None:
        if not resets_enabled(args):
            return None
        return cls(
            every_steps=args.ref_reset_steps,
            metric=args.ref_reset_metric,
            mode=args.ref_reset_mode,
            patience=args.ref_reset_patience,
            min_delta=args.ref_reset_min_delta,
            reset_optimizer=args.ref_reset_optimizer,
            period=generation_period(args),
        )

    # -------------------------------------------------------------------------------------------- component contract
    def attach(self, trainer) -> None:
        """Component contract (`EfficientGRPOTrainer.__init__` calls it): the trainer must hold a separate reference
        model and an unsharded optimizer."""
        if trainer.ref_model is None:
            raise NotImplementedError(
                "Reference resets need a separate reference model; with PEFT, TRL uses the adapter-disabled base as "
                "the reference (nothing to reset): train without peft_config or drop the ref_reset options."
            )
        if trainer.is_deepspeed_enabled or trainer.is_fsdp_enabled:
            raise NotImplementedError("Reference resets clear the optimizer state: not supported with DeepSpeed/FSDP.")
        self.trainer = trainer

    def state_dict(self) -> dict:
        return {
            "count": self.count,
            "last_step": self.last_step,
            "pending": self.pending,
            "events": [list(e) for e in self.events],
            "monitor": self.monitor.state_dict() if self.monitor is not None else None,
        }

    def load_state_dict(self, state: dict) -> None:
        self.count = int(state.get("count", 0))
        self.last_step = int(state.get("last_step", -1))
        self.pending = bool(state.get("pending", False))
        self.events = [list(e) for e in state.get("events", [])]
        if self.monitor is not None and state.get("monitor") is not None:
            self.monitor.load_state_dict(state["monitor"])

    # ----------------------------------------------------------------------------------------------------- schedule
    def at_boundary(self, step: int) -> bool:
        """Whether TRL generates a new batch right after optimizer step `step`."""
        return step % self.period == 0

    def due(self, step: int) -> str | None:
        """Why a reset is due after optimizer step `step` (`"every_steps"`, `"plateau"`), or None.

        >>> r = ReferenceReset(every_steps=4, period=2)
        >>> [r.due(s) for s in (2, 4, 8)]
        [None, 'every_steps', 'every_steps']
        >>> r.pending = True
        >>> r.due(2), r.due(3)
        ('plateau', None)
        """
        if step <= 0 or not self.at_boundary(step):
            return None
        if self.every_steps is not None and step % self.every_steps == 0:
            return "every_steps"
        return "plateau" if self.pending else None

    # ---------------------------------------------------------------------------------------------------- callbacks
    def on_step_end(self, args, state, control, **kwargs) -> None:
        reason = self.due(state.global_step)
        if reason is not None:
            self.reset(state.global_step, reason)
        metric_buffer(self.trainer, "train")["trl_efficient/ref_reset_count"].append(float(self.count))

    def on_log(self, args, state, control, logs=None, **kwargs) -> None:
        # Every rank logs the same values (TRL averages gathered metrics), so every rank takes the same decision.
        if self.monitor is None or not logs or self.metric not in logs:
            return
        if self.monitor.observe(logs[self.metric]):
            self.pending = True
            logger.info("trl-efficient: %s has not improved for %d logged values: reference reset pending.",
                        self.metric, self.monitor.patience)  # fmt: skip
        # a log after the step's own `on_step_end` (training logs, then evaluation): reset now if this step ends a
        # generation batch, so that the checkpoint saved next holds it
        if self.pending and self.last_step == state.global_step:
            self.pending = False  # the reference was reset at this very step
        elif self.pending and self.due(state.global_step) == "plateau":
            self.reset(state.global_step, "plateau")

    # ------------------------------------------------------------------------------------------------------- reset
    def reset(self, step: int, reason: str) -> None:
        """Copy the policy into the reference model (TRL's `sync_target_model` with alpha = 1) and clear the
        optimizer's per-parameter state."""
        from trl.trainer.callbacks import SyncRefModelCallback

        trainer = self.trainer
        policy = trainer.accelerator.unwrap_model(trainer.model)
        reference = trainer.accelerator.unwrap_model(trainer.ref_model)
        SyncRefModelCallback.sync_target_model(policy, reference, 1.0)
        if self.reset_optimizer and trainer.optimizer is not None:
            trainer.optimizer.state.clear()
        self.count += 1
        self.last_step = int(step)
        self.pending = False
        if self.monitor is not None:
            self.monitor.bad = 0
        self.events.append([int(step), reason])
        logger.info("trl-efficient: reference reset %d at step %d (%s)%s.", self.count, step, reason,
                    ", optimizer state cleared" if self.reset_optimizer else "")  # fmt: skip

    # ------------------------------------------------------------------------------------------------- checkpoints
    def save_reference(self, folder: str) -> str | None:
        """Write the reference weights to `folder/ref_model.safetensors` once a reset has happened (before, the
        reference is the initial model, which TRL rebuilds on resume); returns the path or None."""
        if self.count == 0:
            return None
        from safetensors.torch import save_model

        path = os.path.join(folder, REF_MODEL_FILE)
        save_model(self.trainer.accelerator.unwrap_model(self.trainer.ref_model), path)
        return path

    def load_reference(self, folder: str) -> None:
        """Restore the reference weights saved by `save_reference` (after `load_state_dict`); a checkpoint whose
        state records a reset but holds no reference weights cannot resume exactly and is refused in one line."""
        if self.count == 0:
            return
        path = os.path.join(folder, REF_MODEL_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"Checkpoint {folder} records {self.count} reference reset(s) but has no {REF_MODEL_FILE}: the "
                "reference policy cannot be restored, so the run cannot resume exactly."
            )
        from safetensors.torch import load_model

        load_model(self.trainer.accelerator.unwrap_model(self.trainer.ref_model), path)
