"""
`trl-efficient testbed world-report`: what the testbed's world and base model offer the methods, measured.

Four properties decide whether the testbed can tell the methods apart (docs/testbed.md, "World v2"); each is measured
on the base model's own generations (never on its training data), on the same seeded held-out tasks:

1. **Dynamic range.** Mean tokens over the mean floor (the floor of a task: its shortest correct trace, EOS
   included), the redundant share, and the tokens-to-floor ratio per difficulty k. Real reasoning models over-think
   by 2-5x and over-think easy tasks at least as much as hard ones, so: the easy ratio (k = 1-2, pooled tokens over
   pooled floor) against the hard ratio (k = 7-8).
2. **A trade-off.** Accuracy with the model's own thinking (free generation) against its accuracy when *forced to
   the minimal trace* (`steps_only_constraint`: every sentence of its thinking must open with a step label or close
   the thinking, so it writes its own steps, values and count, but no check, no filler, no framing), per task,
   paired (the same sampling stream for both: `sampling`). Checks pay where the gain is positive: on hard tasks
   (k >= 6) and not on easy ones (k <= 2).
   The five-way accounting (steps, merged steps, useful checks, useless checks, filler) is reported per k.
3. **RL learns** is a property of training, reported by `testbed compare` (grpo against the base).
4. **Length instructions followed loosely.** Each task gets a value drawn uniformly from the world's range
   (`BaseModelConfig.method_prompt_values`); Pearson's r between the value and the generated length under L1's
   target suffix, L1-Max's maximum suffix and HBPO's budget prefill.

Every number comes with a 95% percentile-bootstrap interval over tasks (`stats.Bootstrap` with one seed: the
comparison's resampling, 2,000 seeded resamples).
"""

from __future__ import annotations

import logging
import random
import statistics

import numpy as np

from trl_efficient.overthinking.world import LABELS

from .streams import SentenceConstraint

logger = logging.getLogger(__name__)

__all__ = ["steps_only_constraint", "world_report", "world_report_markdown"]

EASY, HARD = (1, 2), (7, 8)  # the difficulty bands of the dynamic-range comparison
TRADEOFF_EASY, TRADEOFF_HARD = (1, 2), (6, 7, 8)  # ... and of the trade-off (k <= 2, k >= 6)
FOLLOW_KINDS = ("l1", "l1-max", "hbpo")
# The world's targets (docs/testbed.md, "World v2"): the report prints them, the scorecard judges them (`scorecard`)
MIN_FLOOR_RATIO, MIN_REDUNDANT_SHARE = 2.5, 0.5  # dynamic range: tokens / floor, redundant share
MIN_HARD_GAIN, MAX_EASY_GAIN = 0.10, 0.03  # trade-off: accuracy own thinking buys over the minimal trace
MIN_FOLLOWING_PEARSON = 0.3  # length instructions followed: Pearson(requested, generated length)


def steps_only_constraint(tokenizer, max_ops: int = 8) -> SentenceConstraint:
    """The `sampling.SentenceConstraint` of the minimal trace: a sentence of the thinking may only open with a step
    label (`" a"`, `" b"`, ...) or close the thinking (`" </"` of `" </think>"`, which frees the rest); checks,
    filler and framing cannot be written. The model still decides its steps, their values and when to stop.
    `max_ops`: the most operations of a task (the labels allowed are its first `max_ops`)."""

    def single(text: str) -> int:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise ValueError(f"steps-only generation needs {text!r} to be one testbed-tokenizer token; got {ids}.")
        return ids[0]

    close = single(" </")
    labels = tuple(single(f" {x}") for x in LABELS[:max_ops])
    return SentenceConstraint(triggers=(single("."), single(">")), allowed=(*labels, close), release=(close,))


def _pooled_ratio(by_difficulty: dict, levels) -> float | None:
    cells = [by_difficulty.get(str(k)) for k in levels]
    cells = [c for c in cells if c and c.get("n")]
    tokens = sum(c["mean_tokens"] * c["n"] for c in cells)
    floor = sum(c["mean_floor_tokens"] * c["n"] for c in cells)
    return tokens / floor if floor else None


def _interval(boot, statistic) -> tuple[float | None, list | None]:
    from .stats import interval

    point, low, high = interval(boot, statistic)
    return point, (None if low is None else [low, high])


def _paired_gain(boot, records: list[tuple[int, bool, bool]], levels) -> dict:
    """Accuracy with own thinking minus forced minimal trace on the tasks of `levels`, paired by task."""
    from .stats import wmean

    diff = np.array([[float(own) - float(forced) for _, own, forced in records]])
    mask = np.array([k in levels for k, _, _ in records])
    if not mask.any():
        return {"n": 0, "gain": None, "interval": None}
    gain, ci = _interval(boot, lambda w, v: wmean(diff, w, v, mask))
    return {"n": int(mask.sum()), "gain": gain, "interval": ci}


def world_report(model_path: str, num_tasks: int = 512, max_new_tokens: int = 256, temperature: float = 0.6,
                 top_p: float = 0.95, seed: int = 0, batch_size: int = 64, values: tuple[int, int] | None = None,
                 min_ops: int = 1, max_ops: int = 8, name: str | None = None) -> dict:  # fmt: skip
    """Measure the four properties (module docstring) of the base model at `model_path` on `num_tasks` seeded test
    tasks; `values` is the range of the length-following values (default: the model's training range, read from its
    marker file, else 16-256); `name` is how the report names the model (default: its path)."""
    import json
    import os

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_efficient.eval.evaluate import EvalMode
    from trl_efficient.overthinking.analysis import analyze_completion
    from trl_efficient.overthinking.base import MARKER, method_prompt_mode
    from trl_efficient.overthinking.data import load_testbed_dataset, task_from_row
    from trl_efficient.rewards import is_correct
    from trl_efficient_testbed.summary import summarize

    from .stats import Bootstrap, wpearson, wratio
    from .training import paired_generations, torch_threads

    marker = os.path.join(model_path, MARKER)
    info = json.load(open(marker)) if os.path.isfile(marker) else {}
    if values is None:
        values = tuple(info.get("config", {}).get("method_prompt_values", (16, 256)))
    boot = Bootstrap(1, num_tasks, seed=seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    dataset = load_testbed_dataset("test", n=num_tasks, seed=seed, min_ops=min_ops, max_ops=max_ops)
    rows = list(dataset)
    tasks = [task_from_row(r) for r in rows]

    def generate(mode, what, constraint=None):
        gens = paired_generations(model, tokenizer, rows, mode, 1, max_new_tokens, temperature, top_p, seed,
                                  batch_size, show_progress=True, constraint=constraint)  # fmt: skip
        logger.info("world report: %s done", what)
        return [g for (g,) in gens]

    with torch_threads():
        # 1 + 2: free generation, exact accounting
        free = generate(EvalMode(), "free generation")
        records = [analyze_completion(t, ids, tokenizer, text=text)
                   for t, (ids, text, _) in zip(tasks, free, strict=True)]  # fmt: skip
        summary = summarize(records)
        summary["truncated_fraction"] = statistics.fmean(float(not finished) for _, _, finished in free)
        # 2: the minimal trace (steps only), paired by task and sampling stream
        forced = generate(EvalMode(), "steps only", steps_only_constraint(tokenizer, max_ops))
        forced_ok = [bool(is_correct(text, r["solution"])) for (_, text, _), r in zip(forced, rows, strict=True)]
        paired = [(t.difficulty, rec["correct"], ok) for t, rec, ok in zip(tasks, records, forced_ok, strict=True)]
        # 4: length following, one value per task
        rng = random.Random(seed + 7)
        follow = {}
        for kind in FOLLOW_KINDS:
            vals = [rng.randint(*values) for _ in rows]
            modes = [method_prompt_mode(kind, v) for v in vals]
            gens = paired_generations(model, tokenizer, rows, modes, 1, max_new_tokens, temperature, top_p, seed,
                                      batch_size)  # fmt: skip
            lengths = [len(ids) for ((ids, _, _),) in gens]
            x, y = np.array([[vals]], dtype=float), np.array([[lengths]], dtype=float)
            r_value, ci = _interval(boot, lambda w, v, x=x, y=y: wpearson(x, y, w, v))
            follow[kind] = {"pearson": r_value, "interval": ci, "mean_length": statistics.fmean(lengths)}
    by_k = summary["by_difficulty"]
    forced_by_k = {}
    for k in sorted({t.difficulty for t in tasks}):
        own = [float(o) for d, o, _ in paired if d == k]
        frc = [float(f) for d, _, f in paired if d == k]
        forced_by_k[str(k)] = {"own": statistics.fmean(own), "forced": statistics.fmean(frc), "n": len(own)}
    tokens = np.array([[r["tokens"] for r in records]], dtype=float)
    floors = np.array([[r["floor_tokens"] for r in records]], dtype=float)
    ratio, ratio_ci = _interval(boot, lambda w, v: wratio(tokens, floors, w, v))
    return {
        "model": name or model_path,
        "base_config": info.get("config"),
        "num_tasks": num_tasks,
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "seed": seed,
        "summary": summary,
        "dynamic_range": {
            "ratio": ratio,
            "ratio_interval": ratio_ci,
            "redundant_share": summary["redundant_share"],
            "easy_ratio": _pooled_ratio(by_k, EASY),
            "hard_ratio": _pooled_ratio(by_k, HARD),
            "floor_by_difficulty": {k: c["mean_floor_tokens"] for k, c in by_k.items()},
            "ratio_by_difficulty": {k: c["mean_tokens"] / c["mean_floor_tokens"] for k, c in by_k.items()},
        },
        "tradeoff": {
            "easy": _paired_gain(boot, paired, TRADEOFF_EASY),
            "hard": _paired_gain(boot, paired, TRADEOFF_HARD),
            "accuracy_own": statistics.fmean(float(o) for _, o, _ in paired),
            "accuracy_forced_minimal": statistics.fmean(float(f) for _, _, f in paired),
            "by_difficulty": forced_by_k,
        },
        "following": follow,
        "following_values": list(values),
    }


def _ci(interval) -> str:
    return f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "—"


def _num(x, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def world_report_markdown(report: dict) -> str:
    """The report as Markdown: the four properties, then per-difficulty accounting."""
    s, dr, tr, fo = report["summary"], report["dynamic_range"], report["tradeoff"], report["following"]
    lines = [
        f"World report of `{report['model']}`: {report['num_tasks']} test tasks, one sample each, temperature "
        f"{report['temperature']}, cap {report['max_new_tokens']} tokens, seed {report['seed']}; 95% bootstrap "
        "intervals over tasks.",
        "",
        "| property | measured | target |",
        "|---|---|---|",
        f"| tokens / floor | {dr['ratio']:.2f} {_ci(dr['ratio_interval'])} ({s['mean_tokens']:.1f} / "
        f"{s['mean_floor_tokens']:.1f}) | >= {MIN_FLOOR_RATIO} |",
        f"| redundant share | {dr['redundant_share']:.3f} | >= {MIN_REDUNDANT_SHARE} |",
        f"| easy (k=1-2) vs hard (k=7-8) tokens/floor | {_num(dr['easy_ratio'], '.2f')} vs "
        f"{_num(dr['hard_ratio'], '.2f')} | easy >= hard |",
        f"| accuracy: own thinking vs forced minimal trace | {tr['accuracy_own']:.3f} vs "
        f"{tr['accuracy_forced_minimal']:.3f} | |",
        f"| gain of own thinking, hard (k>=6) | {_num(tr['hard']['gain'], '+.3f')} {_ci(tr['hard']['interval'])} | "
        f">= {MIN_HARD_GAIN:.2f} |",
        f"| gain of own thinking, easy (k<=2) | {_num(tr['easy']['gain'], '+.3f')} {_ci(tr['easy']['interval'])} | "
        f"<= {MAX_EASY_GAIN:.2f} |",
    ]
    lo, hi = report["following_values"]
    for kind, f in fo.items():
        lines.append(
            f"| length-following Pearson, {kind} (values {lo}-{hi}) | {_num(f['pearson'], '+.3f')} "
            f"{_ci(f['interval'])} | >= {MIN_FOLLOWING_PEARSON} |"
        )
    lines += [
        f"| accuracy (free) | {s['accuracy']:.3f} | |",
        f"| truncated | {s['truncated_fraction']:.3f} | |",
        "",
        "| k | n | floor | tokens | tokens/floor | accuracy (own) | accuracy (forced minimal) | steps | merged | "
        "useful checks | useless checks | filler share |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, c in s["by_difficulty"].items():
        fk = tr["by_difficulty"][k]
        lines.append(
            f"| {k} | {c['n']} | {c['mean_floor_tokens']:.1f} | {c['mean_tokens']:.1f} | "
            f"{c['mean_tokens'] / c['mean_floor_tokens']:.2f} | {fk['own']:.3f} | {fk['forced']:.3f} | "
            f"{c['step_share']:.2f} | {c['skips_per_completion']:.2f} | {c['useful_checks_per_completion']:.2f} | "
            f"{c['useless_checks_per_completion']:.2f} | {c['filler_share']:.2f} |"
        )
    lines.append("")
    lines.append("(steps: share of tokens; merged, useful and useless checks: per completion)")
    return "\n".join(lines) + "\n"
