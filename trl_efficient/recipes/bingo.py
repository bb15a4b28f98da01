"""Bingo recipe: correctness + Bingo's significance-aware, dynamic length shaping (`methods.md` §1).

Reward builder `bingo_length` -> `trl_efficient.rewards.bingo.get_bingo_length_reward`. Its values come from, in
increasing precedence: the recipe's `RewardSpec` kwargs with the config's `reward_kwargs["bingo_length"]` on top
(`Recipe.reward_kwargs`), the recipe's `recipe_kwargs` (YAML `recipe_kwargs: {...}` or `--recipe_kwargs '{...}'`,
handed over by `prepare_bingo`), and the environment (so a launch script can point any config at a scorer server):

- `TRL_EFFICIENT_BINGO_SCORER`: the scorer spec: an LLMLingua-2 checkpoint directory or Hub name (default
  `microsoft/llmlingua-2-xlm-roberta-large-meetingbank`, in-process), `self-information:<causal LM>`, or the URL of a
  `trl-efficient serve-scorer` server (`http://127.0.0.1:8765`; its token from `TRL_EFFICIENT_SCORER_TOKEN`);
- `TRL_EFFICIENT_BINGO_REFERENCE`: `model` (default) or `group`;
- `TRL_EFFICIENT_BINGO_KWARGS`: a JSON object of any other `get_bingo_length_reward` argument, e.g.
  `{"reference_samples": 2, "schedule_start": 20, "schedule_window": 5, "on_scorer_error": "fallback",
  "fallback_scorer": "/models/llmlingua-2-xlm-roberta-large-meetingbank"}`.

Values shared with the trainer come from the config: the frozen reference policy is the tokenizer's
`name_or_path` (the model directory for local and `tiny:` models; pass `reference_model` for anything else), and
reference generation uses `max_completion_length`, `temperature`, `top_p`, `top_k`, `chat_template_kwargs`,
`model_init_kwargs` and an EOS `sequence_bias` from `generation_kwargs`.

The model card states the scorer the run used and its settings, never the default's when another was given: the
built reward carries `card_settings` (`bingo_card_settings`: the scorer settings, `SCORER_SETTINGS`, with their
defaults where not given, then every other argument given) and, only for an LLMLingua-2 checkpoint scorer, the
proposed default of our LLMLingua-2 forward pass (`LLMLINGUA_PROPOSED`) as its `proposed_defaults`; `hub.card` reads
both by attribute (issue 36 item 4).

The builder checks the scorer (and `fallback_scorer`) before the policy loads (`significance.check_scorer`: the
checkpoint's `config.json` is found, locally or through the Hub cache; a server answers `/health`); a checkpoint
that cannot be found, e.g. the default one offline, is one error line naming the scorer and how to pass another.
The scorer's weights still load at the first reward call, on the process's training device.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from typing import Any

from ..rewards.bingo import get_bingo_length_reward
from ..significance.factory import ScorerNotFoundError, check_scorer
from .registry import Recipe, RewardSpec, Section, register_recipe, reward_builder

DEFAULT_SCORER = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"  # methods.md §1 [code]
SCORER_ENV = "TRL_EFFICIENT_BINGO_SCORER"
REFERENCE_ENV = "TRL_EFFICIENT_BINGO_REFERENCE"
KWARGS_ENV = "TRL_EFFICIENT_BINGO_KWARGS"
SCORER_HINT = (
    'or pass another with --recipe_kwargs \'{{"{option}": "<spec>"}}\' (or $TRL_EFFICIENT_BINGO_SCORER for the '
    "scorer): a local LLMLingua-2 checkpoint directory, 'self-information:<causal LM directory>' or the URL of a "
    "`trl-efficient serve-scorer` server (docs/bingo.md)"
)
LOAD_KEYS = ("dtype", "torch_dtype", "revision", "trust_remote_code", "attn_implementation")  # model_init_kwargs reused
# The scorer's settings, always on the model card (with their defaults when not given).
SCORER_SETTINGS = ("scorer", "scorer_kwargs", "threshold", "normalize", "scope", "fallback_scorer", "on_scorer_error")
# Objects the builder hands over (the tokenizer, a loaded model), not settings a card can show.
_NOT_SETTINGS = ("tokenizer", "device")
LLMLINGUA_PROPOSED = (
    "scorer: own LLMLingua-2 forward pass (keep probability = softmax label 1, pieces averaged into words), counts "
    "summed per response over its <=512-token chunks"
)


def bingo_overrides(args) -> dict:
    """The `bingo_length` kwargs set outside the recipe's reward spec and `reward_kwargs`: `recipe_kwargs`, then the
    environment."""
    out: dict = {}
    recipe = getattr(args, "recipe_kwargs", None) or {}  # a flat per-recipe dict, if the config has that field
    if not isinstance(recipe, dict):
        raise ValueError(f"recipe_kwargs must be a dict, got {recipe!r}.")
    out.update(recipe)
    raw = os.environ.get(KWARGS_ENV)
    if raw:
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as err:
            raise ValueError(f"{KWARGS_ENV} must be a JSON object, got {raw!r}: {err}") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"{KWARGS_ENV} must be a JSON object, got {raw!r}.")
        out.update(parsed)
    if os.environ.get(SCORER_ENV):
        out["scorer"] = os.environ[SCORER_ENV]
    if os.environ.get(REFERENCE_ENV):
        out["reference"] = os.environ[REFERENCE_ENV]
    return out


def is_llmlingua_scorer(scorer: Any) -> bool:
    """Whether a scorer spec names an LLMLingua-2 checkpoint (a directory or Hub name, run in-process), as
    `significance.build_scorer` reads specs; not a `self-information:` scorer, a server URL or a scorer object.

    >>> is_llmlingua_scorer(DEFAULT_SCORER), is_llmlingua_scorer("self-information:/m"), is_llmlingua_scorer("http://h:1")
    (True, False, False)
    """
    return isinstance(scorer, str) and not scorer.startswith(("self-information:", "http://", "https://"))


def bingo_card_settings(given: dict) -> dict:
    """The Bingo settings a run's model card shows, from the arguments given to `get_bingo_length_reward` (spec,
    `reward_kwargs`, `recipe_kwargs` and environment merged, the scorer included): the scorer settings
    (`SCORER_SETTINGS`, each argument's default when not given), then every other argument given, except the objects
    the builder hands over (tokenizer, device).

    >>> bingo_card_settings({"scorer": "self-information:/m", "threshold": 0.3, "schedule_start": 20})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'scorer': 'self-information:/m', 'scorer_kwargs': None, 'threshold': 0.3, 'normalize': 'chunk_minmax',
     'scope': 'total', 'fallback_scorer': None, 'on_scorer_error': 'raise', 'schedule_start': 20}
    """
    defaults = inspect.signature(get_bingo_length_reward).parameters
    out = {name: given.get(name, defaults[name].default) for name in SCORER_SETTINGS}
    out.update({k: v for k, v in given.items() if k not in out and k not in _NOT_SETTINGS})
    return out


@reward_builder(
    "bingo_length",
    get_bingo_length_reward,
    "Bingo, arXiv:2506.08125 (significance-aware and dynamic length shaping; needs a token-significance scorer)",
    needs=("solution", "prompts"),
    receives=("tokenizer",),
)
def build_bingo_length_reward(args, tokenizer, **kwargs) -> Callable:
    """`bingo_length` reward builder (see the module docstring for where each value comes from); the run's tokenizer
    is the reference model's when `reference` is `"model"`."""
    options = {**kwargs, **bingo_overrides(args)}
    scorer = options.pop("scorer", DEFAULT_SCORER)
    card_settings = bingo_card_settings({"scorer": scorer, **options})  # before the config's values are copied in
    if options.get("reference", "model") == "model":
        generation = dict(getattr(args, "generation_kwargs", None) or {})
        model_kwargs = dict(getattr(args, "model_init_kwargs", None) or {})
        options.setdefault("reference_model", getattr(tokenizer, "name_or_path", None) or None)
        options.setdefault("tokenizer", tokenizer)
        options.setdefault("max_new_tokens", args.max_completion_length)
        options.setdefault("temperature", args.temperature)
        options.setdefault("top_p", args.top_p)
        options.setdefault("top_k", args.top_k or None)
        options.setdefault("chat_template_kwargs", getattr(args, "chat_template_kwargs", None))
        options.setdefault("reference_model_kwargs", {k: v for k, v in model_kwargs.items() if k in LOAD_KEYS})
        if "sequence_bias" in generation:
            options.setdefault("generation_kwargs", {"sequence_bias": generation["sequence_bias"]})
        options.setdefault("seed", args.seed)
    reward = get_bingo_length_reward(scorer, **options)
    reward.card_settings = card_settings  # read by hub.card (the model card): what this run's reward uses
    reward.proposed_defaults = (LLMLINGUA_PROPOSED,) if is_llmlingua_scorer(scorer) else ()
    # Fail here, before the policy loads, not at the first reward call minutes later: a checkpoint that cannot be
    # found (offline, typo) or a server that does not answer, each named as Bingo's scorer.
    for option, spec in (("scorer", scorer), ("fallback_scorer", options.get("fallback_scorer"))):
        try:
            check_scorer(spec)
        except ScorerNotFoundError as err:
            label = "significance" if option == "scorer" else "fallback significance"
            raise ScorerNotFoundError(f"Bingo's {label} {err}; {SCORER_HINT.format(option=option)}") from err
    if isinstance(scorer, str) and scorer.startswith(("http://", "https://")):
        reward.scorer.health()  # fail before training when the scorer server is unreachable
    return reward


def prepare_bingo(train_dataset, args, tokenizer, **recipe_kwargs) -> Any:
    """`prepare_dataset` hook of the recipe: `recipe_kwargs` (YAML or `--recipe_kwargs '{...}'`) are arguments of
    `get_bingo_length_reward` (`scorer`, `reference`, `schedule_start`, ...). They are checked here, before any model
    is loaded, and handed to the `bingo_length` builder as `args.recipe_kwargs`. The dataset is returned unchanged."""
    import inspect

    allowed = set(inspect.signature(get_bingo_length_reward).parameters)
    unknown = sorted(set(recipe_kwargs) - allowed)
    if unknown:
        raise ValueError(
            f"recipe_kwargs {unknown} are not arguments of get_bingo_length_reward; valid: {sorted(allowed)}."
        )
    args.recipe_kwargs = dict(recipe_kwargs)
    return train_dataset


register_recipe(
    Recipe(
        name="bingo",
        section=Section(
            1,
            "Bingo: significance-aware and dynamic length reward",
            ("microsoft/Bingo", "microsoft/LLMLingua"),
            papers=("2506.08125",),
        ),
        method="Bingo (significance-aware and dynamic length reward)",
        description=(
            "Correctness + Bingo shaping: correct answers lose reward for insignificant tokens (by the run's "
            "token-significance scorer) beyond a cached frozen-policy reference; wrong answers' significant-length "
            "coefficient follows the training-accuracy slope (§1)."
        ),
        # total = 1[correct] + shaping = Bingo's R (correct in [1, 6], wrong <= 0)
        rewards=(RewardSpec("correctness"), RewardSpec("bingo_length")),
        dataset_hook=prepare_bingo,
        proposed_defaults=(
            "GRPO group advantages instead of PPO + GAE (the shaped reward is sequence-level)",
            "reference: K=4 responses of the frozen initial policy per prompt, generated once and cached (the paper "
            "samples one per prompt per step); reference='group' uses the group's own mean instead",
            "schedule steps count training generation batches; accuracy from the gathered batch",
        ),
    )
)
