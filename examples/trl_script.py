from datasets import load_dataset
from transformers import AutoTokenizer

from trl_efficient import get_recipe

model = "Qwen/Qwen2.5-0.5B-Instruct"
recipe = get_recipe("kimi")  # any name `trl-efficient recipes` lists
args = recipe.config(output_dir="qwen-kimi", max_steps=200)  # run preset < recipe < yours
tokenizer = AutoTokenizer.from_pretrained(model)
train_dataset = recipe.prepare_dataset(load_dataset("openai/gsm8k", "main", split="train"), args, tokenizer)
trainer = recipe.trainer(model=model, args=args, train_dataset=train_dataset, processing_class=tokenizer)
trainer.train()
