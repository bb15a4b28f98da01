"""The prompted recipes under their own prompts against their comparator (issue 35, item 3): the measures and the
pairing on hand-built panels and run files with hand-computed values, the seeds compare.json lists, the base as
BudgetThinker's comparator, and docs/prompted.md holds the command's output on the committed comparison."""

import json
import os

import numpy as np
import pytest

from trl_efficient_testbed import cli
from trl_efficient_testbed.prompted import DEFAULT_RESULTS, compare_prompted, following, prompted, prompted_markdown
from trl_efficient_testbed.stats import Panel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, DEFAULT_RESULTS)
DOCS = os.path.join(ROOT, "docs", "prompted.md")
START, END = "<!-- prompted:start -->", "<!-- prompted:end -->"
SETTINGS = {"bootstrap": 200, "seed": 0}


def _panel(seeds, modes):
    """A panel on 2 tasks with `modes[name] = (value, lengths (S, 2), thinking (S, 2), correct (S, 2))`."""
    cells = {n: {"lengths": np.array(le, float), "thinking": np.array(th, float), "correct": np.array(c, float)}
             for n, (_, le, th, c) in modes.items()}  # fmt: skip
    values = {n: v for n, (v, *_) in modes.items()}
    return Panel(list(seeds), np.array([1, 2]), {}, cells, values)


def test_following_error_is_the_checks_measure():
    assert following("l1-exact") == ("lengths", "abs")
    assert following("l1-max") == following("hbpo") == ("lengths", "over")
    assert following("saber") == following("budgetthinker") == ("thinking", "over")
    assert following("asrr") is None and following("grpo") is None


def test_differences_hand_computed():
    # two seeds, two tasks, two prompts (targets 10 and 20); every cell differs from the comparator by the same
    # amount, so every interval collapses to its point
    recipe = _panel([0, 1], {
        "l1-max:10": (10, [[12, 8], [12, 8]], [[0, 0], [0, 0]], [[1, 1], [1, 0]]),
        "l1-max:20": (20, [[30, 20], [30, 20]], [[0, 0], [0, 0]], [[1, 0], [1, 1]]),
    })  # fmt: skip
    control = _panel([0, 1, 2], {
        "l1-max:10": (10, [[16, 12], [16, 12], [0, 0]], [[0] * 2] * 3, [[0, 1], [0, 0], [0, 0]]),
        "l1-max:20": (20, [[34, 24], [34, 24], [0, 0]], [[0] * 2] * 3, [[0, 0], [0, 1], [0, 0]]),
        "saber:16": (16, [[0, 0]] * 3, [[0, 0]] * 3, [[0, 0]] * 3),  # a prompt of another recipe: not read
    })  # fmt: skip
    rows = compare_prompted("l1-max", recipe, "grpo-prompted", control, SETTINGS)
    assert [r["prompt"] for r in rows] == ["l1-max:10", "l1-max:20", "all"]
    assert all(r["seeds"] == [0, 1] for r in rows)  # seed 2 has no recipe run: left out
    first, second, pooled = rows
    # l1-max:10: accuracy 3/4 vs 1/4 -> +0.5; tokens 10 vs 14 -> -4 (every cell -4)
    # overshoot max(0, L - 10): recipe [2, 0] -> 1, control [6, 2] -> 4: -3 (cells -4 and -2)
    assert first["accuracy"]["recipe"] == 0.75 and first["accuracy"]["comparator"] == 0.25
    assert first["tokens"]["difference"] == pytest.approx([-4.0, -4.0, -4.0])
    assert first["following"]["measure"] == "max(0, L - v)"
    assert (first["following"]["recipe"], first["following"]["comparator"]) == (1.0, 4.0)
    assert first["following"]["difference"][0] == pytest.approx(-3.0)
    # l1-max:20: overshoot recipe [10, 0] -> 5, control [14, 4] -> 9: -4 in every cell
    assert second["following"]["difference"] == pytest.approx([-4.0, -4.0, -4.0])
    # all: per cell the mean over the two prompts; tokens (12 + 30) / 2 = 21 and (8 + 20) / 2 = 14 vs 25 and 18
    assert pooled["tokens"]["recipe"] == 17.5 and pooled["tokens"]["comparator"] == 21.5
    assert pooled["tokens"]["difference"] == pytest.approx([-4.0, -4.0, -4.0])
    # accuracy: recipe (3/4 + 3/4) / 2 = 0.75, control (1/4 + 1/4) / 2 = 0.25
    assert pooled["accuracy"]["difference"][0] == pytest.approx(0.5)


def test_abs_error_for_l1_exact_and_the_base_repeated_over_the_seeds():
    recipe = _panel([3, 4], {"l1:10": (10, [[12, 8], [14, 6]], [[0, 0], [0, 0]], [[1, 1], [1, 1]])})
    base = _panel([None], {"l1:10": (10, [[10, 20]], [[0, 0]], [[1, 0]])})
    (row,) = compare_prompted("l1-exact", recipe, "base", base, SETTINGS)  # one prompt: no "all" row
    # abs(L - 10): recipe [2, 2] and [4, 4] -> 3; base [0, 10] on both seeds -> 5
    assert row["seeds"] == [3, 4] and row["following"]["measure"] == "abs(L - v)"
    assert (row["following"]["recipe"], row["following"]["comparator"]) == (3.0, 5.0)
    assert row["following"]["difference"][0] == pytest.approx(-2.0)
    assert row["accuracy"]["difference"][0] == pytest.approx(0.5)  # 1 vs 1/2


def _run(recipe, seed, modes, tasks=2):
    """A run file as `Panel.from_runs` reads it: `modes[name] = (value, lengths, thinking, correct)`."""
    records = {"task": list(range(tasks)), "sample": [0] * tasks, "difficulty": [1] * tasks,
               "tokens": [5] * tasks, "correct": [1] * tasks}  # fmt: skip
    return {"recipe": recipe, "seed": seed, "records": records,
            "modes": {n: {"value": v, "lengths": le, "thinking": th, "correct": c}
                      for n, (v, le, th, c) in modes.items()}}  # fmt: skip


def test_the_command_reads_only_the_listed_seeds_and_falls_back_to_the_base(tmp_path, capsys):
    saber = {"saber:16": (16, [30, 30], [20, 24], [1, 1])}
    bt = {"budgetthinker:77": (77, [80, 90], [70, 90], [1, 0])}
    files = {
        "runs/saber/s0.json": _run("saber", 0, saber),
        "runs/saber/s1.json": _run("saber", 1, {"saber:16": (16, [10, 10], [16, 16], [0, 0])}),  # not listed
        "runs/grpo-prompted/s0.json": _run("grpo", 0, {"saber:16": (16, [40, 40], [26, 40], [0, 1])}),
        "runs/budgetthinker/s0.json": _run("budgetthinker", 0, bt),
        "runs/base/b.json": _run("base", None, {**bt, "budgetthinker:77": (77, [70, 70], [80, 80], [0, 0])}),
    }
    for path, run in files.items():
        os.makedirs(tmp_path / os.path.dirname(path), exist_ok=True)
        (tmp_path / path).write_text(json.dumps(run))
    compare = {"settings": SETTINGS, "rows": [{"recipe": n, "status": "ok"} for n in
                                              ("saber", "grpo-prompted", "budgetthinker", "base")],
               "runs": {"saber": ["runs/saber/s0.json"], "grpo-prompted": ["runs/grpo-prompted/s0.json"],
                        "budgetthinker": ["runs/budgetthinker/s0.json"], "base": ["runs/base/b.json"]}}  # fmt: skip
    (tmp_path / "compare.json").write_text(json.dumps(compare))
    out = prompted(str(tmp_path))
    by = {r["recipe"]: r for r in out["rows"]}
    assert set(by) == {"saber", "budgetthinker"}
    # saber (seed 0 only): thinking overshoot max(0, T - 16): [4, 8] -> 6 vs [10, 24] -> 17; tokens 30 vs 40
    assert by["saber"]["comparator"] == "grpo-prompted" and by["saber"]["seeds"] == [0]
    assert (by["saber"]["following"]["recipe"], by["saber"]["following"]["comparator"]) == (6.0, 17.0)
    assert by["saber"]["tokens"]["difference"][0] == pytest.approx(-10.0)
    # budgetthinker: grpo-prompted has not its prompts, the base has: overshoot [0, 13] -> 6.5 vs [3, 3] -> 3
    assert by["budgetthinker"]["comparator"] == "base"
    assert by["budgetthinker"]["following"]["difference"][0] == pytest.approx(3.5)
    assert by["budgetthinker"]["accuracy"]["difference"][0] == pytest.approx(0.5)
    # rows without runs (l1-exact, ...) are named, not compared
    assert any(m.startswith("l1-exact:") for m in out["missing"])
    text = prompted_markdown(out)
    assert "| saber | grpo-prompted | `saber:16` | 1 | 100.0 / 50.0 |" in text and "Not compared: " in text
    assert cli.main(["prompted", str(tmp_path), "--json", str(tmp_path / "p.json")]) == 0
    assert capsys.readouterr().out.strip() == text
    assert json.loads((tmp_path / "p.json").read_text())["rows"][0]["recipe"] == out["rows"][0]["recipe"]


def test_docs_block_equals_the_command_output():
    with open(DOCS) as f:
        text = f.read()
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == prompted_markdown(prompted(RESULTS)).strip()
