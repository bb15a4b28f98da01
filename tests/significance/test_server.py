"""`trl-efficient serve-scorer` as a real process on loopback, and its client: equality with in-process scoring,
bad requests, auth, concurrent clients, retries, and a server killed mid-run."""

import http.client
import json
import socket
import threading
import time

import pytest
from bingo_testing import start_server, stop_server

from trl_efficient.significance import (
    ScorerClient,
    ScorerRequestError,
    ScorerUnavailableError,
    Significance,
)
from trl_efficient.significance.server import make_server

TOKEN = "s3cret-token"
TEXTS = [
    "the cats sat on the mat. so then wait the dog ran fast.\nThe answer is 42",
    "",
    "数学 café naïve Über 😀 答",
    " ".join(["the cat sat on the mat ."] * 90),  # 630 pieces: two chunks of the 512-token window
]


@pytest.fixture(scope="module")
def server(tiny_classifier_dir, tmp_path_factory):
    proc, url = start_server(
        tiny_classifier_dir,
        tmp_path_factory.mktemp("srv"),
        "--token",
        TOKEN,
        "--max-request-bytes",
        "200000",
        "--max-inputs",
        "64",
        "--max-input-chars",
        "20000",
    )
    yield proc, url
    stop_server(proc)


def _raw(url, method, path, body=None, headers=None):
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def _post(url, payload, token=TOKEN):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    return _raw(url, "POST", "/score", body, headers)


def test_health_needs_no_token(server):
    _, url = server
    status, info = _raw(url, "GET", "/health")
    assert status == 200 and info["status"] == "ok"
    assert info["unit"] == "word" and info["window"] == 512 and info["kind"] == "LLMLingua2Scorer"


def test_scores_equal_in_process_scoring(server, tiny_scorer):
    _, url = server
    client = ScorerClient(url, token=TOKEN, cache_size=0)
    remote = client.score(TEXTS)
    local = tiny_scorer.score(TEXTS)
    for r, loc in zip(remote, local, strict=True):
        assert r.scores == loc.scores  # exact: float repr round-trips through JSON
        assert r.chunk_sizes == loc.chunk_sizes and r.num_tokens == loc.num_tokens
        assert r.units is None  # the client asks for scores only
    assert len(remote[3].chunk_sizes) == 2  # longer than the window
    assert remote[1].scores == ()  # empty text
    # units on request, token ids as input
    ids = tiny_scorer.tokenizer("the cat sat", add_special_tokens=False)["input_ids"]
    status, answer = _post(url, {"inputs": ["the cat sat", ids], "return_units": True})
    assert status == 200 and answer["results"][0]["units"] == ["the", "cat", "sat"]
    assert answer["results"][1]["scores"] == answer["results"][0]["scores"]


@pytest.mark.parametrize(
    "payload, status, message",
    [
        (b"{not json", 400, "not valid UTF-8 JSON"),
        (b"\xff\xfe", 400, "not valid UTF-8 JSON"),
        ([1, 2], 400, "must be a JSON object"),
        ({"text": ["a"]}, 400, "unknown field"),
        ({}, 400, "missing field 'inputs'"),
        ({"inputs": "the cat"}, 400, "'inputs' must be a list"),
        ({"inputs": ["ok", 3]}, 400, r"inputs\[1\] must be a string or a list of ints"),
        ({"inputs": [[1, "a"]]}, 400, r"inputs\[0\] must be"),
        ({"inputs": [[10**9]]}, 400, "token ids outside"),
        ({"inputs": ["a"], "return_units": "yes"}, 400, "return_units"),
        ({"inputs": ["a"] * 65}, 413, "65 inputs exceed the limit of 64"),
        ({"inputs": ["a" * 20001]}, 413, "20001 characters"),
    ],
)
def test_malformed_requests_get_4xx_with_a_message(server, payload, status, message):
    import re

    _, url = server
    got, answer = _post(url, payload)
    assert got == status and re.search(message, answer["error"]), answer


def test_protocol_errors(server):
    _, url = server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert _raw(url, "GET", "/nope")[0] == 404
    assert _raw(url, "GET", "/score")[0] == 405
    assert _raw(url, "POST", "/health", b"{}", auth)[0] == 405
    assert _raw(url, "PUT", "/score", b"{}", auth)[0] == 405
    status, answer = _post(url, {"inputs": ["a"]}, token="wrong")
    assert status == 401 and "bearer token" in answer["error"]
    assert _raw(url, "POST", "/score", b'{"inputs": []}', {})[0] == 401  # no Authorization header
    # body larger than the limit: refused from the header alone, before reading it
    status, answer = _raw(url, "POST", "/score", b"{}", {**auth, "Content-Length": "300000"})
    assert status == 413 and "exceeds the limit" in answer["error"]
    # no Content-Length (raw socket: http.client always sends one)
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"POST /score HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
        assert b" 411 " in sock.recv(4096).split(b"\r\n")[0]
    # the server survives all of it
    assert _raw(url, "GET", "/health")[0] == 200


def test_client_maps_4xx_to_a_request_error_without_retrying(server):
    _, url = server
    client = ScorerClient(url, token="wrong", retries=3, backoff=5.0)
    start = time.monotonic()
    with pytest.raises(ScorerRequestError, match="HTTP 401") as info:
        client.score(["the cat"])
    assert info.value.status == 401 and time.monotonic() - start < 4.0  # no backoff sleeps


def test_concurrent_clients(server, tiny_scorer):
    _, url = server
    batches = [[f"the cat sat {i} .", f"so then wait {i % 10}", "the dog ran fast " * (i + 1)] for i in range(8)]
    results, errors = {}, []

    def work(i):
        try:
            results[i] = ScorerClient(url, token=TOKEN, cache_size=0).score(batches[i])
        except Exception as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(results) == 8
    for i, batch in enumerate(batches):
        for remote, local in zip(results[i], tiny_scorer.score(batch), strict=True):
            assert remote.scores == pytest.approx(local.scores, abs=1e-6)


def test_unreachable_server_names_the_url_after_retries():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    client = ScorerClient(url, retries=2, backoff=0.05, timeout=2)
    start = time.monotonic()
    with pytest.raises(ScorerUnavailableError, match=f"scorer at {url} is unreachable .* after 3 attempt") as info:
        client.score(["the cat"])
    assert time.monotonic() - start >= 0.05 + 0.1  # backoff 0.05, then 0.1
    assert "serve-scorer" in str(info.value)


def test_server_killed_mid_run(tiny_classifier_dir, tmp_path):
    proc, url = start_server(tiny_classifier_dir, tmp_path)
    try:
        client = ScorerClient(url, retries=1, backoff=0.05, timeout=5)
        (first,) = client.score(["the cat sat"])
        assert len(first) == 3
        proc.kill()
        proc.wait(10)
        assert client.score(["the cat sat"])[0] is first  # cached texts need no server
        with pytest.raises(ScorerUnavailableError, match=url):
            client.score(["the dog ran"])
    finally:
        stop_server(proc)


class _Flaky:
    """Fails its first call (-> HTTP 500), then scores like a word counter."""

    unit, window = "word", 512

    def __init__(self):
        self.calls = 0

    def score(self, inputs):
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("CUDA out of memory (simulated)")
        return [Significance(tuple(1.0 for _ in t.split()), (len(t.split()),) if t.split() else ()) for t in inputs]


def test_5xx_is_retried_with_backoff():
    flaky = _Flaky()
    srv = make_server(flaky, port=0)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        client = ScorerClient(srv.url, retries=2, backoff=0.01)
        (sig,) = client.score(["a b c"])
        assert sig.scores == (1.0, 1.0, 1.0) and flaky.calls == 2
        status, answer = _raw(srv.url, "GET", "/health")
        assert status == 200 and answer["kind"] == "_Flaky"
    finally:
        srv.shutdown()
        srv.server_close()


def test_client_argument_errors():
    with pytest.raises(ValueError, match="url must start with http"):
        ScorerClient("127.0.0.1:8765")
    with pytest.raises(ValueError, match="retries must be an int"):
        ScorerClient("http://x", retries=-1)
    with pytest.raises(ValueError, match="timeout must be"):
        ScorerClient("http://x", timeout=0)
