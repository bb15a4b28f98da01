"""Reproduce the testbed comparison of docs/testbed.md and write it under benchmarks/testbed/results/.

    python benchmarks/testbed/compare.py [--recipes grpo kimi shorter-better cosine dler] [--max-steps 40]

Same as `trl-efficient testbed compare --recipes ... --output-dir benchmarks/testbed/results`: trains the
over-thinking base model on first use (about 3 minutes on two CPU cores, cached under ~/.cache/trl_efficient/testbed),
then every recipe for the same number of GRPO steps from it (about 40 s each), and writes compare.md, compare.json
and pareto.png. Everything is seeded: a rerun prints the same table (up to the `train s` column).
"""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

DEFAULT_RECIPES = ["grpo", "kimi", "shorter-better", "cosine", "dler"]


def main(argv=None) -> int:
    from trl_efficient.testbed.cli import main as testbed_main

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--recipes" not in argv:
        argv = ["--recipes", *DEFAULT_RECIPES, *argv]
    if "--output-dir" not in argv:
        argv += ["--output-dir", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")]
    return testbed_main(["compare", *argv])


if __name__ == "__main__":
    sys.exit(main())
