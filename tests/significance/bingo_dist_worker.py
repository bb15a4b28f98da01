"""Worker for `test_bingo_dist.py`; not a test itself.

`torchrun --standalone --nproc_per_node {1,2} bingo_dist_worker.py <model_dir> <out_dir>` (or `python ... ` for one
process without torch.distributed). Each rank takes its contiguous slice of a 12-row batch (3 groups of G=4, so with
2 ranks the middle group straddles them), calls the Bingo rewards twice (two training steps, schedule updated by the
reward from gathered correctness) and writes `<out_dir>/rank<r>.json`.
"""

import json
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(__file__))

FILL = ["so", "then", "wait", "um"]


def batch(step: int):
    prompts, completions, solutions = [], [], []
    for g in range(3):
        question = f"What is {g + step} + 1?"
        for j in range(4):
            filler = " ".join(FILL[: (g + j + step) % 4] * (j + 1))
            answer = g + step + 1 if (j + step) % 2 == 0 else 0
            prompts.append([{"role": "user", "content": question}])
            completions.append(f"{filler} so the answer is \\boxed{{{answer}}}")
            solutions.append(str(g + step + 1))
    return prompts, completions, solutions


def run(model_dir: str, rank: int, world: int) -> dict:
    import torch
    from bingo_testing import WordScorer
    from transformers import AutoTokenizer

    from trl_efficient.rewards.bingo import get_bingo_length_reward

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(model_dir)
    common = dict(schedule_update="reward", schedule_start=1, schedule_window=2)
    rewards = {
        "group": get_bingo_length_reward(WordScorer(), reference="group", **common),
        "model": get_bingo_length_reward(
            WordScorer(),
            reference="model",
            reference_model=model_dir,
            tokenizer=tok,
            reference_samples=2,
            max_new_tokens=6,
            reference_batch_size=1,
            device="cpu",
            generation_kwargs={"sequence_bias": [[[tok.eos_token_id], 3.0]]},
            **common,
        ),
    }
    out = {name: [] for name in rewards}
    n = 12 // world
    rows = slice(rank * n, (rank + 1) * n)
    for step in range(2):
        prompts, completions, solutions = batch(step)
        for name, reward in rewards.items():
            out[name].append(
                reward(
                    prompts=prompts[rows],
                    completions=completions[rows],
                    solution=solutions[rows],
                    group_size=[4] * n,
                    trainer_state=SimpleNamespace(global_step=step),
                )  # fmt: skip
            )
    return {"rewards": out, "states": {name: r.state_dict() for name, r in rewards.items()}}


def main(model_dir: str, out_dir: str) -> None:
    import torch.distributed as dist

    if "RANK" in os.environ:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    result = run(model_dir, rank, world)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from helpers import finish_distributed  # noqa: E402  (barrier, destroy, os._exit: see its docstring)

    finish_distributed()
