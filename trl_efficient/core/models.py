"""Model names: a Hub id or a local path passes through; `<scheme>:<spec>` names are built locally by the scheme
registered under `<scheme>` (`tiny:` by `trl_efficient.testing.tiny`, `testbed:` by `trl_efficient.testbed`; both
register when `trl_efficient` is imported).

>>> resolve_model_name("Qwen/Qwen2.5-Math-1.5B")
'Qwen/Qwen2.5-Math-1.5B'
>>> MODEL_SCHEMES.register("echo", lambda name, cache_dir=None: name.upper())  # doctest: +ELLIPSIS
<function <lambda> at ...>
>>> resolve_model_name("echo:x")
'ECHO:X'
"""

from __future__ import annotations

from collections.abc import Callable

from .registry import Registry

__all__ = ["MODEL_SCHEMES", "model_scheme", "resolve_model_name"]

# scheme -> resolver(name, cache_dir=None) -> local directory of the built (or cached) model
MODEL_SCHEMES: Registry[Callable[..., str]] = Registry("model name scheme")


def model_scheme(name: str) -> str | None:
    """The registered scheme of `name` (`"tiny"` for `"tiny:qwen2"`), or `None` for Hub ids and paths."""
    scheme, sep, _ = str(name).partition(":")
    return scheme if sep and scheme in MODEL_SCHEMES else None


def resolve_model_name(name: str, cache_dir: str | None = None) -> str:
    """A local directory for a registered `<scheme>:<spec>` name (built once, cached), else `name` unchanged."""
    scheme = model_scheme(name)
    return name if scheme is None else MODEL_SCHEMES.get(scheme)(name, cache_dir)
