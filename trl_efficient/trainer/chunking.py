r"""Generation in chunks of rows (option `generation_chunk_size`): what groups of hundreds of completions per prompt
(BroRL, arXiv 2510.01180) need on top of TRL.

BroRL (Hu et al., NVIDIA, "BroRL: Scaling Reinforcement Learning via Broadened Exploration") trains with N = 512
rollouts per prompt (recipe `brorl`, methods.md §34). TRL 1.16 (`trl/trainer/grpo_trainer.py`, `grpo_config.py`)
already runs the loss in micro-batches a group may span, computes group statistics on the gathered batch before the
split, and chunks its no-grad forwards (docs/advantage-methods.md, "BroRL", the table of stages). What it lacks:
**generation** runs in one call (`_generate_single_turn`) over every row this process generates per generation batch,
so the KV cache grows with N. `generation_chunk_size = C` calls TRL's `_generate_single_turn` on consecutive chunks
of C rows and concatenates the completions (`generate_in_chunks`); everything after it is TRL's, unchanged:

$$ \text{rows per generate call} = \min(C,\ B_{\text{proc}}), \qquad
   B_{\text{proc}} = \texttt{per\_device\_train\_batch\_size} \times \texttt{steps\_per\_generation} $$

Row-independent generation gives one pass's completions (sampling draws other random numbers, as another batch size
does; `tests/trainer/test_chunking.py`). Refused in one line: `use_vllm`, transformers' continuous batching (they
bound their own memory), image inputs (VLMs, at construction).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["check_generation_chunking", "generate_in_chunks", "rows_per_generation_batch"]


def rows_per_generation_batch(args) -> int:
    """Rows one process generates per training generation batch: `per_device_train_batch_size x
    steps_per_generation` (TRL 1.16's layout; `generation_batch_size` divided by the number of processes).

    >>> from types import SimpleNamespace
    >>> rows_per_generation_batch(SimpleNamespace(per_device_train_batch_size=32, steps_per_generation=16))
    512
    """
    return int(args.per_device_train_batch_size) * int(args.steps_per_generation)


def check_generation_chunking(args) -> None:
    """Config-time checks of `generation_chunk_size` (one line each, naming the field, the value and the rule); run
    after `GRPOConfig.__post_init__` has derived `steps_per_generation`. Evaluation batches
    (`per_device_eval_batch_size` rows) are generated in the same chunks, the last one possibly smaller."""
    size = getattr(args, "generation_chunk_size", None)
    if size is None:
        return
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"generation_chunk_size must be a number of rows >= 1 (or None: one call), got {size!r}.")
    for flag in ("use_vllm", "use_transformers_continuous_batching"):
        if getattr(args, flag, False):
            raise ValueError(
                f"generation_chunk_size={size} chunks transformers generation, but {flag}=True schedules its own "
                "batches and memory (vLLM: vllm_gpu_memory_utilization); unset generation_chunk_size."
            )
    rows = rows_per_generation_batch(args)
    if size < rows and rows % size != 0:  # chunks of equal size: the same peak in every call (size >= rows: one call)
        raise ValueError(
            f"generation_chunk_size={size} must divide the rows each process generates per generation batch, "
            f"per_device_train_batch_size x steps_per_generation = {args.per_device_train_batch_size} x "
            f"{args.steps_per_generation} = {rows} (or be at least {rows}: one call)."
        )


def generate_in_chunks(
    generate: Callable[[list, list | None], tuple[list, list | None]],
    prompt_ids: list,
    images: list | None,
    chunk_size: int | None,
) -> tuple[list, list | None]:
    """Call `generate(prompt_ids, images)` on consecutive chunks of at most `chunk_size` rows and concatenate the
    completions (and the per-token logprobs, `None` when every chunk returns `None`), in row order. `chunk_size`
    `None` or at least `len(prompt_ids)`: one call, exactly as TRL.

    >>> calls = []
    >>> def fake(ids, images):
    ...     calls.append(len(ids))
    ...     return [[i, i] for i in ids], None
    >>> generate_in_chunks(fake, [1, 2, 3, 4, 5], None, 2), calls
    (([[1, 1], [2, 2], [3, 3], [4, 4], [5, 5]], None), [2, 2, 1])
    """
    if chunk_size is None or len(prompt_ids) <= chunk_size:
        return generate(prompt_ids, images)
    completions, logprobs = [], []
    for start in range(0, len(prompt_ids), chunk_size):
        rows = slice(start, start + chunk_size)
        ids, lps = generate(prompt_ids[rows], None if images is None else images[rows])
        completions.extend(ids)
        logprobs.append(lps)
    if all(lp is None for lp in logprobs):
        return completions, None
    if any(lp is None for lp in logprobs):  # TRL returns logprobs on every call of a path or on none
        raise RuntimeError("generate_in_chunks: some chunks returned logprobs and some did not.")
    return completions, [row for lp in logprobs for row in lp]
