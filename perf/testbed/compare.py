"""Reproduce the testbed comparison of the README and docs/testbed.md and write it under perf/testbed/results/.

    python perf/testbed/compare.py [--recipes all | grpo kimi ...] [--max-steps 40] [--seeds 3] [--max-seeds 6]
                                   [--workers 2] [--no-train] [--no-confirm]

Same as `trl-efficient testbed compare --recipes all --workers 2 --max-seeds 6 --output-dir perf/testbed/results`
followed by `trl-efficient testbed confirm` (the protocol's looks and its confirmation, one resumable command):
trains the over-thinking base model on first use (about 3 minutes on two CPU cores, cached under
~/.cache/trl_efficient/overthinking), then every registered recipe with 3 training seeds at its testbed scale
(trl_efficient_testbed/scaling.py) for the same number of GRPO steps from it (later looks: every recipe whose method
check is still inconclusive, and grpo, trains 3 more seeds, up to the protocol's last look, `looks.end_at`, 6), on 2
worker processes (one torch thread each)
with a progress bar and ETA over the (recipe, seed) runs, and writes compare.md, compare.json, pareto.png,
per_difficulty.png (tokens-to-floor ratio and accuracy per difficulty, one panel per method family, 95% bands) and
checks.png (`trl-efficient testbed plots perf/testbed/results/compare.json` redraws both from the JSON), then prints
the scorecard: the testbed's targets beside what was measured (`trl-efficient testbed scorecard`), with the base
model's world report (results/world_report_v2.json, measured first when it is missing: about 15 seconds). Resumable:
every (recipe, seed) run is a file under results/runs/ named by the hash of its config, and a rerun skips the finished
ones (an interrupted run continues where it stopped; a changed setting reruns only what it changes). Everything is
seeded: a rerun prints the same table (up to the `train s` column). Exit status 1 when a recipe failed (it is still a
row of the table, with its error). Run with the default recipes and output directory, it then pastes the table into
the README (`perf/testbed/update_readme.py`, also runnable on its own), so one command regenerates both; `python
perf/testbed/frontier.py` then sweeps the length-penalty recipes (reusing base and grpo). `--no-train` renders the
committed run files under the protocol (testbed/trl_efficient_testbed/protocol.yaml) without training. Then, unless
`--no-confirm`, the confirmation pass reruns every held or not-held check once on unseen training seeds and a fresh
task set (`trl-efficient testbed confirm`, results/confirm/; resumable the same way) and adds the "confirmed" column;
its runs are part of the comparison's runtime (the scorecard's item 7).
"""

import argparse
import os
import platform
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # the testbed never touches the network
if platform.machine() in ("x86_64", "AMD64"):  # the CPU kernels of the committed runs (docs/testbed.md, "One base")
    os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

DEFAULT_RECIPES = ["all"]
DEFAULT_WORKERS = "2"  # two worker processes: the two CPU cores this comparison is sized for


def main(argv=None) -> int:
    from trl_efficient_testbed.cli import main as testbed_main

    argv = list(sys.argv[1:] if argv is None else argv)
    every_recipe = "--recipes" not in argv
    if every_recipe:
        argv = ["--recipes", *DEFAULT_RECIPES, *argv]
    if "--workers" not in argv:
        argv += ["--workers", DEFAULT_WORKERS]
    if "--max-seeds" not in argv:  # the protocol's looks (3 and 6 seeds): an inconclusive check trains 3 more at each
        from trl_efficient_testbed.protocol import last_look

        argv += ["--max-seeds", str(last_look())]
    committed = not any(a == "--output-dir" or a.startswith("--output-dir=") for a in argv)
    if committed:
        argv += ["--output-dir", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")]
    # the base model's world report next to the comparison (items 1, 2 and 4 of the scorecard that compare prints):
    # measured once per base model, kept as world_report_<model>.json
    from trl_efficient_testbed.scorecard import world_report_path

    where = argparse.ArgumentParser(add_help=False)  # the two options the report needs (also as --opt=value)
    where.add_argument("--output-dir")
    where.add_argument("--base-model", default="testbed:v2")
    known, _ = where.parse_known_args(argv)
    model = known.base_model
    report = world_report_path(known.output_dir, model)
    if not os.path.exists(report):
        os.makedirs(os.path.dirname(report), exist_ok=True)
        testbed_main(["world-report", "--model", model, "--json", report])
    confirmation = "--no-confirm" not in argv  # then the confirmation pass (issue 32, item 5) into results/confirm/
    argv = [a for a in argv if a not in ("--confirm", "--no-confirm")]
    status = testbed_main(["compare", *argv])
    if confirmation:
        out_dir = known.output_dir or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
        workers = argv[argv.index("--workers") + 1]
        confirm_dir = os.path.join(out_dir, "confirm")
        testbed_main(["confirm", os.path.join(out_dir, "compare.json"), "--output-dir", confirm_dir,
                      "--workers", workers, *(["--no-train"] if "--no-train" in argv else [])])  # fmt: skip
    if every_recipe and committed:  # the full comparison in results/: paste it into the README in the same run
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from update_readme import main as update_readme

        update_readme([])
    return status


if __name__ == "__main__":
    sys.exit(main())
