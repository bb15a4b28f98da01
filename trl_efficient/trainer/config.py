"""`EfficientGRPOConfig`: `GRPOConfig` plus the efficient-reasoning options. Every new field is off by default, and
with all of them off `EfficientGRPOTrainer` behaves exactly like TRL's `GRPOTrainer`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from trl import GRPOConfig

from ..core.checks import check_keywords
from ..core.lengths import LENGTH_SCOPES, LENGTH_UNITS
from ..prompts import HBPO_TEMPLATE
from .advantages import ADVANTAGE_ESTIMATORS, TRL_DEFAULT
from .budget_forcing import BudgetForcing
from .chunking import check_generation_chunking
from .filters import COMPLETION_FILTERS
from .lisa import check_lisa_config
from .prompt_samplers import PROMPT_SAMPLERS
from .reference import check_reference_reset
from .rollout import BUDGET_PLACEMENTS, ROLLOUT_PLANS, RolloutPlan, TargetLengthRolloutPlan

logger = logging.getLogger(__name__)


# The methods' estimators, plans, filters and samplers: each registry imports its provider (`trl_efficient.methods`,
# every module of it) on the first lookup that misses, so a name is known however this class was imported, and an
# unknown name's error lists every registered one (issue 46; `core.registry.Registry`).
_METHODS_HINT = " (registered by the modules of trl_efficient.methods)"


@dataclass
class EfficientGRPOConfig(GRPOConfig):
    r"""
    Configuration for [`EfficientGRPOTrainer`]: `GRPOConfig` plus the fields below, each described by its `help`
    (`trl-efficient train --help`). What the help leaves out:

    - rollout plan (hook (a); `rollout_plan` another name registered in `ROLLOUT_PLANS` is built with its
      `from_config(args)`, which reads `rollout_plan_kwargs`): `budgets`, `budget_placement`, `budget_template`,
      `budget_hard_cap`; `target_length_range`, `target_length_mode`, `target_length_per` (`"prompt"`, L1's choice,
      keeps an example's target in every step and epoch);
    - rewards: `reward_kwargs`, `{builder name: {keyword: value}}`, applied by `Recipe.build_reward_funcs`;
    - group stage: `advantage_estimator` / `advantage_kwargs`, `completion_filter` / `filter_kwargs`,
      `correctness_reward` (`None` picks the first of `correctness_reward`, `accuracy_reward`,
      `reasoning_accuracy_reward`), `track_prompt_history`;
    - prompt sampling: `prompt_sampler` / `sampler_kwargs` (`"repeat"`: TRL's sequence with exact resume across
      epochs, where TRL's own sampler, rebuilt on resume, replays epoch 0's permutation);
    - generation: `budget_forcing` (s1, `trainer/budget_forcing.py`), `generation_chunk_size` (`trainer/chunking.py`:
      generation memory scales with it rather than with `num_generations`, BroRL's N = 512); transformers only;
    - layer sampling (LISA, Pan et al., arXiv 2403.17919, NeurIPS 2024; `trainer/lisa.py`; LMFlow's option names):
      `lisa_activated_layers` (gamma), `lisa_interval_steps` (K, LMFlow's default 20);
    - lengths: `length_unit`, `length_scope`, for the length rewards built by recipes;
    - reference resets (ProRL, `trainer/reference.py`; need `beta > 0`, exclusive with TRL's `sync_ref_model`):
      `ref_reset_steps` (a multiple of the optimizer steps between TRL's generations), `ref_reset_metric` (a plateau
      resets at the next generation boundary), `ref_reset_mode`, `ref_reset_patience` (3, proposed),
      `ref_reset_min_delta` (0.0, proposed), `ref_reset_optimizer` (True, as ProRL does).
    """

    rollout_plan: str | None = field(
        default=None, metadata={"help": "Per-rollout prompt plan: 'budget', 'target_length' or None (off)."}
    )
    budgets: list[int] | None = field(
        default=None,
        metadata={"help": "Token budgets, one contiguous subgroup of rollouts each (num_generations must divide)."},
    )
    budget_placement: str = field(
        default="prefill",
        metadata={"help": "Where the budget statement goes.", "choices": list(BUDGET_PLACEMENTS)},
    )
    budget_template: str = field(
        default=HBPO_TEMPLATE,
        metadata={"help": "Budget statement; '{budget}' is replaced by the subgroup's budget in tokens."},
    )
    budget_hard_cap: bool = field(
        default=False, metadata={"help": "Cut each rollout at its budget (tokens) after generation."}
    )
    target_length_range: list[int] = field(
        default_factory=lambda: [100, 4000],
        metadata={"help": "[low, high] range (tokens) for L1 target lengths."},
    )
    target_length_mode: str = field(
        default="exact", metadata={"help": "L1 instruction type.", "choices": list(TargetLengthRolloutPlan.MODES)}
    )
    target_length_per: str = field(
        default="prompt",
        metadata={
            "help": "'prompt': one L1 target per example, shared by its G rollouts, the same every step (the paper's "
            "choice); 'rollout': one per rollout, redrawn each step.",
            "choices": list(TargetLengthRolloutPlan.PER),
        },
    )
    advantage_estimator: str = field(
        default=TRL_DEFAULT,
        metadata={"help": "'grpo' keeps TRL's own advantages; otherwise a registered estimator name."},
    )
    completion_filter: str | None = field(
        default=None, metadata={"help": "Registered completion filter that masks rows out of the loss (or None)."}
    )
    # JSON objects on the command line: parsed in __post_init__ through GRPOConfig's _VALID_DICT_FIELDS.
    _OWN_DICT_FIELDS = ("advantage_kwargs", "filter_kwargs", "rollout_plan_kwargs", "sampler_kwargs", "reward_kwargs")
    _VALID_DICT_FIELDS = GRPOConfig._VALID_DICT_FIELDS + list(_OWN_DICT_FIELDS)

    advantage_kwargs: dict | str | None = field(
        default=None, metadata={"help": "Keyword arguments for the advantage estimator (a JSON object on the CLI)."}
    )
    rollout_plan_kwargs: dict | str | None = field(
        default=None,
        metadata={"help": "Settings of a rollout plan without dedicated fields (a JSON object on the CLI)."},
    )
    reward_kwargs: dict | str | None = field(
        default=None,
        metadata={"help": 'Recipe reward arguments by builder name, e.g. {"laser_d": {"monitor_interval": 10}}.'},
    )
    filter_kwargs: dict | str | None = field(
        default=None, metadata={"help": 'Keyword arguments for the completion filter, e.g. {"k": 8} for shortest_k.'}
    )
    prompt_sampler: str | None = field(
        default=None,
        metadata={
            "help": "Registered prompt sampler ('repeat', 'lspo', 'frugal') for each batch's prompts; None = TRL's."
        },
    )
    sampler_kwargs: dict | str | None = field(
        default=None, metadata={"help": "Keyword arguments for the prompt sampler (a JSON object on the CLI)."}
    )
    correctness_reward: str | None = field(
        default=None, metadata={"help": "Reward function name used as correctness in metrics and group stats."}
    )
    track_prompt_history: bool = field(
        default=False, metadata={"help": "Keep per-prompt history (needs an `idx` column), saved in checkpoints."}
    )
    budget_forcing: str | None = field(
        default=None,
        metadata={
            "help": "s1 budget forcing of training rollouts: 'force:B' (close the thinking at B tokens) or 'wait:N' "
            "(replace an early end of thinking by 'Wait' N times); inserted tokens leave the loss. None = off."
        },
    )
    generation_chunk_size: int | None = field(
        default=None,
        metadata={"help": "Rows per call of TRL's generation (transformers path): each process's rows of a generation "
                  "batch are generated this many at a time, for groups of hundreds (BroRL). None = one call."},
    )  # fmt: skip
    lisa_activated_layers: int | None = field(
        default=None,
        metadata={"help": "LISA (arXiv 2403.17919): decoder layers trained at a time (gamma), redrawn every "
                  "lisa_interval_steps optimizer steps; embeddings and head always train. None = full fine-tuning."},
    )  # fmt: skip
    lisa_interval_steps: int = field(
        default=20, metadata={"help": "LISA: optimizer steps between two draws of the active layers (K)."}
    )
    length_unit: str = field(
        default="tokens", metadata={"help": "Length unit of length rewards.", "choices": list(LENGTH_UNITS)}
    )
    length_scope: str = field(
        default="total",
        metadata={"help": "Which part of the completion length rewards measure.", "choices": list(LENGTH_SCOPES)},
    )
    # Reference resets (ProRL, trainer/reference.py): TRL's reference model hard-reset to the policy.
    ref_reset_steps: int | None = field(
        default=None,
        metadata={"help": "Hard-reset the reference model (KL term, beta > 0) to the policy every N optimizer steps, "
                  "with the optimizer state (ProRL). None = off."},
    )  # fmt: skip
    ref_reset_metric: str | None = field(
        default=None,
        metadata={"help": "Logged metric whose plateau triggers a reference reset, e.g. 'eval_reward' or 'reward'. "
                  "None = off."},
    )  # fmt: skip
    ref_reset_mode: str = field(
        default="max",
        metadata={"help": "Whether ref_reset_metric improves upward or downward.", "choices": ["max", "min"]},
    )
    ref_reset_patience: int = field(
        default=3,
        metadata={"help": "Logged values of ref_reset_metric in a row without improvement that make a plateau."},
    )
    ref_reset_min_delta: float = field(
        default=0.0, metadata={"help": "Smallest change of ref_reset_metric over its best that counts as improvement."}
    )
    ref_reset_optimizer: bool = field(
        default=True, metadata={"help": "Also clear the optimizer state (Adam moments) at each reference reset."}
    )

    def __getstate__(self) -> dict:
        """Pickled copies (`training_args.bin` in the output directory and in every checkpoint, which
        `Trainer.push_to_hub` uploads) never hold the Hub token: transformers pickles the whole config."""
        state = self.__dict__.copy()
        for name in ("hub_token", "push_to_hub_token"):
            if state.get(name) is not None:
                state[name] = None
        return state

    def __post_init__(self) -> None:
        # Own fields first: nothing here depends on values GRPOConfig derives.
        self._check_json_fields()
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(
                f"max_steps must be a positive number of optimizer steps, or -1 to train for num_train_epochs, got "
                f"{self.max_steps}."
            )
        self._check_registered("rollout_plan", ROLLOUT_PLANS)
        if self.advantage_estimator != TRL_DEFAULT and self.advantage_estimator not in ADVANTAGE_ESTIMATORS:
            raise ValueError(
                f"advantage_estimator must be {TRL_DEFAULT!r} or one of {ADVANTAGE_ESTIMATORS.names()}, "
                f"got {self.advantage_estimator!r}{_METHODS_HINT}."
            )
        self._check_registered("completion_filter", COMPLETION_FILTERS)
        self._check_registered("prompt_sampler", PROMPT_SAMPLERS)
        if self.length_unit not in LENGTH_UNITS:
            raise ValueError(f"length_unit must be one of {list(LENGTH_UNITS)}, got {self.length_unit!r}.")
        if self.length_scope not in LENGTH_SCOPES:
            raise ValueError(f"length_scope must be one of {list(LENGTH_SCOPES)}, got {self.length_scope!r}.")
        if self.rollout_plan == "budget" and not self.budgets:
            raise ValueError("rollout_plan='budget' needs `budgets`, e.g. budgets: [512, 1024, 2048, 2560].")
        if self.budgets is not None and any(int(b) <= 0 for b in self.budgets):
            raise ValueError(f"budgets must be positive token counts, got {self.budgets}.")
        if self.reward_kwargs is not None and not isinstance(self.reward_kwargs, (dict, str)):
            raise ValueError(f"reward_kwargs must be a mapping of builder name -> kwargs, got {self.reward_kwargs!r}.")
        check_budget_forcing(self)
        check_lisa_config(self)
        if len(self.target_length_range) != 2:
            raise ValueError(f"target_length_range must be [low, high], got {self.target_length_range}.")
        if getattr(self, "activation_checkpointing", False) is None and self.gradient_checkpointing is True:
            self.activation_checkpointing = True  # GRPOConfig's own default under its new name: no FutureWarning
        try:
            super().__post_init__()
        except ValueError as err:  # TRL's "generation_batch_size (8) must be divisible by num_generations (512)"
            raise group_batch_error(self, err) from err
        # Cross-field checks after GRPOConfig has derived its values.
        if self.lisa_activated_layers is not None:  # frozen layers have no gradient: DDP must not wait for one
            if self.ddp_find_unused_parameters is False:
                raise ValueError(
                    f"lisa_activated_layers={self.lisa_activated_layers} freezes layers, which DDP then finds without "
                    "gradients: set ddp_find_unused_parameters to True (or leave it unset)."
                )
            self.ddp_find_unused_parameters = True
        if self.rollout_plan is None and self.rollout_plan_kwargs:
            raise ValueError(
                f"rollout_plan_kwargs={self.rollout_plan_kwargs} is set but rollout_plan is None: set rollout_plan "
                f"(one of {ROLLOUT_PLANS.names()}) or drop rollout_plan_kwargs."
            )
        plan = build_rollout_plan(self)
        if plan is not None:
            plan.validate(self.num_generations, self.max_completion_length)
            if self.num_generations_eval is not None:
                plan.validate(self.num_generations_eval, self.max_completion_length)
            warn_lengths_over_cap(
                plan.token_lengths(), self.max_completion_length, f"rollout_plan={self.rollout_plan!r}"
            )
        # reward_kwargs: each builder's names are checked against its factory's signature by the recipe that uses
        # them (`recipes.Recipe.with_reward_kwargs`, which `trl-efficient train` runs as it builds this config);
        # the trainer layer does not import the recipe layer.
        if self.reward_kwargs and not isinstance(self.reward_kwargs, dict):
            raise ValueError(f"reward_kwargs must map builder names to dicts of arguments, got {self.reward_kwargs!r}.")
        # Build the estimator and filter once so their own argument checks fail at config time.
        if self.advantage_estimator != TRL_DEFAULT:
            build_group_component(
                ADVANTAGE_ESTIMATORS.get(self.advantage_estimator), self, self.advantage_kwargs, "advantage_kwargs"
            )
        if self.prompt_sampler is not None:
            sampler = PROMPT_SAMPLERS.get(self.prompt_sampler)
            what = f"prompt_sampler={self.prompt_sampler!r}"
            check_keywords("sampler_kwargs", dict(self.sampler_kwargs or {}), [sampler.check], what, skip=("args",))
            try:
                sampler.check(self, **dict(self.sampler_kwargs or {}))
            except TypeError as err:
                raise ValueError(
                    f"sampler_kwargs={self.sampler_kwargs} does not fit {sampler.__name__}: {err}"
                ) from err
        if self.completion_filter is not None:
            build_group_component(
                COMPLETION_FILTERS.get(self.completion_filter), self, self.filter_kwargs, "filter_kwargs"
            )
        check_reference_reset(self)
        check_generation_chunking(self)

    def _check_registered(self, name: str, registry) -> None:
        value = getattr(self, name)
        if value is not None and value not in registry:
            raise ValueError(f"{name} must be one of {registry.names()} or None, got {value!r}{_METHODS_HINT}.")

    def _check_json_fields(self) -> None:
        """A dict field given as text (the command line) must be a JSON object; the error names the field.
        GRPOConfig parses `{...}` strings itself (with no field name in its error); a string that does not start
        with `{` is left alone there, which only TRL's fields may be (e.g. `deepspeed`, a path)."""
        for name in self._VALID_DICT_FIELDS:
            value = getattr(self, name, None)
            if not isinstance(value, str):
                continue
            if value.lstrip().startswith("{"):
                try:
                    parsed = json.loads(value)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{name} must be a JSON object, got {value!r}: {err}") from err
                if not isinstance(parsed, dict):
                    raise ValueError(f"{name} must be a JSON object, got {value!r}.")
            elif name in self._OWN_DICT_FIELDS:
                raise ValueError(f"{name} must be a JSON object such as '{{\"key\": 1}}', got {value!r}.")


def warn_lengths_over_cap(lengths: dict[str, list[int]], max_completion_length: int, owner: str) -> None:
    """One warning line for the token lengths (budgets, targets...) that `owner` declares above the completion cap:
    a rollout is cut at `max_completion_length` tokens, so it can never reach them."""
    over = {name: [v for v in values if v > max_completion_length] for name, values in lengths.items()}
    over = {name: values for name, values in over.items() if values}
    if over:
        listed = "; ".join(f"{name} {values}" for name, values in over.items())
        logger.warning(
            "%s uses lengths above max_completion_length=%d tokens (%s): completions are cut at %d tokens and "
            "never reach them; lower them or raise max_completion_length.",
            owner, max_completion_length, listed, max_completion_length,
        )  # fmt: skip


def group_batch_error(args, err: ValueError) -> ValueError:
    """TRL's refusal of a generation batch that does not hold whole groups, reworded with the values to set (other
    errors unchanged).

    >>> from types import SimpleNamespace as A
    >>> a = A(num_generations=512, generation_batch_size=8, per_device_train_batch_size=4, world_size=1,
    ...       gradient_accumulation_steps=2, steps_per_generation=2)
    >>> print(group_batch_error(a, ValueError("generation_batch_size (8) must be divisible by num_generations (512)")))
    ... # doctest: +ELLIPSIS
    num_generations=512 rollouts ... 8 rows is not a multiple of 512: set --gradient_accumulation_steps 128 ...
    """
    if "must be divisible by num_generations" not in str(err):
        return err
    import math

    n, rows, per = int(args.num_generations), int(args.generation_batch_size), int(args.per_device_train_batch_size)
    procs = max(int(getattr(args, "world_size", 1) or 1), 1)
    accumulation = math.lcm(n, per * procs) // (per * procs)
    divisor = max((d for d in range(2, min(n, rows) + 1) if rows % d == 0), default=None)
    fewer = f", or --num_generations {divisor}" if divisor else ""
    return ValueError(
        f"num_generations={n} rollouts per prompt need whole groups in every generation batch, but "
        f"per_device_train_batch_size {per} x {procs} process(es) x steps_per_generation {args.steps_per_generation} "
        f"= {rows} rows is not a multiple of {n}: set --gradient_accumulation_steps {accumulation} (or a larger "
        f"per_device_train_batch_size; steps_per_generation follows gradient_accumulation_steps unless set){fewer}."
    )


def check_budget_forcing(args) -> BudgetForcing | None:
    """Parse `args.budget_forcing` (`None` when off); a one-line error naming the field for a bad value or a
    generation path it does not support (vLLM, transformers continuous batching)."""
    spec = getattr(args, "budget_forcing", None)
    try:
        forcing = BudgetForcing.parse(spec)
    except ValueError as err:
        raise ValueError(f"budget_forcing={spec!r}: use 'force:<B>' or 'wait:<N>' with a positive integer.") from err
    if forcing is None:
        return None
    max_len = getattr(args, "max_completion_length", None)
    if forcing.kind == "force" and max_len is not None and forcing.value >= max_len:
        raise ValueError(
            f"budget_forcing={spec!r} never forces with max_completion_length={max_len}: use a budget B below it."
        )
    if getattr(args, "use_vllm", False):
        raise ValueError(
            f"budget_forcing={spec!r} is transformers-only for now (multi-phase generation from extended prefixes): "
            "set use_vllm=False or budget_forcing=None."
        )
    if getattr(args, "use_transformers_continuous_batching", False) or getattr(args, "use_transformers_paged", False):
        raise ValueError(
            f"budget_forcing={spec!r} needs plain transformers generate: set "
            "use_transformers_continuous_batching=False or budget_forcing=None."
        )
    return forcing


def build_rollout_plan(args) -> RolloutPlan | None:
    """The plan named by `args.rollout_plan`, built by its registry entry's `from_config(args)`, or `None`."""
    name = getattr(args, "rollout_plan", None)
    if name is None:
        return None
    return ROLLOUT_PLANS.get(name).from_config(args)


def build_group_component(entry, args, kwargs: dict | None, field_name: str = "kwargs") -> Callable:
    """Instantiate a registry entry of the group stage.

    A *class* entry is built as `entry(args, **kwargs)` (it may keep state: then it is checkpointed); a *function*
    entry `fn(batch, **kwargs)` is bound to its kwargs. Either way the result is a callable `(batch) -> tensor`.
    """
    import functools
    import inspect

    kwargs = dict(kwargs or {})
    first = next(iter(inspect.signature(entry).parameters), None)  # `args` of a class, `batch` of a function
    check_keywords(field_name, kwargs, [entry], getattr(entry, "__name__", str(entry)), skip=(first,))
    try:
        if inspect.isclass(entry):
            return entry(args, **kwargs)
        inspect.signature(entry).bind(None, **kwargs)  # reject unknown keywords at config time
    except TypeError as err:
        raise ValueError(f"{field_name}={kwargs} does not fit {getattr(entry, '__name__', entry)}: {err}") from err
    return functools.partial(entry, **kwargs)
