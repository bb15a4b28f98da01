"""
Worker for `test_group_dist.py`; not a test itself (the test also imports it by path and calls `score` in one process).

Run as `torchrun --standalone --nproc_per_node 2 dist_group_worker.py <in.json> <out_dir>`. Each rank takes its
equal, contiguous slice of the global batch in `<in.json>` (TRL's process-major layout), calls every reward builder
named there on it, and writes `<out_dir>/rank<r>.json`.
"""

import json
import os
import sys
from types import SimpleNamespace

from trl_efficient.core.lengths import LengthMeter
from trl_efficient.rewards.group import GroupLengthReward


def build(name: str, tokenizer, **kwargs):
    """Reward builder `name` as a run builds it: its registered builder, with the config values builders read."""
    from trl_efficient.recipes.registry import REWARD_BUILDERS

    args = SimpleNamespace(length_unit="tokens", length_scope="total", max_completion_length=256)
    return REWARD_BUILDERS.get(name)(args, tokenizer, **kwargs)


class ShortestFinished(GroupLengthReward):
    """`GroupLengthReward.gathered_columns` across processes: 1 for the group's shortest finished correct row, else 0
    (`None` for an unscorable row)."""

    __name__ = "shortest_finished_reward"
    gathered_columns = ("finished",)

    def _score_group(self, rows):
        best = min((n for c, n, f in rows if c and f is not False), default=None)
        return [None if c is None else float(bool(c) and f is not False and n == best) for c, n, f in rows]


def score(batch: dict, tokenizer, rank: int = 0, world: int = 1) -> dict[str, list]:
    """Rank `rank`'s rewards of its slice of `batch`, for each builder of `batch["builders"]`, built twice: with
    `num_generations=G`, and without it from the trainer's `group_size` column (`<name>/group_size`)."""
    n = len(batch["columns"]["completions"]) // world
    rows = slice(rank * n, (rank + 1) * n)
    kwargs = {key: values[rows] for key, values in batch["columns"].items()}
    kwargs["trainer_state"] = SimpleNamespace(global_step=2, max_steps=4)  # as TRL passes it (Kimi: past warm-up)
    G = batch["num_generations"]
    out = {}
    for name in batch["builders"]:
        out[name] = build(name, tokenizer, num_generations=G)(**kwargs)
        out[f"{name}/group_size"] = build(name, tokenizer)(**kwargs, group_size=[G] * n)
    out["gathered_columns"] = ShortestFinished(G, LengthMeter())(**kwargs)  # a per-row column gathered with each row
    return out


def main(in_path: str, out_dir: str) -> None:
    import torch.distributed as dist
    from transformers import AutoTokenizer

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(in_path) as f:
        batch = json.load(f)
    tokenizer = AutoTokenizer.from_pretrained(batch["tokenizer"])
    out = score(batch, tokenizer, rank, world)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from helpers import finish_distributed  # noqa: E402  (barrier, destroy, os._exit: see its docstring)

    finish_distributed()
