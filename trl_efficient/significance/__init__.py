"""Token-significance scoring for Bingo (`methods.md` §1): which tokens of a response matter.

- `scorers`: the `SignificanceScorer` protocol (`score(inputs) -> list[Significance]`), `LLMLingua2Scorer` (the
  LLMLingua-2 token classifier), `SelfInformationScorer` (surprisal under any causal LM), `count_significance`
  (Bingo's per-chunk min-max normalisation and threshold, summed per text).
- `factory`: `build_scorer(spec)`, an in-process scorer or a client from one spec string; `check_scorer(spec)`, the
  same spec checked without loading weights (Bingo's recipe runs it before the policy loads).
- `client`: `ScorerClient`, the same protocol over HTTP, with timeouts, retries and clear errors.
- `server`: `trl-efficient serve-scorer`, the HTTP service (`main`, `make_server`).

Heavy imports (torch, transformers) happen only when a scorer is built.
"""

from .client import ScorerClient, ScorerError, ScorerRequestError, ScorerUnavailableError
from .factory import ScorerNotFoundError, build_scorer, check_scorer
from .scorers import (
    LLMLingua2Scorer,
    ScorerStats,
    SelfInformationScorer,
    Significance,
    SignificanceScorer,
    count_significance,
    count_significance_batch,
    split_chunks,
)

__all__ = [
    "LLMLingua2Scorer",
    "ScorerClient",
    "ScorerError",
    "ScorerNotFoundError",
    "ScorerRequestError",
    "ScorerStats",
    "ScorerUnavailableError",
    "SelfInformationScorer",
    "Significance",
    "SignificanceScorer",
    "build_scorer",
    "check_scorer",
    "count_significance",
    "count_significance_batch",
    "split_chunks",
]
