"""`examples/bingo_with_scorer_server.sh` end to end in its offline smoke mode: a scorer server process, then the
`bingo` recipe training 2 steps against it over HTTP (slow: two model loads in two processes)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


@pytest.mark.slow
def test_example_script_smoke_mode(tmp_path):
    env = {**os.environ, "SMOKE": "1", "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    env.pop("TRL_EFFICIENT_BINGO_SCORER", None)
    proc = subprocess.run(
        ["bash", "examples/bingo_with_scorer_server.sh", "--output_dir", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "scorer ready at http://127.0.0.1:" in proc.stdout
    assert "recipe 'bingo'" in proc.stdout
    assert os.path.exists(tmp_path / "out" / "trl_efficient_summary.json")
