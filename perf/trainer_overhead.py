"""The cost of every recipe: work counters, step-time ratio with a 95% interval, and a GPU projection.

    python perf/trainer_overhead.py [--recipe all|kimi,...] [--steps 8] [--min-rounds 4] [--max-rounds 12]
                                    [--tolerance 0.03] [--model tiny:qwen2-16] [--json out.json]

**The two sides of a row.** The baseline is plain TRL `GRPOTrainer` (`trl.GRPOConfig`) with the recipe's
correctness reward only (its `correctness` spec's arguments, or the default correctness reward when the recipe has
none) on the plain dataset: what a user has before adopting the method, the same for every row. The efficient side
is the whole recipe: `EfficientGRPOConfig` with the recipe's `config_overrides` (length constants fitted to
`--max-completion-length` by the testbed's scaling rule), its rewards (`Recipe.build_reward_funcs`), its dataset hook,
its trainer class, plan and hooks. Both get the same model weights, seed, data rows and generation settings
(transformers `generate`, an EOS logit bias so the tiny random model stops at varied lengths), and the measurement
settings of `BENCH_FIXED_KEYS`, including `learning_rate` 0: the policy stays frozen, so for a recipe that keeps the
prompts both sides generate the same completions from the same prompts and a ratio measures the recipe's own work,
not lengths drifting apart in training. A recipe that rewrites prompts (L1 targets, HBPO/SABER budgets) or filters
or augments the dataset (Frugal) trains on other batches than the plain side: its per-step pairs are then of
different batches, and its ratio includes what its prompts make the model write.

**Work counters** (`perf/work.py`: `WorkCounter`, in one counting run of each side, untimed; the plain
side's once per correctness setting): per optimizer
step, the generated tokens of every `generate` call (rollouts, refills, a reward's reference samples, monitor
passes) and the prompt tokens they prefill; the forward tokens of every pass outside generation by role and grad
mode (`policy train`: the loss; `policy no-grad`: old log-probs and extra signal passes such as entropy or SAR;
`ref`; any other model, e.g. Bingo's scorer); CPU milliseconds per reward and in the group stage; for the refill
recipes (DLER, DA-DLER, DOT) generated tokens per useful group (groups with a learning signal that train this step:
`need - shortfall` from `trl_efficient/dynamic_sampling/*`, otherwise `G`-groups with non-zero reward std).
They are exact and machine-independent: they explain the ratios.

**Ratio and interval.** The two sides run in two long-lived worker processes (`LockstepPair`), swapping workers every
round, and the two runs of a round take turns step by step: step k of one side, then step k of the other, the order
flipping every step and every two rounds (ABBA), one process at a time. Each run starts from a fresh copy of the model;
its first step is a warm-up that is not timed. Step k of both runs trains the k-th batch of the same seeded data order,
so each timed step gives one paired ratio (efficient step time / plain step time), its two halves timed seconds apart:
the slow drift of a shared or virtual machine (a fixed matmul loop's time wanders by +-15% over tens of seconds) cancels
in the ratio. Step times are the process's CPU time on `--device cpu` (`--clock`, `StepTimer`). A round's ratio is the
geometric mean of its paired step ratios. The two worker processes are not equally fast: one can be several percent
slower for its whole life (its memory layout), so the rounds' ratios alternate with the swap (`--recipe alp` on an idle
machine, 2026-12-02: 1.05, 0.99, 1.09, 1.02, 1.05, 0.94, 1.12, 0.92, 1.11, 0.98, 1.10, 0.92, ...). The unit of the
analysis is therefore a **crossover pair** of rounds (2i, 2i + 1: the same order, the workers swapped), whose geometric
mean cancels that effect (`crossover_ratios`); the estimate is the geometric mean of the pairs and the 95% interval a
Student-t interval on their logarithms (`rounds_interval`). Over single rounds the same sixteen rounds of `alp` read
1.015 [0.977, 1.055]; over their eight pairs, 1.015 [0.996, 1.034]. Rounds continue in pairs from `--min-rounds` (4)
until both ends of the interval are within `--tolerance` (3%) of the estimate or `--max-rounds` (12) is reached; a row
that stopped at the limit says so (`limit`), and so does the footer. `--report` recomputes the interval of earlier runs'
rows from their rounds.

**Own code.** The counting runs are profiled (cProfile): `own ms, added` is the self time per step of the library's
own functions on the recipe's side minus the plain side's (`own_seconds`), what a recipe that adds no generation
and no forward pass adds to a step, measured without timing noise. The footer checks those recipes against 1.03x.

**GPU projection** (`CostModel`, documented constants): the counters turned into a projected step-time ratio at a
stated scale, a 7B policy, 8k-token completions, vLLM generation, ZeRO-3 training: generated tokens weighted by
decode cost, prefill and no-grad forward tokens by prefill cost, loss tokens by training cost, other models by their
size. Rewards and the group stage (CPU) are not in it; their milliseconds are shown beside it.

Not a test: timings depend on the machine (run it on an idle one, or under `nice` on a shared one and read the
intervals).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import platform
import pstats
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# Defaults of the benchmark that a recipe's config_overrides may change (e.g. a recipe that needs a KL term).
BENCH_DEFAULTS = {"beta": 0.0, "temperature": 1.0}
# Measurement settings: the same for every row and both trainers, so they win over a recipe's overrides.
BENCH_FIXED_KEYS = (
    "output_dir", "max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "num_generations",
    "max_completion_length", "logging_steps", "save_strategy", "report_to", "use_cpu", "use_vllm", "bf16", "seed",
    "generation_kwargs", "disable_tqdm", "learning_rate",
)  # fmt: skip


def config_kwargs(recipe_overrides: dict, fixed: dict, defaults: dict | None = None) -> tuple[dict, list[str]]:
    """`EfficientGRPOConfig` kwargs, merged with one precedence: `defaults` < `recipe_overrides` < `fixed`.

    Returns the kwargs and the sorted names of recipe overrides that `fixed` replaced (reported in the table's notes).
    Every key appears once, so `EfficientGRPOConfig(**kwargs)` cannot get a keyword twice (the old crash: HBPO's and
    DRPO's `beta: 0.0` next to the benchmark's own `beta=0.0`).

    >>> config_kwargs({"beta": 0.04, "max_completion_length": 4000, "loss_type": "dapo"},
    ...               {"max_completion_length": 64}, {"beta": 0.0, "temperature": 1.0})
    ({'beta': 0.04, 'temperature': 1.0, 'max_completion_length': 64, 'loss_type': 'dapo'}, ['max_completion_length'])
    """
    unknown = sorted(set(fixed) - set(BENCH_FIXED_KEYS))
    if unknown:
        raise ValueError(f"fixed settings {unknown} are not in BENCH_FIXED_KEYS.")
    merged = {**(BENCH_DEFAULTS if defaults is None else defaults), **recipe_overrides, **fixed}
    replaced = sorted(k for k in recipe_overrides if k in fixed and recipe_overrides[k] != fixed[k])
    return merged, replaced


NO_INSTRUMENT = (
    "trl_efficient_testbed is not installed (`pip install -e ./testbed`): every recipe runs at the library's own "
    "settings, its length constants not fitted to --max-completion-length"
)


def benchmark_scale(recipe_name: str, max_len: int, steps: int):
    """The recipe's scale at the benchmark's cap and steps, from the comparison instrument
    (`trl_efficient_testbed.specs.recipe_scale`: one rule per recipe, e.g. DA-DLER's `truncate_to` 2000 of 4000 -> 32
    of 64), or None when the instrument is not installed or declares no spec for the recipe (a new method): this script
    is outside the library, and the library's recipes declare no testbed scale."""
    try:
        from trl_efficient_testbed.specs import SPECS, recipe_scale
    except ImportError:
        return None
    return recipe_scale(recipe_name, max_len, steps) if recipe_name in SPECS else None


def merge_scale(overrides: dict, scale_config: dict) -> dict:
    """`overrides` with the scale's config on top; dict-valued fields (`advantage_kwargs`) merge key by key, so the
    recipe's other method settings stay.

    >>> recipe = {"advantage_kwargs": {"truncate_to": 2000, "correct_boost": 0.1}}
    >>> merge_scale(recipe, {"advantage_kwargs": {"truncate_to": 32}})
    {'advantage_kwargs': {'truncate_to': 32, 'correct_boost': 0.1}}
    """
    out = dict(overrides)
    for key, value in scale_config.items():
        base = out.get(key)
        out[key] = {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
    return out


def scaled_overrides(recipe_name: str, max_len: int, steps: int) -> tuple[dict, list[str]]:
    """The recipe's `config_overrides` with its length constants fitted to the benchmark's `max_len`
    (`benchmark_scale`), and the names of the fields the rule set; without the instrument, the recipe's own. The
    rule's reward constants (L1's alpha, LASER's target length) are merged into the recipe's reward specs by
    `run_once`."""
    from trl_efficient.recipes import get_recipe

    overrides = get_recipe(recipe_name).config_overrides
    scale = benchmark_scale(recipe_name, max_len, steps)
    if scale is None:
        return dict(overrides), []
    return merge_scale(overrides, scale.config), sorted(scale.config)


def recipe_kwargs_for(recipe_name: str, model_path: str, dataset, tokenizer, max_len: int, eos_bias: float,
                      seed: int, workdir: str) -> dict:  # fmt: skip
    """`recipe_kwargs` for recipes whose dataset hook needs something made first (made once per `workdir`)."""
    if recipe_name == "bingo":
        from trl_efficient.testing.scorers import save_tiny_token_classifier

        # an offline tiny classifier in the LLMLingua-2 format; llmlingua needs this name in the directory
        path = os.path.join(workdir, "tiny-bert-base-multilingual-cased")
        if not os.path.isdir(path):
            save_tiny_token_classifier(path)
        return {"scorer": path}
    if recipe_name == "saber":
        from transformers import AutoModelForCausalLM

        from trl_efficient.methods.saber import profile_dataset, write_profile

        path = os.path.join(workdir, "saber_profile.jsonl")
        if not os.path.exists(path):
            model = AutoModelForCausalLM.from_pretrained(model_path)
            records = profile_dataset(model, tokenizer, dataset, max_new_tokens=max_len, seed=seed,
                                      generation_kwargs={"sequence_bias": [[[tokenizer.eos_token_id], eos_bias]]},
                                      show_progress=False)  # fmt: skip
            write_profile(records, path)
        return {"profile": path}
    if recipe_name == "frugal":
        # Frugal-Thinking keeps the examples the base model does not always solve: estimate its pass rates once
        # (n = 4 samples at the benchmark's cap), then read them back
        path = os.path.join(workdir, "frugal_pass_rates.jsonl")
        if not os.path.exists(path):
            return {"estimate": True, "n": 4, "max_new_tokens": max_len, "output": path}
        return {"pass_rates": path}
    return {}


def baseline_correctness_kwargs(recipe) -> dict:
    """The arguments of the recipe's correctness reward (`{}`: the default one, for recipes whose rewards check
    answers themselves). The baseline's only reward."""
    for spec in recipe.rewards:
        if spec.builder == "correctness":
            return dict(spec.kwargs)
    return {}


def useful_groups(log_history: list[dict], groups_per_step: int) -> float | None:
    """Mean number of groups per step that carry a learning signal: `need - shortfall` for dynamic sampling (the
    refilled batch), else the groups whose rewards are not all equal (TRL's `frac_reward_zero_std`).

    >>> useful_groups([{"frac_reward_zero_std": 0.5}, {"frac_reward_zero_std": 0.0}], 2)
    1.5
    >>> useful_groups([{"trl_efficient/dynamic_sampling/shortfall_groups": 1.0, "frac_reward_zero_std": 1.0}], 2)
    1.0
    """
    values = []
    for h in log_history:
        if "trl_efficient/dynamic_sampling/shortfall_groups" in h:
            values.append(groups_per_step - h["trl_efficient/dynamic_sampling/shortfall_groups"])
        elif "frac_reward_zero_std" in h:
            values.append(groups_per_step * (1.0 - h["frac_reward_zero_std"]))
    return statistics.mean(values) if values else None


def run_once(kind: str, recipe_name: str, model_path: str, opts, output_root: str, count: bool = False,
             gate=None) -> dict:  # fmt: skip
    """One training run of `opts.steps` steps of one side (`"plain"` or `"efficient"`) of a recipe's row: the step
    times, and with `count=True` the work counters (`WorkCounter`) instead of meaningful times. With `gate` (a
    `multiprocessing` connection to `LockstepPair`'s parent) every step waits for the parent's turn signal."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
    from trl import GRPOConfig, GRPOTrainer
    from work import StepTimer, WorkCounter

    from trl_efficient.core.answers import clear_answer_cache
    from trl_efficient.data.loaders import load_math_dataset
    from trl_efficient.recipes import REWARD_BUILDERS, get_recipe
    from trl_efficient.trainer import EfficientGRPOConfig

    recipe = get_recipe(recipe_name)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    fixed = {
        "output_dir": os.path.join(output_root, recipe_name, kind), "max_steps": opts.steps,
        "per_device_train_batch_size": opts.batch, "gradient_accumulation_steps": 1, "num_generations": opts.group,
        "max_completion_length": opts.max_completion_length, "logging_steps": 1, "save_strategy": "no",
        "report_to": "none", "use_cpu": opts.device == "cpu", "use_vllm": False, "bf16": False, "seed": opts.seed,
        "generation_kwargs": {"sequence_bias": [[[tokenizer.eos_token_id], opts.eos_bias]]}, "disable_tqdm": True,
        "learning_rate": 0.0,
    }  # fmt: skip
    dataset = load_math_dataset("gsm8k", "train", limit=opts.batch * opts.steps * 2, seed=opts.seed)
    replaced: list[str] = []
    if kind == "plain":
        args = GRPOConfig(**config_kwargs({}, fixed)[0])
        rewards = [REWARD_BUILDERS.get("correctness")(args, tokenizer, **baseline_correctness_kwargs(recipe))]
        cls = GRPOTrainer
    else:
        overrides, scaled = scaled_overrides(recipe_name, opts.max_completion_length, opts.steps)
        kwargs, replaced = config_kwargs(overrides, fixed)
        scale = benchmark_scale(recipe_name, opts.max_completion_length, opts.steps)
        reward_scale = {} if scale is None else scale.reward_kwargs  # L1's alpha, LASER's L_T
        recipe = recipe.with_reward_kwargs(reward_scale, f"the benchmark scale of {recipe_name!r}")
        replaced = replaced + scaled + sorted(f"{b}.{k}" for b, kw in reward_scale.items() for k in kw)
        args = EfficientGRPOConfig(**kwargs)
        extra = recipe_kwargs_for(recipe_name, model_path, dataset, tokenizer, opts.max_completion_length,
                                  opts.eos_bias, opts.seed, output_root)  # fmt: skip
        dataset = recipe.apply_prepare_dataset(dataset, args, tokenizer, **extra)
        rewards, args.reward_weights = recipe.build_reward_funcs(args, tokenizer)
        cls = recipe.trainer_cls
    torch.manual_seed(opts.seed)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    timer = StepTimer(clock=opts.clock) if gate is None else LockstepTimer(gate, clock=opts.clock)
    trainer = cls(model=model, reward_funcs=rewards, args=args, train_dataset=dataset, processing_class=tokenizer,
                  callbacks=[timer])  # fmt: skip
    trainer.remove_callback(PrinterCallback)  # no log line per step
    clear_answer_cache(golds=True)  # every run checks its answers from scratch, as a fresh training run does
    out = {"trainer": f"{cls.__module__}.{cls.__name__}", "replaced": replaced}
    if count:
        eos = getattr(trainer, "eos_token_ids", None) or [tokenizer.eos_token_id]
        counter = WorkCounter({"policy": trainer.model, "ref": getattr(trainer, "ref_model", None)}, eos)
        trainer.reward_funcs = counter.wrap_rewards(list(trainer.reward_funcs), list(trainer.reward_func_names))
        if hasattr(trainer, "group_stage"):
            counter.time_method(trainer, "group_stage", "group_stage")
        profiler = cProfile.Profile()
        with counter:
            profiler.runcall(trainer.train)
        out["work"] = counter.summary(opts.steps)
        out["own_ms"] = round(1000 * own_seconds(profiler) / opts.steps, 2)
        out["useful_groups"] = useful_groups(trainer.state.log_history, opts.batch // opts.group)
    else:
        trainer.train()
    out["step_seconds"] = timer.durations[1:]
    return out


def own_seconds(profiler: cProfile.Profile) -> float:
    """Seconds spent in the library's own Python functions (their self time: not the torch, TRL or transformers
    calls they make), `trl_efficient.testing` (the counters themselves) excluded. For a recipe that adds no
    generation and no forward pass this is what it adds to a step, measured exactly instead of read off noisy step
    times (cProfile's own overhead included, so an upper bound)."""
    stats = pstats.Stats(profiler).stats  # {(file, line, name): (calls, primitive calls, self time, cumulative, ...)}
    marker, skip = os.sep + "trl_efficient" + os.sep, os.sep + "trl_efficient" + os.sep + "testing" + os.sep
    return sum(entry[2] for (path, _, _), entry in stats.items() if marker in path and skip not in path)


def _lockstep_timer_class():
    from work import StepTimer

    class _LockstepTimer(StepTimer):
        """A `StepTimer` whose steps take turns with the other side's: before a step it tells the parent it is ready
        and waits for the go, after it reports done (the step timed in between)."""

        def __init__(self, conn, clock: str = "wall") -> None:
            super().__init__(clock)
            self.conn = conn

        def on_step_begin(self, args, state, control, **kwargs) -> None:
            self.conn.send(("ready", state.global_step))
            self.conn.recv()  # "go"
            super().on_step_begin(args, state, control, **kwargs)

        def on_step_end(self, args, state, control, **kwargs) -> None:
            super().on_step_end(args, state, control, **kwargs)
            self.conn.send(("done", state.global_step))

    return _LockstepTimer


def LockstepTimer(conn, clock: str = "wall"):  # noqa: N802 (a class built on first use: transformers loads lazily)
    return _lockstep_timer_class()(conn, clock)


def _worker(conn, threads: int) -> None:
    """A side's process: runs `run_once` for every job the parent sends, gated step by step, until `None`."""
    import torch

    torch.set_num_threads(threads)
    while (job := conn.recv()) is not None:
        try:
            conn.send(("result", run_once(*job, gate=conn)))
        except Exception as err:  # the parent fails the row and restarts both workers
            conn.send(("error", f"{type(err).__name__}: {' '.join(str(err).split())}"[:200]))


class LockstepPair:
    """Two long-lived worker processes, one side each per round, whose training steps take turns: step k of the plain
    run, then step k of the efficient run (the order flips every step and every round: ABBA), one process at a time.
    With `swap=True` a round runs each side in the other worker, so that a lasting difference between the two
    processes (memory layout, the core each lands on) falls on both sides alike over the rounds.

    Timing noise on a shared or virtual machine drifts slowly (a fixed matmul loop's CPU time wanders by +-15% over
    tens of seconds, but two adjacent repetitions differ by a few percent): a step timed right next to its pair
    shares the drift, and the ratio cancels it. Runs that were timed one after the other (a whole run, then the
    other) did not: `grpo`, the same work on both sides, had paired step ratios of 0.78-1.26.
    """

    KINDS = ("plain", "efficient")
    SLOTS = (0, 1)  # the two worker processes

    def __init__(self, threads: int) -> None:
        import multiprocessing

        self.threads = threads
        self.context = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked torch thread pool
        self.conns: dict = {}
        self.procs: dict = {}
        self.start()

    def start(self) -> None:
        for slot in self.SLOTS:
            parent, child = self.context.Pipe()
            proc = self.context.Process(target=_worker, args=(child, self.threads), daemon=True)
            proc.start()
            self.conns[slot], self.procs[slot] = parent, proc

    def close(self) -> None:
        for slot in self.SLOTS:
            try:
                self.conns[slot].send(None)
            except (BrokenPipeError, OSError):
                pass
            self.procs[slot].join(timeout=10)
            if self.procs[slot].is_alive():
                self.procs[slot].terminate()

    def restart(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
            proc.join()
        self.start()

    def run(self, args_by_kind: dict, first: str, together: bool = True, swap: bool = False) -> dict:
        """Run one job per side (`run_once` arguments) in lockstep; `first` takes the first step; the plain side runs
        in worker 0 and the efficient side in worker 1, or the other way round with `swap`. With `together=False`
        the sides run one after the other instead (for a model too large to hold twice). Returns each side's
        `run_once` result; raises `RuntimeError` (after restarting the workers) if a side fails."""
        order = [first, next(k for k in self.KINDS if k != first)]
        conns = {kind: self.conns[slot ^ swap] for kind, slot in zip(self.KINDS, self.SLOTS)}
        results: dict = {}
        try:
            for group in [order] if together else [[kind] for kind in order]:
                results.update(self._run_group(group, args_by_kind, conns))
        except BaseException:
            self.restart()
            raise
        return results

    def _run_group(self, order: list[str], args_by_kind: dict, conns: dict) -> dict:
        for kind in order:
            conns[kind].send(args_by_kind[kind])
        results, waiting = {}, set(order)
        while waiting:
            ready = []
            for kind in order:  # each waiting side announces its next step, or ends
                if kind not in waiting:
                    continue
                tag, payload = conns[kind].recv()
                if tag == "ready":
                    ready.append(kind)
                elif tag == "result":
                    results[kind] = payload
                    waiting.discard(kind)
                else:
                    raise RuntimeError(f"{kind} side: {payload}")
            for kind in ready:  # one step at a time
                conns[kind].send("go")
                tag, payload = conns[kind].recv()
                if tag != "done":
                    raise RuntimeError(f"{kind} side: {payload}")
            order = order[::-1]  # ABBA
        return results


def ratio_interval(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of per-round ratios and its 95% Student-t interval (computed on the logarithms).

    Logs of [1.0, 1.1, 1.21] are 0, a, 2a with a = ln 1.1: mean a -> 1.1; sd a; half-width t(2) * a / sqrt(3) =
    4.303 * 0.0953 / 1.732 = 0.2368 -> exp(a -+ 0.2368) = (0.868, 1.394).

    >>> [round(x, 3) for x in ratio_interval([1.0, 1.1, 1.21])]
    [1.1, 0.868, 1.394]
    >>> ratio_interval([1.2])
    (1.2, 0.0, inf)
    """
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), 0.0, math.inf
    from trl_efficient_testbed.stats import student_t_quantile

    half = student_t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def crossover_ratios(round_ratios: list[float]) -> list[float]:
    """The geometric mean of each two consecutive rounds (2i, 2i + 1): the same side steps first in both, and each
    side runs in the other worker process in the second, so a lasting difference between the two processes (their
    memory layout) cancels in it. A last unpaired round is left out.

    >>> [round(x, 3) for x in crossover_ratios([1.1, 0.9, 1.08, 0.92, 1.3])]  # worker 0 ~10% slower
    [0.995, 0.997]
    """
    return [math.sqrt(a * b) for a, b in zip(round_ratios[0::2], round_ratios[1::2])]


def rounds_interval(round_ratios: list[float]) -> tuple[float, float, float]:
    """`ratio_interval` over the crossover pairs of rounds (`crossover_ratios`): the estimate and its 95% interval.

    Pairs sqrt(0.99), sqrt(0.9936), sqrt(1.008): logs -0.00503, -0.00321, +0.00398, mean -0.00142 -> 0.999, sd
    0.00477, half-width t(2) * 0.00477 / sqrt(3) = 0.01184 -> exp(-0.00142 -+ 0.01184) = (0.987, 1.010); over the
    six rounds alone the half-width would be about 0.11.

    >>> [round(x, 3) for x in rounds_interval([1.1, 0.9, 1.08, 0.92, 1.12, 0.9])]
    [0.999, 0.987, 1.01]
    >>> rounds_interval([1.2])  # no pair yet: the round itself, no interval
    (1.2, 0.0, inf)
    """
    pairs = crossover_ratios(round_ratios)
    return ratio_interval(pairs) if pairs else ratio_interval(round_ratios)


def interval_within(estimate: float, low: float, high: float, tolerance: float) -> bool:
    """Both ends of the interval within `tolerance` of the estimate (relative).

    >>> interval_within(1.0, 0.98, 1.029, 0.03), interval_within(1.0, 0.96, 1.01, 0.03)
    (True, False)
    """
    return high <= estimate * (1 + tolerance) and low >= estimate * (1 - tolerance)


@dataclass(frozen=True)
class CostModel:
    """Cost per token at the stated scale, in units of one prefill token of the policy (a forward of 2N FLOPs at
    prefill efficiency). The projection of a side is the sum of its counters times these costs; a row's projected
    ratio is efficient / plain. Assumptions (check them with `scripts/gpu_check.sh`'s `cost` check):

    - `decode` (4.0): a generated token. vLLM decoding a 7B policy at a large batch with 4-8k-token contexts is bound
      by memory bandwidth and runs roughly 3-5k tokens/s per H100-class GPU where prefill runs 15-20k: ~4x.
    - `prefill` (1.0): a prompt token prefilled by the generation engine.
    - `train` (3.9): a token of the loss's forward with gradients: forward + backward are ~3 forwards of FLOPs, and
      ZeRO-3 gathers the parameters for both (x1.3 on 8 GPUs).
    - `no_grad` (1.3): a no-grad forward token of the policy or a same-size model (old or reference log-probs,
      entropy, SAR's pass, a reference policy): one forward with ZeRO-3's gather.
    - `other` (0.104): a forward token of any smaller model, e.g. Bingo's LLMLingua-2 scorer (xlm-roberta-large,
      0.56B): `no_grad` x 0.56 / 7.
    """

    scale: str = "7B policy, 8k-token completions, vLLM generation, ZeRO-3 training (8 GPUs)"
    decode: float = 4.0
    prefill: float = 1.0
    train: float = 3.9
    no_grad: float = 1.3
    other: float = 0.104

    def units(self, work: dict) -> float:
        """Projected cost of one step of a side, from its `WorkCounter.summary`.

        4.0 x 100 generated + 1.0 x 50 prefilled + 3.9 x 150 train + 1.3 x 150 no-grad + 0.104 x 10 scorer = 1231.04

        >>> forward = {"policy train": 150, "policy no-grad": 150, "BertForTokenClassification no-grad": 10}
        >>> CostModel().units({"generated": {"policy (x)": 100}, "prefilled": {"policy (x)": 50}, "forward": forward})
        1231.04
        """
        total = self.decode * sum(work.get("generated", {}).values())
        total += self.prefill * sum(work.get("prefilled", {}).values())
        for label, tokens in work.get("forward", {}).items():
            role, grad = label.rsplit(" ", 1)
            if role in ("policy", "ref") or role.endswith("ForCausalLM"):
                total += (self.train if grad == "train" else self.no_grad) * tokens
            else:
                total += self.other * tokens
        return round(total, 6)

    def ratio(self, plain: dict, efficient: dict) -> float:
        return self.units(efficient) / self.units(plain)


def _sum(work: dict, part: str, pred=lambda label: True) -> float:
    return sum(v for k, v in work.get(part, {}).items() if pred(k))


def counter_columns(work: dict) -> dict:
    """The table's counter columns of one side, per step."""

    def policy(grad):
        return lambda k: k == f"policy {grad}"

    return {
        "gen": _sum(work, "generated"),
        "prefill": _sum(work, "prefilled"),
        "fwd_train": _sum(work, "forward", policy("train")),
        "fwd_nograd": _sum(work, "forward", policy("no-grad")),
        "fwd_ref": _sum(work, "forward", lambda k: k.startswith("ref ")),
        "fwd_other": _sum(work, "forward", lambda k: not k.startswith(("policy ", "ref "))),
        "reward_ms": 1000 * _sum(work, "seconds", lambda k: k.startswith("reward:")),
        "group_ms": 1000 * _sum(work, "seconds", lambda k: k == "group_stage"),
    }


def summarize_rounds(row: dict, tolerance: float) -> None:
    """Set `ratio`, `ratio_low`, `ratio_high` of a row from its `round_ratios` (`rounds_interval`), and `converged`
    when the interval is within `tolerance`; `--report` recomputes earlier runs' rows so, from their rounds."""
    row["ratio"], row["ratio_low"], row["ratio_high"] = (round(x, 4) for x in rounds_interval(row["round_ratios"]))
    row["converged"] = interval_within(row["ratio"], row["ratio_low"], row["ratio_high"], tolerance)


def bench_recipe(recipe_name: str, model_path: str, opts, root: str, cost: CostModel, plain_work: dict,
                 pair: LockstepPair) -> dict:  # fmt: skip
    """One row: a counting run of each side (the plain side's once per correctness setting, kept in `plain_work`),
    then alternating timed rounds until the interval of the rounds' ratios is narrow enough."""
    row = {"recipe": recipe_name, "status": "ok", "error": "", "notes": "", "rounds": 0, "converged": False}
    try:
        from trl_efficient.recipes import get_recipe

        key = json.dumps(baseline_correctness_kwargs(get_recipe(recipe_name)), sort_keys=True)
        if key not in plain_work:
            out = run_once("plain", recipe_name, model_path, opts, root, count=True)
            plain_work[key] = (out["work"], out["useful_groups"], out["own_ms"])
        work = {"plain": plain_work[key][0]}
        row["plain_useful_groups"], row["plain_own_ms"] = plain_work[key][1], plain_work[key][2]
        out = run_once("efficient", recipe_name, model_path, opts, root, count=True)
        work["efficient"], row["efficient_useful_groups"] = out["work"], out["useful_groups"]
        row["own_ms"] = out["own_ms"]
        row["trainer"] = out["trainer"]
        if out["replaced"]:
            row["notes"] = "benchmark sets " + ", ".join(out["replaced"])
        for kind in ("plain", "efficient"):
            row[f"{kind}_counters"] = counter_columns(work[kind])
            row[f"{kind}_work"] = work[kind]
        row["projected"] = round(cost.ratio(work["plain"], work["efficient"]), 3)
        times, ratios, round_ratios = {"plain": [], "efficient": []}, [], []
        for r in range(opts.max_rounds):
            jobs = {kind: (kind, recipe_name, model_path, opts, root) for kind in LockstepPair.KINDS}
            # rounds alternate the workers (swap) and, every two rounds, which side steps first
            results = pair.run(jobs, first="plain" if r // 2 % 2 == 0 else "efficient", together=opts.lockstep,
                               swap=bool(r % 2))  # fmt: skip
            steps = {kind: results[kind]["step_seconds"] for kind in LockstepPair.KINDS}
            for kind in LockstepPair.KINDS:
                times[kind] += steps[kind]
            # step k of both runs trains the k-th batch of the same seeded data order: one paired ratio per step
            this_round = [e / p for e, p in zip(steps["efficient"], steps["plain"])]  # a stop rule may end one early
            ratios += this_round
            # the round's ratio; the interval is over crossover pairs of rounds (module docstring)
            round_ratios.append(ratio_interval(this_round)[0])
            row["rounds"] = r + 1
            est, low, high = rounds_interval(round_ratios)
            print(f"  {recipe_name} round {r + 1}: median step plain {statistics.median(steps['plain']):.3f} s, "
                  f"efficient {statistics.median(steps['efficient']):.3f} s; this round's ratio "
                  f"{round_ratios[-1]:.3f}; ratio so far {est:.3f} "
                  f"[{low:.3f}, {high:.3f}]", flush=True)  # fmt: skip
            if (r + 1) % 2 == 0 and r + 1 >= opts.min_rounds and interval_within(est, low, high, opts.tolerance):
                break  # `summarize_rounds` sets `converged` from the same interval
        row["round_ratios"] = [round(x, 4) for x in round_ratios]
        summarize_rounds(row, opts.tolerance)
        row["step_ratios"] = [round(x, 4) for x in ratios]
        row["plain_s_per_step"] = round(statistics.median(times["plain"]), 4)
        row["efficient_s_per_step"] = round(statistics.median(times["efficient"]), 4)
    except Exception as err:  # reported in the row and the exit status; the other recipes still run
        row["status"] = "failed"
        row["error"] = f"{type(err).__name__}: {' '.join(str(err).split())}"[:200]
        print(f"  {recipe_name} FAILED: {row['error']}", flush=True)
    return row


def _per_group(row: dict, kind: str) -> str:
    useful = row.get(f"{kind}_useful_groups")
    gen = row.get(f"{kind}_counters", {}).get("gen")
    return "-" if not useful or gen is None else f"{gen / useful:.0f}"


def added_own_ms(row: dict) -> float | None:
    """Milliseconds per step the recipe's side spends in the library's own code beyond the plain side's (which runs
    the library's correctness reward too): `own_seconds` of the two counting runs."""
    if row.get("own_ms") is None or row.get("plain_own_ms") is None:
        return None
    return row["own_ms"] - row["plain_own_ms"]


def adds_no_pass(row: dict) -> bool:
    """The recipe's side generates, prefills and forwards exactly the tokens of the plain side: it adds no
    generation and no forward pass, only Python (rewards, hooks, advantages).

    >>> same = {"gen": 675, "prefill": 2944, "fwd_train": 4504, "fwd_nograd": 0, "fwd_ref": 0, "fwd_other": 0}
    >>> adds_no_pass({"plain_counters": same, "efficient_counters": same})
    True
    >>> adds_no_pass({"plain_counters": same, "efficient_counters": {**same, "fwd_nograd": 4504}})
    False
    """
    keys = ("gen", "prefill", "fwd_train", "fwd_nograd", "fwd_ref", "fwd_other")
    plain, efficient = row["plain_counters"], row["efficient_counters"]
    return all(plain[k] == efficient[k] for k in keys)


def markdown_table(rows: list[dict]) -> str:
    """One Markdown table: per-step counters of the efficient side (the plain side's in the header line below the
    table), the measured ratio with its 95% interval and rounds, and the projected GPU ratio."""

    def num(value, fmt="{:.0f}"):
        return "-" if value is None else fmt.format(value)

    lines = [
        "| recipe | ratio [95% interval] | rounds | projected GPU ratio | gen tok | prefill tok | fwd tok train "
        "| fwd tok no-grad | fwd tok ref | fwd tok other | reward ms | group ms | own ms, added "
        "| gen tok / useful group | s/step plain, recipe | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for row in rows:
        if row["status"] != "ok":
            lines.append(f"| {row['recipe']} | failed | - | - |" + " - |" * 11 + f" {row['error'].replace('|', '/')} |")
            continue
        c = row["efficient_counters"]
        rounds = f"{row['rounds']}" + ("" if row["converged"] else " (limit)")
        lines.append(
            f"| {row['recipe']} | {row['ratio']:.2f} [{row['ratio_low']:.2f}, {row['ratio_high']:.2f}] | {rounds} "
            f"| {row['projected']:.2f} | {num(c['gen'])} | {num(c['prefill'])} | {num(c['fwd_train'])} "
            f"| {num(c['fwd_nograd'])} | {num(c['fwd_ref'])} | {num(c['fwd_other'])} | {num(c['reward_ms'], '{:.1f}')} "
            f"| {num(c['group_ms'], '{:.1f}')} | {num(added_own_ms(row), '{:+.1f}')} | {_per_group(row, 'efficient')} "
            f"| {row['plain_s_per_step']:.3f}, {row['efficient_s_per_step']:.3f} | {row['notes'].replace('|', '/')} |"
        )  # fmt: skip
    return "\n".join(lines)


def baseline_line(rows: list[dict]) -> str:
    """The plain side's counters (the same baseline for every row; the first counted row's)."""
    for row in rows:
        if row["status"] == "ok":
            c = row["plain_counters"]
            return (f"Baseline (plain GRPOTrainer, correctness reward only) per step: gen tok {c['gen']:.0f}, prefill "
                    f"tok {c['prefill']:.0f}, fwd tok train {c['fwd_train']:.0f}, no-grad {c['fwd_nograd']:.0f}, ref "
                    f"{c['fwd_ref']:.0f}, other {c['fwd_other']:.0f}, reward ms {c['reward_ms']:.1f}, gen tok / useful "
                    f"group {_per_group(row, 'plain')}.")  # fmt: skip
    return "Baseline: no row ran."


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="all", help="a registered recipe, a comma-separated list, or all (default)")
    parser.add_argument("--model", default="tiny:qwen2-16", help="tiny:<arch>[-<hidden>], testbed:base or a path")
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per run (the first is not timed)")
    parser.add_argument("--min-rounds", type=int, default=4, help="even: the interval is over pairs of rounds")
    parser.add_argument("--max-rounds", type=int, default=12, help="even: the interval is over pairs of rounds")
    parser.add_argument("--tolerance", type=float, default=0.03, help="stop when the 95%% interval is within +-this")
    parser.add_argument("--batch", type=int, default=16, help="per-device batch (completions per step)")
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--eos-bias", type=float, default=2.0)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: scripts/gpu_check.sh's cost")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default=None,
                        help="step clock: process CPU time (default on --device cpu) or wall time")  # fmt: skip
    parser.add_argument("--lockstep", action=argparse.BooleanOptionalAction, default=True,
                        help="the two sides take turns step by step (--no-lockstep: one run after the other, for a "
                        "model too large to hold twice)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    parser.add_argument("--report", nargs="+", metavar="JSON", help="print one table of earlier runs' --json files")
    parser.add_argument("--update-readme", metavar="README", help="also paste the table into README's Speed section")
    opts = parser.parse_args(argv)
    if opts.report:
        return report(opts.report, opts.update_readme)
    opts.clock = opts.clock or ("cpu" if opts.device == "cpu" else "wall")
    if opts.steps < 2:
        parser.error("--steps must be at least 2 (the first step of a run is a warm-up and is not timed).")
    if not 4 <= opts.min_rounds <= opts.max_rounds or opts.min_rounds % 2 or opts.max_rounds % 2:
        parser.error("need even 4 <= --min-rounds <= --max-rounds (the interval is over pairs of rounds, at least 2).")

    import torch

    from trl_efficient.api import resolve_model
    from trl_efficient.recipes import RECIPES

    torch.set_num_threads(opts.threads)
    names = list(RECIPES) if opts.recipe == "all" else [n.strip() for n in opts.recipe.split(",") if n.strip()]
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        parser.error(f"unknown recipe(s) {unknown}; registered: {sorted(RECIPES)}")
    model_path = resolve_model(opts.model)  # tiny: / testbed: registered first
    if names and benchmark_scale(names[0], opts.max_completion_length, opts.steps) is None:
        print(NO_INSTRUMENT, file=sys.stderr)
    cost = CostModel()
    rows = []
    command = "python perf/trainer_overhead.py " + " ".join(argv if argv is not None else sys.argv[1:])

    def dump():  # after every row, so a long run that is stopped keeps its rows
        if opts.json:
            with open(opts.json, "w") as f:
                json.dump({"command": command.strip(), "options": vars(opts), "cost_model": asdict(cost), "rows": rows,
                           "machine": machine}, f, indent=1)  # fmt: skip

    machine = (f"torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs, device {opts.device}, {opts.clock} "
               f"clock, Python {platform.python_version()}")  # fmt: skip
    plain_work: dict = {}
    pair = LockstepPair(opts.threads)
    try:
        with tempfile.TemporaryDirectory() as root:
            for name in names:
                rows.append(bench_recipe(name, model_path, opts, root, cost, plain_work, pair))
                dump()
    finally:
        pair.close()
    return print_report(rows, vars(opts), [command.strip()], machine, cost, opts.update_readme)


def print_report(rows: list[dict], options: dict, commands: list[str], machine: str, cost: CostModel,
                 readme: str | None = None) -> int:  # fmt: skip
    """Print the table, the baseline's counters and the footer (sanity check, rows, round limits), and paste the same
    text into `readme` between `<!-- speed-table:start -->` and `<!-- speed-table:end -->` when given; the exit
    status."""
    o = argparse.Namespace(**options)
    out = [f"Each recipe (its trainer, plan, hooks and rewards) vs plain TRL GRPOTrainer with the correctness reward "
           f"only; model {o.model}, batch {o.batch}, G {o.group}, max_completion_length {o.max_completion_length}, "
           f"frozen policy (learning_rate 0), {o.steps - 1} timed steps per run, the two sides "
           f"{'in lockstep' if getattr(o, 'lockstep', True) else 'one after the other'}, rounds "
           f"until the 95% interval is within +-{o.tolerance:.0%} ({o.min_rounds}-{o.max_rounds}); {machine}. "
           f"Counters are per optimizer step of the recipe's side. Projected GPU ratio: {cost.scale} (CostModel in "
           f"this script).\n"
           + "\n".join(f"`{c}`" for c in commands) + "\n"]  # fmt: skip
    out.append(markdown_table(rows))
    out.append("\n" + baseline_line(rows))
    ok = [r for r in rows if r["status"] == "ok"]
    limited = [r["recipe"] for r in ok if not r["converged"]]
    grpo = next((r for r in ok if r["recipe"] == "grpo"), None)
    if grpo:
        inside = grpo["ratio_low"] <= 1.0 <= grpo["ratio_high"]
        out.append(f"Sanity check: grpo reads {grpo['ratio']:.3f} [{grpo['ratio_low']:.3f}, {grpo['ratio_high']:.3f}]: "
                   f"1.00 is {'inside' if inside else 'OUTSIDE'} its interval.")  # fmt: skip
    failed = [r["recipe"] for r in rows if r["status"] != "ok"]
    out.append(f"{len(ok)} of {len(rows)} recipes have a row" + (f"; failed: {', '.join(failed)}." if failed else "."))
    if ok:
        half = sorted(100 * (r["ratio_high"] - r["ratio_low"]) / 2 / r["ratio"] for r in ok)
        out.append(f"Interval half-widths: median {statistics.median(half):.1f}% ({half[0]:.1f}-{half[-1]:.1f}%); "
                   f"{len(ok) - len(limited)} of {len(ok)} within +-{o.tolerance:.0%}.")  # fmt: skip
    no_pass = [r for r in ok if adds_no_pass(r)]
    if no_pass:
        over = [r["recipe"] for r in no_pass if r["ratio_high"] > 1.03]
        added = [a for a in (added_own_ms(r) for r in no_pass) if a is not None]
        worst = max(added, default=0.0)
        step = statistics.median(r["plain_s_per_step"] for r in no_pass)
        out.append(f"Recipes that add no generation and no forward pass (counters equal the baseline's): "
                   f"{len(no_pass)}; upper end of the interval <= 1.03x: {len(no_pass) - len(over)}"
                   + (f" (above: {', '.join(over)})" if over else "")
                   + f". Their own code adds at most {worst:.1f} ms per step (cProfile self time of trl_efficient "
                   f"functions, counting runs), {100 * worst / 1000 / step:.1f}% of the baseline's median step "
                   f"({step:.3f} s).")  # fmt: skip
    if limited:
        out.append(f"Interval not within +-{o.tolerance:.0%} after {o.max_rounds} rounds (round limit reached) for "
                   f"{len(limited)} recipe(s): {', '.join(limited)}.")  # fmt: skip
    text = "\n".join(out)
    print("\n" + text, flush=True)
    if readme:
        from trl_efficient.recipes.tables import write_readme_section

        write_readme_section(readme, "speed-table", text)
    return 0 if len(ok) == len(rows) else 1


def merged_rows(paths: list[str]) -> tuple[list[dict], list[dict]]:
    """`(runs, rows)` of `--report`'s files: every run, and their rows by recipe (a later file's row of a recipe
    replaces the earlier one in its place).

    >>> import tempfile
    >>> run = lambda rows, rounds: {"command": f"r{rounds}", "rows": rows, "options": {"model": "m", "batch": 1,
    ...     "group": 1, "max_completion_length": 1, "steps": 2, "tolerance": 0.03, "min_rounds": rounds,
    ...     "max_rounds": rounds}}
    >>> folder = tempfile.mkdtemp()
    >>> paths = [os.path.join(folder, f"{i}.json") for i in range(2)]
    >>> first, later = run([{"recipe": "a", "rounds": 4}, {"recipe": "b"}], 4), run([{"recipe": "a", "rounds": 8}], 8)
    >>> for r, p in zip([first, later], paths):
    ...     with open(p, "w") as f:
    ...         json.dump(r, f)
    >>> [(r["recipe"], r.get("rounds")) for r in merged_rows(paths)[1]]
    [('a', 8), ('b', None)]
    """
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    keys = ("model", "batch", "group", "max_completion_length", "steps", "tolerance")
    for run in runs[1:]:
        differ = [k for k in keys if run["options"][k] != runs[0]["options"][k]]
        if differ:
            raise SystemExit(f"--report: {run['command']!r} differs from {runs[0]['command']!r} in {differ}.")
    by_recipe: dict[str, dict] = {}
    for run in runs:
        for row in run["rows"]:
            by_recipe[row["recipe"]] = row  # a dict keeps the first insertion's place
    return runs, list(by_recipe.values())


def report(paths: list[str], readme: str | None = None) -> int:
    """`--report a.json b.json ...`: one table of the rows of earlier runs (e.g. recipes split over processes), in
    order; the options of the first file head it (the others must have the same measurement settings, the number of
    rounds aside). A recipe measured again in a later file (more rounds) takes the later row, in the first row's
    place; every command is listed.
    """
    runs, rows = merged_rows(paths)
    o = runs[0]["options"]
    for row in rows:  # the interval of this version of the script, from the rounds the run measured
        if row.get("round_ratios"):
            summarize_rounds(row, o["tolerance"])
    machine = runs[0].get("machine") or f"torch threads {o['threads']}, {os.cpu_count()} CPUs, device {o['device']}"
    return print_report(rows, o, [run["command"] for run in runs], machine,
                        CostModel(**runs[0]["cost_model"]), readme)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
