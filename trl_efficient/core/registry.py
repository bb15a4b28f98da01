"""A tiny named registry shared by advantage estimators, completion filters, rollout plans and recipes.

It refuses a second, different object under a name already in use, and a failed lookup raises a `ValueError`
that lists the sorted choices. Tests add entries with `monkeypatch.setitem(registry._entries, ...)` and never clear a
registry.

What a registry knows never depends on what its caller imported (issue 46): a registry names its *providers*, the
packages whose modules register into it (`Registry("advantage estimator", providers=("trl_efficient.methods",))`),
and the first lookup that misses (`get`, `in`, `names`, iteration, `items`) imports them, once, then looks again.
A provider package registers by discovery, not by a hand-kept list: its `__init__` calls
`import_submodules(__name__, __path__)`, which imports every module of the package in sorted order (so the
registration order is the modules' alphabetical order, whoever imports first). Providers are named by string, so
`core` imports no layer above it until a lookup needs one.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["Registry", "import_submodules"]


def _module_run_as_main() -> str | None:
    """The module `python -m NAME` runs as `__main__`, also while runpy imports its parent package (then
    `sys.argv[0]` is still `"-m"`), else None: discovery leaves it to runpy, so it is not executed twice."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None:
        return spec.name
    argv = list(getattr(sys, "orig_argv", ()))
    if sys.argv[:1] == ["-m"] and "-m" in argv[1:-1]:
        return argv[argv.index("-m", 1) + 1]
    return None


def import_submodules(package: str, path: Iterable[str]) -> list[str]:
    """Import every module and sub-package of `package` (its `__path__`), in sorted order, and return their names:
    how a provider package registers all of its parts with no list of them. The module that `python -m` runs is
    left to runpy.

    >>> import trl_efficient.core as core
    >>> "registry" in import_submodules(core.__name__, core.__path__)
    True
    """
    names = sorted(info.name for info in pkgutil.iter_modules(list(path)))
    running = _module_run_as_main()
    for name in names:
        if f"{package}.{name}" != running:
            importlib.import_module(f"{package}.{name}")
    return names


class Registry(Generic[T]):
    """Name -> object mapping with a decorator for registration; `providers` are the packages imported on the first
    lookup that misses (module docstring).

    >>> reg = Registry("colour")
    >>> @reg.register("red")
    ... def red():
    ...     return "#f00"
    >>> reg.get("red")()
    '#f00'
    >>> reg.get("blue")
    Traceback (most recent call last):
    ...
    ValueError: Unknown colour 'blue'. Valid choices: ['red'].
    >>> methods = Registry("estimator", providers=("trl_efficient.core.checks",))  # a module that registers nothing
    >>> "x" in methods, methods.loaded
    (False, True)
    """

    def __init__(self, kind: str, providers: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.providers = tuple(providers)
        self.loaded = not self.providers  # whether the providers were imported
        self._entries: dict[str, T] = {}

    def load(self) -> None:
        """Import the providers, once (a provider that fails to import raises, and the next lookup tries again)."""
        if self.loaded:
            return
        self.loaded = True  # first: a provider that looks a name up while it registers does not re-enter
        try:
            for provider in self.providers:
                importlib.import_module(provider)
        except BaseException:
            self.loaded = False
            raise

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T] | T:
        def _add(value: T) -> T:
            existing = self._entries.get(name)
            if existing is not None and existing is not value:
                raise ValueError(f"A different {self.kind} is already registered under the name {name!r}.")
            self._entries[name] = value
            return value

        return _add(obj) if obj is not None else _add

    def get(self, name: str) -> T:
        if name not in self:
            raise ValueError(f"Unknown {self.kind} {name!r}. Valid choices: {self.names()}.")
        return self._entries[name]

    def names(self) -> list[str]:
        self.load()
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        """(name, object) pairs in registration order (`names()` sorts)."""
        self.load()
        return list(self._entries.items())

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self.load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
