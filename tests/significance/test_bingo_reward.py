"""Bingo reward: hand-computed values, references (group statistic, cached frozen model), schedule, state, metrics,
scorer failures. Significance comes from `WordScorer` (filler words 0, other words 1) so values are exact."""

import math
import pickle
from types import SimpleNamespace

import pytest
import torch
from bingo_testing import WordScorer

from trl_efficient.rewards.bingo import (
    BingoSchedule,
    FrozenReferenceGenerator,
    bingo_shaping,
    get_bingo_length_reward,
    significance_ratios,
)
from trl_efficient.significance import ScorerUnavailableError
from trl_efficient.trainer.group import GroupBatch

BASE = 5 / (math.pi / 2)  # w before the dynamic phase: lambda_we / (pi/2) = 3.18310

# One group of 4 rollouts of a prompt whose gold is 1. WordScorer: "so"/"um"/... score 0, other words 1; min-max per
# chunk; a chunk without filler is constant -> all significant.
GROUP = [r"so so x \boxed{1}", r"so x y z \boxed{1}", r"so so so x \boxed{2}", r"x y \boxed{2}"]
# (N_low, N_high): (2, 2), (1, 4), (3, 2), (0, 3)  ->  group mean reference (1.5, 2.75)
# Bingo (arXiv 2506.08125, methods.md §1) with lambda_c = 5, lambda_we = 5, w = BASE before the dynamic phase:
GROUP_EXPECTED = [
    5 * math.cos(2 / 1.5),  # correct, r_low = 2 / 1.5 = 1.333 -> 1.1762
    5 * math.cos(1 / 1.5),  # correct, r_low = 0.667 -> 3.9294
    2 * (math.cos(math.pi / 2) - 1) + BASE * 2 / 2.75 - 5,  # wrong, r_low 2 clipped at pi/2, r_high 2/2.75 -> -4.6850
    2 * (math.cos(0.0) - 1) + BASE * 3 / 2.75 - 5,  # wrong, r_low 0, r_high 3/2.75 -> -1.5275
]


def _call(reward, completions, solution="1", **kwargs):
    return reward(completions=completions, solution=[solution] * len(completions), **kwargs)


class TestFormula:
    def test_ratios_and_shaping(self):
        assert significance_ratios(3, 4, 1.5, 2) == (2.0, 2.0)
        assert significance_ratios(3, 4, 0, 2) == (0.0, 0.0)  # reference without insignificant tokens
        assert significance_ratios(0, 0, 1.5, 2) == (0.0, 0.0)  # empty response
        assert bingo_shaping(True, 0.5, 9.0, BASE) == pytest.approx(5 * math.cos(0.5))
        assert bingo_shaping(True, 3.0, 0.0, BASE) == pytest.approx(0.0, abs=1e-12)  # clipped at pi/2: cos = 0
        # wrong: 2 (cos 0.5 - 1) + 3.1831 * 0.5 - 5 = -0.2448 + 1.5915 - 5 = -3.6533
        assert bingo_shaping(False, 0.5, 0.5, BASE) == pytest.approx(2 * (math.cos(0.5) - 1) + BASE * 0.5 - 5)
        # wrong with many significant tokens: 0 + 3.1831 * 3 - 5 > 0 -> min(0, .) = 0
        assert bingo_shaping(False, 0.0, 3.0, BASE) == 0.0


class TestGroupReference:
    def test_hand_computed_values(self):
        reward = get_bingo_length_reward(WordScorer(), reference="group", num_generations=4)
        out = _call(reward, GROUP)
        ref_low, ref_high = 1.5, 2.75  # means of (2, 1, 3, 0) and (2, 4, 2, 3)
        expected = [
            5 * math.cos(2 / ref_low),  # correct, r_low 1.333 -> 1.1762
            5 * math.cos(1 / ref_low),  # correct, r_low 0.667 -> 3.9294
            2 * (math.cos(math.pi / 2) - 1) + BASE * 2 / ref_high - 5,  # wrong, r_low 2 clipped -> -4.6850
            2 * (math.cos(0.0) - 1) + BASE * 3 / ref_high - 5,  # wrong, r_low 0 -> -1.5275
        ]
        assert out == pytest.approx(expected)
        assert out[0] == pytest.approx(1.1762, abs=1e-4) and out[3] == pytest.approx(-1.5275, abs=1e-4)
        # the fewer insignificant tokens, the higher a correct answer scores
        assert out[1] > out[0]

    @pytest.mark.parametrize("statistic, ref", [("median", (1.5, 2.5)), ("min", (0, 2)), ("max", (3, 4))])
    def test_other_statistics(self, statistic, ref):
        reward = get_bingo_length_reward(WordScorer(), reference="group", group_statistic=statistic, num_generations=4)
        out = _call(reward, GROUP)
        r_low, r_high = significance_ratios(2, 2, *ref)
        assert out[0] == pytest.approx(bingo_shaping(True, r_low, r_high, BASE))
        if ref[0] == 0:  # min reference has zero insignificant tokens -> ratios 0 -> maximal reward
            assert out[0] == pytest.approx(5.0)

    def test_reference_without_insignificant_tokens(self):
        # no filler anywhere: every response is all-significant -> N_low(ref) = 0 -> r = (0, 0)
        reward = get_bingo_length_reward(WordScorer(), reference="group", num_generations=2)
        assert _call(reward, [r"x \boxed{1}", r"x y z \boxed{2}"]) == [5.0, -5.0]  # lambda_c cos 0 ; -lambda_we

    def test_empty_response_and_unparseable_gold(self):
        reward = get_bingo_length_reward(WordScorer(), reference="group", num_generations=2, include_correctness=True)
        # empty (wrong) response: ratios 0 -> 0 + min(0, 0 + 0 - 5) = -5 ; the other row: correct with
        # N = (1, 1) against the group mean (0.5, 0.5): r_low = 2 -> clip -> cos = 0 -> R = 1 + 0
        assert _call(reward, ["", r"so \boxed{1}"]) == pytest.approx([-5.0, 1.0])
        out = reward(completions=[r"so \boxed{1}", r"\boxed{1}"], solution=["", "1"])
        assert out[0] is None and out[1] == pytest.approx(6.0)  # ref (0.5, 1): r_low 0 -> 1 + 5

    def test_needs_whole_groups(self):
        reward = get_bingo_length_reward(WordScorer(), reference="group", num_generations=4)
        with pytest.raises(ValueError, match="not a multiple of the group size 4"):
            _call(reward, GROUP[:3])
        with pytest.raises(ValueError, match="needs whole groups"):
            _call(get_bingo_length_reward(WordScorer(), reference="group"), GROUP)
        # the per-row group_size column (what EfficientGRPOTrainer passes) stands in for num_generations
        out = _call(get_bingo_length_reward(WordScorer(), reference="group"), GROUP, group_size=[4] * 4)
        assert out == pytest.approx(GROUP_EXPECTED)

    def test_scope_and_batched_scorer_calls(self):
        scorer = WordScorer()
        reward = get_bingo_length_reward(scorer, reference="group", num_generations=2, scope="answer")
        out = _call(reward, [r"so so so </think> x \boxed{1}", r"</think> so x \boxed{2}"])
        # answer parts: (0, 2) and (1, 2); mean ref (0.5, 2); row 1 r_low 0 -> 5 ; row 2 wrong r_low 2, r_high 1
        assert out == pytest.approx([5.0, 2 * (0 - 1) + BASE * 1 - 5])
        assert scorer.calls == [[" x \\boxed{1}", " so x \\boxed{2}"]]  # one batched call per reward call

    def test_non_ascii_and_long_texts_are_counted(self):
        scorer = WordScorer(chunk=3)  # many chunks per text: counts are summed per sample
        reward = get_bingo_length_reward(scorer, reference="group", num_generations=2)
        long_text = " ".join(["数学", "um", "café"] * 50) + r" \boxed{1}"  # 50 chunks (0/1 mixed) + 1 constant chunk
        out = _call(reward, [long_text, "um naïve " * 3 + r"\boxed{1}"])
        # long: N = (50, 101) ; short: chunks ("um naïve um"), ("naïve um naïve"), ("\boxed{1}",) -> (3, 4)
        ref_low = (50 + 3) / 2  # the high-significance reference (101 + 4) / 2 does not enter: both are correct
        assert out == pytest.approx([5 * math.cos(min(50 / ref_low, math.pi / 2)), 5 * math.cos(3 / ref_low)])


class TestModelReference:
    def _reward(self, **kwargs):
        gen = SimpleNamespace(seconds=0.0, calls=[])

        def generate(prompts, keys):
            gen.calls.append(list(keys))
            return [[r"so x \boxed{1}", r"so so so x y \boxed{1}"] for _ in prompts]  # K=2: (1, 2), (3, 3)

        reward = get_bingo_length_reward(WordScorer(), reference="model", reference_model="unused", tokenizer=object(),
                                         reference_samples=2, **kwargs)  # fmt: skip
        reward.generator.generate = generate
        reward.generator.seconds = 0.0
        return reward, gen

    def test_cached_once_per_prompt_and_mean_of_samples(self):
        reward, gen = self._reward()
        prompts = ["q1"] * 2 + ["q2"] * 2
        out = reward(prompts=prompts, completions=[r"so x \boxed{1}", r"x \boxed{2}"] * 2, solution=["1"] * 4)
        # reference counts: mean of (1, 2) and (3, 3) = (2, 2.5); row 1: N = (1, 2) -> r_low 0.5 -> 5 cos 0.5
        # row 2: wrong, constant chunk -> N = (0, 2): r = (0, 0.8) -> 0 + 3.1831 * 0.8 - 5 = -2.4535
        expected = [5 * math.cos(0.5), BASE * 0.8 - 5] * 2
        assert out == pytest.approx(expected)
        assert len(gen.calls) == 1 and len(gen.calls[0]) == 2  # two distinct prompts, generated together once
        assert [len(c) for c in reward.scorer.calls] == [4 + 2 * 2]  # one scorer call: 4 completions + 2 x K refs
        reward(prompts=["q2", "q3"], completions=["x", "x"], solution=["1", "1"])
        assert gen.calls[1] == [reward.key_for("q3")]  # only the new prompt
        assert reward.state_dict()["reference_cache"][reward.key_for("q1")] == [[1, 2], [3, 3]]

    def test_state_restores_cache_without_regenerating(self):
        reward, gen = self._reward()
        first = reward(prompts=["q1", "q1"], completions=["so x", "x y"], solution=["1", "1"])
        state = pickle.loads(pickle.dumps(reward.state_dict()))
        fresh, fresh_gen = self._reward()
        fresh.load_state_dict(state)
        assert fresh(prompts=["q1", "q1"], completions=["so x", "x y"], solution=["1", "1"]) == first
        assert fresh_gen.calls == []

    def test_idx_keys_and_chat_prompts(self):
        reward, gen = self._reward(reference_key="idx")
        chat = [[{"role": "user", "content": "q"}]] * 2
        reward(prompts=chat, completions=["x", "x"], solution=["1", "1"], idx=[7, 7])
        assert gen.calls == [["idx:7"]]
        with pytest.raises(ValueError, match="needs an `idx` column"):
            reward(prompts=chat, completions=["x", "x"], solution=["1", "1"])

    def test_add_references_from_elsewhere(self):
        reward, gen = self._reward()
        reward.add_references({reward.key_for("q9"): [r"so so x \boxed{1}"]})  # (2, 2)
        out = reward(prompts=["q9"], completions=[r"so x y z \boxed{1}"], solution=["1"])
        assert out == pytest.approx([5 * math.cos(1 / 2)]) and gen.calls == []

    def test_frozen_generator_is_deterministic_per_key(self, tiny_model_dir, tiny_tokenizer):
        bias = {"sequence_bias": [[[tiny_tokenizer.eos_token_id], 3.0]]}
        gen = FrozenReferenceGenerator(tiny_model_dir, tiny_tokenizer, num_samples=2, max_new_tokens=6, device="cpu",
                                       batch_size=1, generation_kwargs=bias)  # fmt: skip
        chat = [{"role": "user", "content": "What is 2 + 3?"}]
        torch.manual_seed(123)
        before = torch.rand(1)
        a = gen.generate([chat, "What is 6 * 7?"], ["k1", "k2"])
        b = gen.generate(["What is 6 * 7?"], ["k2"])
        assert len(a) == 2 and all(len(samples) == 2 for samples in a)
        assert a[1] == b[0]  # same key, same references, whatever else is generated
        torch.manual_seed(123)
        assert torch.equal(torch.rand(1), before)  # the training RNG is untouched (forked)
        assert pickle.loads(pickle.dumps(gen))._model is None


class TestSchedule:
    def test_hand_computed_schedule(self):
        s = BingoSchedule(lambda_we=5.0, start_step=3, window=3, threshold=2.5)
        accs = [0.1, 0.2, 0.4, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.9]
        values = [s.observe(a) for a in accs]
        # t=1,2: before start -> 3.1831. t=3: look back min(3, 2) = 2 points (0.2, 0.4): s0 = 0.2, kappa = 3.1831/0.2
        # = 15.9155, s_hat = 3.1831 > 2.5 -> w = 3.1831. t=4: points (.2,.4,.5): slope 0.15 -> s_hat 2.3873 <= 2.5
        # -> count 1 -> w = -0.5. t=5: (.4,.5,.5) slope .05 -> count 2 -> -1.0 ; then -1.5, -2.0, ... floor -6.3662
        assert values[:3] == pytest.approx([BASE] * 3)
        assert values[3:6] == pytest.approx([-0.5, -1.0, -1.5])
        assert values[15] == pytest.approx(-2 * BASE)  # count 13 -> -6.5, floored at -2 lambda_we / (pi/2)
        # t=17: points (.5, .5, .9): slope 0.2 -> s_hat 3.1831 > 2.5 -> count reset, w = s_hat
        assert values[16] == pytest.approx(0.2 * BASE / 0.2) and s.low_slope_count == 0

    def test_zero_initial_slope_and_nan(self):
        s = BingoSchedule(start_step=2, window=2)
        s.observe(0.5)
        assert s.observe(0.5) == -0.5  # s0 = 0 -> kappa = 3.1831, s_hat 0 <= 2.5 -> count 1
        assert s.scale == pytest.approx(BASE)
        assert s.observe(float("nan")) == -0.5 and s.steps == 2  # no evidence: not a step

    def test_state_round_trip_continues_identically(self):
        accs = [0.1, 0.3, 0.2, 0.6, 0.4, 0.4, 0.8, 0.1]
        full = BingoSchedule(start_step=2, window=3)
        expected = [full.observe(a) for a in accs]
        half = BingoSchedule(start_step=2, window=3)
        for a in accs[:4]:
            half.observe(a)
        resumed = BingoSchedule(start_step=2, window=3)
        resumed.load_state_dict(pickle.loads(pickle.dumps(half.state_dict())))
        assert [resumed.observe(a) for a in accs[4:]] == expected[4:]
        assert resumed.state_dict() == full.state_dict()

    def test_disabled(self):
        s = BingoSchedule(start_step=1, window=2, enabled=False)
        assert [s.observe(a) for a in (0.0, 1.0, 0.0)] == [BASE] * 3

    def test_update_from_gathered_batch(self):
        reward = get_bingo_length_reward(WordScorer(), reference="group", schedule_start=1, schedule_window=2)
        batch = GroupBatch(
            rewards=torch.tensor([[1.0, 2.0], [0.0, -1.0], [1.0, 0.5], [float("nan"), float("nan")]]),
            reward_names=["correctness_reward", "bingo_length_reward"],
            reward_weights=torch.ones(2),
            lengths=torch.ones(4),
            truncated=torch.zeros(4, dtype=torch.bool),
            group_size=2,
            correctness_index=0,
        )
        reward.update(batch)
        assert reward.schedule.history == [(1, pytest.approx(2 / 3))]  # 2 correct of 3 scorable
        batch.correctness_index = None
        with pytest.raises(ValueError, match="needs the training accuracy"):
            reward.update(batch)
        full = get_bingo_length_reward(WordScorer(), reference="group", include_correctness=True)
        full.update(batch)  # accuracy from its own column: R >= 1 is correct -> 2.0 and 0.5 -> 1 of 3 scorable
        assert full.schedule.history == [(1, pytest.approx(1 / 3))]

    def test_self_update_inside_plain_trainer(self):
        reward = get_bingo_length_reward(WordScorer(), reference="group", num_generations=4, schedule_start=2,
                                         schedule_window=2)  # fmt: skip
        state = SimpleNamespace(global_step=0)
        _call(reward, GROUP, trainer_state=state)  # plain GRPOTrainer: no group_size column -> updates itself
        assert reward.schedule.steps == 1 and reward.schedule.history == [(1, 0.5)]
        _call(reward, GROUP)  # no trainer_state (outside training): no update
        _call(reward, GROUP, trainer_state=state, group_size=[4] * 4)  # EfficientGRPOTrainer updates via update()
        assert reward.schedule.steps == 1


class TestMetricsAndErrors:
    def test_metrics(self):
        logged = {}
        reward = get_bingo_length_reward(WordScorer(), reference="group", num_generations=4)
        out = _call(reward, GROUP, log_metric=lambda name, value: logged.__setitem__(name, value))
        assert logged["bingo/insignificant_tokens"] == 1.5 and logged["bingo/significant_tokens"] == 2.75
        # ratios N_low / (N_low + N_high): 2/4, 1/5, 3/5, 0/3 -> mean 0.325
        assert logged["bingo/insignificant_ratio"] == pytest.approx((0.5 + 0.2 + 0.6 + 0.0) / 4)
        assert logged["bingo/significant_ratio"] == pytest.approx(1 - 0.325)
        assert logged["bingo/ref_insignificant_tokens"] == 1.5 and logged["bingo/w_t"] == pytest.approx(BASE)
        assert logged["bingo/shaping_correct"] == pytest.approx((out[0] + out[1]) / 2)
        assert logged["bingo/shaping_wrong"] == pytest.approx((out[2] + out[3]) / 2)
        assert logged["bingo/scorer_fallback"] == 0.0 and logged["bingo/schedule_active"] == 0.0

    def test_unreachable_scorer_raises_or_falls_back(self):
        class Dead:
            unit, window = "word", 512

            def score(self, texts):
                raise ScorerUnavailableError("significance scorer at http://127.0.0.1:1 is unreachable")

        strict = get_bingo_length_reward(Dead(), reference="group", num_generations=4)
        with pytest.raises(ScorerUnavailableError, match="http://127.0.0.1:1"):
            _call(strict, GROUP)
        fallback = WordScorer()
        lenient = get_bingo_length_reward(Dead(), reference="group", num_generations=4, on_scorer_error="fallback",
                                          fallback_scorer=fallback)  # fmt: skip
        logged = {}
        out = _call(lenient, GROUP, log_metric=lambda k, v: logged.__setitem__(k, v))
        assert out == _call(get_bingo_length_reward(WordScorer(), reference="group", num_generations=4), GROUP)
        assert logged["bingo/scorer_fallback"] == 1.0 and lenient.using_fallback
        _call(lenient, GROUP)
        assert len(fallback.calls) == 2  # stays on the fallback

    def test_pickle_drops_built_models(self, tiny_classifier_dir):
        reward = get_bingo_length_reward(tiny_classifier_dir, reference="group", num_generations=2,
                                         scorer_kwargs={"device": "cpu"})  # fmt: skip
        first = _call(reward, [r"so x \boxed{1}", r"x \boxed{2}"])
        assert reward._scorer is not None
        clone = pickle.loads(pickle.dumps(reward))
        assert clone._scorer is None and clone.__name__ == "bingo_length_reward"
        assert _call(clone, [r"so x \boxed{1}", r"x \boxed{2}"]) == pytest.approx(first)

    def test_extra_kwargs_are_ignored(self):
        reward = get_bingo_length_reward(WordScorer(), reference="group", num_generations=4)
        out = _call(reward, GROUP, completion_ids=[[1]] * 4, log_extra=None, level=[1] * 4)
        assert out == pytest.approx(GROUP_EXPECTED)  # the extra columns change nothing

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"reference": "oracle"}, "reference must be one of"),
            ({"group_statistic": "mode"}, "group_statistic must be one of"),
            ({"lambda_c": -1}, "lambda_c must be >= 0"),
            ({"threshold": 1.5}, "threshold must be <= 1"),
            ({"schedule_window": 1}, "schedule_window must be an int >= 2"),
            ({"schedule_start": 0}, "schedule_start must be an int >= 1"),
            ({"on_scorer_error": "ignore"}, "on_scorer_error must be one of"),
            ({"on_scorer_error": "fallback"}, "needs fallback_scorer"),
            ({"normalize": "zscore"}, "normalize must be one of"),
            ({"scope": "prompt"}, "scope must be one of"),
            ({"schedule_update": "never"}, "schedule_update must be one of"),
            ({"num_generations": 0}, "num_generations must be a positive int"),
            ({"include_correctness": 1}, "include_correctness must be a bool"),
        ],
    )
    def test_argument_errors(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            get_bingo_length_reward(WordScorer(), **{"reference": "group", **kwargs})

    def test_model_reference_needs_model_and_tokenizer(self):
        with pytest.raises(ValueError, match="needs reference_model"):
            get_bingo_length_reward(WordScorer(), tokenizer=object())
        with pytest.raises(ValueError, match="needs the policy tokenizer"):
            get_bingo_length_reward(WordScorer(), reference_model="x")
        with pytest.raises(ValueError, match="scorer must be a scorer"):
            get_bingo_length_reward(None, reference="group")
