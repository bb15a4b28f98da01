"""
The testbed's over-thinking base model: a tiny Qwen2 trained from scratch, on CPU, on verbose teacher traces.

`train_base_model(output_dir, BaseModelConfig())` builds a tiny byte-level BPE tokenizer whose corpus covers the
world's vocabulary (`trl_efficient.testing.tiny.build_tiny_tokenizer(extra_corpus=world_corpus())`), a tiny Qwen2
(`trl_efficient.testing.tiny.build_tiny_model`), and trains it by next-token prediction on the completion part of chat-
formatted (prompt, teacher trace) pairs (`world.make_trace`: necessary steps mixed with re-checks, restatements and
hesitations at random verbosity, plus occasional merged steps). Everything is seeded.

`resolve_base_model("testbed:base")` returns the cached directory, training it first when missing. The cache lives
under `$TRL_EFFICIENT_CACHE/testbed/` (default `~/.cache/trl_efficient/overthinking/`), keyed by a hash of the config,
so changing a setting trains a new model instead of reusing a stale one. Sizes: `"testbed:base"` (the default,
a few minutes on two CPU cores), `"testbed:formats"` (the same, plus 30% of prompts in the methods' prompt formats
with random values that its traces follow, loosely: what `testbed compare` trains recipes from; see below) and
`"testbed:small"` (seconds; for tests, it barely learns).

The world's rule for the method prompt formats (`testbed:formats`, `method_prompt_share=0.3`,
`method_prompt_follow=1.0`): a pre-training example carries a format with probability 0.3 (L1's " Think for N
tokens." / " Think for maximum N tokens.", HBPO's "<think> I will answer the question with N tokens" prefill, SABER's
tier system prompts, N uniform in 5-200 tokens). Its trace is drawn as usual, then replaced by `follow_trace`
(`method_prompt_follow` is the probability of that): among the task's candidate traces of verbosity 0-3, the usual
range (the verbosity-0 one is the shortest correct trace),
the one whose length is closest to N (L1-Exact), or the usual trace if it fits in N, else the longest candidate that
fits, else the shortest correct trace (L1-Max, HBPO; SABER on the thinking part). The verbosity range limits how
closely a trace can match and the usual draw is kept whenever it fits a maximum (in the data, target-length
correlations of about 0.6 for L1-Exact, 0.3 for L1-Max, 0.4 for HBPO), so the base model follows the formats
*loosely*, like an instruction-tuned model before length-control RL (the value is informative, noisily),
and a value below the task's shortest correct trace never teaches it to drop steps. What the methods' RL has to add
is *tighter* following: their checks compare the trained model with this base model under the same prompts
(`testbed.checks`). `testbed:base` never sees a format (both fields 0), and its cache key and data are those of the
model the quickstart's numbers come from.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import random
import tempfile
import time
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from ..testing.tiny import save_pretrained_atomic
from . import PINNED_WEIGHTS
from .world import (
    THINK_CLOSE,
    THINK_OPEN,
    WORLD_V2,
    WORLD_V3,
    TraceStyle,
    make_tasks,
    make_trace,
    minimal_trace,
    world_corpus,
)

logger = logging.getLogger(__name__)

__all__ = [
    "BASE_MODEL_SIZES",
    "BaseModelConfig",
    "base_model_id",
    "cache_root",
    "PINNED_WEIGHTS",
    "pinned_model_dir",
    "resolve_base_model",
    "train_base_model",
]

FORMAT_VERSION = 4  # bump when the world or the trace format changes: old cached models are then not reused
MARKER = "trl_efficient_testbed.json"


@dataclass
class BaseModelConfig:
    """Size, data and optimisation of the base model (all seeded)."""

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    max_steps: int = 1500
    batch_size: int = 32
    learning_rate: float = 3e-3
    warmup_steps: int = 50
    weight_decay: float = 0.01
    num_train_tasks: int = 40000
    min_ops: int = 1
    max_ops: int = 8
    seed: int = 0
    style: TraceStyle = field(default_factory=TraceStyle)
    # share of examples whose prompt carries a method's prompt format with a random value (`METHOD_PROMPT_FORMATS`);
    # 0 for the plain base model
    method_prompt_share: float = 0.0
    # probability that such an example's trace follows the prompted value (`follow_trace`: its verbosity is chosen so
    # that its length approaches the target / fits the budget); otherwise the trace ignores the value. 0 = never.
    method_prompt_follow: float = 0.0
    # range (tokens) of the random budgets / targets of the format examples
    method_prompt_values: tuple[int, int] = (5, 200)
    # how a "max" rule picks among the candidates (`follow_trace`): "usual" keeps the usual draw when it fits (world
    # v1: loose), "longest" takes the longest candidate that fits (world v2: length tracks the budget)
    follow_fit: str = "usual"
    # whether the shortest follow candidate slips like the teacher (`follow_trace(slips=True)`: a verbosity-0 draw of
    # the style, slips unchecked) instead of being the error-free minimal trace; world v2: True, so that a tight
    # budget is not a switch that turns slips off
    follow_slips: bool = False

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["style"] = self.style.to_dict()
        for name in ("method_prompt_share", "method_prompt_follow"):
            if not out[name]:
                out.pop(name)  # a field at 0 leaves the cache key of the models trained before it unchanged
        for name, v1 in (("method_prompt_values", (5, 200)), ("follow_fit", "usual"), ("follow_slips", False)):
            if tuple(out[name]) == v1 if isinstance(v1, tuple) else out[name] == v1:
                out.pop(name)
        return out

    def key(self) -> str:
        blob = json.dumps({"v": FORMAT_VERSION, **self.to_dict()}, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()[:10]


# world v2 (docs/testbed.md, "World v2"): over-thinks ~2.7x the floor (easy tasks relatively more), slips on long
# chains and repairs them with checks, and has seen the method formats with budgets of 16-256 tokens whose traces take
# the longest candidate that fits
_V2 = BaseModelConfig(
    style=WORLD_V2,
    max_steps=3000,
    method_prompt_share=0.3,
    method_prompt_follow=1.0,
    method_prompt_values=(16, 256),
    follow_fit="longest",
    follow_slips=True,
)
BASE_MODEL_SIZES: dict[str, BaseModelConfig] = {
    "base": BaseModelConfig(),
    # the base model that has also seen the methods' prompt formats and follows them loosely (what `testbed compare`
    # trains from): the traces of the format examples follow the prompted value, loosely (`follow_trace`)
    "formats": BaseModelConfig(method_prompt_share=0.3, method_prompt_follow=1.0),
    "v2": _V2,
    # world v3 (docs/testbed.md, "World v3"): v2's base trained on world v3's teacher (more slips, fewer checks, more
    # merged steps, a little more filler); everything else, the formats included, as v2
    "v3": dataclasses.replace(_V2, style=WORLD_V3),
    "small": BaseModelConfig(
        hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, max_steps=30, batch_size=16, num_train_tasks=480
    ),
}


def cache_root() -> str:
    root = os.environ.get("TRL_EFFICIENT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "trl_efficient")
    return os.path.join(root, "testbed")


def build_testbed_tokenizer(style: TraceStyle | None = None):
    """The testbed tokenizer: byte-level BPE over `world.world_corpus(style)` (the v1 corpus unless `style` is a
    world-v2 style, whose framing sentences are then words of the vocabulary)."""
    from ..testing.tiny import build_tiny_tokenizer

    return build_tiny_tokenizer(extra_corpus=world_corpus(style), vocab_size=640)


def _as_reloaded(tokenizer, model):
    """The tokenizer as `AutoTokenizer.from_pretrained` will give it back next to this model.

    transformers 5 loads a tokenizer saved next to a Qwen2 config as `Qwen2Tokenizer`, whose pre-tokenizer splits
    every digit off on its own (`" 4"` -> `" "`, `"4"`), unlike the in-memory tokenizer. Training on the reloaded
    tokenizer keeps training, GRPO and evaluation on the same token sequences.
    """
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        model.config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        return AutoTokenizer.from_pretrained(tmp)


METHOD_PROMPT_FORMATS = ("l1", "l1-max", "hbpo", "saber", "saber-unlimited")


def method_prompt_mode(kind: str, value: int):
    """The `EvalMode` of one method prompt format with value `value` (the same prompt text the recipes train and
    evaluate with: L1's " Think for N tokens." suffixes, HBPO's budget prefill, SABER's tier system prompts).

    >>> method_prompt_mode("hbpo", 48).prefill, method_prompt_mode("l1-max", 60).user_suffix
    ('<think> I will answer the question with 48 tokens', ' Think for maximum 60 tokens.')
    """
    from ..eval.evaluate import EvalMode, parse_mode
    from ..prompts import saber_system_prompt

    if kind in ("l1", "l1-max", "hbpo"):
        return parse_mode(f"{kind}:{value}")[0]
    if kind == "saber":
        return EvalMode(f"saber:{value}", system=saber_system_prompt("budget", value), value=value)
    if kind == "saber-unlimited":
        return EvalMode("saber:unlimited", system=saber_system_prompt("unlimited"))
    raise ValueError(f"Unknown method prompt format {kind!r}; choose one of {METHOD_PROMPT_FORMATS}.")


# How each format's value constrains a followed trace: "exact" = length closest to the value (L1-Exact's target),
# "max" = length at most the value (L1-Max's maximum, HBPO's budget), "thinking-max" = thinking part at most the value
# (SABER's tier); None = no value (SABER's unlimited tier: the trace is drawn as usual)
FOLLOW_RULES = {"l1": "exact", "l1-max": "max", "hbpo": "max", "saber": "thinking-max", "saber-unlimited": None}


def follow_trace(task, trace: str, kind: str, value: int, rng: random.Random, style: TraceStyle, measure,
                 fit: str = "usual", slips: bool = False) -> str:  # fmt: skip
    """The world's rule for a base model that follows the method prompt formats loosely (`testbed:formats`).

    Candidates are `make_trace` draws of the same task at each verbosity 0..3 (two each, the usual range, no merged
    steps, so none is
    shorter than the shortest correct trace, which is the verbosity-0 draw); `measure(text, thinking_only)` counts
    tokens. "exact" (L1-Exact): the candidate whose length is closest to `value`; "max" (L1-Max, HBPO): `trace` (the
    usual draw) if it fits in `value` and is not shorter than the shortest correct trace, else the longest candidate
    that fits, else the shortest correct trace;
    "thinking-max" (SABER's tiers): the same on the thinking part. A value below the shortest correct trace therefore
    gets the shortest correct trace, never a shorter (wrong-prone) one. With `fit="longest"` (world v2) a "max" rule
    always takes the longest candidate that fits, so the length tracks the budget. There is one verbosity level per
    entry of `style.verbosity_weights` (0-3 in world v1, 0-4 in world v2). With `slips=True` (world v2) the shortest
    candidate is a verbosity-0 draw of `style` (the minimal trace's sentences, but its late steps slip unchecked, as
    the teacher's do) rather than the error-free minimal trace, so a budget too tight for checks costs accuracy on
    long chains instead of switching slips off.

    >>> from trl_efficient.overthinking.world import Task
    >>> t = Task(4, (("+", 7),) * 3)
    >>> count = lambda text, thinking_only: len(text.split())
    >>> follow_trace(t, "x " * 100, "l1-max", 5, random.Random(0), TraceStyle(), count) == minimal_trace(t)
    True
    """
    rule = FOLLOW_RULES[kind]
    if rule is None:
        return trace
    flat = dataclasses.replace(style, skip_prob=0.0)
    shortest = make_trace(task, rng, dataclasses.replace(flat, verbosity_weights=(1.0,))) if slips else None
    candidates = [shortest or minimal_trace(task)]
    for level in range(1, len(style.verbosity_weights)):
        weights = (0.0,) * level + (1.0,)
        candidates += [make_trace(task, rng, dataclasses.replace(flat, verbosity_weights=weights)) for _ in range(2)]
    thinking_only = rule == "thinking-max"
    lengths = [measure(c, thinking_only) for c in candidates]
    if rule == "exact":
        best = min(abs(n - value) for n in lengths)
        return rng.choice([c for c, n in zip(candidates, lengths, strict=True) if abs(n - value) == best])
    if fit == "usual" and lengths[0] <= measure(trace, thinking_only) <= value:  # the usual draw fits (no merged step)
        return trace
    fitting = [(n, c) for c, n in zip(candidates, lengths, strict=True) if n <= value]
    return max(fitting, key=lambda nc: nc[0])[1] if fitting else candidates[0]


def _encode_examples(tokenizer, config: BaseModelConfig):
    """(prompt ids, completion ids) pairs. With `method_prompt_share > 0`, that share of the prompts carries a
    method's prompt format (`METHOD_PROMPT_FORMATS`) with a random value, drawn from its own seeded stream. The trace
    is first drawn exactly as for a plain prompt; with probability `method_prompt_follow` (its own seeded stream) it
    is then replaced by `follow_trace` (length follows the value), otherwise the value carries no meaning for it. An
    HBPO prefill replaces the trace's opening `<think>` (and the budget counts the tokens after the prefill). With
    both fields at 0 (`testbed:base`) the data are those of the models trained before these fields existed."""
    from ..eval.evaluate import build_prompt_text
    from .data import task_prompt

    rng = random.Random(config.seed + 1)
    format_rng = random.Random(config.seed + 3)
    follow_rng = random.Random(config.seed + 4)
    tasks = make_tasks(config.num_train_tasks, seed=config.seed, min_ops=config.min_ops, max_ops=config.max_ops)
    examples = []
    for task in tasks:
        trace = make_trace(task, rng, config.style)
        if config.method_prompt_share and format_rng.random() < config.method_prompt_share:
            kind, value = format_rng.choice(METHOD_PROMPT_FORMATS), format_rng.randint(*config.method_prompt_values)
            mode = method_prompt_mode(kind, value)
            prompt = build_prompt_text(task_prompt(task), mode, tokenizer)
            if config.method_prompt_follow and follow_rng.random() < config.method_prompt_follow:
                prefill = bool(mode.prefill)

                def measure(text, thinking_only, prefill=prefill):
                    if thinking_only:
                        text = text[: text.rindex(THINK_CLOSE) + len(THINK_CLOSE)]
                    if prefill and text.startswith(THINK_OPEN):
                        text = text[len(THINK_OPEN) :]
                    return len(tokenizer(text, add_special_tokens=False)["input_ids"]) + (not thinking_only)  # + EOS

                trace = follow_trace(task, trace, kind, value, follow_rng, config.style, measure, config.follow_fit,
                                     config.follow_slips)  # fmt: skip
            if mode.prefill:
                trace = trace[len(THINK_OPEN) :] if trace.startswith(THINK_OPEN) else trace
        else:
            prompt = tokenizer.apply_chat_template(task_prompt(task), tokenize=False, add_generation_prompt=True)
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c_ids = tokenizer(trace, add_special_tokens=False)["input_ids"]
        examples.append((p_ids, c_ids + [tokenizer.eos_token_id]))
    return examples


def _batch(examples, pad_id):
    width = max(len(p) + len(c) for p, c in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for i, (p, c) in enumerate(examples):
        seq = p + c
        ids[i, : len(seq)] = torch.tensor(seq)
        labels[i, len(p) : len(seq)] = torch.tensor(c)
        mask[i, : len(seq)] = 1
    return ids, labels, mask


def _length_bucketed_batches(examples, batch_size: int, rng: random.Random, bucket: int = 16) -> list[list[int]]:
    """One epoch of batches: shuffle, sort each window of `bucket` batches by length (less padding), shuffle the
    batches."""
    order = list(range(len(examples)))
    rng.shuffle(order)
    window = batch_size * bucket
    batches = []
    for start in range(0, len(order) - batch_size + 1, window):
        chunk = sorted(order[start : start + window], key=lambda i: len(examples[i][0]) + len(examples[i][1]))
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk) - batch_size + 1, batch_size)]
    rng.shuffle(batches)
    return batches


def train_base_model(output_dir: str, config: BaseModelConfig | None = None, log_every: int = 100,
                     num_threads: int | None = None, callback=None) -> str:  # fmt: skip
    """Train the base model described by `config` and save model + tokenizer to `output_dir`; return it.

    The model is saved atomically (temporary sibling directory renamed into place). `num_threads` sets torch's
    intra-op threads for the duration (default: `$TRL_EFFICIENT_TESTBED_THREADS`, else 1: the matrices are so small
    that a second thread barely helps on an idle machine, and on a busy one it makes steps several times slower).
    The global RNG and the thread count are restored afterwards. `callback(step, model, tokenizer)`, if given, runs
    every `log_every` steps (e.g. a quick accuracy probe while tuning).
    """
    from ..testing.tiny import build_tiny_model

    config = config or BaseModelConfig()
    tokenizer = build_testbed_tokenizer(config.style)
    model = build_tiny_model(
        tokenizer,
        hidden_size=config.hidden_size,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        num_kv_heads=config.num_kv_heads,
        max_position_embeddings=1024,
        seed=config.seed,
    )
    tokenizer = _as_reloaded(tokenizer, model)
    examples = _encode_examples(tokenizer, config)
    order_rng = random.Random(config.seed + 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)

    def lr_at(step):
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        progress = (step - config.warmup_steps) / max(1, config.max_steps - config.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    model.train()
    t0, running = time.time(), None
    threads_before = torch.get_num_threads()
    num_threads = num_threads or int(os.environ.get("TRL_EFFICIENT_TESTBED_THREADS", "0") or 0) or 1
    torch.set_num_threads(num_threads)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        batches: list[list[int]] = []
        progress = tqdm(range(config.max_steps), desc="testbed base model (once, then cached)", leave=False)
        for step in progress:
            if not batches:
                batches = _length_bucketed_batches(examples, config.batch_size, order_rng)
            ids, labels, mask = _batch([examples[i] for i in batches.pop()], tokenizer.pad_token_id)
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
            progress.set_postfix(loss=f"{running:.3f}", refresh=False)
            if log_every and (step + 1) % log_every == 0:
                logger.info("testbed base model: step %d/%d loss %.4f (%.0f s)", step + 1, config.max_steps, running,
                            time.time() - t0)  # fmt: skip
                if callback is not None:
                    model.eval()
                    callback(step + 1, model, tokenizer)
                    model.train()
    torch.set_num_threads(threads_before)
    model.eval()
    info = {"config": config.to_dict(), "format_version": FORMAT_VERSION, "final_loss": running,
            "train_seconds": round(time.time() - t0, 1), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch": torch.__version__}  # fmt: skip
    output_dir = save_pretrained_atomic(output_dir, model, tokenizer, MARKER, info, replace=True)
    logger.info("testbed base model saved to %s (loss %.4f, %.0f s)", output_dir, running, time.time() - t0)
    return output_dir


def _is_trained(path: str) -> bool:
    return os.path.isfile(os.path.join(path, MARKER)) and os.path.isfile(os.path.join(path, "config.json"))


def pinned_model_dir(size: str) -> str | None:
    """The weights of `testbed:<size>` that a package registered in `PINNED_WEIGHTS`, when there are some and they
    were trained from the size's current config (`BaseModelConfig.to_dict`, `FORMAT_VERSION`); else `None` (a changed
    config trains a new model).

    Why pinned: training the base is deterministic on one machine but not across CPUs. Torch's kernels take other
    paths (vector widths, summation order) on other instruction sets, and 3,000 steps turn a last-bit difference into
    another model. With the same code and torch 2.13.0 on an AVX-512 machine (2026-12-02), `testbed:v2` trained with
    the native kernels answered 0.520 of the world report's 512 tasks (the committed base: 0.807) and lost the world's
    trade-off; trained under `ATEN_CPU_CAPABILITY=avx2` it reproduced the committed world report digit for digit: that
    is the model the comparison instrument ships (docs/testbed.md, "One base model on every machine").
    """
    if size not in BASE_MODEL_SIZES or size not in PINNED_WEIGHTS:
        return None
    path = PINNED_WEIGHTS.get(size)
    if not _is_trained(path):
        return None
    with open(os.path.join(path, MARKER)) as f:
        info = json.load(f)
    config = json.loads(json.dumps(BASE_MODEL_SIZES[size].to_dict()))  # as the marker holds it (tuples -> lists)
    if info.get("format_version") != FORMAT_VERSION or info.get("config") != config:
        return None
    return path


def base_model_id(path: str) -> str:
    """`<directory name>@<first 16 hex digits of the SHA-256 of its model.safetensors>`: names the base model's
    config (the directory) and its weights, so results from another base (another machine's training) never mix.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "v2-abc"; d.mkdir(); _ = (d / "model.safetensors").write_bytes(b"w")
    >>> base_model_id(str(d))
    'v2-abc@50e721e49c013f00'
    """
    digest = hashlib.sha256()
    with open(os.path.join(path, "model.safetensors"), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return f"{os.path.basename(os.path.normpath(path))}@{digest.hexdigest()[:16]}"


def resolve_base_model(name: str = "testbed:base", cache_dir: str | None = None) -> str:
    """Directory of the testbed base model `"testbed:<size>"` (`base`, `formats`, `v2`, `v3` or `small`), trained on
    first use, or copied from pinned weights where a package registered them (`pinned_model_dir`; the comparison
    instrument pins `testbed:v2` and `testbed:v3`).

    >>> resolve_base_model("testbed:huge")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Unknown testbed model 'testbed:huge'; choose one of ['testbed:base', 'testbed:formats', ...].
    """
    size = name.split(":", 1)[1] if name.startswith("testbed:") else name
    size = size or "base"
    if size not in BASE_MODEL_SIZES:
        choices = [f"testbed:{s}" for s in BASE_MODEL_SIZES]
        raise ValueError(f"Unknown testbed model {name!r}; choose one of {choices}.")
    config = BASE_MODEL_SIZES[size]
    path = os.path.join(cache_dir or cache_root(), f"{size}-{config.key()}")
    if not _is_trained(path):
        pinned = pinned_model_dir(size)
        if pinned is not None:
            logger.info("Using the pinned weights of %r registered for it (%s)", name, path)
            _copy_atomic(pinned, path)
        else:
            logger.info("Training the testbed base model %r into %s (once; cached afterwards)", name, path)
            train_base_model(path, config)
    return path


def _copy_atomic(source: str, path: str) -> None:
    """Copy the directory `source` to `path` through a temporary sibling renamed into place (a concurrent reader sees
    all of it or none)."""
    import shutil

    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=".pinned-")
    try:
        for name in os.listdir(source):
            shutil.copyfile(os.path.join(source, name), os.path.join(tmp, name))
        if os.path.isdir(path):  # an untrained leftover (no marker)
            shutil.rmtree(path)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
