"""A tiny named registry shared by advantage estimators, completion filters, rollout plans and recipes.

It refuses a second, different object under a name already in use, and a failed lookup raises a `ValueError`
that lists the sorted choices. Tests add entries with `monkeypatch.setitem(registry._entries, ...)` and never clear a
registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> object mapping with a decorator for registration.

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
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T] | T:
        def _add(value: T) -> T:
            existing = self._entries.get(name)
            if existing is not None and existing is not value:
                raise ValueError(f"A different {self.kind} is already registered under the name {name!r}.")
            self._entries[name] = value
            return value

        return _add(obj) if obj is not None else _add

    def get(self, name: str) -> T:
        if name not in self._entries:
            raise ValueError(f"Unknown {self.kind} {name!r}. Valid choices: {sorted(self._entries)}.")
        return self._entries[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
