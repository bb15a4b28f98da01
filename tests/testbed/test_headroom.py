"""World v3's RL figures (`testbed.headroom`): grpo, the moderate and the over-aggressive length penalty, trained as
the comparison trains them, paired against grpo."""

import json
import os

from trl_efficient_testbed.headroom import AGGRESSIVE, rl_figures, rl_figures_items, rl_figures_markdown

TINY = dict(base_model="testbed:small", max_steps=1, num_train=16, num_eval=8, eval_samples=1,
            per_device_train_batch_size=8, num_generations=4, max_completion_length=24, max_ops=8, seeds=2,
            bootstrap=100)  # fmt: skip


def test_rl_figures_train_three_rows_and_reuse_the_comparisons_runs(small_base, tmp_path):
    from trl_efficient_testbed.runner import TestbedSettings, plan_runs

    settings = TestbedSettings(**TINY)
    out = str(tmp_path / "rl")
    rl = rl_figures(settings, out, workers=1, show_progress=False)
    # the moderate penalty is constant-penalty as the comparison trains it (alpha 1/cap), the aggressive one x4
    assert rl["moderate"]["alpha"] == 1 / 24 and abs(rl["aggressive"]["alpha"] - AGGRESSIVE / 24) < 1e-12
    # grpo and constant-penalty are the comparison's own jobs: their files are where `compare` looks for them
    plan = plan_runs(["grpo", "constant-penalty"], settings, out)
    assert all(os.path.isfile(j.path) for js in plan.values() for j in js)
    files = sorted(os.listdir(os.path.join(out, "runs", "constant-penalty")))
    assert len(files) == 4  # 2 seeds x (moderate, aggressive)
    keys = [json.load(open(os.path.join(out, "runs", "constant-penalty", f)))["key"]["rewards"] for f in files]
    alphas = sorted({k[1][2]["alpha"] for k in keys})
    assert alphas == [1 / 24, AGGRESSIVE / 24]
    for name in ("moderate", "aggressive"):
        for field in ("tokens", "accuracy", "accuracy_hard"):
            point, low, high = rl[name][field]
            assert low <= point <= high
        assert rl[name]["half_width"] >= 0
    assert 0.0 <= rl["grpo"]["accuracy"] <= 1.0 and rl["seeds"] == [0, 1]
    text = rl_figures_markdown(rl)
    assert "over-aggressive penalty (4 x alpha)" in text and "| aggressive |" in text
    assert len(rl_figures_items(rl)) == 4
    stamps = {f: os.path.getmtime(os.path.join(out, "runs", "constant-penalty", f)) for f in files}
    again = rl_figures(settings, out, workers=1, show_progress=False)  # resumable: nothing retrained
    assert again == rl
    assert stamps == {f: os.path.getmtime(os.path.join(out, "runs", "constant-penalty", f)) for f in files}


def test_world_report_rl_cli_writes_the_figures_into_the_report(small_base, tmp_path):
    from trl_efficient_testbed.cli import main

    sets = [f"{k}={v}" for k, v in TINY.items() if k not in ("base_model", "seeds")]
    out, report = tmp_path / "runs", tmp_path / "world_report_small.json"
    argv = ["world-report", "--model", "testbed:small", "--num-tasks", "8", "--max-new-tokens", "24", "--rl",
            "--output-dir", str(out), "--seeds", "2", "--json", str(report)]  # fmt: skip
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 0
    data = json.loads(report.read_text())
    assert data["rl"]["seeds"] == [0, 1] and data["rl"]["settings"]["max_steps"] == 1
    assert data["rl"]["settings"]["base_model"] == "testbed:small"
    assert len(list((out / "runs" / "constant-penalty").glob("*.json"))) == 4


def test_committed_world_reports_render_their_json():
    """The committed world reports of v2 and v3 (with their RL figures) are the Markdown of their JSON."""
    from trl_efficient_testbed.headroom import world_report_markdown_with_rl

    root = os.path.join(os.path.dirname(__file__), "..", "..", "perf", "testbed")
    for stem in ("results/world_report_v2", "results_v3/world_report_v3"):
        with open(os.path.join(root, stem + ".json")) as f:
            report = json.load(f)
        with open(os.path.join(root, stem + ".md")) as f:
            assert f.read() == world_report_markdown_with_rl(report)
        assert len(report["rl"]["seeds"]) == 9 and "| over-aggressive penalty" in world_report_markdown_with_rl(report)
