"""Run 4 LAPO training steps (2 of stage 1, 2 of stage 2) and dump what each rank saw and its memory.

Launched by tests/multiprocess/test_multiprocess_lapo.py with `torchrun --nproc_per_node {1,2}`. The global
generation batch is 12 rows = 3 groups of G=4 (the 3 prompts of the dataset, so every step revisits each prompt);
with 2 processes each rank holds 6 rows, so the middle group straddles the ranks: its [P30, P70] band, its median and
the memory update must use all 4 rollouts.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingMixin, ScriptedGenerationMixin, make_dataset, tiny_config  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from trl_efficient.methods.lapo import LAPOTrainer  # noqa: E402
from trl_efficient.recipes.lapo import build_lapo_reward  # noqa: E402
from trl_efficient.rewards import get_correctness_reward  # noqa: E402


class LAPORecordingTrainer(RecordingMixin, LAPOTrainer, ScriptedGenerationMixin):
    def _record_batch(self, batch, trainer):
        super()._record_batch(batch, trainer)
        self.records[-1]["memory_before_update"] = self.lapo_memory.state_dict()


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=12 // world,
        num_generations=4,
        max_steps=4,
        rollout_plan="lapo",
        rollout_plan_kwargs={"stage1_fraction": 0.5, "unknown_length": 4096, "sigma": 12, "band_margin": 10},
        reward_weights=[1.0, 0.0],
        shuffle_dataset=False,
        ddp_find_unused_parameters=False,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    trainer = LAPORecordingTrainer(
        model=model_dir,
        reward_funcs=[build_lapo_reward(args, tokenizer), get_correctness_reward()],
        args=args,
        train_dataset=make_dataset(3),
        processing_class=tokenizer,
    )
    trainer.train()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "records": [
                    {
                        k: r[k]
                        for k in (
                            "rewards",
                            "lengths",
                            "metadata",
                            "advantages",
                            "prompts_decoded",
                            "memory_before_update",
                        )
                    }
                    for r in trainer.records
                ],
                "memory": trainer.lapo_memory.state_dict(),
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
