"""
HTTP client of `trl-efficient serve-scorer` (`server.py`), with the same `score()` protocol as the in-process scorers.

Unlike the Bingo release's client (one request per text, a 30 s timeout, `None` on any network error, which then
crashes the advantage code), this client sends the de-duplicated, uncached texts of a call in a few batched requests,
retries connection errors, timeouts and 5xx answers with exponential backoff, never retries a 4xx (a malformed
request or a wrong token will not get better), and raises `ScorerUnavailableError` naming the URL when the server
cannot be reached, so a run stops with a clear message instead of training on silent zeros.

The bearer token comes from `token=` or the `TRL_EFFICIENT_SCORER_TOKEN` environment variable (the server reads the
same variable).
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from typing import Any

from .scorers import BaseScorer, Significance

logger = logging.getLogger(__name__)

__all__ = ["ScorerClient", "ScorerError", "ScorerRequestError", "ScorerUnavailableError", "TOKEN_ENV"]

TOKEN_ENV = "TRL_EFFICIENT_SCORER_TOKEN"
RETRY_STATUSES = (500, 502, 503, 504)


class ScorerError(RuntimeError):
    """Base class of scorer-server errors."""


class ScorerUnavailableError(ScorerError):
    """The scorer server could not be reached (or kept failing) after all retries."""


class ScorerRequestError(ScorerError):
    """The server refused the request (4xx): malformed input, too large, or a missing/wrong token."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ScorerClient(BaseScorer):
    """
    Client of a scorer server.

    Args:
        url (`str`): the server's base URL, e.g. `http://127.0.0.1:8765`.
        token (`str`, *optional*): bearer token; defaults to `$TRL_EFFICIENT_SCORER_TOKEN`.
        timeout (`float`, *optional*, defaults to `120`): seconds per request (connect and read).
        retries (`int`, *optional*, defaults to `3`): further attempts after a failed one.
        backoff (`float`, *optional*, defaults to `1.0`): sleep before retry `k` is `backoff * 2**(k-1)` seconds.
        max_inputs_per_request (`int`, *optional*, defaults to `256`): larger calls are split into several requests.
        cache_size (`int`, *optional*, defaults to `4096`): client-side LRU cache of texts.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 1.0,
        max_inputs_per_request: int = 256,
        cache_size: int = 4096,
    ) -> None:
        super().__init__(cache_size)
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {url!r}.")
        for name, value, low in (("timeout", timeout, 0.0), ("backoff", backoff, 0.0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
                raise ValueError(f"{name} must be a number >= {low}, got {value!r}.")
        if timeout == 0:
            raise ValueError("timeout must be > 0.")
        for name, value, low in (("retries", retries, 0), ("max_inputs_per_request", max_inputs_per_request, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self.max_inputs_per_request = max_inputs_per_request
        self._info: dict | None = None

    def health(self) -> dict:
        """`GET /health`: the server's model, unit and window. Raises `ScorerUnavailableError` when unreachable."""
        self._info = self._request("GET", "/health")
        self.unit = str(self._info.get("unit", self.unit))  # "word" until the server says otherwise
        self.window = int(self._info.get("window") or self.window)
        return self._info

    def describe(self) -> dict:
        return {"kind": "ScorerClient", "url": self.url}

    def _score_uncached(self, items: list) -> list[Significance]:
        out: list[Significance] = []
        step = self.max_inputs_per_request
        for start in range(0, len(items), step):
            part = items[start : start + step]
            payload = {"inputs": [x if isinstance(x, str) else list(x) for x in part], "return_units": False}
            answer = self._request("POST", "/score", payload)
            results = answer.get("results")
            if not isinstance(results, list) or len(results) != len(part):
                raise ScorerError(
                    f"scorer at {self.url} answered {len(results) if isinstance(results, list) else results!r} results "
                    f"for {len(part)} inputs."
                )
            out.extend(Significance.from_json(r) for r in results)
        return out

    def _request(self, method: str, path: str, payload: Any = None) -> dict:
        url = self.url + path
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                delay = self.backoff * 2 ** (attempt - 1)
                logger.warning(
                    "scorer at %s failed (%s); retry %d/%d in %.1fs", url, last, attempt, self.retries, delay
                )
                time.sleep(delay)
            request = urllib.request.Request(url, data=body, headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as err:
                message = _error_message(err)
                if err.code in RETRY_STATUSES:
                    last = f"HTTP {err.code}: {message}"
                    continue
                raise ScorerRequestError(
                    f"scorer at {url} refused the request: HTTP {err.code}: {message}", err.code
                ) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as err:
                reason = getattr(err, "reason", err)
                last = f"{type(reason).__name__}: {reason}"
            except json.JSONDecodeError as err:
                last = f"invalid JSON answer: {err}"
        raise ScorerUnavailableError(
            f"significance scorer at {self.url} is unreachable or failing after {self.retries + 1} attempt(s) "
            f"(last error: {last}). Start it with `trl-efficient serve-scorer --model <checkpoint> --port <port>`, "
            "check the host, port and token, or set on_scorer_error='fallback' with a fallback_scorer."
        )


def _error_message(err: urllib.error.HTTPError) -> str:
    try:
        data = json.loads(err.read().decode("utf-8"))
        return str(data.get("error", data))
    except Exception:
        return str(err.reason)
