r"""O1-Pruner (Luo et al., "O1-Pruner: Length-Harmonizing Fine-Tuning for O1-Like Reasoning Pruning", arXiv 2501.12570;
methods.md §10): the per-problem reference statistics of the frozen initial model, for the length-harmonizing reward
`trl_efficient.rewards.o1_pruner.get_o1_pruner_reward`.

The paper pre-samples $K = 12$ solutions per problem from the initial model and keeps their mean length
$\bar L_{\text{ref}}$ and accuracy $\bar a_{\text{ref}}$ (released code: the authors' O1-Pruner repository at 04c0863,
`o1_scripts/construct_dataset.py`: `avg_length`, `avg_acc` over the K items of a problem). Here:

- `sample_reference_stats`: the K samples per problem, by the pre-pass shared with Frugal's pass rates
  (`frugal.sample_rollouts` -> `saber.profile_dataset`: one seeded, batched transformers generation; correct = the
  answer after a closed `</think>`), each sample's length measured by the run's `LengthMeter` (its `length_unit` and
  `length_scope`, on the text and ids a reward function sees); `reference_stats_from_records` folds them:
  $\bar L_{\text{ref}} = \frac1K\sum_j L_j$, $\bar a_{\text{ref}} = \frac1K\sum_j \mathbb 1[\text{correct}_j]$;
- a JSON cache `{"key": {...}, "stats": [...]}` (`write_reference_stats` / `load_reference_stats`), reused when its
  key (model, dataset fingerprint, K, length unit and scope, generation cap, temperature, top-p, seed) is this
  run's, an error naming the differing fields otherwise: no silent resampling, no silent reuse;
- `apply_reference_stats`: the columns `o1_ref_length`, `o1_ref_accuracy` on the training rows;
- `prepare_dataset`: the `o1-pruner` recipe's hook. The statistics travel with the run: the payload is written to
  `<output_dir>/o1_pruner_reference.json` and, as the reward's checkpointed state, into every checkpoint's
  `trl_efficient_state.json`; a resumed run takes them from its checkpoint (or the output dir) and never resamples.

Proposed defaults (methods.md §10 "[inferred]"): the reference samples use the training generation settings
(`max_completion_length`, `temperature`, `top_p`, `seed`, chat template), so $\bar L_{\text{ref}}$ and the policy's
$L$ are measured alike; a truncated reference sample counts at its truncated length, an empty one at its measured
length (the reward's empty-completion rule is for the policy's samples only).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from dataclasses import dataclass, field

import datasets
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.trainer_utils import get_last_checkpoint
from trl import TrlParser

from ..core.lengths import LengthMeter
from ..core.models import resolve_model_name
from ..data.loaders import DataArguments, load_datasets
from ..rewards.o1_pruner import O1_K, REF_ACCURACY_COLUMN, REF_LENGTH_COLUMN
from ..trainer.state import STATE_FILE
from .frugal import SamplingArguments, fold_records, sample_rollouts
from .saber import profile_dataset_vllm, question_key

logger = logging.getLogger(__name__)

__all__ = [
    "O1_K",
    "O1_STATS_FILE",
    "O1_STATE_KEY",
    "ReferenceArguments",
    "apply_reference_stats",
    "checkpoint_reference",
    "dataset_fingerprint",
    "load_or_sample_reference_stats",
    "load_reference_stats",
    "main",
    "prepare_dataset",
    "reference_key",
    "reference_stats_from_records",
    "sample_reference_stats",
    "write_reference_stats",
]

O1_STATS_FILE = "o1_pruner_reference.json"  # the copy in the output dir
O1_STATE_KEY = "o1_pruner_reference"  # the reward's key in trl_efficient_state.json (_O1PrunerReward.state_key)


def reference_stats_from_records(records: list[dict], k: int) -> list[dict]:
    r"""Fold `k` consecutive sample records per problem (each with `length` and `correct`) into one statistics record
    `{idx?, question, k, ref_length, ref_accuracy}`: $\bar L_{\text{ref}}$ the mean length, $\bar a_{\text{ref}}$ the
    share correct.

    >>> recs = [{"idx": 0, "question": "q", "length": n, "correct": c} for n, c in ((10, True), (20, False))]
    >>> reference_stats_from_records(recs, k=2)
    [{'idx': 0, 'question': 'q', 'k': 2, 'ref_length': 15.0, 'ref_accuracy': 0.5}]
    """
    if any("length" not in r for r in records):
        raise ValueError("sample records lack 'length': sample with a length_meter (sample_reference_stats).")
    return fold_records(records, k, lambda group: {
        "k": k,
        "ref_length": sum(float(r["length"]) for r in group) / k,
        "ref_accuracy": sum(bool(r["correct"]) for r in group) / k,
    }, count_name="k")  # fmt: skip


def sample_reference_stats(
    model,
    tokenizer,
    dataset,
    k: int = O1_K,
    length_meter: LengthMeter | None = None,
    max_new_tokens: int = 16384,
    batch_size: int = 16,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    generation_kwargs: dict | None = None,
    chat_template_kwargs: dict | None = None,
    show_progress: bool = True,
) -> list[dict]:
    """`k` samples of the frozen `model` per row of `dataset` (`frugal.sample_rollouts`), folded into one statistics
    record per row, in order. `length_meter` defaults to whole-completion policy tokens."""
    meter = length_meter or LengthMeter("tokens", "total", tokenizer)
    records = sample_rollouts(model, tokenizer, dataset, k, max_new_tokens=max_new_tokens, batch_size=batch_size,
                              temperature=temperature, top_p=top_p, seed=seed, generation_kwargs=generation_kwargs,
                              show_progress=show_progress, chat_template_kwargs=chat_template_kwargs,
                              length_meter=meter)  # fmt: skip
    return reference_stats_from_records(records, k)


def _join_by_idx(dataset, stats: list[dict]) -> bool:
    return "idx" in dataset.column_names and bool(stats) and all("idx" in r for r in stats)


def dataset_fingerprint(dataset) -> str:
    """A hash of the training rows (`idx` when present, question text, gold), independent of row order."""
    has_idx = "idx" in dataset.column_names
    rows = sorted(
        json.dumps([int(row["idx"]) if has_idx else None, question_key(row["prompt"]), str(row["solution"])])
        for row in dataset
    )
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]


def reference_key(model: str, dataset, k: int, length_unit: str, length_scope: str, max_new_tokens: int,
                  temperature: float, top_p: float, seed: int) -> dict:  # fmt: skip
    """What the statistics depend on: a cache is reused only when its key equals this run's."""
    return {
        "model": str(model),
        "dataset": dataset_fingerprint(dataset),
        "rows": len(dataset),
        "k": int(k),
        "length_unit": length_unit,
        "length_scope": length_scope,
        "max_new_tokens": int(max_new_tokens),
        "temperature": float(temperature),
        "top_p": float(top_p),
        "seed": int(seed),
    }


def write_reference_stats(path: str, payload: dict) -> str:
    """Write `{"key": ..., "stats": [...]}` as JSON (atomically: a concurrent reader sees the old or the new file)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=1)
    os.replace(tmp, path)
    return path


def _check_payload(payload, where: str) -> dict:
    if not isinstance(payload, dict) or not isinstance(payload.get("key"), dict):
        raise ValueError(f"{where} is not O1-Pruner reference statistics ({{'key': ..., 'stats': [...]}}).")
    stats = payload.get("stats")
    if not isinstance(stats, list) or not all(isinstance(r, dict) for r in stats):
        raise ValueError(f"{where}: 'stats' must be a list of records.")
    for rec in stats:
        if "ref_length" not in rec or "ref_accuracy" not in rec or ("idx" not in rec and "question" not in rec):
            raise ValueError(f"{where}: record {rec!r} needs 'ref_length', 'ref_accuracy' and 'idx' or 'question'.")
    return payload


def load_reference_stats(path: str) -> dict:
    """Read statistics written by `write_reference_stats`."""
    with open(path) as f:
        return _check_payload(json.load(f), path)


def _key_mismatch(saved: dict, key: dict) -> list[str]:
    return sorted(name for name in set(saved) | set(key) if saved.get(name) != key.get(name))


def load_or_sample_reference_stats(path: str, key: dict, sample) -> tuple[dict, bool]:
    """The payload cached at `path` when its key is `key` (`(payload, False)`); else, if `path` does not exist, call
    `sample()` (-> statistics records), write them there and return `(payload, True)`. A cache for other settings
    is an error naming the differing fields."""
    if os.path.exists(path):
        payload = load_reference_stats(path)
        diff = _key_mismatch(payload["key"], key)
        if diff:
            raise ValueError(
                f"O1-Pruner reference statistics {path} were sampled with other settings ({', '.join(diff)} differ); "
                "delete the file, or set recipe_kwargs stats to another path."
            )
        return payload, False
    payload = {"key": key, "stats": list(sample())}
    write_reference_stats(path, payload)
    return payload, True


def checkpoint_reference(args) -> dict | None:
    """The statistics payload saved in the checkpoint `args.resume_from_checkpoint` names (`True`: the last
    checkpoint of `output_dir`), or `None` when not resuming or the checkpoint holds none."""
    resume = getattr(args, "resume_from_checkpoint", None)
    if not resume:
        return None
    if resume is True or str(resume).lower() == "true":
        resume = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
        if resume is None:
            return None
    file = os.path.join(str(resume), STATE_FILE)
    if not os.path.isfile(file):
        return None
    with open(file) as f:
        saved = json.load(f).get(O1_STATE_KEY)
    return _check_payload(saved, file) if saved else None


def apply_reference_stats(dataset, stats: list[dict], unmatched: str = "error") -> datasets.Dataset:
    """Add the columns `o1_ref_length` and `o1_ref_accuracy` to `dataset`, joined on `idx` when both sides have it,
    else on the question text (`saber.question_key`). `unmatched`: `"error"` or `"drop"` for rows without
    statistics."""
    if unmatched not in ("error", "drop"):
        raise ValueError(f"unmatched must be 'error' or 'drop', got {unmatched!r}.")
    by_idx = _join_by_idx(dataset, stats)
    table = {int(r["idx"]) if by_idx else str(r["question"]).strip(): r for r in stats}
    keys = [int(i) for i in dataset["idx"]] if by_idx else [question_key(p) for p in dataset["prompt"]]
    missing = [i for i, key in enumerate(keys) if key not in table]
    if missing and unmatched == "error":
        raise ValueError(
            f"{len(missing)} of {len(keys)} training rows have no O1-Pruner reference statistics (joined on "
            f"{'idx' if by_idx else 'question'}; first: {keys[missing[0]]!r}); sample them on this training set, or "
            "pass recipe_kwargs unmatched='drop'."
        )
    absent = set(missing)
    keep = [i for i in range(len(keys)) if i not in absent]
    if not keep:
        raise ValueError("O1-Pruner: no training row has reference statistics; nothing left to train on.")
    if missing:
        logger.warning("O1-Pruner: dropped %d of %d rows without reference statistics.", len(missing), len(keys))
        dataset, keys = dataset.select(keep), [keys[i] for i in keep]
    for column in (REF_LENGTH_COLUMN, REF_ACCURACY_COLUMN):
        if column in dataset.column_names:
            dataset = dataset.remove_columns(column)
    dataset = dataset.add_column(REF_LENGTH_COLUMN, [float(table[key]["ref_length"]) for key in keys])
    return dataset.add_column(REF_ACCURACY_COLUMN, [float(table[key]["ref_accuracy"]) for key in keys])


SAMPLING_OPTIONS = ("k", "max_new_tokens", "temperature", "top_p", "batch_size", "model")


def prepare_dataset(dataset, args, tokenizer=None, **kwargs) -> datasets.Dataset:
    """Recipe hook of `o1-pruner` (`Recipe.dataset_hook`): the reference statistics on every training row.

    Where the statistics come from, in order:
    1. resuming (`args.resume_from_checkpoint`): the checkpoint's copy (the reward's state), so a resumed run never
       resamples and scores exactly as before;
    2. the cache `stats=` (a path; default `<output_dir>/o1_pruner_reference.json`) when its key is this run's;
    3. sampling now, with the frozen initial model (`model=`, default the tokenizer's `name_or_path`), `k` (12)
       samples per problem at `max_new_tokens` (training cap), `temperature`, `top_p` (training's), `batch_size`
       (16); written to `stats`. One process only: for multi-process runs sample beforehand with
       `python -m trl_efficient.methods.o1_pruner`.
    The payload is always (re)written to `<output_dir>/o1_pruner_reference.json`, the copy the reward builder loads
    into its checkpointed state. `unmatched` goes to `apply_reference_stats`.
    """
    unknown = sorted(set(kwargs) - {*SAMPLING_OPTIONS, "stats", "unmatched"})
    if unknown:
        raise ValueError(f"o1-pruner recipe_kwargs {unknown} are unknown; use {sorted([*SAMPLING_OPTIONS, 'stats'])}.")
    if tokenizer is None:
        raise ValueError("O1-Pruner's prepare_dataset needs the policy tokenizer (lengths in its tokens).")
    k = int(kwargs.get("k", O1_K))
    if k <= 0:
        raise ValueError(f"recipe_kwargs k (reference samples per problem) must be positive, got {k}.")
    model_path = kwargs.get("model") or getattr(tokenizer, "name_or_path", None)
    if kwargs.get("model"):
        model_path = resolve_model_name(model_path)  # the key names the path, as the command's does
    if not model_path:
        raise ValueError("O1-Pruner needs recipe_kwargs model=<the initial model> (or a tokenizer with a path).")
    gen = {
        "max_new_tokens": int(kwargs.get("max_new_tokens", args.max_completion_length)),
        "temperature": float(kwargs.get("temperature", args.temperature)),
        "top_p": float(kwargs.get("top_p", getattr(args, "top_p", 1.0))),
        "seed": int(getattr(args, "seed", 0)),
    }
    unit, scope = getattr(args, "length_unit", "tokens"), getattr(args, "length_scope", "total")
    key = reference_key(model_path, dataset, k, unit, scope, **gen)
    run_copy = os.path.join(args.output_dir, O1_STATS_FILE)
    path = kwargs.get("stats") or run_copy

    def sample() -> list[dict]:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise ValueError(
                f"O1-Pruner: no reference statistics at {path}; sample them once before a multi-process run: python "
                f"-m trl_efficient.methods.o1_pruner --model_name_or_path <base> --dataset_name <name> --output {path}"
            )
        logger.info("O1-Pruner: sampling %d reference completions per problem for %d problems.", k, len(dataset))
        model = AutoModelForCausalLM.from_pretrained(model_path, **(args.model_init_kwargs or {}))
        if torch.cuda.is_available() and not getattr(args, "use_cpu", False):
            model = model.to("cuda")
        bias = {k_: v for k_, v in (args.generation_kwargs or {}).items() if k_ == "sequence_bias"}
        stats = sample_reference_stats(
            model.eval(), tokenizer, dataset, k, LengthMeter(unit, scope, tokenizer),
            batch_size=int(kwargs.get("batch_size", 16)), generation_kwargs=bias,
            chat_template_kwargs=getattr(args, "chat_template_kwargs", None), show_progress=False, **gen,
        )  # fmt: skip
        del model
        return stats

    payload = checkpoint_reference(args)
    if payload is not None:
        diff = _key_mismatch(payload["key"], key)
        if diff:
            raise ValueError(
                f"Resuming with other O1-Pruner reference settings than the checkpoint's ({', '.join(diff)} differ); "
                "resume with the original settings or start a new run."
            )
        logger.info("O1-Pruner: reference statistics from the checkpoint (%s).", args.resume_from_checkpoint)
    else:
        payload, _ = load_or_sample_reference_stats(path, key, sample)
    if os.path.abspath(path) != os.path.abspath(run_copy) or not os.path.exists(run_copy):
        write_reference_stats(run_copy, payload)
    return apply_reference_stats(dataset, payload["stats"], unmatched=kwargs.get("unmatched", "error"))


@dataclass
class ReferenceArguments(SamplingArguments):
    """Options of `python -m trl_efficient.methods.o1_pruner` (dataset options: `trl_efficient.data.DataArguments`).
    Use the training run's values, else the cache's key differs and training refuses it."""

    output: str = field(default="outputs/o1_pruner_reference.json", metadata={"help": "Where to write the stats."})
    k: int = field(default=O1_K, metadata={"help": "Reference samples per problem (12)."})
    length_unit: str = field(default="tokens", metadata={"help": "Training's length_unit ('tokens', 'chars')."})
    length_scope: str = field(default="total", metadata={"help": "Training's length_scope."})
    backend: str = field(default="transformers", metadata={"help": "'transformers' or 'vllm'."})
    vllm_max_model_len: int | None = field(default=None, metadata={"help": "vLLM max_model_len (vLLM backend)."})
    vllm_enforce_eager: bool = field(default=False, metadata={"help": "vLLM enforce_eager (vLLM backend; CPU tests)."})


def main(argv: list[str] | None = None) -> int:
    """Sample and write the reference statistics of a training set, before a (multi-process) training run."""
    parser = TrlParser((ReferenceArguments, DataArguments), prog="python -m trl_efficient.methods.o1_pruner")
    args, data_args = parser.parse_args_and_config(list(sys.argv[1:] if argv is None else argv))
    if args.backend not in ("transformers", "vllm"):
        raise ValueError(f"backend must be 'transformers' or 'vllm', got {args.backend!r}.")
    dataset, _ = load_datasets(data_args, seed=args.seed)
    path = resolve_model_name(args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    meter = LengthMeter(args.length_unit, args.length_scope, tokenizer)
    gen = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    key = reference_key(tokenizer.name_or_path, dataset, args.k, args.length_unit, args.length_scope, **gen)

    def sample() -> list[dict]:
        if args.backend == "vllm":
            llm_kwargs = {"max_model_len": args.vllm_max_model_len} if args.vllm_max_model_len else {}
            if args.vllm_enforce_eager:
                llm_kwargs["enforce_eager"] = True
            records = profile_dataset_vllm(
                path, tokenizer, dataset, n=args.k, length_meter=meter, llm_kwargs=llm_kwargs, **gen
            )
            return reference_stats_from_records(records, args.k)
        model = AutoModelForCausalLM.from_pretrained(path)
        if torch.cuda.is_available():
            model = model.to("cuda")
        return sample_reference_stats(
            model.eval(), tokenizer, dataset, args.k, meter, batch_size=args.batch_size, **gen
        )

    payload, sampled = load_or_sample_reference_stats(args.output, key, sample)
    stats = payload["stats"]
    mean_length = sum(r["ref_length"] for r in stats) / max(len(stats), 1)
    accuracy = sum(r["ref_accuracy"] for r in stats) / max(len(stats), 1)
    print(
        f"o1-pruner reference: {len(stats)} problems x {args.k} samples ({'sampled' if sampled else 'cached'}), "
        f"mean length {mean_length:.1f} {args.length_unit}, accuracy {accuracy:.3f}; {args.output}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
