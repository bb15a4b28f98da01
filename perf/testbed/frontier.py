"""Sweep the length-penalty recipes on the testbed and draw their frontier into perf/testbed/results/frontier.*.

    python perf/testbed/frontier.py [--recipes kimi laser ...] [--max-steps 40] [--output-dir perf/testbed/results]

For every entry of `FRONTIER_SWEEPS` (one key and three values per recipe; `x<m>` = m times the value the recipe has
at its testbed scale, see trl_efficient_testbed/sweep.py), runs `trl-efficient testbed sweep` with the comparison's
default settings, writing `sweep_<recipe>.{json,md,png}` and the trained points under `<output-dir>/sweep-<recipe>/`
(cached: a rerun with unchanged settings reuses them), then `frontier.{json,md,png}`: accuracy vs mean tokens, every
recipe's points connected in sweep order, Pareto-optimal points (over all recipes, base and grpo) ringed. The base
and grpo rows come from `<output-dir>/base` and `<output-dir>/grpo`, shared with `perf/testbed/compare.py` (reused
when it ran first with the same settings). A recipe not in the registry, without a testbed scaling rule or whose
key does not bind is skipped with a printed note (and listed in frontier.md). Each point is one 40-step training
(~35-60 s on two shared cores) plus one evaluation (~10 s): 14 recipes x 3 points x 3 seeds, the points at the
recipe's own value reused from the comparison: about 20 minutes.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # the testbed never touches the network
if platform.machine() in ("x86_64", "AMD64"):  # the CPU kernels of the committed runs (docs/testbed.md, "One base")
    os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")

# recipe -> (sweep key, three values). Values around the recipe's testbed scale: x<m> multiplies the scaled value.
FRONTIER_SWEEPS: dict[str, tuple[str, list]] = {
    "kimi": ("reward.kimi_length.weight", [0.2, 0.4, 0.8]),  # no coefficient: the length reward's weight (0.4)
    "l1-max": ("reward.l1.alpha", ["x0.5", "x1", "x2"]),  # per-token alpha at testbed scale
    "laser": ("reward.laser.target_length", ["x1", "x2", "x4"]),  # L_T scaled to the cap (24 at 192)
    "shorter-better": ("reward.shorter_better.beta", ["x0.5", "x1", "x2"]),  # per-token beta at testbed scale
    "hapo": ("reward.hapo_length.w_lr", [0.25, 0.5, 1.0]),  # length-reward weight, kept in [0, 1]
    "alp": ("reward.alp.beta", [0.25, 0.5, 1.0]),  # beta / N with N = the cap (proposed default 0.5)
    "a-dlp": ("reward.adlp_length.acc_ref", [0.35, 0.45, 0.55]),  # lambda_0 starts at its cap 1/L: acc_ref steers it
    # issue 35 item 4: the recipes named by most published pairs (docs/literature.md), swept on their length knob
    "drpo": ("advantage_kwargs.lam", [0.05, 0.1, 0.2]),  # the softmax temperature over 1 - L/C: smaller, shorter
    "dler": ("max_completion_length", ["x0.75", "x1", "x1.5"]),  # the training cap (truncation is its only penalty)
    "o1-pruner": ("reward.o1_pruner.alpha", ["x0.5", "x1", "x2"]),  # the accuracy term's weight against length
    # and one side of every other published pair
    "da-dler": ("advantage_kwargs.truncate_to", ["x0.75", "x1", "x1.5"]),  # the easy groups' cut (below the cap)
    "dot": ("filter_kwargs.alpha", ["x0.5", "x1", "x2"]),  # the outlier z-score threshold: smaller, more cut
    "l1-exact": ("reward.l1.alpha", ["x0.5", "x1", "x2"]),  # per-token alpha at testbed scale
    "gfpo": ("advantage_kwargs.k", [4, 8, 12]),  # the responses kept of G = 16: fewer, shorter
}


def plan(recipes: list[str], settings) -> tuple[list[tuple[str, dict]], dict[str, str]]:
    """`([(recipe, sets)], skipped)`: the sweeps that can run, and why the others cannot (printed, not raised)."""
    from trl_efficient.recipes import RECIPES
    from trl_efficient_testbed.sweep import resolve_point, sweep_grid

    runnable, skipped = [], {}
    for name in recipes:
        if name not in FRONTIER_SWEEPS:
            skipped[name] = "no entry in FRONTIER_SWEEPS (perf/testbed/frontier.py)"
            continue
        key, values = FRONTIER_SWEEPS[name]
        if name not in RECIPES:
            skipped[name] = "not in the recipe registry (yet)"
            continue
        sets = {key: list(values)}
        try:
            for point in sweep_grid(sets):
                resolve_point(name, point, settings)
        except ValueError as err:  # no scaling rule, or the key does not bind
            skipped[name] = " ".join(str(err).split())
            continue
        runnable.append((name, sets))
    return runnable, skipped


def main(argv=None) -> int:
    from trl_efficient_testbed.runner import TestbedSettings
    from trl_efficient_testbed.sweep import run_sweep, write_frontier

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", nargs="+", default=list(FRONTIER_SWEEPS))
    parser.add_argument("--base-model", default="testbed:v2")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--output-dir", default=RESULTS)
    parser.add_argument("--out", default=None, help="the frontier PNG (default <output-dir>/frontier.png)")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--seeds", type=int, default=None, help="training seeds per point (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2: the two CPU cores)")
    args = parser.parse_args(argv)
    settings = TestbedSettings(base_model=args.base_model)
    if args.max_steps is not None:
        settings.max_steps = args.max_steps
    if args.seeds is not None:
        settings.seeds = args.seeds
    runnable, skipped = plan(args.recipes, settings)
    for name, why in skipped.items():
        print(f"note: skipping {name}: {why}")
    if not runnable:
        print("nothing to sweep", file=sys.stderr)
        return 1
    sweeps, failed = [], []
    for name, sets in runnable:
        print(f"sweeping {name}: {sets}")
        out = run_sweep(name, sets, settings, args.output_dir, overwrite=args.overwrite, workers=args.workers)
        sweeps.append(out)
        failed += [f"{name} {label}" for label in out["failed"]]
    files = write_frontier(sweeps, args.out or os.path.join(args.output_dir, "frontier.png"), skipped)
    with open(files["markdown"]) as f:
        print(f.read())
    for name, path in files.items():
        print(f"{name:9s}: {path}")
    if failed:
        print(f"failed points: {'; '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
