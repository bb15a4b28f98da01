r"""Which way does a group's advantage push the length? GRPO's groups against GFPO's kept subsets, on the base model.

    python perf/testbed/group_signal.py [--num-tasks 256] [--group 16] [--keep 8] [--base-model testbed:v2]

Samples `--group` completions per training task from the testbed's base model at the training temperature (1.0,
top-p 1.0, the comparison's cap), scores them with the correctness reward, and computes for every group, as the
first GRPO step from the base model would see it:

- **GRPO** (the first `--keep` samples, the comparison's G = 8): advantages $A_i = (R_i - \bar R)/\sigma_R$ over the
  group;
- **GFPO Shortest k/G** (methods.md §13): the `--keep` shortest of the `--group` samples are kept and $A_i$ is computed
  over the kept set, the rest get 0.

A group *has signal* when its rewards (over the kept set, for GFPO) are not all equal. In such a group the update
raises the probability of the positive-advantage samples and lowers that of the negative ones; how it moves the
length is the **length gap**
$$ \Delta L = \frac{\sum_{A_i > 0} A_i L_i}{\sum_{A_i > 0} A_i}
             - \frac{\sum_{A_i < 0} |A_i| L_i}{\sum_{A_i < 0} |A_i|}, $$
the mean length of what is reinforced minus the mean length of what is penalised (with $\sum_i A_i = 0$,
$\sum_i A_i L_i = \tfrac12 \sum_i |A_i| \cdot \Delta L$: the length term of the policy-gradient step). Negative: the
step favours shorter samples. Reported per difficulty band with 95% bootstrap intervals over tasks (the testbed's,
`trl_efficient_testbed.stats`): the share of groups with signal, the mean gap over those groups, and the gap per
group (share x gap, 0 for a group without signal): the length pressure of one step.
Writes `results/group_signal.{json,md}`.

Why: GFPO's check on the testbed ("shorter than grpo") is inconclusive with GFPO's own seeds scattering around GRPO's
length. This measures what its filter does to the signal in this world (docs/testbed.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

os.environ["HF_HUB_OFFLINE"] = "1"  # the testbed never touches the network
if platform.machine() in ("x86_64", "AMD64"):  # the CPU kernels of the committed runs (docs/testbed.md, "One base")
    os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
BANDS = {"easy (1-2 ops)": (1, 2), "middle (3-5 ops)": (3, 5), "hard (6-8 ops)": (6, 8)}


def length_gap(rewards: list[float], lengths: list[int], keep: int | None = None) -> float | None:
    """The length gap of one group (`None` without signal): the advantage-weighted mean length of the reinforced
    samples minus that of the penalised ones. The advantages are GFPO's (`trl_efficient.methods.gfpo`): with `keep`,
    the `keep` shortest samples (`gfpo_keep_mask`, stable on ties) get kept-set advantages (`kept_set_advantages`)
    and the rest 0; without it the whole group is kept, which is GRPO's group normalisation. The gap does not depend
    on the advantages' scale.

    Rewards 1, 0, 1, 0 with lengths 10, 20, 30, 40: reinforced mean 20, penalised mean 30: gap -10.

    >>> length_gap([1, 0, 1, 0], [10, 20, 30, 40])
    -10.0
    >>> length_gap([1, 0, 1, 0], [10, 20, 30, 40], keep=2)  # kept: 10 (correct) and 20 (wrong)
    -10.0
    >>> length_gap([1, 1, 0, 0], [10, 20, 30, 40], keep=2) is None  # kept 10 and 20 are both correct: no signal
    True
    """
    import torch

    from trl_efficient.methods.gfpo import gfpo_keep_mask, kept_set_advantages

    total, n = torch.tensor(rewards, dtype=torch.float64), torch.tensor(lengths, dtype=torch.float64)
    mask = gfpo_keep_mask(total, n, len(rewards), len(rewards) if keep is None else keep)
    adv = kept_set_advantages(total, mask, len(rewards))
    pos, neg = adv.clamp(min=0), (-adv).clamp(min=0)
    if pos.sum() == 0 or neg.sum() == 0:
        return None
    return float((pos * n).sum() / pos.sum() - (neg * n).sum() / neg.sum())


def summarise(groups: list[dict], group: int, keep: int, resamples: int = 2000, seed: int = 0) -> dict:
    """Per band and overall, for GRPO (the first `keep` samples) and GFPO (the `keep` shortest of `group`): the share
    of groups with signal, the mean gap over them and the gap per group (0 without signal), as `[point, low, high]`
    with the testbed's 95% bootstrap interval over tasks (`testbed.stats`, `resamples` seeded resamples)."""
    import numpy as np

    from trl_efficient_testbed.stats import Bootstrap, interval, wmean

    ops = np.array([g["ops"] for g in groups])
    boot = Bootstrap(1, len(groups), resamples, seed)
    grpo = [length_gap(g["rewards"][:keep], g["lengths"][:keep]) for g in groups]
    gfpo = [length_gap(g["rewards"], g["lengths"], keep=keep) for g in groups]
    cells = {"accuracy": np.array([[sum(g["rewards"]) / group for g in groups]])}
    for name, gaps in (("grpo", grpo), ("gfpo", gfpo)):
        cells[f"{name} signal"] = np.array([[float(x is not None) for x in gaps]])
        cells[f"{name} gap"] = np.array([[0.0 if x is None else x for x in gaps]])

    def mean(key, mask, over=None):  # the mean of a cell over the band's tasks (and only those with signal: `over`)
        m = mask if over is None else mask & (cells[over][0] > 0)
        if not m.any():
            return [None, None, None]
        return list(interval(boot, lambda w, v: wmean(cells[key], w, v, m)))

    out = {}
    for band, (lo, hi) in {"all": (1, 99), **BANDS}.items():
        mask = (ops >= lo) & (ops <= hi)
        out[band] = {"tasks": int(mask.sum()), "accuracy": mean("accuracy", mask)}
        for name in ("grpo", "gfpo"):
            out[band][name] = {"signal": mean(f"{name} signal", mask),
                               "gap": mean(f"{name} gap", mask, over=f"{name} signal"),
                               "pressure": mean(f"{name} gap", mask)}  # fmt: skip
    return out


def _fmt(cell, digits=1, sign="+") -> str:
    m, lo, hi = cell
    if m is None:
        return "-"
    f = f"{sign}.{digits}f"
    return f"{m:{f}} [{lo:{f}}, {hi:{f}}]" if lo is not None else f"{m:{f}}"


def markdown(result: dict) -> str:
    s = result["summary"]
    lines = [
        "# Length pressure of one step: GRPO's groups against GFPO's kept subsets",
        "",
        f"Model `{result['model']}`, {result['num_tasks']} training tasks, {result['group']} samples each (temperature "
        f"1.0, top-p 1.0, {result['max_new_tokens']} new tokens, seed {result['seed']}), correctness reward. GRPO: the "
        f"first {result['keep']} samples; GFPO: the {result['keep']} shortest of {result['group']}. Gap: mean length "
        "of the reinforced samples minus the penalised ones (advantage-weighted; negative favours shorter); pressure: "
        "gap x share with signal (0 for a group without). 95% bootstrap intervals over tasks. "
        f"Command: `{result['command']}` ({result['seconds']} s).",
        "",
        "| tasks | n | accuracy | GRPO: share with signal | GRPO: gap (tokens) | GRPO: pressure | GFPO: share with "
        "signal | GFPO: gap (tokens) | GFPO: pressure |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for band, cell in s.items():
        g, f = cell["grpo"], cell["gfpo"]
        lines.append(f"| {band} | {cell['tasks']} | {_fmt(cell['accuracy'], 3, '')} | {_fmt(g['signal'], 2, '')} | "
                     f"{_fmt(g['gap'])} | {_fmt(g['pressure'])} | {_fmt(f['signal'], 2, '')} | {_fmt(f['gap'])} | "
                     f"{_fmt(f['pressure'])} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def sample_groups(base_model: str, num_tasks: int, group: int, max_new_tokens: int, seed: int) -> list[dict]:
    """`group` samples per training task from the base model: `{"ops", "rewards", "lengths"}` per task."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_efficient.eval.evaluate import EvalMode, TransformersBackend, build_prompt_text
    from trl_efficient.overthinking.base import resolve_base_model
    from trl_efficient.overthinking.data import load_testbed_dataset, task_from_row
    from trl_efficient.rewards import is_correct

    path = resolve_base_model(base_model)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    rows = list(load_testbed_dataset("train", num_tasks, seed))
    prompts = [build_prompt_text(r["prompt"], EvalMode(), tok) for r in rows]
    backend = TransformersBackend(model, tok, batch_size=64, show_progress=True)
    gens = backend.generate(prompts, group, max_new_tokens, 1.0, 1.0, seed, "group signal")
    return [{"ops": task_from_row(r).difficulty,
             "rewards": [float(bool(is_correct(g.text, r["solution"]))) for g in samples],
             "lengths": [len(g.ids) for g in samples]} for r, samples in zip(rows, gens, strict=True)]  # fmt: skip


def main(argv=None) -> int:
    from trl_efficient_testbed.runner import TestbedSettings, torch_threads

    defaults = TestbedSettings()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-tasks", type=int, default=256)
    parser.add_argument("--group", type=int, default=16)
    parser.add_argument("--keep", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base-model", default=defaults.base_model)
    parser.add_argument("--max-new-tokens", type=int, default=defaults.max_completion_length)
    parser.add_argument("--output-dir", default=os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    if not 2 <= args.keep <= args.group:
        parser.error("need 2 <= --keep <= --group")
    t0 = time.time()
    with torch_threads():
        groups = sample_groups(args.base_model, args.num_tasks, args.group, args.max_new_tokens, args.seed)
    result = {"model": args.base_model, "num_tasks": args.num_tasks, "group": args.group, "keep": args.keep,
              "seed": args.seed, "max_new_tokens": args.max_new_tokens,
              "summary": summarise(groups, args.group, args.keep), "groups": groups,
              "seconds": round(time.time() - t0, 1)}  # fmt: skip
    result["command"] = "python perf/testbed/group_signal.py " + " ".join(argv if argv is not None else sys.argv[1:])
    os.makedirs(args.output_dir, exist_ok=True)
    base = os.path.join(args.output_dir, "group_signal")
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
