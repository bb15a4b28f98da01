"""The marker of this package's checkpointed parts: `StatefulComponent`.

`EfficientGRPOTrainer` writes the state of every component it holds to `trl_efficient_state.json` in each checkpoint
and restores it on resume. Which components those are is decided by this explicit base class, never by duck typing:
a reward *model* (a `PreTrainedModel` in `reward_funcs`, TRL's standard usage) also has `state_dict` and
`load_state_dict`, but its weights are TRL's business (and are tensors, not JSON).

A component subclasses `StatefulComponent` (or, for a class that cannot change its bases, is registered with
`StatefulComponent.register(cls)`, the `abc` way) and implements:
- `state_dict() -> dict`: JSON-serialisable state;
- `load_state_dict(state: dict) -> None`: restore it.
Optionally `state_key` (`str`): its name inside the checkpoint file (defaults to `__name__` or the class name).

>>> class Counter(StatefulComponent):
...     def __init__(self):
...         self.n = 0
...     def state_dict(self):
...         return {"n": self.n}
...     def load_state_dict(self, state):
...         self.n = state["n"]
>>> is_stateful(Counter()), is_stateful(object())
(True, False)
>>> import torch
>>> is_stateful(torch.nn.Linear(2, 2))  # has state_dict/load_state_dict, but is not one of ours
False
"""

from __future__ import annotations

import abc
from typing import Any

__all__ = ["StatefulComponent", "is_stateful"]


class StatefulComponent(abc.ABC):
    """Base class of the parts whose state `EfficientGRPOTrainer` checkpoints as JSON and restores on resume."""

    @abc.abstractmethod
    def state_dict(self) -> dict:
        """JSON-serialisable state."""

    @abc.abstractmethod
    def load_state_dict(self, state: dict) -> None:
        """Restore the state returned by `state_dict`."""


def is_stateful(obj: Any) -> bool:
    """Whether `obj` is one of the checkpointed components (an instance of `StatefulComponent`, or registered)."""
    return isinstance(obj, StatefulComponent)
