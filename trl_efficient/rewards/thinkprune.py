r"""
ThinkPrune's reward, correctness under a hard length limit that shrinks over the run (arXiv 2504.01296; methods.md
§35).

Paper: Bairu Hou, Yang Zhang, Jiabao Ji, Yujian Liu, Kaizhi Qian, Jacob Andreas and Shiyu Chang, "ThinkPrune: Pruning
Long Chain-of-Thought of LLMs via Reinforcement Learning" (the authors' BibTeX, `UCSB-NLP-Chang/ThinkPrune`
README.md); released code `UCSB-NLP-Chang/ThinkPrune` (verl).

With the limit $L = B(t)$ of the current step,

$$ r = \mathbb{1}[\text{correct}]\cdot\mathbb{1}[\text{finished}]\cdot\mathbb{1}[\ell \le L] $$

where "finished" means the completion ended on a stop id (EOS) rather than being cut by a cap, and $\ell$ is its
length in policy tokens. Everything else scores 0: a completion that does not finish within the limit gets 0 even
when a correct answer appears before the cut (the paper's abstract: a token limit "beyond which any unfinished
thoughts and answers will be discarded, resulting in a zero reward").

What the released code does (and what is taken from it):
- The limit is the generation cap: `data.max_response_length=${LENGTH}` (`local_scripts/multi_node_run_4k.sh`), so a
  response is cut at L tokens, and the reward manager (`verl/trainer/main_ppo.py`, `RewardManager`) scores the
  (possibly cut) text with `qwen_math.compute_score`: 1 when the extracted `\boxed{}` answer equals the gold, else 0.
  A cut response almost never holds its final answer; the code would still give 1 to one whose answer appears before
  the cut. This reward follows the paper's rule instead (cut: 0), which the `finished` test implements.
- The limit is stated in the system prompt, " The output of the assistant should be within {L} tokens."
  (`examples/data_preprocess/preprocess_past_aime_amc.py`); `THINKPRUNE_LIMIT_INSTRUCTION` is that sentence, which
  the rollout plan `thinkprune` (`trl_efficient.methods.thinkprune`) appends to the system message, together with a
  per-row generation cap of L tokens, so "finished" is exactly "EOS seen within L tokens".
- The rounds: 4000 tokens, then 3000 from the 4000-token checkpoint (`local_scripts/multi_node_run_3k_from4k.sh`),
  then 2000 (the paper's iterative pruning for R1-Distill-Qwen-1.5B): 4000 -> 3000 -> 2000. Each round is a separate
  run in the paper; here the rounds are one run, the limit dropping by equal steps at `max_steps/3` and
  `2 max_steps/3` (`CurriculumSchedule(4000, 2000, decay_points=2, kind="linear")`, a proposed default: the paper
  trains each round to its own checkpoint, e.g. step 180 of the 4000-token round).

Where the limit of a row comes from: the plan's per-row column `budget` when there is one (so plan and reward never
disagree); otherwise the reward's own schedule at TRL's `trainer_state` (`global_step` over `max_steps`).

Where "finished" comes from: the reward keyword `finished` that `EfficientGRPOTrainer` passes (the completion's last
id is one generation stops on). Called without it (a plain `GRPOTrainer`), a row counts as finished iff its length is
below the limit, $\ell < L$ (a choice, stated here: a completion shorter than the limit was not cut by a cap at or
above the limit, the recipe's `max_completion_length` being the first limit; one of exactly $L$ tokens is counted as
cut, since without the stop ids it cannot be told from one).
"""

from __future__ import annotations

from typing import Any

from ..core.answers import is_correct
from ..core.checks import check_number, ids_or_none
from ..core.lengths import LengthMeter, completion_text
from .curriculum import CurriculumSchedule

__all__ = ["THINKPRUNE_LIMIT_INSTRUCTION", "get_thinkprune_reward"]

# The sentence the released preprocessing appends to the system prompt (preprocess_past_aime_amc.py).
THINKPRUNE_LIMIT_INSTRUCTION = "The output of the assistant should be within {limit} tokens."


def get_thinkprune_reward(
    initial_budget: int = 4000,
    final_budget: int = 2000,
    decay_points: int = 2,
    schedule: str = "linear",
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _ThinkPruneReward:
    r"""
    ThinkPrune reward (arXiv 2504.01296; methods.md §35): correct, finished and within the current limit.

    $$ r = \mathbb{1}[\text{correct}]\cdot\mathbb{1}[\text{finished}]\cdot\mathbb{1}[\ell \le B(t)] $$

    `B(t)`: the row's `budget` column (rollout plan `thinkprune`), else the schedule below at `trainer_state`;
    `finished`: the trainer's keyword, else $\ell < B(t)$ (module docstring). `None` for a row whose gold answer does
    not parse.

    Args:
        initial_budget, final_budget, decay_points, schedule: the limit's schedule (`CurriculumSchedule`), defaults
            4000 -> 3000 -> 2000 tokens in equal steps at `max_steps/3` and `2 max_steps/3` (the paper's rounds; one
            run of three equal rounds is a proposed default). Used only when no `budget` column is given.
        length_unit, length_scope, tokenizer: see `trl_efficient.core.lengths.LengthMeter` (the paper: all tokens of
            the response).

    Returns a picklable callable named `thinkprune_reward`.

    >>> from types import SimpleNamespace as NS
    >>> reward = get_thinkprune_reward()
    >>> state = NS(global_step=40, max_steps=90)  # floor(40 * 3 / 90) = 1 drop: B = 4000 - 2000 * 1/2 = 3000
    >>> right, wrong = r"a</think>\boxed{4}", r"a</think>\boxed{5}"
    >>> reward(completions=[right, right, right, wrong], solution=["4"] * 4, trainer_state=state,
    ...        completion_ids=[[0] * 2500, [0] * 2500, [0] * 3500, [0] * 100], finished=[True, False, True, True])
    [1.0, 0.0, 0.0, 0.0]
    >>> # correct + finished + 2500 <= 3000: 1; cut: 0; 3500 > 3000: 0; wrong: 0
    >>> reward(completions=[right, right], solution=["4", "4"], completion_ids=[[0] * 2000, [0] * 2001],
    ...        finished=[True, True], budget=[2000, 2000])  # the plan's limit: 2000 <= 2000, 2001 > 2000
    [1.0, 0.0]
    """
    check_number("initial_budget", initial_budget, 1, integer=True)
    check_number("final_budget", final_budget, 1, integer=True)
    check_number("decay_points", decay_points, 1, integer=True)
    sched = CurriculumSchedule.from_settings(
        {
            "initial_budget": initial_budget,
            "final_budget": final_budget,
            "decay_points": decay_points,
            "schedule": schedule,
        },
        "reward_kwargs['thinkprune']",
        "reward `thinkprune`",
    )
    return _ThinkPruneReward(sched, LengthMeter(length_unit, length_scope, tokenizer))


class _ThinkPruneReward:
    # A class rather than a closure so it pickles for TRL's async rollout worker.
    __name__ = "thinkprune_reward"

    def __init__(self, schedule: CurriculumSchedule, meter: LengthMeter) -> None:
        self.schedule = schedule
        self.meter = meter

    def _limits(self, n: int, budget: list | None, trainer_state: Any) -> list[int]:
        if budget is not None:
            if len(budget) != n:
                raise ValueError(f"column 'budget' has {len(budget)} rows but completions has {n}.")
            return [int(b) for b in budget]
        return [self.schedule.budget_at(trainer_state)] * n

    def __call__(
        self,
        completions: list,
        solution: list,
        completion_ids: list | None = None,
        finished: list | None = None,
        trainer_state: Any = None,
        budget: list | None = None,
        **kwargs,
    ) -> list[float | None]:
        n = len(completions)
        ids = ids_or_none(completion_ids, n)
        limits = self._limits(n, budget, trainer_state)
        if finished is not None and len(finished) != n:
            raise ValueError(f"finished has {len(finished)} rows but completions has {n}.")
        out: list[float | None] = []
        for i, (completion, gold, row_ids, limit) in enumerate(zip(completions, solution, ids, limits, strict=True)):
            text = completion_text(completion)
            correct = is_correct(text, gold)
            if correct is None:
                out.append(None)
                continue
            length = self.meter(text, row_ids)
            done = bool(finished[i]) if finished is not None else length < limit
            out.append(1.0 if correct and done and length <= limit else 0.0)
        return out
