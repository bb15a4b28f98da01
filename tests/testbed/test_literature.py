"""The published head-to-heads (trl_efficient/testbed/literature.yaml) and their reading on the testbed (issue 35,
item 5): the list validates, the tau is pinned to hand-computed values, the command reads the committed comparison,
and docs/literature.md holds the command's output."""

import os

import pytest

from trl_efficient.recipes import RECIPES
from trl_efficient.testbed import cli
from trl_efficient.testbed.literature import (
    DEFAULT_RESULTS,
    concordance,
    kendall_tau,
    literature,
    literature_markdown,
    load_pairs,
    published_metric,
    read_pair,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, DEFAULT_RESULTS)
DOCS = os.path.join(ROOT, "docs", "literature.md")
START, END = "<!-- literature:start -->", "<!-- literature:end -->"


def test_every_entry_names_registered_recipes_a_source_and_numbers():
    pairs = load_pairs()
    assert len(pairs) >= 18
    for pair in pairs:
        assert pair["winner"] in RECIPES and pair["loser"] in RECIPES, pair
        assert "arXiv:" in pair["source"] and pair["cite"], pair  # every source is a paper with its id
        for side in ("winner_result", "loser_result"):
            assert pair[side]["accuracy"] > 0 and pair[side]["tokens"] > 0 and pair[side]["setting"], pair


def test_every_metric_follows_the_rule_over_the_published_numbers():
    # the metric is chosen from the paper's numbers alone, never from the testbed's result
    for pair in load_pairs():
        assert pair["metric"] == published_metric(pair["winner_result"], pair["loser_result"]), pair


def test_published_metric_hand_computed():
    # winner longer -> accuracy; winner less accurate -> tokens
    assert published_metric({"accuracy": 60, "tokens": 1000}, {"accuracy": 50, "tokens": 900}) == "accuracy"
    assert published_metric({"accuracy": 50, "tokens": 800}, {"accuracy": 50, "tokens": 900}) == "tokens"
    # better on both: saves 1 - 800/1000 = 20% -> tokens; 1 - 810/1000 = 19% -> accuracy
    assert published_metric({"accuracy": 51, "tokens": 800}, {"accuracy": 50, "tokens": 1000}) == "tokens"
    assert published_metric({"accuracy": 51, "tokens": 810}, {"accuracy": 50, "tokens": 1000}) == "accuracy"


def test_load_pairs_refuses_a_duplicate_pair_and_a_missing_field(tmp_path):
    entry = ("- {winner: dot, loser: dler, metric: accuracy, model: m, benchmark: b, approximate: false, source: s, "
             "cite: c, kind: own, how: h, winner_result: {accuracy: 43.1, tokens: 3342, setting: x}, "
             "loser_result: {accuracy: 35.8, tokens: 3354, setting: y}}\n")  # fmt: skip
    path = tmp_path / "pairs.yaml"
    path.write_text(entry + entry.replace("winner: dot, loser: dler", "winner: dler, loser: dot"))
    with pytest.raises(ValueError, match="listed twice"):
        load_pairs(str(path))
    path.write_text(entry.replace("source: s, ", ""))
    with pytest.raises(ValueError, match="missing source"):
        load_pairs(str(path))
    path.write_text(entry.replace("metric: accuracy", "metric: score"))
    with pytest.raises(ValueError, match="metric must be one of"):
        load_pairs(str(path))


def test_kendall_tau_hand_computed():
    assert kendall_tau(3, 1) == 0.5  # (3 - 1) / (3 + 1)
    assert kendall_tau(6, 10) == -0.25  # (6 - 10) / 16
    assert kendall_tau(4, 0) == 1.0 and kendall_tau(0, 0) is None


def test_concordance_counts_ties_and_leaves_out_what_cannot_be_judged():
    readings = [
        {"reading": "agrees", "difference": [2.0, 1.0, 3.0]},  # concordant, decided
        {"reading": "agrees", "difference": [1.0, 0.5, 1.5]},  # concordant, decided
        {"reading": "undecided", "difference": [0.5, -1.0, 2.0]},  # concordant, undecided
        {"reading": "disagrees", "difference": [-1.0, -2.0, -0.5]},  # discordant, decided
        {"reading": "undecided", "difference": [0.0, -1.0, 1.0]},  # a tie
        {"reading": "cannot be judged", "difference": None},
    ]
    out = concordance(readings)
    # all: C 3, D 1 -> (3 - 1) / 4 = 0.5; decided: 2 agree, 1 disagrees -> (2 - 1) / 3
    assert out["all"] == {"concordant": 3, "discordant": 1, "ties": 1, "tau": 0.5}
    assert out["decided"] == {"agrees": 2, "disagrees": 1, "undecided": 2, "tau": pytest.approx(1 / 3)}
    assert out["cannot_judge"] == 1 and out["pairs"] == 6


def test_a_missing_row_or_two_rows_of_the_same_runs_cannot_be_judged():
    pair = {"winner": "laser-d", "loser": "laser-de", "metric": "accuracy"}
    rows = {"laser-d": {}, "laser-de": {"method_check": {"duplicate_of": "laser-d"}}}
    out = read_pair(pair, rows, {"laser-d": None, "laser-de": None}, {"bootstrap": 10, "seed": 0})
    assert out["reading"] == "cannot be judged" and "same runs" in out["note"]
    out = read_pair({**pair, "loser": "kimi"}, rows, {"laser-d": None}, {"bootstrap": 10, "seed": 0})
    assert out["reading"] == "cannot be judged" and "no finished row for kimi" in out["note"]


def test_the_command_reads_every_pair_on_the_committed_comparison(capsys, tmp_path):
    assert cli.main(["literature", RESULTS, "--json", str(tmp_path / "lit.json")]) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == len(load_pairs())
    assert "Kendall tau, all pairs" in printed and "Kendall tau, decided pairs" in printed
    assert (tmp_path / "lit.json").exists()


def test_docs_block_equals_the_command_output():
    with open(DOCS) as f:
        text = f.read()
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == literature_markdown(literature(RESULTS)).strip()
