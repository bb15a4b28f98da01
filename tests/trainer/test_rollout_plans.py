"""L1 target prompting (`TargetLengthRolloutPlan`) without a trainer: who shares a target, and how it is drawn.

Reference: L1 / LCPO (arXiv 2503.04697, methods.md §6). The released data script (cmu-l3/l1
`scripts/data/deepscaler_dataset.py`) draws `N = random.randint(100, 4000)` (inclusive) once per example, stores it
with the example and appends `" Think for N tokens."` / `" Think for maximum N tokens."` to the question; the L1-Max
data (`--use_both_both`) flips the sign of the same draw with probability 1/2.
"""

import math
import re
import statistics

import pytest

from trl_efficient.trainer import EfficientGRPOConfig, TargetLengthRolloutPlan
from trl_efficient.trainer.config import build_rollout_plan

TARGET = re.compile(r"^ Think for (maximum )?(\d+) tokens\.$")


def _row(i, question=None):
    return {"prompt": [{"role": "user", "content": question or f"Question {i}?"}], "idx": i}


def _target(plan, row, pos=0, group=0, step=0, group_size=8):
    a = plan.assign(row, pos, group_size, group, step)
    return a.metadata["target_length"], a.metadata["length_mode"], a.user_suffix


def test_config_default_is_one_target_per_prompt(tmp_path):
    cfg = EfficientGRPOConfig(
        output_dir=str(tmp_path),
        rollout_plan="target_length",
        num_generations=4,
        per_device_train_batch_size=4,
        use_cpu=True,
        report_to="none",
    )
    assert cfg.target_length_per == "prompt"
    plan = build_rollout_plan(cfg)
    assert plan.per == "prompt" and plan.num_prompt_subgroups(16) == 1  # vLLM server asked for n = G
    assert (plan.low, plan.high) == (100, 4000)  # U{100..4000}, §6


def test_per_prompt_target_is_shared_by_the_group_and_kept_across_steps():
    plan = TargetLengthRolloutPlan(100, 4000, per="prompt", seed=0)
    for i in range(20):
        row = _row(i)
        seen = {_target(plan, row, pos, group, step) for pos in range(8) for group in (0, 3) for step in (0, 1, 700)}
        assert len(seen) == 1  # same target, mode and text for every rollout, group slot and step
        ((n, mode, text),) = seen
        assert mode == "exact" and text == f" Think for {n} tokens."


def test_per_prompt_targets_differ_across_examples_and_seeds():
    plan0 = TargetLengthRolloutPlan(100, 4000, per="prompt", seed=0)
    plan1 = TargetLengthRolloutPlan(100, 4000, per="prompt", seed=1)
    t0 = [_target(plan0, _row(i))[0] for i in range(50)]
    t1 = [_target(plan1, _row(i))[0] for i in range(50)]
    # 50 draws from 3901 values: expected repeated pairs 50*49/2/3901 = 0.31, so at least 48 distinct values
    assert len(set(t0)) >= 48
    assert sum(a != b for a, b in zip(t0, t1)) >= 48  # another seed, other targets
    # two rows with the same question but different idx are two examples (the L1 data repeats problems with a fresh
    # target under --sample_multiple_for_train)
    same_question = [_target(plan0, _row(i, "What is 2 + 3?"))[0] for i in range(10)]
    assert len(set(same_question)) >= 9


def test_targets_are_uniform_on_the_inclusive_range():
    plan = TargetLengthRolloutPlan(100, 4000, per="prompt", seed=0)
    t = [_target(plan, _row(i))[0] for i in range(4000)]
    assert min(t) >= 100 and max(t) <= 4000
    # U{100..4000}: mean (100 + 4000) / 2 = 2050, sd sqrt((3901^2 - 1) / 12) = 1126.1; 4 standard errors of the
    # mean over 4000 draws = 4 * 1126.1 / sqrt(4000) = 71.2
    assert abs(statistics.mean(t) - 2050) < 71.2
    assert abs(statistics.pstdev(t) - math.sqrt((3901**2 - 1) / 12)) < 40
    # randint is inclusive on both ends: on [1, 3] all three values occur (each with probability 1/3)
    small = TargetLengthRolloutPlan(1, 3, per="prompt", seed=0)
    assert {_target(small, _row(i))[0] for i in range(60)} == {1, 2, 3}


def test_mixed_mode_is_half_max_and_shared_by_the_group():
    plan = TargetLengthRolloutPlan(100, 4000, mode="mixed", per="prompt", seed=0)
    modes = []
    for i in range(2000):
        seen = {_target(plan, _row(i), pos) for pos in range(4)}
        assert len(seen) == 1
        ((n, mode, text),) = seen
        maximum, number = TARGET.match(text).groups()
        assert int(number) == n and (maximum is not None) == (mode == "max")
        modes.append(mode)
    # P(max) = 1/2; 4 standard errors over 2000 draws = 4 * sqrt(0.25 / 2000) = 0.045
    assert abs(modes.count("max") / 2000 - 0.5) < 0.045


def test_per_rollout_targets_differ_within_a_group_and_are_redrawn_each_step():
    plan = TargetLengthRolloutPlan(100, 4000, per="rollout", seed=0)
    assert plan.num_prompt_subgroups(8) == 8
    row = _row(0)
    step0 = [_target(plan, row, pos, step=0)[0] for pos in range(8)]
    step1 = [_target(plan, row, pos, step=1)[0] for pos in range(8)]
    assert len(set(step0)) >= 7 and sum(a != b for a, b in zip(step0, step1)) >= 7
    # a pure function of (seed, step, example, position): the same call gives the same target (resume needs it)
    assert step0 == [_target(plan, row, pos, step=0)[0] for pos in range(8)]


@pytest.mark.parametrize(
    "kwargs, match",
    [({"per": "example"}, "target_length_per"), ({"low": 0}, "0 < low"), ({"mode": "short"}, "target_length_mode")],
)
def test_bad_arguments_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TargetLengthRolloutPlan(**{"low": 100, "high": 4000, **kwargs})
