"""Hand-written fixtures in the raw Hub formats of the Hub-only benchmarks (a few rows each), written to tmp files."""

import json

import pytest

AIME_ROWS = [  # HuggingFaceH4/aime_2024 / yentinglin/aime_2025 columns
    {"id": 60, "problem": "Find the remainder when 2024 is divided by 1000.", "answer": "24", "url": "", "year": 2024},
    {"id": 61, "problem": "How many positive divisors does 12 have?", "answer": "6", "url": "", "year": 2024},
]
THEOREMQA_ROWS = [  # TIGER-Lab/TheoremQA columns (Picture is an image or None)
    {"Question": "Is 7 a prime number?", "Answer": "True", "Answer_type": "bool", "Picture": None},
    {
        "Question": "What are the roots of x^2 - 3x + 2?",
        "Answer": "[1, 2]",
        "Answer_type": "list of integer",
        "Picture": None,
    },
    {"Question": "A car moves 10 m in 4 s. Speed in m/s?", "Answer": "2.5", "Answer_type": "float", "Picture": None},
    {
        "Question": "Which option is the largest? (a) 1 (b) 3 (c) 2",
        "Answer": "(b)",
        "Answer_type": "option",
        "Picture": None,
    },
    {"Question": "Read the figure.", "Answer": "3", "Answer_type": "integer", "Picture": "figure.png"},
]
OLYMPIAD_ROWS = [  # Hothan/OlympiadBench OE_TO_maths_en_COMP columns
    {
        "id": 1,
        "question": "Find all x with x^2 = 1.",
        "final_answer": ["$1$", "$-1$"],
        "is_multiple_answer": True,
        "unit": None,
        "answer_type": "Numerical",
        "subfield": "Algebra",
    },
    {
        "id": 2,
        "question": "Compute 1/2 + 1/4.",
        "final_answer": ["$\\frac{3}{4}$"],
        "is_multiple_answer": False,
        "unit": None,
        "answer_type": "Numerical",
        "subfield": "Algebra",
    },
]


def _write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return str(path)


@pytest.fixture
def hub_fixture_files(tmp_path):
    return {
        "aime24": _write(tmp_path / "aime24.jsonl", AIME_ROWS),
        "theoremqa": _write(tmp_path / "theoremqa.jsonl", THEOREMQA_ROWS),
        "olympiadbench": _write(tmp_path / "olympiadbench.jsonl", OLYMPIAD_ROWS),
    }
