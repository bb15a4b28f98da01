"""Train every group-level method of the advantage family for a few steps and dump what each rank saw.

Launched by tests/multiprocess/test_multiprocess_advantage.py with `torchrun --nproc_per_node {1,2}`. Each method's
global generation batch is 12 rows = 3 groups of G=4; with 2 processes each rank holds 6 rows, so the middle group
straddles the ranks (and, with dynamic-sampling refill, rows move between ranks).

Usage: run_advantage_trainer.py MODEL_DIR OUT_DIR [METHOD ...]   (default: every method in METHODS)
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from helpers import RecordingMixin, ScriptedGenerationMixin, make_dataset, tiny_config  # noqa: E402

from trl_efficient.methods.dler import DLERTrainer  # noqa: E402
from trl_efficient.methods.drpo import DRPOTrainer  # noqa: E402
from trl_efficient.methods.gfpo import GFPOTrainer  # noqa: E402
from trl_efficient.recipes.advantage import build_gdpo_length_reward  # noqa: E402
from trl_efficient.rewards import correctness_reward, get_kimi_length_reward  # noqa: E402
from trl_efficient.rewards.lead import get_lead_reward  # noqa: E402
from trl_efficient.trainer import EfficientGRPOTrainer  # noqa: E402


def closed_reward(completions, **kwargs):
    """1 when the thinking part is closed: scripted groups are often 3/4 or 4/4 'solved', so DA-DLER cuts."""
    return [1.0 if "</think>" in c[0]["content"] else 0.0 for c in completions]


def recording(cls):
    class Recording(RecordingMixin, cls, ScriptedGenerationMixin):
        def _record_batch(self, batch, trainer):
            super()._record_batch(batch, trainer)
            scores = batch.extras.get("drpo_seq_logp")
            if scores is not None:
                self.records[-1]["scores"] = scores.tolist()

    return Recording


KIMI = get_kimi_length_reward(warmup_ratio=0.0)
GFPO = dict(completion_filter="gfpo")
# method -> (trainer class, reward functions, config overrides)
METHODS = {
    "gfpo": (
        GFPOTrainer,
        [correctness_reward, KIMI],
        {**GFPO, "advantage_estimator": "gfpo", "advantage_kwargs": {"k": 2}},
    ),
    "gfpo_adaptive": (
        GFPOTrainer,
        [correctness_reward, KIMI],
        {
            **GFPO,
            "advantage_estimator": "gfpo_adaptive",
            "max_steps": 3,
            "advantage_kwargs": {"k_by_quartile": [4, 3, 2, 2], "warmup_k": 4, "warmup_steps": 1, "warmup_prompts": 1},
        },
    ),
    "dler_refill": (
        DLERTrainer,
        [correctness_reward],
        {
            "advantage_estimator": "dler",
            "advantage_kwargs": {"correct_boost": 0.1},
            "max_steps": 3,
            "completion_filter": "dynamic_sampling",
            "filter_kwargs": {"max_generation_batches": 4},
        },
    ),
    "da_dler": (
        DLERTrainer,
        [closed_reward],
        {
            "advantage_estimator": "da_dler",
            "advantage_kwargs": {"truncate_to": 8},
            "correctness_reward": "closed_reward",
            "completion_filter": "dynamic_sampling",
            "filter_kwargs": {"max_generation_batches": 3},
        },
    ),
    "drpo": (DRPOTrainer, [correctness_reward], {"advantage_estimator": "drpo", "loss_type": "grpo"}),
    "grpo_lead": (EfficientGRPOTrainer, [get_lead_reward()], {"advantage_estimator": "grpo_lead"}),
    "canon": (EfficientGRPOTrainer, [correctness_reward], {"advantage_estimator": "canon"}),
    "gdpo": (EfficientGRPOTrainer, None, {"multi_objective_aggregation": "normalize_then_sum"}),
}
KEYS = ("rewards", "lengths", "metadata", "advantages", "completion_mask_sums", "num_items_in_batch", "prompts_decoded")


def run(method: str, model_dir: str, out_dir: str, world: int) -> dict:
    cls, rewards, overrides = METHODS[method]
    kwargs = {"max_steps": 2, **overrides}
    args = tiny_config(
        os.path.join(out_dir, method),
        per_device_train_batch_size=12 // world,
        num_generations=4,
        ddp_find_unused_parameters=False,
        **kwargs,
    )
    if rewards is None:  # GDPO: correctness + the gated length reward (L_limit = max_completion_length // 2 = 24)
        rewards = [correctness_reward, build_gdpo_length_reward(args, None)]
    trainer = recording(cls)(model=model_dir, reward_funcs=rewards, args=args, train_dataset=make_dataset(48))
    trainer.train()
    metrics = {}  # every logged value of the trl_efficient/* metrics, in order
    for entry in trainer.state.log_history:
        for key, value in entry.items():
            if key.startswith("trl_efficient/"):
                metrics.setdefault(key, []).append(value)
    state = {key: comp.state_dict() for key, comp in trainer.stateful_components.items()}
    records = [{k: r[k] for k in (*KEYS, "scores") if k in r} for r in trainer.records]
    return {"records": records, "metrics": metrics, "state": state}


def main(model_dir: str, out_dir: str, methods: list[str]) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    result = {"world": world, "methods": {m: run(m, model_dir, out_dir, world) for m in methods or list(METHODS)}}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
    from helpers import finish_distributed  # noqa: E402

    finish_distributed()
