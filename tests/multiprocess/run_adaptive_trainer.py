"""Train HAPO (trainer-kept prompt history) and A-DLP (accuracy-driven lambda) together for 3 steps and dump what
each rank saw.

Launched by tests/multiprocess/test_multiprocess_adaptive.py with `torchrun --nproc_per_node {1,2}`. The global
generation batch is 12 rows = 3 groups of G=4 over a 3-prompt dataset, so every step revisits every prompt (the
history is read from step 2 on); with 2 processes each rank holds 6 rows and the middle group straddles the ranks.

Usage: run_adaptive_trainer.py MODEL_DIR OUT_DIR
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingTrainer, make_dataset, tiny_config  # noqa: E402

from trl_efficient.rewards import correctness_reward  # noqa: E402
from trl_efficient.rewards.controller import get_adlp_reward  # noqa: E402
from trl_efficient.rewards.history import get_hapo_length_reward  # noqa: E402

# A-DLP settings large enough to move lambda in 3 steps (hand-checked by the test).
ADLP = {"lambda_init": 0.01, "eta": 0.05, "acc_ref": 0.5, "lambda_max": 0.05}


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=12 // world,
        num_generations=4,
        max_steps=3,
        track_prompt_history=True,
        ddp_find_unused_parameters=False,
    )
    trainer = RecordingTrainer(
        model=model_dir,
        reward_funcs=[correctness_reward, get_hapo_length_reward(), get_adlp_reward(**ADLP)],
        args=args,
        train_dataset=make_dataset(3),
    )
    trainer.train()
    metrics = [entry["adlp/lambda"] for entry in trainer.state.log_history if "adlp/lambda" in entry]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "records": [
                    {k: r[k] for k in ("rewards", "lengths", "metadata", "advantages")} for r in trainer.records
                ],
                "state": {key: comp.state_dict() for key, comp in trainer.stateful_components.items()},
                "lambda_logged": metrics,
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
