"""Every whole-group reward across 2 processes (torchrun + gloo): groups straddle ranks, results must match one process.

Registry-driven: each builder of `REWARD_INFO` declared `whole_groups=True` runs, built as a run builds it
(`dist_group_worker.build`), unless it `needs` a column that `DATASET_COLUMNS` lacks. Such a builder is skipped only
when `SKIPPED` names it with those columns; otherwise `test_the_skip_list_is_the_expected_one` fails, so a new group
reward cannot silently go untested (docs/adding-a-method.md, "A group reward").
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trl_efficient.recipes import REWARD_INFO

WORKER = Path(__file__).with_name("dist_group_worker.py")
REPO_ROOT = Path(__file__).resolve().parents[2]

# The dataset/rollout-plan columns of the batch, one value per row (`RewardInfo.needs` lists only such columns; the
# trainer's own, `finished`, `group_size`, `completion_ids`, `trainer_state`, are passed to every reward and are never
# listed). A new reward that needs another column: add it here, one value per row.
DATASET_COLUMNS = {
    "solution": ["1"] * 5 + [""] + ["1"] * 6,  # row 5 (rank 0) has an unparseable gold -> None
    "lapo_stage": [1] * 4 + [2] * 8,  # LAPO's plan: stage 1 (length band) for group 0, stage 2 (target) after
    "lapo_target_length": [None] * 4 + [60] * 4 + [None] * 4,  # LAPO's memory: group 2 has no target yet
}
# builder -> the columns it needs that the batch lacks, for a reward no made-up values can exercise (none now): it is
# not run here, and gets its own two-process test.
SKIPPED: dict[str, tuple[str, ...]] = {}


def _worker():
    spec = importlib.util.spec_from_file_location("dist_group_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _whole_group_builders() -> tuple[list[str], dict[str, tuple[str, ...]]]:
    """(the whole-group builders to run, {skipped builder: the columns it needs that the batch lacks})."""
    run, skipped = [], {}
    for name, info in sorted(REWARD_INFO.items()):
        missing = tuple(sorted(set(info.needs) - set(DATASET_COLUMNS)))
        if info.whole_groups and missing:
            skipped[name] = missing
        elif info.whole_groups:
            run.append(name)
    return run, skipped


def test_the_skip_list_is_the_expected_one():
    run, skipped = _whole_group_builders()
    assert skipped == SKIPPED  # a new whole-group reward needing another column: see docs/adding-a-method.md
    assert {"kimi_length", "shorter_better", "alp", "laser_de", "lapo"} <= set(run)


def _text(steps: int, answer: int) -> str:
    reasoning = "\n\n".join(f"Wait, let me check step {k}." for k in range(steps))
    return f"<think>\n{reasoning}\n</think>\n\nThe answer is \\boxed{{{answer}}}."


# 12 rows = 3 groups of G = 4: (reasoning steps, answer), gold 1. With 6 rows per rank, group 1 (rows 4-7) straddles
# ranks 0 and 1, so any computation on the local slice would see half a group (and rank 0's would mix two prompts).
ROWS = [(1, 1), (2, 2), (3, 1), (5, 2), (1, 2), (4, 1), (3, 1), (6, 2), (2, 2), (0, 2), (4, 2), (3, 1)]


@pytest.fixture
def batch(tiny_tokenizer, tmp_path):
    from transformers import AutoTokenizer

    tiny_tokenizer.save_pretrained(tmp_path / "tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tokenizer")  # the one the workers load
    texts = [_text(*row) for row in ROWS]
    texts[9] = "The answer is 2."  # no </think>, no \boxed{}: a format failure (LEAD, LASER)
    completions = list(texts)
    completions[6] = [{"role": "assistant", "content": texts[6]}]  # a conversational row
    batch = {
        "num_generations": 4,
        "builders": _whole_group_builders()[0],
        "tokenizer": str(tmp_path / "tokenizer"),
        "columns": {  # every reward keyword, one value per row
            **DATASET_COLUMNS,
            "completions": completions,
            "completion_ids": [tokenizer(text).input_ids for text in texts],
            "finished": [False, True, True, False, True, True, True, False, True, True, False, True],
        },
    }
    return batch, tokenizer


@pytest.mark.dist
def test_group_rewards_match_single_process(batch, tmp_path):
    batch, tokenizer = batch
    in_path = tmp_path / "batch.json"
    in_path.write_text(json.dumps(batch))
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=pythonpath)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(WORKER), str(in_path), str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    expected = _worker().score(batch, tokenizer)  # one process: the whole batch, no process group
    assert set(expected) == set(ranks[0]) == {*batch["builders"], *(f"{n}/group_size" for n in batch["builders"]),
                                              "gathered_columns"}  # fmt: skip
    for key, values in expected.items():
        assert ranks[0][key] + ranks[1][key] == values, key
        assert len({v for v in values if v is not None}) > 1, f"{key} scores every row alike: the test shows nothing"

    # sanity: the straddling group really depends on both ranks' rows. Group 1: row 4 (rank 0, wrong) is the
    # shortest, row 7 (rank 1, wrong) the longest, row 5's gold is unparseable; Kimi gives correct row 6
    # 0.5 - (L6 - L4) / (L7 - L4), and row 7 min(0, -0.5)
    lengths = [len(ids) for ids in batch["columns"]["completion_ids"]]
    assert lengths[4] == min(lengths[4:8]) and lengths[7] == max(lengths[4:8])
    kimi = expected["kimi_length"]
    assert kimi[5] is None and kimi[4] == 0.0 and kimi[7] == -0.5
    assert kimi[6] == pytest.approx(0.5 - (lengths[6] - lengths[4]) / (lengths[7] - lengths[4]))
    # gathered_columns: `finished` travels with each row. Group 0's shortest correct row (0) was cut, so row 2 wins; the
    # only correct rows of groups 1 (row 6) and 2 (row 11) finished
    assert expected["gathered_columns"] == [0.0, 0.0, 1.0, 0.0, 0.0, None, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
