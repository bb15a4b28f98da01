"""trl-efficient: efficient-reasoning RL (think shorter without getting dumber) on top of TRL's GRPOTrainer.

Reward callables live in `trl_efficient.rewards` (they work in a plain `trl.GRPOTrainer`), the trainer and its hooks
in `trl_efficient.trainer`, recipes in `trl_efficient.recipes`, data loaders in `trl_efficient.data`.
"""

# The one version source: pyproject.toml reads it statically (`[tool.setuptools.dynamic]`); keep it a literal.
__version__ = "0.1.0"

# Registration by import, in one place: method-family estimators, filters and plans; the `tiny:` and `testbed:`
# model-name schemes (`core.models`) and the `testbed` benchmark (`data.benchmarks`).
from . import methods, testbed  # noqa: E402,F401
from .testing import tiny  # noqa: E402,F401
from .trainer import EfficientGRPOConfig, EfficientGRPOTrainer

__all__ = ["EfficientGRPOConfig", "EfficientGRPOTrainer", "__version__"]
