"""Method families that need more than a reward (advantage estimators, filters, rollout plans, prompt samplers,
trainer subclasses).

Each module registers its parts in the registries of `trl_efficient.trainer` (`ADVANTAGE_ESTIMATORS`,
`COMPLETION_FILTERS`, `ROLLOUT_PLANS`, `PROMPT_SAMPLERS`) when it is imported, and this package imports every one of
its modules by discovery, in sorted order (`core.registry.import_submodules`): a new method module is found, not
listed. Nobody needs to import this package for its names: those registries name it as their provider and import
it on the first lookup that misses, so `EfficientGRPOConfig(advantage_estimator="hbpo")` validates however the config
class was imported (docs/architecture.md, "Registration").
"""

from ..core.registry import import_submodules

import_submodules(__name__, __path__)
