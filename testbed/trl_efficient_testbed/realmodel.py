r"""
The real-model experiment: a length recipe, GRPO and a constant length penalty trained from one real pretrained model
(SmolLM2-135M-Instruct) on CPU, judged on a held-out set with paired intervals (issue 49).

    trl-efficient testbed realmodel [--rules 4] [--output-dir DIR] [--no-train] [--update-docs]
    trl-efficient testbed realmodel --rules 1 --no-train         re-render version 1's committed table
    trl-efficient testbed realmodel --small --output-dir DIR     one seed, 2 steps, 32 problems: the test tier's run

Every rule is fixed in a rules file next to this module before the runs (`RULES`: version 4 `realmodel.yaml`, the
current one; versions 1-3 `realmodel_v1.yaml` ... `realmodel_v3.yaml`, kept byte for byte with their runs in
`perf/realmodel/results_v1` ... `results_v3`): the model, the task, the arms, seeds, steps and learning rate, the
evaluation, the intervals, the margins and the claims.
Each arm is trained through the
library's public recipe API, as a TRL script would (`get_recipe(name).config(...)`, `.prepare_dataset`,
`.trainer(...)`), and evaluated greedily on the same held-out problems. One run file per (arm, seed) under
`<output-dir>/runs/` (and `base.json`, the untrained model): the command resumes where it stopped and, with
`--no-train`, re-renders `realmodel.{json,md,png}` from the committed run files alone.

The task (`word_problems`): one addition or subtraction of two small numbers in a sentence, with a one-shot system
prompt that shows the answer format the library's correctness check reads.

>>> rows = word_problems(3, seed=0)
>>> [sorted(r) for r in rows][0], all(r["prompt"][0]["role"] == "system" for r in rows)
(['prompt', 'solution'], True)
>>> word_problems(2, seed=5) == word_problems(2, seed=5)
True
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from typing import Any

import numpy as np

__all__ = ["PROTOCOL_PATH", "RULES", "claims", "load", "main_run", "render", "run_experiment", "word_problems"]

logger = logging.getLogger(__name__)

_HERE = os.path.dirname(os.path.abspath(__file__))
PROTOCOL_PATH = os.path.join(_HERE, "realmodel.yaml")
# Every version of the rules, with the directory its committed runs and table live in (the current one last). A new
# version is a new file, written and committed before its runs; an old one is never edited (its hash is in its runs).
RULES = {
    1: (os.path.join(_HERE, "realmodel_v1.yaml"), os.path.join("perf", "realmodel", "results_v1")),
    2: (os.path.join(_HERE, "realmodel_v2.yaml"), os.path.join("perf", "realmodel", "results_v2")),
    3: (os.path.join(_HERE, "realmodel_v3.yaml"), os.path.join("perf", "realmodel", "results_v3")),
    4: (PROTOCOL_PATH, os.path.join("perf", "realmodel", "results")),
}
LATEST = max(RULES)

_NAMES = ("Mia", "Tom", "Ann", "Leo", "Sara", "Ben", "Nora", "Sam", "Lily", "Max", "Eva", "Jack")
_PRONOUN = {"Mia": "She", "Ann": "She", "Sara": "She", "Nora": "She", "Lily": "She", "Eva": "She"}
_OBJECTS = ("apples", "pens", "marbles", "books", "shells", "cards", "coins", "stickers", "cookies", "stamps")
_MORE = ("buys {b} more", "finds {b} more", "gets {b} more", "is given {b} more")
_LESS = ("gives away {b}", "loses {b}", "eats {b}", "sells {b}")


def load(path: str = PROTOCOL_PATH) -> dict:
    """The experiment's rules (a `RULES` file) as a dict (read as the comparison's protocol file is), with
    `sha256`: the first 16 hex digits of the file's SHA-256, which every run written under it records."""
    from .protocol import load as load_yaml

    return {**load_yaml(path), "sha256": protocol_sha256(path)}


def protocol_sha256(path: str = PROTOCOL_PATH) -> str:
    """The first 16 hex digits of the SHA-256 of the rules file's bytes (in every run file)."""
    from .protocol import sha256

    return sha256(path)


def word_problems(n: int, seed: int, low: int = 2, high: int = 9, system_prompt: str | None = None,
                  exclude: set | None = None) -> list[dict]:  # fmt: skip
    """`n` distinct word problems drawn with `random.Random(seed)`: prompt/solution rows (the conversational prompt
    a system turn with the one-shot format, then the problem), none whose text is in `exclude`."""
    rng = random.Random(seed)
    system = system_prompt if system_prompt is not None else load()["task"]["system_prompt"]
    rows, seen = [], set(exclude or ())
    while len(rows) < n:
        name, obj = rng.choice(_NAMES), rng.choice(_OBJECTS)
        a, b = rng.randint(low, high), rng.randint(low, high)
        pronoun = _PRONOUN.get(name, "He")
        if rng.random() < 0.5:
            verb, answer = rng.choice(_MORE).format(b=b), a + b
            question = f"How many {obj} does {name} have now?"
        else:
            a, b = max(a, b), min(a, b)
            verb, answer = rng.choice(_LESS).format(b=b), a - b
            question = f"How many {obj} does {name} have left?"
        text = f"{name} has {a} {obj}. {pronoun} {verb}. {question}"
        if text in seen:
            continue
        seen.add(text)
        rows.append({"prompt": [{"role": "system", "content": system}, {"role": "user", "content": text}],
                     "solution": str(answer)})  # fmt: skip
    return rows


def datasets(rules: dict) -> tuple[list[dict], list[dict]]:
    """The training problems and the held-out evaluation problems of `rules` (no evaluation text is a training one)."""
    task = rules["task"]
    kw = {"low": task["min_value"], "high": task["max_value"], "system_prompt": task["system_prompt"]}
    train = word_problems(task["train_problems"], task["train_seed"], **kw)
    held_out = word_problems(task["eval_problems"], task["eval_seed"], exclude={r["prompt"][1]["content"] for r in
                                                                                train}, **kw)  # fmt: skip
    return train, held_out


def model_dir(rules: dict) -> str:
    from trl_efficient.core.models import resolve_model_name

    return resolve_model_name(rules["model"]["name"])


# ------------------------------------------------------------------------------------------------------- evaluation


def evaluate(model, tokenizer, problems: list[dict], max_new_tokens: int, batch_size: int, progress=None) -> dict:
    """Greedy completions of `problems`: per problem `correct` (the library's correctness check) and `tokens` (the
    generated tokens up to and including EOS), in the problems' order."""
    import torch

    from trl_efficient.rewards import correctness_reward

    tokenizer.padding_side = "left"
    texts = [tokenizer.apply_chat_template(p["prompt"], tokenize=False, add_generation_prompt=True) for p in problems]
    correct, tokens, samples = [], [], []
    model.eval()
    for start in range(0, len(texts), batch_size):
        enc = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, temperature=None, top_p=None,
                                 top_k=None, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
        for row in out[:, enc["input_ids"].shape[1] :].tolist():
            ids = []
            for t in row:
                ids.append(t)
                if t == tokenizer.eos_token_id:
                    break
            while ids and ids[-1] == tokenizer.pad_token_id and tokenizer.pad_token_id != tokenizer.eos_token_id:
                ids.pop()
            tokens.append(len(ids))
            samples.append(tokenizer.decode(ids, skip_special_tokens=True))
        if progress is not None:
            progress.update(len(enc["input_ids"]))
    golds = [p["solution"] for p in problems]
    correct = [float(bool(x)) for x in correctness_reward(samples, golds)]
    return {"correct": correct, "tokens": tokens, "samples": samples[:8]}


# ---------------------------------------------------------------------------------------------------------- training


def train_config(arm: str, seed: int, rules: dict, output_dir: str):
    """The arm's `EfficientGRPOConfig` through the recipe API: the recipe's settings < the experiment's."""
    from trl_efficient import get_recipe

    t = rules["training"]
    recipe = get_recipe(arm)
    args = recipe.config(
        output_dir=output_dir, max_steps=t["max_steps"], num_generations=t["num_generations"],
        per_device_train_batch_size=t["per_device_train_batch_size"], max_completion_length=t["max_completion_length"],
        temperature=t["temperature"], learning_rate=t["learning_rate"], beta=t["beta"], seed=seed, data_seed=seed,
        logging_steps=1, save_strategy="no", report_to="none", bf16=False, fp16=False, use_cpu=True,
        lr_scheduler_type="constant", warmup_steps=0,
        **({"reward_kwargs": {"constant_length": {"alpha": t["constant_penalty_alpha"]}}}
           if arm == "constant-penalty" else {}),
    )  # fmt: skip
    # no activation checkpointing (GRPOConfig's default): it turns the KV cache off during generation, which then
    # recomputes every prefix (about 10x slower on CPU), and memory is not short at this size
    args.gradient_checkpointing = False
    if hasattr(args, "activation_checkpointing"):
        args.activation_checkpointing = False
    return recipe, args


def train_and_evaluate(
    arm: str, seed: int, rules: dict, held_out: list[dict], train: list[dict], work_dir: str
) -> dict:
    """Train `arm` at `seed` from the base model, then evaluate it: one run file's content."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer

    torch.manual_seed(seed)
    path = model_dir(rules)
    tokenizer = AutoTokenizer.from_pretrained(path)
    recipe, args = train_config(arm, seed, rules, os.path.join(work_dir, f"{arm}-seed{seed}"))
    dataset = recipe.prepare_dataset(Dataset.from_list(train), args, tokenizer)
    started = time.perf_counter()
    trainer = recipe.trainer(model=path, args=args, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    seconds = time.perf_counter() - started
    ev = rules["evaluation"]
    result = evaluate(trainer.model, tokenizer, held_out, ev["max_new_tokens"], ev["batch_size"])
    keep = ("reward", "loss", "completions/mean_length", "trl_efficient/accuracy", "grad_norm")
    logs = [{k: v for k, v in entry.items() if k in keep or k == "step"} for entry in trainer.state.log_history
            if "loss" in entry]  # fmt: skip
    return {"arm": arm, "seed": seed, "train_seconds": round(seconds, 1), "log_history": logs, **result}


def _run_path(output_dir: str, arm: str, seed: int | None) -> str:
    return os.path.join(output_dir, "runs", "base.json" if arm == "base" else f"{arm}-seed{seed}.json")


def _write(path: str, record: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1)
    os.replace(tmp, path)


def _stamp(record: dict, rules: dict, small: bool) -> dict:
    from .protocol import library_versions

    return {**record, "protocol_sha256": rules["sha256"], "small": small, "versions": library_versions()}


def small_rules(rules: dict) -> dict:
    """The test tier's variant: one seed, 2 steps of 2 prompts, 32 held-out problems, 48 new tokens."""
    import copy

    r = copy.deepcopy(rules)
    r["task"].update(train_problems=16, eval_problems=32)
    r["training"].update(seeds=[0], max_steps=2, per_device_train_batch_size=8, num_generations=4,
                         max_completion_length=48)  # fmt: skip
    r["evaluation"].update(max_new_tokens=48, batch_size=32)
    return r


def run_experiment(output_dir: str, train_runs: bool = True, small: bool = False, show_progress: bool = True,
                   rules_path: str = PROTOCOL_PATH) -> dict:  # fmt: skip
    """Every missing run (base evaluation, then each arm x seed) under the rules at `rules_path`, then the summary
    (`render`)."""
    import torch
    from tqdm.auto import tqdm

    rules = small_rules(load(rules_path)) if small else load(rules_path)
    train, held_out = datasets(rules)
    jobs = [("base", None)] + [(arm, s) for s in rules["training"]["seeds"] for arm in rules["training"]["arms"]]
    missing = [(a, s) for a, s in jobs if not os.path.exists(_run_path(output_dir, a, s))]
    if train_runs and missing:
        torch.set_num_threads(max(1, os.cpu_count() or 1))
        bar = tqdm(missing, desc="realmodel", unit="run", disable=not show_progress)
        for arm, seed in bar:
            bar.set_postfix_str(f"{arm} seed {seed}" if seed is not None else "base model")
            started = time.perf_counter()
            if arm == "base":
                from transformers import AutoModelForCausalLM, AutoTokenizer

                path = model_dir(rules)
                tok = AutoTokenizer.from_pretrained(path)
                model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
                ev = rules["evaluation"]
                record = {"arm": "base", "seed": None, **evaluate(model, tok, held_out, ev["max_new_tokens"],
                                                                   ev["batch_size"])}  # fmt: skip
            else:
                import tempfile

                with tempfile.TemporaryDirectory() as work:  # the trainer's output_dir: nothing in it is kept
                    record = train_and_evaluate(arm, seed, rules, held_out, train, work)
            record["seconds"] = round(time.perf_counter() - started, 1)
            _write(_run_path(output_dir, arm, seed), _stamp(record, rules, small))
    return render(output_dir, rules)


# ---------------------------------------------------------------------------------------------------------- verdicts


def _runs(output_dir: str, rules: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for arm in ["base", *rules["training"]["arms"]]:
        seeds = [None] if arm == "base" else rules["training"]["seeds"]
        for seed in seeds:
            path = _run_path(output_dir, arm, seed)
            if not os.path.exists(path):
                continue
            with open(path) as f:
                run = json.load(f)
            # a version that extends an earlier one reads the earlier one's runs as its own (`compatible_runs`)
            if run.get("protocol_sha256") not in {rules["sha256"], *map(str, rules.get("compatible_runs") or [])}:
                raise ValueError(f"{path} was written under another version of the rules ({run.get('protocol_sha256')}"
                                 f"); these are {rules['sha256']} (--rules): rerun it.")  # fmt: skip
            out.setdefault(arm, []).append(run)
    return out


def _cells(runs: list[dict], key: str) -> np.ndarray:
    return np.array([[float(x) for x in r[key]] for r in runs])


def _interval(stat, num_seeds: int, num_tasks: int, rules: dict, limits: tuple | None = None) -> list:
    """`(point, low, high)` of `stat` (the testbed's `stats.interval`), clipped to the values it can take."""
    from .stats import Bootstrap, interval

    st = rules["statistics"]
    boot = Bootstrap(num_seeds, num_tasks, resamples=int(st["bootstrap"]), seed=0)
    values = interval(boot, stat, float(st["confidence"]), limits=limits)
    return [None if v is None else round(float(v), 4) for v in values]


def arm_summary(runs: list[dict], rules: dict) -> dict:
    """Accuracy and mean tokens of one arm with their intervals (tasks resampled, seeds by Student t)."""
    from .stats import wmean

    out = {"seeds": [r.get("seed") for r in runs]}
    for key, name, limits in (("correct", "accuracy", (0.0, 1.0)), ("tokens", "mean_tokens", (0.0, float("inf")))):
        x = _cells(runs, key)
        out[name] = _interval(lambda w, v, x=x: wmean(x, w, v), x.shape[0], x.shape[1], rules, limits)
        out[f"{name}_per_seed"] = [round(float(v), 4) for v in x.mean(axis=1)]
    return out


def paired(a_runs: list[dict], b_runs: list[dict], key: str, rules: dict) -> list:
    """`a - b` on `key`, paired by training seed and problem (a single-run side, the base model, is repeated)."""
    from .stats import wmean

    a, b = _cells(a_runs, key), _cells(b_runs, key)
    if a.shape[0] == 1 and b.shape[0] > 1:
        a = np.repeat(a, b.shape[0], axis=0)
    if b.shape[0] == 1 and a.shape[0] > 1:
        b = np.repeat(b, a.shape[0], axis=0)
    if a.shape != b.shape:
        raise ValueError(f"paired: {a.shape} vs {b.shape} cells (the arms must share seeds and problems).")
    return _interval(lambda w, v: wmean(a, w, v) - wmean(b, w, v), a.shape[0], a.shape[1], rules)


def claims(runs: dict[str, list[dict]], rules: dict) -> dict:
    """The three claims of `realmodel.yaml` on the run files: setup (GRPO moved), kimi vs grpo, kimi vs
    constant-penalty; each with its differences (intervals) and verdict (True held, False not held, None
    inconclusive), read by the comparison's own rules (`stats.decide`, `constraint`, `combine`, `either`)."""
    from .stats import combine, constraint, decide, either

    m = rules["margins"]
    tok, tol, acc = float(m["tokens"]), float(m["accuracy_tolerance"]), float(m["accuracy"])
    recipe, grpo, constant = rules["training"]["arms"][1], runs.get("grpo"), runs.get("constant-penalty")
    out: dict[str, Any] = {}
    if grpo and "base" in runs:
        d_acc, d_tok = paired(grpo, runs["base"], "correct", rules), paired(runs["base"], grpo, "tokens", rules)
        moved = decide(d_acc) is not None or decide(d_tok) is not None  # an interval that excludes 0, either side
        out["setup"] = {"grpo_minus_base_accuracy": d_acc, "base_minus_grpo_tokens": d_tok, "held": moved}
    if grpo and runs.get(recipe):
        rec = runs[recipe]
        saved, d_acc = paired(grpo, rec, "tokens", rules), paired(rec, grpo, "correct", rules)
        held = combine(decide(saved, tok), constraint(d_acc, tol))
        out["vs_grpo"] = {"tokens_saved": saved, "accuracy_difference": d_acc, "held": held}
    if constant and runs.get(recipe):
        rec = runs[recipe]
        saved, d_acc = paired(constant, rec, "tokens", rules), paired(rec, constant, "correct", rules)
        short_way = combine(decide(saved, tok), constraint(d_acc, tol))
        accurate_way = combine(decide(d_acc, acc), constraint(saved, tok))
        held = either(short_way, accurate_way)
        out["vs_constant_penalty"] = {"tokens_saved": saved, "accuracy_difference": d_acc, "held": held}
    return out


_VERDICT = {True: "held", False: "not held", None: "inconclusive"}


def _fmt(est, digits: int) -> str:
    if est is None or est[0] is None:
        return "-"
    if est[1] is None:
        return f"{est[0]:+.{digits}f}"
    return f"{est[0]:+.{digits}f} [{est[1]:+.{digits}f}, {est[2]:+.{digits}f}]"


def _abs(est, digits: int) -> str:
    return "-" if est is None else f"{est[0]:.{digits}f} [{est[1]:.{digits}f}, {est[2]:.{digits}f}]"


def render(output_dir: str, rules: dict | None = None) -> dict:
    """`realmodel.json`, `realmodel.md` and `realmodel.png` in `output_dir` from its run files alone."""
    rules = rules or load()  # the current version
    runs = _runs(output_dir, rules)
    arms = {arm: arm_summary(rs, rules) for arm, rs in runs.items()}
    for arm, rs in runs.items():
        arms[arm]["train_seconds"] = [r.get("train_seconds") for r in rs]
        arms[arm]["seconds"] = [r.get("seconds") for r in rs]
        arms[arm]["token_quantiles"] = [float(q) for q in np.quantile(_cells(rs, "tokens"), [0.1, 0.5, 0.9])]
    result = {"protocol_sha256": rules["sha256"], "version": rules.get("version"), "model": rules["model"]["name"],
              "arms": arms,
              "claims": claims(runs, rules), "training": rules["training"],
              "minutes": round(sum(r.get("seconds") or 0.0 for rs in runs.values() for r in rs) / 60, 1),
              "complete": all(len(runs.get(a, [])) == len(rules["training"]["seeds"]) for a in
                              rules["training"]["arms"]) and "base" in runs}  # fmt: skip
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "realmodel.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(output_dir, "realmodel.md"), "w") as f:
        f.write(markdown(result, rules))
    if runs:
        plot(result, os.path.join(output_dir, "realmodel.png"))
    return result


def markdown(result: dict, rules: dict) -> str:
    t = rules["training"]
    lines = [
        f"# Real-model experiment: {result['model']} (realmodel.yaml sha256 {result['protocol_sha256']})",
        "",
        f"{t['max_steps']} GRPO steps x {t['per_device_train_batch_size']} completions ({t['num_generations']} per "
        f"prompt, at most {t['max_completion_length']} tokens, T {t['temperature']}), full fine-tuning at lr "
        f"{t['learning_rate']:g}, seeds {t['seeds']}; greedy evaluation on {rules['task']['eval_problems']} held-out "
        f"word problems. Intervals: {100 * rules['statistics']['confidence']:.4g}%, tasks resampled and seeds by "
        "Student t.",
        "",
        "| arm | seeds | accuracy | mean tokens | per seed: accuracy @ tokens | tokens p10 / p50 / p90 | train s |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, s in result["arms"].items():
        q = " / ".join(f"{x:.0f}" for x in s["token_quantiles"])
        secs = ", ".join(f"{x:.0f}" for x in s["train_seconds"] if x is not None) or "-"
        per = ", ".join(f"{a:.2f} @ {t:.0f}" for a, t in zip(s["accuracy_per_seed"], s["mean_tokens_per_seed"]))
        lines.append(f"| {arm} | {len(s['seeds'])} | {_abs(s['accuracy'], 3)} | {_abs(s['mean_tokens'], 1)} | {per} | "
                     f"{q} | {secs} |")  # fmt: skip
    c = result["claims"]
    lines += ["", "| claim | measured | verdict |", "|---|---|---|"]
    if "setup" in c:
        s = c["setup"]
        lines.append(f"| GRPO moves accuracy or tokens (vs the base model) | accuracy grpo - base "
                     f"{_fmt(s['grpo_minus_base_accuracy'], 3)}; tokens base - grpo "
                     f"{_fmt(s['base_minus_grpo_tokens'], 1)} | {'held' if s['held'] else 'not held'} |")  # fmt: skip
    names = {"vs_grpo": "grpo", "vs_constant_penalty": "constant-penalty"}
    recipe = t["arms"][1]
    for key, other in names.items():
        if key in c:
            v = c[key]
            claim = (
                "shorter than grpo at kept accuracy"
                if key == "vs_grpo"
                else "a better trade-off than constant-penalty (shorter at kept accuracy, or more accurate)"
            )
            measured = (f"tokens {other} - {recipe} {_fmt(v['tokens_saved'], 1)}; accuracy {recipe} - {other} "
                        f"{_fmt(v['accuracy_difference'], 3)}")  # fmt: skip
            lines.append(f"| {recipe}: {claim} | {measured} | {_VERDICT[v['held']]} |")
    if not result["complete"]:
        lines += ["", "Incomplete: some runs are missing (the command resumes them)."]
    return "\n".join(lines) + "\n"


def headline(result: dict) -> str:
    """The README's sentences on the experiment, from its numbers alone: each arm's accuracy @ mean tokens (the
    per-seed values are in the docs' table), and the three verdicts with their intervals (`claims`)."""
    arms, c = result["arms"], result["claims"]
    recipe = result["training"]["arms"][1]

    def mean(name):
        s = arms[name]
        return f"{s['accuracy'][0]:.3f} @ {s['mean_tokens'][0]:.1f}"

    t = result["training"]
    names = ["base", *[n for n in t["arms"] if n in arms]]
    version = f"Rules version {result['version']}: " if result.get("version") else ""
    prompts = t["per_device_train_batch_size"] // t["num_generations"]
    text = [f"{version}{t['max_steps']} GRPO steps of {prompts} prompts x {t['num_generations']} completions (cap "
            f"{t['max_completion_length']}) at lr {t['learning_rate']:g}, {len(t['seeds'])} seeds. Accuracy @ mean "
            "tokens (per seed: docs/realmodel.md): " + "; ".join(f"`{n}` {mean(n)}" for n in names if n in arms)
            + "."]  # fmt: skip
    if "setup" in c:
        s = c["setup"]
        moved = "moved" if s["held"] else "not resolved"
        text.append(f"GRPO against the base: accuracy {_fmt(s['grpo_minus_base_accuracy'], 3)}, tokens "
                    f"{_fmt(_neg(s['base_minus_grpo_tokens']), 1)}: **{moved}**.")  # fmt: skip
    if "vs_grpo" in c:
        v = c["vs_grpo"]
        text.append(f"`{recipe}` shorter than `grpo` at kept accuracy: **{_VERDICT[v['held']]}** (tokens saved "
                    f"{_fmt(v['tokens_saved'], 1)}, accuracy {_fmt(v['accuracy_difference'], 3)})")  # fmt: skip
    if "vs_constant_penalty" in c:
        text[-1] += f"; a better trade-off than `constant-penalty`: **{_VERDICT[c['vs_constant_penalty']['held']]}**"
    return " ".join(text) + f". {result['minutes']:.1f} minutes (the run files' seconds)."


def _neg(est):
    return None if est is None or est[0] is None else [-x if x is not None else None for x in (est[0], est[2], est[1])]


def plot(result: dict, path: str) -> None:
    """Accuracy against mean tokens, one point per arm with its intervals on both axes, and each seed's (x)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    colors = {"base": "black", "grpo": "tab:blue", "constant-penalty": "tab:gray"}
    for arm, s in result["arms"].items():
        x, y = s["mean_tokens"], s["accuracy"]
        ax.errorbar(x[0], y[0], xerr=[[x[0] - x[1]], [x[2] - x[0]]], yerr=[[y[0] - y[1]], [y[2] - y[0]]],
                    fmt="s" if arm == "base" else "o", color=colors.get(arm, "tab:red"), capsize=3,
                    label=f"{arm} ({len(s['seeds'])} seed{'s' if len(s['seeds']) != 1 else ''})")  # fmt: skip
        if len(s["seeds"]) > 1:  # each seed's own point: what the interval summarises
            ax.scatter(s["mean_tokens_per_seed"], s["accuracy_per_seed"], marker="x", s=30,
                       color=colors.get(arm, "tab:red"), alpha=0.8)  # fmt: skip
    ax.set_xlabel("mean completion tokens (greedy, held-out; x: one training seed)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"{result['model']}: word problems", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main_run(argv: list[str] | None = None) -> int:
    """`trl-efficient testbed realmodel`."""
    import argparse

    p = argparse.ArgumentParser(prog="trl-efficient testbed realmodel", description=__doc__.split("\n\n")[0])
    p.add_argument("--rules", type=int, choices=sorted(RULES), default=LATEST,
                   help=f"which version of the rules (default {LATEST}, the current one); each has its own output "
                   "directory")  # fmt: skip
    p.add_argument("--output-dir", default=None, help="default: the version's committed results directory")
    p.add_argument("--no-train", action="store_true", help="render the committed run files; train nothing")
    p.add_argument("--small", action="store_true", help="one seed, 2 steps, 32 problems (the test tier's run)")
    p.add_argument("--update-docs", action="store_true", help="paste the results into README.md (the current "
                   "version) and docs/realmodel.md (their realmodel markers), from the repository root")  # fmt: skip
    args = p.parse_args(argv)
    rules_path, default_dir = RULES[args.rules]
    output_dir = args.output_dir or default_dir
    result = run_experiment(output_dir, train_runs=not args.no_train, small=args.small, rules_path=rules_path)
    print(markdown(result, small_rules(load(rules_path)) if args.small else load(rules_path)))
    if args.update_docs:
        from trl_efficient.recipes.tables import write_readme_section

        for path, (marker, text) in paste_targets(result, output_dir, args.rules).items():
            write_readme_section(path, marker, text)
            print(f"updated {path} ({marker})")
    return 0


MARKER = "realmodel"


def paste_targets(result: dict, output_dir: str, version: int = LATEST) -> dict[str, tuple[str, str]]:
    """What `--update-docs` writes, `{path: (marker, text)}`: docs/realmodel.md the version's table (`realmodel.md`
    without its title) and plot between its markers (`realmodel`, `realmodel-v1`, ...); README.md the headline
    sentences (`headline`) of the current version only."""
    with open(os.path.join(output_dir, "realmodel.md")) as f:
        table = f.read().split("\n", 2)[2].strip()
    plot_path = os.path.join(output_dir, "realmodel.png").replace(os.sep, "/")
    marker = MARKER if version == LATEST else f"{MARKER}-v{version}"
    image = f"![accuracy against mean tokens](../{plot_path})"
    out = {os.path.join("docs", "realmodel.md"): (marker, f"{image}\n\n{table}")}
    if version == LATEST:
        out["README.md"] = (MARKER, headline(result))
    return out
