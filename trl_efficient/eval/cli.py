"""`trl-efficient eval`: accuracy and tokens of models on benchmarks, under inference-time modes.

    trl-efficient eval --model <path|hub id|tiny:qwen2|testbed:base> [--model ...] \\
        --benchmarks gsm8k math500 [aime24 ...] --modes plain [hbpo saber l1:1024 ...] \\
        --n 4 --k 1 4 --max-new-tokens 2048 --output-dir outputs/eval

Writes, under `--output-dir`:

- `<model>/<mode>/<benchmark>.json`: settings and the full `EvalResult` (one file per model x mode x benchmark;
  an existing file made with the same model and settings is reused unless `--overwrite`, so an interrupted run
  resumes where it stopped; one made with other settings is refused, before anything loads, naming what differs);
- `<model>/<mode>/<benchmark>.samples.jsonl`: every completion with its tokens and correctness (`--no-samples` to
  skip);
- `results.json` (all results of this command), `results.md` (tables: overall, and by level where the data has
  levels), `pareto.png` (accuracy vs mean tokens averaged over the benchmarks, one curve per model, one point per
  mode).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field

from ..core.checks import check_writable
from ..core.errors import CommandParser, UserError
from .defaults import DEFAULT_TEMPERATURE, DEFAULT_TOP_P

logger = logging.getLogger("trl_efficient.eval")

__all__ = ["EvalOptions", "build_parser", "main", "markdown_tables", "resolve_model", "run_eval"]


def resolve_model(name: str) -> str:
    """Local directory or Hub id of a model name: `testbed:<size>` is trained/cached by the testbed,
    `tiny:<arch>[-<hidden>]` is built offline, anything else passes through."""
    from ..core.models import resolve_model_name

    return resolve_model_name(name)


def _slug(text: str) -> str:
    text = text.rstrip("/")
    if os.path.isdir(text):
        text = os.path.basename(os.path.normpath(text)) or text
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


@dataclass
class EvalOptions:
    """The options of `trl-efficient eval`, by name: its parser fills them from the command line (`main`) and
    `trl_efficient.evaluate` from its keywords; `run_eval` takes them. A single model or benchmark may be given
    without a list.

    >>> EvalOptions("tiny:qwen2", benchmarks="gsm8k", n=4).model, EvalOptions("m").max_new_tokens
    (['tiny:qwen2'], 2048)
    """

    model: list
    label: list | None = None
    benchmarks: list = field(default_factory=lambda: ["math500"])
    modes: list = field(default_factory=lambda: ["plain"])
    n: int = 1
    k: list | None = None
    max_new_tokens: int = 2048
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    seed: int = 0
    limit: int | None = None
    batch_size: int = 16
    backend: str = "transformers"
    vllm_kwargs: dict | None = None
    device: str = "auto"
    dtype: str = "auto"
    eos_logit_bias: float | None = None
    source: list = field(default_factory=list)
    data_dir: str | None = None
    instruction: str | None = None
    system_prompt: str | None = None
    output_dir: str = "outputs/eval"
    overwrite: bool = False
    no_samples: bool = False
    no_plot: bool = False
    quiet: bool = False

    def __post_init__(self) -> None:
        for name in ("model", "label", "benchmarks", "modes", "k", "source"):  # one value for a list of one
            value = getattr(self, name)
            if isinstance(value, (str, int, os.PathLike)):
                value = [value]
            if value is not None:
                setattr(self, name, [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value])
        self.output_dir = os.fspath(self.output_dir)
        for name, choices in CHOICES.items():
            if getattr(self, name) not in choices:
                raise UserError(f"{name}={getattr(self, name)!r}: choose one of {', '.join(choices)}")


CHOICES = {"backend": ("transformers", "vllm"), "dtype": ("auto", "float32", "bfloat16", "float16")}


def build_parser(prog: str = "trl-efficient eval") -> argparse.ArgumentParser:
    """The parser of `trl-efficient eval`, which parses the command line into `EvalOptions` (`main`): it sets only
    what the command line gives (`argument_default=SUPPRESS`), the defaults are `EvalOptions`'."""
    p = CommandParser(prog=prog, description=__doc__.split("\n\n")[0], argument_default=argparse.SUPPRESS)
    p.add_argument("--model", nargs="+", required=True, help="Model(s): local path, Hub id, tiny:<arch>, testbed:base.")
    p.add_argument("--label", nargs="+", help="Display name per model (default: the model name).")
    p.add_argument("--benchmarks", nargs="+",
                   help="Benchmarks (trl-efficient data list; default math500): gsm8k math500 aime24 aime25 theoremqa "
                        "olympiadbench math_train testbed.")  # fmt: skip
    p.add_argument(
        "--modes",
        nargs="+",
        help="Inference modes (default plain): plain, hbpo[:<budget>|:minimal], l1[:N], l1-max[:N], saber[:<mode>], "
        "force:B, wait:N.",
    )
    p.add_argument("--n", type=int, help="Samples per problem (pass@1 is averaged over them; default 1).")
    p.add_argument("--k", type=int, nargs="+", help="pass@k values to report (default: 1 and n).")
    p.add_argument("--max-new-tokens", type=int, help="Generation limit per sample (tokens; default 2048).")
    p.add_argument("--temperature", type=float, help=f"Sampling temperature (default {DEFAULT_TEMPERATURE}).")
    p.add_argument("--top-p", type=float, help=f"Nucleus sampling (default {DEFAULT_TOP_P}).")
    p.add_argument("--seed", type=int)
    p.add_argument("--limit", type=int, help="Evaluate a seeded random subset of this many problems.")
    p.add_argument("--batch-size", type=int, help="Sequences per generate call (transformers backend; default 16).")
    p.add_argument("--backend", choices=CHOICES["backend"], help="default transformers")
    p.add_argument("--vllm-kwargs", type=json.loads, help="JSON object of vllm.LLM keyword arguments.")
    p.add_argument("--device", help="transformers backend: auto (default), cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", choices=CHOICES["dtype"], help="default auto")
    p.add_argument(
        "--eos-logit-bias",
        type=float,
        help="Add this bias to the EOS logit (tiny random models only; transformers backend).",
    )
    p.add_argument(
        "--source",
        action="append",
        metavar="BENCH=SOURCE",
        help="Override a benchmark's data: a local file/dir or a Hub id 'repo[:config]'. Repeatable.",
    )
    p.add_argument("--data-dir", help="Where `trl-efficient data prepare` wrote the benchmarks.")
    p.add_argument("--instruction", help="Instruction appended to each question (default: boxed).")
    p.add_argument("--system-prompt")
    p.add_argument("--output-dir", help="default outputs/eval")
    p.add_argument("--overwrite", action="store_true", help="Recompute results whose files exist.")
    p.add_argument("--no-samples", action="store_true", help="Do not write the per-sample JSONL files.")
    p.add_argument("--no-plot", action="store_true", help="Do not draw pareto.png.")
    p.add_argument("--quiet", action="store_true", help="No progress bars.")
    return p


class _ModelHandle:
    """Loads a model and its backend on first use (resumed runs that need nothing new never load it)."""

    def __init__(self, name: str, args) -> None:
        self.name, self.args = name, args
        self.path = self.tokenizer = self.backend = None

    def get(self):
        if self.backend is not None:
            return self.tokenizer, self.backend
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .evaluate import TransformersBackend, VLLMBackend

        args = self.args
        self.path = resolve_model(self.name)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        if args.backend == "vllm":
            self.backend = VLLMBackend(self.path, self.tokenizer, seed=args.seed, **(args.vllm_kwargs or {}))
            return self.tokenizer, self.backend
        device = args.device if args.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
        dtypes = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
        model = AutoModelForCausalLM.from_pretrained(self.path, dtype=dtypes[args.dtype]).to(device)
        bias = args.eos_logit_bias  # `sequence_bias` on the EOS id, for a model that rarely ends on its own
        gen_kwargs = {"sequence_bias": [[[self.tokenizer.eos_token_id], float(bias)]]} if bias else {}
        self.backend = TransformersBackend(model, self.tokenizer, args.batch_size, gen_kwargs, not args.quiet)
        return self.tokenizer, self.backend


def _settings(args, benchmark: str, mode, source: str | None = None) -> dict:
    return {
        "benchmark": benchmark, "mode": mode.name, "n": args.n, "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature, "top_p": args.top_p, "seed": args.seed, "limit": args.limit,
        "backend": args.backend, "instruction": args.instruction, "system_prompt": args.system_prompt,
        "source": source, "dtype": args.dtype, "eos_logit_bias": args.eos_logit_bias,
    }  # fmt: skip


# Settings added after result files were first written: a file without one was made with its default.
LATER_SETTINGS = {"source": None, "dtype": "auto", "eos_logit_bias": None}
FLAGS = {"n": "--n", "max_new_tokens": "--max-new-tokens", "top_p": "--top-p", "system_prompt": "--system-prompt",
         "eos_logit_bias": "--eos-logit-bias", "model_name_or_path": "--model"}  # fmt: skip


def setting_differences(entry: dict, model_name: str, settings: dict) -> list[str]:
    """What differs between a result file's entry and this command's `settings` (and model), as `--flag: <file's>
    there, <now> now`; empty when the file can be reused.

    >>> entry = {"model_name_or_path": "m", "settings": {"max_new_tokens": 64, "seed": 0}}
    >>> setting_differences(entry, "m", {"max_new_tokens": 32, "seed": 0, "dtype": "auto"})
    ['--max-new-tokens: 64 there, 32 now']
    """
    recorded = {**LATER_SETTINGS, **(entry.get("settings") or {})}
    pairs = [("model_name_or_path", entry.get("model_name_or_path"), model_name)]
    pairs += [(key, recorded.get(key), value) for key, value in settings.items()]
    return [
        f"{FLAGS.get(key, '--' + key.replace('_', '-'))}: {there!r} there, {now!r} now"
        for key, there, now in pairs
        if there != now
    ]


def check_values(args) -> None:
    """The sampling and batching flags, and the backend's package, checked before anything loads: one line naming
    the flag and what to pass instead."""
    import importlib.util
    import math

    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise ValueError(f"--temperature {args.temperature}: must be a finite number >= 0 (0: greedy; e.g. 0.6)")
    if not (math.isfinite(args.top_p) and 0 < args.top_p <= 1):
        raise ValueError(f"--top-p {args.top_p}: must be in (0, 1] (1: no nucleus cut; e.g. 0.95)")
    for flag, value in (("--batch-size", args.batch_size), ("--max-new-tokens", args.max_new_tokens),
                        ("--limit", args.limit)):  # fmt: skip
        if value is not None and value < 1:
            raise ValueError(f"{flag} {value}: must be a whole number >= 1")
    if args.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ValueError(
            "--backend vllm needs vLLM, which is not installed: pass --backend transformers, or install it with "
            "`pip install 'trl-efficient[vllm]'`"
        )


def run_eval(args: EvalOptions) -> dict:
    """Run (or resume) every model x mode x benchmark of `args` (`EvalOptions`); write the per-result files and the
    summaries.

    Returns `{"results": [...], "failed": {benchmark: message}, "files": {...}}`.
    """
    from tqdm.auto import tqdm

    from ..core.models import missing_model_dir
    from ..data.benchmarks import BenchmarkUnavailableError, get_benchmark, load_benchmark
    from ..data.loaders import DEFAULT_INSTRUCTION
    from .evaluate import evaluate_model, parse_modes

    if args.n < 1:
        raise ValueError(f"--n must be >= 1, got {args.n}.")
    check_values(args)
    ks = sorted(set(args.k or [1, args.n]))
    if any(k < 1 or k > args.n for k in ks):
        raise ValueError(f"--k values must be between 1 and --n ({args.n}), got {ks}.")
    for model in args.model:  # before any benchmark is loaded
        missing = missing_model_dir(model, "--model")
        if missing is not None:
            raise missing
    labels = args.label or args.model
    if len(labels) != len(args.model):
        raise ValueError(f"--label needs one name per --model ({len(args.model)}), got {len(labels)}.")
    modes = parse_modes(args.modes)
    benches = [get_benchmark(b) for b in args.benchmarks]
    sources = {}
    for item in args.source:
        name, sep, value = item.partition("=")
        if not sep or not value:
            raise ValueError(f"--source must look like BENCH=SOURCE, got {item!r}.")
        sources[get_benchmark(name).name] = value
    instruction = DEFAULT_INSTRUCTION if args.instruction is None else (args.instruction or None)
    if not os.path.isdir(args.output_dir):
        check_writable("--output-dir", args.output_dir, folder=True)
    os.makedirs(args.output_dir, exist_ok=True)

    datasets_cache, failed, results = {}, {}, []
    jobs = [(m, lbl, mode, b) for m, lbl in zip(args.model, labels, strict=True) for mode in modes for b in benches]
    if not args.overwrite:  # never reuse results made with other settings: refused before anything loads
        for model_name, label, mode, bench in jobs:
            path = os.path.join(args.output_dir, _slug(label), mode.slug, f"{bench.name}.json")
            if not os.path.isfile(path):
                continue
            with open(path) as f:
                entry = json.load(f)
            differences = setting_differences(
                entry, model_name, _settings(args, bench.name, mode, sources.get(bench.name))
            )
            if differences:
                raise ValueError(
                    f"{path} holds results made with other settings ({'; '.join(differences)}): pass --overwrite to "
                    "recompute them with these, or --output-dir <another folder> to keep both"
                )
    handles = {m: _ModelHandle(m, args) for m in args.model}
    bar = tqdm(jobs, desc="eval", disable=args.quiet or len(jobs) < 2)
    for model_name, label, mode, bench in bar:
        bar.set_postfix_str(f"{label} | {mode.name} | {bench.name}")
        folder = os.path.join(args.output_dir, _slug(label), mode.slug)
        path = os.path.join(folder, f"{bench.name}.json")
        settings = _settings(args, bench.name, mode, sources.get(bench.name))
        if os.path.isfile(path) and not args.overwrite:  # made with these settings (checked above)
            with open(path) as f:
                entry = json.load(f)
            logger.info("%s exists with these settings; reusing it (pass --overwrite to recompute).", path)
            results.append(entry)
            continue
        if bench.name in failed:
            continue
        if bench.name not in datasets_cache:
            try:
                datasets_cache[bench.name] = load_benchmark(
                    bench.name, sources.get(bench.name), args.limit, args.seed, instruction, args.system_prompt,
                    data_dir=args.data_dir,
                )  # fmt: skip
            except BenchmarkUnavailableError as err:
                failed[bench.name] = str(err)
                logger.error("%s", err)
                continue
        tokenizer, backend = handles[model_name].get()
        t0 = time.time()
        result, records = evaluate_model(
            None, tokenizer, datasets_cache[bench.name], max_new_tokens=args.max_new_tokens,
            temperature=args.temperature, top_p=args.top_p, seed=args.seed, num_samples=args.n, ks=ks, mode=mode,
            backend=backend, sample_analyzer=bench.sample_analyzer, return_records=True, show_progress=not args.quiet,
            description=f"{label} {mode.name} {bench.name}",
        )  # fmt: skip
        entry = {
            "model": label, "model_name_or_path": model_name, "mode": mode.name, "mode_value": mode.value,
            "benchmark": bench.name, "settings": settings, "seconds": round(time.time() - t0, 1),
            "result": result.to_dict(),
        }  # fmt: skip
        os.makedirs(folder, exist_ok=True)
        if not args.no_samples:
            with open(os.path.join(folder, f"{bench.name}.samples.jsonl"), "w") as f:
                for rec in records:
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(entry, f, indent=1)
        os.replace(tmp, path)  # written last and atomically: its presence means the benchmark is done
        results.append(entry)
    files = write_summaries(results, args.output_dir, plot=not args.no_plot)
    return {"results": results, "failed": failed, "files": files}


def aggregate_points(results: list[dict]) -> list[dict]:
    """One point per (model, mode): accuracy and mean tokens averaged over its benchmarks (macro average)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for e in results:
        groups.setdefault((e["model"], e["mode"]), []).append(e)
    points = []
    for (model, mode), entries in groups.items():
        accs = [e["result"]["accuracy"] for e in entries]
        toks = [e["result"]["mean_tokens"] for e in entries]
        points.append({"model": model, "mode": mode, "accuracy": sum(accs) / len(accs),
                       "mean_tokens": sum(toks) / len(toks),
                       "benchmarks": [e["benchmark"] for e in entries]})  # fmt: skip
    return points


def _fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def markdown_tables(results: list[dict]) -> str:
    """Markdown: one overall table (one row per model x mode x benchmark), then a by-level table for results that
    have levels.

    >>> r = {"accuracy": 0.5, "pass_at_k": {"pass@1": 0.5}, "mean_tokens": 10.0, "median_tokens": 9.0,
    ...      "p90_tokens": 14.2, "mean_thinking_tokens": 8.0, "mean_answer_tokens": 2.0, "truncated_fraction": 0.0,
    ...      "num_problems": 2, "samples_per_problem": 1, "by_level": {}, "extra": {}}
    >>> print(markdown_tables([{"model": "m", "mode": "plain", "benchmark": "gsm8k", "result": r}]).splitlines()[2])
    | m | plain | gsm8k | 2x1 | 0.500 | 0.500 | 10.0 | 9.0 | 14.2 | 8.0 | 2.0 | 0.000 |
    """
    ks = sorted({k for e in results for k in e["result"].get("pass_at_k", {})}, key=lambda s: int(s.split("@")[1]))
    extras = sorted({k for e in results for k in e["result"].get("extra", {})})
    head = ["model", "mode", "benchmark", "problems x n", "accuracy", *ks, "mean tok", "median", "p90", "thinking",
            "answer", "truncated", *extras]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in results:
        r = e["result"]
        cells = [e["model"], e["mode"], e["benchmark"], f"{r['num_problems']}x{r['samples_per_problem']}",
                 _fmt(r["accuracy"]), *[_fmt(r["pass_at_k"].get(k)) for k in ks], _fmt(r["mean_tokens"], 1),
                 _fmt(r["median_tokens"], 1), _fmt(r["p90_tokens"], 1), _fmt(r["mean_thinking_tokens"], 1),
                 _fmt(r["mean_answer_tokens"], 1), _fmt(r["truncated_fraction"]),
                 *[_fmt(r.get("extra", {}).get(k)) for k in extras]]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    leveled = [e for e in results if e["result"].get("by_level")]
    if leveled:
        lines += ["", "By level (accuracy / mean tokens):", ""]
        levels = sorted({lv for e in leveled for lv in e["result"]["by_level"]}, key=int)
        head = ["model", "mode", "benchmark", *[f"level {lv}" for lv in levels]]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for e in leveled:
            bl = e["result"]["by_level"]
            cells = [e["model"], e["mode"], e["benchmark"]] + [
                f"{_fmt(bl[lv]['accuracy'])} / {_fmt(bl[lv]['mean_tokens'], 1)}" if lv in bl else "-" for lv in levels
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_summaries(results: list[dict], output_dir: str, plot: bool = True) -> dict:
    from .plots import pareto_plot

    files = {"json": os.path.join(output_dir, "results.json"), "markdown": os.path.join(output_dir, "results.md")}
    points = aggregate_points(results)
    with open(files["json"], "w") as f:
        json.dump({"results": results, "pareto_points": points}, f, indent=1)
    with open(files["markdown"], "w") as f:
        f.write(markdown_tables(results))
    if plot and points:
        benches = sorted({b for p in points for b in p["benchmarks"]})
        title = "Accuracy vs tokens" + (f" ({', '.join(benches)}" + (", macro average)" if len(benches) > 1 else ")"))
        drawn = pareto_plot(points, os.path.join(output_dir, "pareto.png"), title=title)
        if drawn:
            files["plot"] = drawn
    return files


def main(argv: list[str] | None = None) -> int:
    options = EvalOptions(**vars(build_parser().parse_args(sys.argv[1:] if argv is None else argv)))
    try:
        out = run_eval(options)
    except ValueError as err:
        print(f"trl-efficient eval: error: {err}", file=sys.stderr)
        return 2
    if out["results"]:
        print(markdown_tables(out["results"]))
    for name, path in out["files"].items():
        print(f"{name:9s}: {path}")
    if out["failed"]:
        for bench, message in out["failed"].items():
            print(f"\n[{bench}] not evaluated: {message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
