"""ThinkPrune (arXiv 2504.01296, methods.md §35): the reward's edge cases and its agreement with the rollout plan.

Every expected value is the paper's rule by hand: r = 1 iff the answer is correct, the completion finished (EOS) and
its length is at most the limit L; a cut completion scores 0 whatever it holds."""

import pickle
from types import SimpleNamespace as NS

import pytest

from trl_efficient.methods.thinkprune import ThinkPruneRolloutPlan
from trl_efficient.rewards import get_thinkprune_reward
from trl_efficient.rewards.curriculum import CurriculumSchedule

RIGHT, WRONG = r"<think>x</think>\boxed{12}", r"<think>x</think>\boxed{13}"


def test_the_schedule_is_the_papers_rounds():
    # linear, 2 decay points over 300 steps: T = 100; L = 4000 - 2000 k / 2 with k = floor(t / 100)
    reward = get_thinkprune_reward()
    ids = [[0] * 2999]
    got = [reward([RIGHT], ["12"], ids, finished=[True], trainer_state=NS(global_step=t, max_steps=300))[0]
           for t in (0, 99, 100, 199, 200, 299)]  # fmt: skip
    # L = 4000, 4000, 3000, 3000, 2000, 2000; 2999 <= L for the first four only
    assert got == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]


def test_cut_unparsable_gold_and_conversational_rows():
    reward = get_thinkprune_reward()
    state = NS(global_step=0, max_steps=30)  # L = 4000
    conv = [{"role": "assistant", "content": RIGHT}]
    out = reward(
        completions=[RIGHT, RIGHT, conv, WRONG],
        solution=["12", "", "12", "12"],
        completion_ids=[[0] * 4000, [0] * 10, [0] * 10, [0] * 10],
        finished=[False, True, True, True],
        trainer_state=state,
    )
    # cut at the limit with a right answer: 0; gold "" does not parse: None; conversational right: 1; wrong: 0
    assert out == [0.0, None, 1.0, 0.0]


def test_without_the_finished_keyword_a_row_below_the_limit_counts_as_finished():
    reward = get_thinkprune_reward(initial_budget=100, final_budget=50, decay_points=1)
    state = NS(global_step=0, max_steps=10)  # L = 100
    out = reward([RIGHT] * 3, ["12"] * 3, [[0] * 99, [0] * 100, [0] * 101], trainer_state=state)
    # 99 < 100: finished and within; 100 tokens: not known to have finished (counted as cut); 101 > 100
    assert out == [1.0, 0.0, 0.0]


def test_the_plans_budget_column_wins_over_the_schedule_and_matches_the_plan():
    plan = ThinkPruneRolloutPlan(CurriculumSchedule(4000, 2000, 2, "linear"), max_steps=90)
    row = plan.assign({}, 0, 4, 0, step=70)  # floor(70 * 3 / 90) = 2 drops: L = 2000
    assert (row.max_tokens, row.metadata) == (2000, {"budget": 2000})
    reward = get_thinkprune_reward()
    state = NS(global_step=0, max_steps=90)  # the schedule alone would say 4000
    out = reward([RIGHT, RIGHT], ["12", "12"], [[0] * 2000, [0] * 2500], finished=[True, True],
                 trainer_state=state, budget=[row.metadata["budget"]] * 2)  # fmt: skip
    assert out == [1.0, 0.0]  # 2000 <= 2000; 2500 > 2000


def test_errors_name_the_field_and_the_reward_pickles():
    with pytest.raises(ValueError, match="final_budget"):
        get_thinkprune_reward(final_budget=0)
    with pytest.raises(ValueError, match=r"reward_kwargs\['thinkprune'\].*schedule"):
        get_thinkprune_reward(schedule="cosine")
    with pytest.raises(ValueError, match="trainer_state"):
        get_thinkprune_reward()([RIGHT], ["12"], [[0]], finished=[True])
    reward = pickle.loads(pickle.dumps(get_thinkprune_reward()))
    assert reward.__name__ == "thinkprune_reward"
    assert reward([RIGHT], ["12"], [[0] * 5], finished=[True], trainer_state=NS(global_step=0, max_steps=3)) == [1.0]


def test_the_plan_reads_rollout_plan_kwargs_over_the_papers_rounds():
    # `ThinkPruneRolloutPlan` declares `default_schedule` and inherits `from_config`: empty kwargs give the paper's
    # rounds (not the curriculum's 256 -> 87), a partial dict changes only its keys, and errors name the plan
    plan = ThinkPruneRolloutPlan.from_config(NS(rollout_plan_kwargs={}, max_steps=90))
    assert plan.schedule.settings() == {"initial_budget": 4000, "final_budget": 2000, "decay_points": 2,
                                        "schedule": "linear"}  # fmt: skip
    plan = ThinkPruneRolloutPlan.from_config(NS(rollout_plan_kwargs={"final_budget": 1000}, max_steps=90))
    assert [plan.budget(s) for s in (0, 30, 60)] == [4000, 2500, 1000]  # 4000 - 3000 k / 2
    with pytest.raises(ValueError, match=r"rollout_plan_kwargs.*rollout_plan='thinkprune'"):
        ThinkPruneRolloutPlan.from_config(NS(rollout_plan_kwargs={"limit": 9}, max_steps=90))
