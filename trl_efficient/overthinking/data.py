"""Testbed datasets in the library's conversational format (columns `prompt`, `solution`, `idx`, `level`, `source`,
plus `expression`, from which `world.parse_expression` rebuilds the task for exact token accounting).

`level` is the difficulty (number of operations), so `trl-efficient eval`'s by-level breakdown works unchanged.
Train and test tasks are drawn with different seeds.
"""

from __future__ import annotations

from datasets import Dataset

from .world import INSTRUCTION, Task, make_tasks, parse_expression

__all__ = ["TESTBED_INSTRUCTION", "load_testbed_dataset", "task_from_row", "task_prompt"]

TESTBED_INSTRUCTION = INSTRUCTION

_SPLIT_SEEDS = {"train": 1000, "test": 2000}


def task_prompt(task: Task) -> list[dict]:
    """The chat prompt of a task.

    >>> task_prompt(Task(1, (("+", 2),)))[0]["content"]
    'Start at 1. Apply + 2 to it 1 time, keeping the last digit. Put the final answer in \\\\boxed{}.'
    """
    return [{"role": "user", "content": f"{task.question} {TESTBED_INSTRUCTION}"}]


def load_testbed_dataset(
    split: str = "train", n: int = 512, seed: int = 0, min_ops: int = 1, max_ops: int = 8
) -> Dataset:
    """`n` seeded tasks with difficulty uniform in `[min_ops, max_ops]`.

    >>> ds = load_testbed_dataset("test", n=3, max_ops=2)
    >>> ds.column_names, ds[0]["level"] in (1, 2), ds[0]["source"]
    (['prompt', 'solution', 'idx', 'level', 'source', 'expression'], True, 'testbed')
    """
    if split not in _SPLIT_SEEDS:
        raise ValueError(f"testbed split must be one of {sorted(_SPLIT_SEEDS)}, got {split!r}.")
    tasks = make_tasks(n, seed=_SPLIT_SEEDS[split] + seed, min_ops=min_ops, max_ops=max_ops)
    return Dataset.from_dict(
        {
            "prompt": [task_prompt(t) for t in tasks],
            "solution": [str(t.answer) for t in tasks],
            "idx": list(range(n)),
            "level": [t.difficulty for t in tasks],
            "source": ["testbed"] * n,
            "expression": [t.expression for t in tasks],
        }
    )


def task_from_row(row: dict) -> Task:
    return parse_expression(row["expression"])
