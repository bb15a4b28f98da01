"""`trl-efficient push` and the trainer's own `push_to_hub`, against the suite's local Hub server on loopback
(tests/fake_hub.py): the files and metadata that arrive, and no token in a card, a log or the training arguments."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from fake_hub import start_fake_hub
from helpers import RecordingTrainer, make_dataset, tiny_config
from huggingface_hub import ModelCard
from huggingface_hub.repocard import metadata_load

from trl_efficient.hub.push import main as push_main
from trl_efficient.recipes import get_recipe
from trl_efficient.rewards import correctness_reward

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# huggingface_hub (constants.py) is offline when HF_HUB_OFFLINE *or* TRANSFORMERS_OFFLINE is true, and offline mode
# blocks every HTTP call, the push to the local fake Hub included: the subprocess clears both, whatever was set.
HUB_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
TRAIN_TOKEN = "hf_TrainArgsSecretToken0123456789"
PUSH_TOKEN = "hf_PushSecretToken9876543210abcd"
BASE = "Qwen/Qwen2.5-0.5B-Instruct"


def _hub_env(server, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in HUB_OFFLINE_VARS}
    env.update(
        HF_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}",
        HF_TOKEN=PUSH_TOKEN,
        HF_HOME=str(tmp_path / "hf_home"),  # no stored login of the machine
        PYTHONPATH=os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]),
    )
    return env


def _run_with_hub(root, tmp_path, *argv, **env):
    """Run `python *argv` against a local Hub server storing repos under `root` (started and shut down here)."""
    server = start_fake_hub(str(root))
    try:
        return subprocess.run(
            [sys.executable, *argv],
            env={**_hub_env(server, tmp_path), **env},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        server.shutdown()


def _push(output_dir, repo_id, root, tmp_path, **env):
    """`trl-efficient push OUTPUT_DIR --repo-id REPO_ID` against a local Hub server storing repos under `root`."""
    return _run_with_hub(
        root, tmp_path, "-m", "trl_efficient.cli", "push", str(output_dir), "--repo-id", repo_id, **env
    )


def _write_eval_results(out, model, accuracy, mean_tokens, num_problems):
    """`out/eval/results.json` as `trl-efficient eval` writes it: one plain-mode gsm8k result."""
    result = {"accuracy": accuracy, "mean_tokens": mean_tokens, "truncated_fraction": 0.0,
              "num_problems": num_problems, "samples_per_problem": 1}  # fmt: skip
    entry = {"model": model, "model_name_or_path": str(out), "mode": "plain", "benchmark": "gsm8k", "result": result}
    os.makedirs(out / "eval")
    (out / "eval" / "results.json").write_text(json.dumps({"results": [entry]}))


def _all_bytes(folder):
    for dirpath, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                yield os.path.relpath(path, folder), f.read()


@pytest.fixture(scope="module")
def trained_run(tiny_model_dir, tmp_path_factory):
    """A one-step kimi run saved as `trl-efficient train` leaves it, with a token in its training arguments."""
    out = tmp_path_factory.mktemp("run") / "tiny-kimi"
    args = tiny_config(out, max_steps=1, hub_token=TRAIN_TOKEN)
    trainer = RecordingTrainer(
        model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(8)
    )
    trainer.update_card_info(recipe=get_recipe("kimi"), datasets=["gsm8k", "gsm8k"], base_model_id=BASE)
    trainer.train()
    trainer.save_model(str(out))
    trainer.create_model_card(model_name="tiny-kimi")
    assert trainer.model_card_error is None
    (out / "trl_efficient_summary.json").write_text(json.dumps({"recipe": "kimi", "model": BASE, "before": None,
                                                                "after": None}))  # fmt: skip
    _write_eval_results(out, "tiny-kimi", accuracy=0.75, mean_tokens=40.5, num_problems=4)
    # EfficientGRPOConfig pickles without the token (its __getstate__); a run saved by plain transformers or TRL
    # (which pickle the whole config, token included) is what push must clean: its training_args.bin replaces ours
    assert torch.load(out / "training_args.bin", weights_only=False).hub_token is None
    from transformers import TrainingArguments

    plain = TrainingArguments(str(out), hub_token=TRAIN_TOKEN, learning_rate=1e-3, use_cpu=True, report_to="none")
    torch.save(plain, out / "training_args.bin")
    assert torch.load(out / "training_args.bin", weights_only=False).hub_token == TRAIN_TOKEN
    return out


def test_push_uploads_model_card_and_eval_without_tokens(trained_run, tmp_path):
    root = tmp_path / "hub"
    proc = _push(trained_run, "tester/tiny-push", root, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    repo = root / "tester" / "tiny-push"
    arrived = dict(_all_bytes(repo))
    for name in ("model.safetensors", "config.json", "tokenizer_config.json", "README.md", "training_args.bin",
                 "trl_efficient_summary.json", "trl_efficient_card.json", "eval/results.json"):  # fmt: skip
        assert name in arrived, sorted(arrived)
    assert not any(name.startswith(("checkpoint-", "runs/")) for name in arrived)
    assert arrived["model.safetensors"] == (trained_run / "model.safetensors").read_bytes()
    # the card's metadata, parsed by huggingface_hub
    meta = metadata_load(repo / "README.md")
    assert meta["base_model"] == BASE and meta["datasets"] == ["openai/gsm8k"]
    # trained offline, and the local Hub has no card for the base: no license invented (the old card said apache-2.0)
    assert "license" not in meta
    card = ModelCard.load(repo / "README.md")
    (result,) = [r for r in card.data.eval_results if r.metric_type == "accuracy"]
    assert (result.dataset_name, result.dataset_type, result.metric_value) == ("gsm8k", "openai/gsm8k", 0.75)
    assert card.data.model_name == "tiny-push" and "model_id = 'tester/tiny-push'" in card.text
    assert "None" not in card.content
    assert json.loads(arrived["trl_efficient_card.json"])["model_id"] == "tester/tiny-push"
    # no token anywhere: any uploaded file, the command's output, the uploaded training arguments
    for secret in (TRAIN_TOKEN, PUSH_TOKEN):
        assert not [name for name, data in arrived.items() if secret.encode() in data]
        assert secret not in proc.stdout and secret not in proc.stderr
    uploaded_args = torch.load(repo / "training_args.bin", weights_only=False)
    assert uploaded_args.hub_token is None and uploaded_args.learning_rate == 1e-3


@pytest.fixture(scope="module")
def lora_run(tiny_model_dir, tmp_path_factory):
    """A one-step LoRA kimi run (TRL's `peft_config`, as `trl-efficient train --use_peft` passes it) saved as
    `trl-efficient train` leaves it: adapter, tokenizer, card data, summary, and `trl-efficient eval` results."""
    peft = pytest.importorskip("peft")
    out = tmp_path_factory.mktemp("lora") / "tiny-kimi-lora"
    lora = peft.LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, target_modules="all-linear")
    trainer = RecordingTrainer(
        model=tiny_model_dir,
        reward_funcs=[correctness_reward],
        args=tiny_config(out, max_steps=1),
        train_dataset=make_dataset(8),
        peft_config=lora,
    )
    trainer.update_card_info(recipe=get_recipe("kimi"), datasets=["gsm8k"])  # a local base: no base_model_id
    trainer.train()
    trainer.save_model(str(out))
    trainer.create_model_card(model_name="tiny-kimi-lora")
    assert trainer.model_card_error is None
    r = {"accuracy": 0.5, "mean_tokens": 30.0, "truncated_fraction": 0.0}
    (out / "trl_efficient_summary.json").write_text(
        json.dumps({"recipe": "kimi", "model": tiny_model_dir, "before": r, "after": {**r, "accuracy": 0.625}})
    )
    _write_eval_results(out, "tiny-kimi-lora", accuracy=0.625, mean_tokens=28.5, num_problems=8)
    names = set(os.listdir(out))
    assert {"adapter_config.json", "adapter_model.safetensors"} <= names and "config.json" not in names, names
    return out


def test_push_lora_adapter_directory(lora_run, tmp_path):
    """The adapter directory of a LoRA run is pushed as an adapter: adapter files, tokenizer, card, evaluation; the
    card's metadata names the adapter's base (its `adapter_config.json`), `library_name: peft` and PEFT's tags."""
    run = tmp_path / "run"
    shutil.copytree(lora_run, run)
    config = json.loads((run / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] != BASE  # trained from the local tiny model: the card has no base
    assert json.loads((run / "trl_efficient_card.json").read_text())["base_model"] is None
    config["base_model_name_or_path"] = BASE  # as after `--model_name_or_path Qwen/...`: the adapter names its base
    (run / "adapter_config.json").write_text(json.dumps(config))
    root = tmp_path / "hub"
    proc = _push(run, "tester/tiny-lora", root, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    repo = root / "tester" / "tiny-lora"
    arrived = dict(_all_bytes(repo))
    for name in ("adapter_config.json", "adapter_model.safetensors", "tokenizer_config.json", "README.md",
                 "trl_efficient_card.json", "trl_efficient_summary.json", "eval/results.json"):  # fmt: skip
        assert name in arrived, sorted(arrived)
    assert "config.json" not in arrived and "model.safetensors" not in arrived
    assert arrived["adapter_model.safetensors"] == (run / "adapter_model.safetensors").read_bytes()
    meta = metadata_load(repo / "README.md")
    assert meta["base_model"] == BASE and meta["library_name"] == "peft"
    assert {"peft", "lora", "transformers", f"base_model:adapter:{BASE}", "trl-efficient"} <= set(meta["tags"])
    card = ModelCard.load(repo / "README.md")
    assert "LoRA adapter (PEFT), not a full model; its base model is [Qwen/Qwen2.5-0.5B-Instruct]" in card.text
    assert "model_id = 'tester/tiny-lora'" in card.text and "kimi" in card.text
    # the before/after table from the run's trl_efficient_summary.json (hub.card.summary_markdown)
    assert "| before | 0.500 | 30.0 | 0.00 |\n| after | 0.625 | 30.0 | 0.00 |" in card.text
    (result,) = [r for r in card.data.eval_results if r.metric_type == "accuracy"]
    assert result.metric_value == 0.625
    assert "None" not in card.content and PUSH_TOKEN not in card.content


def test_merge_lora_run_then_push_the_merged_model(lora_run, tmp_path):
    """`merge --method lora` of a LoRA run copies its card data, so the merged directory pushes with the training
    card plus a "How this model was merged" section, as a full model (`library_name: transformers`)."""
    from trl_efficient.hub.merge import main as merge_main

    merged = tmp_path / "merged"
    assert merge_main(["--method", "lora", "--adapter", str(lora_run), "--output", str(merged)]) == 0
    for name in ("config.json", "model.safetensors", "trl_efficient_card.json", "trl_efficient_summary.json",
                 "trl_efficient_merge.json", "eval/results.json"):  # fmt: skip
        assert (merged / name).is_file(), name
    local = (merged / "README.md").read_text()
    assert "## Efficient reasoning with trl-efficient" in local and "## How this model was merged" in local
    root = tmp_path / "hub"
    proc = _push(merged, "tester/tiny-lora-merged", root, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    repo = root / "tester" / "tiny-lora-merged"
    arrived = dict(_all_bytes(repo))
    for name in ("config.json", "model.safetensors", "tokenizer_config.json", "README.md", "eval/results.json",
                 "trl_efficient_summary.json", "trl_efficient_merge.json"):  # fmt: skip
        assert name in arrived, sorted(arrived)
    assert not any(name.startswith("adapter_") for name in arrived)
    meta = metadata_load(repo / "README.md")
    assert meta["library_name"] == "transformers" and {"merge", "lora", "trl-efficient"} <= set(meta["tags"])
    assert "base_model" not in meta  # the tiny base is local: no base_model entry
    card = ModelCard.load(repo / "README.md")
    text = card.text
    # the training card (recipe, rewards, before/after, quick start with the repo id) ...
    assert "## Efficient reasoning with trl-efficient" in text and "correctness_reward" in text
    assert "| after | 0.625 | 30.0 | 0.00 |" in text and "model_id = 'tester/tiny-lora-merged'" in text
    # ... then how it was merged: the method, formula, the adapter and its parameters
    merge = text.index("## How this model was merged")
    assert merge > text.index("## Efficient reasoning with trl-efficient")
    tail = text[merge:]
    assert "trl-efficient merge --method lora" in tail and "W = W_base + (lora_alpha / r) B A" in tail
    assert f"- adapter: `{lora_run}`" in tail and "- `r`: 4" in tail and "- `lora_alpha`: 8" in tail
    assert "### How it was merged" in tail and "\n# Merged model" not in text
    (result,) = [r for r in card.data.eval_results if r.metric_type == "accuracy"]
    assert result.metric_value == 0.625  # the adapter's evaluation: the merged model computes the same function
    assert "None" not in card.content


def test_push_offline_says_it_needs_the_network(trained_run, tmp_path):
    """HF_HUB_OFFLINE=1 blocks every Hub request: `push` says so in one line, not "model not in the cache"."""
    proc = _push(trained_run, "tester/offline", tmp_path / "hub", tmp_path, HF_HUB_OFFLINE="1")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "trl-efficient push: error: push needs the network and HF_HUB_OFFLINE is set (Hugging Face Hub offline "
        "mode): unset HF_HUB_OFFLINE and push again."
    )
    assert "cache" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "hub" / "tester").exists()  # nothing arrived


def test_push_refuses_a_folder_without_model(tmp_path, capsys):
    (tmp_path / "trl_efficient_summary.json").write_text("{}")
    assert push_main([str(tmp_path), "--repo-id", "tester/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trl-efficient push: error:") and "config.json" in err[0]
    assert "adapter_config.json" in err[0]


def test_trainer_push_to_hub_writes_card_and_weights(tiny_model_dir, tmp_path):
    """Moved from tests/test_model_card.py: TRL's push path (trainer.push_to_hub) with our card."""
    root = tmp_path / "hub"
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "push_script.py")
    proc = _run_with_hub(root, tmp_path, script, tiny_model_dir, str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    repo = root / "tester" / "tiny-kimi"
    assert (repo / "model.safetensors").exists()
    card = ModelCard.load(repo / "README.md")
    assert card.data.license == "mit"
    assert card.data.base_model == BASE
    assert "## Efficient reasoning with trl-efficient" in card.text and "kimi_length_reward" in card.text
    assert "model_id = 'tester/tiny-kimi'" in card.text and PUSH_TOKEN not in card.content


def test_card_data_from_the_summary_alone(tmp_path):
    """A run whose card data is missing still gets a card from `trl_efficient_summary.json`: recipe, base model and
    the before/after table."""
    from trl_efficient.hub.push import load_card_data

    r = {"accuracy": 0.5, "mean_tokens": 100.0, "truncated_fraction": 0.25}
    summary = {"recipe": "hbpo", "model": BASE, "before": r, "after": {**r, "accuracy": 0.625, "mean_tokens": 60.0}}
    (tmp_path / "trl_efficient_summary.json").write_text(json.dumps(summary))
    data = load_card_data(str(tmp_path))
    assert data.recipe == "hbpo" and data.base_model == BASE
    assert "| before | 0.500 | 100.0 | 0.25 |" in data.summary and "| after | 0.625 | 60.0 | 0.25 |" in data.summary


def _sections(text):
    """`{heading: body}` of every Markdown heading outside code fences."""
    out, heading, fence = {}, None, False
    for line in text.splitlines():
        fence ^= line.startswith("```")
        if not fence and line.startswith("#"):
            heading = line
            out[heading] = ""
        elif heading is not None:
            out[heading] += line + "\n"
    return out


def _assert_no_empty_section(text):
    for heading, body in _sections(text).items():
        if not heading.startswith("# "):  # the title is followed by its first section
            assert body.strip() and not body.strip().startswith("#"), heading
    for placeholder in ("(not a layer-wise merge)", "None", "- none", "(none could be loaded)"):
        assert placeholder not in text, placeholder


@pytest.fixture(scope="module")
def licensed_base(tiny_model_dir, tmp_path_factory):
    """The tiny model as a local copy of a Hub model: its card names the Hub base and a license (MIT, not the old
    hard-coded apache-2.0)."""
    base = tmp_path_factory.mktemp("base") / "qwen-base"
    shutil.copytree(tiny_model_dir, base)
    (base / "README.md").write_text(f"---\nbase_model: {BASE}\nlicense: mit\n---\n# a local copy\n")
    return base


@pytest.mark.parametrize(
    "method, options",
    [
        ("uniform", ["--alpha", "0.5"]),
        ("layerwise", ["--ratios", "0.2,0.5,0.8"]),
        ("update-selective", ["--keep", "0.5"]),
    ],
)
def test_full_merge_then_push_with_its_merge_card(licensed_base, trained_run, tmp_path, method, options):
    """train -> merge -> push for the full merges: the merged directory pushes with its merge card; `base_model`
    holds the Hub id the two local models' cards name (once), the license is the base card's."""
    from trl_efficient.hub.merge import main as merge_main

    merged = tmp_path / "merged"
    argv = ["--method", method, "--base", str(licensed_base), "--trained", str(trained_run), *options]
    assert merge_main([*argv, "--output", str(merged)]) == 0
    root = tmp_path / "hub"
    proc = _push(merged, f"tester/tiny-{method}", root, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    repo = root / "tester" / f"tiny-{method}"
    arrived = dict(_all_bytes(repo))
    for name in ("config.json", "model.safetensors", "tokenizer_config.json", "README.md", "trl_efficient_merge.json"):
        assert name in arrived, sorted(arrived)
    meta = metadata_load(repo / "README.md")
    # qwen-base and tiny-kimi are local; both cards name Qwen/Qwen2.5-0.5B-Instruct: one Hub id, no local path
    assert meta["base_model"] == BASE
    assert meta["license"] == "mit" and meta["merge_method"] == method and meta["library_name"] == "transformers"
    assert {"merge", "trl-efficient", method} <= set(meta["tags"])
    text = ModelCard.load(repo / "README.md").text
    assert text.lstrip().startswith(f"# Merged model (`{method}`)")
    assert (
        f"- base model: `{licensed_base}`, a local model whose card names [{BASE}](https://huggingface.co/{BASE})"
        in text
    )
    assert f"- trained model: `{trained_run}`, a local model whose card names [{BASE}]" in text
    assert "License: `mit`, as the card of `qwen-base` states." in text
    assert 'AutoModelForCausalLM.from_pretrained("tester/tiny-' + method + '")' in text  # the repo id, not a path
    assert ("Layer bands" in text) == (method == "layerwise")
    _assert_no_empty_section(text)
    assert "HTTP Request" not in proc.stderr + proc.stdout and "httpx" not in proc.stderr + proc.stdout


def test_merge_of_local_test_models_pushes_without_base_model(tiny_model_dir, tmp_path, monkeypatch):
    """A merge of a `tiny:` model and a local model without card: no `base_model` (no Hub id), the local names in
    the text; no license known until `push --license` sets one. `--debug` shows the HTTP requests the default hides."""
    from trl_efficient.hub.merge import main as merge_main

    monkeypatch.setenv("TRL_EFFICIENT_CACHE", str(tmp_path / "cache"))
    smoke = tmp_path / "smoke"
    shutil.copytree(tiny_model_dir, smoke)  # same shapes as tiny:qwen2-16 (hidden 16, 4 heads)
    merged = tmp_path / "merged"
    argv = ["--method", "uniform", "--base", "tiny:qwen2-16", "--trained", str(smoke), "--output", str(merged)]
    assert merge_main(argv) == 0
    local = (merged / "README.md").read_text()
    assert "base_model" not in metadata_load(merged / "README.md") and "license" not in metadata_load(
        merged / "README.md"
    )
    assert "No license is set: none could be read from the cards of `tiny:qwen2-16` and `smoke`;" in local
    root = tmp_path / "hub"
    proc = _run_with_hub(root, tmp_path, "-m", "trl_efficient.cli", "push", str(merged), "--repo-id", "tester/tiny-avg",
                         "--license", "apache-2.0", "--debug")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "HTTP Request" in proc.stderr  # what the default hides (next test: none without --debug)
    repo = root / "tester" / "tiny-avg"
    meta = metadata_load(repo / "README.md")
    assert "base_model" not in meta and meta["license"] == "apache-2.0"
    text = ModelCard.load(repo / "README.md").text
    assert "- base model: `tiny:qwen2-16`, an offline test model built by trl-efficient (not on the Hub)" in text
    assert f"- trained model: `{smoke}`, a local model (not on the Hub)" in text
    assert "License: `apache-2.0`, as given by whoever published this model." in text
    assert json.loads((repo / "trl_efficient_merge.json").read_text())["license"] == "apache-2.0"
    _assert_no_empty_section(text)


def test_lora_run_local_card_is_the_pushed_card(lora_run, tmp_path):
    """The README.md a LoRA run leaves locally is an adapter's card, as `push` renders it (one code path,
    `hub.card.mark_adapter`): same metadata, same adapter notice."""
    local_meta = metadata_load(lora_run / "README.md")
    local_text = ModelCard.load(lora_run / "README.md").text
    root = tmp_path / "hub"
    proc = _push(lora_run, f"tester/{lora_run.name}", root, tmp_path)  # same name: same `model_name`
    assert proc.returncode == 0, proc.stderr[-3000:]
    pushed_meta = metadata_load(root / "tester" / lora_run.name / "README.md")
    # the fixture wrote its eval results after the card, so only the pushed card has them as model-index (which
    # then holds the model name: huggingface_hub moves `model_name` into it)
    assert pushed_meta["model-index"][0]["name"] == local_meta.pop("model_name") == lora_run.name
    assert {k: v for k, v in pushed_meta.items() if k != "model-index"} == local_meta
    assert local_meta["library_name"] == "peft" and {"peft", "lora", "transformers"} <= set(local_meta["tags"])
    assert "base_model" not in local_meta and "license" not in local_meta  # the local tiny base: neither known
    assert "This repository holds a LoRA adapter (PEFT), not a full model" in local_text
    assert "HTTP Request" not in proc.stderr + proc.stdout
