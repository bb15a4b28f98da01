from .advantages import ADVANTAGE_ESTIMATORS, finalize_advantages, group_zscore
from .config import EfficientGRPOConfig, build_rollout_plan
from .filters import COMPLETION_FILTERS
from .group import GroupBatch
from .rollout import ROLLOUT_PLANS, BudgetRolloutPlan, RolloutAssignment, RolloutPlan, TargetLengthRolloutPlan
from .state import PromptHistory
from .trainer import EfficientGRPOTrainer

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "COMPLETION_FILTERS",
    "ROLLOUT_PLANS",
    "BudgetRolloutPlan",
    "EfficientGRPOConfig",
    "EfficientGRPOTrainer",
    "GroupBatch",
    "PromptHistory",
    "RolloutAssignment",
    "RolloutPlan",
    "TargetLengthRolloutPlan",
    "build_rollout_plan",
    "finalize_advantages",
    "group_zscore",
]
