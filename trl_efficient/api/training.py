"""The training pipeline of `trl-efficient train` and `trl_efficient.train`: parse (run preset < recipe < YAML <
command line) into three dataclasses, check them at config time, build the trainer, train, save, evaluate.

`parse_train_args(argv)` parses three dataclasses with TRL's `TrlParser` (YAML keys and `--flags` are their field
names): `TrainArguments` (below; TRL's `ModelConfig` plus the script options, so `--use_peft --lora_r ... --dtype
--attn_implementation --load_in_4bit` work as in `trl grpo`), `DataArguments` and `EfficientGRPOConfig`. The recipe's
own config overrides are applied first, then the YAML, then the command line. `--config` takes a YAML path or the
name of a recipe YAML shipped in the package (`api.configs.resolve_config`); `--recipe kimi` alone is `--config kimi`.
With no arguments, `train_main` runs the bundled `configs/quickstart.yaml`: an offline smoke run of the whole pipeline
on CPU, on the testbed's over-thinking base model. `run_training` builds everything from the parsed arguments and
trains. User errors raise `UserError` naming what to change.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import warnings
from dataclasses import dataclass, field

from trl import ModelConfig, TrlParser

from ..core.errors import CommandParser, UserError, one_line
from . import register_everything
from .configs import flag_value, packaged_config, read_config_file, resolve_config, shipped_config_name
from .errors import ExtraFailedError, InterruptedRunError

logger = logging.getLogger("trl_efficient")

QUICKSTART_NOTE = (
    "This is a SMOKE RUN of the whole pipeline (data -> rollouts -> length-aware rewards -> GRPO updates -> "
    "checkpoint -> model card -> evaluation) on a tiny model built offline, on CPU. With the default quickstart the "
    "model is the testbed's over-thinking base (trained from scratch on synthetic arithmetic traces): the numbers "
    "show a method's effect in that small world, not on real benchmarks. Real runs: a recipe config from configs/ "
    "with --model_name_or_path <hub id>."
)


@dataclass
class TrainArguments(ModelConfig):
    """Script options of `trl-efficient train` (not part of the trainer config), on top of TRL's `ModelConfig`.

    TRL's own `trl grpo` parses `ModelConfig` beside its script arguments; here it is their base class, so the policy
    has ONE `model_name_or_path` (default `tiny:qwen2`; `tiny:`/`testbed:` names are built offline) and the model
    flags are TRL's: `--dtype` (alias `--torch_dtype`), `--attn_implementation`, `--use_peft --lora_r --lora_alpha
    --lora_target_modules ...` (TRL's `get_peft_config`) and `--load_in_4bit/--load_in_8bit` (TRL's
    `get_quantization_config`; a CUDA GPU, bitsandbytes and `--use_peft` needed, checked at config time).
    """

    model_name_or_path: str = field(
        default="tiny:qwen2",
        metadata={
            "help": "Hub id or local path of the policy; 'tiny:<arch>[-<hidden>]' builds a random model offline."
        },
    )
    dtype: str | None = field(
        default="float32",
        metadata={
            "help": "Load the model under this dtype (TRL's ModelConfig; a YAML's model_init_kwargs.dtype wins). "
            "Unset: float32, or a run preset's dtype while bf16 is on (resolve_load_dtype).",
            "choices": ["auto", "bfloat16", "float16", "float32"],
            "aliases": ["--torch_dtype"],
        },
    )
    recipe: str = field(default="grpo", metadata={"help": "Recipe name (see `trl-efficient recipes`)."})
    run_defaults: str | None = field(
        default=None,
        metadata={
            "help": "A run preset applied beneath the recipe, the YAML and the command line (`trl-efficient recipes "
            "presets` prints them; trl_efficient/recipes/presets.py)."
        },
    )
    recipe_kwargs: dict | str | None = field(
        default=None,
        metadata={
            "help": "Keyword arguments of the recipe's dataset preparation (e.g. SABER's profile path); a JSON "
            "object on the command line."
        },
    )
    eos_logit_bias: float | None = field(
        default=None,
        metadata={"help": "Add this bias to the EOS logit in transformers generation (tiny random models only)."},
    )
    eval_before_after: bool = field(
        default=True,
        metadata={"help": "Evaluate accuracy and mean tokens on the eval dataset before and after training."},
    )
    eval_max_new_tokens: int | None = field(
        default=None, metadata={"help": "Max new tokens at evaluation (default: max_completion_length)."}
    )
    smoke_run: bool = field(
        default=False, metadata={"help": "Print the smoke-run notice (quickstart and smoke configs)."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.recipe_kwargs, str):
            try:
                self.recipe_kwargs = json.loads(self.recipe_kwargs)
            except json.JSONDecodeError as err:
                raise ValueError(f"recipe_kwargs must be a JSON object, got {self.recipe_kwargs!r}: {err}") from err
        if self.recipe_kwargs is not None and not isinstance(self.recipe_kwargs, dict):
            raise ValueError(f"recipe_kwargs must be a mapping, got {self.recipe_kwargs!r}.")


def _resolve_config_argv(argv: list[str]) -> list[str]:
    """`argv` with its `--config` value resolved (`resolve_config`); with `--recipe NAME` and no `--config`, the
    shipped `NAME.yaml` becomes the config, so `--recipe kimi` runs the same as `--config kimi`. With both, `--recipe`
    switches the YAML's method (the recipe's settings < the YAML < the command line)."""
    config = flag_value(argv, "--config")
    if config is None:
        recipe = flag_value(argv, "--recipe")
        if recipe is not None and shipped_config_name(recipe) == recipe:
            return ["--config", resolve_config(recipe), *argv]
        return argv
    resolved = resolve_config(config)
    out = list(argv)
    for i, arg in enumerate(argv):
        if arg.startswith("--config="):
            out[i] = f"--config={resolved}"
        elif i > 0 and argv[i - 1] == "--config":
            out[i] = resolved
    return out


def _prescan(argv: list[str], key: str) -> str | None:
    """The value of `key` before parsing: the flag `--key` if given, else the `--config` YAML's `key`, else None."""
    value = flag_value(argv, f"--{key}")
    if value is not None:
        return value
    config = flag_value(argv, "--config")
    if config is not None:
        return read_config_file(config).get(key)
    return None


def _config_error(err: ValueError, argv: list[str]) -> UserError:
    """A parse-time `ValueError` of TRL/transformers, reworded to say what to change where we know it. transformers'
    `TrainingArguments` refuses bf16 without a bf16-capable GPU with a plain `ValueError` (no type or attribute of its
    own), so that one is recognised by its text naming bf16, and only on a machine without CUDA."""
    import torch

    message = one_line(err)
    if "bf16" in message and not torch.cuda.is_available():
        return UserError(
            f"{_bf16_source(argv, flag_value(argv, '--config'))}, which needs a GPU, and this machine has no CUDA: to "
            "run on CPU pass --bf16 false (the model then loads and trains in float32 unless you set a dtype), or "
            "--use_cpu true to keep bf16 autocast on CPU"
        )
    return UserError(message)


def _unknown_error(config: str | None, config_unknown: list[str], argv_unknown: list[str]) -> UserError | None:
    """The one line for the flags and YAML keys that no field takes (what `TrlParser.parse_args_and_config` returns
    unconsumed, as `--key value` pairs for the YAML's): the command line's first, as `trl-efficient train` always
    named them; None when every key was taken.

    >>> print(str(_unknown_error("my.yaml", ["--lr", "0.1"], []))[:63])
    unknown field(s) in my.yaml: lr; remove them or fix their names
    >>> print(_unknown_error(None, [], ["--nope", "1"]))
    unknown argument(s): --nope 1; fix their names (see `trl-efficient train --help`)
    """
    if argv_unknown:
        return UserError(
            f"unknown argument(s): {' '.join(argv_unknown)}; fix their names (see `trl-efficient train --help`)"
        )
    if config_unknown:
        keys = [item[2:] for item in config_unknown[::2]]
        return UserError(
            f"unknown field(s) in {config}: {', '.join(keys)}; remove them or fix their names "
            "(the fields are listed by `trl-efficient train --help`)"
        )
    return None


class TrainParser(TrlParser):
    """TRL's `TrlParser` whose argparse errors raise `UserError` (`core.errors.CommandParser`'s), for this parser
    only."""

    error = CommandParser.error


def _bf16_source(argv: list[str], config: str | None) -> str:
    """Who turned bf16 on, for the CPU error: the command line, the YAML, its run preset, else TRL's default (TRL's
    `GRPOConfig` defaults `bf16` to True)."""
    from ..recipes.presets import run_preset

    if flag_value(argv, "--bf16") is not None:
        return "--bf16 asks for bf16"
    if config is not None and read_config_file(config).get("bf16") is not None:
        return f"{config} asks for bf16: true"
    preset = _prescan(argv, "run_defaults")
    if preset is not None and run_preset(preset).get("bf16"):
        return f"the run preset {preset} (run_defaults) sets bf16: true"
    return "bf16 is on (TRL's default)"


DTYPE_KEYS = ("dtype", "torch_dtype")  # TRL's ModelConfig field and its old name (a flag alias, a YAML key)
HALF_DTYPES = ("bfloat16", "float16")


def _user_dtype(argv: list[str], config: str | None, model_kwargs: dict | None) -> tuple[str, str] | None:
    """The load dtype the user set and where, or None: the config's `model_init_kwargs` (the YAML's or the command
    line's; a run preset's was taken out before parsing), else `--dtype`/`--torch_dtype`, else the YAML's `dtype`."""
    for key in DTYPE_KEYS:
        if (model_kwargs or {}).get(key) is not None:
            return str(model_kwargs[key]), f"model_init_kwargs.{key}"
    for key in DTYPE_KEYS:
        for flag in (f"--{key}", f"--{key.replace('_', '-')}"):
            value = flag_value(argv, flag)
            if value is not None:
                return value, flag
    if config is not None:
        data = read_config_file(config)
        for key in DTYPE_KEYS:
            if data.get(key) is not None:
                return str(data[key]), f"{config}'s {key}"
    return None


def resolve_load_dtype(script_args, training_args, argv: list[str], preset_dtype: str | None) -> str:
    """Decide, at config time, the one dtype the policy loads in, and write it to `script_args.dtype` and
    `training_args.model_init_kwargs["dtype"]` (so everything that loads a copy of the policy, such as Bingo's frozen
    reference, loads the same). Returns it.

    Precedence: the user's `model_init_kwargs` dtype > the user's `--dtype` (or a YAML `dtype`) > the run preset's
    `model_init_kwargs` dtype, **only while bf16 is on** (the preset's bfloat16 weights go with its `bf16: true`) >
    float32. Why: a preset lies beneath everything the user sets, and a run that trains in float32 (`--bf16 false`,
    no fp16, the CPU route) must not silently load and save bfloat16 weights. A half-precision dtype the user set
    while bf16 and fp16 are off is kept (training bf16 weights directly is a choice) and named in one warning."""
    source = _user_dtype(argv, flag_value(argv, "--config"), training_args.model_init_kwargs)
    mixed = bool(training_args.bf16 or training_args.fp16)
    if source is not None:
        dtype, where = source
        if dtype in HALF_DTYPES and not mixed:
            logger.warning(
                "%s=%s loads the weights in %s while bf16 and fp16 are off: the run trains and saves %s weights "
                "without mixed precision; drop it (or pass float32) to train in float32, or turn on --bf16 true",
                where, dtype, dtype, dtype,
            )  # fmt: skip
    elif preset_dtype is not None and training_args.bf16:
        dtype = preset_dtype
    else:
        dtype = "float32"
    model_kwargs = {k: v for k, v in (training_args.model_init_kwargs or {}).items() if k not in DTYPE_KEYS}
    training_args.model_init_kwargs = {**model_kwargs, "dtype": dtype}
    script_args.dtype = dtype
    return dtype


def _zero3_enabled(training_args) -> bool:
    """DeepSpeed ZeRO-3 is on: from `accelerate launch` (a ZeRO-3 config sets ACCELERATE_DEEPSPEED_ZERO_STAGE=3) or
    from `--deepspeed <config>` (transformers reads the stage from it)."""
    if os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3":
        return True
    if training_args.deepspeed:
        from transformers.integrations import is_deepspeed_zero3_enabled

        return is_deepspeed_zero3_enabled()
    return False


def _check_zero3_eval(script_args, data_args, training_args) -> None:
    """Refuse, before any model loads, the before/after evaluation under ZeRO-3: it generates on the main process
    from `accelerator.unwrap_model(model)`, whose weights ZeRO-3 shards across the processes (it died mid-run with
    `RuntimeError: 'weight' must be 2-D`)."""
    if script_args.eval_before_after and data_args.eval_dataset_name is not None and _zero3_enabled(training_args):
        raise UserError(
            "the before/after evaluation (eval_before_after) cannot run under DeepSpeed ZeRO-3, which shards the "
            "weights it generates from: pass --eval_before_after false and evaluate the saved model with "
            "`trl-efficient eval`"
        )


def _check_vllm(training_args, config: str | None, argv: list[str] | None = None) -> None:
    """`use_vllm` on a machine without vLLM: one line naming both ways out (TRL raises a long `ImportError` when the
    trainer is built) and who turned it on (the command line over the YAML). Server mode needs the vllm package here
    too (TRL's client imports it)."""
    from trl.import_utils import is_vllm_available

    if not training_args.use_vllm or is_vllm_available():
        return
    flag = next((f for f in ("--use_vllm", "--use-vllm") if f in (argv or []) or flag_value(argv or [], f)), None)
    asked = config is not None and read_config_file(config).get("use_vllm") is not None
    source = f"{flag} asks for vLLM" if flag else f"{config} sets use_vllm: true" if asked else "use_vllm is on"
    raise UserError(
        f"{source} and vLLM is not installed: pass --use_vllm false to generate with transformers, or install it "
        "with `pip install 'trl-efficient[vllm]'`"
    )


def cpu_threads_hint(threads: int, cpus: int, load: float) -> str | None:
    """The one-line hint for a CPU run whose torch threads outnumber the free cores (`cpus` minus the 1-minute load
    average, at least 1), else None. Why: OpenMP threads that wait on each other for a busy core made a step of a
    135M model 10x slower on a 2-core machine shared with other work (905 s with torch's default 2 threads, 91 s with
    OMP_NUM_THREADS=1; issue 36). A hint only: the thread count is the user's (it can change the last bits of float
    sums), and the testbed and the quickstart already run on one thread (`testbed.training.torch_threads`).

    >>> cpu_threads_hint(2, 2, 0.3) is None, cpu_threads_hint(1, 2, 5.0) is None
    (True, True)
    >>> cpu_threads_hint(16, 16, 8.4)[:91]
    'torch will use 16 threads on CPU while about 8 of the 16 cores are free (load average 8.4):'
    """
    free = max(1, cpus - round(load))
    if threads <= free:
        return None
    return (
        f"torch will use {threads} threads on CPU while about {free} of the {cpus} cores are free (load average "
        f"{load:.1f}): threads waiting for busy cores can make each step many times slower (10x measured on 2 shared "
        f"cores); set OMP_NUM_THREADS={free} before the command (README, 'CPU threads')"
    )


def warn_cpu_threads(script_args, training_args) -> None:
    """Log `cpu_threads_hint` once, at config time, for a run on CPU (no CUDA, or `use_cpu`) whose thread count the
    user did not choose (`OMP_NUM_THREADS` unset) and that is not on a `testbed:` model (run on one thread)."""
    import torch

    from ..overthinking import is_testbed_model

    if torch.cuda.is_available() and not training_args.use_cpu:
        return
    if "OMP_NUM_THREADS" in os.environ or is_testbed_model(script_args.model_name_or_path):
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    line = cpu_threads_hint(torch.get_num_threads(), cpus, load)
    if line is not None:
        logger.warning(line)


# Values checked at config time, before any model loads (transformers and TRL check some only when training starts,
# or not at all): the field, whether a value is valid, what it must be, an example to pass instead.
VALUE_RULES = {
    "num_generations": (lambda v: v >= 2, "a whole number >= 2 (completions per prompt, compared in a group)", "8"),
    "per_device_train_batch_size": (lambda v: v >= 1, "a whole number >= 1", "8"),
    "gradient_accumulation_steps": (lambda v: v >= 1, "a whole number >= 1", "1"),
    "learning_rate": (lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0", "1e-6"),
    "temperature": (lambda v: math.isfinite(v) and v > 0, "a finite number > 0 (GRPO samples its rollouts)", "1.0"),
    "eval_max_new_tokens": (
        lambda v: v is None or v >= 1,
        "a whole number of tokens >= 1 (unset: max_completion_length)",
        "512",
    ),  # fmt: skip
    "max_completion_length": (lambda v: v >= 1, "a whole number of tokens >= 1", "1024"),
    "num_iterations": (lambda v: v >= 1, "a whole number >= 1 (updates per generation batch)", "1"),
    "beta": (
        lambda v: math.isfinite(v) and v >= 0,
        "a finite number >= 0 (the KL coefficient; 0: no reference)",
        "0.0",
    ),
    "top_p": (lambda v: math.isfinite(v) and 0 < v <= 1, "in (0, 1] (1: no nucleus cut)", "1.0"),
    "save_steps": (
        lambda v: v > 0,
        "a number > 0 (steps between checkpoints, or a fraction of the run below 1)",
        "100",
    ),  # fmt: skip
}


def _sets(argv: list[str], config: str | None, key: str) -> bool:
    """The command line (`--key`, either spelling) or the YAML sets `key`."""
    flags = (f"--{key}", f"--{key.replace('_', '-')}")
    on_line = any(arg in flags or arg.startswith(tuple(f + "=" for f in flags)) for arg in argv)
    return on_line or (config is not None and key in read_config_file(config))


def _check_values(argv: list[str], config: str | None, parsed: tuple | None) -> None:
    """`VALUE_RULES` and `--report_to`'s packages: raise one line naming where the value was set (the flag, the YAML
    or the recipe/preset), what it must be and what to pass. Before parsing (`parsed` None) only the command line's
    and the YAML's values are read; after, every parsed value (`save_steps` only with `save_strategy: steps`)."""
    yaml_values = read_config_file(config) if config is not None else {}
    for key, (valid, rule, example) in VALUE_RULES.items():
        given = flag_value(argv, f"--{key}") or flag_value(argv, f"--{key.replace('_', '-')}")
        where = f"--{key} {given}" if given is not None else None
        if given is None and key in yaml_values:
            given, where = yaml_values[key], f"{config} sets {key}: {yaml_values[key]}"
        if parsed is None and key == "save_steps":
            continue  # read with save_strategy, after parsing
        if parsed is not None:
            holder = next((obj for obj in parsed if hasattr(obj, key)), None)
            if holder is None:
                continue
            if (
                key == "save_steps"
                and str(getattr(parsed[1].save_strategy, "value", parsed[1].save_strategy)) != "steps"
            ):
                continue
            given = getattr(holder, key)
            where = where or f"{key} {given} (the recipe's or run preset's)"
        if given is None:
            continue
        try:
            value = float(given) if not isinstance(given, (int, float)) else given
        except (TypeError, ValueError):
            continue  # not a number: the parser says so
        if not valid(value):
            raise UserError(f"{where}: {key} must be {rule}; pass e.g. --{key} {example}")
    if parsed is not None:
        from transformers.integrations import get_available_reporting_integrations

        from ..core.models import missing_model_dir

        missing = missing_model_dir(parsed[0].model_name_or_path)  # no such folder, or one without a model
        if missing is not None:
            raise UserError(str(missing))
        training_args = parsed[1]
        available = get_available_reporting_integrations()
        missing = [name for name in (training_args.report_to or []) if name not in (*available, "none", "all")]
        if missing:
            raise UserError(
                f"--report_to {' '.join(missing)} needs {' and '.join(missing)}, which is not installed: pass "
                f"--report_to none (or one of the installed: {', '.join(available) or 'none'}), or `pip install "
                f"{' '.join(missing)}`"
            )


def _pop_dtype(defaults: dict) -> str | None:
    """Take the load dtype out of a run preset's `model_init_kwargs` (dropping the mapping when nothing else is left)
    and return it (None when it has none)."""
    model_kwargs = dict(defaults.get("model_init_kwargs") or {})
    dtype = None
    for key in DTYPE_KEYS:
        dtype = model_kwargs.pop(key, None) or dtype
    if "model_init_kwargs" in defaults:
        if model_kwargs:
            defaults["model_init_kwargs"] = model_kwargs
        else:
            del defaults["model_init_kwargs"]
    return dtype


def parse_train_args(argv: list[str]) -> tuple:
    """`(TrainArguments, DataArguments, EfficientGRPOConfig)` from the recipe's overrides, the YAML and the command
    line; user errors (bad file, unknown recipe or field, invalid value) raise `UserError`."""
    from ..core.models import check_quantization
    from ..data.loaders import DataArguments, check_dataset_name
    from ..recipes import get_recipe
    from ..recipes.presets import run_preset
    from ..trainer import EfficientGRPOConfig
    from ..trainer.lisa import check_lisa_peft

    register_everything()  # `train_main` is also called directly (tests, scripts), not only through `main`
    parser = TrainParser((TrainArguments, DataArguments, EfficientGRPOConfig), prog="trl-efficient train")
    argv = _resolve_config_argv(argv)
    recipe_name = _prescan(argv, "recipe")
    config = flag_value(argv, "--config")
    if config is not None:
        read_config_file(config)  # a missing or malformed file is named before TRL opens it
    for flag in ("--dataset_name", "--eval_dataset_name"):  # before argparse's "invalid choice" for a file
        check_dataset_name(flag, flag_value(argv, flag) or flag_value(argv, flag.replace("_", "-")))
    _check_values(argv, config, None)  # those that crash TRL's own config checks (num_generations 0: modulo by zero)
    try:
        # preset < the recipe's method settings < the YAML < the command line (recipes/presets.py)
        defaults = run_preset(_prescan(argv, "run_defaults"))
        # the preset's load dtype applies after parsing, beneath the user's, only with bf16 on (resolve_load_dtype)
        preset_dtype = _pop_dtype(defaults)
        if recipe_name is not None:
            defaults.update(get_recipe(recipe_name).config_overrides)
        if defaults:
            parser.set_defaults_with_config(**defaults)
        with warnings.catch_warnings():
            if not _sets(argv, config, "gradient_checkpointing"):
                # TRL's GRPOConfig defaults the deprecated `gradient_checkpointing` to True, so transformers warns on
                # every run about a name the user never wrote: that warning is silenced; the user's own use still warns
                warnings.filterwarnings("ignore", "`gradient_checkpointing` is deprecated", FutureWarning)
            parsed = parser.parse_args_and_config(argv, return_remaining_strings=True, separate_remaining_strings=True)
        script_args, data_args, training_args, config_unknown, argv_unknown = parsed
        unknown = _unknown_error(config, config_unknown, argv_unknown)
        if unknown is not None:
            raise unknown
        resolve_load_dtype(script_args, training_args, argv, preset_dtype)
        warn_cpu_threads(script_args, training_args)
        check_quantization(script_args)
        check_lisa_peft(training_args, script_args.use_peft)
        _check_zero3_eval(script_args, data_args, training_args)
        _check_vllm(training_args, config, argv)
        _check_values(argv, config, (script_args, training_args))
        # reward_kwargs may only name builders this recipe uses (the config checked each builder's arguments)
        get_recipe(script_args.recipe).with_reward_kwargs(training_args.reward_kwargs)
    except UserError:
        raise
    except ValueError as err:
        raise _config_error(err, argv) from err
    return script_args, data_args, training_args


def run_training(script_args: TrainArguments, data_args, training_args) -> dict:
    """Build everything from parsed arguments, train, save, evaluate, and return the summary dict.

    The model flags are TRL's `ModelConfig` (`script_args`), used as TRL's `trl grpo` uses them: `model_init_kwargs`
    from `--dtype/--attn_implementation/--model_revision` (the config's own `model_init_kwargs` on top),
    `peft_config=get_peft_config(...)` and `quantization_config=get_quantization_config(...)` to the trainer, which
    loads the model (TRL's `create_model_from_path`, device map included)."""
    from trl import get_peft_config, get_quantization_config

    from ..core.models import load_tokenizer, model_init_kwargs, model_scheme, resolve_model_name
    from ..data.loaders import load_datasets  # a registered dataset ("testbed") is loaded by its own loader
    from ..eval.evaluate import evaluate_model
    from ..hub.card import SUMMARY_FILE, summary_markdown
    from ..recipes import get_recipe
    from ..overthinking import is_testbed_model
    from ..overthinking import torch_threads

    resume_or_refuse(script_args, data_args, training_args)  # resume, refuse or start, before any model loads
    recipe = get_recipe(script_args.recipe)
    model_path = resolve_model_name(script_args.model_name_or_path)
    tokenizer = load_tokenizer(script_args.model_name_or_path)  # a model that cannot be found fails here, named
    if script_args.eos_logit_bias:
        if training_args.use_vllm:
            raise UserError("eos_logit_bias is a transformers-generate option; unset it with use_vllm=True.")
        training_args.generation_kwargs = {
            **(training_args.generation_kwargs or {}),
            "sequence_bias": [[[tokenizer.eos_token_id], float(script_args.eos_logit_bias)]],
        }
    train_dataset, eval_dataset = load_datasets(data_args, seed=training_args.seed)
    train_dataset = recipe.apply_prepare_dataset(
        train_dataset, training_args, tokenizer, **(script_args.recipe_kwargs or {})
    )
    reward_funcs, weights = recipe.build_reward_funcs(training_args, tokenizer)
    if training_args.reward_weights is None:
        training_args.reward_weights = weights
    training_args.model_init_kwargs = model_init_kwargs(
        script_args, trust_remote_code=training_args.trust_remote_code, overrides=training_args.model_init_kwargs
    )
    trainer_cls = recipe.trainer_cls
    # The Trainer creates the Hub repo when it is built (push_to_hub): an unreachable Hub must not stop the run before
    # it trains. Built with push_to_hub off, it then tries the repo once (`_hub_repo_or_later`); failing that, the
    # push waits for the end, after the model is saved, as the README says.
    push_to_hub, training_args.push_to_hub = training_args.push_to_hub, False
    trainer = trainer_cls(
        model=model_path,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=train_dataset,
        processing_class=tokenizer,
        peft_config=get_peft_config(script_args),
        quantization_config=get_quantization_config(script_args),
    )
    if push_to_hub:
        _hub_repo_or_later(trainer)
    # model-card inputs (trl_efficient.hub.card.ModelCardInfo): the data the run used, the evaluation set only once
    # the before/after evaluation has run on it (below); a loaded eval set that is never evaluated is not on the card
    trainer.update_card_info(recipe=recipe, datasets=[data_args.dataset_name])
    if not os.path.isdir(script_args.model_name_or_path) and model_scheme(script_args.model_name_or_path) is None:
        trainer.update_card_info(base_model_id=script_args.model_name_or_path)

    def _evaluate(tag):
        if eval_dataset is None or not script_args.eval_before_after:
            return None
        result = None
        if trainer.accelerator.is_main_process:
            unwrapped = trainer.accelerator.unwrap_model(trainer.model)
            gen_kwargs = {k: v for k, v in (training_args.generation_kwargs or {}).items() if k == "sequence_bias"}
            result = evaluate_model(
                unwrapped,
                tokenizer,
                eval_dataset,
                max_new_tokens=script_args.eval_max_new_tokens or training_args.max_completion_length,
                generation_kwargs=gen_kwargs,
                chat_template_kwargs=training_args.chat_template_kwargs,
                seed=training_args.seed,
                description=f"eval ({tag})",
            ).to_dict()
        trainer.accelerator.wait_for_everyone()
        return result

    # Tiny testbed matrices: one torch thread is faster than two threads waiting on each other (testbed/runner.py).
    threads = torch_threads() if is_testbed_model(script_args.model_name_or_path) else contextlib.nullcontext()
    with threads:
        # a resume reads the first run's before-training evaluation back instead of repeating it (trainer/runs.py)
        before = _before_evaluation(training_args, _evaluate)
        trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        after = _evaluate("after training")
    summary = {"recipe": recipe.name, "model": script_args.model_name_or_path, "before": before, "after": after}
    if before and after:  # which set the before/after table measured (hub.card.summary_markdown says so)
        summary["eval_dataset"] = {"name": data_args.eval_dataset_name, "split": data_args.eval_split}
    if before and after:
        datasets = [data_args.dataset_name, data_args.eval_dataset_name]
        trainer.update_card_info(summary=summary_markdown(summary), datasets=datasets)
    # Nothing lost: the weights, tokenizer and summary are on disk before any extra (card, push) runs; an extra
    # that fails is reported by name afterwards, with the model already safe.
    trainer.save_model(training_args.output_dir)
    if trainer.accelerator.is_main_process:
        with open(os.path.join(training_args.output_dir, SUMMARY_FILE), "w") as f:
            json.dump(summary, f, indent=1)
        trainer.create_model_card(model_name=os.path.basename(os.path.normpath(training_args.output_dir)))
        _print_summary(summary, training_args.output_dir, script_args.smoke_run, trainer.model_card_error is None)
        if trainer.model_card_error is not None:
            raise ExtraFailedError("model card (README.md)", training_args.output_dir, trainer.model_card_error)
    if push_to_hub:
        try:
            trainer.args.push_to_hub = training_args.push_to_hub = True
            trainer.push_to_hub()
        except Exception as exc:
            raise ExtraFailedError("push to the Hub", training_args.output_dir, exc) from exc
    return summary


def _hub_repo_or_later(trainer) -> None:
    """Create the run's Hub repo now (transformers' `Trainer.init_hf_repo`) and turn `push_to_hub` back on, so that
    checkpoints push as `hub_strategy` says; when the Hub cannot be reached, one warning, training goes on, and
    `run_training` pushes at the end (its failure then reported by `ExtraFailedError`, the model saved)."""
    try:
        trainer.init_hf_repo()
    except Exception as exc:  # network, auth, offline mode: all wait for the end
        logger.warning(
            "trl-efficient: the Hugging Face Hub cannot be reached now (%s: %s); training goes on and the push is "
            "tried at the end, after the model is saved in %s",
            type(exc).__name__, one_line(exc), trainer.args.output_dir,
        )  # fmt: skip
        return
    trainer.args.push_to_hub = True


def _before_evaluation(training_args, evaluate) -> dict | None:
    """The before-training evaluation: on a resume, the one the run saved in `trl_efficient_eval_before.json` when it
    started (None when it has none: the summary then has no before/after table); else `evaluate("before
    training")`, saved there for a later resume."""
    from ..trainer.runs import BEFORE_EVAL_FILE

    path = os.path.join(training_args.output_dir, BEFORE_EVAL_FILE)
    if training_args.resume_from_checkpoint is not None:
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    before = evaluate("before training")
    if before is not None and training_args.should_save:
        os.makedirs(training_args.output_dir, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(before, f, indent=1)
    return before


def _print_summary(summary: dict, output_dir: str, smoke_run: bool, card_written: bool = True) -> None:
    lines = ["", "=" * 78, f"trl-efficient: recipe '{summary['recipe']}' on {summary['model']}"]
    if summary["before"] and summary["after"]:
        b, a = summary["before"], summary["after"]
        lines += [
            f"  accuracy     : {b['accuracy']:.3f} -> {a['accuracy']:.3f}   (n={a['num_samples']})",
            f"  mean tokens  : {b['mean_tokens']:.1f} -> {a['mean_tokens']:.1f}",
            f"  truncated    : {b['truncated_fraction']:.2f} -> {a['truncated_fraction']:.2f}",
        ]
        if "redundant_share" in (a.get("extra") or {}):
            lines.append(
                f"  redundant    : {b['extra']['redundant_share']:.3f} -> {a['extra']['redundant_share']:.3f}"
                f"   (share of filler tokens; floor = {a['extra'].get('floor_tokens', float('nan')):.1f} tokens)"
            )
    saved = "checkpoint, model card (README.md) and summary" if card_written else "checkpoint and summary"
    lines += [f"  {saved} saved to {output_dir}"]
    if smoke_run:
        lines += ["", QUICKSTART_NOTE]
    lines += ["=" * 78]
    print("\n".join(lines))


def train_main(argv: list[str] | None = None) -> dict:
    """`trl-efficient train ARGV`: parse (`parse_train_args`), train (`run_training`), end the process group, return
    the summary; no arguments run the quickstart. Ctrl-C raises `InterruptedRunError` naming the checkpoint kept."""
    argv = list(sys.argv[2:] if argv is None else argv)
    if not argv:
        argv = ["--config", packaged_config("quickstart")]
    script_args, data_args, training_args = parse_train_args(argv)
    interrupted = False
    try:
        result = run_training(script_args, data_args, training_args)
    except KeyboardInterrupt:  # Ctrl-C: one line naming the checkpoint to resume from (it is kept)
        interrupted = True
    if interrupted:  # outside the except block: the trainer is freed, its progress bar drawn, before the line
        import gc

        gc.collect()
        raise InterruptedRunError(training_args.output_dir, argv)
    end_process_group()
    return result


def resume_or_refuse(script_args, data_args, training_args) -> None:
    """A rerun into an `output_dir` that holds a run resumes it or is refused (`trainer.runs.decide_resume`, at
    config time): sets `training_args.resume_from_checkpoint` to the checkpoint folder (or None), then records this
    run's settings in `output_dir/trl_efficient_run.json` for the next rerun to compare."""
    from ..trainer.runs import decide_resume, run_settings, write_run_settings

    settings = run_settings(script_args, data_args, training_args)
    training_args.resume_from_checkpoint = decide_resume(
        training_args.output_dir, training_args.resume_from_checkpoint, settings
    )
    if training_args.should_save:
        write_run_settings(training_args.output_dir, settings)


def end_process_group() -> None:
    """Destroy the distributed process group at the end of a successful run (`accelerate launch`, torchrun), through
    accelerate's `PartialState.destroy_process_group`. A process that exits with its gloo group alive can abort at
    interpreter exit (SIGABRT, "terminate called without an active exception": gloo's worker threads still hold work
    when the interpreter is torn down, pytorch/pytorch#179291), which turned a finished 2-process run into a failed
    launch. Not on failure: destroying the group while another rank is inside a collective can hang
    (pytorch/torchtitan#1342), so an error still exits as it did. A no-op without a process group."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        from accelerate import PartialState

        PartialState().destroy_process_group()
