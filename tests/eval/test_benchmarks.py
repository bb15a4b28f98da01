"""Benchmark registry, loaders (bundled, prepared, local raw Hub formats, offline errors) and answer checking."""

import json

import pytest

from trl_efficient.data.benchmarks import (
    BENCHMARKS,
    BenchmarkUnavailableError,
    check_answer,
    get_benchmark,
    gold_to_text,
    load_benchmark,
)

COLUMNS = ["prompt", "solution", "idx", "level", "source", "answer_type"]


def test_registry_names_and_aliases():
    import trl_efficient.overthinking  # noqa: F401  (registers "testbed" when imported, as the CLI does; not order-dependent)

    assert {"gsm8k", "math500", "math_train", "aime24", "aime25", "theoremqa", "olympiadbench", "testbed"} <= set(
        BENCHMARKS
    )
    assert get_benchmark("MATH-500").name == "math500"
    assert get_benchmark("aime_2025").hub_id == "yentinglin/aime_2025"
    assert get_benchmark("olympiad").hub_config == "OE_TO_maths_en_COMP"
    with pytest.raises(ValueError, match="Unknown benchmark 'nope'"):
        get_benchmark("nope")


def test_bundled_gsm8k_and_math500_offline():
    ds = load_benchmark("gsm8k", limit=3, seed=0)
    assert ds.column_names == COLUMNS and len(ds) == 3
    assert all(s.replace("-", "").isdigit() for s in ds["solution"])  # "#### 1,234" -> "1234"
    ds = load_benchmark("math500", limit=5)
    assert set(ds["level"]) <= {1, 2, 3, 4, 5} and ds[0]["source"] == "math500"


def test_math_train_golds_are_boxed_contents():
    ds = load_benchmark("math_train", limit=4)
    assert all("\\boxed" not in s and s for s in ds["solution"])


def test_hub_only_offline_message(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BenchmarkUnavailableError) as err:
        load_benchmark("aime24", data_dir=str(tmp_path))
    message = str(err.value)
    assert "HuggingFaceH4/aime_2024" in message and "trl-efficient data prepare --benchmarks aime24" in message
    assert "--source aime24=" in message


def test_aime_fixture_raw_hub_format(hub_fixture_files):
    ds = load_benchmark("aime24", source=hub_fixture_files["aime24"], instruction=None)
    assert ds.column_names == COLUMNS
    assert list(ds["solution"]) == ["24", "6"] and list(ds["level"]) == [-1, -1]
    assert ds[0]["prompt"] == [{"role": "user", "content": "Find the remainder when 2024 is divided by 1000."}]


def test_theoremqa_fixture_drops_picture_rows_and_keeps_types(hub_fixture_files):
    ds = load_benchmark("theoremqa", source=hub_fixture_files["theoremqa"])
    assert len(ds) == 4  # the row with a Picture is dropped (text-only evaluation)
    assert list(ds["answer_type"]) == ["bool", "list of integer", "float", "option"]
    assert list(ds["solution"]) == ["True", "[1, 2]", "2.5", "(b)"]


def test_olympiad_fixture_list_answers(hub_fixture_files):
    ds = load_benchmark("olympiadbench", source=hub_fixture_files["olympiadbench"])
    assert list(ds["solution"]) == ["1, -1", "\\frac{3}{4}"]  # "$...$" stripped, several answers joined
    assert check_answer(r"\boxed{-1, 1}", ds[0]["solution"], ds[0]["answer_type"])  # compared as a set
    assert not check_answer(r"\boxed{1}", ds[0]["solution"], ds[0]["answer_type"])
    assert check_answer(r"\boxed{0.75}", ds[1]["solution"], ds[1]["answer_type"])


def test_prepared_file_is_used_first(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "aime25"
    folder.mkdir()
    (folder / "test.jsonl").write_text(json.dumps({"problem": "1+1?", "answer": "2", "level": -1, "answer_type": ""}))
    ds = load_benchmark("aime25", data_dir=str(tmp_path))
    assert list(ds["solution"]) == ["2"]


def test_limit_is_a_seeded_subset(hub_fixture_files):
    a = load_benchmark("theoremqa", source=hub_fixture_files["theoremqa"], limit=2, seed=3)
    b = load_benchmark("theoremqa", source=hub_fixture_files["theoremqa"], limit=2, seed=3)
    assert list(a["solution"]) == list(b["solution"]) and len(a) == 2 and list(a["idx"]) == [0, 1]


@pytest.mark.parametrize(
    "completion, gold, answer_type, expected",
    [
        (r"<think>x</think> \boxed{True}", "True", "bool", True),
        (r"\boxed{\text{Yes}}", "True", "bool", True),
        (r"\boxed{no}", "False", "bool", True),
        (r"\boxed{True}", "False", "bool", False),
        ("no box at all", "True", "bool", False),
        (r"\boxed{(b)}", "(b)", "option", True),
        (r"\boxed{b}", "(b)", "option", True),
        (r"\boxed{(c)}", "(b)", "option", False),
        (r"\boxed{[1, 2]}", "[1, 2]", "list of integer", True),
        (r"\boxed{1, 2}", "[1, 2]", "list of integer", True),
        (r"\boxed{[2, 1]}", "[1, 2]", "list of integer", False),  # order matters for TheoremQA lists
        (r"\boxed{[1, 2, 3]}", "[1, 2]", "list of integer", False),
        (r"\boxed{[0.333, 2.01]}", "[0.3333, 2.0]", "list of float", True),
        # 4% relative tolerance: |2.55 - 2.5| = 0.05 <= 0.04 * 2.5 = 0.1; |2.7 - 2.5| = 0.2 > 0.1
        (r"\boxed{2.55}", "2.5", "float", True),
        (r"\boxed{2.7}", "2.5", "float", False),
        (r"\boxed{2.5 \text{ m/s}}", "2.5", "float", True),  # units are stripped
        (r"The answer is 3.", "3", "integer", True),
        # issue 36 item 6a: an echoed empty box is no answer; the anchored one after it is read
        (r"I put the final answer within \boxed{}. The answer is (b).", "(b)", "option", True),
        (r"Answer within \boxed{}: the answer is True.", "True", "bool", True),
        (r"\boxed{\frac{5}{2}}", "2.5", "float", True),
    ],
)
def test_theoremqa_typed_checks(completion, gold, answer_type, expected):
    assert check_answer(completion, gold, answer_type) is expected


def test_untyped_checks_use_is_correct():
    assert check_answer(r"<think>\boxed{3}</think> \boxed{4}", "4") is True
    assert check_answer(r"\boxed{4}", "") is None  # unparseable gold: no signal
    assert check_answer(r"\boxed{0.5}", "\\frac{1}{2}") is True


def test_gold_to_text_forms():
    assert gold_to_text(2.0) == "2" and gold_to_text(False) == "False" and gold_to_text(["$a$", None, " "]) == "a"
