"""HAPO (methods.md §12, arXiv 2505.11225): hand-computed cosine/linear length terms, argument checks, and the
trainer-kept history across epochs, in evaluation, and without the columns it needs."""

import math

import pytest
from helpers import RecordingTrainer, make_dataset, tiny_config

from trl_efficient.recipes import REWARD_BUILDERS, get_recipe
from trl_efficient.rewards import correctness_reward
from trl_efficient.rewards.history import get_hapo_length_reward, hapo_length_term

S2 = math.sqrt(2) / 2  # cos(pi/4)


def _call(reward, correct, lengths, best):
    n = len(lengths)
    completions = [r"\boxed{1}" if ok else r"\boxed{2}" for ok in correct]
    return reward(completions=completions, solution=["1"] * n, completion_ids=[[0] * L for L in lengths],
                  history_best_length=best)  # fmt: skip


@pytest.mark.parametrize(
    "correct, length, best, expected",
    [
        (True, 7, -1, 0.0),  # first visit / no correct answer yet: r_len = 0
        (False, 70, -1, 0.0),
        (True, 0, 10, 1.0),  # x = 0: cos 0 = 1
        (True, 5, 10, S2),  # x = 0.5: cos(pi/4) = 0.70711
        (True, 10, 10, 0.0),  # x = 1 (equal to the record): cos(pi/2) = 0
        (True, 12, 10, -0.30901699),  # x = 1.2: cos(0.6 pi) = -0.30902 > -0.7
        (True, 15, 10, -0.7),  # x = 1.5: cos(0.75 pi) = -0.70711 -> floor -0.7
        (True, 20, 10, -0.7),  # x = 2: c = -1 -> -0.7
        (True, 500, 10, -0.7),  # extreme length
        (False, 5, 10, 0.0),  # wrong and short: min(0, 0.70711) = 0
        (False, 12, 10, -0.30901699),  # wrong: min(0, -0.30902)
        (False, 15, 10, -S2),  # wrong: min(0, -0.70711), no -0.7 floor
        (False, 25, 10, -1.0),  # wrong, x = 2.5 >= 2: -1
    ],
)
def test_cosine_by_hand(correct, length, best, expected):
    assert _call(get_hapo_length_reward(), [correct], [length], [best]) == [pytest.approx(expected, abs=1e-7)]


@pytest.mark.parametrize(
    "correct, length, best, expected",
    [
        (True, 4, -1, 0.0),  # first visit
        (True, 5, 10, 0.5),  # L < h: 1 - 5/10
        (True, 10, 10, 0.0),  # h <= L < 1.1 h: 0
        (True, 109, 100, 0.0),  # inside the 10% band
        (True, 11, 10, 0.0),  # L = 1.1 h: -(11 - 11)/10 = 0
        (True, 15, 10, -0.4),  # -(15 - 11)/10
        (True, 30, 10, -0.7),  # -(30 - 11)/10 = -1.9 -> floor -0.7
        (False, 5, 10, 0.0),  # wrong below 1.1 h: 0 (never rewarded for brevity)
        (False, 15, 10, -0.4),  # -(15 - 11)/10
        (False, 30, 10, -1.0),  # -1.9 -> floor -1
    ],
)
def test_linear_by_hand(correct, length, best, expected):
    reward = get_hapo_length_reward(variant="linear")
    assert _call(reward, [correct], [length], [best]) == [pytest.approx(expected, abs=1e-9)]


def test_weight_unscorable_rows_and_whole_batch():
    reward = get_hapo_length_reward(w_lr=0.5)
    out = reward(completions=[r"\boxed{1}", r"\boxed{1}", "no answer"], solution=["1", "unparseable ???", "1"],
                 completion_ids=[[0] * 5, [0] * 5, [0] * 30], history_best_length=[10, 10, 10])  # fmt: skip
    # 0.5 * cos(pi/4) ; gold does not parse -> None ; wrong, x = 3 -> 0.5 * -1
    assert out[0] == pytest.approx(0.5 * S2) and out[1] is None and out[2] == pytest.approx(-0.5)
    # w_lr = 1: the worst correct answer (1 - 0.7 = 0.3) still beats the best wrong one (0)
    worst_correct = 1 + _call(get_hapo_length_reward(), [True], [100], [10])[0]
    best_wrong = 0 + _call(get_hapo_length_reward(), [False], [1], [10])[0]
    assert worst_correct == pytest.approx(0.3) and best_wrong == 0.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"w_lr": 1.5}, "w_lr must be <= 1.0"),
        ({"w_lr": -0.1}, "w_lr must be >= 0.0"),
        ({"variant": "square"}, "variant must be one of"),
        ({"length_unit": "chars"}, "length_unit='tokens' and length_scope='total'"),
        ({"length_scope": "thinking", "tokenizer": object()}, "length_unit='tokens' and length_scope='total'"),
        ({"correct_floor": 0.5}, "correct_floor must be <= 0.0"),
    ],
)
def test_bad_arguments_fail_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_hapo_length_reward(**kwargs)


def test_term_rejects_an_unknown_variant():
    assert hapo_length_term(True, 5, 10, "linear") == 0.5  # 1 - 5/10
    with pytest.raises(ValueError, match="variant must be one of"):
        hapo_length_term(True, 5, 10, "square")


def test_missing_history_column_is_a_clear_error():
    with pytest.raises(ValueError, match="history_best_length"):
        get_hapo_length_reward()(completions=[r"\boxed{1}"], solution=["1"], completion_ids=[[0]])


def test_recipe_total_is_the_papers():
    recipe = get_recipe("hapo")
    assert recipe.config_overrides == {"track_prompt_history": True, "prompt_sampler": "repeat"}
    assert [(s.builder, s.weight) for s in recipe.rewards] == [("correctness", 1.0), ("hapo_length", 1.0)]
    args = tiny_config("/tmp/unused", length_unit="chars")
    with pytest.raises(ValueError, match="length_unit='tokens'"):
        REWARD_BUILDERS.get("hapo_length")(args, None)


# ------------------------------------------------------------------------------------------------ with the trainer
def _trainer(model_dir, out, **overrides):
    args = tiny_config(out, per_device_train_batch_size=12, num_generations=4, **overrides)
    return RecordingTrainer(
        model=model_dir,
        reward_funcs=[correctness_reward, get_hapo_length_reward()],
        args=args,
        train_dataset=make_dataset(3),  # 3 prompts x G = 4 = one epoch per step
    )


def _expected(correct, length, best):
    """The cosine term written out independently of the implementation."""
    if best < 0:
        return 0.0
    x = length / best
    c = math.cos(x * math.pi / 2) if x < 2 else -1.0
    return max(-0.7, c) if correct else min(0.0, c)


def test_history_across_epochs_and_eval(tiny_model_dir, tmp_path):
    trainer = _trainer(tiny_model_dir, tmp_path, track_prompt_history=True, max_steps=4)
    trainer.train()
    assert len(trainer.records) == 4  # 4 epochs over the 3 prompts
    best: dict[int, float] = {}  # shortest correct length per prompt before each step, kept by hand
    seen_nonzero = False
    for step, rec in enumerate(trainer.records):
        rows = list(zip(rec["rewards"], rec["lengths"], rec["metadata"]["idx"], strict=True))
        for r, L, i in rows:  # scored against the previous epochs' record of its prompt (-1 where none)
            want = _expected(r[0] > 0.5, L, best.get(i, -1))
            assert r[1] == pytest.approx(want, abs=1e-6), (step, i)
            seen_nonzero |= want != 0.0
            if step == 0:
                assert r[1] == 0.0  # epoch 1: every prompt is new
        for r, L, i in rows:  # updated after scoring, from the whole batch
            if r[0] > 0.5:
                best[i] = min(best.get(i, L), L)
    assert best and seen_nonzero, "the scripted rollouts should solve prompts and revisit them"
    assert trainer.stateful_components["prompt_history"].best_length == {int(k): int(v) for k, v in best.items()}
    # evaluation: no update of the history, and the length term is 0 (eval prompts have no training history)
    reward = trainer.reward_funcs[1]
    trainer.model.eval()
    assert _call(reward, [True, False], [1, 99], [10, 10]) == [0.0, 0.0]
    trainer.model.train()
    assert _call(reward, [True], [5], [10]) == [pytest.approx(S2)]


def test_history_is_not_updated_in_eval(tiny_model_dir, tmp_path):
    trainer = _trainer(tiny_model_dir, tmp_path, track_prompt_history=True, max_steps=1,
                       eval_strategy="no", per_device_eval_batch_size=12)  # fmt: skip
    trainer.train()
    before = trainer.stateful_components["prompt_history"].state_dict()
    trainer.evaluate(eval_dataset=make_dataset(3))
    assert trainer.stateful_components["prompt_history"].state_dict() == before


def test_without_history_or_idx_the_trainer_refuses(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="track_prompt_history=True"):
        _trainer(tiny_model_dir, tmp_path / "a")  # history off
    with pytest.raises(ValueError, match="idx"):
        RecordingTrainer(
            model=tiny_model_dir,
            reward_funcs=[correctness_reward, get_hapo_length_reward()],
            args=tiny_config(tmp_path / "b", per_device_train_batch_size=12, track_prompt_history=True),
            train_dataset=make_dataset(3).remove_columns("idx"),
        )
