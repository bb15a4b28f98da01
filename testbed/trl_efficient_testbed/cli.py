"""`trl-efficient testbed`: the CPU testbed for efficient reasoning.

    trl-efficient testbed base [--size base|small] [--retrain]      train (or find) the over-thinking base model
    trl-efficient testbed eval [--model testbed:base|DIR] [--num-eval 128] [--samples 2]
    trl-efficient testbed compare --recipes all|grpo kimi ... [--max-steps 40] [--seeds 3] [--max-seeds 15]
                                  [--workers 2] [--output-dir DIR] [--set key=value ...] [--overwrite]
    trl-efficient testbed sweep --recipe laser --set reward.laser.target_length=24,48,96 [--set key2=...]
                                [--setting key=value ...] [--max-steps 40] [--seeds 3] [--workers 2]
                                [--output-dir DIR] [--overwrite]
    trl-efficient testbed frontier DIR/sweep_laser.json DIR/sweep_kimi.json ... --out frontier.png
    trl-efficient testbed plots perf/testbed/results/compare.json      per_difficulty.png next to it
    trl-efficient testbed world-report [--model testbed:v2] [--json DIR/world_report_v2.json]
                                  [--rl --output-dir DIR --workers 2]   and RL's figures (accuracy headroom, the cost
                                  of over-shortening: grpo and two length penalties trained, runs under DIR/runs)
    trl-efficient testbed scorecard perf/testbed/results/compare.json  the targets beside the measured values
    trl-efficient testbed confirm perf/testbed/results/compare.json --output-dir DIR [--seed 1000] [--workers 2]
                                  every held / not-held check rerun once on unseen seeds and tasks: "confirmed"
    trl-efficient testbed literature [perf/testbed/results] [--json PATH]
                                  every published head-to-head (literature.yaml) read per metric on a comparison
    trl-efficient testbed realmodel [--output-dir perf/realmodel/results] [--no-train] [--small]
                                  GRPO, kimi and constant-penalty from SmolLM2-135M-Instruct (issue 49)
    trl-efficient testbed prompted [perf/testbed/results] [--json PATH]
                                  the prompted recipes under their own prompts vs grpo-prompted (or the base)

The testbed quickstart is `trl-efficient train` with no arguments (configs/quickstart.yaml).

`compare` trains every recipe with `--seeds` training seeds from the same base model with the same data and number of
GRPO steps, each at its testbed scale (`testbed/scaling.py`: one rule per recipe, printed with the table), evaluates
every model on the same tasks and sampling streams, then writes `compare.json`, `compare.md` (G, accuracy, mean tokens,
floor, excess over floor, redundant share, truncation, each with its 95% interval over tasks and seeds, the paired
differences from grpo, each recipe's method check, tokens by difficulty, the scaling rules), `pareto.png`,
`per_difficulty.png` and `checks.png`. Runs are resumable (each (recipe, seed) run is a result file named by its config
hash under `<output-dir>/runs/`) and run on `--workers` processes with a progress bar. A recipe that fails is a row with
its error; the others still run, and the command exits with status 1 at the end when any recipe failed. With
`--max-seeds N`, later looks: every recipe whose method check is still inconclusive, and grpo (their reference),
trains `--seeds` more seeds (up to N in all), and the table is computed again, until every check is decided or N is
reached (each recipe on its own seeds, paired with grpo on the common ones).

`sweep` trains one recipe at every point of a grid over `--set` (an `EfficientGRPOConfig` field, `field.entry` of a
dict field, or `reward.<builder>.<kwarg>`; values `x<m>` = m times the value at testbed scale) and writes
`sweep_<recipe>.{json,md,png}` (the frontier: accuracy vs tokens, Pareto-optimal points ringed, base and grpo
shown); `frontier` draws several sweeps on one plot (`testbed/sweep.py`). `plots` redraws a comparison's
`per_difficulty.png` and `checks.png` from its `compare.json`.
"""

from __future__ import annotations

import json
import logging
import sys

from trl_efficient.core.errors import CommandParser

from .names import BASE_RECIPE, QUICK_COMPARISON

__all__ = ["main"]

logger = logging.getLogger("trl_efficient_testbed")


def _parse_sets(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set must look like key=value, got {item!r}.")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def _settings(args, items: list[str]):
    """`TestbedSettings` from `--base-model`, `--set`/`--setting` items (a `TestbedSettings` field, else an
    `EfficientGRPOConfig` field for every recipe: `extra`) and `--max-steps`, `--num-eval`, `--seed`, `--seeds`,
    `--max-seeds`."""
    import dataclasses

    from .runner import TestbedSettings

    settings = TestbedSettings(base_model=args.base_model)
    fields = {f.name for f in dataclasses.fields(TestbedSettings)}
    for key, value in _parse_sets(items).items():
        if key in fields:
            setattr(settings, key, value)
        else:
            settings.extra[key] = value
    for key in ("max_steps", "num_eval", "seed", "seeds", "max_seeds"):
        if getattr(args, key, None) is not None:
            setattr(settings, key, getattr(args, key))
    return settings


def _print_summary(name: str, s: dict) -> None:
    print(f"{name}: accuracy {s['accuracy']:.3f} | mean tokens {s['mean_tokens']:.1f} | floor "
          f"{s['mean_floor_tokens']:.1f} | redundant share {s['redundant_share']:.3f} | skips/completion "
          f"{s['skips_per_completion']:.2f} | truncated {s['truncated_fraction']:.3f}")  # fmt: skip
    for d, v in s["by_difficulty"].items():
        print(f"  {d} ops: accuracy {v['accuracy']:.2f}  tokens {v['mean_tokens']:.1f}  "
              f"floor {v['mean_floor_tokens']:.1f}  redundant share {v['redundant_share']:.2f}")  # fmt: skip


def _report(out: dict, failed_label: str, sep: str) -> int:
    """Print a run's markdown and the files it wrote; exit status 1 (failures on stderr) when anything failed."""
    with open(out["files"]["markdown"]) as f:
        print(f.read())
    for name, path in out["files"].items():
        print(f"{name:9s}: {path}")
    if out["failed"]:
        print(f"{failed_label}: {sep.join(out['failed'])}", file=sys.stderr)
        return 1
    return 0


def read_comparison(path: str) -> dict:
    """The comparison `trl-efficient testbed compare` wrote to `path`; anything else (not JSON, no `rows`) raises a
    one-line `ValueError` naming the file."""
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}, line {err.lineno}: not JSON ({err.msg}): pass the compare.json that "
                         "`trl-efficient testbed compare` wrote") from err  # fmt: skip
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(
            f"{path} is not a testbed comparison (no list of `rows`): pass the compare.json that `trl-efficient "
            "testbed compare` wrote (e.g. perf/testbed/results/compare.json)"
        )
    return data


def _check_values(args) -> None:
    """Counts that must be at least 1, and the folder of an output file, checked before any work: one line naming the
    flag."""
    import os

    for name in ("num_eval", "samples", "max_new_tokens", "num_tasks", "max_steps", "seeds"):
        value = getattr(args, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"{flag} {value}: must be a whole number >= 1 (e.g. {flag} 8)")
    for name in ("json",):  # files written at the end of the work: their folder must exist now
        path = getattr(args, name, None)
        folder = os.path.dirname(os.path.abspath(path)) if isinstance(path, str) else None
        if folder is not None and not os.path.isdir(folder):
            raise ValueError(f"--{name} {path}: the folder {folder} does not exist; create it or pass another path")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = CommandParser(prog="trl-efficient testbed", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "realmodel",
        add_help=False,
        help="the real-model experiment: a length recipe, GRPO and a constant "
        "penalty trained from SmolLM2-135M-Instruct on CPU (realmodel.py; --help for its options)",
    )
    if argv[:1] == ["realmodel"]:  # its own parser (realmodel.main_run): the experiment's options
        from .realmodel import main_run

        return main_run(argv[1:])
    p_base = sub.add_parser("base", help="train (or find in the cache) the over-thinking base model")
    p_base.add_argument(
        "--size", default="base", help="base (default), formats, v2 (world v2), v3 (world v3) or small (tests)"
    )
    p_base.add_argument("--retrain", action="store_true", help="train again even if cached")
    p_eval = sub.add_parser("eval", help="exact token accounting of a model on held-out testbed tasks")
    p_eval.add_argument("--model", default="testbed:base")
    p_eval.add_argument("--num-eval", type=int, default=128)
    p_eval.add_argument("--samples", type=int, default=2)
    p_eval.add_argument("--max-new-tokens", type=int, default=192)
    p_eval.add_argument("--temperature", type=float, default=0.6)
    p_eval.add_argument("--seed", type=int, default=0)
    p_cmp = sub.add_parser(
        "compare",
        help="train recipes from the same base with the same budget and compare (exit status 1 if any recipe failed)",
        description="Train recipes from the same base with the same budget and compare them. A recipe that fails is "
        "reported in the table with its error, the others still run, and the exit status is 1 when any failed.",
    )
    p_cmp.add_argument(
        "--recipes",
        nargs="+",
        default=list(QUICK_COMPARISON),
        help="recipe names, or 'all' for every registered recipe",
    )
    p_cmp.add_argument(
        "--base-model",
        default="testbed:v2",
        help="base model every recipe starts from (default testbed:v2: world v2's over-thinking base, which has "
        "seen the methods' prompt formats; testbed:formats for world v1, with --set max_completion_length=192 "
        "--set eval_temperature=0.6)",
    )
    p_cmp.add_argument("--max-steps", type=int, default=None, help="GRPO steps per recipe (default 40)")
    p_cmp.add_argument("--num-eval", type=int, default=None)
    p_cmp.add_argument("--seed", type=int, default=None, help="data, evaluation and bootstrap seed (default 0)")
    p_cmp.add_argument("--seeds", type=int, default=None, help="training seeds per recipe (default 3)")
    p_cmp.add_argument(
        "--max-seeds",
        type=int,
        default=None,
        help="later looks: every recipe whose method check is inconclusive after --seeds seeds, and grpo, trains "
        "--seeds more seeds at a time, up to this many (default: none added; perf/testbed/compare.py uses 12)",
    )
    p_cmp.add_argument("--workers", type=int, default=1, help="worker processes for the runs (default 1)")
    p_cmp.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="TestbedSettings field or EfficientGRPOConfig field for every recipe (JSON values).",
    )
    p_cmp.add_argument("--output-dir", default="outputs/testbed")
    p_cmp.add_argument("--overwrite", action="store_true")
    p_cmp.add_argument("--keep-models", action="store_true", help="keep the trained weights")
    p_cmp.add_argument(
        "--no-train",
        action="store_true",
        help="train nothing: render the finished run files under the protocol (a later look whose runs are missing "
        "is not taken and is listed as pending)",
    )
    p_conf = sub.add_parser(
        "confirm",
        help="rerun every held / not-held check once on unseen training seeds and a fresh task set; mark it confirmed",
    )
    p_conf.add_argument("json", help="the comparison's compare.json (rewritten with a 'confirmed' column)")
    p_conf.add_argument("--output-dir", required=True, help="where the confirmation's runs and table go")
    p_conf.add_argument("--seed", type=int, default=None, help="the confirmation's data and evaluation seed (1000)")
    p_conf.add_argument("--workers", type=int, default=1, help="worker processes for the runs (default 1)")
    p_conf.add_argument("--no-train", action="store_true", help="render the confirmation's finished runs only")
    p_sweep = sub.add_parser(
        "sweep",
        help="train one recipe at every point of a grid over its settings and draw its frontier",
        description="Train one recipe at every point of a grid over --set (first key varies slowest), on top of its "
        "testbed scale, evaluate each point, write sweep_<recipe>.{json,md,png}. Exit status 1 if a point failed.",
    )
    p_sweep.add_argument("--recipe", required=True)
    p_sweep.add_argument(
        "--set",
        action="append",
        default=[],
        required=True,
        metavar="KEY=V1,V2,...",
        help="a sweep axis: an EfficientGRPOConfig field, field.entry of a dict field, or reward.<builder>.<kwarg> "
        "(reward.<builder>.weight: the reward's weight); values are JSON, or x<m> = m times the value at testbed scale",
    )
    p_sweep.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="TestbedSettings or EfficientGRPOConfig field for every point and the references (as compare's --set)",
    )
    p_sweep.add_argument("--base-model", default="testbed:v2")
    p_sweep.add_argument("--max-steps", type=int, default=None)
    p_sweep.add_argument("--num-eval", type=int, default=None)
    p_sweep.add_argument("--seed", type=int, default=None)
    p_sweep.add_argument("--seeds", type=int, default=None, help="training seeds per point (default 3)")
    p_sweep.add_argument("--workers", type=int, default=1, help="worker processes for the runs (default 1)")
    p_sweep.add_argument("--references", nargs="*", default=["base", BASE_RECIPE],
                         help=f"reference rows (default base {BASE_RECIPE})")  # fmt: skip
    p_sweep.add_argument("--output-dir", default="outputs/testbed")
    p_sweep.add_argument("--overwrite", action="store_true")
    p_sweep.add_argument("--keep-models", action="store_true")
    p_front = sub.add_parser("frontier", help="draw several sweep_<recipe>.json on one frontier plot")
    p_front.add_argument("sweeps", nargs="+", help="sweep_<recipe>.json files (same settings)")
    p_front.add_argument("--out", default="frontier.png", help="the PNG; .json and .md are written next to it")
    p_world = sub.add_parser(
        "world-report",
        help="measure what the world and a base model offer the methods (dynamic range, trade-off, length following)",
        description="Measure, on the base model's own generations: tokens over the floor (overall, easy vs hard), "
        "the accuracy its own thinking buys over the forced minimal trace (hard vs easy tasks), and how its length "
        "follows L1 targets and HBPO budgets (docs/testbed.md, 'World v2'). Prints Markdown; --json writes the data.",
    )
    p_world.add_argument("--model", default="testbed:v2")
    p_world.add_argument("--num-tasks", type=int, default=512)
    p_world.add_argument("--max-new-tokens", type=int, default=384)
    p_world.add_argument("--temperature", type=float, default=1.0)
    p_world.add_argument("--seed", type=int, default=0)
    p_world.add_argument("--json", default=None, help="also write the report's data to this JSON file")
    p_world.add_argument("--rl", action="store_true",
                         help="also train grpo, constant-penalty and its over-aggressive point (testbed.headroom): "
                         "accuracy headroom and the cost of over-shortening on hard tasks")  # fmt: skip
    p_world.add_argument(
        "--output-dir",
        default="outputs/testbed",
        help="with --rl: where the runs go (a comparison's directory reuses its runs)",
    )
    p_world.add_argument("--workers", type=int, default=1, help="with --rl: worker processes")
    p_world.add_argument("--seeds", type=int, default=9, help="with --rl: training seeds (default 9, the looks' most)")
    p_world.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --rl: a TestbedSettings field of the runs (default: the comparison's settings)",
    )
    p_score = sub.add_parser(
        "scorecard",
        help="the testbed's targets beside what a comparison and the base's world report measured",
        description="Print each target of the testbed (dynamic range, trade-off, RL learns, length following, power, "
        "decided checks, runtime) with the measured value from a compare.json and the world report next to it "
        "(world_report_<model>.json, written by `world-report --json`), and whether it is met (docs/testbed.md, "
        "'Scorecard'). `compare` prints it too.",
    )
    p_score.add_argument("compare_json")
    p_score.add_argument("--world-report", default=None, help="default: world_report_<model>.json next to it")
    p_lit = sub.add_parser(
        "literature",
        help="read every published head-to-head between recipes on a comparison; Kendall tau with the papers",
        description="Read every pair of testbed/literature.yaml (a paper's winner and loser) on a comparison's rows "
        "on both metrics, accuracy (where the paper shows >= 1 point) and tokens (>= 10%), each paired by seed and "
        "task with a 95% interval, and, where a recipe of the pair is swept (frontier.json), at matched tokens and at "
        "matched accuracy on its curve; print the table and the agreement counts per metric and over all read "
        "metrics, with Kendall's tau (docs/literature.md).",
    )
    p_lit.add_argument("results_dir", nargs="?", default=None, help="compare's output dir (perf/testbed/results)")
    p_lit.add_argument("--json", default=None, help="also write the readings and taus to this JSON file")
    p_prompted = sub.add_parser(
        "prompted",
        help="the prompted recipes under their own prompts against grpo-prompted (or the base) under the same ones",
        description="Compare every recipe with a conditioned claim (HBPO, L1-Exact, L1-Max, SABER, ASRR, "
        "BudgetThinker) with its comparator under the recipe's own prompts: accuracy, mean tokens and the "
        "length-following error of its check, paired by seed and task with a 95% interval (docs/prompted.md).",
    )
    p_prompted.add_argument("results_dir", nargs="?", default=None, help="compare's output dir (perf/testbed/results)")
    p_prompted.add_argument("--json", default=None, help="also write the rows to this JSON file")
    p_plots = sub.add_parser("plots", help="redraw per_difficulty.png and checks.png from a compare.json")
    p_plots.add_argument("compare_json")
    p_plots.add_argument("--out-dir", default=None, help="default: the JSON's directory")
    p_table = sub.add_parser(
        "scale-table",
        help="print docs/scale.md's table: each recipe's paper length constants, the one scale rule's testbed value "
        "and the values worlds v3 and v2 train with",
    )
    where = p_table.add_mutually_exclusive_group()
    where.add_argument("--update", metavar="PATH", help="rewrite the table between PATH's scale-table markers")
    where.add_argument("--check", metavar="PATH", help="exit 1 when the table in PATH differs from the specs'")
    args, rest = parser.parse_known_args(argv)
    if rest:  # every subcommand: a misspelled flag (`base --retrian`) is an error, never ignored
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    _check_values(args)  # before any model loads or trains

    if args.command == "base":
        from trl_efficient.overthinking.base import BASE_MODEL_SIZES, cache_root, resolve_base_model, train_base_model

        if args.size not in BASE_MODEL_SIZES:
            raise ValueError(
                f"--size {args.size}: no such testbed base model; pass one of {', '.join(BASE_MODEL_SIZES)}"
            )
        name = f"testbed:{args.size}"
        if args.retrain:
            import os

            config = BASE_MODEL_SIZES[args.size]
            path = train_base_model(os.path.join(cache_root(), f"{args.size}-{config.key()}"), config)
        else:
            path = resolve_base_model(name)
        print(path)
        return 0
    if args.command == "eval":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from trl_efficient.core.models import missing_model_dir, resolve_model_name
        from trl_efficient.overthinking.data import load_testbed_dataset

        from .runner import evaluate_testbed, torch_threads

        missing = missing_model_dir(args.model, "--model")  # an empty folder: named, not the tokenizer library's error
        if missing is not None:
            raise missing
        path = resolve_model_name(args.model)
        tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
        with torch_threads():
            summary = evaluate_testbed(model, tokenizer, load_testbed_dataset("test", args.num_eval, args.seed),
                                       num_samples=args.samples, max_new_tokens=args.max_new_tokens,
                                       temperature=args.temperature, seed=args.seed, show_progress=True)  # fmt: skip
        _print_summary(args.model, summary)
        return 0
    if args.command == "world-report":
        from trl_efficient.core.models import resolve_model_name

        from .report import world_report

        report = world_report(resolve_model_name(args.model), num_tasks=args.num_tasks,
                              max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                              seed=args.seed, name=args.model)  # fmt: skip
        if args.rl:
            import argparse

            from .headroom import rl_figures

            settings = _settings(argparse.Namespace(base_model=args.model, seeds=args.seeds), args.set)
            report["rl"] = rl_figures(settings, args.output_dir, workers=args.workers)
        from .headroom import world_report_markdown_with_rl

        print(world_report_markdown_with_rl(report))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
        return 0
    if args.command == "scorecard":
        from .scorecard import load_scorecard

        read_comparison(args.compare_json)
        print(load_scorecard(args.compare_json, args.world_report))
        return 0
    if args.command in ("literature", "prompted"):  # a table read from a comparison's committed files
        from .literature import DEFAULT_RESULTS

        if args.command == "literature":
            from .literature import literature as read
            from .literature import literature_markdown as markdown
        else:
            from .prompted import prompted as read
            from .prompted import prompted_markdown as markdown
        out = read(args.results_dir or DEFAULT_RESULTS)
        print(markdown(out))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
        return 0
    if args.command == "scale-table":
        from .scale_table import check_or_update, scale_table

        if args.update or args.check:
            return check_or_update(args.update or args.check, update=bool(args.update))
        print(scale_table())
        return 0
    if args.command == "plots":
        import os

        from .runner import draw_compare_plots

        data = read_comparison(args.compare_json)
        rows = [r for r in data["rows"] if r.get("status", "ok") == "ok"]
        out = args.out_dir or os.path.dirname(os.path.abspath(args.compare_json))
        steps = (data.get("settings") or {}).get("max_steps")
        for name, path in draw_compare_plots(rows, out, f"Testbed after {steps} GRPO steps").items():
            print(f"{name:14s}: {path}")
        return 0
    if args.command == "frontier":
        from .sweep import write_frontier

        sweeps = []
        for path in args.sweeps:
            with open(path) as f:
                sweeps.append(json.load(f))
        for name, path in write_frontier(sweeps, args.out).items():
            print(f"{name:9s}: {path}")
        return 0
    if args.command == "sweep":
        from .sweep import parse_sweep_set, run_sweep

        settings = _settings(args, args.setting)
        sets = dict(parse_sweep_set(item) for item in args.set)
        out = run_sweep(args.recipe, sets, settings, args.output_dir, overwrite=args.overwrite,
                        references=args.references, keep_models=args.keep_models, workers=args.workers)  # fmt: skip
        return _report(out, "failed points", "; ")
    if args.command == "confirm":
        from .runner import CONFIRMATION_SEED, confirm

        seed = CONFIRMATION_SEED if args.seed is None else args.seed
        out = confirm(args.json, args.output_dir, seed, workers=args.workers, train=not args.no_train)
        print(f"confirmed: {out['counts']['held']} held, {out['counts']['not held']} not held ({args.json})")
        return 0
    if args.command == "compare":
        from .runner import compare

        settings = _settings(args, args.set)
        recipes = args.recipes
        if "all" in recipes:
            from .runner import comparison_recipes

            recipes = comparison_recipes(settings.base_model)
        out = compare(
            recipes,
            settings,
            args.output_dir,
            overwrite=args.overwrite,
            keep_models=args.keep_models,
            workers=args.workers,
            train=not args.no_train,
        )
        status = _report(out, "failed", ", ")
        from .scorecard import load_scorecard

        print("\nScorecard (trl-efficient testbed scorecard):\n")
        print(load_scorecard(out["files"]["json"]))
        return status
    return 2


if __name__ == "__main__":
    sys.exit(main())


def console_main() -> int:
    """`trl-efficient-testbed ...`: the same as `trl-efficient testbed ...` (its one-line errors and exit codes)."""
    from trl_efficient.cli import main as library_main

    return library_main(["testbed", *sys.argv[1:]])
