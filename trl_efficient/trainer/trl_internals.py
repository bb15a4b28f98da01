"""The one border with TRL's (and transformers') private surface: every private method we override or call, every
private attribute we read, every private class attribute we set, the output keys of an overridden method we read, and
the undocumented attributes `GRPOTrainer.__init__` sets that we read (`TRL_ATTRIBUTES`; one we write,
`generation_config`, only through `generation_config_override`), named here with the version it was read from.

The rest of the package reaches TRL's private state only through the functions of this module (`metric_buffer`,
`num_items_in_batch`, `trl_tokenizer`, `tokenize_prompts`, `is_vlm`, `remove_unused_columns`, `output_dir`,
`generation_config_override`), reads only the undocumented attributes `TRL_ATTRIBUTES` lists, and overrides only the
methods listed in `PRIVATE_METHODS` (a trainer subclass must override a private method by its name; the list says which,
where, and with which signature). When TRL moves, `check_trl()` (called by `EfficientGRPOTrainer.__init__`) turns a
mismatch into one line naming the symbol and the supported range, and `tests/trainer/test_trl_internals.py` introspects
the installed TRL against this table.

Read from TRL 1.16.0 (`trl/trainer/grpo_trainer.py`) and transformers 5.24 (`transformers/trainer.py`); see
docs/trl-integration.md for where each override sits in the pipeline.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import inspect
from collections.abc import Iterator
from typing import Any

import trl
from accelerate.utils import gather

__all__ = [
    "GENERATE_OUTPUT_KEYS",
    "PRIVATE_ATTRIBUTES",
    "PRIVATE_CLASS_ATTRIBUTES",
    "PRIVATE_METHODS",
    "TRL_ATTRIBUTES",
    "TRL_READ_FROM",
    "TRL_SUPPORTED",
    "TrlInternalsError",
    "check_trl",
    "generation_config_override",
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
    "_issue_warnings_after_load": ("Trainer", ("self", "load_result"), "overridden: trainer (tied keys on resume)"),
}

# name -> (class whose __init__ sets it, what it holds)
PRIVATE_ATTRIBUTES: dict[str, tuple[str, str]] = {
    "_metrics": ("GRPOTrainer", "{'train'|'eval': defaultdict(list)}: values averaged and flushed at each log"),
    "_tokenizer": ("GRPOTrainer", "the text tokenizer (the processor's for VLMs)"),
    "_is_vlm": ("GRPOTrainer", "whether the model takes images"),
}


# name -> (class whose __init__ sets it, who reads it): public-looking attributes that `GRPOTrainer.__init__` sets
# from its arguments and config but that TRL does not document as API (TRL 1.16.0, `grpo_trainer.py`), which our
# trainers and their parts read as `self.<name>` / `trainer.<name>`. `generation_config` is the one we also write, and
# only through `generation_config_override`.
TRL_ATTRIBUTES: dict[str, tuple[str, str]] = {
    "beta": ("GRPOTrainer", "the KL coefficient (args.beta); read: methods.sar"),
    "chat_template_kwargs": ("GRPOTrainer", "kwargs of apply_chat_template; read: trainer (prompt text)"),
    "environment_factories": ("GRPOTrainer", "environments (None without); read: trainer, methods.dler, methods.dot, "
                              "methods.sar (refused with them)"),
    "eos_token_ids": ("GRPOTrainer", "the ids generation stops on; read: trainer (rewards that judge stopping, caps)"),
    "generation_config": ("GRPOTrainer", "the transformers path's GenerationConfig; read and written only through "
                          "generation_config_override (trainer: budget forcing)"),
    "max_completion_length": ("GRPOTrainer", "args.max_completion_length; read: trainer (budget forcing, caps)"),
    "multi_objective_aggregation": ("GRPOTrainer", "how rewards are combined; read: methods.dler (refill checks)"),
    "num_generations": ("GRPOTrainer", "G in training; read: trainer, methods.dler, methods.dot"),
    "num_generations_eval": ("GRPOTrainer", "G in evaluation; read: trainer"),
    "num_iterations": ("GRPOTrainer", "mu, optimisation passes per generation; read: trainer (sampler), "
                       "methods.drpo, methods.sar"),
    "pad_to_multiple_of": ("GRPOTrainer", "padding multiple of generated ids; read: methods.dler (refill widths)"),
    "ref_model": ("GRPOTrainer", "the reference model (None when beta = 0 or PEFT); read: trainer.reference, "
                  "methods.budgetthinker, methods.sar"),
    "reward_func_names": ("GRPOTrainer", "metric names of the reward functions; read: trainer"),
    "reward_funcs": ("GRPOTrainer", "the reward callables and models; read: trainer, methods.sar"),
    "reward_weights": ("GRPOTrainer", "tensor of reward weights; read: trainer (GroupBatch)"),
    "rollout_func": ("GRPOTrainer", "a custom rollout function (None without); read: trainer, methods.dler, "
                     "methods.dot, methods.sar (refused with one)"),
    "scale_rewards": ("GRPOTrainer", "'group' | 'batch' | 'none'; read: methods.dler (refill checks)"),
    "shuffle_dataset": ("GRPOTrainer", "whether the train sampler shuffles; read: trainer (prompt samplers)"),
    "tools": ("GRPOTrainer", "tool callables (empty without); read: trainer, methods.dler, methods.dot"),
    "use_vllm": ("GRPOTrainer", "generation through vLLM; read: trainer, methods.drpo, methods.sar"),
    "vllm_importance_sampling_correction": ("GRPOTrainer", "TIS on vLLM samples; read: methods.drpo, methods.sar"),
    "vllm_importance_sampling_mode": ("GRPOTrainer", "token/sequence truncate or mask; read: methods.dler"),
}  # fmt: skip


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
    """Every private symbol trl_efficient uses, as `Owner.name` (methods, attributes, class attributes, the
    undocumented attributes of `TRL_ATTRIBUTES`), then the output keys of `_generate_and_score_completions` it reads,
    as `GRPOTrainer._generate_and_score_completions[key]`.

    >>> surface = private_surface()
    >>> len(surface), surface[0], surface[15], surface[18]
    (50, 'GRPOTrainer._generate_and_score_completions', 'GRPOTrainer._tag_names', 'GRPOTrainer.beta')
    >>> surface[-1]
    'GRPOTrainer._generate_and_score_completions[num_items_in_batch]'
    """
    tables = [*PRIVATE_METHODS.items(), *PRIVATE_ATTRIBUTES.items(), *PRIVATE_CLASS_ATTRIBUTES.items(),
              *TRL_ATTRIBUTES.items()]  # fmt: skip
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
    for name, (owner, _) in [*PRIVATE_ATTRIBUTES.items(), *TRL_ATTRIBUTES.items()]:
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
    """Check the installed TRL against `PRIVATE_METHODS`, `PRIVATE_ATTRIBUTES`, `PRIVATE_CLASS_ATTRIBUTES`,
    `TRL_ATTRIBUTES` and `GENERATE_OUTPUT_KEYS` (once per process and trainer class); a mismatch raises
    `TrlInternalsError` in one line naming the symbol, the installed version and the supported range. The classes
    checked are TRL's `GRPOTrainer` and transformers' `Trainer` as `trainer_cls` subclasses them
    (`EfficientGRPOTrainer.__init__` passes its own class), never whatever `trl.GRPOTrainer` is bound to at run time
    (`_owner`)."""
    problems = _mismatches(trainer_cls)
    if problems:
        raise TrlInternalsError(
            f"trl_efficient uses TRL internals read from TRL {TRL_READ_FROM}; the installed TRL {trl.__version__} "
            f"differs: {'; '.join(problems)}. Install trl{TRL_SUPPORTED} (pip install 'trl{TRL_SUPPORTED}')."
        )


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


@contextlib.contextmanager
def generation_config_override(trainer: Any, **changes: Any) -> Iterator[Any]:
    """`GRPOTrainer.generation_config` (the `GenerationConfig` TRL's transformers path generates with, in
    `_generate_single_turn`) replaced by a copy with `changes` set on it for the block, and restored after: the one
    place trl_efficient writes a TRL attribute (budget forcing's phases set `max_new_tokens`).

    >>> from types import SimpleNamespace
    >>> trainer = SimpleNamespace(generation_config=SimpleNamespace(max_new_tokens=64))
    >>> with generation_config_override(trainer, max_new_tokens=8):
    ...     inside = trainer.generation_config.max_new_tokens
    >>> inside, trainer.generation_config.max_new_tokens
    (8, 64)
    """
    config = trainer.generation_config
    trainer.generation_config = copy.copy(config)
    for key, value in changes.items():
        setattr(trainer.generation_config, key, value)
    try:
        yield trainer.generation_config
    finally:
        trainer.generation_config = config


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
    return gather(loss_mask(output).sum()).sum()
