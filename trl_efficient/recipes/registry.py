"""The one recipe registry: recipe name -> its parts.

A `Recipe` names its reward functions (by `REWARD_BUILDERS` name) with weights and keyword arguments, the config
overrides it needs (rollout plan, advantage estimator, filter, loss settings), the papers, which of its values are
proposed defaults, and how to prompt the trained model. `configs/<recipe>.yaml` holds a runnable configuration for
each recipe; precedence is recipe overrides < YAML < command line.

Reward builders share one signature, `(args, tokenizer, **kwargs) -> reward callable`, and read shared values
(`max_completion_length`, `num_generations`, `length_unit`, `length_scope`) from the config, so each default has one
home. Each builder is registered with `register_reward_builder(name, builder, RewardInfo(...))`: the `RewardInfo`
(public factory, paper, dataset columns it needs) feeds the README's reward table (`trl-efficient recipes
--markdown`, see `tables.py`), as each `Recipe` feeds the recipe table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.registry import Registry
from ..trainer import EfficientGRPOTrainer
from .scale import DEFAULT_PAPER_CAP, RecipeScale, ScaleRule, scale_free, scale_length, scale_per_token

RECIPES: Registry = Registry("recipe")
REWARD_BUILDERS: Registry = Registry("reward builder")


@dataclass(frozen=True)
class RewardInfo:
    """What the README's reward table says about a reward builder.

    `factory`: the public callable in `trl_efficient.rewards` (or the family module) that the builder wraps;
    `paper`: the paper (arXiv id, section) and a few words on the reward; `needs`: the dataset or rollout-plan
    columns the reward reads besides the completions; `whole_groups`: the reward compares the G rollouts of a prompt.
    """

    factory: str
    paper: str
    needs: tuple[str, ...] = ("solution",)
    whole_groups: bool = False


REWARD_INFO: dict[str, RewardInfo] = {}
REWARD_RECEIVERS: dict[str, tuple[Callable, ...]] = {}  # builder name -> extra receivers of its keyword arguments


def register_reward_builder(name: str, builder, info: RewardInfo, also_receives: tuple[Callable, ...] = ()) -> Callable:
    """Register `builder` (`(args, tokenizer, **kwargs) -> reward callable`) under `name`, with its table entry.

    The builder's keyword arguments (`RewardSpec.kwargs`, the config's `reward_kwargs`) go to `info.factory`; a
    builder that hands some of them to another callable names it in `also_receives` (LASER-D's monitor). Their
    signatures are what `check_reward_kwargs` accepts."""
    REWARD_BUILDERS.register(name, builder)
    REWARD_INFO[name] = info
    REWARD_RECEIVERS[name] = tuple(also_receives)
    return builder


def reward_kwargs_receivers(name: str) -> tuple[Callable, ...]:
    """The callables that receive builder `name`'s keyword arguments: its `RewardInfo.factory`, found in
    `trl_efficient.rewards` or else in the builder's own module, then its `also_receives`."""
    import importlib

    builder, factory_name = REWARD_BUILDERS.get(name), REWARD_INFO[name].factory
    rewards = importlib.import_module("trl_efficient.rewards")
    factory = getattr(rewards, factory_name, None) or getattr(builder, "__globals__", {}).get(factory_name)
    if factory is None:  # a registration error, not a user error: the README table names this factory
        raise LookupError(f"reward builder {name!r}: factory {factory_name!r} not found in trl_efficient.rewards or "
                          f"{builder.__module__}")  # fmt: skip
    return (factory, *REWARD_RECEIVERS.get(name, ()))


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

    what = f"reward builder {name!r} ({REWARD_INFO[name].factory})"
    check_keywords(source, kwargs, reward_kwargs_receivers(name), what, skip=("tokenizer",), extra=("weight",))


@dataclass(frozen=True)
class RewardSpec:
    builder: str
    weight: float = 1.0
    kwargs: dict[str, Any] = field(default_factory=dict)


# The method families of the testbed's per-family plots and tables (`Recipe.family`).
RECIPE_FAMILIES = (
    "baselines",
    "length penalties",
    "budget / prompted",
    "adaptive / history",
    "structure / signal",
    "sampling",
)


@dataclass(frozen=True)
class Recipe:
    name: str
    method: str
    description: str
    rewards: tuple[RewardSpec, ...]
    papers: tuple[str, ...] = ()
    config_overrides: dict[str, Any] = field(default_factory=dict)
    proposed_defaults: tuple[str, ...] = ()
    usage: str = "Prompt as in training: the question followed by the instruction to put the final answer in \\boxed{}."
    trainer_cls: type = EfficientGRPOTrainer  # the trainer class; a subclass for trainer-level methods (methods/)
    prepare_dataset: Callable | None = None  # (train_dataset, args, tokenizer, **recipe_kwargs) -> train_dataset
    testbed_scale: ScaleRule | None = (
        None  # (cap, max_steps) -> RecipeScale: the recipe at the testbed's size (scale.py)
    )
    family: str = "length penalties"  # one of RECIPE_FAMILIES: the testbed's plots group recipes by it

    def __post_init__(self) -> None:
        if self.family not in RECIPE_FAMILIES:
            raise ValueError(f"recipe {self.name!r}: family must be one of {RECIPE_FAMILIES}, got {self.family!r}.")

    def apply_prepare_dataset(self, dataset, args, tokenizer, **kwargs) -> Any:
        if self.prepare_dataset is None:
            if kwargs:
                raise ValueError(f"recipe_kwargs {sorted(kwargs)} given, but recipe {self.name!r} takes none.")
            return dataset
        return self.prepare_dataset(dataset, args, tokenizer, **kwargs)

    def scale(self, cap: int, max_steps: int) -> RecipeScale:
        """This recipe at the testbed's completion cap and run length (`testbed_scale`); a recipe that declares none
        raises, naming the field, so nothing silently runs at paper scale on the testbed.

        >>> get_recipe("shorter-better").scale(192, 40).reward_kwargs
        {'shorter_better': {'beta': 0.021333333333333333}}
        """
        if self.testbed_scale is None:
            raise ValueError(f"recipe {self.name!r} declares no testbed_scale: give its Recipe(...) a testbed_scale "
                             "rule (trl_efficient/recipes/scale.py)")  # fmt: skip
        return self.testbed_scale(int(cap), int(max_steps))

    def with_reward_kwargs(self, overrides: dict | None, source: str = "reward_kwargs") -> Recipe:
        """This recipe with `{builder: {kwarg: value}}` merged over its `RewardSpec` kwargs, the one place reward
        arguments are overridden (the config's `reward_kwargs`, the testbed's scale and sweeps). The key `"weight"`
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


def register_recipe(recipe: Recipe) -> Recipe:
    for spec in recipe.rewards:
        REWARD_BUILDERS.get(spec.builder)  # fail at import time on a typo
    return RECIPES.register(recipe.name, recipe)


def get_recipe(name: str) -> Recipe:
    return RECIPES.get(name)


def _length_kwargs(args, tokenizer) -> dict:
    return {"length_unit": args.length_unit, "length_scope": args.length_scope, "tokenizer": tokenizer}


def _build_soft_overlong(args, tok, **kw) -> Callable:
    # the cap defaults to the run's max_completion_length (a given `max_completion_len`, its deprecated name, wins)
    if kw.get("max_completion_len") is None:
        kw.setdefault("max_completion_length", args.max_completion_length)
    kw.setdefault("soft_punish_cache", max(1, args.max_completion_length // 4))
    from .. import rewards as R

    return R.get_soft_overlong_reward(**_length_kwargs(args, tok), **kw)


def _register_builders() -> None:
    # Whole-group rewards get no num_generations here: EfficientGRPOTrainer passes each call's group size as the
    # `group_size` column (num_generations in training, num_generations_eval in evaluation).
    from .. import rewards as R

    register_reward_builder(
        "correctness",
        lambda args, tok, **kw: R.get_correctness_reward(**kw),
        RewardInfo(
            "get_correctness_reward",
            "math-verify; GSM8K `#### N`, MATH `\\boxed{}`, plain golds; answer after `</think>`",
        ),
    )
    register_reward_builder(
        "think_format",
        lambda args, tok, **kw: R.think_format_reward,
        RewardInfo("think_format_reward", "DeepSeek-R1 format", needs=()),
    )
    register_reward_builder(
        "kimi_length",
        lambda args, tok, **kw: R.get_kimi_length_reward(**_length_kwargs(args, tok), **kw),
        RewardInfo(
            "get_kimi_length_reward", "Kimi k1.5 §2.3.3, arXiv:2501.12599 (group min/max length)", whole_groups=True
        ),
    )
    register_reward_builder(
        "shorter_better",
        lambda args, tok, **kw: R.get_shorter_better_reward(**_length_kwargs(args, tok), **kw),
        RewardInfo(
            "get_shorter_better_reward",
            "ShorterBetter, arXiv:2504.21370 (shortest correct length in the group)",
            whole_groups=True,
        ),
    )
    register_reward_builder(
        "cosine_length",
        lambda args, tok, **kw: R.get_cosine_length_reward(
            max_completion_length=args.max_completion_length, **_length_kwargs(args, tok), **kw
        ),
        RewardInfo(
            "get_cosine_length_reward",
            "Yeo et al. App. C.1, arXiv:2502.03373 (wraps TRL's cosine reward, paper bounds)",
        ),
    )
    register_reward_builder(
        "soft_overlong",
        _build_soft_overlong,
        RewardInfo(
            "get_soft_overlong_reward", "DAPO soft overlong punishment, arXiv:2503.14476 (wraps TRL's)", needs=()
        ),
    )
    register_reward_builder(
        "l1",
        lambda args, tok, **kw: R.get_l1_reward(**_length_kwargs(args, tok), **kw),
        RewardInfo(
            "get_l1_reward", "L1 / LCPO, arXiv:2503.04697 (`mode` exact or max)", needs=("solution", "target_length")
        ),
    )
    register_reward_builder(
        "laser",
        lambda args, tok, **kw: R.get_laser_reward(**_length_kwargs(args, tok), **kw),
        RewardInfo("get_laser_reward", "LASER step reward, arXiv:2505.15612"),
    )
    register_reward_builder(
        "dler_truncation",
        lambda args, tok, **kw: R.get_dler_truncation_reward(
            max_completion_length=args.max_completion_length, tokenizer=tok, **kw
        ),
        RewardInfo("get_dler_truncation_reward", "DLER, arXiv:2510.15110 (x0.1 when truncated)"),
    )


_register_builders()

# ---------------------------------------------------------------------------------------------------------------------
# Recipes. Each paper-derived value cites methods.md; "proposed default" marks our own choices.


# ---------------------------------------------------------- testbed scale (applied by trl_efficient/testbed/scaling.py)


def _l1_scale(mode: str):
    def build(cap: int, steps: int) -> RecipeScale:
        from ..rewards.length import _L1_DEFAULT_ALPHA

        paper = 4096
        low, high = 100, 4000  # EfficientGRPOConfig.target_length_range default = the paper's U(100, 4000)
        target = [scale_length(low, cap, paper), scale_length(high, cap, paper)]
        alpha = _L1_DEFAULT_ALPHA[mode]
        name = "l1-exact" if mode == "exact" else "l1-max"
        return RecipeScale(
            name,
            f"lengths x cap/{paper}: targets U({low}, {high}) -> U({target[0]}, {target[1]}); alpha {alpha:g}/token "
            f"x {paper}/cap -> {scale_per_token(alpha, cap, paper):.4f}",
            config={"target_length_range": target},
            reward_kwargs={"l1": {"alpha": scale_per_token(alpha, cap, paper)}},
        )

    return build


def _laser_scale(cap: int, steps: int) -> RecipeScale:
    import inspect

    from ..rewards.length import get_laser_reward

    paper, target = 16384, inspect.signature(get_laser_reward).parameters["target_length"].default
    scaled = scale_length(target, cap, paper)
    return RecipeScale(
        "laser",
        f"lengths x cap/{paper} (context): L_T {target} -> {scaled}",
        reward_kwargs={"laser": {"target_length": scaled}},
    )


def _shorter_better_scale(cap: int, steps: int) -> RecipeScale:
    paper, beta = DEFAULT_PAPER_CAP, 0.001
    return RecipeScale(
        "shorter-better",
        f"per-token x {paper}/cap (no cap in methods.md; default {paper}): beta {beta:g} -> "
        f"{scale_per_token(beta, cap, paper):.4f} (a deviation of {scale_length(2000, cap, paper)} tokens cancels a "
        "correct answer, as 2000 do at paper scale)",
        reward_kwargs={"shorter_better": {"beta": scale_per_token(beta, cap, paper)}},
    )


register_recipe(
    Recipe(
        name="grpo",
        family="baselines",
        testbed_scale=scale_free("grpo", "no length constant"),
        method="GRPO (baseline)",
        description="Plain GRPO with the correctness reward: the baseline every length method is compared against.",
        rewards=(RewardSpec("correctness"),),
        papers=("2402.03300",),
    )
)
register_recipe(
    Recipe(
        name="dr-grpo",
        family="baselines",
        testbed_scale=scale_free("dr-grpo", "TRL's dr_grpo loss divides by max_completion_length (= the cap); no std"),
        method="Dr. GRPO (TRL's dr_grpo loss, no std scaling)",
        description="Correctness reward; advantages R - mean(R) without the std division, summed token losses "
        "divided by a constant (§32).",
        rewards=(RewardSpec("correctness"),),
        papers=("2503.20783",),
        # methods.md §32 [code]: TRL's loss_type="dr_grpo" (sum / (batch x max_completion_length)) and the separate
        # std switch scale_rewards="none"
        config_overrides={"loss_type": "dr_grpo", "scale_rewards": "none"},
    )
)
register_recipe(
    Recipe(
        name="kimi",
        testbed_scale=scale_free("kimi", "group min/max lengths"),
        method="Kimi k1.5 length penalty",
        description="Correctness plus Kimi k1.5's group-relative linear length reward (methods.md §8).",
        rewards=(RewardSpec("correctness"), RewardSpec("kimi_length", weight=0.4)),
        papers=("2501.12599",),
        proposed_defaults=("kimi length weight 0.4 (LASER's reimplementation)", "kimi warm-up: first 10% of max_steps"),
    )
)
register_recipe(
    Recipe(
        name="cosine",
        testbed_scale=scale_free("cosine", "cosine over max_completion_length (= the cap)"),
        method="Cosine length reward (Yeo et al.)",
        description="Cosine-shaped correctness reward in length with the paper's bounds and over-length penalty (§9).",
        rewards=(RewardSpec("cosine_length"),),
        papers=("2502.03373",),
    )
)
register_recipe(
    Recipe(
        name="l1-exact",
        family="budget / prompted",
        testbed_scale=_l1_scale("exact"),
        method="L1 / LCPO-Exact",
        description="One target length N ~ U{100..4000} per example in the prompt, shared by its G rollouts, and "
        "r = 1[correct] - 0.0003 |N - n| (§6).",
        rewards=(RewardSpec("l1", kwargs={"mode": "exact"}),),
        papers=("2503.04697",),
        config_overrides={"rollout_plan": "target_length", "target_length_mode": "exact"},
        usage='Append " Think for N tokens." to the question, N the desired length in tokens.',
    )
)
register_recipe(
    Recipe(
        name="l1-max",
        family="budget / prompted",
        testbed_scale=_l1_scale("max"),
        method="L1 / LCPO-Max",
        description="Exact/Max mixed targets; Max reward 1[correct] clip(0.001 (N - n) + 0.5, 0, 1) (§6).",
        rewards=(RewardSpec("l1", kwargs={"mode": "max"}),),
        papers=("2503.04697",),
        config_overrides={"rollout_plan": "target_length", "target_length_mode": "mixed"},
        proposed_defaults=("L1-Max alpha 0.001, delta 0.5 (from the original code; the paper's alpha is unpublished)",),
        usage='Append " Think for maximum N tokens." to the question, N the token limit.',
    )
)
register_recipe(
    Recipe(
        name="laser",
        testbed_scale=_laser_scale,
        method="LASER (length-based step reward)",
        description="Correct answers within L_T tokens earn 1 + alpha; wrong -0.5; format failure -1 (§7).",
        rewards=(RewardSpec("laser"),),
        papers=("2505.15612",),
    )
)
register_recipe(
    Recipe(
        name="shorter-better",
        testbed_scale=_shorter_better_scale,
        method="ShorterBetter",
        description="r = 2 * 1[correct] - 0.001 |L - SOL|, SOL = the group's shortest correct length (§11).",
        rewards=(RewardSpec("shorter_better"),),
        papers=("2504.21370",),
    )
)
register_recipe(
    Recipe(
        name="dapo-overlong",
        testbed_scale=scale_free("dapo-overlong", "punishment over the last cap/4 tokens"),
        method="DAPO soft overlong punishment",
        description="Correctness plus TRL's soft overlong punishment over the last quarter of the cap (§31).",
        rewards=(RewardSpec("correctness"), RewardSpec("soft_overlong")),
        papers=("2503.14476",),
        config_overrides={"epsilon_high": 0.28, "loss_type": "dapo"},
        proposed_defaults=("soft_punish_cache = max_completion_length / 4",),
    )
)
