"""DOT (methods.md §21): outlier cut-off by hand, fractional margin, groups left alone, re-scoring, masks, the
predictive oversampling window, resume, recipe."""

import importlib.util
import json
import os
from types import SimpleNamespace

import pytest
import torch
from helpers import make_dataset, tiny_config

from trl_efficient.methods.dot import (
    DOTFilter,
    DOTTrainer,
    PassRateWindow,
    dot_cut_lengths,
    effective_margin,
    max_z_score,
)
from trl_efficient.recipes import get_recipe
from trl_efficient.rewards import correctness_reward

NAN = float("nan")
_spec = importlib.util.spec_from_file_location(
    "run_dot_trainer", os.path.join(os.path.dirname(__file__), "..", "multiprocess", "run_dot_trainer.py")
)
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)

# 11 x 10 tokens and one of 100 (G = 12): mean = 210 / 12 = 17.5; squared deviations 11 * 7.5^2 + 82.5^2 = 618.75 +
# 6806.25 = 7425; sample variance 7425 / 11 = 675, s = sqrt(675) = 25.98076
BRIEF = [10.0] * 11 + [100.0]


def cuts(lengths, group_size, correct=None, **kw):
    correct = torch.ones(len(lengths)) if correct is None else torch.tensor(correct, dtype=torch.float32)
    return dot_cut_lengths(correct, torch.tensor(lengths), group_size, **kw).tolist()


class TestCutOff:
    def test_paper_alpha_cuts_nothing_here(self):
        # alpha 3: T = floor(17.5 + 3 * 25.98076) = floor(95.44) = 95; 100 - 95 = 5 < 32 (and < 50 for m = 0.5)
        assert cuts(BRIEF, 12, alpha=3.0, margin=32) == [0] * 12
        assert cuts(BRIEF, 12, alpha=3.0, margin=0.5) == [0] * 12
        assert cuts(BRIEF, 12, alpha=3.0, margin=0) == [0] * 11 + [95]  # m = 0: any excess is cut

    def test_alpha_two_with_token_and_fraction_margins(self):
        # alpha 2: T = floor(17.5 + 51.96152) = floor(69.46) = 69; excess 100 - 69 = 31; the 10s are below T
        assert cuts(BRIEF, 12, alpha=2.0, margin=32) == [0] * 12  # 31 < 32
        assert cuts(BRIEF, 12, alpha=2.0, margin=16) == [0] * 11 + [69]
        assert cuts(BRIEF, 12, alpha=2.0, margin=0.25) == [0] * 11 + [69]  # m = max(int(25.0), 16) = 25 <= 31
        assert cuts(BRIEF, 12, alpha=2.0, margin=0.5) == [0] * 12  # m = max(int(50.0), 16) = 50 > 31

    def test_fraction_margin_has_a_floor_of_16_tokens(self):
        # alpha 2.72: T = floor(17.5 + 2.72 * 25.98076) = floor(88.17) = 88; excess 12
        assert effective_margin(100, 0.1) == 16  # max(int(10.0), 16)
        assert cuts(BRIEF, 12, alpha=2.72, margin=0.1) == [0] * 12  # 12 < 16
        assert cuts(BRIEF, 12, alpha=2.72, margin=10) == [0] * 11 + [88]  # 12 >= 10 tokens

    def test_small_groups_cannot_reach_alpha_three(self):
        # G = 4, [10, 10, 10, 100]: mean 32.5, s = sqrt((3 * 22.5^2 + 67.5^2) / 3) = sqrt(2025) = 45; max z = 3/2
        assert max_z_score(4) == 1.5 and max_z_score(10) < 3 < max_z_score(11)
        assert cuts([10, 10, 10, 100.0], 4, alpha=1.5, margin=0) == [0, 0, 0, 0]  # T = floor(32.5 + 67.5) = 100
        assert cuts([10, 10, 10, 100.0], 4, alpha=1.0, margin=16) == [0, 0, 0, 77]  # T = 77, 23 >= 16

    def test_groups_below_the_threshold_and_edges_are_untouched(self):
        lengths = [10, 10, 10, 100.0] * 5
        correct = [1, 1, 1, 1] + [1, 1, 1, 0] + [0, 0, 0, 0] + [NAN] * 4 + [1, NAN, 1, 1]
        # all correct: cut | 3/4 < 1 | all wrong | nothing scorable | 3 of 3 scorable correct: cut
        assert cuts(lengths, 4, correct, alpha=1.0, margin=16) == [0, 0, 0, 77, 0, 0, 0, 0, 0, 0, 0, 0] + [0] * 4 + [
            0,
            0,
            0,
            77,
        ]
        # threshold 0.75 admits the second group; an all-wrong group never qualifies (no correct row)
        got = cuts(lengths, 4, correct, success_threshold=0.0, alpha=1.0, margin=16)
        assert got[4:8] == [0, 0, 0, 77] and got[8:16] == [0] * 8
        # equal lengths (std 0), a single row (G = 1), extreme lengths: no NaN, no crash
        assert cuts([50.0] * 4, 4, alpha=0.0, margin=0) == [0] * 4
        assert cuts([7.0, 9.0], 1, alpha=0.0, margin=0) == [0, 0]
        assert cuts([0, 0, 0, 1e6], 4, alpha=0.0, margin=0) == [0, 0, 0, 250000]  # T = floor(mean) = 250000

    def test_filter_config_errors_name_the_field(self, tmp_path):
        for kwargs, match in [
            ({"alpha": -1}, r"filter_kwargs\['alpha'\]"),
            ({"margin": 32.5}, r"filter_kwargs\['margin'\]"),
            ({"success_threshold": 1.5}, r"filter_kwargs\['success_threshold'\]"),
            ({"min_factor": 2.0, "max_factor": 1.5}, r"filter_kwargs\['max_factor'\]"),
        ]:
            with pytest.raises(ValueError, match=match):
                tiny_config(tmp_path, completion_filter="dot", filter_kwargs=kwargs)


class TestPredictiveSampling:
    def test_factor_sequence_by_hand(self):
        w = PassRateWindow(history_window=3, max_factor=5.0)
        assert w.factor() == 1.5  # empty window: initial factor
        w.record(0.5)
        assert w.factor() == pytest.approx(2.0)  # (1 + 0) / 0.5
        w.record(0.25)
        assert w.factor() == pytest.approx(3.0)  # mean .375, population std .125: 1.125 / .375
        w.record(0.1)
        # mean .283333; deviations .216667, -.033333, -.183333; population variance .081667 / 3 = .027222,
        # std .164992: 1.164992 / .283333 = 4.11174
        assert w.factor() == pytest.approx(4.11174, abs=1e-5)
        # window of 3 keeps [.25, .1, 1]: mean .45; deviations -.2, -.35, .55; variance (.04 + .1225 + .3025) / 3 =
        # .155, std .393700 -> 1.393700 / .45 = 3.09711
        w.record(1.0)
        assert w.state_dict() == {"rates": [0.25, 0.1, 1.0]}
        assert w.factor() == pytest.approx(3.09711, abs=1e-5)
        assert PassRateWindow(max_factor=3.0).factor() == 1.5
        easy, dead = PassRateWindow(), PassRateWindow()
        easy.record(1.0)
        dead.record(0.0)
        assert (easy.factor(), dead.factor()) == (1.2, 3.0)  # 1 / 1 clipped up to 1.2 | pass rate 0: the maximum

    def test_refill_prompt_count_by_hand(self):
        def count(factor_rates, need, world, group_size, attempt=1):
            w = PassRateWindow(max_factor=5.0)
            for p in factor_rates:
                w.record(p)
            fake = SimpleNamespace(
                accelerator=SimpleNamespace(num_processes=world),
                num_generations=group_size,
                dot=SimpleNamespace(window=w),
            )
            return DOTTrainer.refill_prompt_count(fake, attempt, need, 0)

        assert count([], 4, 1, 4) == 2  # floor(4 * 1.5) - 4
        assert count([0.5], 4, 1, 4) == 4  # floor(4 * 2) - 4
        assert count([1.0], 4, 1, 4) == 1  # floor(4 * 1.2) - 4 = 0: at least one
        assert count([0.2], 4, 1, 4) == 16  # 1 / .2 = 5: floor(20) - 4
        assert count([1.0], 4, 4, 2) == 2  # 4 processes, G = 2: prompts in multiples of 4 / gcd(4, 2) = 2
        assert count([], 4, 1, 4, attempt=2) == 4  # later passes: a whole batch

    def test_window_state_round_trip(self):
        a = PassRateWindow()
        for p in (0.3, 2 / 3, 0.9):
            a.record(p)
        b = PassRateWindow()
        b.load_state_dict(json.loads(json.dumps(a.state_dict())))
        assert b.rates == a.rates and b.factor() == a.factor()


class TestTrainer:
    def test_cut_rescore_mask_and_predictive_refill(self, tiny_model_dir, tmp_path):
        trainer = script.make_trainer(tiny_model_dir, tmp_path)
        trainer.train()
        # see run_dot_trainer.py: groups 0 and 3 are [10, 10, 10, 100] all correct, cut to T = 77 (alpha 1, m 16), the
        # \boxed{7} of the long row is in the cut tail, so re-scoring makes it wrong; group 1 (3/4 correct) is kept
        # whole; group 2 is signal-free, so the batch is refilled (factor 1.5: floor(6) - 4 = 2 prompts)
        for rec in trainer.records:
            assert rec["lengths"] == [10, 10, 10, 77, 10, 10, 10, 100, 10, 10, 10, 77, 10, 10, 10, 100]
            assert rec["rewards"] == [1, 1, 1, 0] * 4
            assert rec["truncated"] == [False, False, False, True, False, False, False, False] * 2
            assert rec["completion_mask_sums"] == rec["lengths"]  # masked past the cut
            assert rec["num_items_in_batch"] == 4 * 30 + 77 + 100 + 77 + 100  # 474
        # first pass, re-scoring of the cut text, refill (2 prompts, then 1: factor 1 / (5/6) = 1.2 -> floor(4.8) - 4
        # = 0 -> 1); pass rates (3 + 2) / 6 and (3 + 1) / 5
        assert [len(p) for p in trainer.scoring_passes] == [16, 16, 8, 16, 16, 4]
        assert trainer.scoring_passes[1][3] == 77 and trainer.scoring_passes[0][3] == 100
        assert trainer.dot.state_dict()["rates"] == pytest.approx([5 / 6, 4 / 5])
        assert trainer.refill_sampler.state_dict() == {"epoch": 0, "position": 3}
        logged = {k for e in trainer.state.log_history for k in e}
        for key in ("cut_fraction", "easy_group_fraction", "tokens_removed", "oversample_factor", "pass_rate"):
            assert f"trl_efficient/dot/{key}" in logged
        factors = [e["trl_efficient/dot/oversample_factor"] for e in trainer.state.log_history if "loss" in e]
        assert factors == pytest.approx([1.5, 1.2])

    def test_no_qualifying_group_scores_once(self, tiny_model_dir, tmp_path):
        # alpha 1.5 = max z for G = 4: T = 100, nothing is cut and nothing is scored twice
        trainer = script.make_trainer(tiny_model_dir, tmp_path, filter_kwargs={"alpha": 1.5}, max_steps=1)
        trainer.train()
        assert [len(p) for p in trainer.scoring_passes] == [16, 8]  # first pass, refill; no re-scoring
        rec = trainer.records[0]
        assert 77 not in rec["lengths"] and not any(rec["truncated"])
        # uncut, groups 0 and 3 are all correct and signal-free: 1 informative group + 2 refilled = 3 of 4 needed,
        # pass rate 3 / 6; the shortfall is filled with batch 0's group 0 (generation order), masked
        assert rec["completion_mask_sums"] == [0] * 4 + [10, 10, 10, 100] * 3
        assert trainer.dot.state_dict()["rates"] == [0.5]

    def test_resume_restores_the_window_exactly(self, tiny_model_dir, tmp_path):
        full = script.make_trainer(tiny_model_dir, tmp_path / "full", max_steps=3, save_strategy="steps", save_steps=2)
        full.train()
        ckpt = os.path.join(tmp_path, "full", "checkpoint-2")
        with open(os.path.join(ckpt, "trl_efficient_state.json")) as f:
            saved = json.load(f)
        assert saved["dot_sampling"]["rates"] == pytest.approx([5 / 6, 4 / 5])
        resumed = script.make_trainer(tiny_model_dir, tmp_path / "resumed", max_steps=3)
        resumed.train(resume_from_checkpoint=ckpt)
        assert resumed.dot.state_dict() == full.dot.state_dict()
        assert resumed.refill_sampler.state_dict() == full.refill_sampler.state_dict()
        assert resumed.records[-1] == full.records[-1]
        assert [len(p) for p in resumed.scoring_passes] == [len(p) for p in full.scoring_passes[-3:]]

    def test_construction_errors(self, tiny_model_dir, tmp_path):
        with pytest.raises(ValueError, match="set completion_filter='dot'"):
            DOTTrainer(
                model=tiny_model_dir,
                reward_funcs=[correctness_reward],
                args=tiny_config(tmp_path, completion_filter="dynamic_sampling"),
                train_dataset=make_dataset(4),
            )
        from trl_efficient.trainer import EfficientGRPOTrainer

        with pytest.raises(ValueError, match="needs trl_efficient.methods.dot.DOTTrainer"):
            EfficientGRPOTrainer(
                model=tiny_model_dir,
                reward_funcs=[correctness_reward],
                args=tiny_config(tmp_path, completion_filter="dot"),
                train_dataset=make_dataset(4),
            )

    def test_warns_when_alpha_cannot_cut(self, tiny_model_dir, tmp_path, caplog):
        with caplog.at_level("WARNING", logger="trl_efficient.methods.dot"):
            script.make_trainer(tiny_model_dir, tmp_path, filter_kwargs={"alpha": 3.0})
        assert "DOT never truncates" in caplog.text


def test_recipe():
    recipe = get_recipe("dot")
    from trl_efficient.methods.dot import DOTTrainer

    assert recipe.trainer_cls is DOTTrainer
    over = recipe.config_overrides
    assert (over["completion_filter"], over["loss_type"], over["epsilon_high"]) == ("dot", "dapo", 0.28)
    kwargs = over["filter_kwargs"]
    assert (kwargs["alpha"], kwargs["margin"], kwargs["success_threshold"], kwargs["max_factor"]) == (3.0, 32, 1.0, 5.0)
    DOTFilter(SimpleNamespace(), **kwargs)  # the recipe's settings construct
