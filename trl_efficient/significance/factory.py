"""`build_scorer(spec)`: an in-process scorer or an HTTP client from one spec string. Above `scorers` and `client`,
so neither imports the other's module at run time."""

from __future__ import annotations

from typing import Any

from .client import ScorerClient
from .scorers import (
    CLIENT_ONLY_KWARGS,
    MODEL_ONLY_KWARGS,
    LLMLingua2Scorer,
    SelfInformationScorer,
    SignificanceScorer,
)

__all__ = ["build_scorer"]


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
