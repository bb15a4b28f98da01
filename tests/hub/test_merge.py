"""`trl-efficient merge`: every merged parameter equals the method's formula, computed here independently with torch
ops on the two state dicts (not by calling the merge functions), and the merged directory loads and generates."""

import json
import math
import os

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from trl_efficient.hub.merge import keep_count, layer_bands, main
from trl_efficient.testing.tiny import build_tiny_tokenizer

NUM_LAYERS = 4


def _model(tokenizer, hidden=16, tie=True, seed=0):
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=NUM_LAYERS,
        num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4, tie_word_embeddings=tie,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def _finetuned(model, seed):
    """A 'trained' copy: every parameter moved by a different random amount (so every |Δ| > 0 and distinct)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    return model


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("merge")
    tok = build_tiny_tokenizer()
    paths = {}
    for tie in (True, False):
        suffix = "" if tie else "-untied"
        base = _model(tok, tie=tie)
        base.save_pretrained(root / f"base{suffix}")
        tok.save_pretrained(root / f"base{suffix}")
        trained = _finetuned(_model(tok, tie=tie), seed=1)
        trained.save_pretrained(root / f"trained{suffix}")
        tok.save_pretrained(root / f"trained{suffix}")
        paths[f"base{suffix}"], paths[f"trained{suffix}"] = str(root / f"base{suffix}"), str(root / f"trained{suffix}")
    wide = _model(tok, hidden=32)
    wide.save_pretrained(root / "wide")
    paths["wide"] = str(root / "wide")
    return paths


def _state(path):
    return {k: v.detach().clone() for k, v in AutoModelForCausalLM.from_pretrained(path).state_dict().items()}


def _card(out):
    text = open(os.path.join(out, "README.md"), encoding="utf-8").read()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1]), text


def _loads_and_generates(out):
    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    ids = tok("What is 2 + 3?", return_tensors="pt")
    gen = model.generate(**ids, max_new_tokens=4, do_sample=False, min_new_tokens=4, pad_token_id=tok.pad_token_id)
    assert gen.shape == (1, ids["input_ids"].shape[1] + 4)
    return model


def test_uniform_every_parameter_is_the_average_and_the_card_says_so(models, tmp_path):
    out = str(tmp_path / "out")
    args = ["--base", models["base"], "--trained", models["trained"], "--method", "uniform", "--alpha", "0.3"]
    assert main([*args, "--output", out]) == 0
    base, trained, merged = _state(models["base"]), _state(models["trained"]), _state(out)
    assert set(merged) == set(base)
    for name, tensor in merged.items():
        torch.testing.assert_close(tensor, 0.7 * base[name] + 0.3 * trained[name], rtol=0, atol=1e-6, msg=name)
    # tied head: one tensor, merged once (a second merge of the same storage would give 0.49 b + 0.51 t)
    model = _loads_and_generates(out)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    meta, text = _card(out)
    # both models are local directories without a card: no base_model (Hub ids only) and no license, said in the text
    assert "base_model" not in meta and "license" not in meta
    assert f"- base model: `{models['base']}`, a local model (not on the Hub)" in text
    assert f"- trained model: `{models['trained']}`, a local model (not on the Hub)" in text
    assert "No license is set: none could be read from the cards of `base` and `trained`;" in text
    assert "Layer bands" not in text and "(not a layer-wise merge)" not in text  # no empty section
    assert {"merge", "trl-efficient", "uniform"} <= set(meta["tags"])
    assert meta["merge_method"] == "uniform" and meta["merge_parameters"] == {"alpha": 0.3}
    assert "θ = (1 − α) θ_base + α θ_trained" in text and "https://arxiv.org/abs/2309.06256" in text
    assert "@misc{arxiv2309_06256," in text and "{Mitigating the Alignment Tax of RLHF}" in text  # hub.papers' BibTeX


def _hand_band(name):
    """By hand for 4 layers: lower = embeddings + layers 0-1 (⌊3i/4⌋ = 0), middle = layer 2, upper = layer 3 +
    final norm + lm_head."""
    if name.startswith("model.layers."):
        return {0: 0, 1: 0, 2: 1, 3: 2}[int(name.split(".")[2])]
    return 0 if name == "model.embed_tokens.weight" else 2


@pytest.mark.parametrize("tie", [True, False])
def test_layerwise_each_band_gets_its_ratio(models, tmp_path, tie):
    suffix = "" if tie else "-untied"
    out = str(tmp_path / "out")
    argv = ["--base", models[f"base{suffix}"], "--trained", models[f"trained{suffix}"], "--method", "layerwise",
            "--ratios", "0.2,0.5,0.8", "--output", out]  # fmt: skip
    assert main(argv) == 0
    base, trained, merged = _state(models[f"base{suffix}"]), _state(models[f"trained{suffix}"]), _state(out)
    ratios = (0.2, 0.5, 0.8)
    for name, tensor in merged.items():
        # a tied head is the embedding tensor, so it follows the embedding's (lower) band
        band = 0 if (tie and name == "lm_head.weight") else _hand_band(name)
        a = ratios[band]
        torch.testing.assert_close(tensor, (1 - a) * base[name] + a * trained[name], rtol=0, atol=1e-6, msg=name)
    if not tie:
        head = "lm_head.weight"
        torch.testing.assert_close(merged[head], 0.2 * base[head] + 0.8 * trained[head])
    _loads_and_generates(out)
    meta, _ = _card(out)
    bands = meta["merge_parameters"]["bands"]
    assert bands["lower"]["tensors"] == "layers 0-1, model.embed_tokens.weight"
    assert bands["middle"]["tensors"] == "layer 2"
    assert bands["upper"]["ratio"] == 0.8 and bands["upper"]["tensors"].startswith("layer 3, model.norm.weight")


def test_layerwise_split_layers_follow_the_released_rule(models, tmp_path):
    # released merge_split: layer i goes to the first band whose boundary is >= i; split 0,2: {0} {1,2} {3}
    out = str(tmp_path / "out")
    argv = ["--base", models["base"], "--trained", models["trained"], "--method", "layerwise", "--ratios",
            "0.1,0.6,1.0", "--split-layers", "0,2", "--output", out]  # fmt: skip
    assert main(argv) == 0
    base, trained, merged = _state(models["base"]), _state(models["trained"]), _state(out)
    expected_ratio = {"model.layers.0.mlp.up_proj.weight": 0.1, "model.layers.1.mlp.up_proj.weight": 0.6,
                      "model.layers.2.mlp.up_proj.weight": 0.6, "model.layers.3.mlp.up_proj.weight": 1.0,
                      "model.embed_tokens.weight": 0.1, "model.norm.weight": 1.0}  # fmt: skip
    for name, a in expected_ratio.items():
        torch.testing.assert_close(merged[name], (1 - a) * base[name] + a * trained[name], rtol=0, atol=1e-6)


def test_layer_bands_thirds_by_hand():
    names = ["emb", *[f"model.layers.{i}.w" for i in range(26)], "norm", "head"]
    bands = layer_bands(names)
    by_band = [[n for n in names if bands[n] == b] for b in range(3)]
    assert [len(b) for b in by_band] == [1 + 9, 9, 8 + 2]  # 26 layers: 0-8, 9-17, 18-25
    assert by_band[1][0] == "model.layers.9.w" and by_band[2][0] == "model.layers.18.w"


def test_update_selective_keeps_the_largest_updates_per_tensor(models, tmp_path):
    out = str(tmp_path / "out")
    argv = ["--base", models["base-untied"], "--trained", models["trained-untied"], "--method", "update-selective",
            "--keep", "0.5", "--output", out]  # fmt: skip
    assert main(argv) == 0
    base, trained, merged = _state(models["base-untied"]), _state(models["trained-untied"]), _state(out)
    total_kept = 0
    for name, tensor in merged.items():
        b, t = base[name], trained[name]
        kept = tensor == t
        assert torch.all(kept | (tensor == b)), name  # every entry is the base's or the trained model's
        n = t.numel()
        assert int(kept.sum()) == math.ceil(n / 2), name  # documented rule: ⌈keep·n⌉ (all |Δ| > 0 and distinct)
        delta = (t - b).abs()
        assert delta[kept].min() >= delta[~kept].max() if n > 1 else True, name
        torch.testing.assert_close(tensor, b + kept.to(b.dtype) * (t - b), msg=name)  # θ_b + M ⊙ (θ_t − θ_b)
        total_kept += int(kept.sum())
    _loads_and_generates(out)
    meta, text = _card(out)
    assert meta["merge_parameters"]["keep"] == 0.5 and meta["merge_parameters"]["kept_entries"] == total_kept
    assert "https://arxiv.org/abs/2510.15110" in text


def test_keep_count_rule():
    assert [keep_count(n, 0.5) for n in (1, 2, 3, 7, 8)] == [1, 1, 2, 4, 4]
    assert keep_count(10, 0.3) == 3 and keep_count(10, 1.0) == 10 and keep_count(5, 0.01) == 1


def test_dtype_is_preserved(models, tmp_path):
    paths = {}
    for key in ("base", "trained"):
        model = AutoModelForCausalLM.from_pretrained(models[key]).to(torch.bfloat16)
        model.save_pretrained(tmp_path / key)
        AutoTokenizer.from_pretrained(models[key]).save_pretrained(tmp_path / key)
        paths[key] = str(tmp_path / key)
    out = str(tmp_path / "out")
    assert main(["--base", paths["base"], "--trained", paths["trained"], "--alpha", "0.5", "--output", out]) == 0
    merged = AutoModelForCausalLM.from_pretrained(out, dtype="auto")
    assert merged.dtype == torch.bfloat16
    base, trained = _state(paths["base"]), _state(paths["trained"])
    for name, tensor in merged.state_dict().items():
        expected = (0.5 * base[name].float() + 0.5 * trained[name].float()).to(torch.bfloat16)
        assert torch.equal(tensor, expected), name


def test_lora_merge_matches_the_peft_model(models, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    base = AutoModelForCausalLM.from_pretrained(models["base"])
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    torch.manual_seed(0)
    peft_model = get_peft_model(base, config)
    adapter = tmp_path / "adapter"
    peft_model.save_pretrained(adapter)
    out = str(tmp_path / "out")
    assert main(["--method", "lora", "--adapter", str(adapter), "--output", out]) == 0  # base from the adapter config

    ids = torch.tensor([[1, 5, 9, 20, 7, 3]])
    reference = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(models["base"]), str(adapter)).eval()
    plain = AutoModelForCausalLM.from_pretrained(models["base"]).eval()
    merged = _loads_and_generates(out).eval()
    with torch.no_grad():
        ref_logits, merged_logits, plain_logits = (m(ids).logits for m in (reference, merged, plain))
    torch.testing.assert_close(merged_logits, ref_logits, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(plain_logits, ref_logits, atol=1e-3)  # the adapter changes the model
    meta, text = _card(out)
    assert "base_model" not in meta and meta["merge_parameters"]["r"] == 4  # local base and adapter: no Hub ids
    assert "https://arxiv.org/abs/2106.09685" in text


def test_lora_merge_of_a_run_keeps_its_training_card(models, tmp_path):
    """An adapter directory holding a trl-efficient run's card data: the merge copies the card data and evaluation
    results, and its card is the training card followed by "How this model was merged" (hub.merge docstring)."""
    from peft import LoraConfig, get_peft_model

    from trl_efficient.hub.card import CardData

    torch.manual_seed(0)
    config = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], init_lora_weights=False)
    adapter = tmp_path / "run"
    get_peft_model(AutoModelForCausalLM.from_pretrained(models["base"]), config).save_pretrained(adapter)
    data = CardData(
        model_name="run", recipe="hbpo", method="HBPO", base_model="Qwen/Qwen2.5-0.5B-Instruct",
        base_model_text="It is a fine-tuned version of Qwen.", hyperparameters={"learning_rate": 1e-6},
    )  # fmt: skip
    (adapter / "trl_efficient_card.json").write_text(data.to_json())
    (adapter / "trl_efficient_summary.json").write_text('{"recipe": "hbpo", "before": null, "after": null}')
    os.makedirs(adapter / "eval")
    entry = {"model": "run", "model_name_or_path": str(adapter), "mode": "plain", "benchmark": "gsm8k",
             "result": {"accuracy": 0.5, "mean_tokens": 12.0}}  # fmt: skip
    (adapter / "eval" / "results.json").write_text(json.dumps({"results": [entry]}))
    (adapter / "eval" / "results.md").write_text("| run | 0.5 |\n")
    out = tmp_path / "out"
    assert main(["--method", "lora", "--adapter", str(adapter), "--output", str(out)]) == 0
    for name in ("trl_efficient_card.json", "trl_efficient_summary.json", "eval/results.json", "eval/results.md"):
        assert (out / name).read_bytes() == (adapter / name).read_bytes(), name
    merge = json.loads((out / "trl_efficient_merge.json").read_text())
    assert merge["method"] == "lora" and merge["models"] == [models["base"], str(adapter)]
    assert merge["parameters"]["r"] == 2 and merge["parameters"]["lora_alpha"] == 4
    meta, text = _card(str(out))
    # the training card's metadata (its base model, not the two local directories), tagged as a LoRA merge
    assert meta["base_model"] == "Qwen/Qwen2.5-0.5B-Instruct" and meta["library_name"] == "transformers"
    assert {"merge", "lora", "trl-efficient"} <= set(meta["tags"])
    assert meta["model-index"][0]["results"][0]["metrics"][0]["value"] == 0.5  # the adapter's evaluation
    assert text.index("## Efficient reasoning with trl-efficient") < text.index("## How this model was merged")
    assert "`hbpo`" in text and "`learning_rate`: `1e-06`" in text and f"model_id = '{out}'" in text
    section = text[text.index("## How this model was merged") :]
    assert section.startswith("## How this model was merged\n\nThis model was produced by `trl-efficient merge")
    assert f"- adapter: `{adapter}`" in section and "### How it was merged" in section and "### Source" in section
    assert "- `r`: 2" in section and "https://arxiv.org/abs/2106.09685" in section and "# Merged model" not in text
    _loads_and_generates(str(out))


def test_lora_merge_without_run_files_keeps_the_merge_card(models, tmp_path):
    from peft import LoraConfig, get_peft_model

    adapter = tmp_path / "adapter"
    config = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"])
    get_peft_model(AutoModelForCausalLM.from_pretrained(models["base"]), config).save_pretrained(adapter)
    out = tmp_path / "out"
    assert main(["--method", "lora", "--adapter", str(adapter), "--output", str(out)]) == 0
    assert (out / "trl_efficient_merge.json").exists() and not (out / "trl_efficient_card.json").exists()
    meta, text = _card(str(out))
    assert "base_model" not in meta
    assert text.split("---\n", 2)[2].lstrip().startswith("# Merged model (`lora`)")


def _error_lines(capsys):
    """The command's error lines (transformers' loading progress bars also go to stderr)."""
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("trl-efficient merge:")]


def test_mismatched_shapes_name_the_tensors(models, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert main(["--base", models["wide"], "--trained", models["trained"], "--output", out]) == 2
    err = _error_lines(capsys)
    assert len(err) == 1 and err[0].startswith("trl-efficient merge: error: the base and trained models do not match")
    assert "model.embed_tokens.weight (512, 32) vs (512, 16)" in err[0] and "(+" in err[0]
    assert main(["--base", models["base"], "--trained", models["trained-untied"], "--output", out]) == 2
    assert "only in trained: lm_head.weight" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--base", "/no/such/dir", "--trained", "T"], "--base /no/such/dir: no such model directory."),
        (["--method", "layerwise", "--base", "B", "--trained", "T"], "--method layerwise needs --ratios"),
        (["--method", "layerwise", "--base", "B", "--trained", "T", "--ratios", "0.2,0.5"], "give three"),
        (["--method", "layerwise", "--base", "B", "--trained", "T", "--ratios", "0.2,1.5,0.1"], "must be in [0, 1]"),
        (["--method", "layerwise", "--base", "B", "--trained", "T", "--ratios", "a,b,c"], "not a number"),
        (["--base", "B", "--trained", "T", "--alpha", "2"], "--alpha 2: must be in [0, 1]"),
        (["--method", "update-selective", "--base", "B", "--trained", "T", "--keep", "0"], "must be in (0, 1]"),
        (["--method", "lora"], "--method lora needs --adapter"),
        (["--method", "lora", "--adapter", "/no/adapter"], "--adapter /no/adapter: no such adapter directory."),
        (["--trained", "T"], "needs both --base and --trained"),
    ],
)
def test_cli_errors_are_one_line(tmp_path, capsys, extra, message):
    assert main([*extra, "--output", str(tmp_path / "out")]) == 2
    err = _error_lines(capsys)
    assert len(err) == 1 and message in err[0], err


def test_cli_refuses_a_non_empty_output_and_bad_split(models, tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert main(["--base", models["base"], "--trained", models["trained"], "--output", str(tmp_path / "full")]) == 2
    assert "not empty" in capsys.readouterr().err
    argv = ["--base", models["base"], "--trained", models["trained"], "--method", "layerwise", "--ratios", "0,0,1",
            "--split-layers", "2,1", "--output", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 2
    assert "--split-layers 2,1: need 0 <= a < b < 3" in capsys.readouterr().err


def test_an_output_that_is_a_file_is_refused_before_loading(tmp_path, capsys, monkeypatch):
    import trl_efficient.hub.merge as merge

    monkeypatch.setattr(merge, "_load_model", lambda *a: pytest.fail("a model loaded before the output was checked"))
    (tmp_path / "taken").write_text("x")
    assert main(["--base", "B", "--trained", "T", "--output", str(tmp_path / "taken")]) == 2
    assert _error_lines(capsys) == [
        f"trl-efficient merge: error: --output {tmp_path / 'taken'}: a file, not a directory; pass --output <a new "
        "directory>."
    ]
    assert (tmp_path / "taken").read_text() == "x"


def test_a_merge_that_fails_at_its_last_step_writes_nothing(models, tmp_path, capsys, monkeypatch):
    import trl_efficient.hub.merge as merge

    def card_fails(*args, **kwargs):
        raise ValueError("the card cannot be written")

    out = tmp_path / "runs" / "merged"  # its folders do not exist yet
    monkeypatch.setattr(merge, "_write_card", card_fails)
    assert main(["--base", models["base"], "--trained", models["trained"], "--output", str(out)]) == 2
    assert _error_lines(capsys) == ["trl-efficient merge: error: the card cannot be written"]
    assert sorted(os.listdir(tmp_path)) == [], "a failed merge left files behind"
    # and the same merge that succeeds moves the whole folder into place, staging folder gone
    monkeypatch.undo()
    assert main(["--base", models["base"], "--trained", models["trained"], "--output", str(out)]) == 0
    assert {"config.json", "model.safetensors", "README.md", "trl_efficient_merge.json"} <= set(os.listdir(out))
    assert os.listdir(tmp_path) == ["runs"] and os.listdir(tmp_path / "runs") == ["merged"]
    card = (out / "README.md").read_text()
    assert str(out) in card and ".merging-" not in card  # the card names the output, not the staging folder


@pytest.mark.parametrize("tie", [True, False])
def test_a_trained_model_with_added_tokens_merges_into_the_resized_base(tmp_path, tie):
    """BudgetThinker-style added tokens: the trained vocabulary has 3 more rows than the base. The base is resized to
    it; old rows are merged by the formula, the new rows are the trained model's, and the output loads."""
    tok = build_tiny_tokenizer()
    base = _model(tok, tie=tie)
    base.save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    grown = build_tiny_tokenizer()
    grown.add_special_tokens({"additional_special_tokens": ["<remaining>1/8", "<remaining>2/8", "<remaining>3/8"]})
    trained = _model(tok, tie=tie)
    trained.resize_token_embeddings(len(grown), mean_resizing=False)
    trained = _finetuned(trained, seed=1)
    trained.save_pretrained(tmp_path / "trained")
    grown.save_pretrained(tmp_path / "trained")
    out = str(tmp_path / "out")
    assert main(["--base", str(tmp_path / "base"), "--trained", str(tmp_path / "trained"), "--alpha", "0.25",
                 "--output", out]) == 0  # fmt: skip
    b, t, m = _state(tmp_path / "base"), _state(tmp_path / "trained"), _state(out)
    old, new = len(tok), len(grown)
    assert new == old + 3 and m["model.embed_tokens.weight"].shape[0] == new
    names = ["model.embed_tokens.weight"] + ([] if tie else ["lm_head.weight"])
    for name in names:
        # old rows: 0.75 base + 0.25 trained; new rows: the trained model's own (equal on both sides after the resize)
        torch.testing.assert_close(m[name][:old], 0.75 * b[name] + 0.25 * t[name][:old])
        torch.testing.assert_close(m[name][old:], t[name][old:])
    torch.testing.assert_close(m["model.norm.weight"], 0.75 * b["model.norm.weight"] + 0.25 * t["model.norm.weight"])
    assert len(AutoTokenizer.from_pretrained(out)) == new  # the trained tokenizer, with its added tokens
    _loads_and_generates(out)
    meta, text = _card(out)
    assert f"the base's {old} embedding rows resized to the trained model's {new}; the 3 new rows" in text
