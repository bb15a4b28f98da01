"""Evaluation that reports accuracy *and* tokens: inference-time modes, generation backends, metrics (`evaluate`),
the Pareto plot (`plots`) and `trl-efficient eval` (`cli`).

The public names of `evaluate` (listed once, in its `__all__`) resolve here on first use (PEP 562), so that importing
`trl_efficient.eval.cli` for `trl-efficient eval --help` loads no torch (issue 34).
"""


def __getattr__(name: str):
    import importlib

    evaluate = importlib.import_module(f"{__name__}.evaluate")  # not `from . import`: that looks the name up here
    if name == "__all__":
        return list(evaluate.__all__)
    if name in evaluate.__all__:
        return getattr(evaluate, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
