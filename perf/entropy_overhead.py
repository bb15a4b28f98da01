"""Cost of the generation-time extra passes: the entropy pass (`trl_efficient.methods.entropy.TokenEntropyTrainer`,
used by the recipes `pear` and `canon-entropy`) and SAR's perplexity passes (`trl_efficient.methods.sar.SARTrainer`,
recipe `sar`): seconds per optimizer step of plain TRL `GRPOTrainer` vs `TokenEntropyTrainer` vs `PEARTrainer` vs
`SARTrainer`, same model, data, seed, config and rewards (correctness; PEAR adds its penalty, SAR its alpha * score),
printed with the ratio to plain TRL.

    python perf/entropy_overhead.py [--steps 4] [--model tiny:qwen2-16] [--max-completion-length 64]

The extra cost is one no-grad forward of the local rows per generation batch (no backward): on a real model about a
third of a training step's forward+backward on the same tokens, small next to generation. The first step of each run
is a warm-up and is not timed. SAR (policy scoring, this script's aligned steps, so TRL computes no old log-probs to
reuse) adds two such forwards: the completion after its prompt and after the standalone prompt. Not a test: numbers
depend on the machine (run it on an idle one).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer
from work import StepTimer

from trl_efficient.api import resolve_model
from trl_efficient.methods.entropy import TokenEntropyTrainer
from trl_efficient.methods.pear import PEARTrainer
from trl_efficient.methods.sar import SARTrainer
from trl_efficient.rewards import correctness_reward, get_pear_reward
from trl_efficient.rewards.sar import get_sar_reward
from trl_efficient.trainer import EfficientGRPOConfig


def dataset(n: int = 64) -> Dataset:
    qs = [("What is 6 * 7?", "42"), ("What is 2 + 3?", "5"), ("What is 9 - 2?", "7"), ("What is 3 * 3?", "9")]
    rows = [qs[i % len(qs)] for i in range(n)]
    return Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": q}] for q, _ in rows], "solution": [a for _, a in rows]}
    )


def run(cls, config_cls, rewards, model_name: str, steps: int, max_len: int) -> float:
    model = resolve_model(model_name)
    with tempfile.TemporaryDirectory() as out:
        args = config_cls(
            output_dir=out, per_device_train_batch_size=8, num_generations=4, max_completion_length=max_len,
            max_steps=steps + 1, learning_rate=1e-5, beta=0.0, use_cpu=True, bf16=False, report_to="none",
            save_strategy="no", logging_steps=1, seed=0, gradient_checkpointing=False,
        )  # fmt: skip
        timer = StepTimer()
        trainer = cls(
            model=model, reward_funcs=rewards, args=args, train_dataset=dataset(),
            callbacks=[timer],
        )  # fmt: skip
        trainer.train()
    return statistics.median(timer.durations[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--model", default="tiny:qwen2-16")
    parser.add_argument("--max-completion-length", type=int, default=64)
    a = parser.parse_args()
    plain = run(GRPOTrainer, GRPOConfig, [correctness_reward], a.model, a.steps, a.max_completion_length)
    rows = [("plain TRL GRPOTrainer", plain)]
    for name, cls, rewards in (
        ("TokenEntropyTrainer (canon-entropy)", TokenEntropyTrainer, [correctness_reward]),
        ("PEARTrainer (pear)", PEARTrainer, [correctness_reward, get_pear_reward()]),
        ("SARTrainer (sar, policy)", SARTrainer, [correctness_reward, get_sar_reward()]),
    ):
        rows.append((name, run(cls, EfficientGRPOConfig, rewards, a.model, a.steps, a.max_completion_length)))
    print("| trainer | s/step (median) | ratio to plain TRL |\n|---|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.3f} | {seconds / plain:.2f} |")


if __name__ == "__main__":
    main()
