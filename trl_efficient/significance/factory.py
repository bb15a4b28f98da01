"""`build_scorer(spec)`: an in-process scorer or an HTTP client from one spec string. Above `scorers` and `client`,
so neither imports the other's module at run time."""

from __future__ import annotations

import os
from typing import Any

from .client import ScorerClient
from .scorers import CLIENT_ONLY_KWARGS, MODEL_ONLY_KWARGS, LLMLingua2Scorer, SelfInformationScorer, SignificanceScorer

__all__ = ["ScorerNotFoundError", "build_scorer", "check_scorer"]


def build_scorer(spec: Any, **kwargs) -> SignificanceScorer:
    """
    A scorer from a spec:

    - an object with `score()` is returned as is;
    - `"http://host:port"` / `"https://..."`: a `ScorerClient` for a `trl-efficient serve-scorer` server;
    - `"self-information:<causal LM path or Hub name>"`: a `SelfInformationScorer`;
    - anything else (a directory or Hub name): an `LLMLingua2Scorer`; `"llmlingua:<path>"` selects its llmlingua
      backend.

    `kwargs` go to the constructor; those that only apply to the other kind (`device`, `batch_size`, ... for a
    client; `token`, `retries`, ... for a model) are dropped, so one dict can configure a server URL and its
    in-process fallback.

    >>> build_scorer("ftp://nowhere")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: scorer spec 'ftp://nowhere' ...
    """
    if hasattr(spec, "score") and callable(spec.score):
        return spec
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"scorer must be a scorer object or a spec string, got {spec!r}.")
    if spec.startswith(("http://", "https://")):
        return ScorerClient(spec, **{k: v for k, v in kwargs.items() if k not in MODEL_ONLY_KWARGS})
    kwargs = {k: v for k, v in kwargs.items() if k not in CLIENT_ONLY_KWARGS}
    if "://" in spec:
        raise ValueError(
            f"scorer spec {spec!r} is neither an http(s) URL, 'self-information:<model>', 'llmlingua:<model>' nor a "
            "checkpoint path or Hub name."
        )
    if spec.startswith("self-information:"):
        return SelfInformationScorer(spec.split(":", 1)[1], **kwargs)
    if spec.startswith("llmlingua:"):
        return LLMLingua2Scorer(spec.split(":", 1)[1], backend="llmlingua", **kwargs)
    return LLMLingua2Scorer(spec, **kwargs)


class ScorerNotFoundError(ValueError):
    """A scorer spec whose checkpoint cannot be found (not in the local cache while offline, no such Hub id or
    directory). A `ValueError`, so `trl-efficient` prints it as one line and exits 2."""


def _spec_model(spec: str) -> str:
    """The checkpoint a model spec loads: `self-information:M` and `llmlingua:M` load `M`, any other spec itself."""
    for prefix in ("self-information:", "llmlingua:"):
        if spec.startswith(prefix):
            return spec[len(prefix) :]
    return spec


def check_scorer(spec: Any) -> None:
    """Check, without loading any weights, that the scorer `spec` can be built: for a checkpoint spec, its
    `config.json` is found (a local directory, or the Hub through the local cache: a download of a few kB when
    online, nothing when `HF_HUB_OFFLINE=1`). Why: a scorer is built lazily, at the first reward call, after the
    policy, the reference model and the first rollouts; a missing one must stop the run before all that, with a
    line that says it is the scorer. A scorer object and a server URL pass (a server has its own health check).

    Raises `ScorerNotFoundError` (one line, naming the spec and why it cannot be loaded).

    >>> check_scorer("/no/such/scorer")
    Traceback (most recent call last):
    ...
    trl_efficient.significance.factory.ScorerNotFoundError: scorer '/no/such/scorer' cannot be loaded: no such directory
    """
    if not isinstance(spec, str) or spec.startswith(("http://", "https://")):
        return
    model = _spec_model(spec)
    path = os.path.expanduser(model)
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ScorerNotFoundError(f"scorer {spec!r} cannot be loaded: {model} has no config.json")
        return
    if model.startswith(("/", ".", "~")):
        raise ScorerNotFoundError(f"scorer {spec!r} cannot be loaded: no such directory")
    from huggingface_hub import constants
    from transformers.utils import cached_file

    try:
        cached_file(model, "config.json")
    except OSError as err:
        if type(err.__cause__).__name__ == "HFValidationError":
            reason = "neither a directory nor a valid Hub id"
        elif constants.HF_HUB_OFFLINE:
            reason = (
                "it is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 forbids downloading it (offline); "
                f"download it first (`hf download {model}`) or unset HF_HUB_OFFLINE"
            )
        else:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            reason = f"not found on the Hub nor in the local cache ({first})"
        raise ScorerNotFoundError(f"scorer {spec!r} cannot be loaded: {reason}") from err
