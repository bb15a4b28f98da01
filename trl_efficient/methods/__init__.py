"""Method families that need more than a reward (advantage estimators, filters, rollout plans, trainer subclasses).

Each module registers its parts in the registries of `trl_efficient.trainer` on import; all modules of this package
are imported here, so a config naming e.g. `advantage_estimator: hbpo` validates as soon as `trl_efficient` is
imported.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
