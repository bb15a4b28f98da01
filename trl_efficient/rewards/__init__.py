r"""
Reward functions for efficient-reasoning GRPO, following TRL's reward contract.

Every reward accepts plain-string and conversational completions, reads token lengths from `completion_ids`, takes
the gold answer from the `solution` column, accepts (and ignores) extra keyword arguments, and returns
`list[float | None]`, where `None` means the row cannot be scored (its gold answer does not parse).

- `correctness`: `correctness_reward`, `get_correctness_reward`, `think_format_reward`.
- `length` (per completion): `get_cosine_length_reward`, `get_soft_overlong_reward`, `get_l1_reward`,
  `get_laser_reward`, `get_dler_truncation_reward`.
- `group` (whole groups of `G` rollouts, gathered across processes): `get_kimi_length_reward`,
  `get_shorter_better_reward`, plus the helpers `gather_rows` and `resolve_group_size`.
- `budget` (per completion, budget/tier columns): `get_hbpo_reward`, `get_saber_reward`.
- `lead` (group: GRPO-LEAD length-shaped accuracy) / `gdpo` (`1[correct and L <= L_limit]`).
- `solve_rate` (group solve rate / batch ranking gates the length term): `get_alp_reward`,
  `get_grpo_lambda_reward`, `get_asrr_reward`.
- `lapo` (group: LAPO's two stages) / `curriculum` (budget schedule B(t), triangular length reward).
- `thinkprune` (ThinkPrune: correct, finished and within a hard limit B(t) that shrinks over the run).
- `pear` / `sar` (read per-row columns that their trainers add: phase entropies, perplexity ratio) and
  `o1_pruner` (length and accuracy against the base model's reference statistics).
- `bingo` (significance-aware and dynamic length reward, checkpointed schedule): `get_bingo_length_reward`.
- `trl_efficient.core.answers` (re-exported here): the shared answer checker (`is_correct`, `parse_gold`,
`extract_answer_region`, `normalize_answer`,
  `answers_match_as_strings`).
- resolved on first use (PEP 562 `__getattr__`, `_LAZY`; their modules load torch or transformers, or are rarely
  used): `get_adlp_reward` (`controller`), `get_budgetthinker_reward` (`budgetthinker`), `get_constant_length_penalty`
  and `get_placebo_reward` (`controls`), `get_grsp_reward` and `get_step_pruner_reward` (`steps`),
  `get_hapo_length_reward` (`history`), `get_laser_d_reward` (`laser`, LASER-D/DE; its monitor is a trainer-level
  part, `trl_efficient.methods.laser.LaserMonitor`).

Every reward factory the recipes register imports from here (`tests/recipes/test_reward_factories.py`).
"""

import importlib

from ..core.answers import answers_match_as_strings, extract_answer_region, is_correct, normalize_answer, parse_gold
from .bingo import BingoSchedule, get_bingo_length_reward
from .budget import get_hbpo_reward, get_saber_reward, hbpo_budget_ceiling
from .correctness import correctness_reward, get_correctness_reward, think_format_reward
from .curriculum import CurriculumSchedule, get_curriculum_reward
from .gdpo import get_gdpo_length_reward
from .group import gather_rows, get_kimi_length_reward, get_shorter_better_reward, resolve_group_size
from .lapo import get_lapo_reward
from .lead import LEAD_OUTCOMES, get_lead_reward, is_degenerate, lead_outcome
from .length import (
    get_cosine_length_reward,
    get_dler_truncation_reward,
    get_l1_reward,
    get_laser_reward,
    get_soft_overlong_reward,
)
from .o1_pruner import get_o1_pruner_reward
from .pear import get_pear_reward
from .sar import get_sar_reward
from .solve_rate import get_alp_reward, get_asrr_reward, get_grpo_lambda_reward
from .thinkprune import get_thinkprune_reward

# name -> the module of this package that defines it, imported on first access (`__getattr__`)
_LAZY = {
    "get_adlp_reward": "controller",
    "get_budgetthinker_reward": "budgetthinker",
    "get_constant_length_penalty": "controls",
    "get_placebo_reward": "controls",
    "get_grsp_reward": "steps",
    "get_step_pruner_reward": "steps",
    "get_hapo_length_reward": "history",
    "get_laser_d_reward": "laser",
}

__all__ = [
    "CurriculumSchedule",
    "get_curriculum_reward",
    "get_lapo_reward",
    "get_pear_reward",
    "get_sar_reward",
    "get_o1_pruner_reward",
    "get_alp_reward",
    "get_asrr_reward",
    "get_grpo_lambda_reward",
    "get_thinkprune_reward",
    "BingoSchedule",
    "get_bingo_length_reward",
    "LEAD_OUTCOMES",
    "get_gdpo_length_reward",
    "get_lead_reward",
    "is_degenerate",
    "lead_outcome",
    "correctness_reward",
    "get_hbpo_reward",
    "get_saber_reward",
    "hbpo_budget_ceiling",
    "extract_answer_region",
    "gather_rows",
    "get_correctness_reward",
    "get_cosine_length_reward",
    "get_dler_truncation_reward",
    "get_kimi_length_reward",
    "get_l1_reward",
    "get_laser_reward",
    "get_shorter_better_reward",
    "get_soft_overlong_reward",
    "is_correct",
    "normalize_answer",
    "answers_match_as_strings",
    "parse_gold",
    "resolve_group_size",
    "think_format_reward",
    *_LAZY,
]


def __getattr__(name: str):
    """The factories of `_LAZY`, imported from their module on first access (PEP 562) and cached here."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
