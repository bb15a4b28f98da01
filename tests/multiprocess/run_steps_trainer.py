"""Train with the Step Pruner and GRSP rewards for up to 3 steps and dump what each rank saw.

Launched by tests/multiprocess/test_multiprocess_steps.py with `torchrun --nproc_per_node {1,2}`. The global
generation batch is 12 rows = 3 groups of G=4; with 2 processes each rank holds 6 rows, so the middle group straddles
the ranks. The scripted completions are sentences (`"so two."`), so the step counts vary within a group.

Usage: run_steps_trainer.py MODEL_DIR OUT_DIR
"""

import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import helpers  # noqa: E402
from helpers import RecordingTrainer, make_dataset, tiny_config  # noqa: E402

from trl_efficient.rewards import correctness_reward  # noqa: E402
from trl_efficient.rewards.steps import get_grsp_reward, get_step_pruner_reward  # noqa: E402

WORDS = ["so", "then", "wait", "check", "two", "five"]


def sentence_text(step: int, global_index: int, prompt_ids) -> str:
    rng = random.Random(f"{step}:{global_index}:{sum(prompt_ids)}:{len(prompt_ids)}")
    steps = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5))) + "." for _ in range(rng.randint(1, 6))]
    answer = rng.choice(["42", "5", "7", "9"])
    return f"<think> {' '.join(steps)} </think> The final answer is \\boxed{{{answer}}}"


helpers.scripted_text = sentence_text  # ScriptedGenerationMixin reads it from the helpers module


def main(model_dir: str, out_dir: str) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    args = tiny_config(
        out_dir,
        per_device_train_batch_size=12 // world,
        num_generations=4,
        max_steps=3,
        ddp_find_unused_parameters=False,
    )
    pruner = get_step_pruner_reward(
        segmenter="sentences", segment_unit="words", max_step_length=4, stop_window=2, stop_check_every=1,
        stop_patience=1,
    )  # fmt: skip
    grsp = get_grsp_reward(segmenter="sentences", segment_unit="words", bucket_bounds=(2, 3))
    trainer = RecordingTrainer(
        model=model_dir, reward_funcs=[correctness_reward, pruner, grsp], args=args, train_dataset=make_dataset(48)
    )
    trainer.train()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "world": world,
                "records": [{k: r[k] for k in ("rewards", "lengths", "advantages")} for r in trainer.records],
                "state": pruner.state_dict(),
                "global_step": trainer.state.global_step,
            },
            f,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
