"""Method families that need more than a reward (advantage estimators, filters, rollout plans, prompt samplers,
trainer subclasses).

Each module registers its parts in the registries of `trl_efficient.trainer` when it is imported; this file imports
every one of them, explicitly: the one place the method layer registers. `import trl_efficient.methods` (done by
`trl_efficient.api.register_everything`, the library API and the `trl-efficient` command, not by the recipe registry,
which names its trainers by reference) is what makes a config naming e.g. `advantage_estimator:
hbpo` validate. A new method module is added to the list below.
"""

from . import (  # noqa: F401
    asrr,
    budgetthinker,
    canon,
    curriculum,
    dler,
    dot,
    drpo,
    entropy,
    frugal,
    gfpo,
    hbpo,
    lapo,
    laser,
    lead,
    lspo,
    o1_pruner,
    pear,
    saber,
    sar,
)
