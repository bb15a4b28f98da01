"""EfficientGRPOTrainer hooks on a tiny in-process model (scripted rollouts unless stated otherwise)."""

import json
import os

import pytest
import torch
from helpers import RecordingTrainer, make_dataset, tiny_config
from trl import GRPOTrainer

from trl_efficient.rewards import correctness_reward, get_kimi_length_reward
from trl_efficient.trainer import EfficientGRPOTrainer, group_zscore


def _trainer(tiny_model_dir, tmp_path, rewards=None, cls=RecordingTrainer, dataset_size=32, **overrides):
    args = tiny_config(tmp_path, **overrides)
    return cls(
        model=tiny_model_dir,
        reward_funcs=rewards or [correctness_reward, get_kimi_length_reward(warmup_ratio=0.0)],
        args=args,
        train_dataset=make_dataset(dataset_size),
    )


class TestDefaultPathUnchanged:
    def test_advantages_equal_trl_default(self, tiny_model_dir, tmp_path):
        # With every option off, the advantages are TRL's own: recompute them from the recorded rewards.
        trainer = _trainer(tiny_model_dir, tmp_path)
        trainer.train()
        for rec in trainer.records:
            rewards = torch.tensor(rec["rewards"])
            total = rewards.nansum(1)  # weights 1, 1
            expected = group_zscore(total, 4)
            torch.testing.assert_close(torch.tensor(rec["advantages"]), expected, atol=1e-5, rtol=1e-5)

    def test_group_zscore_estimator_matches_trl(self, tiny_model_dir, tmp_path):
        a = _trainer(tiny_model_dir, tmp_path / "a")
        a.train()
        b = _trainer(tiny_model_dir, tmp_path / "b", advantage_estimator="group_zscore")
        b.train()
        for ra, rb in zip(a.records, b.records, strict=True):
            assert ra["rewards"] == rb["rewards"]
            torch.testing.assert_close(torch.tensor(ra["advantages"]), torch.tensor(rb["advantages"]))

    def test_real_generation_trains_and_params_change(self, tiny_model_dir, tmp_path, tiny_tokenizer):
        # Real transformers generation (not scripted), plain options: a normal GRPO run.
        args = tiny_config(
            tmp_path, learning_rate=0.1, generation_kwargs={"sequence_bias": [[[tiny_tokenizer.eos_token_id], 4.0]]}
        )
        trainer = EfficientGRPOTrainer(
            model=tiny_model_dir,
            reward_funcs=[correctness_reward, get_kimi_length_reward(warmup_ratio=0.0)],
            args=args,
            train_dataset=make_dataset(),
        )
        before = {n: p.clone() for n, p in trainer.model.named_parameters()}
        trainer.train()
        assert trainer.state.log_history[-1]["train_loss"] is not None
        changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p)]
        assert changed, "no parameter changed"
        logged = trainer.state.log_history[0]
        assert "trl_efficient/tokens_incorrect_mean" in logged or "trl_efficient/tokens_correct_mean" in logged


class TestRolloutPlan:
    def test_budget_subgroups_get_their_prompts_metadata_and_caps(self, tiny_model_dir, tmp_path):
        trainer = _trainer(
            tiny_model_dir,
            tmp_path,
            rollout_plan="budget",
            budgets=[3, 40],
            budget_placement="system",
            budget_template="Use at most {budget} tokens.",
            budget_hard_cap=True,
        )
        trainer.train()
        for rec in trainer.records:
            budgets = rec["metadata"]["budget"]
            assert budgets == [3, 3, 40, 40] * (len(budgets) // 4)
            # each local row's prompt carries its own subgroup's budget statement
            for prompt, budget in zip(rec["prompts_decoded"], budgets, strict=True):
                assert f"Use at most {budget} tokens." in prompt
            for length, budget in zip(rec["lengths"], budgets, strict=True):
                assert length <= budget  # hard cap
        logged = {k for entry in trainer.state.log_history for k in entry}
        assert "trl_efficient/budget_3/mean_length" in logged and "trl_efficient/budget_40/mean_length" in logged

    def test_prefill_renders_chat_template_and_appends(self, tiny_model_dir, tmp_path):
        trainer = _trainer(tiny_model_dir, tmp_path, rollout_plan="budget", budgets=[128, 256], max_steps=1)
        trainer.train()
        prompt = trainer.records[0]["prompts_decoded"][0]
        assert prompt.endswith("<|im_start|>assistant\n<think> I will answer the question with 128 tokens")

    def test_target_length_metadata_reaches_rewards(self, tiny_model_dir, tmp_path):
        seen = []

        def spy_reward(completions, target_length, length_mode, **kwargs):
            seen.extend(zip(target_length, length_mode))
            return [0.0] * len(completions)

        trainer = _trainer(
            tiny_model_dir,
            tmp_path,
            rewards=[spy_reward],
            rollout_plan="target_length",
            target_length_range=[10, 20],
            max_steps=2,
        )
        trainer.train()
        # default target_length_per="prompt" (L1, methods.md §6): the 4 rollouts of the step's one group share a
        # target, which is in each of their prompts and in each reward column row
        assert len(seen) == 8
        for step, rec in enumerate(trainer.records):
            rows = seen[4 * step : 4 * step + 4]
            ((target, mode),) = set(rows)
            assert 10 <= target <= 20 and mode == "exact"
            assert rec["metadata"]["target_length"] == [target] * 4
            for prompt in rec["prompts_decoded"]:
                assert prompt.count(" Think for ") == 1 and f"? Think for {target} tokens.<|im_end|>" in prompt


class TestFilterAndEstimators:
    def test_zero_std_filter_masks_completions(self, tiny_model_dir, tmp_path):
        def constant_reward(completions, **kwargs):
            return [1.0] * len(completions)

        trainer = _trainer(tiny_model_dir, tmp_path, rewards=[constant_reward], completion_filter="zero_std")
        trainer.train()
        for rec in trainer.records:
            assert rec["completion_mask_sums"] == [0] * len(rec["completion_mask_sums"])
            assert rec["advantages"] == [0.0] * len(rec["advantages"])
            assert rec["num_items_in_batch"] == 0

    def test_shortest_k_keeps_k_per_group(self, tiny_model_dir, tmp_path):
        trainer = _trainer(tiny_model_dir, tmp_path, completion_filter="shortest_k", filter_kwargs={"k": 2})
        trainer.train()
        for rec in trainer.records:
            kept = [m > 0 for m in rec["completion_mask_sums"]]
            assert sum(kept) == 2
            lengths = rec["lengths"]
            kept_lengths = sorted(n for n, k in zip(lengths, kept) if k)
            assert kept_lengths == sorted(lengths)[:2]

    def test_all_equal_rewards_give_zero_not_nan(self, tiny_model_dir, tmp_path):
        def constant_reward(completions, **kwargs):
            return [0.0] * len(completions)

        trainer = _trainer(
            tiny_model_dir, tmp_path, rewards=[constant_reward], advantage_estimator="group_center_batch_whiten"
        )
        trainer.train()
        for rec in trainer.records:
            assert rec["advantages"] == [0.0] * 4


class TestStatefulComponents:
    def test_prompt_history_saved_in_checkpoint(self, tiny_model_dir, tmp_path):
        trainer = _trainer(tiny_model_dir, tmp_path, track_prompt_history=True, save_strategy="steps", save_steps=2)
        trainer.train()
        path = os.path.join(tmp_path, "checkpoint-2", "trl_efficient_state.json")
        with open(path) as f:
            saved = json.load(f)
        assert saved["prompt_history"]["attempts"]  # some prompt was seen
        assert saved["prompt_history"] == trainer.stateful_components["prompt_history"].state_dict()
        assert set(saved) == {"prompt_history"}

    def test_history_columns_reach_rewards(self, tiny_model_dir, tmp_path):
        seen = []

        def spy_reward(completions, history_pass_rate, **kwargs):
            seen.append(list(history_pass_rate))
            return [0.0] * len(completions)

        trainer = _trainer(
            tiny_model_dir,
            tmp_path,
            rewards=[correctness_reward, spy_reward],
            track_prompt_history=True,
            max_steps=6,
            dataset_size=2,
        )
        trainer.train()
        assert len(seen) == len(trainer.records) == 6
        # Running pass rate of a prompt = correct / scorable answers over its *earlier* batches (PromptHistory), -1
        # before any; recomputed here from the recorded correctness column (1 / 0 / NaN for an unscorable gold).
        earlier: dict[int, list[float]] = {}
        revisits = 0
        for columns, rec in zip(seen, trainer.records, strict=True):
            (idx,) = set(rec["metadata"]["idx"])  # one group of G = 4 per step
            scorable = [c for c, _ in rec["rewards"] if c == c]
            past = earlier.get(idx, [])
            assert columns == [sum(past) / len(past) if past else -1.0] * 4
            revisits += bool(past)
            earlier[idx] = past + scorable
        assert revisits >= 4  # 6 steps over 2 prompts: at least 4 batches see a history

    def test_missing_idx_column_is_a_clear_error(self, tiny_model_dir, tmp_path):
        with pytest.raises(ValueError, match="stable `idx` column"):
            RecordingTrainer(
                model=tiny_model_dir,
                reward_funcs=[correctness_reward],
                args=tiny_config(tmp_path, track_prompt_history=True),
                train_dataset=make_dataset().remove_columns("idx"),
            )


class TestBadInputs:
    def test_missing_solution_column_fails_at_construction(self, tiny_model_dir, tmp_path):
        with pytest.raises(ValueError, match="needs a 'solution' column"):
            RecordingTrainer(
                model=tiny_model_dir,
                reward_funcs=[correctness_reward],
                args=tiny_config(tmp_path),
                train_dataset=make_dataset().remove_columns("solution"),
            )

    def test_bad_completions_and_golds_never_kill_training(self, tiny_model_dir, tmp_path):
        # garbage golds: unparseable, empty, None-like; completions are scripted (some never close </think>)
        dataset = make_dataset(8).map(
            lambda row, i: {"solution": ["x^^2)", "", "#### ", "42"][i % 4]}, with_indices=True
        )
        trainer = RecordingTrainer(
            model=tiny_model_dir,
            reward_funcs=[correctness_reward, get_kimi_length_reward(warmup_ratio=0.0)],
            args=tiny_config(tmp_path, advantage_estimator="group_center_batch_whiten"),
            train_dataset=dataset,
        )
        trainer.train()
        for rec in trainer.records:
            assert all(a == a for a in rec["advantages"])  # no NaN


class TestConfigErrors:
    @pytest.mark.parametrize(
        "overrides, match",
        [
            ({"rollout_plan": "budget", "budgets": [1, 2, 3]}, "divisible by the number of budgets"),
            ({"rollout_plan": "budget", "budgets": [-5, 10]}, "positive"),
            ({"rollout_plan": "budget"}, "needs `budgets`"),
            ({"rollout_plan": "budget", "budgets": [10, 999], "budget_hard_cap": True}, "exceed max_completion_length"),
            ({"rollout_plan": "nope"}, "rollout_plan must be one of"),
            ({"advantage_estimator": "nope"}, "advantage_estimator must be"),
            ({"completion_filter": "nope"}, "completion_filter must be one of"),
            ({"length_unit": "words"}, "length_unit must be one of"),
            ({"length_scope": "middle"}, "length_scope must be one of"),
            ({"completion_filter": "shortest_k", "filter_kwargs": {"k": 9}}, "k must be in"),
            (
                {"completion_filter": "shortest_k", "filter_kwargs": {"kk": 9}},
                r"unknown argument\(s\) \['kk'\] .*valid names: \['k'",
            ),
            ({"rollout_plan": "target_length", "target_length_range": [50, 10]}, "0 < low <= high"),
        ],
    )
    def test_bad_configs_fail_at_config_time(self, tmp_path, overrides, match):
        with pytest.raises(ValueError, match=match):
            tiny_config(tmp_path, **overrides)

    def test_unknown_correctness_reward(self, tiny_model_dir, tmp_path):
        with pytest.raises(ValueError, match="correctness_reward='nope'"):
            _trainer(tiny_model_dir, tmp_path, correctness_reward="nope")


class TestRewardsInPlainTRL:
    def test_group_reward_inside_plain_grpo_trainer(self, tiny_model_dir, tmp_path, tiny_tokenizer):
        # A plain TRL GRPOTrainer: the group reward gets num_generations from its factory and is correct there.
        from trl import GRPOConfig

        args = GRPOConfig(
            output_dir=str(tmp_path),
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=16,
            max_steps=1,
            report_to="none",
            use_cpu=True,
            bf16=False,
            activation_checkpointing=False,
            save_strategy="no",
            seed=0,
            generation_kwargs={"sequence_bias": [[[tiny_tokenizer.eos_token_id], 4.0]]},
        )
        kimi = get_kimi_length_reward(num_generations=4, warmup_ratio=0.0)
        calls = []

        def kimi_spy(completions, completion_ids, **kwargs):
            out = kimi(completions=completions, completion_ids=completion_ids, **kwargs)
            correct = correctness_reward(completions=completions, **kwargs)
            calls.append(([len(ids) for ids in completion_ids], correct, out))
            return out

        trainer = GRPOTrainer(
            model=tiny_model_dir,
            reward_funcs=[correctness_reward, kimi_spy],
            args=args,
            train_dataset=make_dataset(),
        )
        trainer.train()
        assert trainer.state.log_history[-1]["train_loss"] is not None
        # Kimi k1.5 (arXiv 2501.12599 §2.3.3) per group of 4: lambda = 0.5 - (L - min L) / (max L - min L), 0 when
        # all lengths are equal; correct -> lambda, wrong -> min(0, lambda). Recomputed from the lengths seen.
        ((lengths, correct, out),) = calls
        assert len(lengths) == 4
        lo, hi = min(lengths), max(lengths)
        lam = [0.5 - (n - lo) / (hi - lo) if hi > lo else 0.0 for n in lengths]
        assert out == pytest.approx([v if c == 1.0 else min(0.0, v) for v, c in zip(lam, correct, strict=True)])
