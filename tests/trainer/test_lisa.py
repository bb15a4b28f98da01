"""LISA (`trl_efficient/trainer/lisa.py`, arXiv 2403.17919): the layer draw, the config and construction errors,
training with scripted rollouts (frozen layers stay put within an interval, embeddings/head/norm move, the optimizer
holds state only for what trains), the bit-exact resume across a draw, and gamma = all layers equal to TRL's full
fine-tuning bit for bit."""

import json
import os

import pytest
import torch
from helpers import RecordingTrainer, make_dataset, resume_trainer, tiny_config, train_yaml
from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from trl_efficient.testing.tiny import save_tiny_model
from trl_efficient.trainer import EfficientGRPOConfig
from trl_efficient.trainer.lisa import LISA, decoder_layers, deepspeed_zero_stage, sample_layers


@pytest.fixture(scope="module")
def four_layer_dir(tmp_path_factory):
    return save_tiny_model(str(tmp_path_factory.mktemp("tiny4") / "tiny-qwen2-16x4"), hidden_size=16, num_heads=4,
                           num_layers=4)  # fmt: skip


def length_reward(completion_ids, **kwargs):
    # scripted completions differ in length within every group, so every group has a nonzero advantage
    return [float(len(ids)) for ids in completion_ids]


# ------------------------------------------------------------------------------------------------------ the draw
class TestSampleLayers:
    def test_seeded_and_a_pure_function_of_seed_and_interval(self):
        assert sample_layers(42, 0, 8, 2) == [0, 6]  # numpy default_rng([42, 0]).choice(8, 2, replace=False)
        assert sample_layers(42, 3, 8, 2) == sample_layers(42, 3, 8, 2) == [1, 5]
        assert sample_layers(0, 0, 8, 2) == [5, 7]  # another seed, another stream

    def test_gamma_distinct_layers_in_range(self):
        for interval in range(50):
            layers = sample_layers(7, interval, 6, 3)
            assert len(set(layers)) == 3 and all(0 <= i < 6 for i in layers) and layers == sorted(layers)

    def test_gamma_equal_to_all_layers_is_every_layer(self):
        assert sample_layers(1, 5, 4, 4) == [0, 1, 2, 3]

    def test_every_layer_is_drawn_with_probability_gamma_over_n(self):
        # the paper's p_l = gamma / N_L: 4000 intervals, N = 8, gamma = 2 -> 1000 expected draws of each layer;
        # binomial sd = sqrt(4000 * 0.25 * 0.75) = 27.4, so +-100 is more than 3.6 sd
        counts = [0] * 8
        for interval in range(4000):
            for i in sample_layers(3, interval, 8, 2):
                counts[i] += 1
        assert all(900 < c < 1100 for c in counts), counts


# ------------------------------------------------------------------------------------------------ config errors
KW = dict(output_dir="unused", per_device_train_batch_size=4, num_generations=4, use_cpu=True, report_to="none",
          bf16=False)  # fmt: skip


class TestConfig:
    def test_off_by_default_and_nothing_changes(self):
        args = EfficientGRPOConfig(**KW)
        assert args.lisa_activated_layers is None and args.lisa_interval_steps == 20  # LMFlow's args.py default
        assert args.ddp_find_unused_parameters is None  # TRL's/transformers' own default, untouched

    def test_on_sets_ddp_find_unused_parameters(self):
        assert EfficientGRPOConfig(**KW, lisa_activated_layers=2).ddp_find_unused_parameters is True

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"lisa_activated_layers": 0}, r"lisa_activated_layers must be a number of decoder layers >= 1.*got 0"),
            ({"lisa_activated_layers": -2}, r"lisa_activated_layers must be .*got -2"),
            ({"lisa_activated_layers": True}, r"lisa_activated_layers must be .*got True"),
            ({"lisa_interval_steps": 0}, r"lisa_interval_steps must be .* >= 1, got 0"),
            ({"lisa_activated_layers": 1, "lisa_interval_steps": -3}, r"lisa_interval_steps must be .*got -3"),
            (
                {"lisa_activated_layers": 1, "deepspeed": {"zero_optimization": {"stage": 3}}},
                r"lisa_activated_layers=1 is not supported with DeepSpeed ZeRO-3",
            ),
            ({"lisa_activated_layers": 2, "fsdp": "full_shard"}, r"lisa_activated_layers=2 is not supported with FSDP"),
            (
                {"lisa_activated_layers": 1, "ddp_find_unused_parameters": False},
                r"set ddp_find_unused_parameters to True",
            ),
        ],
    )
    def test_refused_in_one_line(self, kwargs, match):
        with pytest.raises(ValueError, match=match) as err:
            EfficientGRPOConfig(**KW, **kwargs)
        assert "\n" not in str(err.value)

    def test_zero3_from_a_json_file_and_from_accelerate_launch(self, tmp_path, monkeypatch):
        path = tmp_path / "ds.json"
        path.write_text(json.dumps({"zero_optimization": {"stage": 3}}))
        assert deepspeed_zero_stage(str(path)) == 3
        assert deepspeed_zero_stage('{"zero_optimization": {"stage": 2}}') == 2
        monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
        monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
        with pytest.raises(ValueError, match="ZeRO-3"):
            EfficientGRPOConfig(**KW, lisa_activated_layers=1)


def test_zero2_is_accepted_with_a_warning_naming_what_deepspeed_does(caplog):
    from types import SimpleNamespace

    from trl_efficient.trainer.lisa import check_lisa_config

    ds = {"zero_optimization": {"stage": 2}}
    with caplog.at_level("WARNING", logger="trl_efficient.trainer.lisa"):
        check_lisa_config(SimpleNamespace(lisa_activated_layers=2, lisa_interval_steps=20, deepspeed=ds, fsdp=""))
    assert "ZeRO-2" in caplog.text and "optimizer memory is not reduced" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="trl_efficient.trainer.lisa"):
        check_lisa_config(SimpleNamespace(lisa_activated_layers=2, lisa_interval_steps=20, deepspeed=None, fsdp=""))
    assert caplog.text == ""


# ------------------------------------------------------------------------------------------ construction errors
class TestDecoderLayers:
    def test_qwen2_and_llama_through_get_decoder(self, four_layer_dir):
        from transformers import AutoModelForCausalLM

        name, layers = decoder_layers(AutoModelForCausalLM.from_pretrained(four_layer_dir))
        assert (name, len(layers)) == ("model.layers", 4)

    def test_gpt2_through_no_split_modules(self):
        model = GPT2LMHeadModel(GPT2Config(n_layer=3, n_embd=16, n_head=2, vocab_size=32, n_positions=16))
        name, layers = decoder_layers(model)
        assert (name, len(layers)) == ("transformer.h", 3)

    def test_a_model_without_a_layer_list_is_one_line(self):
        with pytest.raises(ValueError, match=r"needs the model's list of decoder layers: Sequential has no") as err:
            decoder_layers(torch.nn.Sequential(torch.nn.Linear(2, 2)))
        assert "\n" not in str(err.value)


def _trainer(model_dir, out, **overrides):
    return RecordingTrainer(
        model=model_dir, reward_funcs=[length_reward], args=tiny_config(out, **overrides),
        train_dataset=make_dataset(16),
    )  # fmt: skip


def test_more_layers_than_the_model_has_is_refused(four_layer_dir, tmp_path):
    with pytest.raises(ValueError, match=r"lisa_activated_layers=5 is more than the 4 decoder layers of Qwen2"):
        _trainer(four_layer_dir, tmp_path, lisa_activated_layers=5)


def test_peft_is_refused(four_layer_dir, tmp_path):
    from peft import LoraConfig

    with pytest.raises(ValueError, match=r"cannot be combined with PEFT/LoRA"):
        RecordingTrainer(
            model=four_layer_dir, reward_funcs=[length_reward], train_dataset=make_dataset(16),
            args=tiny_config(tmp_path, lisa_activated_layers=1),
            peft_config=LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], task_type="CAUSAL_LM"),
        )  # fmt: skip


def test_use_peft_on_the_command_line_is_refused_at_config_time(tmp_path):
    from helpers import tiny_cli_args

    from trl_efficient.api.training import parse_train_args
    from trl_efficient.core.errors import UserError

    argv = ["--config", "kimi", *tiny_cli_args(tmp_path), "--use_peft", "--lisa_activated_layers", "1"]
    with pytest.raises(UserError, match=r"lisa_activated_layers=1 .*cannot be combined with PEFT/LoRA") as err:
        parse_train_args(argv)
    assert "\n" not in str(err.value)


def test_off_adds_no_callback(four_layer_dir, tmp_path):
    trainer = _trainer(four_layer_dir, tmp_path)
    assert trainer.lisa is None
    assert not any(isinstance(c, LISA) for c in trainer.callback_handler.callbacks)
    assert "lisa" not in trainer.stateful_components


# ----------------------------------------------------------------------------------------------------- training
class Snapshots(TrainerCallback):
    """Weights at each step's begin (after LISA's draw) and end, the active layers and the optimizer's state keys."""

    def __init__(self):
        self.steps = []

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self.before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kwargs):
        names = {id(p): n for n, p in model.named_parameters()}
        torch_opt = optimizer.optimizer if hasattr(optimizer, "optimizer") else optimizer
        self.steps.append(
            {
                "before": self.before,
                "after": {n: p.detach().clone() for n, p in model.named_parameters()},
                "trainable": {n for n, p in model.named_parameters() if p.requires_grad},
                "optimizer_state": {names[id(p)] for p in torch_opt.state},
            }
        )


def _layer(name: str) -> int | None:
    parts = name.split(".")
    return int(parts[2]) if name.startswith("model.layers.") else None


def test_training_freezes_all_but_the_drawn_layers(four_layer_dir, tmp_path):
    # 4 layers, gamma = 1, K = 2, 5 steps: intervals 0, 0, 1, 1, 2; seed 0 draws [3], [2], [3] (sample_layers)
    snaps = Snapshots()
    trainer = _trainer(four_layer_dir, tmp_path, lisa_activated_layers=1, lisa_interval_steps=2, max_steps=5,
                       learning_rate=1e-2)  # fmt: skip
    trainer.add_callback(snaps)
    trainer.train()
    expected = [sample_layers(0, step // 2, 4, 1) for step in range(5)]
    assert expected == [[3], [3], [2], [2], [3]]  # the set changes at the interval boundaries
    assert trainer.lisa.state_dict()["active_layers"] == [3] and trainer.lisa.interval == 2
    always = {n for n in snaps.steps[0]["after"] if _layer(n) is None}
    assert always == {"model.embed_tokens.weight", "model.norm.weight"}  # lm_head is tied to embed_tokens
    for step, (snap, active) in enumerate(zip(snaps.steps, expected, strict=True)):
        for name, before in snap["before"].items():
            layer = _layer(name)
            moved = not torch.equal(before, snap["after"][name])
            if layer is None or layer in active:
                assert name in snap["trainable"]
                if name.endswith("weight") and "norm" not in name or name in always:
                    assert moved, f"step {step}: {name} (active) did not change"
            else:
                assert name not in snap["trainable"]
                assert not moved, f"step {step}: {name} of frozen layer {layer} changed"
        # the optimizer holds state for exactly the parameters that train: the drawn layer, embeddings, final norm
        assert snap["optimizer_state"] == snap["trainable"], step
    # at the end every layer trains again, as the model came
    assert all(p.requires_grad for p in trainer.model.parameters())


def test_a_layer_that_leaves_the_set_loses_its_state_and_restarts(four_layer_dir, tmp_path):
    # with K = 1 the draws of seed 0 are [3], [2], [3]: layer 3 trains at steps 0 and 2 but not 1, so at step 2 its
    # Adam state starts again (step count 1), while the embeddings keep theirs (step count 3)
    assert [sample_layers(0, i, 4, 1) for i in range(3)] == [[3], [2], [3]]
    trainer = _trainer(four_layer_dir, tmp_path, lisa_activated_layers=1, lisa_interval_steps=1, max_steps=3)
    trainer.train()
    opt = trainer.optimizer.optimizer
    params = dict(trainer.model.named_parameters())
    assert float(opt.state[params["model.embed_tokens.weight"]]["step"]) == 3.0
    assert float(opt.state[params["model.layers.3.mlp.up_proj.weight"]]["step"]) == 1.0
    assert params["model.layers.2.mlp.up_proj.weight"] not in opt.state


# ------------------------------------------------------------------------------------------------------- resume
def test_resume_across_a_draw_is_bit_exact(four_layer_dir, tiny_tokenizer, tmp_path):
    # K = 3: steps 0-2 are interval 0, step 3 interval 1 (a new draw); checkpoint-2 sits inside interval 0, so the
    # resumed run must re-apply interval 0's layer for step 2 (LMFlow's callback would train every layer there) and
    # draw at step 3 as the uninterrupted run does.
    lisa = {"lisa_activated_layers": 2, "lisa_interval_steps": 3}
    assert sample_layers(0, 0, 4, 2) != sample_layers(0, 1, 4, 2)
    full = resume_trainer(four_layer_dir, tmp_path / "full", tiny_tokenizer, max_steps=4, **lisa)
    full.train()
    ckpt = os.path.join(tmp_path, "full", "checkpoint-2")
    with open(os.path.join(ckpt, "trl_efficient_state.json")) as f:
        saved = json.load(f)["lisa"]
    assert saved == {"seed": 0, "interval": 0, "active_layers": sample_layers(0, 0, 4, 2), "activated_layers": 2,
                     "interval_steps": 3, "num_layers": 4}  # fmt: skip
    resumed = resume_trainer(four_layer_dir, tmp_path / "resumed", tiny_tokenizer, max_steps=4, **lisa)
    resumed.train(resume_from_checkpoint=ckpt)
    assert len(resumed.records) == 2
    for a, b in zip(full.records[2:], resumed.records, strict=True):
        assert a["lengths"] == b["lengths"] and a["rewards"] == b["rewards"] and a["advantages"] == b["advantages"]
    assert full.lisa.state_dict() == resumed.lisa.state_dict()
    assert full.lisa.interval == 1
    full_w, resumed_w = full.model.state_dict(), resumed.model.state_dict()
    assert [k for k in full_w if not torch.equal(full_w[k], resumed_w[k])] == []


def test_resume_with_other_lisa_settings_is_refused(four_layer_dir, tiny_tokenizer, tmp_path):
    full = resume_trainer(four_layer_dir, tmp_path / "full", tiny_tokenizer, max_steps=2, lisa_activated_layers=1)
    full.train()
    other = resume_trainer(four_layer_dir, tmp_path / "other", tiny_tokenizer, max_steps=3, lisa_activated_layers=2)
    with pytest.raises(ValueError, match=r"trained with lisa_activated_layers=1, lisa_interval_steps=20"):
        other.train(resume_from_checkpoint=os.path.join(tmp_path, "full", "checkpoint-2"))


# ------------------------------------------------------------------------------------------------- differential
def test_all_layers_active_equals_trl_full_fine_tuning(tiny_model_dir, tiny_tokenizer, tmp_path):
    """gamma = N_L (2 of 2 layers), redrawn every step: LISA's draw, freezing and state dropping are all exercised and
    change nothing, so the run equals plain `GRPOTrainer`'s bit for bit (metrics and weights, real sampled
    generation); with the options off the differential suite (`test_differential.py`) covers the rest."""

    def run(trainer_cls, config_cls, out, **extra):
        args = config_cls(
            output_dir=str(out), per_device_train_batch_size=4, num_generations=4, max_completion_length=10,
            generation_kwargs={"sequence_bias": [[[tiny_tokenizer.eos_token_id], 4.0]]}, max_steps=3,
            learning_rate=1e-2, logging_steps=1, report_to="none", use_cpu=True, bf16=False, save_strategy="no",
            seed=0, **extra,
        )  # fmt: skip
        trainer = trainer_cls(model=tiny_model_dir, reward_funcs=[length_reward], args=args,
                              train_dataset=make_dataset(8))  # fmt: skip
        trainer.train()
        timing = {"step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second"}
        logs = [
            {k: v for k, v in e.items() if k not in timing and not k.startswith("trl_efficient/")}
            for e in trainer.state.log_history
        ]
        return logs, trainer.model.state_dict(), trainer

    from trl_efficient.trainer import EfficientGRPOTrainer

    plain = run(GRPOTrainer, GRPOConfig, tmp_path / "plain")
    ours = run(EfficientGRPOTrainer, EfficientGRPOConfig, tmp_path / "ours", lisa_activated_layers=2,
               lisa_interval_steps=1)  # fmt: skip
    assert ours[2].lisa.interval == 2 and ours[2].lisa.active_layers == [0, 1]
    assert plain[0] == ours[0]
    assert [k for k in plain[1] if not torch.equal(plain[1][k], ours[1][k])] == []


def test_the_model_card_cites_lisa_whatever_the_recipe(four_layer_dir, tmp_path):
    from trl_efficient.hub.card import card_data_from_trainer
    from trl_efficient.hub.papers import bibtex

    with_lisa = _trainer(four_layer_dir, tmp_path / "on", lisa_activated_layers=1)
    data = card_data_from_trainer(with_lisa)
    assert data.papers == ["2403.17919"] and data.hyperparameters["lisa_activated_layers"] == 1
    assert "LISA: Layerwise Importance Sampling" in bibtex("2403.17919")
    assert card_data_from_trainer(_trainer(four_layer_dir, tmp_path / "off")).papers == []


def test_a_recipe_trains_with_lisa_from_the_command_line(tmp_path):
    # DLER runs its own trainer subclass; the options come from the command line like any TRL field
    config = train_yaml("dler", tmp_path, lisa_activated_layers=1, lisa_interval_steps=1, save_strategy="steps",
                        save_steps=2)  # fmt: skip
    assert (config.lisa_activated_layers, config.lisa_interval_steps) == (1, 1)
    with open(tmp_path / "checkpoint-2" / "trl_efficient_state.json") as f:
        state = json.load(f)["lisa"]
    # tiny:qwen2-16 has 2 decoder layers; step 1 (the last) is interval 1
    assert state["num_layers"] == 2 and state["interval"] == 1
    assert state["active_layers"] == sample_layers(config.seed, 1, 2, 1)


def test_the_active_layers_are_logged_as_metrics(four_layer_dir, tmp_path):
    # K = 1, seed 0: steps 0, 1, 2 train layers [3], [2], [3] (sample_layers); one log line per step
    trainer = _trainer(four_layer_dir, tmp_path, lisa_activated_layers=1, lisa_interval_steps=1, max_steps=3)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["trl_efficient/lisa/interval"] for entry in logs] == [0.0, 1.0, 2.0]
    layers = [sorted(k for k in entry if k.startswith("trl_efficient/lisa/layer_")) for entry in logs]
    assert layers == [["trl_efficient/lisa/layer_3"], ["trl_efficient/lisa/layer_2"], ["trl_efficient/lisa/layer_3"]]
    assert all(entry[key] == 1.0 for entry, keys in zip(logs, layers) for key in keys)
