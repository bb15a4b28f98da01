"""`testbed world-report`: the forced-minimal-trace generation (with a scripted backend, exact texts) and the whole
report end to end on the `small` base (plumbing: seconds)."""

import json
import statistics

import pytest

from trl_efficient.eval.evaluate import GeneratedSample
from trl_efficient.testbed.report import forced_minimal_generate
from trl_efficient.testbed.world import Task


class ScriptedBackend:
    """Writes " 1 + 7 = 8. Wait. Check" after every step label and " \\boxed{8}" after </think>; records prompts."""

    def __init__(self):
        self.calls = []

    def generate(self, prompts, n, max_new_tokens, temperature, top_p, seed=0, description=""):
        self.calls.append((list(prompts), max_new_tokens))
        text = " \\boxed{8}" if prompts[0].endswith("</think>") else " 1 + 7 = 8. Wait. Check"
        return [[GeneratedSample([1, 2], text, True)] for _ in prompts]


def test_forced_minimal_trace_writes_one_labelled_sentence_per_operation():
    tasks = [Task(4, (("+", 7),) * 3), Task(1, (("+", 7),))]
    backend = ScriptedBackend()
    out = forced_minimal_generate(backend, None, ["P1 ", "P2 "], tasks, 0.6, 0.95, step_tokens=14, answer_tokens=10)
    # everything after a step's first "." is dropped: no check, no filler, ever
    assert out[0] == "<think> a: 1 + 7 = 8. b: 1 + 7 = 8. c: 1 + 7 = 8. </think> \\boxed{8}"
    assert out[1] == "<think> a: 1 + 7 = 8. </think> \\boxed{8}"
    # rounds: a (both rows), b and c (the 3-step task only), then the answers of both
    assert [len(p) for p, _ in backend.calls] == [2, 1, 1, 2]
    assert backend.calls[1][0] == ["P1 <think> a: 1 + 7 = 8. b:"]
    assert [m for _, m in backend.calls] == [14, 14, 14, 10]


def test_world_report_end_to_end(small_base, tmp_path, capsys):
    from trl_efficient.testbed.cli import main

    out = tmp_path / "report.json"
    assert main(["world-report", "--model", small_base, "--num-tasks", "8", "--max-new-tokens", "12",
                 "--json", str(out)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "| tokens / floor |" in printed and "length-following Pearson, hbpo" in printed
    report = json.loads(out.read_text())
    dr, tr = report["dynamic_range"], report["tradeoff"]
    s = report["summary"]
    assert dr["ratio"] == pytest.approx(s["mean_tokens"] / s["mean_floor_tokens"])
    assert dr["ratio_interval"][0] <= dr["ratio"] <= dr["ratio_interval"][1]
    assert sum(c["n"] for c in tr["by_difficulty"].values()) == 8
    assert tr["accuracy_own"] == pytest.approx(s["accuracy"])
    own = statistics.fmean(c["own"] * c["n"] for c in tr["by_difficulty"].values()) * len(tr["by_difficulty"]) / 8
    assert own == pytest.approx(s["accuracy"])
    assert set(report["following"]) == {"l1", "l1-max", "hbpo"}
