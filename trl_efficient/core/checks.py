"""Argument checks shared by reward factories, estimators and filters: one wording for every config-time error."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from typing import Any


def check_number(
    name: str,
    value: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    low_open: bool = False,
    integer: bool = False,
    allow_none: bool = False,
) -> float | int | None:
    """Validate a finite number in `[minimum, maximum]` (`(minimum, maximum]` with `low_open`); return it.

    >>> check_number("alpha", 0.5, 0.0, 1.0)
    0.5
    >>> check_number("beta", 0.0, 0.0, low_open=True)
    Traceback (most recent call last):
    ...
    ValueError: beta must be > 0.0, got 0.0.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    if integer and not float(value).is_integer():
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    if minimum is not None and (value <= minimum if low_open else value < minimum):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {minimum}, got {value!r}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value!r}.")
    return int(value) if integer else value


def check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}.")
    return value


def ids_or_none(completion_ids: list | None, n: int) -> list:
    """`completion_ids`, checked to have `n` rows, or `n` Nones when absent (called outside a trainer)."""
    if completion_ids is None:
        return [None] * n
    if len(completion_ids) != n:
        raise ValueError(f"completion_ids has {len(completion_ids)} rows but completions has {n}.")
    return completion_ids


def column(kwargs: dict, name: str, n: int) -> list | None:
    """The per-row column `name` from reward kwargs as a list of `n` values, or None when absent."""
    values = kwargs.get(name)
    if values is None:
        return None
    values = list(values)
    if len(values) != n:
        raise ValueError(f"column {name!r} has {len(values)} rows but completions has {n}.")
    return values


def keyword_names(receiver: Callable, skip: Iterable[str] = ()) -> set[str] | None:
    """The keyword arguments `receiver` (a function or a class, whose `__init__` counts) accepts, without `skip` (the
    positional arguments its caller fills in, e.g. `args`); `None` when it takes `**kwargs`, i.e. any name.

    >>> def f(batch, k=2, *, alpha=0.5): ...
    >>> sorted(keyword_names(f, skip=("batch",)))
    ['alpha', 'k']
    >>> keyword_names(lambda batch, **kw: None) is None
    True
    """
    parameters = inspect.signature(receiver).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in parameters if p.kind in kinds} - set(skip)


def check_keywords(
    field_name: str, kwargs: dict, receivers: Iterable[Callable], what: str, skip: Iterable[str] = (), extra=()
) -> None:
    """Refuse the keys of `kwargs` (the config's `field_name`, for `what`) that none of `receivers` accepts, in one line
    listing the valid names; the names come from the receivers' signatures (`keyword_names`), plus `extra` (keys the
    caller itself consumes). A receiver that takes `**kwargs` accepts every name, so nothing is refused.

    >>> def get_reward(alpha=0.5, beta=1.0): ...
    >>> check_keywords("reward_kwargs", {"alpah": 1}, [get_reward], "reward builder 'x'")
    Traceback (most recent call last):
    ...
    ValueError: reward_kwargs: unknown argument(s) ['alpah'] for reward builder 'x'; valid names: ['alpha', 'beta'].
    """
    if not isinstance(kwargs, dict):
        raise ValueError(f"{field_name} must be a mapping of argument name -> value, got {kwargs!r}.")
    valid = set(extra)
    for receiver in receivers:
        names = keyword_names(receiver, skip)
        if names is None:
            return
        valid |= names
    unknown = sorted(set(kwargs) - valid)
    if unknown:
        raise ValueError(f"{field_name}: unknown argument(s) {unknown} for {what}; valid names: {sorted(valid)}.")


def renamed_argument(new_name: str, new_value: Any, old_name: str, old_value: Any, removal: str = "0.3.0") -> Any:
    """The value of an argument renamed from `old_name` to `new_name`: the old name still works, with a
    `FutureWarning` giving the removal version (TRL's convention); both at once, or neither, is an error.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     renamed_argument("max_completion_length", None, "max_len", 100)
    100
    >>> str(caught[0].message)
    '`max_len` is deprecated and will be removed in 0.3.0: use `max_completion_length`.'
    >>> renamed_argument("max_completion_length", None, "max_len", None)
    Traceback (most recent call last):
    ...
    ValueError: max_completion_length is required.
    """
    import warnings

    if old_value is not None:
        if new_value is not None:
            raise ValueError(f"pass {new_name} only ({old_name} is its deprecated name), not both.")
        warnings.warn(f"`{old_name}` is deprecated and will be removed in {removal}: use `{new_name}`.",
                      FutureWarning, stacklevel=3)  # fmt: skip
        return old_value
    if new_value is None:
        raise ValueError(f"{new_name} is required.")
    return new_value


def check_writable(flag: str, path: str, folder: bool = False) -> None:
    """Refuse, before any work, an output `path` that cannot be written: a `ValueError` naming `flag`, the path and
    what to change ("cannot write"). `folder=True`: `path` is a folder to create or fill (its nearest existing
    ancestor must be a writable folder); else a file whose folder must exist and be writable.

    >>> check_writable("--output", "/no/such/folder/profile.jsonl")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --output /no/such/folder/profile.jsonl: the folder /no/such/folder does not exist; create it or ...
    """
    import os

    target = os.path.abspath(os.path.expanduser(path))
    if folder:
        while not os.path.exists(target) and os.path.dirname(target) != target:
            target = os.path.dirname(target)
        if not os.path.isdir(target):
            raise ValueError(f"{flag} {path}: {target} is a file, not a folder; pass another path")
    else:
        target = os.path.dirname(target)
        if not os.path.isdir(target):
            raise ValueError(f"{flag} {path}: the folder {target} does not exist; create it or pass another path")
    if not os.access(target, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: cannot write in {target} (permission denied); pass a folder you can write")
