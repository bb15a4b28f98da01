"""The real-model experiment's small variant (`trl-efficient testbed realmodel --small`): one seed, 2 GRPO steps of
each arm from SmolLM2-135M-Instruct, 32 held-out problems; the run files, the table and the resume."""

import json
import os

import pytest

pytestmark = pytest.mark.realmodel


def test_small_experiment_trains_evaluates_and_resumes(tmp_path, smollm2_dir):
    main = pytest.importorskip("trl_efficient_testbed.cli").main  # the instrument: pip install -e ./testbed

    out = str(tmp_path / "rm")
    assert main(["realmodel", "--small", "--output-dir", out]) == 0
    runs = sorted(os.listdir(os.path.join(out, "runs")))
    assert runs == ["base.json", "constant-penalty-seed0.json", "grpo-seed0.json", "kimi-seed0.json"]
    with open(os.path.join(out, "runs", "kimi-seed0.json")) as f:
        run = json.load(f)
    assert len(run["correct"]) == len(run["tokens"]) == 32 and run["small"] is True
    assert [e["step"] for e in run["log_history"]] == [1, 2]
    table = open(os.path.join(out, "realmodel.md")).read()
    assert "| kimi | 1 |" in table and "shorter than grpo at kept accuracy" in table
    assert os.path.getsize(os.path.join(out, "realmodel.png")) > 0
    before = {n: os.path.getmtime(os.path.join(out, "runs", n)) for n in runs}
    assert main(["realmodel", "--small", "--output-dir", out]) == 0  # resumes: trains nothing again
    assert before == {n: os.path.getmtime(os.path.join(out, "runs", n)) for n in runs}
