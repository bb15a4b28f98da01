"""DRPO (methods.md §16): advantage-level formulation, its gradient equivalence with DRPO's loss, the trainer that
supplies the sampling policy's scores, config errors, recipe and YAML."""

import json
import math
import os
from types import SimpleNamespace

import pytest
import torch
from helpers import (
    RecordingMixin,
    ScriptedGenerationMixin,
    make_dataset,
    recipe_yaml_settings,
    tiny_cli_args,
    tiny_config,
)

from trl_efficient.methods.drpo import DRPOAdvantage, DRPOTrainer, drpo_advantages
from trl_efficient.rewards import correctness_reward

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
NAN = float("nan")


class DRPORecordingTrainer(RecordingMixin, DRPOTrainer, ScriptedGenerationMixin):
    def _record_batch(self, batch, trainer):
        super()._record_batch(batch, trainer)
        self.records[-1]["scores"] = batch.extras["drpo_seq_logp"].tolist()
        self.records[-1]["truncated"] = batch.truncated.tolist()


class TestAdvantages:
    def test_hand_values(self):
        out = drpo_advantages(
            torch.tensor([1.0, 1.0, 0.0, 0.0]),
            torch.tensor([10.0, 20.0, 30.0, 40.0]),
            torch.tensor([-1.0, -1.0, -1.0, -2.0]),
            4,
            length_norm=100,
            lam=0.1,
            tau=1.0,
        )
        # correct: exp((1 - .1)/.1) = e^9, exp(.8/.1) = e^8 -> w = 1/(1 + e^-1) = .731059, .268941 ; x G = 4
        # wrong: softmax(-1/1, -2/1) = .731059, .268941 -> minus, x 4
        assert out.tolist() == pytest.approx([2.924234, 1.075766, -2.924234, -1.075766], abs=1e-5)

    def test_large_lambda_and_tau_give_uniform_weights(self):
        out = drpo_advantages(
            torch.tensor([1.0, 0.0, 0.0, 1.0]),
            torch.tensor([1.0, 50, 90, 99]),
            torch.tensor([-0.1, -3.0, -0.5, -2.0]),
            4,
            length_norm=100,
            lam=1e9,
            tau=1e9,
        )
        assert out.tolist() == pytest.approx([2.0, -2.0, -2.0, 2.0], abs=1e-5)  # DisCO limit: 1/|+|, 1/|-|, x G

    def test_invalid_groups_and_unknown_rows_get_zero(self):
        correct = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 0.0, NAN, 0.0, 1.0, NAN, 0.0, 0.0])
        out = drpo_advantages(correct, torch.full((12,), 10.0), torch.zeros(12), 4, length_norm=100)
        # all correct -> 0 ; no correct (NaN is neither) -> 0 ; group 2: one correct (w 1), two wrong (1/2 each)
        assert out.tolist() == pytest.approx([0] * 8 + [4.0, 0.0, -2.0, -2.0], abs=1e-6)

    def test_all_truncated_group_with_a_correct_and_a_wrong_answer_is_trained_on(self):
        from trl_efficient.trainer import GroupBatch

        est = DRPOAdvantage(SimpleNamespace(max_completion_length=100, loss_type="grpo"))
        b = GroupBatch(
            rewards=torch.tensor([[1.0], [0.0], [1.0], [1.0]]),
            reward_names=["correctness_reward"],
            reward_weights=torch.ones(1),
            lengths=torch.tensor([100.0, 100, 100, 100]),
            truncated=torch.ones(4, dtype=torch.bool),
            group_size=2,
            correctness_index=0,
        )
        b.extras["drpo_seq_logp"] = torch.tensor([-1.0, -2.0, -1.0, -1.0])
        # DRPO's rule: a group counts iff it has a correct and a wrong answer; truncation plays no part.
        # group 0: one correct (w = 1), one wrong (softmax of one = 1) -> A = G * (1, -1) = (2, -2) ; group 1 all
        # correct -> 0
        assert est(b).tolist() == pytest.approx([2.0, -2.0, 0.0, 0.0])

    def test_gradient_equals_drpo_loss_at_the_sampling_policy(self):
        # A toy policy: free logits per position. DRPO's loss (compute_policy_loss_drpo, Q questions) and TRL's
        # loss_type='grpo' with the 'drpo' advantages (ratio exp(logp - logp.detach()), per-sequence token mean,
        # mean over rows) must have the same gradient.
        torch.manual_seed(0)
        G, Q, T, V = 4, 2, 5, 7
        logits = torch.randn(Q * G, T, V, requires_grad=True)
        tokens = torch.randint(V, (Q * G, T))
        mask = torch.tensor([[1] * n + [0] * (T - n) for n in (5, 3, 4, 2, 1, 5, 2, 3)], dtype=torch.float32)
        correct = torch.tensor([1.0, 0, 1, 0, 0, 1, 0, 0])
        lam, tau, C = 0.1, 10.0, T

        def scores():
            logp = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
            return logp, (logp * mask).sum(1) / mask.sum(1)

        logp, s = scores()
        drpo = 0.0
        for q in range(Q):
            rows = slice(q * G, (q + 1) * G)
            pos, neg = correct[rows] == 1, correct[rows] == 0
            w = torch.exp((1 - mask[rows].sum(1) / C) / lam)[pos]
            pos_term = (w * s[rows][pos]).sum() / w.sum()
            neg_term = tau * torch.logsumexp(s[rows][neg] / tau, 0) - tau * math.log(int(neg.sum()))
            drpo = drpo + pos_term - neg_term
        (-drpo / Q).backward()
        expected = logits.grad.clone()
        logits.grad = None

        adv = drpo_advantages(correct, mask.sum(1), s.detach(), G, length_norm=C, lam=lam, tau=tau)
        logp, _ = scores()
        ratio = torch.exp(logp - logp.detach())
        per_token = -ratio * adv.unsqueeze(1)
        ((per_token * mask).sum(1) / mask.sum(1)).mean().backward()
        torch.testing.assert_close(logits.grad, expected, atol=1e-6, rtol=1e-5)

    def test_config_errors_name_the_field(self, tmp_path):
        with pytest.raises(ValueError, match="needs loss_type='grpo'.*got loss_type='dapo'"):
            tiny_config(tmp_path, advantage_estimator="drpo")
        with pytest.raises(ValueError, match=r"advantage_kwargs\['lam'\]"):
            tiny_config(tmp_path, advantage_estimator="drpo", loss_type="grpo", advantage_kwargs={"lam": 0})
        est = DRPOAdvantage(SimpleNamespace(max_completion_length=10, loss_type="grpo"))
        assert est.length_norm == 10  # C defaults to max_completion_length
        with pytest.raises(RuntimeError, match="needs the sampling policy's per-completion scores"):
            from trl_efficient.trainer import GroupBatch

            est(
                GroupBatch(
                    rewards=torch.zeros(2, 1),
                    reward_names=["r"],
                    reward_weights=torch.ones(1),
                    lengths=torch.ones(2),
                    truncated=torch.zeros(2, dtype=torch.bool),
                    group_size=2,
                )
            )


class TestTrainer:
    def test_scores_and_advantages(self, tiny_model_dir, tmp_path):
        args = tiny_config(tmp_path, per_device_train_batch_size=8, advantage_estimator="drpo", loss_type="grpo")
        trainer = DRPORecordingTrainer(
            model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(32)
        )
        trainer.train()
        for rec in trainer.records:
            scores = torch.tensor(rec["scores"])
            assert scores.shape == (8,) and (scores < 0).all()  # mean token log-probs
            correct = torch.tensor([r[0] for r in rec["rewards"]])
            # DRPO's only group rule is its own (a group needs a correct and a wrong answer), which
            # drpo_advantages applies; no extra zeroing of all-equal or all-truncated groups
            expected = drpo_advantages(correct, torch.tensor(rec["lengths"]), scores, 4, length_norm=48)
            assert rec["advantages"] == pytest.approx(expected.tolist(), abs=1e-5)
        assert any(any(a != 0 for a in rec["advantages"]) for rec in trainer.records)

    def test_scores_equal_a_direct_forward_pass(self, tiny_model_dir, tmp_path):
        args = tiny_config(tmp_path, advantage_estimator="drpo", loss_type="grpo", max_steps=1)
        trainer = DRPORecordingTrainer(
            model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(8)
        )
        captured = {}
        original = trainer._sequence_scores

        def spy(output):
            captured["output"] = {k: v.clone() for k, v in output.items() if isinstance(v, torch.Tensor)}
            return original(output)

        trainer._sequence_scores = spy
        trainer.train()
        out = captured["output"]
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
        attn = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)  # the step-0 weights the scores were taken with
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=attn).logits[:, -out["completion_ids"].size(1) - 1 : -1]
        logp = torch.log_softmax(logits.float(), -1).gather(-1, out["completion_ids"].unsqueeze(-1)).squeeze(-1)
        m = out["completion_mask"].float()
        expected = (logp * m).sum(1) / m.sum(1)
        assert trainer.records[0]["scores"] == pytest.approx(expected.tolist(), abs=1e-4)

    def test_warns_when_vllm_importance_sampling_would_change_the_gradient(self, tiny_model_dir, tmp_path, caplog):
        import logging

        args = tiny_config(tmp_path, advantage_estimator="drpo", loss_type="grpo")
        trainer = DRPOTrainer(
            model=tiny_model_dir, reward_funcs=[correctness_reward], args=args, train_dataset=make_dataset(4)
        )
        # the check itself, on the states use_vllm / vllm_importance_sampling_correction can take (no vLLM on CPU)
        with caplog.at_level(logging.WARNING, logger="trl_efficient.methods.drpo"):
            assert trainer._warn_on_vllm_importance_sampling() is False  # use_vllm False
            trainer.use_vllm, trainer.vllm_importance_sampling_correction = True, False
            assert trainer._warn_on_vllm_importance_sampling() is False
            assert "importance" not in caplog.text
            trainer.vllm_importance_sampling_correction = True  # TRL 1.16's default
            assert trainer._warn_on_vllm_importance_sampling() is True
        assert "no longer has DRPO's gradient" in caplog.text

    def test_trainer_needs_correctness(self, tiny_model_dir, tmp_path):
        def other(completions, **kwargs):
            return [0.0] * len(completions)

        args = tiny_config(tmp_path, advantage_estimator="drpo", loss_type="grpo")
        with pytest.raises(ValueError, match="binary correctness reward"):
            DRPOTrainer(model=tiny_model_dir, reward_funcs=[other], args=args, train_dataset=make_dataset(4))


def test_drpo_yaml(tmp_path):
    from trl_efficient.api.training import train_main
    from trl_efficient.recipes import get_recipe

    recipe = get_recipe("drpo")
    assert recipe.trainer_cls is DRPOTrainer
    assert recipe.config_overrides["loss_type"] == "grpo"
    assert recipe.config_overrides["advantage_kwargs"] == {"lam": 0.1, "tau": 10.0}  # §16: λ 0.1, τ 10
    # TRL's vLLM IS ratio would reweight DRPO's gradient; the recipe and the YAML switch it off
    assert recipe.config_overrides["vllm_importance_sampling_correction"] is False
    config = recipe_yaml_settings("drpo")
    assert (config["num_generations"], config["temperature"], config["loss_type"]) == (8, 0.6, "grpo")
    assert config["use_vllm"] is True and config["vllm_importance_sampling_correction"] is False
    train_main(
        ["--config", os.path.join(ROOT, "configs", "drpo.yaml"), *tiny_cli_args(tmp_path, max_completion_length=12)]
    )
    with open(os.path.join(tmp_path, "trl_efficient_summary.json")) as f:
        assert json.load(f)["recipe"] == "drpo"
