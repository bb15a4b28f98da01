"""Real DeepSpeed ZeRO-2/3 on CPU (2 processes, gloo): same rewards and advantages as one plain process.

Opt-in tier: `DS_BUILD_OPS=0 pip install -e ".[deepspeed]"` (deepspeed==0.19.8), then `python -m pytest -m deepspeed`.
"""

import json
import os
import subprocess
import sys

import pytest
from helpers import run_torchrun

HERE = os.path.dirname(__file__)


@pytest.mark.deepspeed
@pytest.mark.parametrize("stage", [2, 3])
def test_zero_matches_single_process(tiny_model_dir, tmp_path, stage):
    pytest.importorskip("deepspeed")
    script = os.path.join(HERE, "run_group_trainer.py")
    (single,) = run_torchrun(script, 1, tmp_path / "one", tiny_model_dir, tmp_path / "one", "group_center_batch_whiten")
    out = tmp_path / "ds"
    os.makedirs(out)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    config = os.path.join(HERE, "..", "configs", f"zero{stage}_cpu.yaml")
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        config,
        os.path.join(HERE, "run_group_trainer.py"),
        tiny_model_dir,
        str(out),
        "group_center_batch_whiten",
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ranks = [json.load(open(out / f"rank{r}.json")) for r in range(2)]
    for step, rec in enumerate(single["records"]):
        r0, r1 = ranks[0]["records"][step], ranks[1]["records"][step]
        assert r0["lengths"] == rec["lengths"]
        assert r0["advantages"] + r1["advantages"] == pytest.approx(rec["advantages"], abs=1e-5)
