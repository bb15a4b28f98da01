"""Run 2 training steps with generation in chunks (`generation_chunk_size`) and dump what each rank saw.

Launched by tests/multiprocess/test_multiprocess_chunking.py with `torchrun --nproc_per_node {1,2}`. The global
generation batch is one group of G=16 (8 rows per rank with 2 processes), generated 4 rows per call and trained in
micro-batches of 4 (gradient_accumulation_steps 4 / world), with rollouts scripted by their global row, so both
runs see the same completions.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingMixin, RowScriptedMixin, make_dataset, tiny_config  # noqa: E402

from trl_efficient.rewards import correctness_reward, get_kimi_length_reward  # noqa: E402


class Trainer(RecordingMixin, RowScriptedMixin):
    pass


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=4 // world,
        num_generations=16,
        generation_chunk_size=4,
        max_steps=2,
        learning_rate=1e-2,
        loss_type="dapo",
        ddp_find_unused_parameters=False,
    )
    trainer = Trainer(
        model=model_dir,
        reward_funcs=[correctness_reward, get_kimi_length_reward(warmup_ratio=0.0)],
        args=args,
        train_dataset=make_dataset(48),
    )
    trainer.train()
    logs = [e for e in trainer.state.log_history if "loss" in e]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "calls": trainer.calls,
                "records": [{k: r[k] for k in ("rewards", "lengths", "advantages")} for r in trainer.records],
                "loss": [e["loss"] for e in logs],
                "reward": [e["reward"] for e in logs],
                "policy_sums": [float(p.double().sum()) for p in trainer.model.parameters()],
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
