r"""
Bingo: significance-aware and dynamic length reward (Liu et al., arXiv 2506.08125, "Not All Tokens Matter";
`methods.md` §1; code `microsoft/Bingo`, `verl_patches/trainer/ppo/ray_trainer.py`).

A token classifier (LLMLingua-2, `trl_efficient.significance`) splits each response into $N_{low}$ insignificant and
$N_{high}$ significant words. Against a reference response to the same prompt,

$$ r_{low} = \frac{N_{low}(o)}{N_{low}(o_{ref})}, \qquad r_{high} = \frac{N_{high}(o)}{N_{high}(o_{ref})} $$

(both 0 when the response is empty or either reference count is 0), and the shaping term is

$$ s = \begin{cases} \lambda_c \cos(\mathrm{clip}(r_{low}, 0, \pi/2)) & \text{correct} \\
\min\big(0,\ \lambda_{wn} (\cos(\mathrm{clip}(r_{low}, 0, \pi/2)) - 1) + w_t\, r_{high} - \lambda_{we}\big)
& \text{wrong} \end{cases} $$

so that with a 1/0 correctness reward the total is Bingo's $R \in [1, 1 + \lambda_c]$ for a correct answer and
$R \le 0$ for a wrong one. $w_t$ starts at $\lambda_{we}/(\pi/2)$ and `BingoSchedule` lowers it below zero once the
gathered training accuracy stops rising (updated once per generation batch, by `EfficientGRPOTrainer`'s `update(batch)`
or, in a plain `GRPOTrainer`, by the reward itself; checkpointed). Returns the shaping term alone (pair it with
`correctness_reward`) or the full $R$ with `include_correctness=True`; `None` where the gold cannot be parsed. Counts
are scorer units summed per response over its ≤512-token chunks. Reference per prompt: `"model"` (paper; default: `K`
cached responses of the frozen initial policy, their mean; our deviation from one fresh reference per step) or
`"group"` (a statistic of the group's $G$ rollouts). Narrative, costs, schedule details: docs/bingo.md ("What the
reward computes", "The reference response, and what each option costs").

>>> from trl_efficient.significance import Significance
>>> class FillerScorer:  # toy scorer: the word "um" is insignificant, every other word significant
...     unit, window = "word", 512
...     def score(self, texts):
...         return [Significance(tuple(0.0 if w == "um" else 1.0 for w in t.split()), (len(t.split()),)) for t in texts]
>>> reward = get_bingo_length_reward(FillerScorer(), reference="group", num_generations=2)
>>> out = reward(completions=[r"um um x \boxed{1}", r"um x y \boxed{2}"], solution=["1", "1"])
>>> # reference = group mean (1.5 low, 2.5 high): 5 cos(2/1.5) ; 2 (cos(1/1.5) - 1) + 3.1831 * 3/2.5 - 5
>>> [round(r, 4) for r in out]
[1.1762, -1.6085]
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import statistics
import time
from collections.abc import Sequence
from typing import Any

from ..core.answers import is_correct
from ..core.checks import check_number as _check_number
from ..core.checks import check_positive_int
from ..core.lengths import completion_text, split_thinking
from ..core.state import StatefulComponent
from ..significance.client import ScorerUnavailableError
from ..significance.factory import build_scorer
from ..significance.scorers import NORMALIZATIONS, count_significance_batch, default_device
from .group import gather_rows, resolve_group_size

logger = logging.getLogger(__name__)

__all__ = [
    "BingoSchedule",
    "FrozenReferenceGenerator",
    "bingo_shaping",
    "get_bingo_length_reward",
    "significance_ratios",
]

REFERENCES = ("model", "group")
GROUP_STATISTICS = ("mean", "median", "min", "max")
SCORER_ERRORS = ("raise", "fallback")
SCHEDULE_UPDATES = ("auto", "trainer", "reward")
SCOPES = ("total", "thinking", "answer")
REFERENCE_KEYS = ("prompt", "idx")
HALF_PI = math.pi / 2


def significance_ratios(n_low: float, n_high: float, ref_low: float, ref_high: float) -> tuple[float, float]:
    """
    `(r_low, r_high)` of one response against its reference; `(0, 0)` when the response is empty or either
    reference count is 0 (Bingo's `valid_for_ratio`).

    >>> significance_ratios(6, 10, 3, 20), significance_ratios(6, 10, 0, 20), significance_ratios(0, 0, 3, 20)
    ((2.0, 0.5), (0.0, 0.0), (0.0, 0.0))
    """
    if n_low + n_high <= 0 or ref_low <= 0 or ref_high <= 0:
        return 0.0, 0.0
    return n_low / ref_low, n_high / ref_high


def bingo_shaping(
    correct: bool,
    r_low: float,
    r_high: float,
    w: float,
    lambda_c: float = 5.0,
    lambda_wn: float = 2.0,
    lambda_we: float = 5.0,
) -> float:
    r"""
    Bingo's shaping term (the reward minus the 1/0 verifier score), see the module docstring.

    >>> round(bingo_shaping(True, 0.0, 1.0, 0.0), 6), round(bingo_shaping(True, 2.0, 1.0, 0.0), 6)  # 5 cos 0 ; clip
    (5.0, 0.0)
    >>> round(bingo_shaping(False, 1.0, 0.5, 5 / (math.pi / 2)), 4)  # 2(cos 1 - 1) + 3.1831 * 0.5 - 5
    -4.3278
    """
    c = math.cos(min(max(r_low, 0.0), HALF_PI))
    if correct:
        return lambda_c * c
    return min(0.0, lambda_wn * (c - 1.0) + w * r_high - lambda_we)


def _ols_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys on xs (sklearn's LinearRegression coefficient); 0 for fewer than 2 points."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


class BingoSchedule:
    r"""
    Bingo's dynamic coefficient $w_t$ of $r_{high}$ for wrong answers (the slope block of `RayPPOTrainer.fit`).

    After each training batch $t$ (1-based), with $acc_t$ its accuracy:

    - before the first fit, $w_t = \lambda_{we}/(\pi/2)$;
    - from $t \ge$ `start_step` (and $t \ge 2$), fit the OLS slope $s$ of accuracy against $t$ over the last
      $\min(\text{window}, t-1)$ batches; at the first fit set $\kappa = (\lambda_{we}/(\pi/2))/\max(10^{-6}, |s_0|)$
      ($\kappa = \lambda_{we}/(\pi/2)$ if $s_0 = 0$);
    - $\hat s = \kappa s$; if $\hat s \le$ `threshold`: `count += 1` and
      $w_t = \max(\text{floor}, -\text{decrement}\cdot\text{count})$, else `count = 0` and $w_t = \hat s$.

    `floor` defaults to $-2\lambda_{we}/(\pi/2)$. Steps count training generation batches (one per optimizer step
    with TRL's defaults). For short runs scale `start_step` (paper 50) and `window` (paper 10) with `max_steps`.

    >>> s = BingoSchedule(lambda_we=5.0, start_step=3, window=2)
    >>> [round(s.observe(a), 4) for a in (0.1, 0.2, 0.4, 0.7, 0.75)]  # slopes from t=3: 0.2, 0.3, 0.05
    [3.1831, 3.1831, 3.1831, 4.7746, -0.5]
    >>> s.low_slope_count, round(s.scale, 4)  # kappa = 3.1831 / 0.2 ; 0.3 kappa = 4.77 > 2.5 ; 0.05 kappa = 0.80
    (1, 15.9155)
    """

    state_key = "bingo_schedule"

    def __init__(
        self,
        lambda_we: float = 5.0,
        start_step: int = 50,
        window: int = 10,
        threshold: float = 2.5,
        decrement: float = 0.5,
        floor: float | None = None,
        enabled: bool = True,
    ) -> None:
        _check_number("lambda_we", lambda_we, 0.0)
        for name, value, low in (("schedule_start", start_step, 1), ("schedule_window", window, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")
        _check_number("schedule_threshold", threshold)
        _check_number("schedule_decrement", decrement, 0.0)
        if floor is not None:
            _check_number("schedule_floor", floor)
        self.lambda_we = float(lambda_we)
        self.start_step = start_step
        self.window = window
        self.threshold = float(threshold)
        self.decrement = float(decrement)
        self.base = self.lambda_we / HALF_PI
        self.floor = -2.0 * self.base if floor is None else float(floor)
        self.enabled = bool(enabled)
        self.reset()

    def reset(self) -> None:
        self.steps = 0
        self.history: list[tuple[int, float]] = []  # the last `window` (step, accuracy) points
        self.initial_slope: float | None = None
        self.scale: float | None = None
        self.low_slope_count = 0
        self.w = self.base
        self.last_slope: float | None = None
        self.last_scaled_slope: float | None = None

    @property
    def coefficient(self) -> float:
        """$w_t$ for the next batch."""
        return self.w if self.initial_slope is not None else self.base

    @property
    def active(self) -> bool:
        return self.initial_slope is not None

    def observe(self, accuracy: float) -> float:
        """Record one training batch's accuracy and return the new coefficient."""
        if not math.isfinite(accuracy):
            return self.coefficient
        self.steps += 1
        t = self.steps
        self.history = (self.history + [(t, float(accuracy))])[-self.window :]
        if not self.enabled or t < self.start_step or t < 2:
            return self.coefficient
        look_back = min(self.window, t - 1)
        points = self.history[-look_back:]
        slope = _ols_slope([x for x, _ in points], [y for _, y in points])
        if self.initial_slope is None:
            self.initial_slope = slope
            self.scale = self.base if slope == 0 else self.base / max(1e-6, abs(slope))
        scaled = slope * self.scale
        if scaled <= self.threshold:
            self.low_slope_count += 1
            self.w = max(self.floor, -self.decrement * self.low_slope_count)
        else:
            self.low_slope_count = 0
            self.w = scaled
        self.last_slope, self.last_scaled_slope = slope, scaled
        return self.coefficient

    def state_dict(self) -> dict:
        return {
            "steps": self.steps,
            "history": [list(p) for p in self.history],
            "initial_slope": self.initial_slope,
            "scale": self.scale,
            "low_slope_count": self.low_slope_count,
            "w": self.w,
            "last_slope": self.last_slope,
            "last_scaled_slope": self.last_scaled_slope,
        }

    def load_state_dict(self, state: dict) -> None:
        self.reset()
        self.steps = int(state.get("steps", 0))
        self.history = [(int(x), float(y)) for x, y in state.get("history", [])]
        self.initial_slope = state.get("initial_slope")
        self.scale = state.get("scale")
        self.low_slope_count = int(state.get("low_slope_count", 0))
        self.w = float(state.get("w", self.base))
        self.last_slope = state.get("last_slope")
        self.last_scaled_slope = state.get("last_scaled_slope")


class FrozenReferenceGenerator:
    """
    Samples `num_samples` reference responses per prompt from a frozen copy of the initial policy (loaded lazily,
    on this process's device, the first time it is needed).

    Each batch of prompts is seeded from `seed` and its prompts' keys inside a forked RNG, so the training RNG is
    untouched and, with `batch_size=1`, a prompt's references do not depend on which process or batch meets it first.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        num_samples: int = 4,
        max_new_tokens: int = 1024,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int | None = None,
        generation_kwargs: dict | None = None,
        chat_template_kwargs: dict | None = None,
        model_kwargs: dict | None = None,
        seed: int = 0,
        device: Any = None,
        batch_size: int = 8,
    ) -> None:
        if tokenizer is None:
            raise ValueError("reference='model' needs the policy tokenizer (tokenizer=...) to render and decode.")
        if model is None:
            raise ValueError(
                "reference='model' needs reference_model=<path or Hub name of the initial policy> (the bingo recipe "
                "uses the tokenizer's name_or_path)."
            )
        for name, value in (("reference_samples", num_samples), ("max_new_tokens", max_new_tokens),
                            ("reference_batch_size", batch_size)):  # fmt: skip
            check_positive_int(name, value)
        self.model_ref = model
        self.tokenizer = tokenizer
        self.num_samples = num_samples
        self.max_new_tokens = max_new_tokens
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.top_k = top_k
        self.generation_kwargs = dict(generation_kwargs or {})
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.model_kwargs = dict(model_kwargs or {})
        self.seed = int(seed)
        self.device = device
        self.batch_size = batch_size
        self._model = None
        self.seconds = 0.0

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_model"] = None
        return state

    def _load(self):
        if self._model is None:
            import torch

            device = torch.device(self.device) if self.device is not None else default_device()
            if isinstance(self.model_ref, str):
                from transformers import AutoModelForCausalLM

                model = AutoModelForCausalLM.from_pretrained(self.model_ref, **self.model_kwargs)
            else:
                model = self.model_ref
            self._model = model.to(device).eval()
            self._model.requires_grad_(False)
        return self._model

    def render(self, prompt: Any) -> list[int]:
        tok = self.tokenizer
        if isinstance(prompt, str):
            return tok(prompt, add_special_tokens=True)["input_ids"]
        text = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs)
        return tok(text, add_special_tokens=False)["input_ids"]

    def generate(self, prompts: Sequence[Any], keys: Sequence[str]) -> list[list[str]]:
        """`num_samples` decoded responses (special tokens skipped, as TRL decodes completions) per prompt."""
        import torch
        from transformers import GenerationConfig

        model = self._load()
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        sample = self.temperature > 0
        per_prompt = self.num_samples if sample else 1  # greedy: one decode, repeated K times
        config = GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            do_sample=sample,
            temperature=self.temperature if self.temperature > 0 else None,
            top_p=self.top_p,
            top_k=self.top_k,
            pad_token_id=pad,
            eos_token_id=tok.eos_token_id,
            bos_token_id=tok.bos_token_id,
            num_return_sequences=per_prompt,
            **self.generation_kwargs,
        )
        out: list[list[str]] = []
        start_time = time.perf_counter()
        device = next(model.parameters()).device
        for start in range(0, len(prompts), self.batch_size):
            batch = [self.render(p) for p in prompts[start : start + self.batch_size]]
            width = max(len(ids) for ids in batch)
            input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, ids in enumerate(batch):  # left padding for decoder-only generation
                input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
                mask[row, width - len(ids) :] = 1
            seed_text = f"{self.seed}:" + "|".join(keys[start : start + self.batch_size])
            seed = int.from_bytes(hashlib.sha256(seed_text.encode()).digest()[:4], "little")
            devices = [device] if device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices), torch.inference_mode():
                torch.manual_seed(seed)
                generated = model.generate(
                    input_ids=input_ids.to(device), attention_mask=mask.to(device), generation_config=config
                )
            new = generated[:, width:].tolist()
            for row in range(len(batch)):
                samples = new[row * per_prompt : (row + 1) * per_prompt] * (self.num_samples // per_prompt)
                out.append(
                    [tok.decode(_strip_pad(ids, pad, tok.eos_token_id), skip_special_tokens=True) for ids in samples]
                )
        self.seconds += time.perf_counter() - start_time
        return out


def _strip_pad(ids: list[int], pad: int, eos: int | None) -> list[int]:
    # generate pads finished sequences; cut after the first EOS (kept, like TRL's completion_ids)
    if eos is not None and eos in ids:
        return ids[: ids.index(eos) + 1]
    while ids and ids[-1] == pad and pad != eos:
        ids = ids[:-1]
    return ids


def get_bingo_length_reward(
    scorer: Any,
    reference: str = "model",
    group_statistic: str = "mean",
    num_generations: int | None = None,
    reference_model: Any = None,
    tokenizer: Any = None,
    reference_samples: int = 4,
    reference_key: str = "prompt",
    reference_batch_size: int = 8,
    max_new_tokens: int = 1024,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = None,
    generation_kwargs: dict | None = None,
    chat_template_kwargs: dict | None = None,
    reference_model_kwargs: dict | None = None,
    lambda_c: float = 5.0,
    lambda_wn: float = 2.0,
    lambda_we: float = 5.0,
    threshold: float = 0.5,
    normalize: str = "chunk_minmax",
    scope: str = "total",
    include_correctness: bool = False,
    dynamic: bool = True,
    schedule_start: int = 50,
    schedule_window: int = 10,
    schedule_threshold: float = 2.5,
    schedule_decrement: float = 0.5,
    schedule_floor: float | None = None,
    schedule_update: str = "auto",
    on_scorer_error: str = "raise",
    fallback_scorer: Any = None,
    scorer_kwargs: dict | None = None,
    answer_after_think: bool = True,
    require_think_close: bool = False,
    seed: int = 0,
    device: Any = None,
) -> _BingoLengthReward:
    r"""
    Bingo's significance-aware, dynamic length reward (arXiv 2506.08125; `methods.md` §1). Formula, reference
    options and their cost: see the module docstring.

    Args:
        scorer: a `SignificanceScorer`, or a spec for `trl_efficient.significance.build_scorer`: a checkpoint path or
            Hub name (LLMLingua-2, in-process), `"self-information:<causal LM>"`, or `"http://host:port"` (a
            `trl-efficient serve-scorer` server). Built lazily, on first use, on this process's device; the recipe
            checks the spec before the policy loads (`trl_efficient.significance.check_scorer`), so call that too
            when building this reward yourself, to fail before training rather than at the first reward call.
        reference (`str`, *optional*, defaults to `"model"`): `"model"` (cached frozen-policy references) or
            `"group"` (a statistic of the group's own rollouts).
        group_statistic (`str`, *optional*, defaults to `"mean"`): `"mean"`, `"median"`, `"min"` or `"max"`
            (`reference="group"`).
        num_generations (`int`, *optional*): `G`, for `reference="group"` outside `EfficientGRPOTrainer`.
        reference_model: path, Hub name or loaded causal LM of the frozen initial policy (`reference="model"`).
        tokenizer: the policy tokenizer (`reference="model"`: renders prompts, decodes references).
        reference_samples (`int`, defaults to `4`): references per prompt, `K`; their counts are averaged.
        reference_key (`str`, defaults to `"prompt"`): cache key, the prompt text or the dataset's `idx` column.
        reference_batch_size (`int`, defaults to `8`): prompts per reference `generate` call (1: references
            independent of batching, e.g. for exact 1-vs-N-process runs).
        max_new_tokens, temperature, top_p, top_k, generation_kwargs, chat_template_kwargs, reference_model_kwargs:
            reference generation (the recipe copies them from the training config).
        lambda_c (`float`, defaults to `5`), lambda_wn (`2`), lambda_we (`5`): the coefficients of the formula.
        threshold (`float`, defaults to `0.5`): $\tau$, the normalised significance below which a unit is
            insignificant (the run script's 0.5; the function default upstream is 0.3).
        normalize (`str`, defaults to `"chunk_minmax"`): Bingo's per-chunk min-max normalisation, or `"none"`.
        scope (`str`, defaults to `"total"`): score the whole response, only the thinking, or only the answer.
        include_correctness (`bool`, defaults to `False`): return the full $R$ = 1[correct] + shaping.
        dynamic (`bool`, defaults to `True`): run the `BingoSchedule` (else $w_t$ stays $\lambda_{we}/(\pi/2)$).
        schedule_start (`int`, `50`), schedule_window (`10`), schedule_threshold (`2.5`), schedule_decrement
            (`0.5`), schedule_floor (default $-2\lambda_{we}/(\pi/2)$): see `BingoSchedule`.
        schedule_update (`str`, defaults to `"auto"`): `"trainer"` (`EfficientGRPOTrainer` calls `update(batch)`
            with the gathered batch, training only), `"reward"` (each call with a `trainer_state` updates from its
            gathered correctness: for a plain `GRPOTrainer` without evaluation), `"auto"` (trainer when the
            `group_size` column is present).
        on_scorer_error (`str`, defaults to `"raise"`): when a scorer server is unreachable, stop the run with
            the client's error naming the URL, or `"fallback"`: switch to `fallback_scorer` (a scorer or spec, e.g.
            the same checkpoint in-process) and log `bingo/scorer_fallback`. Never zeros.
        scorer_kwargs (`dict`, *optional*): keyword arguments of `build_scorer` (device, batch_size, token, ...).
        answer_after_think, require_think_close: correctness options, as in `get_correctness_reward`.
        seed (`int`): seeds reference generation. device: for the reference model (default: this process's).

    Returns a picklable callable named `bingo_length_reward` with `state_dict`/`load_state_dict`/`update`
    (checkpointed and updated by `EfficientGRPOTrainer`). Logs `bingo/*` metrics through TRL's `log_metric`.
    """
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {list(REFERENCES)}, got {reference!r}.")
    if group_statistic not in GROUP_STATISTICS:
        raise ValueError(f"group_statistic must be one of {list(GROUP_STATISTICS)}, got {group_statistic!r}.")
    if reference_key not in REFERENCE_KEYS:
        raise ValueError(f"reference_key must be one of {list(REFERENCE_KEYS)}, got {reference_key!r}.")
    if num_generations is not None and (
        isinstance(num_generations, bool) or not isinstance(num_generations, int) or num_generations < 1
    ):
        raise ValueError(f"num_generations must be a positive int or None, got {num_generations!r}.")
    for name, value in (("lambda_c", lambda_c), ("lambda_wn", lambda_wn), ("lambda_we", lambda_we)):
        _check_number(name, value, 0.0)
    _check_number("threshold", threshold, 0.0, 1.0)
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {list(NORMALIZATIONS)}, got {normalize!r}.")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {list(SCOPES)}, got {scope!r}.")
    if schedule_update not in SCHEDULE_UPDATES:
        raise ValueError(f"schedule_update must be one of {list(SCHEDULE_UPDATES)}, got {schedule_update!r}.")
    if on_scorer_error not in SCORER_ERRORS:
        raise ValueError(f"on_scorer_error must be one of {list(SCORER_ERRORS)}, got {on_scorer_error!r}.")
    if on_scorer_error == "fallback" and fallback_scorer is None:
        raise ValueError("on_scorer_error='fallback' needs fallback_scorer=<scorer or spec, e.g. a checkpoint path>.")
    flags = {"include_correctness": include_correctness, "dynamic": dynamic, "answer_after_think": answer_after_think,
             "require_think_close": require_think_close}  # fmt: skip
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be a bool, got {value!r}.")
    _check_scorer_spec("scorer", scorer)
    if fallback_scorer is not None:
        _check_scorer_spec("fallback_scorer", fallback_scorer)
    schedule = BingoSchedule(lambda_we, schedule_start, schedule_window, schedule_threshold, schedule_decrement,
                             schedule_floor, enabled=dynamic)  # fmt: skip
    generator = None
    if reference == "model":
        generator = FrozenReferenceGenerator(
            reference_model,
            tokenizer,
            reference_samples,
            max_new_tokens,
            temperature,
            top_p,
            top_k,
            generation_kwargs,
            chat_template_kwargs,
            reference_model_kwargs,
            seed,
            device,
            reference_batch_size,
        )
    return _BingoLengthReward(
        scorer=scorer,
        scorer_kwargs=dict(scorer_kwargs or {}),
        reference=reference,
        group_statistic=group_statistic,
        num_generations=num_generations,
        generator=generator,
        reference_key=reference_key,
        lambdas=(float(lambda_c), float(lambda_wn), float(lambda_we)),
        threshold=float(threshold),
        normalize=normalize,
        scope=scope,
        include_correctness=include_correctness,
        schedule=schedule,
        schedule_update=schedule_update,
        on_scorer_error=on_scorer_error,
        fallback_scorer=fallback_scorer,
        correctness_options=(answer_after_think, require_think_close),
    )


def _check_scorer_spec(name: str, spec: Any) -> None:
    if hasattr(spec, "score") and callable(spec.score):
        return
    if not isinstance(spec, str) or not spec:
        raise ValueError(
            f"{name} must be a scorer (an object with score()) or a spec string: a checkpoint path or Hub name, "
            f"'self-information:<model>' or 'http://host:port'; got {spec!r}."
        )


def _reduce(values: list[float], statistic: str) -> float:
    if statistic == "mean":
        return sum(values) / len(values)
    if statistic == "median":
        return float(statistics.median(values))
    return float(min(values) if statistic == "min" else max(values))


class _BingoLengthReward(StatefulComponent):
    # A class rather than a closure so it pickles for TRL's async rollout worker (loaded models are dropped and
    # rebuilt lazily).
    __name__ = "bingo_length_reward"  # stable metric key: rewards/bingo_length_reward/mean
    state_key = "bingo_length_reward"

    def __init__(self, scorer, scorer_kwargs, reference, group_statistic, num_generations, generator, reference_key,
                 lambdas, threshold, normalize, scope, include_correctness, schedule, schedule_update,
                 on_scorer_error, fallback_scorer, correctness_options) -> None:  # fmt: skip
        self.scorer_spec = scorer
        self.scorer_kwargs = scorer_kwargs
        self.reference = reference
        self.group_statistic = group_statistic
        self.num_generations = num_generations
        self.generator = generator
        self.reference_key = reference_key
        self.lambda_c, self.lambda_wn, self.lambda_we = lambdas
        self.threshold = threshold
        self.normalize = normalize
        self.scope = scope
        self.include_correctness = include_correctness
        self.schedule = schedule
        self.schedule_update = schedule_update
        self.on_scorer_error = on_scorer_error
        self.fallback_spec = fallback_scorer
        self.answer_after_think, self.require_think_close = correctness_options
        self.reference_cache: dict[str, list[list[int]]] = {}
        self._scorer = scorer if not isinstance(scorer, str) else None
        self._fallback = None if fallback_scorer is None or isinstance(fallback_scorer, str) else fallback_scorer
        self.using_fallback = False

    # --- pickling: keep specs, drop loaded models -------------------------------------------------------------
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if isinstance(self.scorer_spec, str):
            state["_scorer"] = None
        if isinstance(self.fallback_spec, str):
            state["_fallback"] = None
        return state

    # --- scorer ------------------------------------------------------------------------------------------------
    @property
    def scorer(self):
        if self._scorer is None:
            self._scorer = build_scorer(self.scorer_spec, **{"keep_units": False, **self.scorer_kwargs})
        return self._scorer

    def _fallback_scorer(self):
        if self._fallback is None:
            self._fallback = build_scorer(self.fallback_spec, **{"keep_units": False, **self.scorer_kwargs})
        return self._fallback

    def _score(self, texts: list[str]) -> list[tuple[int, int]]:
        if not texts:
            return []
        results = None
        if not self.using_fallback:
            try:
                results = self.scorer.score(texts)
            except ScorerUnavailableError as err:
                if self.on_scorer_error == "raise":
                    raise
                logger.error(
                    "%s; falling back to the in-process scorer %r for the rest of the run.", err, self.fallback_spec
                )
                self.using_fallback = True
        if results is None:
            results = self._fallback_scorer().score(texts)
        if len(results) != len(texts):
            raise RuntimeError(f"the scorer returned {len(results)} results for {len(texts)} texts.")
        return count_significance_batch(results, self.threshold, self.normalize)

    def _scoped(self, text: str) -> str:
        if self.scope == "total":
            return text
        thinking, answer, _ = split_thinking(text)
        return thinking if self.scope == "thinking" else answer

    # --- references ---------------------------------------------------------------------------------------------
    def key_for(self, prompt: Any = None, idx: Any = None) -> str:
        """The reference-cache key of a prompt (its text hash, or its `idx`)."""
        if self.reference_key == "idx":
            if idx is None:
                raise ValueError("reference_key='idx' needs an `idx` column in the dataset.")
            return f"idx:{idx}"
        if prompt is None:
            raise ValueError("reference='model' needs the prompts (TRL passes them as `prompts`).")
        if isinstance(prompt, str):
            blob = prompt
        else:
            blob = json.dumps(prompt, sort_keys=True, ensure_ascii=False, default=str)
        return "p:" + hashlib.sha1(blob.encode("utf-8")).hexdigest()[:20]

    def add_references(self, references: dict[str, Sequence[str]]) -> None:
        """Score and cache reference responses made elsewhere (e.g. pre-generated with vLLM), keyed by `key_for`.
        Call it identically on every process."""
        keys = list(references)
        texts = [self._scoped(t) for k in keys for t in references[k]]
        counts = iter(self._score(texts))
        for key in keys:
            self.reference_cache[key] = [list(next(counts)) for _ in references[key]]

    def _generate_missing(self, prompts: list, keys: list[str]) -> dict[str, list[str]]:
        """Reference texts for the prompts of this call that are not cached yet (each distinct prompt once)."""
        missing: dict[str, Any] = {}
        for prompt, key in zip(prompts, keys):
            if key not in self.reference_cache and key not in missing:
                missing[key] = prompt
        if not missing:
            return {}
        generated = self.generator.generate(list(missing.values()), list(missing))
        return dict(zip(missing, generated))

    # --- the reward -----------------------------------------------------------------------------------------------
    def __call__(self, completions: list, solution: list, prompts: list | None = None, **kwargs) -> list[float | None]:
        n = len(completions)
        log_metric = kwargs.get("log_metric")
        log = log_metric if callable(log_metric) else None
        start = time.perf_counter()
        correct = [
            is_correct(c, g, self.answer_after_think, self.require_think_close)
            for c, g in zip(completions, solution, strict=True)
        ]
        keys: list[str | None] = [None] * n
        ref_texts: dict[str, list[str]] = {}
        ref_seconds = self.generator.seconds if self.generator is not None else 0.0
        if self.reference == "model":
            idxs = kwargs.get("idx")
            if prompts is None and self.reference_key == "prompt":
                raise ValueError("reference='model' needs the prompts (TRL passes them as `prompts`).")
            keys = [
                self.key_for(prompts[i] if prompts is not None else None, idxs[i] if idxs is not None else None)
                for i in range(n)
            ]
            ref_texts = self._generate_missing(list(prompts) if prompts is not None else [None] * n, keys)
        # one batched scorer call: this call's completions, then any new references
        texts = [self._scoped(completion_text(c)) for c in completions]
        texts += [self._scoped(t) for samples in ref_texts.values() for t in samples]
        all_counts = iter(self._score(texts))
        counts = [next(all_counts) for _ in range(n)]
        new_refs = {key: [list(next(all_counts)) for _ in samples] for key, samples in ref_texts.items()}
        group_size = None
        if self.reference == "group":
            group_size = resolve_group_size(self.num_generations, kwargs, "get_bingo_length_reward()")
        # One collective per call on every process: rows (and new references) of all processes, in rank order.
        local = {"rows": [(keys[i], correct[i], *counts[i]) for i in range(n)], "refs": new_refs}
        parts, rank = gather_rows([local])
        offset = sum(len(p["rows"]) for p in parts[:rank])
        rows = [row for p in parts for row in p["rows"]]
        for part in parts:  # the lowest rank's references win, so every process holds the same cache
            for key, value in part["refs"].items():
                self.reference_cache.setdefault(key, value)
        refs = self._reference_counts(rows, group_size)
        w = self.schedule.coefficient
        rewards: list[float | None] = []
        ratios = []
        for (_, ok, n_low, n_high), (ref_low, ref_high) in zip(rows, refs):
            r_low, r_high = significance_ratios(n_low, n_high, ref_low, ref_high)
            ratios.append((r_low, r_high))
            if ok is None:
                rewards.append(None)
                continue
            shaped = bingo_shaping(ok, r_low, r_high, w, self.lambda_c, self.lambda_wn, self.lambda_we)
            rewards.append(shaped + (1.0 if ok and self.include_correctness else 0.0))
        self._maybe_self_update(rows, kwargs)
        if log is not None:
            ref_seconds = (self.generator.seconds if self.generator is not None else 0.0) - ref_seconds
            self._log(log, rows, refs, ratios, rewards, w, time.perf_counter() - start, ref_seconds, len(new_refs))
        return rewards[offset : offset + n]

    def _reference_counts(self, rows: list, group_size: int | None) -> list[tuple[float, float]]:
        if self.reference == "model":
            out = []
            for key, *_ in rows:
                samples = self.reference_cache[key]
                out.append((sum(s[0] for s in samples) / len(samples), sum(s[1] for s in samples) / len(samples)))
            return out
        if len(rows) % group_size != 0:
            raise ValueError(
                f"bingo_length_reward(reference='group') got {len(rows)} rows in total (all processes), not a multiple "
                f"of the group size {group_size}: it needs every rollout of each prompt, consecutively."
            )
        out = []
        for start in range(0, len(rows), group_size):
            group = rows[start : start + group_size]
            stat = (
                _reduce([r[2] for r in group], self.group_statistic),
                _reduce([r[3] for r in group], self.group_statistic),
            )
            out.extend([stat] * group_size)
        return out

    # --- schedule ---------------------------------------------------------------------------------------------------
    def _maybe_self_update(self, rows: list, kwargs: dict) -> None:
        mode = self.schedule_update
        if mode == "auto":
            mode = "trainer" if kwargs.get("group_size") is not None else "reward"
        if mode != "reward" or kwargs.get("trainer_state") is None:
            return
        known = [ok for _, ok, _, _ in rows if ok is not None]
        if known:
            self.schedule.observe(sum(1.0 for ok in known if ok) / len(known))

    def update(self, batch) -> None:
        """Called by `EfficientGRPOTrainer` once per training batch with the gathered `GroupBatch`."""
        if self.schedule_update == "reward":
            return
        import torch

        correct = batch.correct
        if batch.correctness_index is None:
            if not (self.include_correctness and self.__name__ in batch.reward_names):
                raise ValueError(
                    "Bingo's dynamic schedule needs the training accuracy: add a correctness reward "
                    "(trl_efficient.rewards.correctness_reward) or build the Bingo reward with "
                    "include_correctness=True."
                )
            column = batch.rewards[:, batch.reward_names.index(self.__name__)].float()
            correct = torch.where(torch.isnan(column), column, (column >= 1.0 - 1e-6).float())  # correct R >= 1
        accuracy = torch.nanmean(correct).item()
        if accuracy == accuracy:
            self.schedule.observe(accuracy)

    # --- metrics ----------------------------------------------------------------------------------------------------
    def _log(self, log, rows, refs, ratios, rewards, w, seconds, ref_seconds, num_new) -> None:
        m = len(rows)
        if m == 0:
            return
        lows = [r[2] for r in rows]
        highs = [r[3] for r in rows]
        nonempty = [(lo, hi) for lo, hi in zip(lows, highs) if lo + hi > 0]
        log("bingo/insignificant_tokens", sum(lows) / m)
        log("bingo/significant_tokens", sum(highs) / m)
        if nonempty:
            log("bingo/insignificant_ratio", sum(lo / (lo + hi) for lo, hi in nonempty) / len(nonempty))
            log("bingo/significant_ratio", sum(hi / (lo + hi) for lo, hi in nonempty) / len(nonempty))
        log("bingo/ref_insignificant_tokens", sum(r[0] for r in refs) / m)
        log("bingo/ref_significant_tokens", sum(r[1] for r in refs) / m)
        log("bingo/low_to_ref_ratio", sum(r[0] for r in ratios) / m)
        log("bingo/high_to_ref_ratio", sum(r[1] for r in ratios) / m)
        log("bingo/w_t", w)
        log("bingo/schedule_active", 1.0 if self.schedule.active else 0.0)
        log("bingo/low_slope_count", float(self.schedule.low_slope_count))
        for label, want in (("correct", True), ("wrong", False)):
            values = [r - (1.0 if want and self.include_correctness else 0.0) for r, row in zip(rewards, rows)
                      if r is not None and row[1] is want]  # fmt: skip
            if values:
                log(f"bingo/shaping_{label}", sum(values) / len(values))
        log("bingo/seconds", seconds)
        if self.reference == "model":
            log("bingo/reference_seconds", ref_seconds)
            log("bingo/reference_new_prompts", float(num_new))
            log("bingo/reference_cache_size", float(len(self.reference_cache)))
        log("bingo/scorer_fallback", 1.0 if self.using_fallback else 0.0)

    # --- state -----------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "schedule": self.schedule.state_dict(),
            "reference_cache": {k: [list(s) for s in v] for k, v in self.reference_cache.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.schedule.load_state_dict(state.get("schedule", {}))
        self.reference_cache = {
            str(k): [[int(a), int(b)] for a, b in v] for k, v in state.get("reference_cache", {}).items()
        }
