"""
The comparison's wall time on 2 cores under the current protocol, estimated from the committed run files and the
world's last uninterrupted timing (issue 48's "done when": one resumable command in <= 120 minutes per world).

    python perf/testbed/runtime.py            # both worlds
    python perf/testbed/runtime.py --world v3
    python perf/testbed/runtime.py --calibrate   # and scaled to this machine (trains 2 reference runs, about 1 min)

A timing from an empty directory takes about two hours a world on 2 cores. This reads what one would spend from the
runs the comparison reads now (its `compare.json` `runs`, and its confirmation's), calibrated on the world's last
uninterrupted timing (`TIMED`: its minutes, its commit, the protocol hash of the run files it trained):

    overhead = timed minutes / (train minutes of the run files that timing trained / workers)
    estimate = overhead x (train minutes of the run files read now / workers)

`overhead` carries what a run's `train_seconds` leave out (evaluation, model loading, scheduling, the rendering); the
script also predicts each world's timing from the other world's overhead, a check of the method. A run
trained later on cores shared with other jobs (protocol 10's added runs: their train seconds include the other jobs')
counts at the median train seconds of the same recipe's timed runs (`constant-penalty-half` at `constant-penalty`'s:
the same run with another alpha). The result is an estimate, not a timing; everything that prints it says so.

"2 cores" is not a unit of speed: the same code trains the same run 1.4 x slower on one 2-core machine than on
another. `--calibrate` measures this machine: it trains world v2's reference runs (`REFERENCE`: grpo, seeds 0 and 1,
on 2 workers at once as the comparison does), checks that each processed the tokens its timed run file logged
(within `TOKEN_TOLERANCE`: the same work, else it refuses), and scales the estimates by

    speed = train seconds now / train seconds of the same runs in the timing

assuming the overhead (evaluation, rendering) slows alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections import defaultdict

ROOT = os.path.dirname(os.path.abspath(__file__))
# world: (results directory, measured minutes, the commit that recorded the timing, the protocol hash of its runs)
TIMED = {
    "v2": ("results", 105.8, "a4df49f", "5574eea2f110a808"),
    "v3": ("results_v3", 118.9, "43aa0b2", "5574eea2f110a808"),
}
SAME_RUN_AS = {"constant-penalty-half": "constant-penalty"}  # a control whose runs cost what another's do
REFERENCE = ("v2", "grpo", (0, 1))  # --calibrate: (world, recipe, seeds) trained again on this machine
# The same run key need not replay its timed run bit for bit (floating-point order differs across library versions and
# a sampled step can diverge); its cost follows the tokens it processes, which must agree within this share.
TOKEN_TOLERANCE = 0.05


def _read(directory: str) -> list[tuple[str, dict]]:
    """`(row, run file)` for every run file the comparison in `directory` reads (its `compare.json` `runs`)."""
    with open(os.path.join(directory, "compare.json")) as f:
        runs = json.load(f)["runs"]
    out = []
    for name, paths in runs.items():
        for path in paths:
            with open(os.path.join(directory, path)) as f:
                out.append((name, json.load(f)))
    return out


def _files(directory: str) -> list[tuple[str, dict]]:
    """`(row, run file)` for every run file under `directory/runs` (read or not)."""
    out = []
    runs = os.path.join(directory, "runs")
    for name in sorted(os.listdir(runs)):
        for file in sorted(os.listdir(os.path.join(runs, name))):
            with open(os.path.join(runs, name, file)) as f:
                out.append((name, json.load(f)))
    return out


def estimate(world: str, workers: int = 2) -> dict:
    """The estimate of `world`'s comparison (looks and confirmation) under the current protocol, with its parts."""
    directory, minutes, commit, timed_hash = TIMED[world]
    base = os.path.join(ROOT, directory)
    confirm = os.path.join(base, "confirm")
    timed = [(n, r) for d in (base, confirm) for n, r in _files(d) if r.get("protocol_sha256") == timed_hash]
    timed_train = sum(r.get("train_seconds") or 0.0 for _, r in timed) / 60
    overhead = minutes / (timed_train / workers)
    per_recipe = defaultdict(list)
    for name, run in timed:
        per_recipe[name].append(run.get("train_seconds") or 0.0)
    median = {n: statistics.median(v) for n, v in per_recipe.items()}
    read = _read(base) + _read(confirm)
    later = _later(timed_hash)
    substituted = []
    seconds = 0.0
    for name, run in read:
        own = run.get("train_seconds") or 0.0
        if run.get("protocol_sha256") in later:
            like = SAME_RUN_AS.get(name, name)
            if like in median:
                substituted.append((name, own, median[like]))
                own = median[like]
        seconds += own
    train = seconds / 60
    return {"world": world, "timed_minutes": minutes, "timed_commit": commit, "timed_runs": len(timed),
            "timed_train_minutes": round(timed_train, 1), "overhead": round(overhead, 3), "runs_read": len(read),
            "train_minutes": round(train, 1), "substituted": len(substituted),
            "substituted_recorded_minutes": round(sum(s[1] for s in substituted) / 60, 1),
            "substituted_minutes": round(sum(s[2] for s in substituted) / 60, 1),
            "estimate_minutes": round(overhead * train / workers, 1)}  # fmt: skip


def _later(timed_hash: str) -> set[str]:
    """The protocol hashes written after the timed one: the current protocol and the compatible ones listed after
    it (`compatible_runs` is in order of the protocols)."""
    from trl_efficient_testbed.protocol import load, sha256

    listed = [str(h) for h in load().get("compatible_runs") or []]
    after = listed[listed.index(timed_hash) + 1 :] if timed_hash in listed else []
    return {*after, sha256()}


def _timed_files(world: str, recipe: str, seeds) -> list[dict]:
    """The run files of `recipe` at `seeds` (in that order) that `world`'s timing trained."""
    directory, _, _, timed_hash = TIMED[world]
    runs = os.path.join(ROOT, directory, "runs", recipe)
    found = {}
    for file in sorted(os.listdir(runs)):
        with open(os.path.join(runs, file)) as f:
            run = json.load(f)
        if run["seed"] in seeds and run.get("protocol_sha256") == timed_hash:
            found[run["seed"]] = run
    missing = [s for s in seeds if s not in found]
    if missing:
        raise FileNotFoundError(f"world {world} has no timed run file of {recipe} seeds {missing}")
    return [found[s] for s in seeds]


def _train_reference(settings: dict, recipe: str, seed: int) -> dict:
    """Train `recipe` at `seed` under the timed run's settings, as a comparison worker does; its seconds and log."""
    import dataclasses
    import tempfile

    from trl_efficient_testbed.training import TestbedSettings, hub_offline, train_recipe

    with hub_offline(), tempfile.TemporaryDirectory() as folder:
        trained = train_recipe(recipe, dataclasses.replace(TestbedSettings(**settings), seed=seed), folder)
    return {"seconds": trained["seconds"], "log_history": trained["log_history"]}


def _tokens(log: list[dict]) -> float:
    """The tokens a training processed (TRL's `num_tokens`, prompts and completions, at its last logged step)."""
    return max(row.get("num_tokens") or 0.0 for row in log)


def calibrate(workers: int = 2) -> dict:
    """This machine's speed against `REFERENCE`'s timing: its runs trained again, `workers` at once (spawned, one
    thread each: `jobs.run_jobs`' workers), and `speed` = their train seconds now / in the timing."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from trl_efficient_testbed.jobs import _worker_init

    world, recipe, seeds = REFERENCE
    timed = _timed_files(world, recipe, seeds)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init) as pool:
        futures = [
            pool.submit(_train_reference, run["key"]["settings"], recipe, seed) for run, seed in zip(timed, seeds)
        ]
        now = [f.result() for f in futures]
    return {"world": world, "recipe": recipe, "seeds": list(seeds), **speed(timed, now)}


def speed(timed: list[dict], now: list[dict]) -> dict:
    """`speed` = the train seconds of `now` (`{"seconds", "log_history"}` per run) / those of the `timed` run files
    of the same runs, after checking each did the same work (its tokens within `TOKEN_TOLERANCE` of its timed run's:
    else a `RuntimeError`, since the seconds would then say nothing about the machine)."""
    for run, new in zip(timed, now, strict=True):
        then, tokens = _tokens(run["log_history"]), _tokens(new["log_history"])
        if abs(tokens / then - 1) > TOKEN_TOLERANCE:
            raise RuntimeError(
                f"{run['recipe']} seed {run['seed']} processed {tokens:.0f} tokens, its timed run {then:.0f}: not the "
                "same work, so its seconds say nothing about this machine (code or library versions changed)"
            )
    recorded = sum(r["train_seconds"] for r in timed)
    measured = sum(n["seconds"] for n in now)
    return {"speed": round(measured / recorded, 3), "timed_seconds": [r["train_seconds"] for r in timed],
            "seconds": [n["seconds"] for n in now]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", choices=sorted(TIMED), action="append")
    p.add_argument("--calibrate", action="store_true",
                   help="train the reference runs on this machine and scale the estimates by its speed")  # fmt: skip
    args = p.parse_args(argv)
    every = {world: estimate(world) for world in sorted(TIMED)}
    for world in args.world or sorted(TIMED):
        e = every[world]
        print(f"world {world}: about {e['estimate_minutes']:.0f} minutes on 2 cores (an estimate, not a timing): "
              f"{e['runs_read']} run files read, {e['train_minutes']:.1f} train minutes at {e['overhead']:.2f} x "
              f"(overhead from the timing at {e['timed_commit']}: {e['timed_minutes']} minutes for "
              f"{e['timed_runs']} runs, {e['timed_train_minutes']:.1f} train minutes on 2 workers); "
              f"{e['substituted']} runs trained on shared cores counted at their recipe's timed median "
              f"({e['substituted_recorded_minutes']:.1f} recorded -> {e['substituted_minutes']:.1f} train "
              "minutes)")  # fmt: skip
    # the method's own check: each world's overhead predicts the other world's measured timing
    for world, e in every.items():
        other = next(o for w, o in every.items() if w != world)
        predicted = other["overhead"] * e["timed_train_minutes"] / 2
        print(
            f"check: world {world}'s timing ({e['timed_minutes']} minutes) predicted from world "
            f"{other['world']}'s overhead: {predicted:.1f} minutes ({predicted / e['timed_minutes'] - 1:+.1%})"
        )
    if args.calibrate:
        c = calibrate()
        pairs = ", ".join(f"seed {s}: {n:.1f} s (timed {t:.1f})" for s, n, t in zip(c["seeds"], c["seconds"],
                                                                                  c["timed_seconds"]))  # fmt: skip
        print(f"this machine: {c['recipe']} trains {c['speed']:.2f} x the timed seconds ({pairs}; 2 workers, the same "
              "work as the timed runs)")  # fmt: skip
        for world in args.world or sorted(TIMED):
            e = every[world]
            print(f"world {world} on this machine: about {c['speed'] * e['estimate_minutes']:.0f} minutes "
                  f"({c['speed']:.2f} x {e['estimate_minutes']:.0f}; an estimate, not a timing)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
