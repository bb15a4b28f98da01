"""Group rewards across 2 processes (torchrun + gloo): groups straddle ranks, results must match one process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trl_efficient.rewards import get_kimi_length_reward, get_shorter_better_reward

WORKER = Path(__file__).with_name("dist_group_worker.py")
REPO_ROOT = Path(__file__).resolve().parents[2]

RIGHT, WRONG = r"\boxed{1}", r"\boxed{2}"
# 12 rows = 3 groups of G = 4; with 6 rows per rank, group 1 (rows 4-7) straddles ranks 0 and 1, so any
# computation on the local slice would see half a group (and rank 0's slice would mix two prompts).
BATCH = {
    "num_generations": 4,
    "completions": [
        RIGHT,
        WRONG,
        RIGHT,
        WRONG,
        WRONG,
        RIGHT,
        [{"role": "assistant", "content": RIGHT}],
        WRONG,
        WRONG,
        WRONG,
        WRONG,
        RIGHT,
    ],  # fmt: skip
    "solution": ["1"] * 5 + [""] + ["1"] * 6,  # row 5 (rank 0) has an unparseable gold -> None
    "lengths": [10, 20, 30, 50, 12, 40, 28, 36, 5, 15, 25, 35],  # fmt: skip
}


@pytest.mark.dist
def test_group_rewards_match_single_process(tmp_path):
    in_path = tmp_path / "batch.json"
    in_path.write_text(json.dumps(BATCH))
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=pythonpath)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(WORKER), str(in_path), str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    kwargs = dict(
        completions=BATCH["completions"],
        solution=BATCH["solution"],
        completion_ids=[[0] * n for n in BATCH["lengths"]],
    )
    expected_kimi = get_kimi_length_reward(num_generations=4)(**kwargs)
    expected_sb = get_shorter_better_reward(num_generations=4)(**kwargs)

    assert ranks[0]["kimi"] + ranks[1]["kimi"] == expected_kimi
    assert ranks[0]["kimi_group_size_column"] + ranks[1]["kimi_group_size_column"] == expected_kimi
    assert ranks[0]["shorter_better"] + ranks[1]["shorter_better"] == expected_sb
    # sanity: the straddling group really depends on both ranks' rows
    # group 1 lengths 12, 40, 28, 36 (row 5's gold unparseable): Kimi min 12, max 40, so row 7 (wrong, L=36) gets
    # min(0, 0.5 - 24/28) and row 4 (wrong, L=12) gets min(0, 0.5) = 0
    assert expected_kimi[5] is None
    assert expected_kimi[7] == pytest.approx(0.5 - 24 / 28)
    assert expected_kimi[4] == 0.0
