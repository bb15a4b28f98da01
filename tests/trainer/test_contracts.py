"""The contracts a method plugs into (docs/architecture.md, "The group-stage pipeline"): the ordered public pipeline
steps, `GroupBatch.extras`, declared columns, `attach(trainer)`, rollout plans built through their registry entry,
and the declared model-card inputs."""

import os
from types import SimpleNamespace

import pytest
import torch
from helpers import ScriptedGenerationMixin, make_dataset, tiny_config
from huggingface_hub import ModelCard

from trl_efficient.core.state import StatefulComponent
from trl_efficient.hub.card import ModelCardInfo, finalize_model_card, render_method_section
from trl_efficient.recipes import get_recipe
from trl_efficient.rewards import correctness_reward
from trl_efficient.trainer import ROLLOUT_PLANS, EfficientGRPOConfig, EfficientGRPOTrainer, RolloutPlan
from trl_efficient.trainer.config import build_rollout_plan
from trl_efficient.trainer.rollout import RolloutAssignment

STEPS = ["run_stages", "compute_advantages", "apply_filter", "log_group_metrics", "update_state"]


class ConstantColumn(StatefulComponent):
    """A stateful component that adds a per-row column `row_weight` (declared) and records its attachment."""

    state_key = "constant_column"
    provides_columns = ("row_weight",)

    def __init__(self):
        self.attached_to, self.updates = [], 0

    def attach(self, trainer):
        self.attached_to.append(trainer)

    def row_columns(self, row):
        return {"row_weight": 0.5}

    def update(self, batch):
        self.updates += 1

    def state_dict(self):
        return {"updates": self.updates}

    def load_state_dict(self, state):
        self.updates = state["updates"]


def weighted_correctness(completions, solution, row_weight, **kwargs):
    """Needs the `row_weight` column, which only `ConstantColumn` provides."""
    return [w * r for w, r in zip(row_weight, correctness_reward(completions, solution), strict=True)]


class ExtrasEstimator:
    """Reads the per-row `batch.extras["test_scores"]` a group stage wrote; advantages = those scores."""

    def __init__(self):
        self.seen = []

    def __call__(self, batch):
        scores = batch.extras["test_scores"]
        self.seen.append(scores.clone())
        return scores


class OrderTrainer(ScriptedGenerationMixin, EfficientGRPOTrainer):
    """Extends every public pipeline step with `super()` and records the order in which they run."""

    def __init__(self, *args, **kwargs):
        self.calls = []
        super().__init__(*args, group_stages=[self.scoring_stage], **kwargs)

    def scoring_stage(self, batch, trainer):
        self.calls.append("stage")
        batch.extras["test_scores"] = torch.arange(batch.num_rows, dtype=torch.float32)

    def group_stage(self, batch, output):
        self.calls.append("group_stage")
        super().group_stage(batch, output)

    def run_stages(self, batch, output):
        self.calls.append("run_stages")
        super().run_stages(batch, output)

    def compute_advantages(self, batch, output):
        self.calls.append("compute_advantages")
        super().compute_advantages(batch, output)

    def apply_filter(self, batch, output):
        self.calls.append("apply_filter")
        super().apply_filter(batch, output)

    def log_group_metrics(self, batch, output):
        self.calls.append("log_group_metrics")
        super().log_group_metrics(batch, output)

    def update_state(self, batch, output):
        self.calls.append("update_state")
        super().update_state(batch, output)

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        self.advantages = out["advantages"].tolist()
        return out


def test_pipeline_runs_public_steps_in_order_and_extras_reach_the_estimator(tiny_model_dir, tmp_path):
    column = ConstantColumn()
    trainer = OrderTrainer(
        model=tiny_model_dir,
        reward_funcs=[weighted_correctness],
        args=tiny_config(tmp_path, max_steps=1, advantage_estimator="group_zscore"),
        train_dataset=make_dataset(8),
        stateful_components=[column],
    )
    assert column.attached_to == [trainer]  # attach(trainer) is called once, at construction
    estimator = trainer.advantage_estimator = ExtrasEstimator()  # any (batch) -> (B,) callable is an estimator
    trainer.train()
    # one generation batch of 4 rows (1 prompt x G=4): group_stage, then the five steps in the documented order, the
    # group_stages callables inside run_stages
    assert trainer.calls == ["group_stage", "run_stages", "stage", *STEPS[1:]]
    assert [s.tolist() for s in estimator.seen] == [[0.0, 1.0, 2.0, 3.0]]  # what the stage put in batch.extras
    assert trainer.advantages == [0.0, 1.0, 2.0, 3.0]  # this process's slice of the estimator's advantages
    assert column.updates == 1  # update_state, training only


def test_reward_column_must_be_declared(tiny_model_dir, tmp_path):
    args = tiny_config(tmp_path)
    with pytest.raises(ValueError, match="'row_weight' column"):
        EfficientGRPOTrainer(
            model=tiny_model_dir, reward_funcs=[weighted_correctness], args=args, train_dataset=make_dataset(8)
        )
    trainer = EfficientGRPOTrainer(
        model=tiny_model_dir,
        reward_funcs=[weighted_correctness],
        args=args,
        train_dataset=make_dataset(8),
        stateful_components=[ConstantColumn()],
    )
    accepted = trainer.accepted_reward_columns()
    # TRL's kwargs + dataset columns + the trainer's `group_size`, `finished` + what components declare; nothing else
    assert accepted == {
        "prompts",
        "completions",
        "completion_ids",
        "trainer_state",
        "log_extra",
        "log_metric",
        "prompt",
        "solution",
        "idx",
        "group_size",
        "finished",
        "row_weight",
    }


def test_history_and_plan_columns_come_from_their_declarations(tiny_model_dir, tmp_path):
    args = tiny_config(tmp_path, track_prompt_history=True, rollout_plan="budget", budgets=[8, 16])
    trainer = EfficientGRPOTrainer(
        model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(8)
    )
    declared = {"history_best_length", "history_pass_rate", "budget", "budget_statement"}
    assert declared <= trainer.accepted_reward_columns()


def test_component_needs_columns_are_checked(tiny_model_dir, tmp_path):
    class NeedsLevel(ConstantColumn):
        needs_columns = ("level",)

    with pytest.raises(ValueError, match=r"constant_column needs the column\(s\) \['level'\]"):
        EfficientGRPOTrainer(
            model=tiny_model_dir,
            reward_funcs=[correctness_reward],
            args=tiny_config(tmp_path),
            train_dataset=make_dataset(8),
            stateful_components=[NeedsLevel()],
        )


@pytest.mark.parametrize("name", ROLLOUT_PLANS.names())
def test_every_registered_rollout_plan_builds_from_the_config(name, tmp_path):
    cfg = EfficientGRPOConfig(
        output_dir=str(tmp_path),
        rollout_plan=name,
        budgets=[8, 16],
        max_steps=10,  # step schedules (curriculum, LAPO's stage switch) spread over max_steps
        num_generations=4,
        per_device_train_batch_size=4,
        use_cpu=True,
        report_to="none",
    )
    plan = build_rollout_plan(cfg)
    assert type(plan) is ROLLOUT_PLANS.get(name)
    assert type(ROLLOUT_PLANS.get(name).from_config(cfg)) is type(plan)
    assert plan.provides_columns == tuple(plan.metadata_keys)


def test_unset_plan_is_none_and_base_from_config_takes_no_settings(tmp_path):
    cfg = EfficientGRPOConfig(
        output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=4, use_cpu=True, report_to="none"
    )
    assert build_rollout_plan(cfg) is None

    class Plain(RolloutPlan):
        metadata_keys = ("tag",)

        def num_prompt_subgroups(self, group_size):
            return 1

        def assign(self, row, group_pos, group_size, group_id, step):
            return RolloutAssignment(metadata={"tag": 1})

    assert isinstance(Plain.from_config(cfg), Plain) and Plain().provides_columns == ("tag",)


def _card_trainer(info):
    return SimpleNamespace(
        args=SimpleNamespace(advantage_estimator="grpo", completion_filter=None),
        reward_weights=torch.ones(1),
        reward_func_names=["correctness_reward"],
        reward_funcs=[correctness_reward],
        rollout_plan=None,
        card_info=info,
    )


def test_model_card_info_reaches_the_card(tmp_path):
    info = ModelCardInfo(
        recipe=get_recipe("kimi"), datasets=["gsm8k", "math500"], base_model_id="org/base", summary="SUMMARY-MARKER"
    )
    text = render_method_section(_card_trainer(info))
    assert "gsm8k, math500" in text and "SUMMARY-MARKER" in text and "arXiv:2501.12599" in text
    assert "-" in render_method_section(_card_trainer(ModelCardInfo()))  # defaults: custom recipe, no datasets
    path = os.path.join(tmp_path, "README.md")
    ModelCard("---\nlicence: x\n---\n# m\n").save(path)
    card = finalize_model_card(_card_trainer(info), path)
    assert card.data.base_model == "org/base" and "SUMMARY-MARKER" in card.text


def test_update_card_info_replaces_fields(tiny_model_dir, tmp_path):
    trainer = EfficientGRPOTrainer(
        model=tiny_model_dir,
        reward_funcs=[correctness_reward],
        args=tiny_config(tmp_path),
        train_dataset=make_dataset(8),
        card_info=ModelCardInfo(datasets=["gsm8k"]),
    )
    info = trainer.update_card_info(summary="S")
    assert trainer.card_info is info and info.datasets == ("gsm8k",) and info.summary == "S"


def test_saved_training_arguments_never_hold_the_hub_token(tmp_path):
    """`training_args.bin` (saved by the Trainer with torch.save, uploaded by Trainer.push_to_hub) drops the token."""
    import pickle

    import torch

    from trl_efficient.trainer import EfficientGRPOConfig

    args = EfficientGRPOConfig(output_dir=str(tmp_path), hub_token="hf_SECRETsecret123", use_cpu=True, bf16=False)
    assert args.hub_token == "hf_SECRETsecret123"  # the live config keeps it for the run's own pushes
    path = tmp_path / "training_args.bin"
    torch.save(args, path)
    assert b"hf_SECRETsecret123" not in path.read_bytes()
    restored = pickle.loads(pickle.dumps(args))
    assert restored.hub_token is None and restored.output_dir == str(tmp_path)


class _FinishedTrainer(ScriptedGenerationMixin, EfficientGRPOTrainer):
    """Scripted rollouts (an EOS id after `</think>`, none otherwise) that keep each gathered `GroupBatch`; the first
    row of every call is cut (its EOS dropped) and the second ends with EOS, so both kinds occur whatever the script
    draws for this tokenizer's prompt ids."""

    def _generate_single_turn(self, prompt_ids, *args, **kwargs):
        completions, extra = super()._generate_single_turn(prompt_ids, *args, **kwargs)
        eos = self.processing_class.eos_token_id
        if completions and completions[0][-1:] == [eos]:
            completions[0] = completions[0][:-1]
        if len(completions) > 1 and completions[1][-1:] != [eos]:
            completions[1] = completions[1] + [eos]
        return completions, extra

    def group_stage(self, batch, output):
        self.batches = getattr(self, "batches", []) + [batch]
        super().group_stage(batch, output)


def test_every_reward_receives_finished_and_the_group_batch_agrees(tiny_model_dir, tmp_path):
    """`finished` (docs/adding-a-method.md, "Component contracts"): the completion's last id is one the trainer stops
    on; `GroupBatch.truncated` is its negation, row by row (the one rule, `core.lengths.completion_finished`)."""
    seen = []

    def finished_reward(completions, completion_ids, finished, **kwargs):
        seen.append([(bool(f), ids[-1] if ids else None) for f, ids in zip(finished, completion_ids, strict=True)])
        return [float(f) for f in finished]

    args = tiny_config(tmp_path, max_steps=4, per_device_train_batch_size=8)
    trainer = _FinishedTrainer(
        model=tiny_model_dir, reward_funcs=[finished_reward], args=args, train_dataset=make_dataset(8)
    )
    assert "finished" in trainer.accepted_reward_columns()
    trainer.train()
    eos = set(trainer.eos_token_ids)
    rows = [row for call in seen for row in call]
    assert [f for f, _ in rows] == [last in eos for _, last in rows]
    assert {f for f, _ in rows} == {True, False}  # the script ends some completions with EOS and not others
    assert [t for b in trainer.batches for t in b.truncated.tolist()] == [not f for f, _ in rows]
