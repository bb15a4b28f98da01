"""trl-efficient rewards inside a plain TRL GRPOTrainer (no trl-efficient trainer).

python examples/plain_trl_rewards.py                       # offline: tiny random model, bundled GSM8K, CPU
python examples/plain_trl_rewards.py Qwen/Qwen2.5-1.5B-Instruct
"""

import sys

from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from trl_efficient.data.loaders import load_math_dataset
from trl_efficient.rewards import correctness_reward, get_kimi_length_reward, get_shorter_better_reward
from trl_efficient.testing.tiny import eos_bias_generation_kwargs, resolve_model_name

model = resolve_model_name(sys.argv[1] if len(sys.argv) > 1 else "tiny:qwen2-16")
tiny = model != (sys.argv[1] if len(sys.argv) > 1 else None)
G = 4
args = GRPOConfig(
    output_dir="outputs/plain-trl",
    num_generations=G,
    per_device_train_batch_size=G,
    max_completion_length=32 if tiny else 1024,
    max_steps=3 if tiny else 200,
    reward_weights=[1.0, 0.4, 0.5],
    use_cpu=tiny,
    bf16=not tiny,
    gradient_checkpointing=False,
    report_to="none",
    # a random tiny model rarely samples EOS: bias it (transformers generation only)
    generation_kwargs=eos_bias_generation_kwargs(AutoTokenizer.from_pretrained(model), 3.0) if tiny else None,
)
trainer = GRPOTrainer(
    model=model,
    reward_funcs=[
        correctness_reward,
        get_kimi_length_reward(num_generations=G),  # whole-group rewards need G in a plain trainer
        get_shorter_better_reward(num_generations=G),
    ],
    args=args,
    train_dataset=load_math_dataset("gsm8k", split="train", limit=64 if tiny else None),
)
trainer.train()
