"""
Worker for `test_group_dist.py`; not a test itself.

Run as `torchrun --standalone --nproc_per_node 2 dist_group_worker.py <in.json> <out_dir>`. Each rank takes its
equal, contiguous slice of the global batch in `<in.json>` (TRL's process-major layout), calls the group rewards on
it, and writes `<out_dir>/rank<r>.json`.
"""

import json
import os
import sys


def main(in_path: str, out_dir: str) -> None:
    import torch.distributed as dist

    from trl_efficient.rewards import get_kimi_length_reward, get_shorter_better_reward

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(in_path) as f:
        batch = json.load(f)
    n = len(batch["completions"]) // world
    rows = slice(rank * n, (rank + 1) * n)
    kwargs = dict(
        completions=batch["completions"][rows],
        solution=batch["solution"][rows],
        completion_ids=[[0] * length for length in batch["lengths"][rows]],
    )
    G = batch["num_generations"]
    out = {
        "rank": rank,
        "kimi": get_kimi_length_reward(num_generations=G)(**kwargs),
        "shorter_better": get_shorter_better_reward(num_generations=G)(**kwargs),
        "kimi_group_size_column": get_kimi_length_reward()(**kwargs, group_size=[G] * n),
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
