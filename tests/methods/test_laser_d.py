"""LASER-D / LASER-DE (methods.md §7): grid, coverage and target arithmetic by hand, bucket boundaries, the batch-max
fallback, the repetition flag on constructed id sequences, reward values, and the monitoring pass on the tiny model
(checkpointed, restored on resume without a new pass, a failing pass keeps training alive)."""

import json
import os

import pytest
import torch
from helpers import RealRecordingTrainer, RecordingTrainer, make_dataset, tiny_config

from trl_efficient.methods.laser import (
    LaserMonitor,
    choose_target,
    coverage,
    coverage_multipliers,
    get_laser_d_reward,
    is_repetitive,
    length_grid,
    monitor_bucket,
    targets_from_records,
    training_bucket,
)
from trl_efficient.rewards import get_laser_reward

DONE = r"x</think>\boxed{1}"  # correct against gold "1"
WRONG = r"x</think>\boxed{2}"
NO_CLOSE = r"x \boxed{1}"  # format failure: no </think>


def _columns(n, low=-1, medium=-1, high=-1):
    return {"laser_target_low": [low] * n, "laser_target_medium": [medium] * n, "laser_target_high": [high] * n}


# ----------------------------------------------------------------------------------------- grid / coverage / L_k
def test_grid_by_hand():
    assert length_grid(2048, 1024, 16384) == [2048 + 1024 * i for i in range(15)]  # paper: 2048 .. 16384
    assert length_grid(4, 3, 12) == [4, 7, 10, 12]  # 13 > 12: the cap closes the grid
    assert length_grid(100, 50, 20) == [20]  # lb above the cap: the cap alone


def test_coverage_and_target_by_hand():
    lengths = [3, 5, 9, 12, 14]  # 5 responses of one bucket, correct or not
    grid = [4, 8, 12, 16]
    # c(4) = 1/5, c(8) = 2/5, c(12) = 4/5, c(16) = 5/5
    assert [coverage(lengths, g) for g in grid] == [0.2, 0.4, 0.8, 1.0]
    # high m = 5: floor(0.2 * 5) = 1 -> 4
    assert choose_target(lengths, grid, 5) == 4
    # medium m = 2: floor(0.4 * 2) = 0, floor(0.8 * 2) = 1 -> 12
    assert choose_target(lengths, grid, 2) == 12
    # low m = 1: needs coverage 1.0 -> 16
    assert choose_target(lengths, grid, 1) == 16
    assert choose_target([], grid, 1) is None  # no data: fallback later
    assert choose_target([30], grid, 1) is None  # nothing qualifies (lengths above the grid)


def test_multipliers_follow_the_released_floor_rule():
    assert coverage_multipliers(8) == {"low": 1, "medium": 2, "high": 5}  # floor(8/3) = 2, floor(16/3) = 5
    assert coverage_multipliers(2) == {"low": 1, "medium": 1, "high": 1}  # floor(2/3) = 0 clamped to 1


def test_bucket_boundaries_differ_between_monitor_and_training():
    # monitor: low <= 1/3 < medium <= 2/3 < high
    assert [monitor_bucket(c, 3) for c in range(4)] == ["low", "low", "medium", "high"]
    assert [monitor_bucket(c, 6) for c in (2, 3, 4, 5)] == ["low", "medium", "medium", "high"]
    # training: >= 2/3 high, [1/3, 2/3) medium, < 1/3 low
    assert [training_bucket(c, 3) for c in range(4)] == ["low", "medium", "high", "high"]
    assert [training_bucket(c, 8) for c in (2, 3, 5, 6)] == ["low", "medium", "medium", "high"]


def test_targets_from_records_by_hand():
    grid = [4, 8, 12, 16]
    m = coverage_multipliers(4)  # low 1, medium 1, high 2
    records = [
        ([1, 1, 1, 1], [2, 6, 10, 14]),  # 4/4 > 2/3: high
        ([1, 1, 0, 0], [3, 3, 9, 20]),  # 2/4: medium
        ([0, 0, 0, 1], [5, 5, 5, 5]),  # 1/4 <= 1/3: low
        ([0, 0, 0, 0], [7, 7, 7, 15]),  # 0: low
    ]
    targets, stats = targets_from_records(records, grid, m)
    # high: c(4) = 1/4, floor(0.25 * 2) = 0; c(8) = 2/4, floor(1.0) = 1 -> 8
    # medium: m = 1 needs full coverage, 20 > 16 never covered -> None (fallback)
    # low: {5,5,5,5,7,7,7,15}: c(12) = 7/8, c(16) = 1 -> 16
    assert targets == {"low": 16, "medium": None, "high": 8}
    assert stats["low"] == {"questions": 2, "responses": 8, "accuracy": 1 / 8}
    assert stats["medium"]["accuracy"] == 0.5


# ------------------------------------------------------------------------------------------- repetition flag
def test_repetition_flag_on_constructed_sequences():
    assert not is_repetitive([5] * 8)  # <= 2n = 8 tokens: never flagged
    assert not is_repetitive(list(range(300)))  # all distinct
    # 20 tokens (< 30: bigrams, 2 occurrences, gap < 20 // 3 = 6): (1, 2) at 0 and 5
    assert is_repetitive([1, 2, 10, 11, 12, 1, 2, *range(20, 33)])
    # same bigram but 13 apart (>= 6) and no repeated 4-gram: not flagged
    assert not is_repetitive([1, 2, *range(10, 21), 1, 2, *range(40, 45)])
    # 60 tokens (trigrams): (7, 8, 9) at 10 and 20 (gap 10 < 20) -> flagged
    seq = list(range(100, 160))
    seq[10:13] = [7, 8, 9]
    seq[20:23] = [7, 8, 9]
    assert is_repetitive(seq)
    # 210 tokens (4-grams, threshold 3): a 4-gram twice is not enough, and no 8-gram repeats
    seq = list(range(1000, 1210))
    seq[10:14] = [1, 2, 3, 4]
    seq[30:34] = [1, 2, 3, 4]
    assert not is_repetitive(seq)
    seq[50:54] = [1, 2, 3, 4]  # three times, gaps 20 < 70 -> flagged
    assert is_repetitive(seq)
    # a run of one token is skipped as an n-gram (n > 2) but the 2n-gram pattern check sees it repeat
    assert is_repetitive([*range(100, 140), *([9] * 12), *range(200, 250)])
    # 300 tokens: the 4-gram (0, 1, 2, 3) occurs only twice (threshold 3), but the 8-gram 0..7 repeats
    seq = list(range(1000, 1300))
    seq[0:8] = list(range(8))
    seq[150:158] = list(range(8))
    assert is_repetitive(seq)


def _released_repetition_flag(tokens, n=4):
    """`detect_token_ngram_repetition_optimized_reversed` of LASER's released `compute_unique_tokens.py`, as a
    boolean (flagged iff it returns a position before the end): the reference `is_repetitive` is checked against."""
    from collections import defaultdict

    total = len(tokens)
    if total <= 2 * n:
        return False
    n = 2 if total < 30 else 3 if total < 100 else min(4, n)
    threshold = 2 if total < 200 else 3
    positions = defaultdict(list)
    for i in range(total - n, -1, -1):
        gram = tuple(tokens[i : i + n])
        if n > 2 and len(set(gram)) == 1:
            continue
        positions[gram].append(i)
        if len(positions[gram]) >= threshold:
            seen = sorted(positions[gram])
            if any(b - a < total // 3 for a, b in zip(seen, seen[1:])):
                return True
    if total >= 4 * n:
        patterns = set()
        for i in range(total - 2 * n, -1, -1):
            pattern = tuple(tokens[i : i + 2 * n])
            if pattern in patterns:
                return True
            patterns.add(pattern)
    return False


def test_repetition_flag_matches_the_released_scan_on_random_sequences():
    import random

    rng = random.Random(0)
    flagged = 0
    for _ in range(3000):
        total = rng.choice([rng.randint(0, 40), rng.randint(0, 120), rng.randint(150, 400)])
        vocab = rng.choice([2, 3, 5, 20, 200, 5000])
        seq = [rng.randrange(vocab) for _ in range(total)]
        if rng.random() < 0.3 and total > 20:  # plant a repeat
            start, width = rng.randrange(total - 10), rng.randint(2, 9)
            at = rng.randrange(total - width)
            seq[at : at + width] = seq[start : start + width][: len(seq[at : at + width])]
        assert is_repetitive(seq) == _released_repetition_flag(seq), seq
        flagged += _released_repetition_flag(seq)
    assert 300 < flagged < 2700  # both outcomes are well represented


# ------------------------------------------------------------------------------------------------ reward values
def test_laser_d_reward_values_by_hand():
    reward = get_laser_d_reward(num_generations=3)
    completions = [DONE, DONE, WRONG, DONE, WRONG, NO_CLOSE, WRONG, WRONG, WRONG]
    lengths = [4, 9, 3, 6, 20, 2, 30, 40, 50]
    out = reward(
        completions=completions,
        solution=["1"] * 9,
        completion_ids=[[0] * n for n in lengths],
        **_columns(9, low=10, medium=5, high=8),
    )
    # group 1: 2/3 correct -> high (L = 8): 4 <= 8 -> 1.5; 9 > 8 -> 1.0; wrong -> -0.5
    # group 2: 1/3 correct (format failure counts as wrong) -> medium (L = 5): 6 > 5 -> 1.0; wrong -0.5; format -1
    # group 3: 0/3 -> low (L = 10): all wrong -0.5 (LASER-D has no exploration bonus)
    assert out == [1.5, 1.0, -0.5, 1.0, -0.5, -1.0, -0.5, -0.5, -0.5]


def test_laser_de_bonus_for_long_non_repetitive_wrong_answers():
    reward = get_laser_d_reward(exploration=True, num_generations=4)
    repetitive = [1, 2] * 15  # 30 tokens, bigram (1, 2) every 2 tokens
    ids = [list(range(3)), list(range(12)), repetitive, list(range(2))]
    out = reward(
        completions=[WRONG, WRONG, WRONG, DONE],
        solution=["1"] * 4,
        completion_ids=ids,
        **_columns(4, low=10),
    )
    # 1/4 correct -> low (L = 10); wrong 3 <= 10: -0.5; wrong 12 > 10, distinct ids: -0.5 + 0.5 = 0;
    # wrong 30 > 10 but repetitive: -0.5; correct 2 <= 10: 1.5
    assert out == [-0.5, 0.0, -0.5, 1.5]
    # format failures never get the exploration bonus
    out = reward(completions=[NO_CLOSE] * 4, solution=["1"] * 4, completion_ids=[list(range(40))] * 4, **_columns(4))
    assert out == [-1.0] * 4


def test_laser_de_logs_its_exploration_activity():
    # The paper's condition (§3, released compute_length_reward_larse_de): a formatted wrong answer longer than L_k
    # is a candidate; a candidate not flagged repetitive gets +alpha. Logged as fractions of the scorable rows.
    logged = {}
    reward = get_laser_d_reward(exploration=True, num_generations=4)
    ids = [list(range(3)), list(range(12)), [1, 2] * 15, list(range(2))]
    out = reward(completions=[WRONG, WRONG, WRONG, DONE], solution=["1"] * 4, completion_ids=ids,
                 log_metric=logged.__setitem__, **_columns(4, low=10))  # fmt: skip
    # 1/4 correct -> low (L = 10): wrong 12 > 10 and wrong 30 > 10 are candidates (2/4), only the 12 distinct ids
    # are not repetitive (1/4)
    assert out == [-0.5, 0.0, -0.5, 1.5]
    assert logged == {
        "trl_efficient/laser_de/exploration_candidates": 0.5,
        "trl_efficient/laser_de/exploration_bonus": 0.25,
    }
    # an unscorable row (gold "\\frac{" cannot be parsed) is out of the denominator: 1 candidate, 0 bonus of 3
    logged.clear()
    reward(completions=[WRONG, WRONG, DONE, DONE], solution=["1", "1", "1", "\\frac{"],
           completion_ids=[[1, 2] * 15, list(range(3)), list(range(2)), list(range(2))],
           log_metric=logged.__setitem__, **_columns(4, medium=10))  # fmt: skip
    # 1/3 correct -> medium (L = 10): the 30 repetitive ids are the one candidate
    assert logged == {
        "trl_efficient/laser_de/exploration_candidates": pytest.approx(1 / 3),
        "trl_efficient/laser_de/exploration_bonus": 0.0,
    }
    # LASER-D has no such term and logs nothing; without log_metric the reward still scores
    logged.clear()
    get_laser_d_reward(num_generations=4)(completions=[WRONG] * 4, solution=["1"] * 4, completion_ids=ids,
                                          log_metric=logged.__setitem__, **_columns(4, low=10))  # fmt: skip
    assert logged == {}
    assert reward(completions=[WRONG] * 4, solution=["1"] * 4, completion_ids=ids, **_columns(4, low=10)) == [
        -0.5, 0.0, -0.5, -0.5
    ]  # fmt: skip


def test_repetition_flag_is_computed_only_where_a_reward_can_read_it():
    # The flag (the costly per-token scan) is skipped for rows that cannot get the bonus; the rewards must equal a
    # reward that computes it for every formatted row, on random batches with and without targets.
    import random

    from trl_efficient.rewards import laser  # the reward's module: the scan it calls

    class EveryRow(type(get_laser_d_reward(exploration=True, num_generations=4))):
        def _row_extras(self, completions, completion_ids, kwargs, rows):
            extras = super()._row_extras(completions, completion_ids, kwargs, rows)
            for extra, ids in zip(extras, completion_ids, strict=True):
                extra["repetitive"] = is_repetitive(list(ids)) if extra["formatted"] else None
            return extras

    lazy = get_laser_d_reward(exploration=True, num_generations=4)
    every = EveryRow(4, lazy.meter, True, lazy.alpha, lazy.correct_reward, lazy.wrong_reward, lazy.format_reward)
    rng = random.Random(0)
    scanned = []
    real_scan = laser.is_repetitive

    def counting_scan(tokens, n=4):
        scanned.append(len(tokens))
        return real_scan(tokens, n)

    bonus = formatted_wrong = 0
    for trial in range(200):
        n = 8
        completions = [rng.choice([DONE, WRONG, NO_CLOSE]) for _ in range(n)]
        ids = []
        for _ in range(n):
            length = rng.randint(3, 60)
            ids.append([rng.randrange(4 if rng.random() < 0.5 else 1000) for _ in range(length)])
        targets = {b: rng.choice([-1, rng.randint(5, 50)]) for b in ("low", "medium", "high")}
        kwargs = {"completions": completions, "solution": ["1"] * n, "completion_ids": ids, **_columns(n, **targets)}
        laser.is_repetitive = counting_scan
        try:
            out = lazy(**kwargs)
        finally:
            laser.is_repetitive = real_scan
        assert out == every(**kwargs), trial
        bonus += sum(r == 0.0 for r in out)
        formatted_wrong += completions.count(WRONG)
    assert bonus > 20  # the bonus fires in the comparison, so the flag's value matters
    # only formatted wrong answers are scanned (never a correct one, as computing it for every formatted row would),
    # and not all of them (those no longer than the smallest target are skipped)
    assert 0 < len(scanned) < formatted_wrong


def test_fallback_is_the_batch_maximum():
    reward = get_laser_d_reward(exploration=True, num_generations=2)
    kwargs = {"completions": [DONE, DONE, WRONG, WRONG], "solution": ["1"] * 4}
    ids = [[0] * 7, [0] * 12, list(range(5)), list(range(12))]
    # no columns at all (outside the trainer): every bucket uses the batch max 12: every correct gets the bonus,
    # no wrong answer is longer than 12 -> no exploration bonus
    assert reward(**kwargs, completion_ids=ids) == [1.5, 1.5, -0.5, -0.5]
    # high has a target, low has none (-1): the all-wrong group still falls back to 12
    assert reward(**kwargs, completion_ids=ids, **_columns(4, high=8)) == [1.5, 1.0, -0.5, -0.5]
    # extreme lengths: target 1 in both buckets
    assert reward(**kwargs, completion_ids=ids, **_columns(4, low=1, high=1)) == [1.0, 1.0, 0.0, 0.0]


def test_unscorable_rows_and_straddling_order():
    reward = get_laser_d_reward(num_generations=3)
    # gold "not math" cannot be parsed -> None, and it does not count in the group accuracy:
    # 2 correct of 2 scorable -> high (L = 5)
    out = reward(
        completions=[DONE, DONE, DONE],
        solution=["1", "1", "\\frac{"],
        completion_ids=[[0] * 4, [0] * 6, [0] * 4],
        **_columns(3, low=100, high=5),
    )
    assert out[:2] == [1.5, 1.0] and out[2] is None
    with pytest.raises(ValueError, match="not a multiple of the group size 3"):
        reward(completions=[DONE] * 2, solution=["1"] * 2, completion_ids=[[0]] * 2)


def test_laser_d_equals_laser_when_every_bucket_has_the_same_target():
    completions = [DONE, WRONG, NO_CLOSE, DONE]
    ids = [[0] * 3, [0] * 9, [0] * 2, [0] * 8]
    base = get_laser_reward(target_length=5)(completions=completions, solution=["1"] * 4, completion_ids=ids)
    d = get_laser_d_reward(num_generations=2)(
        completions=completions, solution=["1"] * 4, completion_ids=ids, **_columns(4, 5, 5, 5)
    )
    assert d == base == [1.5, -0.5, -1.0, 1.0]


def test_argument_errors_name_the_field():
    with pytest.raises(ValueError, match="alpha"):
        get_laser_d_reward(alpha="big")
    with pytest.raises(ValueError, match="monitor_interval"):
        LaserMonitor(monitor_interval=0)
    with pytest.raises(ValueError, match="multipliers"):
        LaserMonitor(multipliers={"high": 5})
    with pytest.raises(ValueError, match="monitor"):
        get_laser_d_reward(monitor=object())


def test_monitor_state_round_trip():
    m = LaserMonitor(grid_lower=4, grid_step=4, grid_cap=16, monitor_rollouts=2)
    m.apply_records([([1, 1], [3, 9]), ([0, 0], [5, 14])], step=3)
    state = json.loads(json.dumps(m.state_dict()))
    fresh = LaserMonitor(grid_lower=4, grid_step=4, grid_cap=16, monitor_rollouts=2)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == m.state_dict()
    # high {3, 9}, m = 1: c(12) = 1 -> 12; low {5, 14}: c(16) = 1 -> 16
    assert fresh.row_columns({}) == {"laser_target_low": 16, "laser_target_medium": -1, "laser_target_high": 12}
    assert fresh.last_step == 3 and fresh.passes == 1


# ------------------------------------------------------------------------------------------ monitor on a trainer
def _trainer(cls, model_dir, tok, out, max_steps=2, exploration=False, extra_rewards=(), **overrides):
    monitor = LaserMonitor(
        monitor_interval=1, monitor_prompts=4, monitor_rollouts=2, grid_lower=4, grid_step=8, batch_size=4
    )
    args = tiny_config(
        out,
        max_steps=max_steps,
        max_completion_length=24,
        generation_kwargs={"sequence_bias": [[[tok.eos_token_id], 3.0]]},
        **overrides,
    )
    reward = get_laser_d_reward(exploration=exploration, monitor=monitor)
    funcs = [reward, *extra_rewards]
    return cls(model=model_dir, reward_funcs=funcs, args=args, train_dataset=make_dataset(6)), monitor


def test_monitor_pass_feeds_the_reward_and_is_checkpointed(tiny_model_dir, tiny_tokenizer, tmp_path):
    seen = []  # the columns the rewards receive, recorded by a second reward that returns 0
    trainer, monitor = _trainer(
        RecordingTrainer, tiny_model_dir, tiny_tokenizer, tmp_path / "run", extra_rewards=[_spy(seen)],
        save_strategy="steps", save_steps=1,
    )  # fmt: skip
    assert monitor in trainer.callback_handler.callbacks
    assert len(monitor.prompt_indices) == 4 and len(monitor.chunks()) == 2  # 4 // 2 = 2 prompts per chunk
    trainer.train()
    # passes at train begin (step 0) and at the end of steps 1 and 2
    assert monitor.passes == 3 and monitor.last_step == 2 and monitor.failures == 0
    # the tiny model never closes </think>: every monitor answer is wrong -> one bucket, low, covered by the grid
    assert monitor.targets["low"] in length_grid(4, 8, 24) and monitor.targets["high"] is None
    with open(os.path.join(tmp_path, "run", "checkpoint-1", "trl_efficient_state.json")) as f:
        saved = json.load(f)["laser_d_monitor"]
    assert saved["last_step"] == 1 and saved["passes"] == 2
    # step 2's rows carried the targets of the step-1 pass as columns (-1: no target for the bucket)
    assert seen[1] == [saved["targets"]["low"], -1, -1]
    logged = [h for h in trainer.state.log_history if "trl_efficient/laser_d/target_low" in h]
    assert logged and logged[-1]["trl_efficient/laser_d/target_low"] == monitor.targets["low"]


def _spy(seen):
    def spy(completions, laser_target_low, laser_target_medium, laser_target_high, **kwargs):
        seen.append([laser_target_low[0], laser_target_medium[0], laser_target_high[0]])
        return [0.0] * len(completions)

    return spy


def test_resume_restores_targets_without_a_new_pass(tiny_model_dir, tiny_tokenizer, tmp_path):
    full, full_monitor = _trainer(
        RealRecordingTrainer, tiny_model_dir, tiny_tokenizer, tmp_path / "full", max_steps=2,
        save_strategy="steps", save_steps=1,
    )  # fmt: skip
    full.train()
    ckpt = os.path.join(tmp_path, "full", "checkpoint-1")
    resumed, monitor = _trainer(
        RealRecordingTrainer, tiny_model_dir, tiny_tokenizer, tmp_path / "resumed", max_steps=2,
        save_strategy="steps", save_steps=1,
    )  # fmt: skip
    calls = []
    original = monitor.run_pass
    monitor.run_pass = lambda step: (calls.append(step), original(step))[1]
    resumed.train(resume_from_checkpoint=ckpt)
    assert calls == [2]  # no pass at train begin: the checkpoint's targets were restored first
    assert monitor.state_dict() == full_monitor.state_dict()  # the step-2 pass on the same weights, same seed
    for a, b in zip(full.records[1:], resumed.records, strict=True):
        torch.testing.assert_close(torch.tensor(a["rewards"]), torch.tensor(b["rewards"]), equal_nan=True)


def test_failing_monitor_pass_keeps_training_alive(tiny_model_dir, tiny_tokenizer, tmp_path, monkeypatch, caplog):
    trainer, monitor = _trainer(RecordingTrainer, tiny_model_dir, tiny_tokenizer, tmp_path / "run", exploration=True)
    monitor.apply_records([([0, 0], [5, 9])], step=0)  # earlier targets: low 12
    monitor.last_step = None

    def boom(*args, **kwargs):
        raise RuntimeError("generate exploded")

    monkeypatch.setattr(trainer.model, "generate", boom)
    with caplog.at_level("WARNING"):
        trainer.train()
    assert trainer.state.global_step == 2
    assert monitor.failures == 2 and "generate exploded" in monitor.last_error  # steps 1 and 2 (targets existed)
    assert monitor.targets == {"low": 12, "medium": None, "high": None}  # kept
    assert "monitoring pass at step 1 failed" in caplog.text
    assert all(r == r for rec in trainer.records for row in rec["rewards"] for r in row)  # no NaN
