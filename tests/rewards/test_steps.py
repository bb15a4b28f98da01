"""Tests for the step-level rewards (trl_efficient/rewards/steps.py): the segmenter, Step Pruner, GRSP. Values are
computed by hand from methods.md §19 / §27 (arithmetic in the comments)."""

import math
import pickle
from types import SimpleNamespace

import pytest
import torch
from transformers import TrainerControl

from trl_efficient.rewards.steps import (
    StepPrunerStop,
    count_segment_length,
    get_grsp_reward,
    get_step_pruner_reward,
    segment_reasoning,
)


def think(*steps, answer="1", sep=" "):
    return "<think>" + sep.join(steps) + "</think> \\boxed{" + answer + "}"


class TestSegmenter:
    def test_modes(self):
        text = "<think>One two.\n\n \nWait, three.\nBut four. Five!</think> \\boxed{1}"
        assert segment_reasoning(text) == ["One two.", "Wait, three.\nBut four. Five!"]
        assert segment_reasoning(text, "keywords") == ["One two.", "Wait, three.", "But four. Five!"]
        assert segment_reasoning(text, "lines") == ["One two.", "Wait, three.", "But four. Five!"]
        assert segment_reasoning(text, "sentences") == ["One two.", "Wait, three.", "But four.", "Five!"]

    def test_keyword_needs_a_word_boundary(self):
        assert segment_reasoning("<think>x\nButter is y</think>", "keywords") == ["x\nButter is y"]

    def test_edges(self):
        assert segment_reasoning("<think>no markers at all</think> \\boxed{1}") == ["no markers at all"]
        assert segment_reasoning("no thinking block") == ["no thinking block"]  # no </think>: all reasoning
        assert segment_reasoning("") == [] and segment_reasoning("<think></think>\\boxed{1}") == []
        with pytest.raises(ValueError, match="segmenter must be one of"):
            segment_reasoning("x", "words")

    def test_lengths(self, tiny_tokenizer):
        assert count_segment_length("a b  c", "words") == 3 and count_segment_length("abc", "chars") == 3
        ids = tiny_tokenizer("a: 4 + 7 = 1.", add_special_tokens=False)["input_ids"]
        assert count_segment_length("a: 4 + 7 = 1.", "tokens", tiny_tokenizer) == len(ids)
        with pytest.raises(ValueError, match="needs the policy tokenizer"):
            get_step_pruner_reward(num_generations=2)


class TestStepTokensOnIds:
    """Steps counted in tokens on the completion's own ids (`LengthMeter.token_text`): each step counts the tokens it
    overlaps, checked against a count built here from each token decoded on its own."""

    @staticmethod
    def overlapping_tokens(tokenizer, ids, step_texts):
        pieces = [tokenizer.decode([i], skip_special_tokens=True) for i in ids]
        text, counts, at = "".join(pieces), [], 0
        for step in step_texts:
            start = text.index(step, at)
            end = at = start + len(step)
            offset, n = 0, 0
            for piece in pieces:
                if piece and offset < end and offset + len(piece) > start:
                    n += 1
                offset += len(piece)
            counts.append(n)
        return counts

    @pytest.mark.parametrize("segmenter", ["paragraphs", "keywords", "lines", "sentences"])
    def test_counts_match_token_overlap(self, tiny_tokenizer, segmenter):
        import random

        rng = random.Random(segmenter)
        words = ["add", "seven", "Wait,", "But", "Hmm", "3 + 4 = 7.", "check.", "so", "the", "total!"]
        seps = [" ", " ", "\n", "\n\n", ". ", "\n \n"]
        reward = get_grsp_reward(num_generations=1, segmenter=segmenter, tokenizer=tiny_tokenizer)
        for _ in range(40):
            body = "".join(rng.choice(words) + rng.choice(seps) for _ in range(rng.randint(1, 30)))
            text = f"<think>{body}</think> \\boxed{{7}}" if rng.random() < 0.8 else body
            ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"] + [tiny_tokenizer.eos_token_id]
            steps = segment_reasoning(text, segmenter)
            assert reward._row_extra(text, ids, {}, 0) == self.overlapping_tokens(tiny_tokenizer, ids, steps)

    @pytest.mark.parametrize("segmenter", ["paragraphs", "keywords", "sentences"])
    def test_batch_counts_equal_row_counts(self, tiny_tokenizer, segmenter):
        # the vectorised path (`LengthMeter.overlapping_tokens`, all rows at once) against one row at a time; rows it
        # cannot take (a prefix the ids do not hold, a split multi-byte character, an id outside the vocabulary, no
        # ids) go one by one and must come out the same
        import random

        rng = random.Random(segmenter)
        words = ["add", "Wait,", "But", "3 + 4 = 7.", "check.", "so", "\n"]
        seps = [" ", "\n", "\n\n", ". "]
        reward = get_grsp_reward(num_generations=1, segmenter=segmenter, tokenizer=tiny_tokenizer)
        completions, ids_list = [], []
        for i in range(60):
            body = "".join(rng.choice(words) + rng.choice(seps) for _ in range(rng.randint(0, 20)))
            text = f"<think>{body}{' é日本' * (i % 7 == 1)}</think> \\boxed{{7}}"  # split multi-byte characters
            ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"] + [tiny_tokenizer.eos_token_id] * (i % 2)
            if i % 7 == 3:
                text = "<think>" + text  # an assistant prefix the ids do not hold
            elif i % 7 == 5:
                ids = ids + [len(tiny_tokenizer) + 5]  # an id outside the vocabulary
            completions.append([{"role": "assistant", "content": text}])
            ids_list.append(ids)
        completions.append([{"role": "assistant", "content": ""}])
        ids_list.append([])
        batch = reward._row_extras(completions, ids_list, {}, [])
        fallback = reward.meter.overlapping_tokens(ids_list, [c[0]["content"] for c in completions],
                                                   [[] for _ in completions])  # fmt: skip
        assert 15 < sum(row is None for row in fallback) < 40, fallback  # both paths are exercised
        for i, (completion, ids) in enumerate(zip(completions, ids_list)):
            if i % 7 != 5:  # an id outside the vocabulary: the row path decodes it (the batch path falls back to it)
                assert batch[i] == reward._row_extra(completion, ids, {}, i), i

    def test_aligned_steps_equal_retokenised_steps(self, tiny_tokenizer):
        text = "<think>First we add.\n\nWait, 3 + 4 = 7.\nHmm, check it.\n\nAlternatively subtract.</think> \\boxed{7}"
        ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
        reward = get_grsp_reward(num_generations=1, tokenizer=tiny_tokenizer)
        retokenised = [count_segment_length(s, "tokens", tiny_tokenizer) for s in segment_reasoning(text, "keywords")]
        assert reward._row_extra(text, ids, {}, 0) == retokenised and len(retokenised) == 4

    def test_no_piece_table_falls_back_to_retokenising(self, tiny_tokenizer):
        class Plain:  # a tokenizer without a byte-level backend
            def __call__(self, text, add_special_tokens=False):
                return {"input_ids": list(range(len(text.split())))}

        reward = get_grsp_reward(num_generations=1, segment_unit="tokens", tokenizer=Plain())
        text = "<think>one two\n\nthree</think>x"
        assert reward.meter.token_text([1, 2]) is None
        assert reward._row_extra(text, [1, 2, 3], {}, 0) == [2, 1]


def pruner(**kw):
    base = dict(num_generations=4, segmenter="sentences", segment_unit="words", as_penalty=False)
    return get_step_pruner_reward(**{**base, **kw})


def call(reward, completions, gold="1"):
    n = len(completions)
    return reward(completions=completions, solution=[gold] * n, completion_ids=[[0]] * n)


class TestStepPruner:
    def test_hand_computed_group(self):
        rows = [
            think("A.", "B."),
            think("A.", "B.", "C."),
            think("A.", "B.", "C.", "D.", "E."),
            think("A.", answer="2"),
        ]
        # S = 2, 3, 5 (correct), 1 (wrong); S_min = 2: 1 ; 1 - 0.5 * 1/2 = 0.75 ; 1 - 0.5 * min(1, 3/2) = 0.5 ; 0
        assert call(pruner(), rows) == [1.0, 0.75, 0.5, 0.0]
        # as a penalty (added to correctness 1 / 0): R - c
        assert call(pruner(as_penalty=True), rows) == [0.0, -0.25, -0.5, 0.0]

    def test_guard_zeroes_and_is_not_a_reference(self):
        rows = [think("A b c d."), think("A.", "B."), think("A.", "B.", "C.", "D."), think("A.", answer="3")]
        # row 0: one 4-word step > 3 -> 0, not a reference; S_min = 2 -> 1 ; 1 - 0.5 * min(1, 2/2) = 0.5 ; wrong 0
        assert call(pruner(max_step_length=3), rows) == [0.0, 1.0, 0.5, 0.0]
        assert call(pruner(max_step_length=3, as_penalty=True), rows) == [-1.0, 0.0, -0.5, 0.0]

    def test_budget_smaller_than_one_segment(self):
        rows = [think("A b."), think("A b.", "C d."), think("A b."), think("A b.", answer="2")]
        assert call(pruner(max_step_length=1), rows) == [0.0] * 4  # every step is 2 words > 1: no S_min, all 0

    def test_all_wrong_all_correct_and_edges(self):
        assert call(pruner(), [think("A.", answer="2")] * 4) == [0.0] * 4
        assert call(pruner(), [think("A.", "B.")] * 4) == [1.0] * 4  # S = S_min for all
        # no thinking block (1 step, correct), single step, empty thinking (1 step), empty completion (wrong)
        rows = ["\\boxed{1}", think("A.", "B."), "<think></think> \\boxed{1}", ""]
        # S = 1, 2, 1, - ; S_min = 1: 1 ; 1 - 0.5 * min(1, 1/1) = 0.5 ; 1 ; 0
        out = call(pruner(), rows)
        assert out == [1.0, 0.5, 1.0, 0.0] and not any(math.isnan(x) for x in out)

    def test_unparseable_gold_is_none(self):
        out = pruner(num_generations=2)(
            completions=[think("A."), think("A.")], solution=["", ""], completion_ids=[[0]] * 2
        )
        assert out == [None, None]

    def test_validation(self):
        cases = [
            ({"kappa": 2}, "kappa"),
            ({"stop_window": 0}, "stop_window"),
            ({"stop_patience": 0}, "stop_patience"),
            ({"segmenter": "x"}, "segmenter"),
            ({"max_step_length": 0}, "max_step_length"),
        ]
        for kw, match in cases:
            with pytest.raises(ValueError, match=match):
                pruner(**kw)

    def test_pickles(self):
        reward = pickle.loads(pickle.dumps(pruner()))
        assert reward.__name__ == "step_pruner_reward"


def batch(*lengths):
    return SimpleNamespace(lengths=torch.tensor(lengths, dtype=torch.float))


class TestStopRule:
    def test_counts_non_improving_evaluations(self):
        r = pruner(stop_window=2, stop_check_every=1, stop_patience=2)
        r.update(batch(10, 10))  # window [10] avg 10: new low, 0 bad
        assert (r.best_average, r.non_improving, r.stop_requested) == (10.0, 0, False)
        r.update(batch(6, 10))  # [10, 8] avg 9: new low
        assert (r.best_average, r.non_improving) == (9.0, 0)
        r.update(batch(12))  # [8, 12] avg 10: not below 9 -> 1
        assert (r.best_average, r.non_improving, r.stop_requested) == (9.0, 1, False)
        saved = r.state_dict()
        r.update(batch(10))  # [12, 10] avg 11 -> 2 = patience: stop
        assert (r.non_improving, r.stop_requested) == (2, True)
        # round trip: a fresh reward restored from the step-3 state takes the same decision
        fresh = pruner(stop_window=2, stop_check_every=1, stop_patience=2)
        fresh.load_state_dict(saved)
        assert fresh.state_dict() == saved
        fresh.update(batch(10))
        assert fresh.state_dict() == r.state_dict()

    def test_checks_only_every_n_batches(self):
        r = pruner(stop_window=4, stop_check_every=2, stop_patience=1)
        r.update(batch(10))
        assert r.best_average is None  # 1 batch: no evaluation yet
        r.update(batch(20))  # evaluation: avg 15, first low
        r.update(batch(30))
        r.update(batch(40))  # evaluation: avg 25 >= 15 -> 1 = patience
        assert (r.batches, r.best_average, r.stop_requested) == (4, 15.0, True)

    def test_callback_and_attach(self):
        r = pruner(stop_patience=1)
        callbacks = []
        trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=callbacks), add_callback=callbacks.append)
        r.attach(trainer)
        r.attach(trainer)
        assert len(callbacks) == 1 and isinstance(callbacks[0], StepPrunerStop)
        control = TrainerControl()
        callbacks[0].on_step_end(None, None, control)
        assert not control.should_training_stop
        r.stop_requested = True
        callbacks[0].on_step_end(None, None, control)
        assert control.should_training_stop
        off, none = pruner(stop_patience=None), []
        off.attach(SimpleNamespace(callback_handler=SimpleNamespace(callbacks=none), add_callback=none.append))
        assert none == []


def grsp(**kw):
    base = dict(num_generations=3, segmenter="paragraphs", segment_unit="words", bucket_bounds=(2, 4))
    return get_grsp_reward(**{**base, "as_penalty": False, **kw})


class TestGRSP:
    ROWS = [
        think("A.", "B.", "C d e.", sep="\n\n"),  # words 1, 1, 3 -> buckets (short < 2, 2..4, > 4) = (2, 1, 0)
        think("C d e.", "F g h i j.", sep="\n\n"),  # 3, 5 -> (0, 1, 1)
        think("A.", answer="2"),  # 1 -> (1, 0, 0), wrong
    ]

    def test_hand_computed_group(self):
        # short [2, 0, 1]: mean 1, std sqrt(2/3) -> z = sqrt(3/2), -sqrt(3/2), 0
        # medium [1, 1, 0]: mean 2/3, std sqrt(2)/3 -> z = 1/sqrt(2), 1/sqrt(2), -sqrt(2)
        # long [0, 1, 0]: mean 1/3, std sqrt(2)/3 -> z = -1/sqrt(2), sqrt(2), -1/sqrt(2)
        # P_1 = 0.5 sqrt(1.5) + 0.3/sqrt(2) - 0.2/sqrt(2) = 0.683083 -> R = 1 - 0.1 * 0.683083
        # P_2 = -0.5 sqrt(1.5) + 0.3/sqrt(2) + 0.2 sqrt(2) = -0.117 -> max(0, .) = 0 -> R = 1 ; wrong -> 0
        p1 = 0.5 * math.sqrt(1.5) + 0.1 / math.sqrt(2)
        assert call(grsp(), self.ROWS) == pytest.approx([1 - 0.1 * p1, 1.0, 0.0])
        assert call(grsp(as_penalty=True), self.ROWS) == pytest.approx([-0.1 * p1, 0.0, 0.0])

    def test_equal_counts_and_edges(self):
        assert call(grsp(), [think("A.", "B.")] * 3) == [1.0] * 3  # std 0 everywhere: z = 0
        # empty thinking (counts 0), no thinking block, empty completion (wrong): short [0, 1, 0] -> z_2 > 0 only
        out = call(grsp(), ["<think></think> \\boxed{1}", "\\boxed{1}", ""])
        # short [0, 1, 0]: mean 1/3, std sqrt(2)/3 -> z_2 = sqrt(2); P_2 = 0.5 sqrt(2) -> R_2 = 1 - 0.05 sqrt(2)
        assert out == pytest.approx([1.0, 1 - 0.05 * math.sqrt(2), 0.0])

    def test_validation(self):
        for kw, match in [({"bucket_bounds": (4, 2)}, "bucket_bounds"), ({"bucket_weights": (1, 1)}, "bucket_weights"),
                          ({"coefficient": -1}, "coefficient"), ({"segment_unit": "x"}, "segment_unit")]:  # fmt: skip
            with pytest.raises(ValueError, match=match):
                grsp(**kw)


def test_stop_rule_state_is_checkpointed_and_restored(tiny_model_dir, tmp_path):
    import json
    import os

    from helpers import RecordingTrainer, make_dataset, tiny_config

    from trl_efficient.rewards import correctness_reward

    def make(out, max_steps):
        args = tiny_config(out, max_steps=max_steps, save_strategy="steps", save_steps=2)
        reward = get_step_pruner_reward(segment_unit="words", stop_window=3, stop_check_every=1, stop_patience=None)
        trainer = RecordingTrainer(
            model=tiny_model_dir, reward_funcs=[correctness_reward, reward], args=args, train_dataset=make_dataset(8)
        )
        return trainer, reward

    full, full_reward = make(tmp_path / "full", 3)
    full.train()
    with open(os.path.join(tmp_path, "full", "checkpoint-2", "trl_efficient_state.json")) as f:
        saved = json.load(f)["step_pruner_reward"]
    means = [sum(r["lengths"]) / len(r["lengths"]) for r in full.records]
    assert saved["batches"] == 2 and saved["recent_lengths"] == pytest.approx(means[:2])
    resumed, resumed_reward = make(tmp_path / "resumed", 3)
    resumed.train(resume_from_checkpoint=os.path.join(tmp_path, "full", "checkpoint-2"))
    assert resumed_reward.state_dict() == full_reward.state_dict()  # restored at step 2, then one more batch
    # window 3, a check after every batch: the lowest of m0, (m0 + m1) / 2, (m0 + m1 + m2) / 3
    best = min(means[0], sum(means[:2]) / 2, sum(means) / 3)
    assert full_reward.batches == 3 and full_reward.best_average == pytest.approx(best)
