r"""LISA, Layerwise Importance Sampled AdamW (Pan et al., "LISA: Layerwise Importance Sampling for Memory-Efficient
Large Language Model Fine-Tuning", arXiv 2403.17919, NeurIPS 2024, Algorithm 1), as two options of any recipe:
`lisa_activated_layers` ($\gamma$) and `lisa_interval_steps` ($K$), LMFlow's names.

Full-parameter training in which the embeddings and the LM head (and everything else outside the decoder-layer list:
the final norm) always train, and only $\gamma$ of the $N_L$ decoder layers are trainable at a time; the active set
is drawn again every $K$ optimizer steps:

$$ \mathcal{A}_i \sim \mathrm{Uniform}\{S \subset \{0, \dots, N_L - 1\} : |S| = \gamma\}, \qquad
   \text{layer } \ell \text{ trains at step } t \iff \ell \in \mathcal{A}_{\lfloor t / K \rfloor} $$

(each layer is active with probability $\gamma / N_L$, the paper's $p_\ell$; $p = 1$ for embeddings and head).

Followed from the released code, LMFlow `src/lmflow/pipeline/utils/lisa_trainer.py` `DynamicLayerActivationCallback`
(OptimalScale/LMFlow, checked at f3597db; = 2024 `finetuner.py` ac7e9c3; Axolotl's `callbacks/lisa.py` `LISACallback`
adapts it): a `TrainerCallback` setting `requires_grad` of the decoder layers only; the draw is at the start of each
optimizer step with `global_step % K == 0` (`on_step_begin`, first at step 0, after the optimizer was built over every
parameter: LMFlow issue #726); $\gamma$ layers uniformly without replacement (`np.random.choice(range(N_L), gamma,
replace=False)`); LMFlow defaults 2 and 20 (`args.py`). Narrative, sources and measurements: docs/lisa.md ("What
runs", "Refused, in one line"). Where this module differs:

1. **Random numbers**: interval $i$'s set is `numpy.random.default_rng([seed, i])` (not NumPy's global RNG), so ranks
   agree and a resume re-applies the set saved under state key `"lisa"` bit for bit; no Axolotl step-1 redraw.
2. **Optimizer memory**: every draw drops the AdamW state and `.grad` of inactive layers (LMFlow issues #729, #768);
   a layer kept across a draw keeps its state, a re-activated one starts from zero moments; embeddings/head keep theirs.
3. **Finding the layers**: `model.get_decoder().layers`, else the `ModuleList` of `_no_split_modules` blocks; neither
   fails at construction in one line.
4. **Refused** in one line: PEFT/LoRA, ZeRO-3, FSDP, $\gamma \notin [1, N_L]$, $K < 1$. ZeRO-1/2 is accepted with a
   warning (no memory saving; frozen layers drift by momentum: `get_all_grad_tensors`, DeepSpeed edaa722;
   `tests/multiprocess/test_deepspeed_lisa.py`). DDP sets `ddp_find_unused_parameters=True`
   (`tests/multiprocess/test_multiprocess_lisa.py`). Training's end restores every layer's `requires_grad`.

>>> sample_layers(seed=42, interval=0, num_layers=8, activated_layers=2)
[0, 6]
>>> [sample_layers(42, i, 8, 2) for i in range(1, 4)]  # a new set every interval, the same for every rank and rerun
[[4, 6], [1, 2], [1, 5]]
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback, TrainerControl

from ..core.state import StatefulComponent
from .trl_internals import metric_buffer

logger = logging.getLogger(__name__)

__all__ = [
    "LISA",
    "build_lisa",
    "check_lisa_config",
    "check_lisa_peft",
    "decoder_layers",
    "deepspeed_zero_stage",
    "sample_layers",
]


def sample_layers(seed: int, interval: int, num_layers: int, activated_layers: int) -> list[int]:
    """The decoder layers (sorted indices) active during interval `interval` (optimizer steps `interval * K` to
    `interval * K + K - 1`): `activated_layers` of `num_layers`, uniformly without replacement, from a generator
    seeded with `[seed, interval]` alone."""
    rng = np.random.default_rng([int(seed) % 2**63, int(interval)])
    return sorted(int(i) for i in rng.choice(num_layers, activated_layers, replace=False))


def decoder_layers(model: torch.nn.Module) -> tuple[str, torch.nn.ModuleList]:
    """`(qualified name, the ModuleList)` of the model's decoder layers: `model.get_decoder().layers`, else the
    `ModuleList` whose blocks are all of a class named in `model._no_split_modules`; `ValueError` when neither."""
    try:
        decoder = model.get_decoder() if callable(getattr(model, "get_decoder", None)) else None
    except (AttributeError, NotImplementedError, TypeError):
        decoder = None
    layers = getattr(decoder, "layers", None)
    if isinstance(layers, torch.nn.ModuleList) and len(layers) > 0:
        for name, module in model.named_modules():
            if module is layers:
                return name, layers
    blocks = set(getattr(model, "_no_split_modules", None) or ())
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) and all(type(m).__name__ in blocks for m in module):
            return name, module
    raise ValueError(
        f"lisa_activated_layers needs the model's list of decoder layers: {type(model).__name__} has no "
        f"get_decoder().layers and no ModuleList of its _no_split_modules blocks ({sorted(blocks)})."
    )


def deepspeed_zero_stage(deepspeed: Any) -> int | None:
    """The ZeRO stage of a `deepspeed` training argument (a dict, a JSON object text, or a JSON file path), or of an
    `accelerate launch` DeepSpeed run (`ACCELERATE_DEEPSPEED_ZERO_STAGE`); `None` without DeepSpeed.

    >>> deepspeed_zero_stage({"zero_optimization": {"stage": 3}}), deepspeed_zero_stage(None)
    (3, None)
    """
    config = deepspeed
    if isinstance(config, str):
        text = config
        if not text.lstrip().startswith("{"):
            if not os.path.exists(text):
                return None
            with open(text) as f:
                text = f.read()
        config = json.loads(text)
    if isinstance(config, dict):
        stage = (config.get("zero_optimization") or {}).get("stage")
        return None if stage is None else int(stage)
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE")
        return int(stage) if stage else None
    return None


def check_lisa_config(args) -> None:
    """Config-time checks of `lisa_activated_layers` / `lisa_interval_steps` (one line each, naming the field); the
    upper bound of `lisa_activated_layers` (the model's layer count) and PEFT are checked when the trainer is built."""
    gamma, interval = getattr(args, "lisa_activated_layers", None), getattr(args, "lisa_interval_steps", 20)
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise ValueError(f"lisa_interval_steps must be a whole number of optimizer steps >= 1, got {interval!r}.")
    if gamma is None:
        return
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise ValueError(
            f"lisa_activated_layers must be a number of decoder layers >= 1 (or None for full fine-tuning), got "
            f"{gamma!r}."
        )
    stage = deepspeed_zero_stage(getattr(args, "deepspeed", None))
    if stage == 3:
        raise ValueError(
            f"lisa_activated_layers={gamma} is not supported with DeepSpeed ZeRO-3 (partitioned parameters are "
            "gathered by the engine, so freezing a layer's parameters does not freeze what it trains): use ZeRO-1/2 or "
            "DDP, or lisa_activated_layers=None."
        )
    if stage in (1, 2):
        logger.warning(
            "lisa_activated_layers=%d with DeepSpeed ZeRO-%d: DeepSpeed's optimizer keeps one flat fp32 partition, "
            "with its Adam state, over every parameter and fills a frozen layer's missing gradient with zeros "
            "(DeepSpeedZeroOptimizer.get_all_grad_tensors), so the optimizer memory is not reduced and a layer frozen "
            "after it trained keeps moving by its remaining Adam momentum and weight decay (as LMFlow's callback does "
            "under its ZeRO-2 script); for exact freezing and the memory saving use DDP or one process.",
            gamma, stage,
        )  # fmt: skip
    fsdp = getattr(args, "fsdp", None)
    if fsdp or os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        raise ValueError(
            f"lisa_activated_layers={gamma} is not supported with FSDP (flattened, sharded parameters; not "
            "verified): use DDP or DeepSpeed ZeRO-1/2, or lisa_activated_layers=None."
        )


def _peft_error(gamma: int) -> ValueError:
    return ValueError(
        f"lisa_activated_layers={gamma} trains the full model's layers and cannot be combined with PEFT/LoRA (the "
        "adapters are the only trainable weights): drop --use_peft / peft_config, or set lisa_activated_layers=None."
    )


def check_lisa_peft(args, use_peft: bool) -> None:
    """Config-time PEFT checks of `trl-efficient train`: `--use_peft` (TRL's `ModelConfig`) with `lisa_activated_layers`
    is one line, and with reference resets (`reference.check_reference_reset_peft`); a `peft_config` given to the
    trainer in Python is refused when the trainer is built (`LISA.attach`; resets before the model loads)."""
    from .reference import check_reference_reset_peft

    check_reference_reset_peft(args, use_peft)
    gamma = getattr(args, "lisa_activated_layers", None)
    if gamma is not None and use_peft:
        raise _peft_error(gamma)


def build_lisa(args) -> LISA | None:
    """The `LISA` callback of `args` (`None` when `lisa_activated_layers` is unset)."""
    gamma = getattr(args, "lisa_activated_layers", None)
    if gamma is None:
        return None
    return LISA(gamma, args.lisa_interval_steps, seed=args.seed)


def _base_optimizer(optimizer: Any) -> Any:
    """The torch optimizer under accelerate's `AcceleratedOptimizer` (and any other wrapper with `.optimizer`)."""
    seen = set()
    while hasattr(optimizer, "optimizer") and id(optimizer) not in seen:
        seen.add(id(optimizer))
        optimizer = optimizer.optimizer
    return optimizer


class LISA(TrainerCallback, StatefulComponent):
    """The LISA layer sampler: a `TrainerCallback` (registered by `attach`) and a stateful component (the run's seed
    and the current interval's layers, in `trl_efficient_state.json`). See the module docstring.

    Args:
        activated_layers (`int`): $\\gamma$, decoder layers trained at a time (LMFlow `lisa_activated_layers`).
        interval_steps (`int`): $K$, optimizer steps between two draws (LMFlow `lisa_interval_steps`).
        seed (`int`): the run's seed (`args.seed`); the set of interval $i$ is `sample_layers(seed, i, N_L, gamma)`.
    """

    state_key = "lisa"
    papers = ("2403.17919",)  # cited by the model card of every run that uses it (`hub.card.cited_papers`)

    def __init__(self, activated_layers: int, interval_steps: int, seed: int) -> None:
        self.activated_layers = int(activated_layers)
        self.interval_steps = int(interval_steps)
        self.seed = int(seed)
        self.layers: torch.nn.ModuleList | None = None
        self.layers_name = ""
        self.interval: int | None = None  # the interval whose layers are (or, after a resume, will be) active
        self.active_layers: list[int] = []
        self._applied = False  # whether `active_layers` is applied to the model in this process
        self._trainable: dict[int, bool] = {}  # id(param) -> requires_grad as the model came (restored at the end)
        self.trainer = None  # set by `attach`: whose metric buffer the active layers go to

    # --- component contract --------------------------------------------------------------------------------------
    def attach(self, trainer) -> None:
        """Find the decoder layers, check the setup against the model, register as a callback (once)."""
        model = trainer.model
        if getattr(model, "peft_config", None):
            raise _peft_error(self.activated_layers)
        self.layers_name, self.layers = decoder_layers(model)
        if self.activated_layers > len(self.layers):
            raise ValueError(
                f"lisa_activated_layers={self.activated_layers} is more than the {len(self.layers)} decoder layers of "
                f"{type(model).__name__} ({self.layers_name}): use 1 to {len(self.layers)}."
            )
        self._trainable = {id(p): p.requires_grad for layer in self.layers for p in layer.parameters()}
        self.trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)

    def state_dict(self) -> dict:
        return {
            "seed": self.seed,
            "interval": self.interval,
            "active_layers": list(self.active_layers),
            "activated_layers": self.activated_layers,
            "interval_steps": self.interval_steps,
            "num_layers": None if self.layers is None else len(self.layers),
        }

    def load_state_dict(self, state: dict) -> None:
        saved = (state.get("activated_layers"), state.get("interval_steps"))
        if saved != (self.activated_layers, self.interval_steps):
            raise ValueError(
                f"The checkpoint was trained with lisa_activated_layers={saved[0]}, lisa_interval_steps={saved[1]}; "
                f"this run has {self.activated_layers}, {self.interval_steps}: resume with the checkpoint's values."
            )
        self.seed = int(state["seed"])  # the run's sampling stream, whatever seed this process was given
        self.interval = state.get("interval")
        self.active_layers = [int(i) for i in state.get("active_layers") or []]
        self._applied = False  # a fresh process: the layers are re-applied before the next step

    # --- sampling --------------------------------------------------------------------------------------------------
    def layers_for(self, interval: int) -> list[int]:
        """The active decoder layers of interval `interval` (after `attach`)."""
        return sample_layers(self.seed, interval, len(self.layers), self.activated_layers)

    def activate(self, interval: int, optimizer: Any = None) -> None:
        """Make interval `interval`'s layers the trainable ones; every other layer is frozen, its gradients set to
        `None` and its optimizer state dropped."""
        if self.interval != interval or not self.active_layers:
            self.active_layers = self.layers_for(interval)
        self.interval = interval
        active = set(self.active_layers)
        state = getattr(_base_optimizer(optimizer), "state", None)
        for index, layer in enumerate(self.layers):
            for param in layer.parameters():
                on = index in active and self._trainable.get(id(param), True)
                param.requires_grad_(on)
                if not on:
                    param.grad = None
                    if state is not None:
                        state.pop(param, None)
        self._applied = True
        logger.info(
            "LISA: interval %d (optimizer steps %d-%d): training decoder layers %s of %d (%s) plus every parameter "
            "outside them (embeddings, head, final norm).",
            interval, interval * self.interval_steps, (interval + 1) * self.interval_steps - 1, self.active_layers,
            len(self.layers), self.layers_name,
        )  # fmt: skip

    # --- TrainerCallback -------------------------------------------------------------------------------------------
    # LMFlow's DynamicLayerActivationCallback.on_step_begin: draw when global_step % K == 0 (step 0 included); here
    # also on the first step of a resumed process (its layers come from the checkpoint's state).
    def on_step_begin(self, args, state, control, optimizer=None, **kwargs) -> TrainerControl:
        interval = state.global_step // self.interval_steps
        if not self._applied or interval != self.interval:
            self.activate(interval, optimizer)
        self.log_layers()
        return control

    def log_layers(self) -> None:
        """This step's layers as metrics, averaged over the logging window by TRL: `trl_efficient/lisa/interval` and
        `trl_efficient/lisa/layer_<i>` = 1 for each active decoder layer i (over a window, the fraction of its
        steps that trained layer i; a layer absent from a log did not train in that window)."""
        if self.trainer is None:
            return
        buffer = metric_buffer(self.trainer, "train")
        buffer["trl_efficient/lisa/interval"].append(float(self.interval))
        for index in self.active_layers:
            buffer[f"trl_efficient/lisa/layer_{index}"].append(1.0)

    def on_train_end(self, args, state, control, **kwargs) -> TrainerControl:
        for layer in self.layers or ():
            for param in layer.parameters():
                param.requires_grad_(self._trainable.get(id(param), True))
        self._applied = False
        return control
