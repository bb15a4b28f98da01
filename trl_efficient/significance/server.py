"""
`trl-efficient serve-scorer`: a token-significance scorer behind HTTP, to put the scorer on another GPU or host.

In-process scoring is the default for Bingo; the server exists for the same reason as the Bingo release's
`compressor_server.py` (keep the 560M-parameter XLM-R classifier off the policy's GPUs), but it is built on the
standard library (`http.server.ThreadingHTTPServer`), binds 127.0.0.1 unless told otherwise, can require a bearer
token, limits request sizes, and answers malformed requests with a 4xx and a message.

Endpoints (JSON in and out):

- `GET /health` -> `{"status": "ok", "model": ..., "kind": ..., "unit": "word"|"token", "window": 512, "stats": {...}}`
  (no token needed).
- `POST /score` with `{"inputs": ["text", [token ids], ...], "return_units": false}` ->
  `{"results": [{"scores": [...], "chunk_sizes": [...], "num_tokens": n, "units": [...]?}, ...], "unit": ...}`.
  `"texts"` is accepted as an alias of `"inputs"`.

Errors: 400 (not JSON, wrong fields or types), 401 (token missing or wrong), 404 (unknown path), 405 (wrong method),
411 (no Content-Length), 413 (body, input count or text length over the limits), 500 (scoring failed; the message
says why). Every error body is `{"error": "<message>"}`.

Launch:
    trl-efficient serve-scorer --model microsoft/llmlingua-2-xlm-roberta-large-meetingbank --device cuda:7 --port 8765
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..core.checks import check_positive_int
from ..core.errors import CommandParser
from ..core.models import missing_model_dir
from .client import TOKEN_ENV
from .scorers import LLMLingua2Scorer, SelfInformationScorer

logger = logging.getLogger(__name__)

__all__ = ["ScorerHTTPServer", "main", "make_server"]

DEFAULT_PORT = 8765
DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_INPUTS = 4096
DEFAULT_MAX_INPUT_CHARS = 2_000_000


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ScorerHTTPServer(ThreadingHTTPServer):
    """HTTP server around one scorer. Requests are handled in threads; the model itself runs one batch at a time
    (the scorer's lock), which is what a single accelerator can do anyway."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        scorer: Any,
        token: str | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        max_inputs: int = DEFAULT_MAX_INPUTS,
        max_input_chars: int = DEFAULT_MAX_INPUT_CHARS,
        request_timeout: float = 120.0,
    ) -> None:
        self.scorer = scorer
        self.token = token or None
        self.max_request_bytes = max_request_bytes
        self.max_inputs = max_inputs
        self.max_input_chars = max_input_chars
        self.request_timeout = request_timeout
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: ScorerHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "trl-efficient-scorer"

    def setup(self):
        self.timeout = self.server.request_timeout  # a stalled client cannot hold a thread forever
        super().setup()

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        logger.debug("%s - %s", self.address_string(), format % args)

    def _send(self, status: int, payload: dict, close: bool = False) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, close: bool = False) -> None:
        if status >= 500:
            logger.error("scorer request failed: %s", message)
        else:
            logger.info("rejected request %s %s: %d %s", self.command, self.path, status, message)
        self._send(status, {"error": message}, close=close)

    def do_GET(self):  # noqa: N802
        if self.path.rstrip("/") == "/health":
            scorer = self.server.scorer
            stats = scorer.stats.as_dict() if hasattr(scorer, "stats") else {}
            info = scorer.describe() if hasattr(scorer, "describe") else {}
            self._send(
                200,
                {
                    "status": "ok",
                    "model": info.get("model"),
                    "kind": info.get("kind", type(scorer).__name__),
                    "unit": getattr(scorer, "unit", "word"),
                    "window": getattr(scorer, "window", None),
                    "stats": stats,
                },
            )
        elif self.path.rstrip("/") == "/score":
            self._error(405, 'use POST /score with a JSON body {"inputs": [...]}')
        else:
            self._error(404, f"unknown path {self.path!r}; endpoints: GET /health, POST /score")

    def do_POST(self):  # noqa: N802
        if self.path.rstrip("/") != "/score":
            if self.path.rstrip("/") == "/health":
                self._error(405, "use GET /health")
            else:
                self._error(404, f"unknown path {self.path!r}; endpoints: GET /health, POST /score")
            self._drain()
            return
        try:
            self._check_auth()
            inputs, return_units = self._parse()
        except _BadRequest as err:
            self._error(err.status, err.message, close=err.status in (401, 411, 413))
            return
        try:
            results = self.server.scorer.score(inputs)
        except Exception as err:  # a bug or OOM in the model: tell the client, keep serving
            logger.exception("scoring failed")
            self._error(500, f"scoring failed: {type(err).__name__}: {err}")
            return
        self._send(
            200,
            {
                "results": [r.to_json(with_units=return_units) for r in results],
                "unit": getattr(self.server.scorer, "unit", "word"),
            },
        )

    def do_PUT(self):  # noqa: N802
        self._error(405, "use GET /health or POST /score", close=True)

    do_DELETE = do_PATCH = do_PUT  # noqa: N815

    def _drain(self) -> None:
        length = self.headers.get("Content-Length")
        if length and length.isdigit() and int(length) <= self.server.max_request_bytes:
            self.rfile.read(int(length))
        else:
            self.close_connection = True

    def _check_auth(self) -> None:
        token = self.server.token
        if token is None:
            return
        given = self.headers.get("Authorization", "")
        expected = f"Bearer {token}"
        if not hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8")):
            raise _BadRequest(401, "missing or wrong bearer token (send 'Authorization: Bearer <token>')")

    def _parse(self) -> tuple[list, bool]:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raise _BadRequest(411, "chunked requests are not supported; send a Content-Length")
        length = self.headers.get("Content-Length")
        if length is None:
            raise _BadRequest(411, "Content-Length header required")
        if not length.strip().isdigit():
            raise _BadRequest(400, f"bad Content-Length {length!r}")
        size = int(length)
        if size > self.server.max_request_bytes:
            raise _BadRequest(413, f"request body of {size} bytes exceeds the limit of {self.server.max_request_bytes}")
        raw = self.rfile.read(size)
        if len(raw) != size:
            raise _BadRequest(400, f"request body ended after {len(raw)} of {size} bytes")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise _BadRequest(400, f"request body is not valid UTF-8 JSON: {err}") from None
        if not isinstance(data, dict):
            raise _BadRequest(400, 'request body must be a JSON object like {"inputs": ["text", ...]}')
        unknown = set(data) - {"inputs", "texts", "return_units"}
        if unknown:
            raise _BadRequest(400, f"unknown field(s) {sorted(unknown)}; allowed: inputs (or texts), return_units")
        inputs = data.get("inputs", data.get("texts"))
        if inputs is None:
            raise _BadRequest(400, "missing field 'inputs' (a list of texts or of token-id lists)")
        if not isinstance(inputs, list):
            raise _BadRequest(400, f"'inputs' must be a list, got {type(inputs).__name__}")
        if len(inputs) > self.server.max_inputs:
            raise _BadRequest(413, f"{len(inputs)} inputs exceed the limit of {self.server.max_inputs} per request")
        for i, item in enumerate(inputs):
            if isinstance(item, str):
                if len(item) > self.server.max_input_chars:
                    raise _BadRequest(
                        413, f"inputs[{i}] has {len(item)} characters, over the limit of {self.server.max_input_chars}"
                    )
            elif isinstance(item, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in item):
                if len(item) > self.server.max_input_chars:
                    raise _BadRequest(413, f"inputs[{i}] has {len(item)} token ids, over the limit")
                vocab = _vocab_size(self.server.scorer)
                if vocab is not None and any(t < 0 or t >= vocab for t in item):
                    raise _BadRequest(400, f"inputs[{i}] holds token ids outside [0, {vocab})")
            else:
                raise _BadRequest(400, f"inputs[{i}] must be a string or a list of ints, got {type(item).__name__}")
        return_units = data.get("return_units", True)
        if not isinstance(return_units, bool):
            raise _BadRequest(400, "'return_units' must be true or false")
        return inputs, return_units


def _vocab_size(scorer) -> int | None:
    tok = getattr(scorer, "tokenizer", None)
    return len(tok) if tok is not None else None


def make_server(
    scorer: Any,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_inputs: int = DEFAULT_MAX_INPUTS,
    max_input_chars: int = DEFAULT_MAX_INPUT_CHARS,
) -> ScorerHTTPServer:
    """Bind a `ScorerHTTPServer` (port 0 picks a free port; read it from `server.server_address`). Call
    `serve_forever()` on it (in a thread for tests)."""
    for name, value in (("max_request_bytes", max_request_bytes), ("max_inputs", max_inputs),
                        ("max_input_chars", max_input_chars)):  # fmt: skip
        check_positive_int(name, value)
    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        logger.warning(
            "scorer server binds %s without a token: anyone who can reach this port can use the model. "
            "Pass --token or set %s.",
            host,
            TOKEN_ENV,
        )
    return ScorerHTTPServer((host, port), scorer, token, max_request_bytes, max_inputs, max_input_chars)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="trl-efficient serve-scorer",
        description="Serve a token-significance scorer (LLMLingua-2 classifier or causal-LM self-information) "
        "over HTTP.",
    )
    parser.add_argument(
        "--model",
        required=True,
        help="Checkpoint directory or Hub name (LLMLingua-2 classifier, or a causal LM with --kind self-information).",
    )
    parser.add_argument("--kind", choices=["llmlingua2", "self-information"], default="llmlingua2")
    parser.add_argument(
        "--backend",
        choices=["transformers", "llmlingua"],
        default="transformers",
        help="llmlingua2 only: load through the llmlingua package (optional extra).",
    )
    parser.add_argument("--device", default=None, help="e.g. cuda:7 or cpu (default: cuda:0 when available).")
    parser.add_argument("--dtype", default=None, help="float32 (default), bfloat16 or float16.")
    parser.add_argument("--batch-size", type=int, default=32, help="Chunks per forward pass.")
    parser.add_argument("--window", type=int, default=512, help="Chunk length in scorer tokens.")
    parser.add_argument("--cache-size", type=int, default=16384, help="Texts kept in the server's LRU cache.")
    parser.add_argument("--host", default="127.0.0.1", help="Bind address (default loopback only).")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="Port (0 picks a free one).")
    parser.add_argument("--port-file", default=None, help="Write the bound port to this file once listening.")
    parser.add_argument("--token", default=None, help=f"Require this bearer token (default: ${TOKEN_ENV} if set).")
    parser.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES)
    parser.add_argument("--max-inputs", type=int, default=DEFAULT_MAX_INPUTS, help="Inputs per request.")
    parser.add_argument("--max-input-chars", type=int, default=DEFAULT_MAX_INPUT_CHARS, help="Characters per text.")
    parser.add_argument("--log-level", default="INFO")
    return parser


def build_scorer_from_args(args) -> Any:
    common = dict(
        device=args.device, dtype=args.dtype, batch_size=args.batch_size, window=args.window, cache_size=args.cache_size
    )
    if args.kind == "self-information":
        return SelfInformationScorer(args.model, **common)
    return LLMLingua2Scorer(args.model, backend=args.backend, **common)


def check_args(args) -> None:
    """The numbers, the log level and the address, checked before the scorer loads (a model load can take minutes):
    one-line `ValueError`s naming the flag. The address is tried with a bind, so a port in use is said now."""
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port {args.port}: must be in 0..65535 (0 picks a free port)")
    for flag in ("batch_size", "window", "cache_size", "max_request_bytes", "max_inputs", "max_input_chars"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')} {getattr(args, flag)}: must be a whole number >= 1")
    missing = missing_model_dir(args.model, "--model")  # a path that is no folder, named before the Hub rejects it
    if missing is not None:
        raise missing
    if not isinstance(logging.getLevelName(args.log_level.upper()), int):
        raise ValueError(f"--log-level {args.log_level}: choose one of DEBUG, INFO, WARNING, ERROR")
    try:
        with socket.create_server((args.host, args.port)):
            pass
    except OSError as err:
        raise ValueError(
            f"--host {args.host} --port {args.port}: cannot listen there ({err.strerror or err}); pass an address "
            "of this machine as --host, or another --port (0 picks a free one)"
        ) from err


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    check_args(args)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.device is None:
        import torch

        args.device = "cuda:0" if torch.cuda.is_available() else "cpu"
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    scorer = build_scorer_from_args(args)
    server = make_server(
        scorer, args.host, args.port, token, args.max_request_bytes, args.max_inputs, args.max_input_chars
    )
    port = server.server_address[1]
    if args.port_file:
        tmp = f"{args.port_file}.tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, args.port_file)

    def _stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    logger.info("scorer %s (%s, %s) serving on %s%s", args.model, args.kind, scorer.unit, server.url,
                " (bearer token required)" if token else "")  # fmt: skip
    print(f"trl-efficient scorer listening on {server.url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
