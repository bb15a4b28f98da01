"""The one recipe registry: recipe name -> its parts.

A `Recipe` names its reward functions (by `REWARD_BUILDERS` name) with weights and keyword arguments, the config
overrides it needs (rollout plan, advantage estimator, filter, loss settings), the papers, which of its values are
proposed defaults, how to prompt the trained model, and what it declares for the rest of the package: its section of
the method reference (`section`, with the method's papers and released code). What a comparison of recipes declares
per recipe (its scale, paper length constants, claims) lives with that comparison, outside the library. No
list of recipe names is kept anywhere else (`tests/recipes/test_no_hand_kept_lists.py`). `configs/<recipe>.yaml`
holds a runnable configuration for each recipe; precedence is recipe overrides < YAML < command line.

Reward builders share one signature, `(args, tokenizer, **kwargs) -> reward callable`, and read shared values
(`max_completion_length`, `length_unit`, `length_scope`) from the config, so each default has one home. Each is
declared with `reward_builder(name, factory, paper, receives=...)` (a decorator when it needs a build function), which
passes the config values it `receives` itself. Its `RewardInfo` (factory object, paper, dataset columns it needs)
feeds the README's reward table (`trl-efficient recipes --markdown`, see `tables.py`), as each `Recipe` feeds the
recipe table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import rewards as R
from ..core.registry import Registry

# Both filled by the modules of `trl_efficient.recipes` (imported by discovery, `core.registry.import_submodules`).
RECIPES: Registry = Registry("recipe", providers=("trl_efficient.recipes",))
REWARD_BUILDERS: Registry = Registry("reward builder", providers=("trl_efficient.recipes",))


@dataclass(frozen=True)
class RewardInfo:
    """What the README's reward table says about a reward builder.

    `factory`: the public reward factory the builder calls (the object; every one imports from
    `trl_efficient.rewards`); `paper`: the paper (arXiv id, section) and a few words on the reward; `needs`: the
    dataset or rollout-plan columns the reward reads besides the completions; `whole_groups`: the reward compares the
    G rollouts of a prompt; `receives`: what the run hands the factory from its config (`RECEIVES`).
    """

    factory: Callable
    paper: str
    needs: tuple[str, ...] = ("solution",)
    whole_groups: bool = False
    receives: tuple[str, ...] = ()

    @property
    def factory_name(self) -> str:
        return self.factory.__name__


REWARD_INFO: dict[str, RewardInfo] = {}
# builder name -> extra receivers of its keyword arguments (objects, or `"module:attr"` references: `resolve`)
REWARD_RECEIVERS: dict[str, tuple[Callable | str, ...]] = {}

DEFAULT_TRAINER = "trl_efficient.trainer:EfficientGRPOTrainer"


def resolve(reference: Any) -> Any:
    """The object a `"package.module:attr"` reference names, imported on first use; any other value as it is.
    Recipes name their trainer and dataset hook this way, so that registering them imports no trainer (torch):
    `import trl_efficient.recipes` stays light, and the class loads when a run asks for it.

    >>> resolve("trl_efficient.core.registry:Registry").__name__, resolve(len) is len
    ('Registry', True)
    """
    if not isinstance(reference, str):
        return reference
    import importlib

    module, _, attr = reference.partition(":")
    if not module or not attr:
        raise ValueError(f"{reference!r} is no reference: write 'package.module:attr'")
    value = importlib.import_module(module)
    for part in attr.split("."):
        value = getattr(value, part)
    return value


# What a reward builder can receive from the run, by name: the factory parameters each one sets from the config
# (`args`) and the run's tokenizer. `reward_builder` passes them itself, so no builder can forget one.
RECEIVES: dict[str, tuple[str, ...]] = {
    "length": ("length_unit", "length_scope", "tokenizer"),  # the config's length_unit / length_scope
    "tokenizer": ("tokenizer",),
    "cap": ("max_completion_length",),  # the config's max_completion_length
}


def _received(receives: tuple[str, ...], args, tokenizer) -> dict:
    """The keyword arguments `receives` stands for, read from `args` (the config) and the run's `tokenizer`."""
    values = {"length_unit": lambda: args.length_unit, "length_scope": lambda: args.length_scope,
              "tokenizer": lambda: tokenizer, "max_completion_length": lambda: args.max_completion_length}  # fmt: skip
    return {key: values[key]() for what in receives for key in RECEIVES[what]}


def reward_builder(
    name: str,
    factory: Callable,
    paper: str,
    *,
    needs: tuple[str, ...] = ("solution",),
    whole_groups: bool = False,
    receives: tuple[str, ...] = (),
    also_receives: tuple[Callable | str, ...] = (),
) -> _Declared:
    """Declare reward builder `name`: the run calls `factory(**received, **kwargs)`, or `build(args, **received,
    **kwargs)` when the builder needs more than its factory (a default read from another config field, a monitor):
    `@reward_builder(...)` above `def build(args, **kwargs)`.

    `received` is what `receives` names (`RECEIVES`: `"length"` -> `length_unit`, `length_scope` from the config and
    the run's tokenizer; `"tokenizer"`; `"cap"` -> `max_completion_length`); `kwargs` are the recipe's
    `RewardSpec.kwargs` with the config's `reward_kwargs` on top. Declaration is checked against the factory's
    signature: a factory that takes `length_unit` must be declared with `receives=("length",)` (and only one that
    takes it may be), so a length reward cannot silently ignore the config's `length_unit`/`length_scope`. A builder
    that hands some keyword arguments to another callable names it in `also_receives` (LASER-D's monitor); the
    signatures of `factory` and `also_receives` are what `check_reward_kwargs` accepts (an `also_receives` entry may
    be a `"module:attr"` reference, imported when the keyword arguments are checked: `resolve`).

    >>> try:
    ...     reward_builder("no_length", R.get_l1_reward, "L1")
    ... except TypeError as err:
    ...     print(str(err).replace(", so", ",\\nso"))
    reward builder 'no_length': get_l1_reward takes length_unit,
    so declare it with receives=("length",) (the config's length_unit and length_scope)
    """
    import inspect

    unknown = sorted(set(receives) - set(RECEIVES))
    if unknown:
        raise TypeError(f"reward builder {name!r}: receives {unknown}; choose from {sorted(RECEIVES)}")
    params = inspect.signature(factory).parameters
    if ("length_unit" in params) != ("length" in receives):
        raise TypeError(f"reward builder {name!r}: {factory.__name__} "
                        + ("takes length_unit, so declare it with receives=(\"length\",) (the config's length_unit "
                           "and length_scope)" if "length_unit" in params else "takes no length_unit: drop \"length\" "
                           "from receives"))  # fmt: skip
    declared = _Declared(name, factory)

    def builder(args, tokenizer, **kwargs) -> Callable:
        received = _received(receives, args, tokenizer)
        if declared.build is None:
            return factory(**received, **kwargs)
        return declared.build(args, **received, **kwargs)

    builder.__name__ = builder.__qualname__ = f"build_{name}"
    declared.builder = builder
    REWARD_BUILDERS.register(name, builder)
    REWARD_INFO[name] = RewardInfo(factory, paper, tuple(needs), whole_groups, tuple(receives))
    REWARD_RECEIVERS[name] = tuple(also_receives)
    return declared


class _Declared:
    """What `reward_builder(...)` returns: the builder is registered already (it calls the factory); used as a
    decorator, the decorated function `build(args, **received, **kwargs) -> reward callable` becomes what it calls,
    and its name is bound to the registered builder, `(args, tokenizer, **kwargs) -> reward callable`."""

    def __init__(self, name: str, factory: Callable) -> None:
        self.name, self.factory, self.build, self.builder = name, factory, None, None

    def __call__(self, build: Callable) -> Callable:
        if self.build is not None:
            raise TypeError(f"reward builder {self.name!r} already has its build function {self.build.__name__}")
        self.build = build
        self.builder.__doc__, self.builder.__wrapped__ = build.__doc__, build
        return self.builder


def reward_kwargs_receivers(name: str) -> tuple[Callable, ...]:
    """The callables that receive builder `name`'s keyword arguments: its `RewardInfo.factory`, then its
    `also_receives` (references resolved)."""
    REWARD_BUILDERS.get(name)  # an unknown name lists the registered builders
    return (REWARD_INFO[name].factory, *(resolve(r) for r in REWARD_RECEIVERS.get(name, ())))


def check_reward_kwargs(name: str, kwargs: dict, source: str = "reward_kwargs") -> None:
    """Refuse keyword arguments of reward builder `name` that its factory (and `also_receives`) does not take, listing
    the valid names from their signatures; `"weight"` (the spec's weight) is always valid, `tokenizer` never (the run
    passes its own).

    >>> check_reward_kwargs("kimi_length", {"warmup_ratio": 0.1, "weight": 0.5})
    >>> try:
    ...     check_reward_kwargs("l1", {"alhpa": 0.1})
    ... except ValueError as err:
    ...     print(str(err).replace("; ", ";\\n"))
    reward_kwargs: unknown argument(s) ['alhpa'] for reward builder 'l1' (get_l1_reward);
    valid names: ['alpha', 'delta', 'length_scope', 'length_unit', 'mode', 'weight'].
    """
    from ..core.checks import check_keywords

    what = f"reward builder {name!r} ({REWARD_INFO[name].factory_name})"
    check_keywords(source, kwargs, reward_kwargs_receivers(name), what, skip=("tokenizer",), extra=("weight",))


@dataclass(frozen=True)
class RewardSpec:
    builder: str
    weight: float = 1.0
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Section:
    """A numbered section of the method reference (`docs/methods.md §N`, the number the code cites): its title, the
    released code (GitHub `owner/repo`) and the papers (arXiv ids) of the method, which every recipe of the section
    cites. Each recipe names its section (`Recipe.section`); the reference lists a section's recipes in the order
    they are registered."""

    number: int
    title: str
    code: tuple[str, ...] = ()
    papers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Recipe:
    name: str
    method: str
    description: str
    rewards: tuple[RewardSpec, ...]
    config_overrides: dict[str, Any] = field(default_factory=dict)
    proposed_defaults: tuple[str, ...] = ()
    usage: str = "Prompt as in training: the question followed by the instruction to put the final answer in \\boxed{}."
    # the trainer class, as a "module:attr" reference (`resolve`; `trainer_cls` imports it): a subclass for
    # trainer-level methods (methods/), so that registering a recipe imports no trainer
    trainer_class: str | type = DEFAULT_TRAINER
    # (train_dataset, args, tokenizer, **recipe_kwargs) -> train_dataset; a callable or a "module:attr" reference
    dataset_hook: Callable | str | None = None
    section: Section | None = None  # its section of the method reference (docs/methods.md §N)

    @property
    def papers(self) -> tuple[str, ...]:
        """The arXiv ids this recipe cites: its section's (`Section.papers`); none without a section (the controls).

        >>> get_recipe("l1-max").papers
        ('2503.04697',)
        """
        return self.section.papers if self.section is not None else ()

    @property
    def trainer_cls(self) -> type:
        """The trainer class (`trainer` imported on first use: the method layer, and torch, load here).

        >>> get_recipe("grpo").trainer_cls.__name__
        'EfficientGRPOTrainer'
        """
        return resolve(self.trainer_class)

    def apply_prepare_dataset(self, dataset, args, tokenizer, **kwargs) -> Any:
        if self.dataset_hook is None:
            if kwargs:
                raise ValueError(f"recipe_kwargs {sorted(kwargs)} given, but recipe {self.name!r} takes none.")
            return dataset
        return resolve(self.dataset_hook)(dataset, args, tokenizer, **kwargs)

    def with_reward_kwargs(self, overrides: dict | None, source: str = "reward_kwargs") -> Recipe:
        """This recipe with `{builder: {kwarg: value}}` merged over its `RewardSpec` kwargs, the one place reward
        arguments are overridden (the config's `reward_kwargs`, a comparison's scale and sweeps). The key `"weight"`
        sets the spec's weight (Kimi's length reward has no coefficient but its weight). A builder the recipe does not
        use is an error naming `source`.

        >>> r = get_recipe("kimi").with_reward_kwargs({"kimi_length": {"weight": 0.8, "warmup_ratio": 0.0}})
        >>> [(s.builder, s.weight, s.kwargs) for s in r.rewards]
        [('correctness', 1.0, {}), ('kimi_length', 0.8, {'warmup_ratio': 0.0})]
        """
        import dataclasses

        overrides = overrides or {}
        if not isinstance(overrides, dict) or not all(isinstance(v, dict) for v in overrides.values()):
            raise ValueError(f"{source} must map builder names to dicts of arguments, got {overrides!r}.")
        for builder in overrides:
            REWARD_BUILDERS.get(builder)  # a name that is no builder at all lists the registered builders
        builders = [spec.builder for spec in self.rewards]
        unknown = sorted(set(overrides) - set(builders))
        if unknown:
            raise ValueError(f"{source} names {unknown}, which recipe {self.name!r} does not use (it builds only "
                             f"{builders}).")  # fmt: skip
        for builder, kwargs in overrides.items():
            check_reward_kwargs(builder, kwargs, source)
        rewards = []
        for spec in self.rewards:
            kwargs = dict(overrides.get(spec.builder, {}))
            weight = kwargs.pop("weight", spec.weight)
            rewards.append(dataclasses.replace(spec, weight=weight, kwargs={**spec.kwargs, **kwargs}))
        return dataclasses.replace(self, rewards=tuple(rewards))

    def reward_kwargs(self, args) -> list[dict]:
        """Each `RewardSpec`'s keyword arguments with the config's `reward_kwargs[builder]` on top."""
        return [spec.kwargs for spec in self.with_reward_kwargs(getattr(args, "reward_kwargs", None)).rewards]

    def build_reward_funcs(self, args, tokenizer) -> tuple[list, list[float]]:
        """Instantiate the reward callables and their weights for `args` (an `EfficientGRPOConfig`): recipe kwargs <
        `args.reward_kwargs` (the YAML or command line sets a recipe's reward arguments there)."""
        recipe = self.with_reward_kwargs(getattr(args, "reward_kwargs", None))
        funcs = []
        for spec in recipe.rewards:
            try:
                funcs.append(REWARD_BUILDERS.get(spec.builder)(args, tokenizer, **spec.kwargs))
            except TypeError as err:  # a key the run sets itself (e.g. length_unit, from the config) given twice
                if "keyword argument" not in str(err):
                    raise
                raise ValueError(f"reward_kwargs {{{spec.builder!r}: {spec.kwargs}}} does not fit reward builder "
                                 f"{spec.builder!r}: {err}") from err  # fmt: skip
        return funcs, [spec.weight for spec in recipe.rewards]

    # The recipe as the Python object a TRL script uses (issue 46): `config`, `reward_funcs`, `prepare_dataset`,
    # `trainer`; `trl-efficient train` runs through the same methods (`api.training`).

    def settings(self, run_defaults: str | None = None, **layers: dict) -> tuple[dict, dict]:
        """`(values, sources)`: the settings this recipe runs with and where each came from, the run preset
        `run_defaults` (`presets.py`) < the recipe's `config_overrides` < each of `layers` in order (`yaml=...`,
        `user=...`: the keyword is the source recorded). A preset's load dtype lies beneath everything: it is merged
        into a `model_init_kwargs` without one and recorded as `sources["model_init_kwargs.dtype"] == "preset"` (it
        applies only with bf16 on: `config`, `api.training.resolve_load_dtype`).

        >>> values, sources = get_recipe("dr-grpo").settings("math-1.5b", user={"max_steps": 2})
        >>> values["loss_type"], sources["loss_type"], sources["learning_rate"], sources["max_steps"]
        ('dr_grpo', 'recipe', 'preset', 'user')
        >>> values["model_init_kwargs"], sources["model_init_kwargs.dtype"]
        ({'dtype': 'bfloat16'}, 'preset')
        """
        import json

        from .presets import run_preset, scaled_overrides

        preset = run_preset(run_defaults)
        preset_kwargs = dict(preset.pop("model_init_kwargs", None) or {})
        preset_dtype = preset_kwargs.pop("dtype", None)
        if preset_kwargs:
            preset["model_init_kwargs"] = preset_kwargs
        values, sources = {}, {}
        recipe = scaled_overrides(run_defaults, self.config_overrides)  # its constants at a short preset's run length
        for source, layer in (("preset", preset), ("recipe", recipe), *layers.items()):
            for key, value in (layer or {}).items():
                values[key], sources[key] = value, source
        kwargs = values.get("model_init_kwargs") or {}
        if isinstance(kwargs, str):  # the command line's JSON
            try:
                kwargs = json.loads(kwargs)
            except ValueError:
                kwargs = None  # the config names the error
        if preset_dtype is not None and isinstance(kwargs, dict) and not kwargs.get("dtype"):
            values["model_init_kwargs"] = {**kwargs, "dtype": preset_dtype}
            sources.setdefault("model_init_kwargs", "preset")
            sources["model_init_kwargs.dtype"] = "preset"
        return values, sources

    def recorded(self, args: Any, sources: dict) -> Any:
        """`args` (a config) with this recipe's name (`args.recipe`) and where each setting came from
        (`args.sources`: field -> "preset", "recipe", "yaml" or "user"; a field in none is its default)."""
        args.recipe, args.sources = self.name, dict(sources)
        return args

    def config(self, output_dir: str, run_defaults: str | None = None, **yours) -> Any:
        """An `EfficientGRPOConfig` for this recipe, as a TRL script builds its `GRPOConfig`: the run preset
        `run_defaults` < the recipe's `config_overrides` < `yours` (`EfficientGRPOConfig` fields). A preset's settings
        that are no config field (its model, datasets) are the script's to use; its load dtype applies only with bf16
        on (else float32, as `trl-efficient train` loads). The config knows its recipe and the source of each value
        (`recorded`).

        >>> args = get_recipe("dapo-overlong").config("out", max_steps=3, bf16=False)
        >>> args.recipe, args.epsilon_high, args.sources["epsilon_high"], args.max_steps, args.sources["max_steps"]
        ('dapo-overlong', 0.28, 'recipe', 3, 'user')
        """
        import dataclasses

        from .. import methods  # noqa: F401  (the estimators, plans and filters a recipe's config names)
        from ..trainer import EfficientGRPOConfig

        names = {f.name for f in dataclasses.fields(EfficientGRPOConfig) if f.init}
        unknown = sorted(set(yours) - names)
        if unknown:
            raise ValueError(f"config(): {', '.join(unknown)} is no EfficientGRPOConfig field; fix the name (the "
                             "fields are listed by `trl-efficient train --help`)")  # fmt: skip
        values, sources = self.settings(run_defaults, user={"output_dir": output_dir, **yours})
        args = EfficientGRPOConfig(**{key: value for key, value in values.items() if key in names})
        if sources.get("model_init_kwargs.dtype") == "preset" and not args.bf16:
            args.model_init_kwargs = {**args.model_init_kwargs, "dtype": "float32"}
        return self.recorded(args, sources)

    def reward_funcs(self, args, tokenizer) -> list:
        """The reward callables of this recipe for `args` (`build_reward_funcs`); their weights go into
        `args.reward_weights` unless it sets its own, as `trl-efficient train` does."""
        funcs, weights = self.build_reward_funcs(args, tokenizer)
        if args.reward_weights is None:
            args.reward_weights = weights
        return funcs

    def prepare_dataset(self, dataset: Any, args: Any, tokenizer: Any, **recipe_kwargs) -> Any:
        """`dataset` as this recipe trains on it: raw math rows (GSM8K's question/answer, MATH's problem/solution,
        MATH-500's problem/answer) in the library's prompt/solution format with the default instruction
        (`data.loaders.format_math_dataset`; rows already in that format are kept, an `idx` column added when
        missing), then the recipe's `dataset_hook` with `recipe_kwargs`."""
        from ..data.loaders import format_math_dataset, math_format

        columns = dataset.column_names
        if not {"prompt", "solution"} <= set(columns):
            name = math_format(columns)
            if name is None:
                raise ValueError(f"recipe {self.name!r}: a dataset with columns {columns} is in no known format: pass "
                                 "prompt/solution rows, or GSM8K's question/answer, MATH's problem/solution or "
                                 "MATH-500's problem/answer")  # fmt: skip
            dataset = format_math_dataset(dataset, name, seed=args.seed)
        elif "idx" not in columns:
            dataset = dataset.add_column("idx", list(range(len(dataset))))
        return self.apply_prepare_dataset(dataset, args, tokenizer, **recipe_kwargs)

    def trainer(self, model: Any, args: Any, train_dataset: Any, processing_class: Any = None, **kwargs) -> Any:
        """This recipe's trainer (`trainer_cls`) built with its reward functions (`reward_funcs`), as `trl-efficient
        train` builds it: `model` a Hub id, a local path (a `tiny:` or `testbed:` name once its scheme is
        registered) or a model; `kwargs` go to the trainer (`peft_config`, `eval_dataset`, ...). The model card
        names the recipe."""
        from ..core.models import load_tokenizer, resolve_model_name

        if isinstance(model, str):
            if processing_class is None:
                processing_class = load_tokenizer(model)
            model = resolve_model_name(model)
        funcs = self.reward_funcs(args, processing_class)
        trainer = self.trainer_cls(model=model, reward_funcs=funcs, args=args, train_dataset=train_dataset,
                                   processing_class=processing_class, **kwargs)  # fmt: skip
        trainer.update_card_info(recipe=self)
        return trainer


def register_recipe(recipe: Recipe) -> Recipe:
    for spec in recipe.rewards:
        REWARD_BUILDERS.get(spec.builder)  # fail at import time on a typo
    return RECIPES.register(recipe.name, recipe)


def get_recipe(name: str) -> Recipe:
    return RECIPES.get(name)


# Whole-group rewards get no num_generations here: EfficientGRPOTrainer passes each call's group size as the
# `group_size` column (num_generations in training, num_generations_eval in evaluation).
reward_builder(
    "correctness",
    R.get_correctness_reward,
    "math-verify; GSM8K `#### N`, MATH `\\boxed{}`, plain golds; answer after `</think>`",
)


@reward_builder("think_format", R.think_format_reward, "DeepSeek-R1 format", needs=())
def _build_think_format(args, **kwargs) -> Callable:
    return R.think_format_reward  # a plain reward function: nothing to build


reward_builder(
    "kimi_length",
    R.get_kimi_length_reward,
    "Kimi k1.5 §2.3.3, arXiv:2501.12599 (group min/max length)",
    whole_groups=True,
    receives=("length",),
)
reward_builder(
    "shorter_better",
    R.get_shorter_better_reward,
    "ShorterBetter, arXiv:2504.21370 (shortest correct length in the group)",
    whole_groups=True,
    receives=("length",),
)
reward_builder(
    "cosine_length",
    R.get_cosine_length_reward,
    "Yeo et al. App. C.1, arXiv:2502.03373 (wraps TRL's cosine reward, paper bounds)",
    receives=("length", "cap"),
)


@reward_builder(
    "soft_overlong",
    R.get_soft_overlong_reward,
    "DAPO soft overlong punishment, arXiv:2503.14476 (wraps TRL's)",
    needs=(),
    receives=("length",),
)
def _build_soft_overlong(args, **kw) -> Callable:
    # the cap defaults to the run's max_completion_length (a given `max_completion_len`, its deprecated name, wins)
    if kw.get("max_completion_len") is None:
        kw.setdefault("max_completion_length", args.max_completion_length)
    kw.setdefault("soft_punish_cache", max(1, args.max_completion_length // 4))
    return R.get_soft_overlong_reward(**kw)


reward_builder(
    "l1",
    R.get_l1_reward,
    "L1 / LCPO, arXiv:2503.04697 (`mode` exact or max)",
    needs=("solution", "target_length"),
    receives=("length",),
)
reward_builder("laser", R.get_laser_reward, "LASER step reward, arXiv:2505.15612", receives=("length",))
reward_builder(
    "dler_truncation",
    R.get_dler_truncation_reward,
    "DLER, arXiv:2510.15110 (x0.1 when truncated)",
    receives=("cap", "tokenizer"),
)

# ---------------------------------------------------------------------------------------------------------------------
# Recipes. Each paper-derived value cites methods.md; "proposed default" marks our own choices.


L1_EXACT_SECTION = Section(
    6, "L1 / LCPO: length-controlled policy optimization", ("cmu-l3/l1",), papers=("2503.04697",)
)  # methods.md §6, shared by l1-exact, l1-max
LASER_SECTION = Section(
    7, "LASER / LASER-D / LASER-DE: length-based step reward", ("hkust-nlp/Laser",), papers=("2505.15612",)
)  # methods.md §7, shared by laser, laser-d, laser-de

register_recipe(
    Recipe(
        name="grpo",
        section=Section(0, "GRPO (baseline)", ("huggingface/trl",), papers=("2402.03300",)),
        method="GRPO (baseline)",
        description="Plain GRPO with the correctness reward: the baseline every length method is compared against.",
        rewards=(RewardSpec("correctness"),),
    )
)
register_recipe(
    Recipe(
        name="dr-grpo",
        section=Section(32, "Dr. GRPO", ("huggingface/trl",), papers=("2503.20783",)),
        method="Dr. GRPO (TRL's dr_grpo loss, no std scaling)",
        description="Correctness reward; advantages R - mean(R) without the std division, summed token losses "
        "divided by a constant (§32).",
        rewards=(RewardSpec("correctness"),),
        # methods.md §32 [code]: TRL's loss_type="dr_grpo" (sum / (batch x max_completion_length)) and the separate
        # std switch scale_rewards="none"
        config_overrides={"loss_type": "dr_grpo", "scale_rewards": "none"},
    )
)
register_recipe(
    Recipe(
        name="kimi",
        section=Section(8, "Kimi k1.5 length penalty", ("MoonshotAI/Kimi-k1.5",), papers=("2501.12599",)),
        method="Kimi k1.5 length penalty",
        description="Correctness plus Kimi k1.5's group-relative linear length reward (methods.md §8).",
        rewards=(RewardSpec("correctness"), RewardSpec("kimi_length", weight=0.4)),
        proposed_defaults=("kimi length weight 0.4 (LASER's reimplementation)", "kimi warm-up: first 10% of max_steps"),
    )
)
register_recipe(
    Recipe(
        name="cosine",
        section=Section(
            9, "Cosine length reward (Yeo et al.)", ("eddycmu/demystify-long-cot",), papers=("2502.03373",)
        ),
        method="Cosine length reward (Yeo et al.)",
        description="Cosine-shaped correctness reward in length with the paper's bounds and over-length penalty (§9).",
        rewards=(RewardSpec("cosine_length"),),
    )
)
register_recipe(
    Recipe(
        name="l1-exact",
        section=L1_EXACT_SECTION,
        method="L1 / LCPO-Exact",
        description="One target length N ~ U{100..4000} per example in the prompt, shared by its G rollouts, and "
        "r = 1[correct] - 0.0003 |N - n| (§6).",
        rewards=(RewardSpec("l1", kwargs={"mode": "exact"}),),
        config_overrides={"rollout_plan": "target_length", "target_length_mode": "exact"},
        usage='Append " Think for N tokens." to the question, N the desired length in tokens.',
    )
)
register_recipe(
    Recipe(
        name="l1-max",
        section=L1_EXACT_SECTION,
        method="L1 / LCPO-Max",
        description="Exact/Max mixed targets; Max reward 1[correct] clip(0.001 (N - n) + 0.5, 0, 1) (§6).",
        rewards=(RewardSpec("l1", kwargs={"mode": "max"}),),
        config_overrides={"rollout_plan": "target_length", "target_length_mode": "mixed"},
        proposed_defaults=("L1-Max alpha 0.001, delta 0.5 (from the original code; the paper's alpha is unpublished)",),
        usage='Append " Think for maximum N tokens." to the question, N the token limit.',
    )
)
register_recipe(
    Recipe(
        name="laser",
        section=LASER_SECTION,
        method="LASER (length-based step reward)",
        description="Correct answers within L_T tokens earn 1 + alpha; wrong -0.5; format failure -1 (§7).",
        rewards=(RewardSpec("laser"),),
    )
)
register_recipe(
    Recipe(
        name="shorter-better",
        section=Section(11, "ShorterBetter", ("JingyangYi/ShorterBetter",), papers=("2504.21370",)),
        method="ShorterBetter",
        description="r = 2 * 1[correct] - 0.001 |L - SOL|, SOL = the group's shortest correct length (§11).",
        rewards=(RewardSpec("shorter_better"),),
    )
)
register_recipe(
    Recipe(
        name="dapo-overlong",
        section=Section(31, "DAPO soft overlong punishment", ("huggingface/trl",), papers=("2503.14476",)),
        method="DAPO soft overlong punishment",
        description="Correctness plus TRL's soft overlong punishment over the last quarter of the cap (§31).",
        rewards=(RewardSpec("correctness"), RewardSpec("soft_overlong")),
        config_overrides={"epsilon_high": 0.28, "loss_type": "dapo"},
        proposed_defaults=("soft_punish_cache = max_completion_length / 4",),
    )
)
