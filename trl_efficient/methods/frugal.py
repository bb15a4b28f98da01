r"""Frugal-Thinking ("Shorter but not Worse", MBZUAI-Paris, arXiv 2511.01937; methods.md §30): brevity from data
selection, with no length term in the reward.

Stage 1 of the paper keeps every problem whose base-model success rate, estimated from 16 rollouts, is below one
(including $p = 0$), so the mix is skewed toward moderately easy problems, and trains with a binary exact-match reward
under a tight context cap (released code: MBZUAI-Paris/Frugal-Thinking,
`src/train/verl_0.4/slurm_xp/informal_maths/stage_1/q3_4b_it_math_xp.slurm`).

Here:
- `estimate_pass_rate(model, tokenizer, dataset, n=16)`: a real generation pass with the base model, reusing SABER's
  profiling (`saber.profile_dataset`: the one batched transformers generation loop and its answer check), each row
  repeated `n` times; $\hat p = \frac{1}{n}\sum_{j=1}^{n} \mathbb{1}[\text{correct}_j]$;
- `apply_pass_rates`: joins the estimates to the training rows (a `pass_rate` column) and keeps $\hat p < 1$;
- `prepare_dataset`: the `frugal` recipe's hook (loads or estimates the pass rates, then filters);
- the `frugal` prompt sampler (`FrugalSampler`, below; registered in `trainer.prompt_samplers.PROMPT_SAMPLERS`)
  samples the kept problems uniformly, as the paper (TRL's seeded shuffle of each pass; the released run uses verl's
  shuffled dataloader, `data.shuffle=true`); the option `sampler_kwargs: {alpha: a}` (a > 0, not in the paper) draws
  them with weight $w(p) = 1 + a p$ instead.

Proposed defaults: `n = 16` [paper], `max_new_tokens` = the training cap (the paper estimates at its 16k training
context), `temperature` = the training temperature (1.0 in the paper), `top_p = 1.0`; correctness is the SABER
profile's check (answer after a closed `</think>`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field

import datasets
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import TrlParser

from ..core.models import resolve_model_name
from ..core.sampler_defaults import FRUGAL_ALPHA
from ..data.loaders import DataArguments, load_datasets
from ..trainer.prompt_samplers import PROMPT_SAMPLERS, PromptSampler, dataset_column
from .saber import profile_dataset, question_key, write_profile

logger = logging.getLogger(__name__)

FRUGAL_N = 16  # rollouts per problem for the pass-rate estimate [paper]
FRUGAL_PASS_RATES_ENV = "TRL_EFFICIENT_FRUGAL_PASS_RATES"
PASS_RATE_COLUMN = "pass_rate"


def pass_rates_from_records(records: list[dict], n: int) -> list[dict]:
    r"""Fold `n` consecutive profile records per problem into one pass-rate record
    `{idx?, question, n, correct, pass_rate}` with $\hat p = \text{correct} / n$.

    >>> recs = [{"idx": 0, "question": "q0", "correct": c} for c in (True, False, False, True)]
    >>> pass_rates_from_records(recs + [{"idx": 1, "question": "q1", "correct": True}] * 4, n=4)[0]
    {'idx': 0, 'question': 'q0', 'n': 4, 'correct': 2, 'pass_rate': 0.5}
    """
    return fold_records(records, n, lambda group: _pass_rate(group, n))


def _pass_rate(group: list[dict], n: int) -> dict:
    correct = sum(bool(r["correct"]) for r in group)
    return {"n": n, "correct": correct, "pass_rate": correct / n}


def fold_records(records: list[dict], n: int, fold, count_name: str = "n") -> list[dict]:
    """One record `{idx?, question, **fold(group)}` per problem from the `n` consecutive sample records of each
    problem that `sample_rollouts` returns (the one layout Frugal's pass rates and O1-Pruner's reference statistics
    read)."""
    if n <= 0 or len(records) % n:
        raise ValueError(f"{len(records)} sample records are not a whole number of groups of {count_name} = {n}.")
    out = []
    for start in range(0, len(records), n):
        group = records[start : start + n]
        rec = {"question": group[0]["question"], **fold(group)}
        if "idx" in group[0]:
            rec = {"idx": int(group[0]["idx"]), **rec}
        out.append(rec)
    return out


def sample_rollouts(
    model,
    tokenizer,
    dataset,
    n: int,
    max_new_tokens: int = 16384,
    batch_size: int = 16,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    generation_kwargs: dict | None = None,
    show_progress: bool = True,
    chat_template_kwargs: dict | None = None,
    length_meter=None,
) -> list[dict]:
    """`n` sampled completions of every row of `dataset` (columns `prompt`, `solution`, optionally `idx`) by the frozen
    `model`, as `n` consecutive `saber.profile_dataset` records per row (each row repeated `n` times, one seeded
    batched generation). The shared pre-pass of Frugal's pass rates and O1-Pruner's reference statistics."""
    if n <= 0:
        raise ValueError(f"n (rollouts per problem) must be positive, got {n}.")
    expanded = dataset.select([i for i in range(len(dataset)) for _ in range(n)])
    return profile_dataset(model, tokenizer, expanded, max_new_tokens=max_new_tokens, batch_size=batch_size,
                           temperature=temperature, top_p=top_p, seed=seed, generation_kwargs=generation_kwargs,
                           chat_template_kwargs=chat_template_kwargs, show_progress=show_progress,
                           length_meter=length_meter)  # fmt: skip


def estimate_pass_rate(
    model,
    tokenizer,
    dataset,
    n: int = FRUGAL_N,
    max_new_tokens: int = 16384,
    batch_size: int = 16,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    generation_kwargs: dict | None = None,
    show_progress: bool = True,
) -> list[dict]:
    """Base-model pass rate of every row of `dataset` (columns `prompt`, `solution`, optionally `idx`): `n` sampled
    completions each, generated and checked by `saber.profile_dataset`; one record per row, in order."""
    records = sample_rollouts(model, tokenizer, dataset, n, max_new_tokens=max_new_tokens, batch_size=batch_size,
                              temperature=temperature, top_p=top_p, seed=seed, generation_kwargs=generation_kwargs,
                              show_progress=show_progress)  # fmt: skip
    return pass_rates_from_records(records, n)


def load_pass_rates(path: str) -> list[dict]:
    """Read pass-rate records written by `write_profile` (JSONL, or a JSON list for `.json`)."""
    with open(path) as f:
        records = json.load(f) if path.endswith(".json") else [json.loads(line) for line in f if line.strip()]
    for rec in records:
        if PASS_RATE_COLUMN not in rec or ("idx" not in rec and "question" not in rec):
            raise ValueError(f"{path}: record {rec!r} needs 'pass_rate' and 'idx' or 'question'.")
    return records


def apply_pass_rates(
    dataset, records: list[dict], keep_solved: bool = False, unmatched: str = "error"
) -> datasets.Dataset:
    """Add the `pass_rate` column to `dataset` (joined on `idx` when both sides have it, else on the question text)
    and keep the rows with `pass_rate < 1` (`p = 0` included), unless `keep_solved`. `unmatched`: `"error"` or
    `"drop"` for rows without an estimate."""
    if unmatched not in ("error", "drop"):
        raise ValueError(f"unmatched must be 'error' or 'drop', got {unmatched!r}.")
    by_idx = all("idx" in r for r in records) and "idx" in dataset.column_names
    key = (lambda row: int(row["idx"])) if by_idx else (lambda row: question_key(row["prompt"]))
    table = {int(r["idx"]) if by_idx else str(r["question"]).strip(): float(r[PASS_RATE_COLUMN]) for r in records}
    rates = []
    for row in dataset:
        rate = table.get(key(row))
        if rate is None and unmatched == "error":
            raise ValueError(
                f"No pass-rate estimate for the row {key(row)!r} (joined on {'idx' if by_idx else 'question'}); "
                "estimate on this training set, or pass unmatched='drop'."
            )
        rates.append(rate)
    if PASS_RATE_COLUMN in dataset.column_names:
        dataset = dataset.remove_columns(PASS_RATE_COLUMN)
    dataset = dataset.add_column(PASS_RATE_COLUMN, [-1.0 if r is None else r for r in rates])
    kept = [i for i, r in enumerate(rates) if r is not None and (keep_solved or r < 1.0)]
    logger.info("Frugal-Thinking: kept %d of %d problems (pass rate < 1).", len(kept), len(rates))
    if not kept:
        raise ValueError("Frugal-Thinking: every problem has pass rate 1 (or no estimate); nothing left to train on.")
    return dataset.select(kept)


def prepare_dataset(dataset, args, tokenizer=None, **kwargs) -> datasets.Dataset:
    """Recipe hook of `frugal` (`Recipe.dataset_hook`): join the base model's pass rates and keep `p < 1`.

    Pass rates, in order of precedence:
    - `pass_rates=`: a path (JSONL / JSON written by `write_profile`) or a list of records;
    - `$TRL_EFFICIENT_FRUGAL_PASS_RATES` (a path);
    - `estimate=True`: generate now with the base model (`model=` path, default the tokenizer's `name_or_path`),
      `n` (16), `max_new_tokens` (training cap), `temperature` (training temperature), `batch_size`; the records are
      written to `output=` (default `<output_dir>/frugal_pass_rates.jsonl`). Estimate once beforehand for
      multi-process runs (`python -m trl_efficient.methods.frugal`).
    Other keywords (`keep_solved`, `unmatched`) go to `apply_pass_rates`.
    """
    records = kwargs.pop("pass_rates", None) or os.environ.get(FRUGAL_PASS_RATES_ENV)
    estimate = bool(kwargs.pop("estimate", False))
    est = {k: kwargs.pop(k) for k in ("n", "max_new_tokens", "temperature", "batch_size", "top_p") if k in kwargs}
    model_path = kwargs.pop("model", None)
    output = kwargs.pop("output", None)
    if records is None and estimate:
        model_path = resolve_model_name(model_path) if model_path else getattr(tokenizer, "name_or_path", None)
        if not model_path:
            raise ValueError("Frugal-Thinking estimate=True needs model=<base model> (or a tokenizer with a path).")
        model = AutoModelForCausalLM.from_pretrained(model_path)
        records = estimate_pass_rate(
            model,
            tokenizer,
            dataset,
            n=int(est.get("n", FRUGAL_N)),
            max_new_tokens=int(est.get("max_new_tokens", getattr(args, "max_completion_length", 16384))),
            batch_size=int(est.get("batch_size", 16)),
            temperature=float(est.get("temperature", getattr(args, "temperature", 1.0))),
            top_p=float(est.get("top_p", 1.0)),
            seed=int(getattr(args, "seed", 0)),
            show_progress=False,
        )
        output = output or os.path.join(getattr(args, "output_dir", "."), "frugal_pass_rates.jsonl")
        write_profile(records, output)
    elif est or model_path:
        raise ValueError(f"recipe_kwargs {sorted([*est, *(['model'] if model_path else [])])} need estimate=True.")
    if records is None:
        raise ValueError(
            "Frugal-Thinking needs the base model's pass rates of the training set: pass recipe_kwargs "
            f'{{"pass_rates": "rates.jsonl"}} (or set {FRUGAL_PASS_RATES_ENV}), or {{"estimate": true, "n": 16}} to '
            "generate them now (`python -m trl_efficient.methods.frugal --model_name_or_path <base> --dataset_name "
            "<name> --output rates.jsonl`)."
        )
    if isinstance(records, str):
        if not os.path.exists(records):
            raise ValueError(f"Frugal-Thinking pass rates {records!r} do not exist.")
        records = load_pass_rates(records)
    return apply_pass_rates(dataset, list(records), **kwargs)


@dataclass
class SamplingArguments:
    """Options shared by the base-model pre-pass commands (`sample_rollouts`): Frugal's pass rates
    (`PassRateArguments`) and O1-Pruner's reference statistics (`o1_pruner.ReferenceArguments`). Use the training
    run's values."""

    model_name_or_path: str = field(default="tiny:qwen2", metadata={"help": "Base model (Hub id, path, 'tiny:')."})
    max_new_tokens: int = field(default=16384, metadata={"help": "Generation cap (the training cap)."})
    batch_size: int = field(default=16, metadata={"help": "Prompts per transformers generate call."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature (training's)."})
    top_p: float = field(default=1.0, metadata={"help": "Top-p (training's)."})
    seed: int = field(default=0, metadata={"help": "Seed (training's)."})


@dataclass
class PassRateArguments(SamplingArguments):
    """Options of `python -m trl_efficient.methods.frugal` (dataset options: `trl_efficient.data.DataArguments`)."""

    output: str = field(default="outputs/frugal_pass_rates.jsonl", metadata={"help": "Where to write the rates."})
    n: int = field(default=FRUGAL_N, metadata={"help": "Rollouts per problem (16 in the paper)."})


def main(argv: list[str] | None = None) -> int:
    """Estimate and write the pass rates of a training set (transformers generation)."""
    parser = TrlParser((PassRateArguments, DataArguments), prog="python -m trl_efficient.methods.frugal")
    args, data_args = parser.parse_args_and_config(list(sys.argv[1:] if argv is None else argv))
    dataset, _ = load_datasets(data_args, seed=args.seed)
    path = resolve_model_name(args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    if torch.cuda.is_available():
        model = model.to("cuda")
    records = estimate_pass_rate(
        model, tokenizer, dataset, args.n, args.max_new_tokens, args.batch_size, args.temperature, args.top_p, args.seed
    )
    write_profile(records, args.output)
    kept = sum(r["pass_rate"] < 1 for r in records)
    print(f"frugal pass rates: {len(records)} problems, {kept} with p < 1; written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def frugal_weight(p: float, alpha: float = FRUGAL_ALPHA) -> float:
    r"""Sampling weight of a problem with base-model pass rate $p$: $w(p) = 1 + \alpha p$ for $p < 1$, $0$ for
    $p \ge 1$ (problems the base model always solves are out, arXiv 2511.01937 Stage 1). $\alpha = 0$ (default) is
    the paper's uniform sampling over the kept problems; $\alpha > 0$ is an option of ours (not in the paper) that
    draws moderately easy problems more often ($\alpha = 1$: up to twice as often as never-solved ones).

    >>> [frugal_weight(p) for p in (0.0, 0.25, 0.9375, 1.0)]
    [1.0, 1.0, 1.0, 0.0]
    >>> [frugal_weight(p, alpha=1.0) for p in (0.0, 0.25, 0.9375, 1.0)]
    [1.0, 1.25, 1.9375, 0.0]
    """
    p = float(p)
    if p != p or not 0.0 <= p <= 1.0:
        raise ValueError(f"pass_rate must be in [0, 1], got {p}.")
    return 0.0 if p >= 1.0 else 1.0 + float(alpha) * p


@PROMPT_SAMPLERS.register("frugal")
class FrugalSampler(PromptSampler):
    r"""Frugal-Thinking's data mix as a sampler (arXiv 2511.01937; methods.md §30): prompts whose `pass_rate` column
    (the base model's estimated pass rate, `trl_efficient.methods.frugal.estimate_pass_rate`) is 1 are never drawn.

    - `alpha = 0` (default, the paper): **uniform** over the kept problems ($p < 1$). The paper's Stage 1 samples its
      kept set uniformly; the released run (MBZUAI-Paris/Frugal-Thinking `7348824b`,
      `src/train/verl_0.4/slurm_xp/informal_maths/stage_1/q3_4b_it_math_xp.slurm`: `SHUFFLE=true`,
      `data.shuffle=$SHUFFLE`) reads it with verl's shuffled dataloader, one random permutation per epoch. So do we:
      TRL's seeded permutation of each pass (`PromptSampler`), skipping the rows with $p = 1$; when the dataset holds
      only kept problems (the `frugal` recipe's `prepare_dataset` filters them) the sequence is exactly TRL's
      `RepeatSampler`'s.
    - `alpha > 0` (option, not in the paper): every chunk draws `batch_size` distinct prompts with probability
      proportional to $w(p) = 1 + \alpha p$ (`frugal_weight`), without replacement inside a chunk and independently
      across chunks; chunk $k$ uses a generator seeded with `seed + k` (`k` = chunks drawn so far, in the state), so
      the draws are identical on every rank and resume exactly.

    Args:
        alpha: $\alpha$ in $w(p) = 1 + \alpha p$, >= 0 (default 0: uniform, the paper).

    >>> from datasets import Dataset
    >>> s = FrugalSampler(Dataset.from_dict({"pass_rate": [0.0, 1.0, 0.5, 0.25, 0.75]}), 2, batch_size=2, seed=0,
    ...                   shuffle=False)
    >>> len(s), s.weights.tolist(), list(s)  # 5 // 2 = 2 chunks of 2 prompts x 2 repeats; row 1 (p = 1) skipped
    (8, [1.0, 0.0, 1.0, 1.0, 1.0], [0, 0, 2, 2, 3, 3, 4, 4])
    """

    needs_columns = ("pass_rate",)

    def __init__(
        self,
        data_source,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        shuffle: bool = True,
        seed: int | None = None,
        args=None,
        alpha: float = FRUGAL_ALPHA,
    ) -> None:
        super().__init__(data_source, mini_repeat_count, batch_size, repeat_count, shuffle, seed, args)
        self.check(args, alpha=alpha)
        self.alpha = float(alpha)
        rates = dataset_column(data_source, "pass_rate", "frugal")
        self.weights = torch.tensor([frugal_weight(p, self.alpha) for p in rates], dtype=torch.float64)
        positive = int((self.weights > 0).sum())
        if positive < self.batch_size:
            raise ValueError(
                f"prompt_sampler='frugal': only {positive} prompts have pass_rate < 1, fewer than one generation batch "
                f"({self.batch_size} prompts); filter with prepare_dataset or use a smaller generation batch."
            )

    @classmethod
    def check(cls, args=None, alpha=FRUGAL_ALPHA) -> None:
        if float(alpha) < 0:
            raise ValueError(f"sampler_kwargs alpha must be >= 0 (w = 1 + alpha * pass_rate), got {alpha}.")

    def draw_chunk(self) -> list[int]:
        if self.alpha > 0:  # option: weighted, independent chunks
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.chunks_drawn)
            return torch.multinomial(self.weights, self.batch_size, replacement=False, generator=generator).tolist()
        # uniform (the paper): the next batch_size kept prompts of the pass's permutation
        while True:
            remaining = self._pass_permutation(self.pass_index)[self.offset :]
            kept = [pos for pos, index in enumerate(remaining) if self.weights[index] > 0]
            if len(kept) < self.batch_size:  # the pass is spent (a partial chunk dropped, as TRL does)
                self.pass_index, self.offset = self.pass_index + 1, 0
                continue
            picks = kept[: self.batch_size]
            self.offset += picks[-1] + 1
            return [remaining[pos] for pos in picks]
