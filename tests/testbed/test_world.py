"""The testbed world: tasks, teacher traces, exact segmentation and token accounting (by hand)."""

import random

import pytest

from trl_efficient.overthinking.analysis import analyze_completion, floor_tokens, token_char_spans
from trl_efficient.overthinking.base import build_testbed_tokenizer
from trl_efficient.overthinking.data import load_testbed_dataset, task_from_row
from trl_efficient.overthinking.world import (
    WORLD_V2,
    Task,
    TraceStyle,
    apply_op,
    classify_sentences,
    make_tasks,
    make_trace,
    minimal_trace,
    parse_expression,
)
from trl_efficient_testbed.summary import summarize

TASK = Task(start=4, ops=(("+", 7),) * 3)  # 4+7=11->1, 1+7=8, 8+7=15->5


@pytest.fixture(scope="module")
def tok():
    return build_testbed_tokenizer()


def test_arithmetic_and_task():
    assert TASK.values == [1, 8, 5] and TASK.answer == 5 and TASK.difficulty == 3
    assert TASK.question == "Start at 4. Apply + 7 to it 3 times, keeping the last digit."
    with pytest.raises(ValueError, match="one operation"):
        _ = Task(1, (("+", 1), ("*", 2))).question
    assert apply_op(0, "-", 1) == 9  # mod 10
    assert parse_expression(TASK.expression) == TASK
    with pytest.raises(ValueError):
        apply_op(1, "/", 2)


def test_teacher_traces_are_correct_and_segment_exactly(tok):
    rng = random.Random(0)
    for task in make_tasks(200, seed=5):
        trace = make_trace(task, rng)
        assert trace.endswith(f"\\boxed{{{task.answer}}}")
        body = trace[len("<think>") : trace.rfind("</think>")]
        kinds = [s.kind for s in classify_sentences(task, body)]
        # every operation is done exactly once: by a step, or by a skip that merges two operations
        assert kinds.count("step") + 2 * kinds.count("skip") == task.difficulty
        stats = analyze_completion(task, tok(trace, add_special_tokens=False)["input_ids"] + [tok.eos_token_id], tok)
        assert stats["correct"]
        assert stats["necessary_tokens"] + stats["redundant_tokens"] == stats["tokens"]


def test_minimal_trace_has_no_redundancy_and_equals_floor(tok):
    ids = tok(minimal_trace(TASK), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    stats = analyze_completion(TASK, ids, tok)
    assert stats["redundant_tokens"] == 0 and stats["tokens"] == stats["floor_tokens"] == floor_tokens(TASK, tok)
    assert stats["num_steps"] == 3 and stats["correct"]


def test_redundant_tokens_counted_by_hand(tok):
    filler = " Wait. Check: 4 + 7 = 1."
    text = "<think> a: 4 + 7 = 1." + filler + " b: 1 + 7 = 8. c: 8 + 7 = 5. </think> \\boxed{5}"
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    stats = analyze_completion(TASK, ids, tok)
    # the filler's own tokens (each sentence starts with a space-prefixed word) are exactly the redundant ones
    assert stats["redundant_tokens"] == len(tok(filler, add_special_tokens=False)["input_ids"])
    assert stats["tokens"] == stats["floor_tokens"] + stats["redundant_tokens"]


def test_skip_and_wrong_steps(tok):
    text = "<think> a: 4 + 7 + 7 = 8. c: 8 + 7 = 5. </think> \\boxed{5}"
    stats = analyze_completion(TASK, tok(text, add_special_tokens=False)["input_ids"], tok)
    assert stats["num_skips"] == 1 and stats["num_steps"] == 1 and stats["redundant_tokens"] == 0
    assert stats["tokens"] < stats["floor_tokens"]  # a skip can go under the floor (at a risk to accuracy)
    wrong = "<think> a: 4 + 7 = 2. </think> \\boxed{2}"
    stats = analyze_completion(TASK, tok(wrong, add_special_tokens=False)["input_ids"], tok)
    assert not stats["correct"] and stats["num_steps"] == 1


def test_classify_repeats_and_wrong_operations_are_redundant():
    kinds = [s.kind for s in classify_sentences(TASK, " a: 4 + 7 = 1. a: 4 + 7 = 1. b: 1 * 7 = 7. b: 1 + 7 = 8.")]
    # a repeated step does not continue from the last result (1); "* 7" is not the task's operation
    assert kinds == ["step", "filler", "filler", "step"]
    # a wrong result still counts as the step, and the next step continues from it
    assert [s.kind for s in classify_sentences(TASK, " a: 4 + 7 = 2. b: 2 + 7 = 9.")] == ["step", "step"]


def test_token_spans_cover_text(tok):
    ids = tok("<think> a: 1 + 2 = 3. </think> \\boxed{3}", add_special_tokens=False)["input_ids"]
    text, spans = token_char_spans(tok, ids)
    assert (
        spans[0][0] == 0
        and spans[-1][1] == len(text)
        and all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    )


def test_teacher_data_overthinks(tok):
    rng = random.Random(0)
    records = []
    for task in make_tasks(300, seed=9):
        ids = tok(make_trace(task, rng), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        records.append(analyze_completion(task, ids, tok))
    s = summarize(records)
    assert s["accuracy"] == 1.0 and 0.3 < s["redundant_share"] < 0.7 and s["excess_over_floor"] > 10
    assert set(s["by_difficulty"]) == {str(d) for d in range(1, 9)}
    # more operations -> more tokens
    tokens = [s["by_difficulty"][str(d)]["mean_tokens"] for d in range(1, 9)]
    assert tokens == sorted(tokens)


def test_quiet_style_gives_minimal_traces():
    quiet = TraceStyle(verbosity_weights=(1.0,), skip_prob=0.0)
    rng = random.Random(0)
    assert all(make_trace(t, rng, quiet) == minimal_trace(t) for t in make_tasks(20, seed=1))


def test_dataset_rows_roundtrip():
    ds = load_testbed_dataset("train", n=8, seed=1, min_ops=2, max_ops=4)
    assert ds.column_names == ["prompt", "solution", "idx", "level", "source", "expression"]
    for row in ds:
        task = task_from_row(row)
        assert str(task.answer) == row["solution"] and task.difficulty == row["level"] and 2 <= row["level"] <= 4
        assert row["prompt"][0]["content"].startswith(task.question)
    assert list(load_testbed_dataset("test", n=4)["expression"]) != list(
        load_testbed_dataset("train", n=4)["expression"]
    )


# ---------------------------------------------------------------------------------------------------------------
# World v2: framing, slips repaired by checks, five-way accounting
# ---------------------------------------------------------------------------------------------------------------


def test_checks_are_useful_when_they_change_the_running_value():
    # 4 + 7 = 1 (not 2): the check repairs the slip and the chain continues from its value
    text = " a: 4 + 7 = 2. Check: 4 + 7 = 1. Let me recheck: 4 + 7 = 1. b: 1 + 7 = 8. Check: 1 + 7 = 8."
    assert [s.kind for s in classify_sentences(TASK, text)] == [
        "step",
        "check_useful",  # 2 -> 1
        "check_useless",  # agrees with the running value 1
        "step",  # continues from the check's value
        "check_useless",
    ]
    # a check of another operation, or from another left operand, is filler; before any step, too
    text = " Check: 4 + 7 = 1. a: 4 + 7 = 2. Check: 2 + 7 = 9. Check: 4 * 7 = 8."
    assert [s.kind for s in classify_sentences(TASK, text)] == ["filler", "step", "filler", "filler"]


def test_five_way_token_accounting_by_hand(tok):
    check = " Check: 4 + 7 = 1."
    useless = " Check: 1 + 7 = 8."
    filler = " Let me read the task."
    text = (
        "<think>"
        + filler
        + " a: 4 + 7 = 2."
        + check
        + " b: 1 + 7 = 8."
        + useless
        + " c: 8 + 7 = 5. </think> \\boxed{5}"
    )
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    stats = analyze_completion(TASK, ids, tok)
    n = lambda t: len(tok(t, add_special_tokens=False)["input_ids"])  # noqa: E731
    assert stats["check_useful_tokens"] == n(check) and stats["check_useless_tokens"] == n(useless)
    assert stats["filler_tokens"] == n(filler)
    assert stats["redundant_tokens"] == n(useless) + n(filler)  # a useful check is thinking that pays
    assert stats["necessary_tokens"] == stats["floor_tokens"] + n(check)  # the floor's steps + the repair
    assert stats["useful_checks"] == 1 and stats["useless_checks"] == 1 and stats["correct"]


def test_v2_teacher_slips_only_on_long_chains_and_a_check_repairs_them():
    """World v2's teacher: late steps slip (0.2), a check follows each late step out of habit (0.9 at verbosity >= 1,
    i.e. 95% of traces), slipped or not, always with the correct value; the first two operations never slip and are
    never checked."""
    rng = random.Random(0)
    slips_at, checked_at, caught, missed, wrong, useless = [], [], 0, 0, 0, 0
    for task in make_tasks(600, seed=11):
        trace = make_trace(task, rng, WORLD_V2)
        body = trace[len("<think>") : trace.rfind("</think>")]
        segments = classify_sentences(task, body)
        kinds = [s.kind for s in segments]
        # every operation is done exactly once, from the running value as written
        assert kinds.count("step") + 2 * kinds.count("skip") == task.difficulty
        # a step whose written result is not the arithmetic of its own operands is a slip
        slipped = []
        for i, seg in enumerate(segments):
            if seg.kind == "step":
                a, op, b, c = seg.text.split(": ")[1].rstrip(".").replace("=", "").split()
                if apply_op(int(a), op, int(b)) != int(c):
                    slipped.append(i)
                    slips_at.append("abcdefgh".index(seg.text[0]))
        for i in slipped:
            if i + 1 < len(segments) and segments[i + 1].kind == "check_useful":
                caught += 1
            else:
                missed += 1
        for i, seg in enumerate(segments):
            if seg.kind.startswith("check"):
                step = segments[i - 1]  # a check restates the step right before it, with the correct value
                a, op, b, c = seg.text.split(": ")[1].rstrip(".").replace("=", "").split()
                assert step.kind == "step" and apply_op(int(a), op, int(b)) == int(c)
                checked_at.append("abcdefgh".index(step.text[0]))
                useless += seg.kind == "check_useless"
        # every slip caught: the answer is right (a missed one is usually fatal; `* 5` can still land on it)
        right = trace.endswith(f"\\boxed{{{task.answer}}}")
        if all(i + 1 < len(segments) and segments[i + 1].kind == "check_useful" for i in slipped):
            assert right
        wrong += not right
    assert slips_at and min(slips_at) >= WORLD_V2.slip_from  # the first `slip_from` operations never slip
    assert checked_at and min(checked_at) >= WORLD_V2.slip_from  # ... and are never checked
    assert 0.8 < caught / (caught + missed) < 0.92  # check_prob 0.9 x P(verbosity >= 1) 0.95
    assert useless > 2 * caught  # a habit: most checks restate a correct step (4 correct late steps per slip)
    assert 0.5 * missed < wrong <= missed


def test_v2_teacher_overthinks_easy_tasks_at_least_as_much_as_hard_ones():
    from trl_efficient.overthinking.base import BASE_MODEL_SIZES, _as_reloaded
    from trl_efficient.testing.tiny import build_tiny_model

    tok2 = build_testbed_tokenizer(WORLD_V2)
    model = build_tiny_model(tok2, hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, seed=0)
    tok2 = _as_reloaded(tok2, model)  # the tokenizer the v2 base model is trained and used with
    assert BASE_MODEL_SIZES["v2"].style == WORLD_V2
    rng = random.Random(0)
    records = []
    for task in make_tasks(400, seed=12):
        ids = tok2(make_trace(task, rng, WORLD_V2), add_special_tokens=False)["input_ids"] + [tok2.eos_token_id]
        records.append(analyze_completion(task, ids, tok2))
    s = summarize(records)
    # unchecked slips make some teacher answers wrong (world v2: 20% slips from the third operation, 85% checked)
    assert 0.75 < s["accuracy"] < 0.95
    assert s["mean_tokens"] / s["mean_floor_tokens"] >= 2.5 and s["redundant_share"] >= 0.5

    def ratio(levels):
        cells = [s["by_difficulty"][str(k)] for k in levels]
        return sum(c["mean_tokens"] * c["n"] for c in cells) / sum(c["mean_floor_tokens"] * c["n"] for c in cells)

    assert ratio((1, 2)) >= ratio((7, 8))


def test_v1_models_keep_their_cache_keys():
    """World v2's fields are left out of the v1 configs' keys: the quickstart's base model is the same model."""
    from trl_efficient.overthinking.base import BASE_MODEL_SIZES

    assert BASE_MODEL_SIZES["base"].key() == "0591bd1f65" and BASE_MODEL_SIZES["formats"].key() == "41860e7d31"
    assert "slip_prob" not in BASE_MODEL_SIZES["base"].to_dict()["style"]


def test_world_v2_traces_are_unchanged_by_v3():
    """World v3's teacher is a new `TraceStyle` value, not new code: v2's teacher draws the same traces as before
    (the digest of 300 traces, computed with the world module of 3effcee, before v3)."""
    import hashlib

    from trl_efficient.overthinking.world import WORLD_V2, make_tasks, make_trace

    rng = random.Random(5)
    text = "\n".join(make_trace(t, rng, WORLD_V2) for t in make_tasks(300, seed=9))
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == "8f538b6e1d57e70a"
