"""Run 2 training steps of L1 target prompting (per-prompt targets, the default) and dump what each rank saw.

Launched by tests/multiprocess/test_multiprocess.py with `torchrun --nproc_per_node {1,2}`. The global generation
batch is 12 rows = 3 groups of G=4; with 2 processes each rank holds 6 rows, so the middle group (global rows 4-7)
straddles the ranks: rows 4-5 on rank 0, rows 6-7 on rank 1.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingTrainer, make_dataset, tiny_config  # noqa: E402

from trl_efficient.rewards import correctness_reward, get_l1_reward  # noqa: E402


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=12 // world,
        num_generations=4,
        max_steps=2,
        rollout_plan="target_length",  # target_length_per left at its default
        target_length_range=[5, 60],
        ddp_find_unused_parameters=False,
    )
    trainer = RecordingTrainer(
        model=model_dir, reward_funcs=[get_l1_reward(), correctness_reward], args=args, train_dataset=make_dataset(48)
    )
    trainer.train()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "target_length_per": args.target_length_per,
                "records": [{k: r[k] for k in ("rewards", "metadata", "prompts_decoded")} for r in trainer.records],
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
