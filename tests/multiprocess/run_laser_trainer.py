"""Run 2 training steps of LASER-DE (monitor every step) and dump what each rank saw.

Launched by tests/multiprocess/test_multiprocess_laser.py with `torchrun --nproc_per_node {1,2}`. Training rollouts
are scripted (12 rows = 3 groups of G=4 per step; with 2 processes the middle group straddles the ranks); the
monitoring pass generates for real with the model (6 prompts x 2 rollouts, 3 chunks of 2 prompts: rank 0 generates
chunks 0 and 2, rank 1 chunk 1).
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingTrainer, make_dataset, tiny_config  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from trl_efficient.methods.laser import LaserMonitor, get_laser_d_reward  # noqa: E402


class MonitorLog(LaserMonitor):
    """Keeps a copy of the state after every pass."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.history = []

    def apply_records(self, records, step):
        super().apply_records(records, step)
        self.history.append({"step": step, "records": [list(map(list, r)) for r in records], **self.state_dict()})


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    tok = AutoTokenizer.from_pretrained(model_dir)
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=12 // world,
        num_generations=4,
        max_steps=2,
        max_completion_length=24,
        generation_kwargs={"sequence_bias": [[[tok.eos_token_id], 3.0]]},
        ddp_find_unused_parameters=False,
    )
    monitor = MonitorLog(
        monitor_interval=1, monitor_prompts=6, monitor_rollouts=2, grid_lower=4, grid_step=4, batch_size=4
    )
    trainer = RecordingTrainer(
        model=model_dir,
        reward_funcs=[get_laser_d_reward(exploration=True, monitor=monitor)],
        args=args,
        train_dataset=make_dataset(48),
    )
    trainer.train()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "records": [{k: r[k] for k in ("rewards", "lengths", "advantages")} for r in trainer.records],
                "passes": monitor.history,
                "state": monitor.state_dict(),
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
