"""Run 4 training steps with LISA (gamma 1 of the 2 layers, K = 2, seed 1) under DDP and dump what each rank saw.

Launched by tests/multiprocess/test_multiprocess_lisa.py with `torchrun --nproc_per_node {1,2}`, and by
tests/multiprocess/test_deepspeed_lisa.py under `accelerate launch` with DeepSpeed ZeRO-2. The global
generation batch is 12 rows = 3 groups of G=4. Gradient checkpointing is on: transformers then builds DDP with
`find_unused_parameters=False` unless told otherwise, which frozen layers would hang; LISA's config sets it to True.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingTrainer, make_dataset, tiny_config  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from trl_efficient.rewards import correctness_reward, get_kimi_length_reward  # noqa: E402


def _layer_sums(model) -> dict[str, float]:
    return {n: float(p.detach().double().sum()) for n, p in model.named_parameters() if n.startswith("model.layers.")}


class Draws(TrainerCallback):
    """At each step's end: the trainable decoder layers, the layers whose weights the step changed, and the number of
    tensors the optimizer holds state for."""

    def __init__(self):
        self.steps = []

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self.before = _layer_sums(model)

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kwargs):
        trainable = [n for n, p in model.named_parameters() if n.startswith("model.layers.") and p.requires_grad]
        after = _layer_sums(model)
        self.steps.append(
            {
                "layers": sorted({int(n.split(".")[2]) for n in trainable}),
                "moved": sorted({int(n.split(".")[2]) for n in after if after[n] != self.before[n]}),
                "optimizer_tensors": len(optimizer.optimizer.state),
            }
        )


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=12 // world,
        num_generations=4,
        max_steps=4,
        learning_rate=1e-2,
        gradient_checkpointing=True,
        lisa_activated_layers=1,
        lisa_interval_steps=2,
        seed=1,  # draws layer 0 for steps 0-1, layer 1 for steps 2-3 (seed 0 draws layer 1 twice)
    )
    draws = Draws()
    trainer = RecordingTrainer(
        model=model_dir,
        reward_funcs=[correctness_reward, get_kimi_length_reward(warmup_ratio=0.0)],
        args=args,
        train_dataset=make_dataset(48),
        callbacks=[draws],
    )
    initial = {n: float(p.double().sum()) for n, p in trainer.model.named_parameters()}
    trainer.train()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "find_unused_parameters": args.ddp_find_unused_parameters,
                "records": [{k: r[k] for k in ("rewards", "lengths", "advantages")} for r in trainer.records],
                "draws": draws.steps,
                "lisa": trainer.lisa.state_dict(),
                "initial_sums": initial,
                "sums": {n: float(p.double().sum()) for n, p in trainer.model.named_parameters()},
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
