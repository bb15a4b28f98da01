"""LISA under real DeepSpeed ZeRO-2 on CPU (2 processes, gloo), as docs/lisa.md describes it: the run trains, both
ranks draw the layers a single process draws, a layer not yet drawn never moves, and a layer frozen after it trained
keeps moving by its remaining Adam momentum (DeepSpeed's flat partition zero-fills its gradient; the one-line warning
says so). If DeepSpeed ever honours the freeze, the last assertion fails: update docs/lisa.md and the warning.

Opt-in tier: `DS_BUILD_OPS=0 pip install -e ".[deepspeed]"` (deepspeed==0.19.8), then `python -m pytest -m deepspeed`.
"""

import json
import os
import subprocess
import sys

import pytest

from trl_efficient.trainer.lisa import sample_layers

HERE = os.path.dirname(__file__)


@pytest.mark.deepspeed
def test_lisa_under_zero2(tiny_model_dir, tmp_path):
    pytest.importorskip("deepspeed")
    out = tmp_path / "ds"
    os.makedirs(out)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    env.setdefault("DS_ACCELERATOR", "cpu")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           os.path.join(HERE, "..", "configs", "zero2_cpu.yaml"), os.path.join(HERE, "run_lisa_trainer.py"),
           tiny_model_dir, str(out)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "with DeepSpeed ZeRO-2" in proc.stderr  # the warning, once per rank
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    expected = [sample_layers(1, step // 2, 2, 1) for step in range(4)]  # [[0], [0], [1], [1]]
    for run in ranks:
        assert [d["layers"] for d in run["draws"]] == expected
        assert run["sums"] == ranks[0]["sums"]
        moved = [d["moved"] for d in run["draws"]]
        assert moved[:2] == [[0], [0]]  # layer 1, never drawn yet: zero gradient, zero moments, no move
        assert moved[2:] == [[0, 1], [0, 1]]  # layer 0, frozen at step 2, drifts by its Adam momentum
