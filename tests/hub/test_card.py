"""Model cards (`trl_efficient.hub.card`): metadata parsed back with huggingface_hub, each field checked, for a Hub
base model and for local ones; recipe-specific hyperparameters and prompting modes; model-index from an eval table."""

import json
import os
import re
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset
from helpers import RecordingTrainer, make_dataset, tiny_cli_args, tiny_config
from huggingface_hub import ModelCard
from huggingface_hub.repocard import metadata_load

from trl_efficient.hub.card import (
    CARD_DATA_FILE,
    SECTION_MARKER,
    CardData,
    ModelCardInfo,
    finalize_model_card,
    render_card,
    summary_markdown,
)
from trl_efficient.prompts import (
    HBPO_BUDGETS,
    HBPO_MINIMAL_PROMPT,
    HBPO_TEMPLATE,
    L1_TARGETS,
    l1_instruction,
    saber_mode_prompts,
)
from trl_efficient.recipes import get_recipe
from trl_efficient.rewards import correctness_reward
from trl_efficient.trainer.config import build_rollout_plan

BASE = "Qwen/Qwen2.5-0.5B-Instruct"
BUDGET_FIELDS = ("budgets", "budget_placement", "budget_template", "budget_hard_cap")
TARGET_FIELDS = ("target_length_range", "target_length_mode", "target_length_per")


def _trainer(
    recipe_name, tmp_path, tokenizer, base_model_id=None, model_path="/nonexistent/x", dataset=None,
    recipe_kwargs=None, **cfg,
):  # fmt: skip
    """Just what `finalize_model_card` reads from an `EfficientGRPOTrainer`, built from the recipe as the CLI does."""
    recipe = get_recipe(recipe_name)
    args = tiny_config(tmp_path, **{**recipe.config_overrides, **cfg})
    if recipe_kwargs is not None:  # handed to the recipe's data preparation, as api.training.run_training does
        dataset = recipe.apply_prepare_dataset(dataset, args, tokenizer, **recipe_kwargs)
    funcs, weights = recipe.build_reward_funcs(args, tokenizer)
    return SimpleNamespace(
        args=args,
        card_info=ModelCardInfo(recipe=recipe, datasets=["gsm8k", "gsm8k"], base_model_id=base_model_id),
        rollout_plan=build_rollout_plan(args),
        reward_funcs=funcs,
        reward_func_names=[getattr(f, "__name__", type(f).__name__) for f in funcs],
        reward_weights=torch.tensor(weights),
        model=SimpleNamespace(config=SimpleNamespace(_name_or_path=model_path)),
        train_dataset=dataset,
    )


def _write_card(trainer, tmp_path, **kwargs):
    path = os.path.join(tmp_path, "README.md")
    ModelCard("---\nlicence: license\n---\n# TRL's card\n").save(path)  # TRL writes a card first
    finalize_model_card(trainer, path, **kwargs)
    return path, ModelCard.load(path)


def _hyper_section(text):
    return text.split("### Hyperparameters used by this recipe")[1].split("###")[0]


def _urls(text):
    return set(re.findall(r"https?://[^\s)\]}>'\"]+", text))


def test_hub_base_card_metadata_fields(tmp_path, tiny_tokenizer):
    path, card = _write_card(_trainer("kimi", tmp_path, tiny_tokenizer, base_model_id=BASE), tmp_path)
    meta = metadata_load(path)
    assert meta["base_model"] == BASE and card.data.base_model == BASE
    # the base is a Hub id whose card is not in the (offline) cache: no license invented, and the card says so
    assert "license" not in meta and "licence" not in meta
    assert (
        "No license is set: none could be read from the card of `Qwen/Qwen2.5-0.5B-Instruct`; check the terms of "
        "the models it derives from; `trl-efficient push --license <id>` sets one." in card.text
    )
    assert meta["datasets"] == ["openai/gsm8k"]  # the Hub id of the training data, once
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "text-generation"
    assert {"trl", "grpo", "trl-efficient", "efficient-reasoning"} <= set(meta["tags"])
    assert "model-index" not in meta  # no evaluation results: none invented
    text = card.text
    assert text.count(SECTION_MARKER) == 1 and "TRL's card" not in text
    assert f"fine-tuned version of [{BASE}](https://huggingface.co/{BASE})" in text
    assert "None" not in card.content and "time machine" not in text and "DeepSeekMath" not in text
    # the recipe, its paper with one BibTeX entry, TRL's citation; only URLs that exist
    assert "`kimi`" in text and "Kimi k1.5 length penalty" in text
    assert "[arXiv:2501.12599](https://arxiv.org/abs/2501.12599)" in text
    bib = re.findall(r"```bibtex\n(.*?)```", text, flags=re.DOTALL)
    assert len(bib) == 2 and "eprint        = {2501.12599}" in bib[0] and "vonwerra2020trl" in bib[1]
    assert _urls(card.content) == {
        f"https://huggingface.co/{BASE}",
        "https://arxiv.org/abs/2501.12599",
        "https://github.com/huggingface/trl",
    }
    # the datasets appear once; kimi uses no budget, no target length
    assert "| Datasets | gsm8k |" in text
    hyper = _hyper_section(text)
    assert "`learning_rate`: `0.001`" in hyper and "`num_generations`: `4`" in hyper
    assert not any(f"`{f}`" in text for f in (*BUDGET_FIELDS, *TARGET_FIELDS, "advantage_kwargs"))
    assert "kimi length weight 0.4" in text  # a proposed default, labelled as such
    assert "`kimi_length_reward` (0.4)" in text
    # the quick start prompts with the math instruction of training
    assert "Please reason step by step, and put your final answer within \\\\boxed{}." in text
    # the card data is saved for `trl-efficient push`, and round-trips
    data = CardData.load(os.path.join(tmp_path, CARD_DATA_FILE))
    assert data.recipe == "kimi" and data.base_model == BASE and data.papers == ["2501.12599"]


def test_local_base_with_its_own_card_and_without(tmp_path, tiny_tokenizer):
    local = tmp_path / "my-sft-model"
    local.mkdir()
    ModelCard("---\nbase_model: Qwen/Qwen3-0.6B\nlicense: mit\n---\n# sft\n").save(local / "README.md")
    out = tmp_path / "out1"
    path, card = _write_card(_trainer("grpo", out, tiny_tokenizer, model_path=str(local)), out)
    meta = metadata_load(path)
    assert meta["base_model"] == "Qwen/Qwen3-0.6B"
    assert "through the local model `my-sft-model`" in card.text
    # the license the base model's own card states (read offline from the local directory), and where it came from
    assert meta["license"] == "mit" and "License: `mit`, as the card of `my-sft-model` states." in card.text
    # an explicit license (push --license, push_to_hub(license=...)) wins over the base card's
    path, card = _write_card(_trainer("grpo", out, tiny_tokenizer, model_path=str(local)), out, license="gpl-3.0")
    assert metadata_load(path)["license"] == "gpl-3.0" and "License: `gpl-3.0`, as given by" in card.text

    bare = tmp_path / "bare-model"
    bare.mkdir()
    out = tmp_path / "out2"
    path, card = _write_card(_trainer("grpo", out, tiny_tokenizer, model_path=str(bare)), out)
    meta = metadata_load(path)
    assert "base_model" not in meta and "license" not in meta and "None" not in card.content
    assert "a local model (`bare-model`) that is not on the Hugging Face Hub" in card.text
    assert "No license is set: none could be read from the card of `bare-model`;" in card.text
    assert _urls(card.content) == {"https://arxiv.org/abs/2402.03300", "https://github.com/huggingface/trl"}


def test_model_index_from_eval_table(tmp_path, tiny_tokenizer):
    def entry(model, path, mode, bench, acc, tokens):
        result = {"accuracy": acc, "mean_tokens": tokens, "truncated_fraction": 0.25, "num_problems": 8,
                  "samples_per_problem": 2}  # fmt: skip
        return {"model": model, "model_name_or_path": path, "mode": mode, "benchmark": bench, "result": result}

    out = tmp_path / "run"
    os.makedirs(out / "eval")
    results = [
        entry("base", BASE, "plain", "gsm8k", 0.5, 300.0),
        entry("run", str(out), "plain", "gsm8k", 0.625, 120.5),
        entry("run", str(out), "plain", "math500", 0.25, 410.0),
    ]
    (out / "eval" / "results.json").write_text(json.dumps({"results": results}))
    path, card = _write_card(_trainer("kimi", out, tiny_tokenizer, base_model_id=BASE), out)
    got = {(r.dataset_name, r.dataset_type, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert got == {
        ("gsm8k", "openai/gsm8k", "accuracy"): 0.625,
        ("gsm8k", "openai/gsm8k", "mean_tokens"): 120.5,
        ("math500", "HuggingFaceH4/MATH-500", "accuracy"): 0.25,
        ("math500", "HuggingFaceH4/MATH-500", "mean_tokens"): 410.0,
    }  # only this model's rows; the base's row is in the table below, not in model-index
    meta = metadata_load(path)
    assert meta["model-index"][0]["name"] == "run" and len(meta["model-index"][0]["results"]) == 2
    assert "| base | plain | gsm8k | 8x2 | 0.500 | 300.0 | 0.250 |" in card.text
    assert "| run | plain | gsm8k | 8x2 | 0.625 | 120.5 | 0.250 |" in card.text


def test_hbpo_card_prompts_each_budget_and_quickstart_runs(tmp_path, tiny_tokenizer, tiny_model_dir):
    trainer = _trainer("hbpo", tmp_path, tiny_tokenizer, base_model_id=BASE)
    path, card = _write_card(trainer, tmp_path)
    text = card.text
    for budget in HBPO_BUDGETS:
        assert repr({"prefill": HBPO_TEMPLATE.format(budget=budget)}) in text
    assert repr({"prefill": HBPO_MINIMAL_PROMPT}) in text
    hyper = _hyper_section(text)
    assert "`budgets`: `[512, 1024, 2048, 2560]`" in hyper and '`budget_placement`: `"prefill"`' in hyper
    assert '"variant": "paper"' in hyper and '`loss_type`: `"dapo"`' in hyper
    assert not any(f"`{f}`" in hyper for f in TARGET_FIELDS)
    assert "arXiv:2507.15844" in text and "eprint        = {2507.15844}" in text
    # the quick start is runnable: point it at a tiny local model and execute it (prefill mode, 4 new tokens)
    data = CardData.load(os.path.join(tmp_path, CARD_DATA_FILE))
    data.model_id, data.max_new_tokens = tiny_model_dir, 4
    code = re.search(r"```python\n(.*?)```", render_card(data).text, flags=re.DOTALL).group(1)
    scope = {}
    exec(compile(code, "quickstart", "exec"), scope)  # noqa: S102 (our own generated code)
    prompt = scope["build_prompt"]("2 + 2?", mode="budget 1024")
    assert prompt.endswith(HBPO_TEMPLATE.format(budget=1024)) and "2 + 2?" in prompt


def test_l1_max_card_lists_target_lengths_with_exact_text(tmp_path, tiny_tokenizer):
    _, card = _write_card(_trainer("l1-max", tmp_path, tiny_tokenizer, base_model_id=BASE), tmp_path)
    text = card.text
    for target in L1_TARGETS:  # mixed mode: Exact and Max instructions
        assert repr({"user_suffix": l1_instruction(target, "exact")}) in text
        assert repr({"user_suffix": l1_instruction(target, "max")}) in text
    hyper = _hyper_section(text)
    assert '`target_length_mode`: `"mixed"`' in hyper and "`target_length_range`: `[100, 4000]`" in hyper
    assert not any(f"`{f}`" in hyper for f in BUDGET_FIELDS)


@pytest.mark.parametrize(("low", "high", "offered"), [(32, 128, (32, 64, 96, 128)), (300, 1500, (512, 1024))])
def test_l1_card_offers_the_targets_the_run_trained_on(low, high, offered, tmp_path, tiny_tokenizer):
    """Issue 36 item 4: a run trained on targets of 32-128 tokens was offered L1's 512-3,600-token evaluation targets.
    The card offers L1_TARGETS inside the trained range when two or more lie in it (300-1500: 512 and 1024), else
    four targets evenly spaced over it, ends included (32 + 96 * i / 3 = 32, 64, 96, 128), and states the range."""
    trainer = _trainer("l1-exact", tmp_path, tiny_tokenizer, base_model_id=BASE, target_length_range=[low, high])
    _, card = _write_card(trainer, tmp_path)
    text = card.text
    for target in offered:
        assert repr({"user_suffix": l1_instruction(target, "exact")}) in text
    for target in set(L1_TARGETS) - set(offered):  # none the run could not have drawn
        assert l1_instruction(target, "exact") not in text
    assert f"from the integers [{low}, {high}] (`target_length_range`)" in text
    assert "a target outside it was never trained" in text


def _bingo_card(tmp_path, tokenizer, monkeypatch, recipe_kwargs):
    for var in ("TRL_EFFICIENT_BINGO_SCORER", "TRL_EFFICIENT_BINGO_REFERENCE", "TRL_EFFICIENT_BINGO_KWARGS"):
        monkeypatch.delenv(var, raising=False)
    trainer = _trainer("bingo", tmp_path, tokenizer, base_model_id=BASE, recipe_kwargs=recipe_kwargs)
    _, card = _write_card(trainer, tmp_path)
    row = next(r for r in CardData.load(os.path.join(tmp_path, CARD_DATA_FILE)).rewards if "bingo" in r["name"])
    return card.text, row["kwargs"]


def test_bingo_card_states_the_scorer_the_run_used(tmp_path, tiny_tokenizer, tiny_model_dir, monkeypatch):
    """Issue 36 item 4: the card named the LLMLingua-2 scorer when another was given, and omitted the scorer
    settings. A self-information scorer, a threshold and scorer options given as `recipe_kwargs`: the card shows
    them, the other scorer settings at their defaults, no token, and no LLMLingua-2 anywhere."""
    scorer = f"self-information:{tiny_model_dir}"
    given = {"scorer": scorer, "threshold": 0.3, "schedule_start": 5, "scorer_kwargs": {"batch_size": 2, "token": "x"}}
    text, settings = _bingo_card(tmp_path, tiny_tokenizer, monkeypatch, given)
    assert settings["scorer"] == scorer and settings["threshold"] == 0.3 and settings["schedule_start"] == 5
    assert settings["scorer_kwargs"] == {"batch_size": 2}  # the token is never on a card
    assert (settings["normalize"], settings["scope"], settings["on_scorer_error"]) == ("chunk_minmax", "total", "raise")
    assert f'"scorer": "{scorer}"' in text and '"threshold": 0.3' in text
    assert "LLMLingua" not in text and '"x"' not in text


def test_bingo_card_with_an_llmlingua_checkpoint_names_it(tmp_path, tiny_tokenizer, monkeypatch):
    """The control: with an LLMLingua-2-format checkpoint as the scorer, the card names that checkpoint and lists
    the proposed default of our LLMLingua-2 forward pass."""
    from trl_efficient.testing.scorers import save_tiny_token_classifier

    checkpoint = save_tiny_token_classifier(str(tmp_path / "scorer" / "tiny-bert-base-multilingual-cased"))
    text, settings = _bingo_card(tmp_path / "run", tiny_tokenizer, monkeypatch, {"scorer": checkpoint})
    assert settings["scorer"] == checkpoint and settings["threshold"] == 0.5
    assert "scorer: own LLMLingua-2 forward pass" in text


def test_saber_card_lists_mode_system_prompts(tmp_path, tiny_tokenizer):
    _, card = _write_card(
        _trainer("saber", tmp_path, tiny_tokenizer, base_model_id=BASE, length_scope="thinking"), tmp_path
    )
    text = card.text
    for name, prompt in saber_mode_prompts().items():
        assert f"{name!r}: { ({'system': prompt})!r}" in text
    hyper = _hyper_section(text)
    assert '`length_scope`: `"thinking"`' in hyper
    assert not any(f"`{f}`" in hyper for f in (*BUDGET_FIELDS, *TARGET_FIELDS))


def test_saber_card_prefers_the_system_prompts_the_data_carried(tmp_path, tiny_tokenizer):
    """Prompts changed in the SABER data preparation (its prompt kwargs) reach the card as trained."""
    custom = {128: "Under 128 tokens, please.", -1: "Take all the time you need."}
    rows = [("budget", 128), ("unlimited", -1), ("budget", 4096), ("nothink", 0)]
    system = {("budget", 4096): saber_mode_prompts()["CoreThink"], ("nothink", 0): "No thinking."}
    data = Dataset.from_dict(
        {
            "prompt": [
                [{"role": "system", "content": custom.get(b) or system[(m, b)]}, {"role": "user", "content": "q"}]
                for m, b in rows
            ],
            "saber_mode": [m for m, _ in rows],
            "saber_budget": [b for _, b in rows],
        }
    )
    trainer = _trainer("saber", tmp_path, tiny_tokenizer, base_model_id=BASE, dataset=data, length_scope="thinking")
    _, card = _write_card(trainer, tmp_path)
    assert "'FastThink': {'system': 'Under 128 tokens, please.'}" in card.text
    assert "'Unlimited': {'system': 'Take all the time you need.'}" in card.text
    assert "'NoThink': {'system': 'No thinking.'}" in card.text
    assert f"'DeepThink': { ({'system': saber_mode_prompts()['DeepThink']})!r}" in card.text  # not in the data


@pytest.mark.parametrize("recipe", ["grpo", "dler"])
def test_only_the_recipes_hyperparameters(recipe, tmp_path, tiny_tokenizer):
    _, card = _write_card(_trainer(recipe, tmp_path, tiny_tokenizer, base_model_id=BASE), tmp_path)
    hyper = _hyper_section(card.text)
    assert not any(f"`{f}`" in hyper for f in (*BUDGET_FIELDS, *TARGET_FIELDS, "length_scope", "length_unit"))
    overrides = get_recipe(recipe).config_overrides
    assert all(f"`{k}`" in hyper for k in overrides)  # every override the recipe sets is shown
    assert ("`advantage_kwargs`" in hyper) == (recipe == "dler")


def test_card_shows_the_sampling_options_the_run_used(tmp_path, tiny_tokenizer):
    """A run that sampled with an EOS logit bias (`--eos_logit_bias 10`, as the real-model commands do) says so on
    its card; without one, no `generation_kwargs` line."""
    bias = {"sequence_bias": [[[tiny_tokenizer.eos_token_id], 10.0]]}
    _, card = _write_card(_trainer("kimi", tmp_path / "a", tiny_tokenizer, generation_kwargs=bias), tmp_path / "a")
    assert f"- `generation_kwargs`: `{json.dumps(bias)}`" in _hyper_section(card.text)
    _, card = _write_card(_trainer("kimi", tmp_path / "b", tiny_tokenizer), tmp_path / "b")
    assert "`generation_kwargs`" not in _hyper_section(card.text)


def test_card_written_by_training_is_idempotent(tiny_model_dir, tmp_path):
    """Moved from tests/test_model_card.py: the trainer writes the card, twice, with the section once."""
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
    assert trainer.model_card_error is None
    card = ModelCard.load(os.path.join(tmp_path, "README.md"))
    assert "license" not in card.data.to_dict() and "licence" not in card.data.to_dict()  # a tiny base: none known
    assert "trl-efficient" in card.data.tags
    assert card.text.count(SECTION_MARKER) == 1
    assert "kimi length weight 0.4" in card.text  # a proposed default, labelled as such
    assert "arXiv:2501.12599" in card.text and "huggingface.co/None" not in card.text
    assert "None" not in card.content and "base_model" not in card.data.to_dict()  # a local tiny model


def test_quickstart_follows_the_training_prompt_format(tmp_path, tiny_tokenizer):
    from trl_efficient.data.loaders import DEFAULT_INSTRUCTION, format_prompt

    # math format with a system message: the instruction and the system prompt of the data
    math = Dataset.from_dict({"prompt": [format_prompt("1 + 1?", DEFAULT_INSTRUCTION, system_prompt="Be brief.")]})
    _, card = _write_card(_trainer("grpo", tmp_path / "a", tiny_tokenizer, dataset=math), tmp_path / "a")
    assert f"INSTRUCTION = {DEFAULT_INSTRUCTION!r}" in card.text and "SYSTEM_PROMPT = 'Be brief.'" in card.text
    assert f"build_prompt({'What is the sum of the first 10 positive integers?'!r}" in card.text
    # the data's own format (the testbed's): a training prompt as is, no math instruction added
    own = Dataset.from_dict({"prompt": [[{"role": "user", "content": "Chain: 3 +4 *2 =?"}]]})
    _, card = _write_card(_trainer("grpo", tmp_path / "b", tiny_tokenizer, dataset=own), tmp_path / "b")
    assert "INSTRUCTION = ''" in card.text and "build_prompt('Chain: 3 +4 *2 =?', mode='plain')" in card.text
    assert "the training data's own format" in card.text


def test_summary_markdown_is_the_before_after_table():
    r = {"accuracy": 0.53125, "mean_tokens": 90.46, "truncated_fraction": 0.0625}
    summary = {"recipe": "kimi", "before": r, "after": {**r, "accuracy": 0.578, "mean_tokens": 67.14}}
    assert summary_markdown(summary) == (
        "### Evaluation before and after training\n\n"
        "Measured by `trl-efficient train` on the run's evaluation set (not named in its summary): n not recorded, "
        "the same before and after training.\n\n"
        "| | accuracy | mean tokens | truncated |\n|---|---|---|---|\n"
        "| before | 0.531 | 90.5 | 0.06 |\n"
        "| after | 0.578 | 67.1 | 0.06 |\n"
    )
    assert summary_markdown({**summary, "before": None}) is None  # a run without evaluation: no table


def test_summary_markdown_names_the_eval_set_and_n():
    """`trl-efficient train` saves which set the before/after table measured (`eval_dataset`) next to the results,
    whose `num_problems` x `samples_per_problem` is the n: 32 problems x 2 samples = 64 samples."""
    r = {"accuracy": 0.5, "mean_tokens": 40.0, "truncated_fraction": 0.0, "num_samples": 64, "num_problems": 32,
         "samples_per_problem": 2}  # fmt: skip
    summary = {"recipe": "kimi", "before": r, "after": {**r, "accuracy": 0.75},
               "eval_dataset": {"name": "gsm8k", "split": "test"}}  # fmt: skip
    assert summary_markdown(summary).splitlines()[2] == (
        "Measured by `trl-efficient train` on `gsm8k` (split `test`): n = 32 problems x 2 samples = 64 samples, the "
        "same before and after training."
    )
    one = {**r, "num_problems": 8, "samples_per_problem": 1, "num_samples": 8}
    assert "n = 8 problems x 1 sample = 8 samples" in summary_markdown({**summary, "before": one, "after": one})


@pytest.mark.parametrize("evaluated", [False, True])
def test_card_lists_only_the_datasets_the_run_used(evaluated, tmp_path):
    """Issue 36 item 4: cards listed MATH-500, loaded as the evaluation set of a run that never evaluated on it
    (`--eval_before_after false`). A one-step run on GSM8K with MATH-500 as its evaluation set: the card and its
    metadata name MATH-500 only when the before/after evaluation ran on it."""
    from trl_efficient.api.training import train_main

    overrides = dict(recipe="grpo", max_steps=1, dataset_name="gsm8k", dataset_limit=8, eval_dataset_name="math500")
    overrides.update(eval_limit=2, eval_max_new_tokens=4, eval_before_after=evaluated)
    summary = train_main(tiny_cli_args(tmp_path, **overrides))
    assert bool(summary["before"]) is evaluated
    path = os.path.join(tmp_path, "README.md")
    datasets = ["openai/gsm8k", "HuggingFaceH4/MATH-500"] if evaluated else ["openai/gsm8k"]
    assert metadata_load(path)["datasets"] == datasets
    assert ("| Datasets | gsm8k, math500 |" if evaluated else "| Datasets | gsm8k |") in ModelCard.load(path).text
    assert CardData.load(os.path.join(tmp_path, CARD_DATA_FILE)).datasets == ["gsm8k", "math500"][: 1 + evaluated]
