"""Run 2 training steps with ALP, GRPO-λ and ASRR (plus ASRR's no-think plan) and dump what each rank saw.

Launched by tests/multiprocess/test_multiprocess_solve_rate.py with `torchrun --nproc_per_node {1,2}`. The global
generation batch is 12 rows = 3 groups of G=4; with 2 processes each rank holds 6 rows, so the middle group straddles
the ranks (its solve rate, shortest correct length and GRPO-λ's batch ranking need the gathered rows).
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingTrainer, make_dataset, tiny_config  # noqa: E402

import trl_efficient.methods  # noqa: E402, F401  (registers ASRR's rollout plan)
from trl_efficient.rewards import (  # noqa: E402
    correctness_reward,
    get_alp_reward,
    get_asrr_reward,
    get_grpo_lambda_reward,
)


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=12 // world,
        num_generations=4,
        max_steps=2,
        rollout_plan="asrr",
        ddp_find_unused_parameters=False,
    )
    trainer = RecordingTrainer(
        model=model_dir,
        reward_funcs=[
            correctness_reward,
            get_alp_reward(max_length=48),
            get_grpo_lambda_reward(top_fraction=0.5),  # ceil(0.5 * 3) = 2 efficiency groups of 3
            get_asrr_reward(window=16, tau=0.0),  # small window, gate always open: the penalty shows at this size
        ],
        args=args,
        train_dataset=make_dataset(48),
    )
    trainer.train()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "records": [
                    {k: r[k] for k in ("rewards", "lengths", "advantages", "prompts_decoded")} for r in trainer.records
                ],
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
