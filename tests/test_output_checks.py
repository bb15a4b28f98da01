"""Output paths are checked before any work, and a path that cannot be written is said as such ("cannot write"), in
one line, exit 2; a model folder that does not exist is named before anything is loaded (issue 47, item 7)."""

import os

import pytest

from trl_efficient.cli import main


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_data_prepare_refuses_an_output_dir_it_cannot_write_before_preparing(tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["data", "prepare", "--benchmarks", "gsm8k", "--output-dir", str(blocker / "out")]) == 2
    assert "is a file, not a folder" in _one_line(capsys)
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(locked) else real_access(p, mode))
    assert main(["data", "prepare", "--benchmarks", "gsm8k", "--output-dir", str(locked / "out")]) == 2
    line = _one_line(capsys)
    assert line.startswith("trl-efficient: error: --output-dir") and "cannot write" in line and "read" not in line
    assert not (locked / "out").exists()


def test_profile_refuses_its_output_before_profiling(tmp_path, capsys):
    assert main(["profile", "--model_name_or_path", "tiny:qwen2", "--dataset_name", "gsm8k",
                 "--output", str(tmp_path / "missing" / "profile.jsonl")]) == 2  # fmt: skip
    assert "the folder" in _one_line(capsys)


def test_serve_scorer_names_a_missing_model_folder(tmp_path, capsys):
    missing = tmp_path / "no-such-model"
    assert main(["serve-scorer", "--model", str(missing), "--port", "0"]) == 2
    line = _one_line(capsys)
    assert str(missing) in line and "Repo id" not in line


@pytest.mark.parametrize("flag", ["--output"])
def test_check_writable_names_the_flag(tmp_path, flag):
    from trl_efficient.core.checks import check_writable

    check_writable(flag, str(tmp_path / "ok.jsonl"))
    with pytest.raises(ValueError, match=f"^{flag} .*does not exist"):
        check_writable(flag, str(tmp_path / "no" / "x.jsonl"))


def test_a_permission_error_on_a_path_being_created_says_cannot_write(tmp_path):
    """The one line of a PermissionError names a write as a write: the path was not there (being created)."""
    from trl_efficient.cli import _file_error_line

    err = PermissionError(1, "Operation not permitted", str(tmp_path / "ro" / "out"))
    assert _file_error_line(err).startswith(f"cannot write {tmp_path / 'ro' / 'out'}")


def test_eval_and_train_refuse_an_output_folder_they_cannot_write_before_loading(tmp_path, capsys, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(locked) else real_access(p, mode))
    assert main(["eval", "--model", "tiny:qwen2", "--benchmarks", "gsm8k", "--output-dir", str(locked / "e")]) == 2
    assert "--output-dir" in (line := _one_line(capsys)) and "cannot write" in line
    assert main(["train", "--max_steps", "1", "--bf16", "false", "--output_dir", str(locked / "t")]) == 2
    assert "--output_dir" in (line := _one_line(capsys)) and "cannot write" in line
    assert not (locked / "e").exists() and not (locked / "t").exists()


def test_testbed_eval_names_an_empty_model_folder(tmp_path, capsys):
    pytest.importorskip("trl_efficient_testbed")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["testbed", "eval", "--model", str(empty), "--num-eval", "1"]) == 2
    line = _one_line(capsys)
    assert str(empty) in line and "without a model" in line and "tokenizer" not in line.lower()
