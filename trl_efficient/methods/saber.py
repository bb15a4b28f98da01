r"""
SABER: Switchable and Balanced Training for Efficient LLM Reasoning (Zhao et al., arXiv 2508.10026; methods.md §3).

**No public code exists, and the paper's tier boundaries, system prompts, mode map, no-think ratio and reward are
not published.** Everything below implements methods.md's *proposed defaults*; each is a parameter, and the recipe
lists them in its `proposed_defaults` (printed in the model card).

Pipeline:

1. **Profile** the base model on every training example (`trl-efficient profile`, `profile_main`): record the
   thinking-token count `t_base` (tokens up to and including `</think>`) and whether it answered correctly, one
   JSON object per example (JSONL, or a JSON list for a `.json` path).
2. **Tier** each example (`assign_tier`, `plan_saber_rows`): its budget `B` is the smallest tier of
   `tiers` (default 128 / 4096 / 16384) that is `>= t_base`; above the largest tier, no limit. Base-correct examples
   keep `B` and get the overshoot penalty; base-wrong ones keep `B` without penalty or get no limit, 50/50 (a seeded
   draw per question, fixed for the run). A fraction `no_think_ratio` (default 10%) of the examples become NoThink.
3. **Prompt** each example with its mode's system prompt (`saber_system_prompt`) and add the per-row columns
   `saber_mode`, `saber_budget`, `saber_base_tokens`, `saber_base_correct`, `saber_penalize`
   (`apply_saber_profile`; the recipe hook is `prepare_dataset`).
4. **Reward**: `trl_efficient.rewards.budget.get_saber_reward` (tier-aware thinking-length reward).

At inference, the four modes are the four system prompts of `saber_mode_prompts()`: NoThink, FastThink (128),
CoreThink (4096), DeepThink (16384).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import sys
from dataclasses import dataclass, field

import datasets
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import TrlParser

from ..core.answers import is_correct
from ..core.checks import check_writable
from ..core.errors import CommandParser, UserError
from ..core.lengths import THINK_CLOSE, LengthMeter, completion_text
from ..core.models import resolve_model_name
from ..data.loaders import DataArguments, load_datasets
from ..eval.evaluate import TransformersBackend  # the one batched, seeded transformers generation loop
from ..prompts import BUDGET_PROMPT, NO_THINK_PROMPT, SABER_TIERS, UNLIMITED_PROMPT, saber_system_prompt, validate_tiers
from ..testing.tiny import eos_bias_generation_kwargs
from ..trainer.rollout import RolloutAssignment, apply_assignment

logger = logging.getLogger(__name__)

__all__ = [
    "SABER_NO_THINK_RATIO_ENV",
    "SABER_PROFILE_ENV",
    "SABER_TIERS_ENV",
    "ProfileArguments",
    "apply_saber_profile",
    "assign_tier",
    "load_profile",
    "plan_saber_rows",
    "prepare_dataset",
    "profile_dataset",
    "profile_main",
    "question_key",
    "write_profile",
]

# Proposed defaults (methods.md §3); the paper publishes none of these.
BASE_WRONG_UNLIMITED = 0.5  # share of base-wrong examples that get no limit [secondary]
NO_THINK_RATIO = 0.1

SABER_PROFILE_ENV = "TRL_EFFICIENT_SABER_PROFILE"
SABER_TIERS_ENV = "TRL_EFFICIENT_SABER_TIERS"
SABER_NO_THINK_RATIO_ENV = "TRL_EFFICIENT_SABER_NO_THINK_RATIO"
JOIN_KEYS = ("question", "idx")
UNMATCHED_POLICIES = ("error", "unlimited", "drop")


def assign_tier(thinking_tokens: int, truncated: bool, tiers=SABER_TIERS) -> int | None:
    """The smallest tier `>= thinking_tokens` (`None`: no limit, above the largest tier).

    A truncated profile only gives a lower bound, so it needs a tier strictly above its length.

    >>> assign_tier(100, False), assign_tier(128, False), assign_tier(129, False), assign_tier(20000, False)
    (128, 128, 4096, None)
    >>> assign_tier(4096, True), assign_tier(16384, True)
    (16384, None)
    """
    for tier in tiers:
        if thinking_tokens < tier or (thinking_tokens == tier and not truncated):
            return int(tier)
    return None


def _unit_draw(*parts) -> float:
    """A uniform number in [0, 1) that depends only on `parts` (stable across processes and Python runs)."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def plan_saber_rows(
    records: list[dict],
    tiers=SABER_TIERS,
    base_wrong_unlimited: float = BASE_WRONG_UNLIMITED,
    no_think_ratio: float = NO_THINK_RATIO,
    seed: int = 0,
) -> list[dict]:
    """SABER columns for each profiled example (proposed defaults, methods.md §3).

    Each record needs `thinking_tokens`, `correct`, optionally `truncated` and a key (`question`, else its position).
    Draws are seeded hashes of `(seed, question)`, so the plan does not depend on row order. Exactly
    `round(no_think_ratio * len(records))` examples become NoThink.

    >>> recs = [{"question": "a", "thinking_tokens": 90, "correct": True},
    ...         {"question": "b", "thinking_tokens": 3000, "correct": True},
    ...         {"question": "c", "thinking_tokens": 90000, "correct": True}]
    >>> [(r["saber_mode"], r["saber_budget"], r["saber_penalize"]) for r in plan_saber_rows(recs, no_think_ratio=0)]
    [('budget', 128, True), ('budget', 4096, True), ('unlimited', -1, False)]
    """
    tiers = validate_tiers(tiers)
    if not 0.0 <= base_wrong_unlimited <= 1.0:
        raise ValueError(f"base_wrong_unlimited must be in [0, 1], got {base_wrong_unlimited!r}.")
    if not 0.0 <= no_think_ratio < 1.0:
        raise ValueError(f"no_think_ratio must be in [0, 1), got {no_think_ratio!r}.")
    keys = [str(r.get("question", i)) for i, r in enumerate(records)]
    planned = []
    for key, rec in zip(keys, records, strict=True):
        t_base = int(rec.get("thinking_tokens", -1))
        correct = bool(rec.get("correct", False))
        tier = assign_tier(t_base, bool(rec.get("truncated", False)), tiers) if t_base >= 0 else None
        if tier is not None and not correct and _unit_draw(seed, "unlimited", key) < base_wrong_unlimited:
            tier = None
        planned.append(
            {
                "saber_mode": "budget" if tier is not None else "unlimited",
                "saber_budget": tier if tier is not None else -1,
                "saber_base_tokens": t_base,
                "saber_base_correct": correct,
                "saber_penalize": tier is not None and correct,
            }
        )
    k = round(no_think_ratio * len(records))
    for i in sorted(range(len(records)), key=lambda i: (_unit_draw(seed, "nothink", keys[i]), i))[:k]:
        planned[i].update(saber_mode="nothink", saber_budget=0, saber_penalize=False)
    return planned


def question_key(prompt) -> str:
    """Join key of an example: the content of its last user message (or the prompt string), stripped.

    >>> question_key([{"role": "system", "content": "s"}, {"role": "user", "content": " 2+2? "}])
    '2+2?'
    """
    if isinstance(prompt, str):
        return prompt.strip()
    users = [m for m in prompt if m.get("role") == "user"]
    return completion_text(users[-1:] or list(prompt)).strip()


def write_profile(records: list[dict], path: str) -> str:
    """Write profile records as JSONL (one object per line), or as a JSON list when `path` ends with `.json`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        if path.endswith(".json"):
            json.dump(records, f, indent=1)
        else:
            for rec in records:
                f.write(json.dumps(rec) + "\n")
    return path


def load_profile(path: str) -> list[dict]:
    """Read a profile written by `write_profile` (`.json` list, or JSONL)."""
    with open(path) as f:
        if path.endswith(".json"):
            records = json.load(f)
        else:
            records = [json.loads(line) for line in f if line.strip()]
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{path} is not a SABER profile (a list of objects, or JSON lines).")
    for rec in records:
        missing = {"thinking_tokens", "correct"} - set(rec)
        if missing:
            raise ValueError(f"{path}: profile record {rec!r} lacks {sorted(missing)}; run `trl-efficient profile`.")
    return records


def apply_saber_profile(
    dataset,
    profile,
    tiers=SABER_TIERS,
    base_wrong_unlimited: float = BASE_WRONG_UNLIMITED,
    no_think_ratio: float = NO_THINK_RATIO,
    seed: int = 0,
    join_on: str = "question",
    unmatched: str = "error",
    budget_prompt: str = BUDGET_PROMPT,
    unlimited_prompt: str = UNLIMITED_PROMPT,
    no_think_prompt: str = NO_THINK_PROMPT,
) -> datasets.Dataset:
    """Join a profile onto `dataset` and give every example its SABER mode, system prompt and columns.

    Args:
        dataset (`datasets.Dataset`): with `prompt` (conversational or string) and, for `join_on="idx"`, `idx`.
        profile (`str` or `list[dict]`): a profile path (`load_profile`) or its records.
        tiers, base_wrong_unlimited, no_think_ratio, seed: see `plan_saber_rows`.
        join_on (`str`, *optional*, defaults to `"question"`): match rows to records by the question text
            (`question_key`; robust to subsets and reordering) or by `idx` (only valid for the same dataset build).
        unmatched (`str`, *optional*, defaults to `"error"`): a row without a record raises (`"error"`), is trained
            without a limit and without the guard (`"unlimited"`), or is removed (`"drop"`).
        budget_prompt, unlimited_prompt, no_think_prompt: system prompt templates (`{budget}` in tokens).

    Returns the dataset with the system prompt added to `prompt` and the columns `saber_mode` (`"budget"`,
    `"unlimited"`, `"nothink"`), `saber_budget` (tokens; -1 unlimited, 0 NoThink), `saber_base_tokens` (-1 unknown),
    `saber_base_correct` and `saber_penalize`.
    """
    if join_on not in JOIN_KEYS:
        raise ValueError(f"join_on must be one of {JOIN_KEYS}, got {join_on!r}.")
    if unmatched not in UNMATCHED_POLICIES:
        raise ValueError(f"unmatched must be one of {UNMATCHED_POLICIES}, got {unmatched!r}.")
    if "{budget}" not in budget_prompt:
        raise ValueError(f"budget_prompt must contain '{{budget}}', got {budget_prompt!r}.")
    records = load_profile(profile) if isinstance(profile, str) else list(profile)
    if join_on == "idx" and "idx" not in dataset.column_names:
        raise ValueError("join_on='idx' needs an `idx` column in the dataset; use join_on='question'.")
    index: dict = {}
    for rec in records:
        key = rec.get("idx") if join_on == "idx" else rec.get("question")
        if key is None:
            raise ValueError(f"profile record lacks {join_on!r}, needed for join_on={join_on!r}: {rec!r}")
        index[int(key) if join_on == "idx" else str(key).strip()] = rec
    questions = [question_key(p) for p in dataset["prompt"]]
    keys = [int(i) for i in dataset["idx"]] if join_on == "idx" else questions
    missing = [i for i, k in enumerate(keys) if k not in index]
    if missing and unmatched == "error":
        raise ValueError(
            f"{len(missing)} of {len(keys)} training examples have no profile record (joined on {join_on}; first: "
            f"{keys[missing[0]]!r}). Profile the same dataset with `trl-efficient profile`, or pass "
            "unmatched='unlimited' or 'drop'."
        )
    if missing:
        logger.warning(
            "SABER: %d of %d examples have no profile record; unmatched=%r.", len(missing), len(keys), unmatched
        )
    if missing and unmatched == "drop":
        keep = sorted(set(range(len(keys))) - set(missing))
        dataset, keys, questions = dataset.select(keep), [keys[i] for i in keep], [questions[i] for i in keep]
    # the seeded draws are keyed by the dataset's question text, whatever the join key
    joined = [
        {**index.get(k, {"thinking_tokens": -1, "correct": False}), "question": q}
        for k, q in zip(keys, questions, strict=True)
    ]
    planned = plan_saber_rows(joined, tiers, base_wrong_unlimited, no_think_ratio, seed)
    prompts = dict(budget_prompt=budget_prompt, unlimited_prompt=unlimited_prompt, no_think_prompt=no_think_prompt)

    def _rewrite(row, i):
        cols = planned[i]
        system = saber_system_prompt(cols["saber_mode"], cols["saber_budget"], **prompts)
        return {"prompt": apply_assignment(row["prompt"], RolloutAssignment(system=system)), **cols}

    return dataset.map(_rewrite, with_indices=True, desc="SABER tiers")


def _env_tiers():
    value = os.environ.get(SABER_TIERS_ENV)
    if not value:
        return None
    try:
        return [int(x) for x in value.replace(" ", "").split(",") if x]
    except ValueError as err:
        raise ValueError(f"{SABER_TIERS_ENV} must be comma-separated token counts, got {value!r}.") from err


def prepare_dataset(dataset, args, tokenizer=None, **kwargs) -> datasets.Dataset:
    """Recipe hook of `saber` (`Recipe.dataset_hook`): `apply_saber_profile` with settings from `kwargs`, else
    environment variables, else the proposed defaults.

    - profile path: `profile=` or `$TRL_EFFICIENT_SABER_PROFILE` (required; a YAML can set it in its `env:` block);
    - tiers: `tiers=` or `$TRL_EFFICIENT_SABER_TIERS` (`"128,4096,16384"`);
    - NoThink share: `no_think_ratio=` or `$TRL_EFFICIENT_SABER_NO_THINK_RATIO` (`0.1`);
    - `seed` defaults to `args.seed`; other keywords go to `apply_saber_profile`.
    """
    profile = kwargs.pop("profile", None) or os.environ.get(SABER_PROFILE_ENV)
    if not profile:
        raise ValueError(
            f"SABER needs the base model's profile of the training set: run `trl-efficient profile "
            f"--model_name_or_path <base> --dataset_name <name> --output profile.jsonl`, then set "
            f"{SABER_PROFILE_ENV}=profile.jsonl (or pass profile=... to prepare_dataset)."
        )
    if isinstance(profile, str) and not os.path.exists(profile):
        raise ValueError(
            f"SABER profile {profile!r} ({SABER_PROFILE_ENV}) does not exist; run `trl-efficient profile`."
        )
    tiers = kwargs.pop("tiers", None) or _env_tiers() or SABER_TIERS
    field_name = "tiers" if os.environ.get(SABER_TIERS_ENV) is None else f"tiers ({SABER_TIERS_ENV})"
    tiers = validate_tiers(tiers, field_name)
    ratio = kwargs.pop("no_think_ratio", None)
    if ratio is None:
        raw = os.environ.get(SABER_NO_THINK_RATIO_ENV)
        try:
            ratio = float(raw) if raw else NO_THINK_RATIO
        except ValueError as err:
            raise ValueError(f"{SABER_NO_THINK_RATIO_ENV} must be a number in [0, 1), got {raw!r}.") from err
    if not 0.0 <= float(ratio) < 1.0:
        raise ValueError(f"no_think_ratio must be in [0, 1) (NoThink share of the examples), got {ratio!r}.")
    cap = getattr(args, "max_completion_length", None)
    if cap is not None and tiers[0] >= cap:
        logger.warning(
            "SABER: the smallest tier (%d tokens) is not below max_completion_length (%d), so no budget can be "
            "overshot and the length penalty never applies. Lower the tiers or raise max_completion_length.",
            tiers[0],
            cap,
        )
    seed = kwargs.pop("seed", getattr(args, "seed", 0))
    return apply_saber_profile(dataset, profile, tiers=tiers, no_think_ratio=float(ratio), seed=seed, **kwargs)


def _profile_record(
    row: dict, ids: list[int], truncated: bool, tokenizer, meter: LengthMeter, length_meter: LengthMeter | None = None
) -> dict:
    text = tokenizer.decode(ids, skip_special_tokens=True)
    ok = is_correct(text, row["solution"], answer_after_think=True, require_think_close=True)
    record = {
        "question": question_key(row["prompt"]),
        "solution": row["solution"],
        "thinking_tokens": meter.thinking_tokens(ids) if ids else 0,
        "completion_tokens": len(ids),
        "think_closed": THINK_CLOSE in tokenizer.decode(ids, skip_special_tokens=False),
        "truncated": bool(truncated),
        "correct": bool(ok),
    }
    if length_meter is not None:  # the caller's length unit/scope, on the text and ids a reward function sees
        record["length"] = length_meter(text, ids)
    if "idx" in row:
        record = {"idx": int(row["idx"]), **record}
    return record


def _render(tokenizer, prompt, chat_template_kwargs=None) -> str:
    if isinstance(prompt, str):
        return prompt
    return tokenizer.apply_chat_template(
        prompt, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
    )


def profile_dataset(
    model,
    tokenizer,
    dataset,
    max_new_tokens: int = 16384,
    batch_size: int = 16,
    temperature: float = 0.6,
    top_p: float = 0.95,
    seed: int = 0,
    generation_kwargs: dict | None = None,
    chat_template_kwargs: dict | None = None,
    show_progress: bool = True,
    length_meter: LengthMeter | None = None,
) -> list[dict]:
    """Generate one completion per example with transformers (batched, left-padded) and return its profile record:
    `idx`, `question`, `solution`, `thinking_tokens` (tokens up to and including the last `</think>`; the whole
    completion when it never closes), `completion_tokens` (EOS included), `think_closed`, `truncated`, `correct`,
    and `length` (`length_meter(text, ids)`, the text decoded without special tokens as TRL passes it to rewards)
    when a `length_meter` is given. `temperature=0` is greedy.
    """
    meter = LengthMeter("tokens", "thinking", tokenizer)
    rows = list(dataset)
    backend = TransformersBackend(
        model, tokenizer, batch_size=batch_size, generation_kwargs=generation_kwargs, show_progress=show_progress
    )
    prompts = [_render(tokenizer, r["prompt"], chat_template_kwargs) for r in rows]
    samples = backend.generate(prompts, n=1, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                               seed=seed, description="profile")  # fmt: skip
    return [
        _profile_record(row, g.ids, not g.finished, tokenizer, meter, length_meter) for row, (g,) in zip(rows, samples)
    ]


def profile_dataset_vllm(
    model_path: str,
    tokenizer,
    dataset,
    max_new_tokens: int = 16384,
    temperature: float = 0.6,
    top_p: float = 0.95,
    seed: int = 0,
    chat_template_kwargs: dict | None = None,
    llm_kwargs: dict | None = None,
    n: int = 1,
    length_meter: LengthMeter | None = None,
) -> list[dict]:
    """`profile_dataset` with an in-process `vllm.LLM` (needs vLLM; its own progress bar). Token-id prompts, so the
    chat template is applied exactly as in training. `n` samples per example (vLLM's `SamplingParams.n`, one seeded
    request, so the samples differ) give `n` consecutive records per example."""
    if n <= 0:
        raise ValueError(f"n (samples per example) must be positive, got {n}.")
    from vllm import LLM, SamplingParams

    rows = list(dataset)
    texts = [_render(tokenizer, r["prompt"], chat_template_kwargs) for r in rows]
    prompts = [{"prompt_token_ids": tokenizer(t, add_special_tokens=False)["input_ids"]} for t in texts]
    llm = LLM(model=model_path, seed=seed, **(llm_kwargs or {}))
    params = SamplingParams(
        n=n, max_tokens=max_new_tokens, temperature=temperature, top_p=top_p if temperature > 0 else 1.0, seed=seed
    )
    outputs = llm.generate(prompts, params, use_tqdm=True)
    meter = LengthMeter("tokens", "thinking", tokenizer)
    return [
        _profile_record(row, list(o.token_ids), o.finish_reason == "length", tokenizer, meter, length_meter)
        for row, out in zip(rows, outputs, strict=True)
        for o in out.outputs
    ]


@dataclass
class ProfileArguments:
    """Options of `trl-efficient profile` (dataset options are `trl_efficient.data.DataArguments`)."""

    model_name_or_path: str = field(
        default="tiny:qwen2", metadata={"help": "Base model to profile (Hub id, local path or 'tiny:<arch>')."}
    )
    output: str = field(
        default="outputs/saber_profile.jsonl",
        metadata={"help": "Where to write the profile: JSONL (one object per example), or a JSON list for '.json'."},
    )
    max_new_tokens: int = field(
        default=16385,
        metadata={"help": "Generation cap in tokens; keep it above the largest SABER tier (16384) to tell 'no limit'."},
    )
    batch_size: int = field(default=16, metadata={"help": "Prompts per transformers generate call."})
    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature; 0 is greedy."})
    top_p: float = field(default=0.95, metadata={"help": "Top-p."})
    seed: int = field(default=0, metadata={"help": "Seed of the sampler and of the dataset_limit subset."})
    backend: str = field(
        default="transformers",
        metadata={
            "help": "'transformers', 'vllm', or 'auto' (vLLM when importable).",
            "choices": ["transformers", "vllm", "auto"],
        },
    )
    dtype: str = field(default="auto", metadata={"help": "Model dtype for transformers ('auto', 'bfloat16', ...)."})
    eos_logit_bias: float | None = field(
        default=None,
        metadata={"help": "Bias added to the EOS logit (transformers): for a model that rarely ends (SmolLM2, tiny)."},
    )
    vllm_max_model_len: int | None = field(default=None, metadata={"help": "vLLM max_model_len (vLLM backend)."})
    vllm_enforce_eager: bool = field(default=False, metadata={"help": "vLLM enforce_eager (vLLM backend; CPU tests)."})


def _vllm_importable() -> bool:
    return importlib.util.find_spec("vllm") is not None


def profile_main(argv: list[str] | None = None) -> int:
    """`trl-efficient profile [--config x.yaml] --model_name_or_path M --dataset_name D --output P [...]`."""
    argv = list(sys.argv[2:] if argv is None else argv)

    class ProfileParser(TrlParser):  # argparse errors raise UserError, for this parser only
        error = CommandParser.error

    parser = ProfileParser((ProfileArguments, DataArguments), prog="trl-efficient profile")
    args, data_args, unknown = parser.parse_args_and_config(argv, return_remaining_strings=True)
    if unknown:  # flags (or YAML keys, as `--key value`) that no field takes
        raise UserError(
            f"unknown argument(s): {' '.join(unknown)}; fix their names (see `trl-efficient profile --help`)"
        )
    if args.backend not in ("transformers", "vllm", "auto"):
        raise ValueError(f"backend must be 'transformers', 'vllm' or 'auto', got {args.backend!r}.")
    if args.max_new_tokens <= 0 or args.batch_size <= 0:
        raise ValueError("max_new_tokens and batch_size must be positive.")
    check_writable("--output", args.output)  # the profile is written after all the generation: check it first
    backend = args.backend
    if backend == "auto":
        backend = "vllm" if _vllm_importable() else "transformers"
    dataset, _ = load_datasets(data_args, seed=args.seed)
    model_path = resolve_model_name(args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if backend == "vllm":
        if args.eos_logit_bias:
            raise ValueError("eos_logit_bias is a transformers option; unset it with backend='vllm'.")
        llm_kwargs = {"max_model_len": args.vllm_max_model_len} if args.vllm_max_model_len else {}
        if args.vllm_enforce_eager:
            llm_kwargs["enforce_eager"] = True
        records = profile_dataset_vllm(
            model_path,
            tokenizer,
            dataset,
            args.max_new_tokens,
            args.temperature,
            args.top_p,
            args.seed,
            llm_kwargs=llm_kwargs,
        )
    else:
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=args.dtype)
        if torch.cuda.is_available():
            model = model.to("cuda")
        gen_kwargs = eos_bias_generation_kwargs(tokenizer, args.eos_logit_bias) if args.eos_logit_bias else {}
        records = profile_dataset(
            model,
            tokenizer,
            dataset,
            args.max_new_tokens,
            args.batch_size,
            args.temperature,
            args.top_p,
            args.seed,
            generation_kwargs=gen_kwargs,
        )
    for rec in records:
        rec["model"] = args.model_name_or_path
    write_profile(records, args.output)
    n = len(records)
    tiers = [assign_tier(r["thinking_tokens"], r["truncated"]) for r in records]
    counts = {str(t): sum(1 for x in tiers if x == t) for t in (*SABER_TIERS, None)}
    accuracy = sum(r["correct"] for r in records) / max(n, 1)
    mean_thinking = sum(r["thinking_tokens"] for r in records) / max(n, 1)
    print(
        f"trl-efficient profile: {n} examples of {data_args.dataset_name} with {args.model_name_or_path} ({backend})\n"
        f"  accuracy {accuracy:.3f}, mean thinking tokens {mean_thinking:.1f}, "
        f"default tiers {counts} (None = no limit)\n"
        f"  written to {args.output}; train with: trl-efficient train --config configs/saber.yaml "
        f'--recipe_kwargs \'{{"profile": "{args.output}"}}\''
    )
    return 0
