"""Train 6 steps with the LSPO prompt sampler and dump the global index sequence and the sampler state of each rank.

Launched by tests/multiprocess/test_multiprocess_sampler.py with `torchrun --nproc_per_node {1,2}`. The generation
batch is 8 rows = 4 prompts of G = 2 (12 prompts: 3 steps an epoch, 2 epochs); with 2 processes each rank holds 4 rows.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingTrainer, make_dataset, tiny_config  # noqa: E402

import trl_efficient.methods  # noqa: E402, F401  (registers the lspo and frugal samplers)
from trl_efficient.rewards import correctness_reward  # noqa: E402


def main(model_dir: str, out_dir: str, sampler: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=8 // world,
        num_generations=2,
        max_steps=6,
        prompt_sampler=sampler,
        sampler_kwargs={"l_max": 40} if sampler == "lspo" else None,
        ddp_find_unused_parameters=False,
    )
    dataset = make_dataset(12)
    if sampler == "frugal":
        dataset = dataset.add_column("pass_rate", [(i % 4) / 4 for i in range(12)])
    trainer = RecordingTrainer(model=model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=dataset)
    trainer.train()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "idx": [r["metadata"]["idx"] for r in trainer.records],
                "lengths": [r["lengths"] for r in trainer.records],
                "state": trainer.prompt_sampler.state_dict(),
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
