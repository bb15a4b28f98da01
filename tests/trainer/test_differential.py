"""Differential suite: with no option of ours switched on, `EfficientGRPOTrainer` trains exactly as TRL's `GRPOTrainer`.

Each case trains plain `trl.GRPOTrainer` (config `GRPOConfig`) and `EfficientGRPOTrainer` (config
`EfficientGRPOConfig`, built from the same field values) side by side, with the same seed, real sampled generation
and the same rewards, and asserts:

- the same logged metrics: every entry of `trainer.state.log_history` has the same TRL keys with exactly equal values
  (wall-clock keys such as `step_time` left out). Our trainer adds only `trl_efficient/*` keys (documented in
  `trainer/trainer.py`: length, truncation and accuracy metrics of the batch, read-only);
- the same final weights, bit for bit (`torch.equal`; CPU training is deterministic for a given seed).

The features are those a TRL user relies on: reward models (in-process `PreTrainedModel` and a local path) mixed
with reward functions (one returning `None` for some rows, one calling `log_metric`), `reward_weights`, every
`loss_type` of TRL 1.16, every `scale_rewards`, `multi_objective_aggregation`, KL (`beta`) with `num_iterations`,
evaluation, iterable datasets, PEFT (LoRA), `chat_template_kwargs`, `mask_truncated_completions`, and checkpoint
save + resume with a reward model (the regression test for issue 18 item 0: the reward model's weights went into
`trl_efficient_state.json`, a `TypeError` at the first checkpoint).
"""

import copy
import gc
import json
import math
import os
import re

import pytest
import torch
from helpers import make_dataset
from transformers import Qwen2Config, Qwen2ForSequenceClassification
from trl import GRPOConfig, GRPOTrainer

from trl_efficient.testing.tiny import CHATML_TEMPLATE
from trl_efficient.trainer import EfficientGRPOConfig, EfficientGRPOTrainer

# Wall-clock metrics: differ between any two runs, of either trainer.
TIMING_KEYS = {"step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second"}
TIMING_KEYS |= {f"eval_{k}" for k in ("runtime", "samples_per_second", "steps_per_second")}
OUR_PREFIXES = ("trl_efficient/", "eval_trl_efficient/")

# A Qwen3-style template: `enable_thinking=False` (a chat_template_kwargs key) prefills an empty thinking block.
THINKING_TEMPLATE = CHATML_TEMPLATE + (
    "{%- if add_generation_prompt and enable_thinking is defined and not enable_thinking %}"
    "{{- '<think></think>' }}{%- endif %}"
)
REWARD_MODEL_NAME = "tiny-reward-model"


def answer_reward(completions, solution, **kwargs):
    """1 when the gold answer appears in the completion; `None` (no signal) for the `What is 3 * 3?` rows."""
    return [
        None if gold == "9" else float(gold in c[0]["content"]) for c, gold in zip(completions, solution, strict=True)
    ]


def short_reward(completion_ids, log_metric, **kwargs):
    """Fewer tokens score higher; also logs a custom metric through TRL's `log_metric`."""
    lengths = [len(ids) for ids in completion_ids]
    log_metric("short_reward/max_tokens", float(max(lengths)))
    return [-n / 16 for n in lengths]


def build_reward_model(tokenizer) -> Qwen2ForSequenceClassification:
    """A tiny sequence classifier (`num_labels=1`), seeded, as TRL builds a reward model from a Hub id."""
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=4,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        model = Qwen2ForSequenceClassification(config)
    model.config._name_or_path = REWARD_MODEL_NAME  # TRL names the reward's metrics after it
    return model


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    """Each `Trainer.train` ends with a full `gc.collect()` (accelerate's `free_memory`) over every object the imports
    made; freezing those first takes about a third off each run of this module."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture(scope="module")
def reward_model_dir(tmp_path_factory, tiny_tokenizer):
    path = str(tmp_path_factory.mktemp("rm") / REWARD_MODEL_NAME)
    build_reward_model(tiny_tokenizer).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


def config_kwargs(output_dir, tokenizer, **overrides) -> dict:
    """Tiny, commented settings shared by both trainers' configs."""
    return {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": 4,
        "num_generations": 4,  # one prompt per step
        "max_completion_length": 10,  # with the EOS bias, a mix of terminated and truncated completions
        "generation_kwargs": {"sequence_bias": [[[tokenizer.eos_token_id], 4.0]]},
        "max_steps": 2,
        "learning_rate": 1e-2,  # large, so the two steps move the weights visibly
        "logging_steps": 1,
        "report_to": "none",
        "use_cpu": True,
        "bf16": False,
        "save_strategy": "no",
        "seed": 0,
        **overrides,
    }


def train(trainer_cls, output_dir, model_dir, tokenizer, args=None, resume_from_checkpoint=None, **trainer_kwargs):
    """Train `trainer_cls` (its config class: `EfficientGRPOConfig` for ours, `GRPOConfig` for TRL's) on the same
    config values and trainer kwargs; return `(log_history, state_dict)` and the trainer."""
    config_cls = EfficientGRPOConfig if issubclass(trainer_cls, EfficientGRPOTrainer) else GRPOConfig
    config = config_cls(**config_kwargs(output_dir, tokenizer, **(args or {})))
    trainer = trainer_cls(model=model_dir, args=config, **trainer_kwargs)
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    return trainer.state.log_history, weights, trainer


def trainer_kwargs(tokenizer, reward_model_dir, reward_model="module", dataset="map", peft=False, evaluate=False):
    """Fresh trainer kwargs for one run: reward functions + a reward model, a tokenizer whose template honours
    `enable_thinking`, and the datasets."""
    processing_class = copy.deepcopy(tokenizer)
    processing_class.chat_template = THINKING_TEMPLATE
    rm = build_reward_model(tokenizer) if reward_model == "module" else reward_model_dir
    train_dataset = make_dataset(8)
    kwargs = {
        "reward_funcs": [answer_reward, short_reward, rm],
        "reward_processing_classes": [None, None, tokenizer if reward_model == "module" else None],
        "processing_class": processing_class,
        "train_dataset": train_dataset.to_iterable_dataset() if dataset == "iterable" else train_dataset,
    }
    if evaluate:
        kwargs["eval_dataset"] = make_dataset(1)  # one prompt: one eval batch of G rows
    if peft:
        from peft import LoraConfig

        kwargs["peft_config"] = LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
        )
    return kwargs


def same_value(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def assert_same_run(plain, ours) -> None:
    """Identical TRL metrics (same keys, equal values, every log entry) and bit-identical weights."""
    (plain_logs, plain_weights), (our_logs, our_weights) = plain[:2], ours[:2]
    assert len(plain_logs) == len(our_logs)
    for step, (p, o) in enumerate(zip(plain_logs, our_logs)):
        extra = set(o) - set(p)
        assert all(k.startswith(OUR_PREFIXES) for k in extra), f"entry {step}: non-namespaced extra keys {extra}"
        trl_keys = set(p) - TIMING_KEYS
        assert trl_keys == set(o) - TIMING_KEYS - extra, f"entry {step}: TRL keys differ"
        diff = {k: (p[k], o[k]) for k in sorted(trl_keys) if not same_value(p[k], o[k])}
        assert not diff, f"entry {step}: TRL metrics differ (plain, ours): {diff}"
    assert plain_weights.keys() == our_weights.keys()
    changed = [k for k in plain_weights if not torch.equal(plain_weights[k], our_weights[k])]
    assert not changed, f"weights differ: {changed}"


def test_plain_grpo_is_deterministic(tiny_model_dir, tiny_tokenizer, reward_model_dir, tmp_path):
    """The premise of every comparison below: two plain `GRPOTrainer` runs with one seed are identical (sampled
    generation included), so any difference with ours is ours."""
    runs = [
        train(
            GRPOTrainer,
            tmp_path / f"run{i}",
            tiny_model_dir,
            tiny_tokenizer,
            **trainer_kwargs(tiny_tokenizer, reward_model_dir),
        )
        for i in range(2)
    ]
    assert_same_run(*runs)
    initial = runs[0][2].model.__class__.from_pretrained(tiny_model_dir).state_dict()
    assert any(not torch.equal(initial[k], runs[0][1][k]) for k in initial)  # training moved the weights
    assert any(k.startswith("rewards/tiny-reward-model/") for k in runs[0][0][0])  # the reward model did score
    assert "short_reward/max_tokens" in runs[0][0][0]  # log_metric reached the logs


def test_configs_match_field_for_field(tmp_path, tiny_tokenizer):
    """`EfficientGRPOConfig` built from `GRPOConfig`'s values ends with every `GRPOConfig` field equal, after both
    `__post_init__`s (derived values such as `generation_batch_size` and `scale_rewards` included)."""
    kwargs = config_kwargs(tmp_path, tiny_tokenizer, scale_rewards=True, reward_weights=[1.0, 0.5, 2.0])
    plain, ours = GRPOConfig(**kwargs), EfficientGRPOConfig(**kwargs)
    fields = [f.name for f in GRPOConfig.__dataclass_fields__.values() if f.name not in ("logging_dir",)]
    diff = {
        name: (getattr(plain, name), getattr(ours, name))
        for name in fields
        if getattr(plain, name) != getattr(ours, name)
    }
    assert not diff


def test_every_trl_loss_type_is_covered():
    """The loss cases below are every `loss_type` TRL's own help lists (a TRL upgrade that adds one fails here)."""
    help_text = GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"]
    supported = re.findall(r"'(\w+)'", help_text.split("Supported values are")[1].split(".")[0])
    assert set(supported) == {*LOSS_TYPES, "dapo"}


# Every loss_type GRPOConfig accepts in TRL 1.16 (its `loss_type` help), with the importance-sampling level each
# needs; "dapo", the default, is the first case below.
LOSS_TYPES = {
    "grpo": {},
    "dr_grpo": {},
    "bnpo": {},
    "cispo": {},
    "sapo": {},
    "luspo": {"importance_sampling_level": "sequence"},
    "vespo": {},
}

# The first case runs TRL's defaults (loss_type "dapo", scale_rewards "group"), so the lists below leave them out.
CASES = [
    pytest.param({}, {}, id="reward-model-and-functions"),
    pytest.param({"reward_weights": [2.0, 0.5, -1.0]}, {}, id="reward-weights"),
    pytest.param({}, {"reward_model": "path"}, id="reward-model-path"),
    *[pytest.param({"loss_type": name, **extra}, {}, id=f"loss-{name}") for name, extra in LOSS_TYPES.items()],
    *[pytest.param({"scale_rewards": s}, {}, id=f"scale-{s}") for s in ("batch", "none")],
    pytest.param({"multi_objective_aggregation": "normalize_then_sum"}, {}, id="normalize-then-sum"),
    pytest.param({"beta": 0.04, "num_iterations": 2}, {}, id="kl-two-iterations"),
    # TRL's soft reference sync stays TRL's (ProRL's hard resets, ref_reset_*, are off)
    pytest.param({"beta": 0.04, "sync_ref_model": True, "ref_model_sync_steps": 1}, {}, id="sync-ref-model"),
    pytest.param({"mask_truncated_completions": True}, {}, id="mask-truncated"),
    # a group of 8 over 2 micro-batches of 4 (what BroRL's groups of hundreds rely on; generation_chunk_size off)
    pytest.param({"num_generations": 8, "gradient_accumulation_steps": 2}, {}, id="group-over-micro-batches"),
    pytest.param({"chat_template_kwargs": {"enable_thinking": False}}, {}, id="chat-template-kwargs"),
    pytest.param(
        {"eval_strategy": "steps", "eval_steps": 2, "per_device_eval_batch_size": 4}, {"evaluate": True}, id="eval"
    ),
    pytest.param({}, {"dataset": "iterable"}, id="iterable-dataset"),
    pytest.param({}, {"peft": True}, id="peft-lora"),
]


@pytest.mark.parametrize(("args", "options"), CASES)
def test_unchanged_when_options_off(args, options, tiny_model_dir, tiny_tokenizer, reward_model_dir, tmp_path):
    """Plain `GRPOTrainer` and `EfficientGRPOTrainer` (no option of ours on) log the same TRL metrics and end with the
    same weights, for each TRL feature."""
    plain = train(
        GRPOTrainer, tmp_path / "plain", tiny_model_dir, tiny_tokenizer, args,
        **trainer_kwargs(tiny_tokenizer, reward_model_dir, **options),
    )  # fmt: skip
    ours = train(
        EfficientGRPOTrainer, tmp_path / "ours", tiny_model_dir, tiny_tokenizer, args,
        **trainer_kwargs(tiny_tokenizer, reward_model_dir, **options),
    )  # fmt: skip
    assert_same_run(plain, ours)
    if options.get("evaluate"):
        assert any("eval_reward" in entry for entry in plain[0])  # the evaluation did run
    if "chat_template_kwargs" in args:  # the kwarg does change the prompt the model sees
        tok = ours[2].processing_class
        msgs = [{"role": "user", "content": "2 + 3?"}]
        render = tok.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=True, **args["chat_template_kwargs"]
        )
        assert render.endswith("<think></think>")


def test_checkpoint_save_and_resume_with_reward_model(tiny_model_dir, tiny_tokenizer, reward_model_dir, tmp_path):
    """Issue 18 item 0: with a reward model in `reward_funcs`, checkpoints save (our state file is `{}`: no weights,
    no tensors) and a resume from checkpoint-1 works; the saving runs and the resumed runs of both trainers are
    identical (metrics and weights)."""
    args = {"max_steps": 3, "save_strategy": "steps", "save_steps": 1}
    runs, resumed = {}, {}
    for cls in (GRPOTrainer, EfficientGRPOTrainer):
        out = tmp_path / cls.__name__
        runs[cls] = train(
            cls, out, tiny_model_dir, tiny_tokenizer, args, **trainer_kwargs(tiny_tokenizer, reward_model_dir)
        )
        resumed[cls] = train(
            cls, tmp_path / f"{cls.__name__}-resumed", tiny_model_dir, tiny_tokenizer, args,
            resume_from_checkpoint=str(out / "checkpoint-1"),
            **trainer_kwargs(tiny_tokenizer, reward_model_dir),
        )  # fmt: skip
    assert_same_run(runs[GRPOTrainer], runs[EfficientGRPOTrainer])
    assert_same_run(resumed[GRPOTrainer], resumed[EfficientGRPOTrainer])
    assert resumed[EfficientGRPOTrainer][2].state.global_step == 3
    for step in (1, 2, 3):
        path = tmp_path / "EfficientGRPOTrainer" / f"checkpoint-{step}" / "trl_efficient_state.json"
        with open(path) as f:
            assert json.load(f) == {}  # no component of ours is on; the reward model is TRL's to save
        assert os.path.getsize(path) < 16
