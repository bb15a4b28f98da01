"""Run 2 training steps of a group-heavy configuration and dump what each rank saw.

Launched by tests/dist/test_multiprocess.py with `torchrun --nproc_per_node {1,2}`. The global generation batch is
12 rows = 3 groups of G=4; with 2 processes each rank holds 6 rows, so the middle group straddles the ranks.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingTrainer, make_dataset, tiny_config  # noqa: E402

from trl_efficient.rewards import (  # noqa: E402
    correctness_reward,
    get_kimi_length_reward,
    get_shorter_better_reward,
)


def main(model_dir: str, out_dir: str, estimator: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=12 // world,
        num_generations=4,
        max_steps=2,
        rollout_plan="budget",
        budgets=[24, 48],
        budget_placement="user",
        budget_template=" Use at most {budget} tokens.",
        budget_hard_cap=True,
        advantage_estimator=estimator,
        completion_filter="zero_std",
        track_prompt_history=True,
        ddp_find_unused_parameters=False,
        # DeepSpeed on CPU needs the gloo backend forced (docs/testing.md §6)
        ddp_backend="gloo" if os.environ.get("ACCELERATE_USE_DEEPSPEED") == "true" else None,
    )
    trainer = RecordingTrainer(
        model=model_dir,
        reward_funcs=[
            correctness_reward,
            get_kimi_length_reward(warmup_ratio=0.0),
            get_shorter_better_reward(),
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
                    {k: r[k] for k in ("rewards", "lengths", "metadata", "advantages", "completion_mask_sums")}
                    for r in trainer.records
                ],
                "history": trainer.stateful_components["prompt_history"].state_dict(),
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
