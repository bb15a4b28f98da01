"""The one border with TRL's (and transformers') private surface: every private method we override or call, every
private attribute we read, every private class attribute we set and the output keys of an overridden method we read,
named here with the version it was read from.

The rest of the package reaches TRL's private state only through the functions of this module (`metric_buffer`,
`num_items_in_batch`, `trl_tokenizer`, `tokenize_prompts`, `is_vlm`, `remove_unused_columns`, `output_dir`), and
overrides only the methods listed in `PRIVATE_METHODS` (a trainer subclass must override a private method by its
name; the list says which, where, and with which signature). When TRL moves, `check_trl()` (called by
`EfficientGRPOTrainer.__init__`) turns a mismatch into one line naming the symbol and the supported range, and
`tests/trainer/test_trl_internals.py` introspects the installed TRL against this table.

Read from TRL 1.16.0 (`trl/trainer/grpo_trainer.py`) and transformers 5.24 (`transformers/trainer.py`); see
docs/trl-integration.md for where each override sits in the pipeline.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

__all__ = [
    "GENERATE_OUTPUT_KEYS",
    "PRIVATE_ATTRIBUTES",
    "PRIVATE_CLASS_ATTRIBUTES",
    "PRIVATE_METHODS",
    "TRL_READ_FROM",
    "TRL_SUPPORTED",
    "TrlInternalsError",
    "check_trl",
    "is_vlm",
    "metric_buffer",
    "num_items_in_batch",
    "output_dir",
    "private_surface",
    "remove_unused_columns",
    "tokenize_prompts",
    "trl_tokenizer",
]

TRL_READ_FROM = "1.16.0"  # the TRL version every entry below was read from
TRL_SUPPORTED = ">=1.16,<1.17"  # pyproject.toml's pin; widen both together after auditing this table

# name -> (owner class, parameter names (self first), who overrides or calls it)
PRIVATE_METHODS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "_generate_and_score_completions": (
        "GRPOTrainer",
        ("self", "inputs"),
        "overridden: trainer (rollout plan, group stage), methods.dler (refill), methods.budgetthinker",
    ),
    "_generate_single_turn": (
        "GRPOTrainer",
        ("self", "prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images"),
        "overridden: trainer (vLLM de-duplication, per-row caps, budget forcing), methods.budgetthinker",
    ),
    "_generate": (
        "GRPOTrainer",
        ("self", "prompts"),
        "overridden: trainer (the prompt ids into the step context, for methods.entropy's and methods.sar's pass)",
    ),
    "_calculate_rewards": (
        "GRPOTrainer",
        ("self", "inputs", "prompts", "completions", "completion_ids_list"),
        "overridden: trainer (columns), methods.dler, methods.entropy, methods.sar (per-row columns)",
    ),
    "_get_per_token_logps_and_entropies": (
        "GRPOTrainer",
        ("self", "model", "input_ids", "attention_mask", "logits_to_keep", "batch_size", "compute_entropy"),
        "called: trainer.forward.completion_forward, methods.drpo; overridden: methods.sar (its no-question pass)",
    ),
    "_get_train_sampler": ("GRPOTrainer", ("self", "dataset"), "overridden: trainer (prompt samplers)"),
    "_load_optimizer_and_scheduler": ("GRPOTrainer", ("self", "checkpoint"), "overridden: trainer (state resume)"),
    "_save_checkpoint": ("GRPOTrainer", ("self", "model", "trial"), "overridden: trainer (state file)"),
    "_tokenize_prompts": ("GRPOTrainer", ("self", "prompts"), "called: methods.sar (tokenize_prompts)"),
    "_remove_unused_columns": ("Trainer", ("self", "dataset", "description"), "called: methods.dler (refill)"),
    "_get_output_dir": ("Trainer", ("self", "trial"), "called: trainer (output_dir)"),
}

# name -> (class whose __init__ sets it, what it holds)
PRIVATE_ATTRIBUTES: dict[str, tuple[str, str]] = {
    "_metrics": ("GRPOTrainer", "{'train'|'eval': defaultdict(list)}: values averaged and flushed at each log"),
    "_tokenizer": ("GRPOTrainer", "the text tokenizer (the processor's for VLMs)"),
    "_is_vlm": ("GRPOTrainer", "whether the model takes images"),
}


class TrlInternalsError(RuntimeError):
    """The installed TRL lacks a private symbol trl_efficient relies on, or has it with another signature."""


# name -> (class whose body defines it, what it holds): class attributes our trainer classes set over TRL's
PRIVATE_CLASS_ATTRIBUTES: dict[str, tuple[str, str]] = {
    "_tag_names": ("GRPOTrainer", "the model card's and Hub repo's tags (BaseTrainer's model card); set: trainer, "
                   "methods.hbpo"),
    "_name": ("GRPOTrainer", "the trainer's name on the model card; set: trainer, methods.hbpo, methods.budgetthinker"),
    "_paper": ("GRPOTrainer", "the paper the model card cites ({'title', 'id', 'citation'}); set: methods.hbpo"),
}  # fmt: skip

# The output keys of `GRPOTrainer._generate_and_score_completions` (TRL 1.16.0) that DLER's refill moves between
# generation batches (`methods.dler.row_layouts`), with the value TRL pads each with: "pad" is the tokenizer's pad
# id; None: not padded but recomputed (`num_items_in_batch`). The refill moves any other key too, padded with what
# its padded cells already hold; these are the ones whose padding it must know.
GENERATE_OUTPUT_KEYS: dict[str, Any] = {
    "prompt_ids": "pad",
    "prompt_mask": 0,
    "completion_ids": "pad",
    "completion_mask": 0,
    "old_per_token_logps": 0.0,
    "ref_per_token_logps": 0.0,
    "sampling_per_token_logps": 0.0,
    "tool_mask": 1,  # TRL pads tool_mask with 1
    "importance_sampling_ratio": 1.0,  # token-level ratio at padding is exp(0) = 1
    "num_items_in_batch": None,
}

# owner -> (the module that defines it, its name there): the classes the table was read from
_OWNERS = {"GRPOTrainer": ("trl.trainer.grpo_trainer", "GRPOTrainer"), "Trainer": ("transformers.trainer", "Trainer")}


def _owner(name: str, trainer_cls: type | None = None) -> type:
    """The class the table's `name` (`"GRPOTrainer"` or `"Trainer"`) stands for: the one of `trainer_cls`'s MRO
    that TRL's (transformers') module defines, else the class that module defines.

    Never the name `trl.GRPOTrainer` (or the module attribute) as bound at run time: Unsloth rebinds both to its own
    trainer, and a harness running TRL's GRPO tests against our subclass rebinds them to ours; the check would then
    read the wrong `__init__`. A class is TRL's own when its `__module__` and `__qualname__` say so.
    """
    import importlib

    module, qualname = _OWNERS[name]
    for cls in trainer_cls.__mro__ if trainer_cls is not None else ():
        if cls.__module__ == module and cls.__qualname__ == qualname:
            return cls
    bound = getattr(importlib.import_module(module), qualname)
    for cls in bound.__mro__:  # rebound to a subclass (ours, a harness's): TRL's own class is in its MRO
        if cls.__module__ == module and cls.__qualname__ == qualname:
            return cls
    raise TrlInternalsError(
        f"{module}.{qualname} is rebound to {bound.__module__}.{bound.__qualname__}, which does not subclass "
        f"{name} as {module} defines it, and {getattr(trainer_cls, '__qualname__', None)} does not either"
    )


def private_surface() -> list[str]:
    """Every private symbol trl_efficient uses, as `Owner.name` (methods, attributes, class attributes), then the
    output keys of `_generate_and_score_completions` it reads, as `GRPOTrainer._generate_and_score_completions[key]`.

    >>> surface = private_surface()
    >>> len(surface), surface[0], surface[14]
    (27, 'GRPOTrainer._generate_and_score_completions', 'GRPOTrainer._tag_names')
    >>> surface[-1]
    'GRPOTrainer._generate_and_score_completions[num_items_in_batch]'
    """
    tables = [*PRIVATE_METHODS.items(), *PRIVATE_ATTRIBUTES.items(), *PRIVATE_CLASS_ATTRIBUTES.items()]
    names = [f"{owner}.{name}" for name, (owner, *_rest) in tables]
    return names + [f"GRPOTrainer._generate_and_score_completions[{key}]" for key in GENERATE_OUTPUT_KEYS]


def _mismatches(trainer_cls: type | None = None) -> list[str]:
    problems = []
    for name, (owner, params, _) in PRIVATE_METHODS.items():
        cls = _owner(owner, trainer_cls)
        method = getattr(cls, name, None)
        if method is None:
            problems.append(f"{owner}.{name} is missing")
            continue
        found = tuple(inspect.signature(method).parameters)
        if found[: len(params)] != params:
            problems.append(f"{owner}.{name}{tuple(params)} has the parameters {found}")
    for name, (owner, _) in PRIVATE_ATTRIBUTES.items():
        source = inspect.getsource(_owner(owner, trainer_cls).__init__)
        if f"self.{name} =" not in source and f"self.{name}:" not in source:
            problems.append(f"{owner}.__init__ no longer sets self.{name}")
    for name, (owner, _) in PRIVATE_CLASS_ATTRIBUTES.items():
        if name not in vars(_owner(owner, trainer_cls)):
            problems.append(f"{owner} no longer defines the class attribute {name}")
    source = inspect.getsource(_owner("GRPOTrainer", trainer_cls)._generate_and_score_completions)
    missing = [key for key in GENERATE_OUTPUT_KEYS if f'"{key}"' not in source]
    if missing:
        problems.append(f"GRPOTrainer._generate_and_score_completions no longer returns the keys {missing}")
    return problems


@functools.lru_cache(maxsize=8)
def check_trl(trainer_cls: type | None = None) -> None:
    """Check the installed TRL against `PRIVATE_METHODS`, `PRIVATE_ATTRIBUTES`, `PRIVATE_CLASS_ATTRIBUTES` and
    `GENERATE_OUTPUT_KEYS` (once per process and trainer class); a mismatch raises `TrlInternalsError` in one line
    naming the symbol, the installed version and the
    supported range. The classes checked are TRL's `GRPOTrainer` and transformers' `Trainer` as `trainer_cls`
    subclasses them (`EfficientGRPOTrainer.__init__` passes its own class), never whatever `trl.GRPOTrainer` is
    bound to at run time (`_owner`)."""
    import trl

    problems = _mismatches(trainer_cls)
    if problems:
        raise TrlInternalsError(
            f"trl_efficient uses TRL internals read from TRL {TRL_READ_FROM}; the installed TRL {trl.__version__} "
            f"differs: {'; '.join(problems)}. Install trl{TRL_SUPPORTED} (pip install 'trl{TRL_SUPPORTED}')."
        )


# ------------------------------------------------------------------------------------- accessors of private state
def metric_buffer(trainer: Any, mode: str) -> dict[str, list]:
    """TRL's per-mode metric buffer (`GRPOTrainer._metrics[mode]`): append a value under a key and TRL averages
    and logs it at the next logging step, then clears it."""
    return trainer._metrics[mode]


def trl_tokenizer(trainer: Any) -> Any:
    """The text tokenizer TRL tokenizes with (`GRPOTrainer._tokenizer`: the processor's tokenizer for VLMs)."""
    return trainer._tokenizer


def is_vlm(trainer: Any) -> bool:
    """Whether TRL treats the model as vision-language (`GRPOTrainer._is_vlm`)."""
    return bool(trainer._is_vlm)


def tokenize_prompts(trainer: Any, prompts: list) -> Any:
    """TRL's prompt tokenization (`GRPOTrainer._tokenize_prompts`: chat template, `chat_template_kwargs`, tools)."""
    return trainer._tokenize_prompts(prompts)


def remove_unused_columns(trainer: Any, dataset: Any, description: str) -> Any:
    """`Trainer._remove_unused_columns`, as the train dataloader applies it."""
    return trainer._remove_unused_columns(dataset, description=description)


def output_dir(trainer: Any, trial: Any = None) -> str:
    """`Trainer._get_output_dir(trial)`: where checkpoints go."""
    return trainer._get_output_dir(trial=trial)


def loss_mask(output: dict) -> Any:
    """The tokens TRL's loss counts: `completion_mask * tool_mask` (`GRPOTrainer._compute_loss`, TRL 1.16.0:
    `mask = completion_mask if "tool_mask" not in inputs else completion_mask * inputs["tool_mask"]`). The loss pass's
    *attention* mask is built from `completion_mask` alone, so a token that must leave the loss but stay in context
    (a forced token the policy did not sample) goes to `tool_mask`, never to `completion_mask`.

    >>> import torch
    >>> loss_mask({"completion_mask": torch.tensor([[1, 1, 0]]), "tool_mask": torch.tensor([[1, 0, 1]])}).tolist()
    [[1, 0, 0]]
    """
    mask = output["completion_mask"]
    return mask * output["tool_mask"] if "tool_mask" in output else mask


def num_items_in_batch(output: dict) -> Any:
    """The loss normaliser as TRL computes it in `_generate_and_score_completions`: the sum over all processes of
    `completion_mask * tool_mask` (`loss_mask`). The one home of this formula: every step that changes either mask
    (filters, forced or control tokens, DA-DLER's cuts, DLER's refill) recomputes it with this function.

    >>> import torch
    >>> int(num_items_in_batch({"completion_mask": torch.tensor([[1, 1, 0], [1, 0, 0]])}))
    3
    """
    from accelerate.utils import gather

    return gather(loss_mask(output).sum()).sum()
