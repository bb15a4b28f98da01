"""trl-efficient: efficient-reasoning RL (think shorter without getting dumber) on top of TRL's GRPOTrainer.

Reward callables live in `trl_efficient.rewards` (they work in a plain `trl.GRPOTrainer`), the trainer and its hooks
in `trl_efficient.trainer`, method families in `trl_efficient.methods`, recipes in `trl_efficient.recipes`, data
loaders in `trl_efficient.data`. The library API under the command line (`trl_efficient.api`):
`trl_efficient.train(config, **overrides)` runs `trl-efficient train` from a script (`accelerate launch
my_script.py`), `evaluate(model, **options)`, `merge(method, **options)` and `push(output_dir, repo_id, **options)` the
other commands.

Importing a sub-package loads that layer and the layers below it, nothing above (`import trl_efficient.rewards` loads
no trainer). A registry never depends on what was imported before it (docs/architecture.md, "Registration"): it names
the packages that fill it and imports them on the first lookup that misses, and each such package imports all of its
own modules by discovery: `trl_efficient.methods` (estimators, filters, plans, samplers), `trl_efficient.recipes`
(every recipe; light: it imports no method), `trl_efficient.testing` (the `tiny:` model scheme) and
`trl_efficient.overthinking` (the `testbed:` scheme and benchmark).
"""

# The one version source: pyproject.toml reads it statically (`[tool.setuptools.dynamic]`); keep it a literal.
__version__ = "0.1.0"

__all__ = [
    "EfficientGRPOConfig", "EfficientGRPOTrainer", "__version__", "evaluate", "get_recipe", "merge", "push", "train",
]  # fmt: skip


def __getattr__(name: str):  # PEP 562: `trl_efficient.EfficientGRPOConfig` without importing the trainer eagerly
    if name in ("EfficientGRPOConfig", "EfficientGRPOTrainer"):
        from . import trainer  # its registries import the method layer when a name is looked up

        return getattr(trainer, name)
    if name in ("train", "evaluate", "merge", "push"):  # the library API (trl_efficient.api), light until called
        from . import api

        return getattr(api, name)
    if name == "get_recipe":  # a recipe as a Python object (`Recipe.config`, `.prepare_dataset`, `.trainer`)
        from .recipes import get_recipe

        return get_recipe
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
