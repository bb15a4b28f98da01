"""SABER (methods.md §3; proposed defaults): profiling, tiers, system prompts, NoThink mix, reward, recipe and YAML."""

import json
import os
import pickle
import random

import pytest
from datasets import Dataset
from helpers import RecordingTrainer, make_dataset, profile_with_cli, tiny_cli_args, tiny_config

from trl_efficient.core.lengths import LengthMeter
from trl_efficient.methods.saber import (
    SABER_NO_THINK_RATIO_ENV,
    SABER_PROFILE_ENV,
    SABER_TIERS_ENV,
    _profile_record,
    apply_saber_profile,
    assign_tier,
    load_profile,
    plan_saber_rows,
    prepare_dataset,
    profile_dataset,
    question_key,
    write_profile,
)
from trl_efficient.prompts import BUDGET_PROMPT, NO_THINK_PROMPT, UNLIMITED_PROMPT, saber_mode_prompts, validate_tiers
from trl_efficient.recipes import get_recipe
from trl_efficient.recipes.budget import build_saber_reward
from trl_efficient.rewards import correctness_reward
from trl_efficient.rewards.budget import get_saber_reward

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def think(n: int, answer: str = "4") -> str:
    """A completion whose thinking part (up to and including `</think>`) is `n` characters."""
    return "x" * (n - len("</think>")) + rf"</think>\boxed{{{answer}}}"


def rec(question, tokens, correct, truncated=False):
    return {"question": question, "thinking_tokens": tokens, "correct": correct, "truncated": truncated}


# -------------------------------------------------------------------------------------------------------- tiers
class TestTiers:
    def test_assign_tier_boundaries(self):
        # smallest tier >= t_base; a truncated profile is a lower bound, so it needs a tier strictly above it
        assert [assign_tier(t, False) for t in (0, 128, 129, 4096, 4097, 16384, 16385)] == [
            128,
            128,
            4096,
            4096,
            16384,
            16384,
            None,
        ]
        assert [assign_tier(t, True) for t in (100, 128, 4096, 16384)] == [128, 4096, 16384, None]
        assert assign_tier(300, False, (256, 512)) == 512

    @pytest.mark.parametrize("tiers", [[], [0, 10], [10, 10], [20, 10], ["a"], [1.5]])
    def test_bad_tiers(self, tiers):
        with pytest.raises(ValueError, match="tiers must be strictly increasing positive token counts"):
            validate_tiers(tiers)

    def test_plan_base_correct_wrong_and_unlimited(self):
        planned = plan_saber_rows(
            [rec("a", 90, True), rec("b", 3000, True), rec("c", 20000, True), rec("d", 100, True, truncated=True)],
            no_think_ratio=0,
        )
        assert [(p["saber_mode"], p["saber_budget"], p["saber_penalize"]) for p in planned] == [
            ("budget", 128, True),
            ("budget", 4096, True),
            ("unlimited", -1, False),
            ("budget", 128, True),
        ]
        assert [p["saber_base_tokens"] for p in planned] == [90, 3000, 20000, 100]

    def test_base_wrong_split_is_seeded_per_question_and_about_half(self):
        records = [rec(f"q{i}", 50, False) for i in range(400)]
        planned = plan_saber_rows(records, no_think_ratio=0, seed=3)
        modes = [p["saber_mode"] for p in planned]
        assert 150 <= modes.count("unlimited") <= 250  # 50/50 draw (binomial(400, 0.5): mean 200, sd 10)
        assert not any(p["saber_penalize"] for p in planned)  # base-wrong rows are never penalised
        # order does not matter: the draw is a hash of (seed, question)
        shuffled = records[:]
        random.Random(0).shuffle(shuffled)
        replanned = plan_saber_rows(shuffled, no_think_ratio=0, seed=3)
        again = {r["question"]: p["saber_mode"] for r, p in zip(shuffled, replanned)}
        assert again == {r["question"]: m for r, m in zip(records, modes)}
        assert [p["saber_mode"] for p in plan_saber_rows(records, no_think_ratio=0, seed=4)] != modes

    def test_no_think_count_is_exact(self):
        records = [rec(f"q{i}", 50, True) for i in range(50)]
        planned = plan_saber_rows(records, no_think_ratio=0.1)
        nothink = [p for p in planned if p["saber_mode"] == "nothink"]
        assert len(nothink) == 5  # round(0.1 * 50)
        assert all(p["saber_budget"] == 0 and not p["saber_penalize"] for p in nothink)
        with pytest.raises(ValueError, match=r"no_think_ratio must be in \[0, 1\)"):
            plan_saber_rows(records, no_think_ratio=1.0)

    def test_mode_prompts(self):
        prompts = saber_mode_prompts()
        assert prompts["NoThink"] == "Answer directly without reasoning."
        assert prompts["FastThink"] == (
            "Think step by step, keeping your reasoning strictly under 128 tokens, then give the final answer in "
            "\\boxed{}."
        )
        assert "16384" in prompts["DeepThink"] and "4096" in prompts["CoreThink"]


# ----------------------------------------------------------------------------------------------- dataset join
def _dataset():
    return Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": f"Question {i}?"}] for i in range(4)]
            + [[{"role": "system", "content": "Be nice."}, {"role": "user", "content": "Question 4?"}]],
            "solution": ["1"] * 5,
            "idx": list(range(5)),
        }
    )


PROFILE = [
    rec("Question 0?", 90, True),
    rec("Question 1?", 3000, True),
    rec("Question 2?", 50000, False),
    rec("Question 3?", 10, True),
    rec("Question 4?", 200, True),
]


class TestApplyProfile:
    def test_columns_and_system_prompts(self):
        ds = apply_saber_profile(_dataset(), PROFILE, no_think_ratio=0)
        assert ds["saber_mode"] == ["budget", "budget", "unlimited", "budget", "budget"]
        assert ds["saber_budget"] == [128, 4096, -1, 128, 4096]
        assert ds["saber_base_tokens"] == [90, 3000, 50000, 10, 200]
        assert ds["saber_penalize"] == [True, True, False, True, True]
        assert ds["prompt"][0] == [
            {"role": "system", "content": BUDGET_PROMPT.format(budget=128)},
            {"role": "user", "content": "Question 0?"},
        ]
        assert ds["prompt"][2][0]["content"] == UNLIMITED_PROMPT
        # an existing system message keeps its text and gets the SABER prompt appended
        assert ds["prompt"][4][0]["content"] == "Be nice.\n" + BUDGET_PROMPT.format(budget=4096)

    def test_nothink_rows_get_the_nothink_prompt(self):
        ds = apply_saber_profile(_dataset(), PROFILE, no_think_ratio=0.4)  # round(0.4 * 5) = 2 rows
        rows = [i for i, m in enumerate(ds["saber_mode"]) if m == "nothink"]
        assert len(rows) == 2
        for i in rows:
            assert ds["prompt"][i][0]["content"].endswith(NO_THINK_PROMPT) and ds["saber_budget"][i] == 0

    def test_join_by_idx_and_unmatched_policies(self):
        by_idx = [dict(r, idx=i) for i, r in enumerate(PROFILE)]
        ds = apply_saber_profile(
            _dataset(), [dict(r, question="renamed") for r in by_idx], join_on="idx", no_think_ratio=0
        )
        assert ds["saber_budget"] == [128, 4096, -1, 128, 4096]
        partial = PROFILE[:3]
        with pytest.raises(ValueError, match="2 of 5 training examples have no profile record"):
            apply_saber_profile(_dataset(), partial)
        ds = apply_saber_profile(_dataset(), partial, unmatched="unlimited", no_think_ratio=0)
        assert ds["saber_mode"][3:] == ["unlimited", "unlimited"] and ds["saber_base_tokens"][3:] == [-1, -1]
        assert len(apply_saber_profile(_dataset(), partial, unmatched="drop", no_think_ratio=0)) == 3

    def test_prepare_dataset_reads_env(self, tmp_path, monkeypatch):
        path = write_profile(PROFILE, str(tmp_path / "p.jsonl"))
        args = tiny_config(tmp_path, max_completion_length=4096)
        monkeypatch.delenv(SABER_PROFILE_ENV, raising=False)
        with pytest.raises(ValueError, match=SABER_PROFILE_ENV):
            prepare_dataset(_dataset(), args)
        monkeypatch.setenv(SABER_PROFILE_ENV, path)
        monkeypatch.setenv(SABER_TIERS_ENV, "64,1024")
        monkeypatch.setenv(SABER_NO_THINK_RATIO_ENV, "0")
        ds = prepare_dataset(_dataset(), args)
        # tiers 64 / 1024: 90 -> 1024 ; 3000 -> no limit ; 50000 -> no limit ; 10 -> 64 ; 200 -> 1024
        assert ds["saber_budget"] == [1024, -1, -1, 64, 1024]
        monkeypatch.setenv(SABER_TIERS_ENV, "1024,64")
        with pytest.raises(ValueError, match=f"tiers \\({SABER_TIERS_ENV}\\) must be strictly increasing"):
            prepare_dataset(_dataset(), args)
        monkeypatch.delenv(SABER_TIERS_ENV)
        with pytest.raises(ValueError, match=r"no_think_ratio must be in \[0, 1\)"):
            prepare_dataset(_dataset(), args, no_think_ratio=1.5)
        with pytest.raises(ValueError, match="does not exist"):
            prepare_dataset(_dataset(), args, profile=str(tmp_path / "missing.jsonl"))

    def test_profile_io_roundtrip(self, tmp_path):
        for name in ("p.jsonl", "p.json"):
            path = write_profile(PROFILE, str(tmp_path / name))
            assert load_profile(path) == PROFILE
        (tmp_path / "bad.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
        with pytest.raises(ValueError, match="lacks"):
            load_profile(str(tmp_path / "bad.jsonl"))


# ------------------------------------------------------------------------------------------------------- reward
def _call(reward, completions, mode="budget", budget=100, base=90, penalize=True, solution="4"):
    n = len(completions)
    return reward(
        completions=completions,
        solution=[solution] * n,
        saber_mode=[mode] * n,
        saber_budget=[budget] * n,
        saber_base_tokens=[base] * n,
        saber_penalize=[penalize] * n,
    )


class TestSaberReward:
    reward = get_saber_reward(length_unit="chars")

    def test_overshoot_penalty(self):
        # B = 100: t = 100 -> 1 ; t = 150 -> 1 - 0.5 * 50/100 = 0.75 ; t = 200 -> 0.5 ; t = 1000 -> 0.5 (clipped)
        assert _call(self.reward, [think(100), think(150), think(200), think(1000)]) == [1.0, 0.75, 0.5, 0.5]
        # wrong answers -> 0 whatever the length
        assert _call(self.reward, [think(50, "5"), think(1000, "5")]) == [0.0, 0.0]

    def test_no_penalty_for_base_wrong_or_unlimited(self):
        assert _call(self.reward, [think(300)], penalize=False) == [1.0]
        assert _call(self.reward, [think(300)], mode="unlimited", budget=-1) == [1.0]

    def test_length_proportion_guard(self):
        # guard threshold 0.1 * min(t_base, B): min(90, 100) = 90 -> 9 ; t = 8 < 9 -> capped at 0.5 ; t = 9 -> 1
        assert _call(self.reward, [think(8), think(9)]) == [0.5, 1.0]
        # unlimited: threshold 0.1 * t_base = 0.1 * 200 = 20
        assert _call(self.reward, [think(19), think(20)], mode="unlimited", budget=-1, base=200) == [0.5, 1.0]
        # unknown base length (-1): the budget alone sets it, 0.1 * 100 = 10
        assert _call(self.reward, [think(9)], base=-1) == [0.5]

    def test_nothink(self):
        # NoThink: thinking <= 16 -> c ; longer -> 0.5 c ; no guard
        assert _call(self.reward, [think(8), think(16), think(17), think(40, "5")], mode="nothink", budget=0) == [
            1.0,
            1.0,
            0.5,
            0.0,
        ]

    def test_missing_think_close_and_unscorable(self):
        assert _call(self.reward, [r"x \boxed{4}"]) == [0.0]
        assert _call(self.reward, [think(100)], solution="") == [None]

    def test_thinking_tokens_with_the_policy_tokenizer(self, tiny_tokenizer):
        reward = get_saber_reward(tokenizer=tiny_tokenizer)
        text = "<think> step step step </think> The answer is \\boxed{4}"
        ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"] + [tiny_tokenizer.eos_token_id]
        t = LengthMeter("tokens", "thinking", tiny_tokenizer)(text, ids)
        assert 3 < t < len(ids) - 3
        out = reward(
            completions=[text],
            solution=["4"],
            completion_ids=[ids],
            saber_mode=["budget"],
            saber_budget=[t - 2],
            saber_base_tokens=[t],
            saber_penalize=[True],
        )
        assert out == pytest.approx([1 - 0.5 * 2 / (t - 2)])  # overshoot of 2 tokens over B = t - 2

    def test_errors_pickle_and_extra_kwargs(self):
        with pytest.raises(ValueError, match="prepare_dataset"):
            self.reward(completions=[think(10)], solution=["4"])
        with pytest.raises(ValueError, match="saber_mode must be one of"):
            _call(self.reward, [think(10)], mode="fast")
        with pytest.raises(ValueError, match="saber_budget must be a positive int"):
            _call(self.reward, [think(10)], budget=0)
        for kwargs, match in (
            ({"penalty": 2.0}, "penalty must be <= 1"),
            ({"no_think_max_tokens": 0}, "positive int"),
            ({"guard_ratio": -0.1}, "guard_ratio must be >= 0"),
        ):
            with pytest.raises(ValueError, match=match):
                get_saber_reward(length_unit="chars", **kwargs)
        clone = pickle.loads(pickle.dumps(self.reward))
        assert clone(
            completions=[think(150)],
            solution=["4"],
            saber_mode=["budget"],
            saber_budget=[100],
            saber_base_tokens=[90],
            saber_penalize=[True],
            trainer_state=None,
            other=[1],
        ) == [0.75]


# ------------------------------------------------------------------------------------------------------ profile
class TestProfile:
    def test_profile_record(self, tiny_tokenizer):
        meter = LengthMeter("tokens", "thinking", tiny_tokenizer)
        text = "<think> step step </think> The answer is \\boxed{4}"
        ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"] + [tiny_tokenizer.eos_token_id]
        row = {"prompt": [{"role": "user", "content": " What? "}], "solution": "4", "idx": 7}
        record = _profile_record(row, ids, False, tiny_tokenizer, meter)
        assert record == {
            "idx": 7,
            "question": "What?",
            "solution": "4",
            "thinking_tokens": meter.thinking_tokens(ids),
            "completion_tokens": len(ids),
            "think_closed": True,
            "truncated": False,
            "correct": True,
        }
        unclosed = _profile_record(row, ids[:3], True, tiny_tokenizer, meter)
        assert unclosed["thinking_tokens"] == 3 and not unclosed["correct"] and not unclosed["think_closed"]

    def test_profile_dataset_on_tiny_model(self, tiny_model_dir, tiny_tokenizer):
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        ds = make_dataset(5)
        records = profile_dataset(model, tiny_tokenizer, ds, max_new_tokens=12, batch_size=2, show_progress=False)
        assert [r["idx"] for r in records] == list(range(5))
        assert [r["question"] for r in records] == [question_key(p) for p in ds["prompt"]]
        for r in records:
            assert 0 < r["completion_tokens"] <= 12 and r["thinking_tokens"] <= r["completion_tokens"]
            if r["truncated"]:  # hit the cap without EOS
                assert r["completion_tokens"] == 12
            if not r["think_closed"]:  # never closed: the whole completion counts as thinking
                assert r["thinking_tokens"] == r["completion_tokens"]

    def test_profile_command_then_saber_trains_from_yaml(self, tmp_path, monkeypatch):
        from huggingface_hub import ModelCard

        from trl_efficient.api.training import train_main

        monkeypatch.chdir(ROOT)
        path = profile_with_cli(tmp_path / "profile.jsonl")
        records = load_profile(path)
        assert len(records) == 16 and all(r["model"] == "tiny:qwen2-16" for r in records)
        monkeypatch.delenv(SABER_PROFILE_ENV, raising=False)
        train_main(
            [
                "--config",
                "configs/saber.yaml",
                *tiny_cli_args(tmp_path / "run", dataset_name="gsm8k"),
                "--recipe_kwargs",
                json.dumps({"profile": path, "no_think_ratio": 0.1}),
            ]
        )
        with open(os.path.join(tmp_path, "run", "trl_efficient_summary.json")) as f:
            assert json.load(f)["recipe"] == "saber"
        card = ModelCard.load(os.path.join(tmp_path, "run", "README.md")).text
        assert "`saber`" in card and "the paper's is not published" in card and "FastThink" in card
        assert card.count("SABER length-proportion guard") == 1  # recipe and reward share one wording


# --------------------------------------------------------------------------------------------- trainer, recipe
class _ColumnSpy:
    __name__ = "column_spy"

    def __init__(self):
        self.seen = []

    def __call__(self, prompts, completions, saber_mode, saber_budget, **kwargs):
        self.seen.extend(zip(prompts, saber_mode, saber_budget))
        return [0.0] * len(completions)


def test_prepared_rows_reach_the_rewards_with_their_prompts(tiny_model_dir, tmp_path, tiny_tokenizer):
    ds = make_dataset(8)
    profile = [rec(question_key(p), 100 * (i + 1), i % 2 == 0) for i, p in enumerate(ds["prompt"][:4])]
    args = tiny_config(tmp_path, length_scope="thinking", reward_weights=[1.0, 0.0, 0.0])
    ds = prepare_dataset(ds, args, profile=profile, no_think_ratio=0.25)
    spy = _ColumnSpy()
    trainer = RecordingTrainer(
        model=tiny_model_dir,
        reward_funcs=[build_saber_reward(args, tiny_tokenizer), correctness_reward, spy],
        args=args,
        train_dataset=ds,
        processing_class=tiny_tokenizer,
    )
    trainer.train()
    assert len(spy.seen) == 8
    for prompt, mode, budget in spy.seen:
        expected = {
            "budget": BUDGET_PROMPT.format(budget=budget),
            "unlimited": UNLIMITED_PROMPT,
            "nothink": NO_THINK_PROMPT,
        }[mode]
        assert prompt[0] == {"role": "system", "content": expected}
    for record in trainer.records:
        assert all(r[0] == r[0] for r in record["rewards"])  # the SABER reward scored every row


def test_recipe_and_builder(tmp_path, tiny_tokenizer):
    recipe = get_recipe("saber")
    from trl_efficient.methods.saber import prepare_dataset
    from trl_efficient.recipes.registry import resolve

    assert resolve(recipe.dataset_hook) is prepare_dataset  # named by reference, imported on use
    assert recipe.config_overrides["length_scope"] == "thinking"
    assert any("not published" in line for line in recipe.proposed_defaults)
    with pytest.raises(ValueError, match="length_scope='thinking'"):
        build_saber_reward(tiny_config(tmp_path), tiny_tokenizer)
    reward = build_saber_reward(tiny_config(tmp_path, length_scope="thinking"), tiny_tokenizer)
    assert (reward.penalty, reward.guard_ratio, reward.no_think_max_tokens) == (0.5, 0.1, 16)
