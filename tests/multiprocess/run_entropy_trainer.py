"""Train CANON's entropy variant (TokenEntropyTrainer) for 2 steps and dump what each rank saw.

Launched by tests/multiprocess/test_multiprocess_entropy.py with `torchrun --nproc_per_node {1,2}`: 12 rows = 3
groups of G=4; with 2 processes each rank holds 6 rows, so the middle group straddles the ranks.

Usage: run_entropy_trainer.py MODEL_DIR OUT_DIR
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingMixin, ScriptedGenerationMixin, make_dataset, tiny_config  # noqa: E402

from trl_efficient.methods.entropy import ENTROPY_COLUMN, TokenEntropyTrainer  # noqa: E402
from trl_efficient.rewards import correctness_reward  # noqa: E402


class Recording(RecordingMixin, TokenEntropyTrainer, ScriptedGenerationMixin):
    def _record_batch(self, batch, trainer):
        super()._record_batch(batch, trainer)
        self.records[-1]["entropy"] = batch.extras[ENTROPY_COLUMN].tolist()


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        os.path.join(out_dir, "canon_entropy"),
        per_device_train_batch_size=12 // world,
        num_generations=4,
        ddp_find_unused_parameters=False,
        max_steps=2,
        advantage_estimator="canon",
        advantage_kwargs={"metric": "entropy"},
    )
    trainer = Recording(model=model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(48))
    trainer.train()
    keys = ("rewards", "lengths", "entropy", "advantages", "prompts_decoded")
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"world": world, "records": [{k: r[k] for k in keys} for r in trainer.records]}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
