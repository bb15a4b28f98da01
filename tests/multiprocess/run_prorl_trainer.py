"""Run 4 training steps with ProRL's reference resets and dump what each rank saw.

Launched by tests/multiprocess/test_multiprocess_prorl.py with `torchrun --nproc_per_node {1,2}`. The global
generation batch is 12 rows = 3 groups of G=4 (the middle group straddles the ranks with 2 processes); KL with
beta 0.1; resets every 2 steps and on a plateau of the logged training reward (patience 1).
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingTrainer, make_dataset, tiny_config  # noqa: E402

from trl_efficient.rewards import correctness_reward, get_kimi_length_reward  # noqa: E402


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=12 // world,
        num_generations=4,
        max_steps=4,
        beta=0.1,
        learning_rate=1e-2,
        ref_reset_steps=2,
        ref_reset_metric="reward",
        ref_reset_patience=1,
        ddp_find_unused_parameters=False,
    )
    trainer = RecordingTrainer(
        model=model_dir,
        reward_funcs=[correctness_reward, get_kimi_length_reward(warmup_ratio=0.0)],
        args=args,
        train_dataset=make_dataset(48),
    )
    trainer.train()
    logs = [e for e in trainer.state.log_history if "kl" in e]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "records": [{k: r[k] for k in ("rewards", "lengths", "advantages")} for r in trainer.records],
                "kl": [e["kl"] for e in logs],
                "loss": [e["loss"] for e in logs],
                "reward": [e["reward"] for e in logs],
                "reset": trainer.reference_reset.state_dict(),
                "ref_sums": [float(p.double().sum()) for p in trainer.ref_model.parameters()],
                "policy_sums": [float(p.double().sum()) for p in trainer.model.parameters()],
                "optimizer_steps": sorted({int(s["step"]) for s in trainer.optimizer.state.values()}),
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
