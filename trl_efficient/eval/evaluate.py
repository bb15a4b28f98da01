r"""
Accuracy-and-tokens evaluation: n samples per problem, pass@k, token statistics, inference-time modes.

`evaluate_model(model, tokenizer, dataset, ...) -> EvalResult` is the in-process entry point (used before and after
`trl-efficient train`); `trl-efficient eval` (`trl_efficient.eval.cli`) runs it over models, benchmarks and
modes. What is reported, for every (model, mode, benchmark):

- accuracy = pass@1 averaged over the `n` samples of each problem, and pass@k for each requested `k <= n` with the
  unbiased estimator `pass_at_k`;
- completion tokens (generated ids, the EOS token included when emitted; an assistant prefill is *not* counted):
  mean, median, p90, mean for correct and incorrect samples;
- thinking tokens (up to and including the last `</think>`; the whole completion when there is none) and answer
  tokens (the rest), via `trl_efficient.core.lengths.LengthMeter`;
- truncation rate (no EOS within `max_new_tokens`);
- a breakdown by `level` (MATH levels, testbed operations) when the data has levels.

Inference-time modes (`EvalMode`, `parse_modes`) rewrite the prompt the way the training methods do
(`trl_efficient.trainer.rollout.apply_assignment`): HBPO budget statements as assistant prefill (and its "minimal
tokens" efficiency prompt), L1 target lengths appended to the question, SABER's four system prompts, or nothing.

Backends: `TransformersBackend` (HF `generate`, CPU or GPU; the default) and `VLLMBackend` (when vLLM is installed).
Sampling defaults follow the seeds' evaluations: temperature 0.6, top-p 0.95.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import LogitsProcessorList

from ..core.lengths import LengthMeter, completion_text
from ..data.benchmarks import check_answer, get_benchmark
from ..prompts import (
    ASRR_NO_THINK_PREFIX,
    BUDGETTHINKER_INSTRUCTION,
    HBPO_BUDGETS,
    HBPO_MINIMAL_PROMPT,
    HBPO_TEMPLATE,
    L1_TARGETS,
    l1_instruction,
    saber_mode_prompts,
)
from ..rewards.budgetthinker import BudgetControlProcessor, control_token_ids
from ..trainer.budget_forcing import BudgetForcing, budget_force
from ..trainer.rollout import RolloutAssignment, apply_assignment
from .defaults import DEFAULT_TEMPERATURE, DEFAULT_TOP_P

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_TEMPERATURE",
    "DEFAULT_TOP_P",
    "EvalMode",
    "EvalResult",
    "GeneratedSample",
    "HBPO_BUDGETS",
    "HBPO_MINIMAL_PROMPT",
    "L1_TARGETS",
    "SABER_MODES",
    "TransformersBackend",
    "VLLMBackend",
    "evaluate_model",
    "evaluate_samples",
    "parse_mode",
    "parse_modes",
    "pass_at_k",
    "percentile",
]


# Inference-time modes

# SABER's inference modes (system prompt, assistant prefill): the prompts SABER trains with (`prompts.py`).
SABER_MODES: dict[str, tuple[str, str | None]] = {k.lower(): (v, None) for k, v in saber_mode_prompts().items()}


@dataclass(frozen=True)
class EvalMode:
    """One inference-time prompt rewrite. `name` labels it in files and tables; `value` is its numeric knob
    (budget or target tokens), if any."""

    name: str = "plain"
    system: str | None = None
    user_suffix: str | None = None
    prefill: str | None = None
    value: int | None = None
    forcing: str | None = None  # s1 budget forcing at decoding time: "force:<B>" or "wait:<N>" (budget_forcing.py)
    # BudgetThinker (§23): control tokens forced after every floor(B/8)+1 free generated tokens (transformers backend)
    control_budget: int | None = field(default=None, repr=False)

    def assignment(self) -> RolloutAssignment:
        return RolloutAssignment(system=self.system, user_suffix=self.user_suffix, prefill=self.prefill)

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in self.name)


def parse_mode(spec: str) -> list[EvalMode]:
    """Modes from one spec string (a family name alone expands to all its members).

    `plain`; `hbpo` (budgets 512/1024/2048/2560 and `minimal`), `hbpo:<budget>`, `hbpo:minimal`; `l1` (targets
    512/1024/2048/3600), `l1:<N>` (" Think for N tokens."), `l1-max:<N>` (" Think for maximum N tokens."); `saber`
    (all four), `saber:nothink|fastthink|corethink|deepthink`; `asrr` (ASRR's no-think prefix as prefill);
    `force:<B>` and `wait:<N>` (s1 budget forcing at decoding time, `trl_efficient.trainer.budget_forcing`: close the
    thinking at B generated tokens with `</think>` + an answer prefix / replace an early `</think>` by "Wait" N times).

    >>> [m.name for m in parse_mode("hbpo")]
    ['hbpo:512', 'hbpo:1024', 'hbpo:2048', 'hbpo:2560', 'hbpo:minimal']
    >>> parse_mode("l1-max:800")[0].user_suffix, parse_mode("hbpo:minimal")[0].prefill
    (' Think for maximum 800 tokens.', '<think> I will answer the question with minimal tokens')
    >>> parse_mode("force:64")[0], parse_mode("wait:2")[0].forcing
    (EvalMode(name='force:64', system=None, user_suffix=None, prefill=None, value=64, forcing='force:64'), 'wait:2')
    """
    spec = spec.strip()
    family, _, arg = spec.partition(":")
    family = family.lower()
    if family == "plain" and not arg:
        return [EvalMode("plain")]
    if family == "asrr" and not arg:  # ASRR's no-think prefix as assistant prefill (methods.md §24)
        return [EvalMode("asrr", prefill=ASRR_NO_THINK_PREFIX)]
    if family == "hbpo":
        if not arg:
            return [m for b in HBPO_BUDGETS for m in parse_mode(f"hbpo:{b}")] + parse_mode("hbpo:minimal")
        if arg.lower() == "minimal":
            return [EvalMode("hbpo:minimal", prefill=HBPO_MINIMAL_PROMPT)]
        budget = _positive_int(arg, spec)
        return [EvalMode(f"hbpo:{budget}", prefill=HBPO_TEMPLATE.format(budget=budget), value=budget)]
    if family in ("l1", "l1-exact", "l1-max"):
        if not arg:
            return [m for n in L1_TARGETS for m in parse_mode(f"{family}:{n}")]
        n = _positive_int(arg, spec)
        if family == "l1-max":
            return [EvalMode(f"l1-max:{n}", user_suffix=l1_instruction(n, "max"), value=n)]
        return [EvalMode(f"l1:{n}", user_suffix=l1_instruction(n, "exact"), value=n)]
    if family == "budgetthinker":  # BudgetThinker (§23): budget in the prompt + forced control tokens
        budget = _positive_int(arg, spec)
        text = BUDGETTHINKER_INSTRUCTION.format(budget=budget)
        return [EvalMode(f"budgetthinker:{budget}", user_suffix=text, value=budget, control_budget=budget)]
    if family in ("force", "wait"):
        value = _positive_int(arg, spec)
        return [EvalMode(f"{family}:{value}", value=value, forcing=f"{family}:{value}")]
    if family == "saber":
        modes = SABER_MODES
        names = list(modes) if not arg else [arg.lower()]
        out = []
        for name in names:
            if name not in modes:
                raise ValueError(f"Unknown SABER mode {name!r} in {spec!r}; choose one of {list(modes)}.")
            system, prefill = modes[name]
            out.append(EvalMode(f"saber:{name}", system=system, prefill=prefill))
        return out
    raise ValueError(
        f"Unknown mode {spec!r}: use plain, asrr, hbpo[:<budget>|:minimal], l1[:<N>], l1-max[:<N>], saber[:<mode>], "
        "force:<B>, wait:<N> or budgetthinker:<B>."
    )


def _positive_int(text: str, spec: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"Mode {spec!r}: {text!r} is not a positive number of tokens.")
    return value


def parse_modes(specs: Sequence[str] | None) -> list[EvalMode]:
    """All modes of several specs, in order, without duplicates (default: `plain`)."""
    out, seen = [], set()
    for spec in specs or ["plain"]:
        for mode in parse_mode(spec):
            if mode.name not in seen:
                seen.add(mode.name)
                out.append(mode)
    return out


def build_prompt_text(prompt, mode: EvalMode, tokenizer, chat_template_kwargs: dict | None = None) -> str:
    """The generation prompt of one row under `mode`: chat template applied, assistant prefill appended."""

    def render(messages):
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
        )

    rewritten = apply_assignment(prompt, mode.assignment(), render)
    return rewritten if isinstance(rewritten, str) else render(rewritten)


# Generation backends


@dataclass
class GeneratedSample:
    ids: list[int]
    text: str
    finished: bool  # ended with EOS (or a stop) within the token limit
    inserted: list = field(default_factory=list)  # budget forcing: [start, end) spans of tokens inserted by us
    forced: bool = False  # budget forcing: the thinking was closed (force) or extended with "Wait" (wait) by us


class TransformersBackend:
    """HF `generate` on a loaded model (CPU or GPU). Prompts are left-padded and generated in batches of
    `batch_size` sequences; samples of one prompt are consecutive rows."""

    name = "transformers"

    def __init__(
        self, model, tokenizer, batch_size: int = 16, generation_kwargs: dict | None = None, show_progress: bool = True
    ) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.generation_kwargs = dict(generation_kwargs or {})
        self.show_progress = show_progress
        eos = model.generation_config.eos_token_id
        self.eos_ids = set([eos] if isinstance(eos, int) else (eos or [tokenizer.eos_token_id]))

    @torch.no_grad()
    def generate(self, prompts: list[str], n: int, max_new_tokens: int, temperature: float, top_p: float,
                 seed: int = 0, description: str = "generate",
                 forcing: BudgetForcing | None = None) -> list[list[GeneratedSample]]:  # fmt: skip
        """`n` samples of each prompt; with `forcing` (s1 budget forcing), a batched multi-phase generation over
        token ids (`trl_efficient.trainer.budget_forcing.budget_force`)."""
        model, tok = self.model, self.tokenizer
        was_training = model.training
        model.eval()
        pad_side = tok.padding_side
        tok.padding_side = "left"
        rng_state = torch.random.get_rng_state()
        cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        torch.manual_seed(seed)
        flat = [p for p in prompts for _ in range(n)]
        out: list[GeneratedSample] = []
        try:
            if forcing is not None:
                ids = [tok(p, add_special_tokens=False)["input_ids"] for p in flat]

                def gen(prefixes, max_new):
                    return self._generate_ids(prefixes, max_new, temperature, top_p, description)

                for c in budget_force(ids, gen, forcing, tok, sorted(self.eos_ids), max_new_tokens):
                    text = tok.decode(c.ids, skip_special_tokens=True)
                    out.append(GeneratedSample(c.ids, text, c.finished, c.inserted, c.forced))
            else:
                for ids in self._generate_ids(flat, max_new_tokens, temperature, top_p, description):
                    finished = bool(ids) and ids[-1] in self.eos_ids
                    out.append(GeneratedSample(ids, tok.decode(ids, skip_special_tokens=True), finished))
        finally:
            torch.random.set_rng_state(rng_state)
            if cuda_states is not None:
                torch.cuda.set_rng_state_all(cuda_states)
            tok.padding_side = pad_side
            model.train(was_training)
        return [out[i * n : (i + 1) * n] for i in range(len(prompts))]

    def _generate_ids(
        self, prompts: list, max_new_tokens: int, temperature: float, top_p: float, description: str = "generate"
    ) -> list[list[int]]:
        """Completion ids (cut after the first EOS) of `prompts` (texts, or token-id lists), in batches."""
        model, tok = self.model, self.tokenizer
        device = next(model.parameters()).device
        out: list[list[int]] = []
        steps = range(0, len(prompts), self.batch_size)
        for start in tqdm(steps, desc=description, disable=not self.show_progress, leave=False):
            chunk = prompts[start : start + self.batch_size]
            if chunk and not isinstance(chunk[0], str):  # token ids: left-pad by hand
                width = max(len(c) for c in chunk)
                pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
                input_ids = torch.tensor([[pad_id] * (width - len(c)) + list(c) for c in chunk], device=device)
                mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in chunk], device=device)
                enc = {"input_ids": input_ids, "attention_mask": mask}
            else:
                enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            sample = temperature > 0
            gen = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=sample,
                temperature=temperature if sample else None,
                top_p=top_p if sample else None,
                top_k=None if sample else None,
                pad_token_id=tok.pad_token_id,
                **self.generation_kwargs,
            )
            for seq in gen[:, enc["input_ids"].shape[1] :].tolist():
                ids = []
                for t in seq:
                    if t == tok.pad_token_id and t not in self.eos_ids:
                        break
                    ids.append(t)
                    if t in self.eos_ids:
                        break
                out.append(ids)
        return out


class VLLMBackend:
    """vLLM offline generation (`vllm.LLM`), when vLLM is installed. One engine per model; `n` samples per prompt
    come from `SamplingParams(n=...)`. `llm_kwargs` go to `vllm.LLM` (e.g. `gpu_memory_utilization`,
    `tensor_parallel_size`, `max_model_len`)."""

    name = "vllm"

    def __init__(self, model_path: str, tokenizer, seed: int = 0, **llm_kwargs) -> None:
        try:
            from vllm import LLM
        except ImportError as err:
            raise ImportError("backend='vllm' needs vLLM: pip install 'trl-efficient[vllm]'.") from err
        self.tokenizer = tokenizer
        self.llm = LLM(model=model_path, seed=seed, **llm_kwargs)

    def generate(
        self, prompts, n, max_new_tokens, temperature, top_p, seed=0, description="generate", forcing=None
    ) -> list[list[GeneratedSample]]:
        from vllm import SamplingParams

        native = forcing is not None and forcing.kind == "force" and _vllm_thinking_budget_field(SamplingParams)
        if forcing is not None and not native:
            return self._generate_forced(prompts, n, max_new_tokens, temperature, top_p, seed, forcing)
        extra = {native: forcing.value} if native else {}  # vLLM's own thinking budget (closes `</think>` at B)
        params = SamplingParams(
            n=n, temperature=temperature, top_p=top_p if temperature > 0 else 1.0, max_tokens=max_new_tokens,
            seed=seed, skip_special_tokens=True, **extra,
        )  # fmt: skip
        results = self.llm.generate(prompts, params, use_tqdm=True)
        eos = self.tokenizer.eos_token_id
        out = []
        for res in results:
            samples = []
            for o in res.outputs:
                ids = list(o.token_ids)
                finished = o.finish_reason == "stop"
                if finished and eos is not None and (not ids or ids[-1] != eos) and o.stop_reason is None:
                    ids.append(eos)  # vLLM drops the EOS id from token_ids in some versions; count it as HF does
                samples.append(GeneratedSample(ids, o.text, finished))
            out.append(samples)
        return out

    def _generate_forced(self, prompts, n, max_new_tokens, temperature, top_p, seed, forcing):
        """s1 budget forcing with the same multi-phase logic as `TransformersBackend` (`budget_force`), each phase
        one batched `LLM.generate` over token-id prompts (one request per sample, seeds `seed + row`)."""
        from vllm import SamplingParams

        tok = self.tokenizer
        flat = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts for _ in range(n)]
        eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
        calls = [0]

        def gen(prefixes, max_new):
            calls[0] += 1
            params = [
                SamplingParams(n=1, temperature=temperature, top_p=top_p if temperature > 0 else 1.0,
                               max_tokens=max_new, seed=seed + 100_003 * calls[0] + i, skip_special_tokens=True)
                for i in range(len(prefixes))
            ]  # fmt: skip
            results = self.llm.generate([{"prompt_token_ids": p} for p in prefixes], params, use_tqdm=False)
            outs = []
            for res in results:
                o = res.outputs[0]
                ids = list(o.token_ids)
                if o.finish_reason == "stop" and eos and (not ids or ids[-1] != eos[0]) and o.stop_reason is None:
                    ids.append(eos[0])
                outs.append(ids)
            return outs

        done = budget_force(flat, gen, forcing, tok, eos, max_new_tokens)
        samples = [
            GeneratedSample(c.ids, tok.decode(c.ids, skip_special_tokens=True), c.finished, c.inserted, c.forced)
            for c in done
        ]
        return [samples[i * n : (i + 1) * n] for i in range(len(prompts))]


def _vllm_thinking_budget_field(sampling_params_cls) -> str | None:
    """The name of vLLM's native thinking-budget `SamplingParams` field in the installed version, if any."""
    try:
        names = set(inspect.signature(sampling_params_cls).parameters)
    except (TypeError, ValueError):
        names = set()
    names |= set(getattr(sampling_params_cls, "__struct_fields__", ()) or ())
    for name in ("thinking_token_budget", "thinking_budget", "max_think_tokens"):
        if name in names:
            return name
    return None


def budget_control_backend(backend, budget: int, tokenizer) -> TransformersBackend:
    """A copy of a `TransformersBackend` whose `generate` forces BudgetThinker's control tokens for budget `budget`
    (`trl_efficient.rewards.budgetthinker.BudgetControlProcessor`; the tokenizer must hold the control tokens).
    vLLM is not supported in this version."""
    if not isinstance(backend, TransformersBackend):
        raise ValueError(
            "budgetthinker:<B> forces control tokens with a transformers LogitsProcessor: use the "
            "transformers backend (vLLM is not supported in this version)."
        )
    processor = BudgetControlProcessor(budget, control_token_ids(tokenizer))
    out = copy.copy(backend)
    out.generation_kwargs = {**backend.generation_kwargs, "logits_processor": LogitsProcessorList([processor])}
    return out


# Metrics


def pass_at_k(n: int, c: int, k: int) -> float:
    r"""Unbiased pass@k from `n` samples of which `c` are correct (Chen et al. 2021, arXiv 2107.03374, eq. 1):

    $$\text{pass@}k = 1 - \binom{n-c}{k} \Big/ \binom{n}{k}$$

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 2), pass_at_k(4, 0, 4), pass_at_k(4, 3, 2)
    (0.25, 0.5, 0.0, 1.0)
    """
    if not 0 < k <= n:
        raise ValueError(f"pass@k needs 0 < k <= n, got k={k}, n={n}.")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}.")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), `q` in [0, 100].

    >>> percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90), percentile([7], 90)
    (9.1, 7.0)
    """
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("percentile of an empty list")
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return round(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo), 10)


@dataclass
class EvalResult:
    """Accuracy and token statistics of one evaluation. The first seven fields are the original summary (kept for
    `trl-efficient train`'s before/after table); `accuracy` is mean pass@1 over the `samples_per_problem` samples."""

    num_samples: int
    accuracy: float
    mean_tokens: float
    median_tokens: float
    truncated_fraction: float
    mean_tokens_correct: float | None
    mean_tokens_incorrect: float | None
    num_problems: int = 0
    samples_per_problem: int = 1
    p90_tokens: float = 0.0
    mean_thinking_tokens: float = 0.0
    mean_answer_tokens: float = 0.0
    pass_at_k: dict[str, float] = field(default_factory=dict)
    num_unscorable: int = 0
    by_level: dict[str, dict] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ScoredSample:
    problem: int
    level: int
    tokens: int
    thinking_tokens: int
    truncated: bool
    correct: bool | None
    extra: dict[str, float] = field(default_factory=dict)


def _mean(xs):
    xs = list(xs)
    return float(sum(xs) / len(xs)) if xs else None


def evaluate_samples(samples: list[ScoredSample], ks: Sequence[int] = (1,)) -> EvalResult:
    """Aggregate scored samples (several per problem) into an `EvalResult`.

    Problems whose gold cannot be parsed (`correct is None`) are left out of accuracy and pass@k and counted in
    `num_unscorable`; their tokens still count.

    >>> s = [ScoredSample(0, 1, 10, 8, False, True), ScoredSample(0, 1, 20, 15, False, False),
    ...      ScoredSample(1, 2, 30, 30, True, False), ScoredSample(1, 2, 40, 30, False, False)]
    >>> r = evaluate_samples(s, ks=(1, 2))
    >>> r.accuracy, r.pass_at_k, r.mean_tokens, r.truncated_fraction, r.mean_thinking_tokens
    (0.25, {'pass@1': 0.25, 'pass@2': 0.5}, 25.0, 0.25, 20.75)
    >>> r.by_level["1"]["accuracy"], r.by_level["2"]["mean_tokens"]
    (0.5, 35.0)
    """
    by_problem: dict[int, list[ScoredSample]] = defaultdict(list)
    for s in samples:
        by_problem[s.problem].append(s)
    n_per = max((len(v) for v in by_problem.values()), default=0)
    scorable = {p: v for p, v in by_problem.items() if all(s.correct is not None for s in v)}
    pass_k = {}
    for k in sorted(set(int(k) for k in ks)):
        if 0 < k <= n_per and scorable:
            values = [pass_at_k(len(v), sum(bool(s.correct) for s in v), k) for v in scorable.values()]
            pass_k[f"pass@{k}"] = _mean(values)
    lengths = [s.tokens for s in samples]
    correct_flags = [s.correct for s in samples]
    by_level = {}
    levels = sorted({s.level for s in samples if s.level is not None and s.level >= 0})
    for level in levels:
        rows = [s for s in samples if s.level == level]
        scored = [s for s in rows if s.correct is not None]
        by_level[str(level)] = {
            "num_problems": len({s.problem for s in rows}),
            "accuracy": _mean(float(bool(s.correct)) for s in scored),
            "mean_tokens": _mean(s.tokens for s in rows),
            "truncated_fraction": _mean(float(s.truncated) for s in rows),
        }
    extra_keys = sorted({k for s in samples for k in s.extra})
    extra = {k: _mean(s.extra[k] for s in samples if k in s.extra) for k in extra_keys}
    if "redundant_tokens" in extra_keys and lengths:  # token-weighted share, not the mean of per-sample shares
        extra["redundant_share"] = sum(s.extra.get("redundant_tokens", 0) for s in samples) / max(1, sum(lengths))
    scored_all = [s for s in samples if s.correct is not None]
    return EvalResult(
        num_samples=len(samples),
        accuracy=_mean(float(bool(s.correct)) for s in scored_all) or 0.0,
        mean_tokens=_mean(lengths) or 0.0,
        median_tokens=float(statistics.median(lengths)) if lengths else 0.0,
        truncated_fraction=_mean(float(s.truncated) for s in samples) or 0.0,
        mean_tokens_correct=_mean(s.tokens for s, c in zip(samples, correct_flags, strict=True) if c),
        mean_tokens_incorrect=_mean(s.tokens for s, c in zip(samples, correct_flags, strict=True) if c is False),
        num_problems=len(by_problem),
        samples_per_problem=n_per,
        p90_tokens=percentile(lengths, 90) if lengths else 0.0,
        mean_thinking_tokens=_mean(s.thinking_tokens for s in samples) or 0.0,
        mean_answer_tokens=_mean(s.tokens - s.thinking_tokens for s in samples) or 0.0,
        pass_at_k=pass_k,
        num_unscorable=len(by_problem) - len(scorable),
        by_level=by_level,
        extra=extra,
    )


def score_generations(
    rows: list[dict],
    generations: list[list[GeneratedSample]],
    tokenizer,
    mode: EvalMode | None = None,
    checker: Callable | None = None,
    sample_analyzer: Callable | None = None,
) -> tuple[list[ScoredSample], list[dict]]:
    """Score generated samples; returns the scored samples and JSON-able per-sample records."""
    checker = checker or check_answer
    meter = LengthMeter(scope="thinking", tokenizer=tokenizer)
    prefill = (mode.prefill if mode else None) or ""
    scored, records = [], []
    for p, (row, samples) in enumerate(zip(rows, generations, strict=True)):
        for j, g in enumerate(samples):
            text = prefill + g.text  # the answer is checked on what the model "said", prefill included
            ok = checker(completion_text(text), row.get("solution"), row.get("answer_type") or "")
            thinking = meter.thinking_tokens(g.ids) if "</think>" in text else len(g.ids)
            if "</think>" in prefill and "</think>" not in g.text:
                thinking = 0  # a prefilled empty think block (NoThink): nothing generated was thinking
            extra = sample_analyzer(row, g.ids, text, tokenizer) if sample_analyzer else {}
            if mode is not None and mode.forcing:  # fraction of forced samples and tokens we inserted
                inserted = getattr(g, "inserted", [])
                extra = {**extra, "budget_forced": float(getattr(g, "forced", False)),
                         "inserted_tokens": float(sum(b - a for a, b in inserted))}  # fmt: skip
            scored.append(ScoredSample(p, int(row.get("level", -1) if row.get("level") is not None else -1),
                                       len(g.ids), thinking, not g.finished, ok, extra))  # fmt: skip
            records.append({"problem": p, "sample": j, "idx": row.get("idx", p), "tokens": len(g.ids),
                            "thinking_tokens": thinking, "truncated": not g.finished, "correct": ok,
                            "solution": row.get("solution"), "completion": g.text, **extra})  # fmt: skip
    return scored, records


def evaluate_model(
    model,
    tokenizer,
    dataset,
    max_new_tokens: int = 256,
    batch_size: int = 16,
    temperature: float = DEFAULT_TEMPERATURE,
    top_p: float = DEFAULT_TOP_P,
    generation_kwargs: dict | None = None,
    chat_template_kwargs: dict | None = None,
    seed: int = 0,
    show_progress: bool = True,
    description: str = "eval",
    num_samples: int = 1,
    ks: Sequence[int] = (1,),
    mode: EvalMode | None = None,
    backend: Any = None,
    checker: Callable | None = None,
    sample_analyzer: Callable | None = None,
    return_records: bool = False,
) -> EvalResult | tuple[EvalResult, list[dict]]:
    """Sample `num_samples` completions per row of `dataset` (columns `prompt`, `solution`, optional `level`,
    `answer_type`) under `mode` and score them.

    Sampling defaults follow the seeds' evaluations (temperature 0.6, top-p 0.95); `temperature=0` is greedy.
    `backend` defaults to `TransformersBackend(model, tokenizer, batch_size, generation_kwargs)` (pass a
    `VLLMBackend` to use vLLM; `model` is then unused). Returns an `EvalResult`, or `(EvalResult, records)` with
    `return_records=True` (one JSON-able dict per sample, completion text included).
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}.")
    mode = mode or EvalMode()
    if sample_analyzer is None and "expression" in getattr(dataset, "column_names", []):
        sources = set(dataset["source"]) if "source" in dataset.column_names else set()
        if sources == {"testbed"}:  # testbed rows: add the exact redundant-token accounting automatically
            sample_analyzer = get_benchmark("testbed").sample_analyzer
    backend = backend or TransformersBackend(model, tokenizer, batch_size, generation_kwargs, show_progress)
    rows = list(dataset)
    prompts = [build_prompt_text(r["prompt"], mode, tokenizer, chat_template_kwargs) for r in rows]
    if mode.control_budget is not None:
        backend = budget_control_backend(backend, mode.control_budget, tokenizer)
    if mode.forcing:  # s1 budget forcing: only backends that implement it take the keyword
        forcing = BudgetForcing.parse(mode.forcing)
        generations = backend.generate(
            prompts, num_samples, max_new_tokens, temperature, top_p, seed, description, forcing=forcing
        )
    else:
        generations = backend.generate(prompts, num_samples, max_new_tokens, temperature, top_p, seed, description)
    scored, records = score_generations(rows, generations, tokenizer, mode, checker, sample_analyzer)
    result = evaluate_samples(scored, ks)
    return (result, records) if return_records else result
