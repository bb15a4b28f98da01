"""The training pipeline of `trl-efficient train` and `trl_efficient.train`: parse (run preset < recipe < YAML <
command line) into three dataclasses, check them at config time, build the trainer, train, save, evaluate.

Settings are resolved once (`train_args`, through `Recipe.settings`); the user's are the command line's flags
(`command_line` parses argv INTO them, typed by TRL's `TrlParser`) or `trl_efficient.train`'s keywords. Each value's
source is recorded in the config (`sources`), and the config-time checks judge the value in effect and quote where it
was set. The dataclasses: `TrainArguments` (TRL's `ModelConfig` plus the script options), `DataArguments` and
`EfficientGRPOConfig`. With no arguments, `train_main` runs the bundled `configs/quickstart.yaml`, an offline smoke
run of the whole pipeline on CPU. User errors raise `UserError` naming what to change.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
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
from .configs import packaged_config, read_config_file, resolve_config, shipped_config_name
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
        metadata={
            "help": "Add this bias to the EOS logit in transformers generation: for a model that rarely ends "
            "on its own (a tiny random model; SmolLM2 on CPU, as docs/quickstart.md's real-model run does)."
        },
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


class _Given(argparse.Namespace):
    """The namespace the command line is parsed into: every field reads as present, so argparse fills in no default
    and what it holds afterwards is exactly what the command line set (a repeated flag: the last, as argparse keeps)."""

    def __getattr__(self, name: str) -> None:
        if name.startswith("_"):
            raise AttributeError(name)
        return None


class TrainParser(TrlParser):
    """TRL's `TrlParser` whose argparse errors raise `UserError` (`core.errors.CommandParser`'s), for this parser
    only."""

    error = CommandParser.error

    def _check_value(self, action, value) -> None:  # a file as --dataset_name: say --dataset_source, not argparse's
        if action.dest == "dataset_name":  # "invalid choice"
            from ..data.loaders import check_dataset_name

            check_dataset_name("--dataset_name", value)
        super()._check_value(action, value)

    def format_help(self) -> str:
        """The help grouped by whose option it is: this project's first (the run, the data, `EfficientGRPOConfig`'s
        own fields), then TRL's `GRPOConfig` options, then transformers' `TrainingArguments`, under one heading each."""
        from transformers import TrainingArguments
        from trl import GRPOConfig

        hf = {f.name for f in dataclasses.fields(TrainingArguments)}
        trl = {f.name for f in (*dataclasses.fields(GRPOConfig), *dataclasses.fields(ModelConfig))} - hf
        trl -= {"model_name_or_path", "dtype"}  # TRL's ModelConfig fields, but with this project's defaults and help
        titles = ("trl-efficient options (the run, its data, the recipe's methods)", "TRL options (trl.GRPOConfig)",
                  "transformers options (transformers.TrainingArguments)")  # fmt: skip
        groups = {title: [] for title in titles}
        sections = list(groups.values())
        for action in self._actions:
            dest = action.dest.removeprefix("no_")
            sections[2 if dest in hf else 1 if dest in trl else 0].append(action)
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, [], [])
        formatter.add_text(self.description)
        for title, actions in groups.items():
            formatter.start_section(title)
            formatter.add_arguments(actions)
            formatter.end_section()
        return formatter.format_help()


def train_parser() -> TrainParser:
    from ..data.loaders import DataArguments
    from ..trainer import EfficientGRPOConfig

    parser = TrainParser((TrainArguments, DataArguments, EfficientGRPOConfig), prog="trl-efficient train")
    parser.add_argument("--config", help="A YAML of these fields: a path, or a shipped recipe's name (`trl-efficient "
                        "recipes` lists them); the command line wins over it.")  # fmt: skip
    return parser


def command_line(argv: list[str]) -> tuple[str | None, dict]:
    """`trl-efficient train ARGV` parsed INTO `(config, user)`: the `--config` value and the fields the command line
    sets, typed by the parser, nothing else (no defaults); argparse's errors and unknown flags raise `UserError`."""
    namespace, unknown = train_parser().parse_known_args(argv, namespace=_Given())
    if unknown:
        raise UserError(f"unknown argument(s): {' '.join(unknown)}; fix their names (see `trl-efficient train --help`)")
    user = vars(namespace)
    return user.pop("config", None), user


def _text(value) -> str:
    """A value as the user would write it: `true`, `-1` (not `-1.0`), `1e-06`, `nan`."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass
class Sources:
    """Where each setting of a run came from (`Recipe.settings`: field -> "preset", "recipe", "yaml" or "user"), to
    quote the value in effect in an error: the YAML's name (`label`), the run preset's and the recipe's, and whether
    the user's are keywords of `trl_efficient.train` (`keywords`) or flags.

    >>> where = Sources({"beta": "user", "top_p": "yaml", "epsilon_high": "recipe"}, "my.yaml", recipe="dapo-overlong")
    >>> where.quote("beta", -1.0), where.quote("top_p", 2), where.quote("epsilon_high", 0.28), where.quote("seed", 0)
    ('--beta -1', 'my.yaml sets top_p: 2', "epsilon_high 0.28 (recipe dapo-overlong's)", None)
    """

    sources: dict
    label: str | None = None
    preset: str | None = None
    recipe: str = "grpo"
    keywords: bool = False

    def quote(self, key: str, value) -> str | None:
        """How `key` was set to `value`, or None when no one set it (its default)."""
        source = self.sources.get(key)
        if source == "user":
            return f"{key}={value!r}" if self.keywords else f"--{key} {_text(value)}"
        if source == "yaml":
            return f"{self.label} sets {key}: {_text(value)}"
        owner = {"recipe": f"recipe {self.recipe}", "preset": f"run preset {self.preset}"}.get(source)
        return None if owner is None else f"{key} {_text(value)} ({owner}'s)"

    def asks(self, key: str, what: str) -> str:
        """Who turned the switch `key` on, for an error about it: `--key asks for <what>`, `<yaml> sets key: true`,
        `the run preset P (run_defaults) sets key: true`, else `key is on`."""
        source = self.sources.get(key)
        if source == "user":
            return f"{key}=True asks for {what}" if self.keywords else f"--{key} asks for {what}"
        if source == "yaml":
            return f"{self.label} sets {key}: true"
        if source == "preset":
            return f"the run preset {self.preset} (run_defaults) sets {key}: true"
        return f"recipe {self.recipe} sets {key}: true" if source == "recipe" else f"{key} is on"


def _config_error(err: ValueError, where: Sources) -> UserError:
    """A `ValueError` of the dataclasses' own checks, reworded to say what to change where we know it. transformers'
    `TrainingArguments` refuses bf16 without a bf16-capable GPU with a plain `ValueError` (no type or attribute of its
    own), so that one is recognised by its text naming bf16, and only on a machine without CUDA."""
    import torch

    message = one_line(err)
    if "bf16" in message and not torch.cuda.is_available():
        source = where.sources.get("bf16")
        said = where.asks("bf16", "bf16") if source else "bf16 is on (TRL's default)"
        said = f"{where.label} asks for bf16: true" if source == "yaml" else said
        return UserError(
            f"{said}, which needs a GPU, and this machine has no CUDA: to run on CPU pass --bf16 false (the model "
            "then loads and trains in float32 unless you set a dtype), or --use_cpu true to keep bf16 autocast on CPU"
        )
    return UserError(message)


DTYPE_KEYS = ("dtype", "torch_dtype")  # TRL's ModelConfig field and its old name (a flag alias, a YAML key)
HALF_DTYPES = ("bfloat16", "float16")


def resolve_load_dtype(script_args, training_args, where: Sources) -> str:
    """Decide, at config time, the one dtype the policy loads in, and write it to `script_args.dtype` and
    `training_args.model_init_kwargs["dtype"]` (so everything that loads a copy of the policy, such as Bingo's frozen
    reference, loads the same). Returns it.

    Precedence: the user's `model_init_kwargs` dtype > the user's `--dtype` (or a YAML `dtype`) > the run preset's
    `model_init_kwargs` dtype, **only while bf16 is on** (the preset's bfloat16 weights go with its `bf16: true`) >
    float32. Why: a preset lies beneath everything the user sets, and a run that trains in float32 (`--bf16 false`,
    no fp16, the CPU route) must not silently load and save bfloat16 weights. A half-precision dtype the user set
    while bf16 and fp16 are off is kept (training bf16 weights directly is a choice) and named in one warning."""
    model_kwargs = dict(training_args.model_init_kwargs or {})
    preset_dtype = model_kwargs.pop("dtype", None) if where.sources.get("model_init_kwargs.dtype") == "preset" else None
    source = next(((str(model_kwargs[k]), f"model_init_kwargs.{k}") for k in DTYPE_KEYS if model_kwargs.get(k)), None)
    if source is None and where.sources.get("dtype") in ("yaml", "user"):
        flag = "dtype" if where.keywords else "--dtype"
        source = str(script_args.dtype), flag if where.sources["dtype"] == "user" else f"{where.label}'s dtype"
    mixed = bool(training_args.bf16 or training_args.fp16)
    if source is not None:
        dtype, said = source
        if dtype in HALF_DTYPES and not mixed:
            logger.warning(
                "%s=%s loads the weights in %s while bf16 and fp16 are off: the run trains and saves %s weights "
                "without mixed precision; drop it (or pass float32) to train in float32, or turn on --bf16 true",
                said, dtype, dtype, dtype,
            )  # fmt: skip
    elif preset_dtype is not None and training_args.bf16:
        dtype = preset_dtype
    else:
        dtype = "float32"
    model_kwargs = {k: v for k, v in model_kwargs.items() if k not in DTYPE_KEYS}
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


def _check_vllm(training_args, where: Sources) -> None:
    """`use_vllm` on a machine without vLLM: one line naming both ways out (TRL raises a long `ImportError` when the
    trainer is built) and who turned it on. Server mode needs the vllm package here too (TRL's client imports it)."""
    from trl.import_utils import is_vllm_available

    if training_args.use_vllm and not is_vllm_available():
        raise UserError(
            f"{where.asks('use_vllm', 'vLLM')} and vLLM is not installed: pass --use_vllm false to generate with "
            "transformers, or install it with `pip install 'trl-efficient[vllm]'`"
        )


def cpu_threads_hint(threads: int, cpus: int, load: float) -> str | None:
    """The one-line hint for a CPU run whose torch threads outnumber the free cores (`cpus` minus the 1-minute load
    average, at least 1), else None. Why: OpenMP threads that wait on each other for a busy core made a step of a
    135M model 10x slower on a 2-core machine shared with other work (905 s with torch's default 2 threads, 91 s with
    OMP_NUM_THREADS=1; issue 36). A hint only: the thread count is the user's (it can change the last bits of float
    sums), and the quickstart's synthetic world already runs on one thread (`overthinking.torch_threads`).

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
        f"cores); set OMP_NUM_THREADS={free} before the command (docs/cli.md, 'CPU threads')"
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


def _check_values(values: dict, where: Sources) -> None:
    """`VALUE_RULES` on the values in effect (`values`, before the dataclasses are built: some crash TRL's own checks,
    num_generations 0 a modulo by zero): one line quoting where the value was set (`Sources.quote`), what it must be
    and what to pass. `save_steps` only with `save_strategy: steps`."""
    for key, (valid, rule, example) in VALUE_RULES.items():
        if values.get(key) is None or (key == "save_steps" and str(values.get("save_strategy", "steps")) != "steps"):
            continue
        try:
            number = float(values[key])
        except (TypeError, ValueError):
            continue  # not a number: the parser says so
        if not valid(number):
            raise UserError(f"{where.quote(key, values[key])}: {key} must be {rule}; pass e.g. --{key} {example}")


def _check_built(script_args, training_args) -> None:
    """What only the built dataclasses tell: a model folder without a model, `--report_to` packages not installed."""
    from transformers.integrations import get_available_reporting_integrations

    from ..core.models import missing_model_dir

    missing = missing_model_dir(script_args.model_name_or_path)  # no such folder, or one without a model
    if missing is not None:
        raise UserError(str(missing))
    available = get_available_reporting_integrations()
    missing = [name for name in (training_args.report_to or []) if name not in (*available, "none", "all")]
    if missing:
        raise UserError(
            f"--report_to {' '.join(missing)} needs {' and '.join(missing)}, which is not installed: pass --report_to "
            f"none (or one of the installed: {', '.join(available) or 'none'}), or `pip install {' '.join(missing)}`"
        )


def parse_train_args(argv: list[str]) -> tuple:
    """`(TrainArguments, DataArguments, EfficientGRPOConfig)` of `trl-efficient train ARGV`: the command line parsed
    into its settings (`command_line`), then `train_args`."""
    return train_args(*command_line(argv))


def train_args(config: str | os.PathLike | dict | None, user: dict, function: str | None = None) -> tuple:
    """`(TrainArguments, DataArguments, EfficientGRPOConfig)` from settings resolved once (`Recipe.settings`): the run
    preset < the recipe < the YAML `config` (a path, a shipped recipe's name, or a dict of a YAML's keys) < `user`
    (the command line's fields, or the keywords of `function`, e.g. `train`); each value's source is recorded
    (`Recipe.recorded`). User errors (bad file, unknown recipe or field, invalid value) raise `UserError`."""
    from ..core.models import check_quantization
    from ..data.loaders import DataArguments
    from ..recipes import get_recipe
    from ..trainer import EfficientGRPOConfig
    from ..trainer.lisa import check_lisa_peft

    register_everything()  # `train_main` is also called directly (tests, scripts), not only through `main`
    classes = (TrainArguments, DataArguments, EfficientGRPOConfig)
    fields = {f.name: f for cls in classes for f in dataclasses.fields(cls) if f.init}
    recipe_name = user.get("recipe")
    if config is None and recipe_name is not None and shipped_config_name(recipe_name) == recipe_name:
        # `--recipe kimi` alone runs as `--config kimi`; with --config, it switches the method. With --run_defaults,
        # the preset is the run (`--recipe prorl --run_defaults smollm2-cpu`: a short CPU run, the recipe's constants
        # scaled to it), not the shipped YAML's paper-scale run on top of it.
        config = None if "run_defaults" in user else recipe_name
    yaml_values, label = {}, None
    if isinstance(config, dict):  # the keys of a YAML file
        yaml_values, label = dict(config), "the config"
    elif config is not None:
        label = resolve_config(os.fspath(config))
        yaml_values = dict(read_config_file(label))
    for key, value in (yaml_values.pop("env", None) or {}).items():  # TRL's `env:` mapping
        os.environ[key] = str(value)
    unknown = sorted(set(yaml_values) - set(fields))
    if unknown:
        raise UserError(f"unknown field(s) in {label}: {', '.join(unknown)}; remove them or fix their names (the "
                        "fields are listed by `trl-efficient train --help`)")  # fmt: skip
    if function is not None:
        unknown = sorted(set(user) - set(fields))
        if unknown:
            raise UserError(f"{function}(): unknown keyword(s) {', '.join(unknown)}; fix their names (the fields are "
                            "listed by `trl-efficient train --help`)")  # fmt: skip
        for key, value in user.items():
            if value is None and fields[key].default is not None:
                raise UserError(f"{function}(): {key}=None is no value of {key}; leave {key} out to keep its default")
    recipe = get_recipe(recipe_name or yaml_values.get("recipe") or fields["recipe"].default)
    preset = user.get("run_defaults", yaml_values.get("run_defaults"))
    values, sources = recipe.settings(preset, yaml=yaml_values, user=user)
    where = Sources(sources, label, preset, recipe.name, keywords=function is not None)
    _check_values(values, where)
    parser = train_parser()
    parser.set_defaults(**{key: value for key, value in values.items() if key in fields})
    try:
        with warnings.catch_warnings():
            if sources.get("gradient_checkpointing") not in ("yaml", "user"):
                # TRL's GRPOConfig defaults the deprecated `gradient_checkpointing` to True, so transformers warns on
                # every run about a name the user never wrote: that warning is silenced; the user's own use still warns
                warnings.filterwarnings("ignore", "`gradient_checkpointing` is deprecated", FutureWarning)
            namespace = parser.parse_args([])  # the values in effect, typed by the parser (a YAML's "1e-6" a float)
            built = [cls(**{f.name: getattr(namespace, f.name) for f in dataclasses.fields(cls) if f.init})
                     for cls in classes]  # fmt: skip
        script_args, data_args, training_args = built
        resolve_load_dtype(script_args, training_args, where)
        warn_cpu_threads(script_args, training_args)
        check_quantization(script_args)
        check_lisa_peft(training_args, script_args.use_peft)
        _check_zero3_eval(script_args, data_args, training_args)
        _check_vllm(training_args, where)
        _check_built(script_args, training_args)
        # reward_kwargs may only name builders this recipe uses (the config checked each builder's arguments)
        recipe.with_reward_kwargs(training_args.reward_kwargs)
    except UserError:
        raise
    except ValueError as err:
        raise _config_error(err, where) from err
    return script_args, data_args, recipe.recorded(training_args, sources)


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
    from ..overthinking import is_testbed_model, torch_threads
    from ..recipes import get_recipe

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
    training_args.model_init_kwargs = model_init_kwargs(
        script_args, trust_remote_code=training_args.trust_remote_code, overrides=training_args.model_init_kwargs
    )
    # The Trainer creates the Hub repo when it is built (push_to_hub): an unreachable Hub must not stop the run before
    # it trains. Built with push_to_hub off, it then tries the repo once (`_hub_repo_or_later`); failing that, the
    # push waits for the end, after the model is saved, as the README says.
    push_to_hub, training_args.push_to_hub = training_args.push_to_hub, False
    trainer = recipe.trainer(  # with its reward functions, as a TRL script builds it (`Recipe.trainer`)
        model_path, training_args, train_dataset, tokenizer,
        peft_config=get_peft_config(script_args), quantization_config=get_quantization_config(script_args),
    )  # fmt: skip
    if push_to_hub:
        _hub_repo_or_later(trainer)
    # model-card inputs (trl_efficient.hub.card.ModelCardInfo): the data the run used, the evaluation set only once
    # the before/after evaluation has run on it (below); a loaded eval set that is never evaluated is not on the card
    trainer.update_card_info(datasets=[data_args.dataset_name])
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

    # The synthetic world's tiny matrices: one torch thread beats two threads waiting on each other.
    threads = torch_threads() if is_testbed_model(script_args.model_name_or_path) else contextlib.nullcontext()
    with threads:
        # a resume reads the first run's before-training evaluation back instead of repeating it (trainer/runs.py)
        before = _before_evaluation(training_args, _evaluate)
        trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        after = _evaluate("after training")
    summary = {"recipe": recipe.name, "model": script_args.model_name_or_path, "before": before, "after": after}
    if before and after:  # which set the before/after table measured (hub.card.summary_markdown says so)
        summary["eval_dataset"] = {"name": data_args.eval_dataset_name, "split": data_args.eval_split}
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
    """`trl-efficient train ARGV`: parse (`parse_train_args`) and `run`; no arguments run the quickstart."""
    argv = list(sys.argv[2:] if argv is None else argv)
    if not argv:
        argv = ["--config", packaged_config("quickstart")]
    return run(*parse_train_args(argv), argv=argv)


def run(script_args, data_args, training_args, argv: list[str] | None = None) -> dict:
    """Train (`run_training`), end the process group, return the summary. Ctrl-C raises `InterruptedRunError` naming
    the checkpoint kept and the command (`argv`) that resumes it."""
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
