"""Run 2 HBPO training steps (budget prefill subgroups, HBPO reward and advantage) and dump what each rank saw.

Launched by tests/multiprocess/test_multiprocess_hbpo.py with `torchrun --nproc_per_node {1,2}`. The global
generation batch is 12 rows = 3 groups of G=4 with 2 budget subgroups each; with 2 processes each rank holds 6 rows,
so the middle group, and its second budget subgroup, straddle the ranks.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingMixin, ScriptedGenerationMixin, make_dataset, tiny_config  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from trl_efficient.methods.hbpo import HBPOTrainer  # noqa: E402
from trl_efficient.recipes.budget import build_hbpo_reward  # noqa: E402
from trl_efficient.rewards import get_correctness_reward  # noqa: E402


class HBPORecordingTrainer(RecordingMixin, HBPOTrainer, ScriptedGenerationMixin):
    pass


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=12 // world,
        num_generations=4,
        max_steps=2,
        rollout_plan="budget",
        budgets=[8, 64],
        budget_placement="prefill",
        advantage_estimator="hbpo",
        advantage_kwargs={"beta": 4.0, "alpha": 1 / 4096, "l_max": 4096},
        reward_weights=[1.0, 0.0],
        ddp_find_unused_parameters=False,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    trainer = HBPORecordingTrainer(
        model=model_dir,
        reward_funcs=[build_hbpo_reward(args, tokenizer), get_correctness_reward(require_think_close=True)],
        args=args,
        train_dataset=make_dataset(48),
        processing_class=tokenizer,
    )
    trainer.train()
    metrics = {k: v for entry in trainer.state.log_history for k, v in entry.items() if k.startswith("trl_efficient/")}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "records": [
                    {k: r[k] for k in ("rewards", "lengths", "metadata", "advantages", "prompts_decoded")}
                    for r in trainer.records
                ],
                "metrics": metrics,
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
