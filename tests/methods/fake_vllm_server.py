"""A small real HTTP server on 127.0.0.1 that speaks the part of the vLLM server protocol TRL's `VLLMClient` uses
(docs/testing.md §7.5): `GET /health`, `GET /v1/models`, `GET /server_info`, `POST /reset_prefix_cache` and
`POST /v1/completions` with token-id prompts in the `return_token_ids` response format.

Every completion request is recorded (`server.requests`: prompts as token ids, `n`, `max_tokens`), and each choice is
produced by `responder(prompt_ids, sample_index) -> completion token ids`, so a test can echo something
prompt-dependent and check which prompt every completion really came from.

    with FakeVLLMServer(responder) as server:
        GRPOConfig(use_vllm=True, vllm_mode="server", vllm_server_base_url=server.base_url, ...)
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def echo_tail(prompt_ids: list[int], sample_index: int, tail: int = 4, eos_id: int | None = None) -> list[int]:
    """Default responder: the last `tail` prompt tokens, then `eos_id` if given."""
    return list(prompt_ids[-tail:]) + ([eos_id] if eos_id is not None else [])


class FakeVLLMServer:
    def __init__(self, responder=echo_tail, model_name: str = "fake-model", logprob: float = -0.5):
        self.responder = responder
        self.model_name = model_name
        self.logprob = logprob
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeVLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # ------------------------------------------------------------------------------------------------------------
    def completions(self, payload: dict) -> dict:
        prompts = payload["prompt"]
        if prompts and isinstance(prompts[0], int):  # a single token-id prompt
            prompts = [prompts]
        if not all(isinstance(p, list) for p in prompts):
            raise ValueError("this fake only accepts token-id prompts, as TRL's VLLMGeneration sends")
        n = int(payload.get("n", 1))
        with self._lock:
            record = {"prompts": [list(p) for p in prompts], "n": n, "max_tokens": payload.get("max_tokens")}
            self.requests.append(record)
        choices = []
        for p_index, prompt in enumerate(prompts):  # prompt-major, as vLLM returns them
            for k in range(n):
                ids = list(self.responder(list(prompt), k))[: payload.get("max_tokens") or None]
                logprobs = None
                if payload.get("logprobs") is not None:
                    logprobs = {
                        "tokens": [f"token_id:{t}" for t in ids],
                        "token_logprobs": [self.logprob] * len(ids),
                        "top_logprobs": [None] * len(ids),
                        "text_offset": [0] * len(ids),
                    }
                choices.append(
                    {
                        "index": p_index * n + k,
                        "text": "",
                        "prompt_token_ids": list(prompt),
                        "token_ids": ids,
                        "logprobs": logprobs,
                        "finish_reason": "stop",
                    }
                )
        return {"id": "cmpl-fake", "object": "text_completion", "model": self.model_name, "choices": choices}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _send(self, body: dict, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/health":
                    self._send({})
                elif self.path == "/v1/models":
                    self._send({"object": "list", "data": [{"id": server.model_name, "object": "model"}]})
                elif self.path.startswith("/server_info"):
                    self._send({"vllm_config": {"model_config": {"logprobs_mode": "processed_logprobs"}}})
                else:
                    self._send({"error": f"unknown path {self.path}"}, 404)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                payload = json.loads(self.rfile.read(length) or b"{}")
                if self.path == "/v1/completions":
                    try:
                        self._send(server.completions(payload))
                    except Exception as err:  # report the protocol error to the client
                        self._send({"error": str(err)}, 400)
                elif self.path == "/reset_prefix_cache":
                    self._send({"success": True})
                else:
                    self._send({"error": f"unknown path {self.path}"}, 404)

        return Handler
