"""Model cards: offline card content, and a real push through huggingface_hub to a local fake Hub server."""

import os
import subprocess
import sys

from fake_hub import start_fake_hub
from helpers import RecordingTrainer, make_dataset, tiny_config
from huggingface_hub import ModelCard

from trl_efficient.recipes import get_recipe
from trl_efficient.rewards import correctness_reward

HUB_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def test_card_has_method_section_license_and_proposed_defaults(tiny_model_dir, tmp_path):
    trainer = RecordingTrainer(
        model=tiny_model_dir,
        reward_funcs=[correctness_reward],
        args=tiny_config(tmp_path, max_steps=1),
        train_dataset=make_dataset(8),
    )
    trainer.update_card_info(recipe=get_recipe("kimi"), datasets=["gsm8k"])
    trainer.train()
    trainer.create_model_card(model_name="m")
    trainer.create_model_card(model_name="m")  # idempotent: the section is rebuilt, not appended twice
    card = ModelCard.load(os.path.join(tmp_path, "README.md"))
    assert card.data.license == "apache-2.0" and "licence" not in card.data.to_dict()
    assert "trl-efficient" in card.data.tags
    assert card.text.count("## Efficient reasoning with trl-efficient") == 1
    assert "kimi length weight 0.4" in card.text  # a proposed default, labelled as such
    assert "arXiv:2501.12599" in card.text and "huggingface.co/None" not in card.text


def test_push_to_hub_writes_card_and_weights(tiny_model_dir, tmp_path):
    root = tmp_path / "hub"
    server = start_fake_hub(str(root))
    try:
        # huggingface_hub (constants.py) is offline when HF_HUB_OFFLINE *or* TRANSFORMERS_OFFLINE is true, and offline
        # mode blocks every HTTP call, the push to the local fake Hub included: clear both, whatever the caller set.
        env = {k: v for k, v in os.environ.items() if k not in HUB_OFFLINE_VARS}
        env.update(HF_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}", HF_TOKEN="hf_fake")
        script = os.path.join(os.path.dirname(__file__), "push_script.py")
        proc = subprocess.run(
            [sys.executable, script, tiny_model_dir, str(tmp_path / "out")],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        server.shutdown()
    repo = root / "tester" / "tiny-kimi"
    assert (repo / "model.safetensors").exists()
    card = ModelCard.load(repo / "README.md")
    assert card.data.license == "mit"
    assert card.data.base_model == "Qwen/Qwen2.5-0.5B-Instruct"
    assert "## Efficient reasoning with trl-efficient" in card.text and "kimi_length_reward" in card.text
