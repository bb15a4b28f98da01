"""Run in a subprocess with HF_ENDPOINT pointing at tests/fake_hub.py: train one step and push with a card."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from helpers import RecordingTrainer, make_dataset, tiny_config  # noqa: E402

from trl_efficient.recipes import get_recipe  # noqa: E402


def main(model_dir, out_dir):
    recipe = get_recipe("kimi")
    args = tiny_config(out_dir, max_steps=1, push_to_hub=True, hub_model_id="tester/tiny-kimi", hub_strategy="end")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    funcs, weights = recipe.build_reward_funcs(args, tok)
    args.reward_weights = weights
    trainer = RecordingTrainer(model=model_dir, reward_funcs=funcs, args=args, train_dataset=make_dataset(8))
    trainer.update_card_info(recipe=recipe, base_model_id="Qwen/Qwen2.5-0.5B-Instruct", datasets=["gsm8k"])
    trainer.train()
    trainer.push_to_hub(license="mit")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
