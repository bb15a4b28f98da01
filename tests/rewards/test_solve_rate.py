"""ALP, GRPO-λ and ASRR (trl_efficient/rewards/solve_rate.py) and ASRR's no-think plan (trl_efficient/methods/asrr.py),
single process. Expected values are computed by hand from the methods.md formulas (§14, §17, §24); the arithmetic is
in the comments."""

import math
import pickle
from types import SimpleNamespace

import pytest

from trl_efficient.eval.evaluate import build_prompt_text, parse_mode
from trl_efficient.methods.asrr import ASRRRolloutPlan
from trl_efficient.prompts import ASRR_NO_THINK_PREFIX
from trl_efficient.rewards import get_alp_reward, get_asrr_reward, get_grpo_lambda_reward
from trl_efficient.rewards.solve_rate import asrr_alpha, grpo_lambda_top_groups
from trl_efficient.trainer.rollout import ROLLOUT_PLANS, apply_assignment

RIGHT, WRONG = r"\boxed{1}", r"\boxed{2}"


def rows(*spec):
    """`rows((True, 10), (False, 30), ...)` -> reward kwargs with gold "1" and token lengths from `completion_ids`."""
    return dict(
        completions=[RIGHT if ok else WRONG for ok, _ in spec],
        solution=["1"] * len(spec),
        completion_ids=[[0] * n for _, n in spec],
    )


# Two groups of G = 4 (same layout as tests/rewards/test_group.py):
# group 1: correct 10, correct 20, wrong 30, wrong 50 ; group 2: wrong 12, correct 20, correct 28, wrong 36
TWO_GROUPS = rows((True, 10), (True, 20), (False, 30), (False, 50), (False, 12), (True, 20), (True, 28), (False, 36))


# ----------------------------------------------------------------------------------------------------------- ALP
class TestALP:
    def test_two_mixed_groups(self):
        out = get_alp_reward(max_length=100, num_generations=4)(**TWO_GROUPS)
        # both groups: p = 2/4 = 0.5 ; price = beta/N * max(0.5, 1/4) = 0.5/100 * 0.5 = 0.0025 per token
        expected = [
            1 - 0.025,  # correct, 10 tokens
            1 - 0.05,  # correct, 20
            -0.075,  # wrong, 30
            -0.125,  # wrong, 50
            -0.03,  # wrong, 12
            1 - 0.05,  # correct, 20
            1 - 0.07,  # correct, 28
            -0.09,  # wrong, 36
        ]
        assert out == pytest.approx(expected)

    def test_all_correct_pays_full_price_and_full_length_still_beats_wrong(self):
        out = get_alp_reward(max_length=100, num_generations=2)(**rows((True, 10), (True, 100)))
        # p = 1: price 0.5/100 = 0.005 ; 1 - 0.05 = 0.95 ; full length N: 1 - 0.5 = 0.5 (>= 0 >= any wrong answer)
        assert out == pytest.approx([0.95, 0.5])

    def test_all_wrong_uses_the_one_over_k_floor_and_extreme_lengths(self):
        out = get_alp_reward(max_length=100, num_generations=4)(
            **rows((False, 0), (False, 4), (False, 80), (False, 400))
        )
        # p = 0 -> max(0, 1/4) = 0.25 ; price 0.5/100 * 0.25 = 0.00125 ; 400 tokens (4N, e.g. chars) -> -0.5
        assert out == pytest.approx([0.0, -0.005, -0.1, -0.5])

    def test_single_correct_equals_the_floor(self):
        out = get_alp_reward(max_length=100, num_generations=4)(
            **rows((True, 40), (False, 40), (False, 40), (False, 40))
        )
        # p = 1/4 = 1/K ; price 0.00125 ; equal lengths 40: 1 - 0.05 = 0.95, wrong -0.05
        assert out == pytest.approx([0.95, -0.05, -0.05, -0.05])

    def test_unscorable_row_is_none_and_unsolved(self):
        out = get_alp_reward(max_length=100, num_generations=2)(
            completions=[RIGHT, RIGHT], solution=["1", ""], completion_ids=[[0] * 10, [0] * 20]
        )
        # p = 1/2 (the None row counts as unsolved, K = 2) ; price 0.0025 ; 1 - 0.025
        assert out == [pytest.approx(0.975), None]

    def test_beta_zero_is_plain_correctness_and_pickles(self):
        reward = get_alp_reward(max_length=100, num_generations=4, beta=0.0)
        clone = pickle.loads(pickle.dumps(reward))
        assert clone(**TWO_GROUPS, group_size=[4] * 8, trainer_state=None) == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]
        assert clone.__name__ == "alp_reward"

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [({"max_length": 0}, "max_length must be > 0"), ({"max_length": 10, "beta": -1.0}, "beta must be >= 0"),
         ({"max_length": 10, "num_generations": 0}, "num_generations")],
    )  # fmt: skip
    def test_bad_args(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_alp_reward(**kwargs)


# ------------------------------------------------------------------------------------------------------ GRPO-λ
class TestGRPOLambda:
    def test_ranking_with_ties(self):
        ratios = [0.5, 1.0, 0.25, 1.0, 0.75]
        # order by (-ratio, index): 1, 3, 4, 0, 2
        assert grpo_lambda_top_groups(ratios, 0.2) == [1]  # ceil(1.0) = 1: the tie 1.0/1.0 goes to group 1
        assert grpo_lambda_top_groups(ratios, 0.4) == [1, 3]  # ceil(2.0) = 2
        assert grpo_lambda_top_groups(ratios, 0.6) == [1, 3, 4]  # ceil(3.0) = 3
        # a tie at the cut-off: 0.5, 0.5, 0.5 behind 1.0, two slots -> group 0 and the lowest-index 0.5 (group 1)
        assert grpo_lambda_top_groups([1.0, 0.5, 0.5, 0.5], 0.5) == [0, 1]
        assert grpo_lambda_top_groups([0.5, 0.5, 0.5, 1.0], 0.5) == [0, 3]

    def test_rounding(self):
        four, two = [1.0, 0.75, 0.5, 0.25], [1.0, 0.5]
        assert grpo_lambda_top_groups(four, 0.2, "ceil") == [0]  # ceil(0.8) = 1
        assert grpo_lambda_top_groups(four, 0.2, "round") == [0]  # round(0.8) = 1
        assert grpo_lambda_top_groups(four, 0.2, "floor") == []  # floor(0.8) = 0
        assert grpo_lambda_top_groups(two, 0.2, "round") == []  # round(0.4) = 0
        assert grpo_lambda_top_groups(two, 0.2, "ceil") == [0]  # ceil(0.4) = 1
        assert grpo_lambda_top_groups([0.0] * 15, 0.2) == [0, 1, 2]  # 0.2 * 15 = 3 (not 3.0000000000000004 -> 4)
        assert grpo_lambda_top_groups(four, 0.0) == [] and grpo_lambda_top_groups(four, 1.0) == [0, 1, 2, 3]

    def test_batch_of_three_groups(self):
        batch = rows(
            (True, 10), (True, 20), (False, 30), (False, 50),  # group 0: ratio 2/4
            (True, 10), (True, 20), (True, 30), (False, 5),  # group 1: ratio 3/4 -> the top ceil(0.2 * 3) = 1
            (False, 7), (True, 9), (True, 99), (True, 1000),  # group 2: ratio 3/4, tie lost to group 1 (index)
        )  # fmt: skip
        out = get_grpo_lambda_reward(num_generations=4)(**batch)
        # group 1's correct lengths 10, 20, 30: mean 20, population std sqrt(200/3) ; z = -+10/sqrt(200/3) = -+sqrt(1.5)
        z = math.sqrt(1.5)
        expected = [
            1.0, 1.0, 0.0, 0.0,  # accuracy group: 0/1
            1 - 0.6 / (1 + math.exp(z)),  # 1 - 0.6 sigmoid(-z) = 0.863738...
            1 - 0.6 * 0.5,  # z = 0: sigmoid 0.5 -> 0.7
            1 - 0.6 / (1 + math.exp(-z)),  # 1 - 0.6 sigmoid(z) = 0.536262...
            0.0,  # wrong in an efficiency group: 0, not penalised (paper; unlike the third-party class)
            0.0, 1.0, 1.0, 1.0,  # accuracy group: extreme lengths do not matter
        ]  # fmt: skip
        assert out == pytest.approx(expected, abs=1e-6)

    def test_population_std_not_sample_std(self):
        # arXiv 2505.18086 writes std_c without saying population or sample std; we use the population std
        # (divide by n). Correct lengths 10, 20, 30: mean 20, squared deviations 100 + 0 + 100 = 200.
        #   population: std = sqrt(200 / 3) = 8.164966, z = -+10 / 8.164966 = -+1.224745
        #     -> 1 - 0.6 sigmoid(-1.224745) = 1 - 0.6 * 0.227103 = 0.863738 ; 0.7 ; 1 - 0.6 * 0.772897 = 0.536262
        #   sample (the other reading, divide by n - 1): std = sqrt(200 / 2) = 10, z = -+1
        #     -> 1 - 0.6 sigmoid(-1) = 1 - 0.6 * 0.268941 = 0.838635 ; 0.7 ; 1 - 0.6 * 0.731059 = 0.561365
        reward = get_grpo_lambda_reward(num_generations=3, top_fraction=1.0)
        out = reward(**rows((True, 10), (True, 20), (True, 30)))
        assert out == pytest.approx([0.863738, 0.7, 0.536262], abs=1e-6)
        assert out[0] != pytest.approx(0.838635, abs=1e-3) and out[2] != pytest.approx(0.561365, abs=1e-3)

    def test_single_correct_and_equal_lengths(self):
        reward = get_grpo_lambda_reward(num_generations=3, top_fraction=1.0)
        out = reward(**rows((True, 50), (False, 10), (False, 90), (True, 8), (True, 8), (True, 8)))
        # group 0: one correct -> std 1, z = (50 - 50)/1 = 0 -> 0.7 ; group 1: std 0 -> z = 0/(0 + 1e-6) = 0 -> 0.7
        assert out == pytest.approx([0.7, 0.0, 0.0, 0.7, 0.7, 0.7])

    def test_extreme_lengths_stay_bounded(self):
        out = get_grpo_lambda_reward(num_generations=2, top_fraction=1.0)(**rows((True, 1), (True, 10_001)))
        # mean 5001, population std 5000 -> z = -+1 ; 1 - 0.6 sigmoid(-1) = 0.838635, 1 - 0.6 sigmoid(1) = 0.561365
        assert out == pytest.approx([1 - 0.6 / (1 + math.exp(1)), 1 - 0.6 / (1 + math.exp(-1))], abs=1e-6)

    def test_all_wrong_batch_and_all_correct_batch(self):
        reward = get_grpo_lambda_reward(num_generations=2, top_fraction=0.5)
        # every ratio 0: group 0 is "top" (index) but has nothing to penalise: all 0, no NaN
        assert reward(**rows((False, 3), (False, 9), (False, 4), (False, 4))) == [0.0] * 4
        # every ratio 1: group 0 top: lengths 4, 12 -> z = -+1 ; group 1 plain 1
        out = reward(**rows((True, 4), (True, 12), (True, 4), (True, 12)))
        assert out == pytest.approx([1 - 0.6 / (1 + math.exp(1)), 1 - 0.6 / (1 + math.exp(-1)), 1.0, 1.0], abs=1e-6)

    def test_unscorable_rows(self):
        out = get_grpo_lambda_reward(num_generations=2, top_fraction=0.5)(
            completions=[RIGHT, RIGHT, RIGHT, WRONG], solution=["1", "", "1", "1"], completion_ids=[[0] * 5] * 4
        )
        # group 0 ratio 1/2 (None counts as wrong), group 1 ratio 1/2: group 0 top by index, its one correct -> 0.7
        assert out == [pytest.approx(0.7), None, 1.0, 0.0]

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [({"top_fraction": 1.5}, "top_fraction must be <= 1.0"), ({"alpha": 2.0}, "alpha must be <= 1.0"),
         ({"eps": 0.0}, "eps must be > 0"), ({"rounding": "up"}, "rounding must be one of")],
    )  # fmt: skip
    def test_bad_args(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_grpo_lambda_reward(**kwargs)


# ---------------------------------------------------------------------------------------------------------- ASRR
class TestASRR:
    def test_gate_tau_one(self):
        reward = get_asrr_reward(num_generations=4)  # beta 0.5, window 2048, tau 1, eps 1e-6
        out = reward(**rows((True, 100), (True, 300), (True, 1100), (True, 3000)))
        # Acc 1 >= 1: alpha = 0.5 (0 + 1e-6)/(0 + 1e-6) = 0.5 ; shortest correct 100
        # O = 0, 200/2048 = 0.09765625, 1000/2048 = 0.48828125, min(2900/2048, 1) = 1
        assert out == pytest.approx([1.0, 1 - 0.048828125, 1 - 0.244140625, 0.5])
        # Acc 3/4 < 1: alpha 0 -> plain 0/1
        assert reward(**rows((True, 100), (True, 300), (True, 1100), (False, 3000))) == [1.0, 1.0, 1.0, 0.0]

    def test_gate_tau_half_penalises_wrong_answers_too(self):
        reward = get_asrr_reward(num_generations=4, tau=0.5)
        out = reward(**rows((True, 100), (True, 300), (True, 1100), (False, 3000)))
        # Acc 0.75 >= 0.5: alpha = 0.5 (0.25 + 1e-6)/(0.5 + 1e-6) = 0.2500004999990 ; shortest 100
        alpha = 0.5 * (0.25 + 1e-6) / (0.5 + 1e-6)
        assert out == pytest.approx([1.0, 1 - alpha * 0.09765625, 1 - alpha * 0.48828125, -alpha])  # wrong: O = 1
        # Acc 0.25 < 0.5: alpha 0
        assert reward(**rows((True, 100), (False, 300), (False, 1100), (False, 3000))) == [1.0, 0.0, 0.0, 0.0]
        # Acc exactly tau: alpha = 0.5 * 1e-6 / (0.5 + 1e-6) ~ 1e-6, not 0 ; wrong 3000 -> O = 1
        out = reward(**rows((True, 100), (True, 100), (False, 1100), (False, 3000)))
        assert out == pytest.approx([1.0, 1.0, -0.5e-6 / (0.5 + 1e-6) * (1000 / 2048), -0.5e-6 / (0.5 + 1e-6)])

    def test_no_correct_answer_gives_no_overlong_ratio(self):
        # tau = 0: alpha = 0.5 (0 + 1e-6)/(1 + 1e-6) > 0, but no shortest correct length -> O = 0 -> all 0
        out = get_asrr_reward(num_generations=4, tau=0.0)(**rows((False, 10), (False, 500), (False, 9000), (False, 0)))
        assert out == [0.0, 0.0, 0.0, 0.0]

    def test_single_correct_tau_zero_and_shorter_wrong_not_rewarded(self):
        out = get_asrr_reward(num_generations=4, tau=0.0, window=100)(
            **rows((False, 10), (True, 50), (False, 90), (False, 500))
        )
        # Acc 1/4: alpha = 0.5 (0.25 + 1e-6)/(1 + 1e-6) ; shortest correct 50
        # O = clip(-40/100) = 0, 0, 40/100 = 0.4, clip(450/100) = 1
        alpha = 0.5 * (0.25 + 1e-6) / (1 + 1e-6)
        assert out == pytest.approx([0.0, 1.0, -0.4 * alpha, -alpha])

    def test_equal_lengths_and_unscorable(self):
        reward = get_asrr_reward(num_generations=2)
        assert reward(**rows((True, 40), (True, 40))) == [1.0, 1.0]  # O = 0
        out = reward(completions=[RIGHT, RIGHT], solution=["1", ""], completion_ids=[[0] * 40, [0] * 4000])
        assert out == [1.0, None]  # Acc 1/2 < 1 (None counts as wrong): alpha 0

    def test_alpha_helper(self):
        # alpha = beta (Acc - tau + eps)/(1 - tau + eps)
        assert asrr_alpha(1.0) == pytest.approx(0.5)
        assert asrr_alpha(0.99) == 0.0
        assert asrr_alpha(0.5, beta=0.5, tau=0.5, eps=1e-6) == pytest.approx(0.5 * 1e-6 / (0.5 + 1e-6))
        assert asrr_alpha(1.0, beta=1.0, tau=0.0) == pytest.approx(1.0)  # (1 + eps)/(1 + eps)

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [({"tau": 1.5}, "tau must be <= 1.0"), ({"window": 0}, "window must be > 0"),
         ({"beta": -0.1}, "beta must be >= 0"), ({"eps": -1e-6}, "eps must be > 0")],
    )  # fmt: skip
    def test_bad_args(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_asrr_reward(**kwargs)


class TestASRRPlan:
    def test_prefill_text_identical_across_the_group(self):
        plan = ROLLOUT_PLANS.get("asrr").from_config(SimpleNamespace(rollout_plan_kwargs=None))
        assert isinstance(plan, ASRRRolloutPlan) and plan.num_prompt_subgroups(8) == 1 and plan.uses_prefill
        assert ASRR_NO_THINK_PREFIX == "<think> Okay, I think I have finished thinking. </think>"  # the paper's figure
        assignments = [plan.assign({"prompt": "Q"}, pos, 4, 3, 7) for pos in range(4)]
        assert {a.prefill for a in assignments} == {ASRR_NO_THINK_PREFIX}
        assert all(a.system is None and a.user_suffix is None and a.max_tokens is None for a in assignments)
        assert all(a.metadata == {} for a in assignments) and plan.provides_columns == ()

    def test_plain_and_conversational_prompts(self, tiny_tokenizer):
        plan = ASRRRolloutPlan()
        a = plan.assign({}, 0, 4, 0, 0)
        assert apply_assignment("Q: 2+2?", a) == "Q: 2+2?" + ASRR_NO_THINK_PREFIX
        messages = [{"role": "user", "content": "What is 2 + 2?"}]

        def render(m):
            return tiny_tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True)

        text = apply_assignment(messages, a, render)
        # the chat template's generation prompt, then the prefix: the model continues the assistant turn after </think>
        assert text == render(messages) + ASRR_NO_THINK_PREFIX and "What is 2 + 2?" in text
        with pytest.raises(ValueError, match="chat-template renderer"):
            apply_assignment(messages, a)
        # the eval mode uses the same text
        (mode,) = parse_mode("asrr")
        assert mode.prefill == ASRR_NO_THINK_PREFIX
        assert build_prompt_text(messages, mode, tiny_tokenizer) == text

    def test_prefix_setting_and_errors(self):
        plan = ASRRRolloutPlan.from_config(SimpleNamespace(rollout_plan_kwargs={"prefix": " Done. </think>"}))
        assert plan.assign({}, 0, 2, 0, 0).prefill == " Done. </think>"
        with pytest.raises(ValueError, match=r"rollout_plan_kwargs \['budget'\] unknown to rollout_plan='asrr'"):
            ASRRRolloutPlan.from_config(SimpleNamespace(rollout_plan_kwargs={"budget": 3}))
        with pytest.raises(ValueError, match="must close the think block"):
            ASRRRolloutPlan(prefix="<think> Okay.")
        with pytest.raises(ValueError, match="non-empty string"):
            ASRRRolloutPlan(prefix="  ")
