"""Test helpers for the significance/Bingo tests (not a test module)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from trl_efficient.significance import Significance

FILLER = {"so", "then", "wait", "step", "check", "um", "hmm"}

# Vocabulary of the tiny classifier: every word the tests score, in the cases they use, plus digits, punctuation,
# CJK characters (BERT splits them one per token) and accented words.
CLASSIFIER_WORDS = (
    "the cat sat on mat dog ran fast so then wait step check um hmm answer is final The So Then Let me think "
    "what 0 1 2 3 4 5 6 7 8 9 42 . , ? ! : ; = + - * / ( ) { } < > \\ boxed café naïve Über über 数 学 題 答 é"
).split()


def build_tiny_token_classifier(path: str, words: list[str], seed: int = 0) -> str:
    from trl_efficient.testing.scorers import save_tiny_token_classifier

    return save_tiny_token_classifier(path, words, seed=seed)


class WordScorer:
    """Deterministic scorer: whitespace words; FILLER words score 0, others 1; chunks of `chunk` words."""

    unit, window = "word", 512

    def __init__(self, chunk: int = 1000):
        self.chunk = chunk
        self.calls: list[list[str]] = []

    def score(self, texts):
        self.calls.append(list(texts))
        out = []
        for text in texts:
            words = text.split()
            scores = tuple(0.0 if w.lower() in FILLER else 1.0 for w in words)
            sizes = tuple(min(self.chunk, len(words) - s) for s in range(0, len(words), self.chunk))
            out.append(Significance(scores, sizes, tuple(words), len(words)))
        return out


def start_server(model_dir: str, tmp_path, *extra: str, timeout: float = 90.0):
    """Start `trl-efficient serve-scorer` on a free loopback port; returns (process, url)."""
    port_file = os.path.join(str(tmp_path), f"port-{time.monotonic_ns()}")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("TRL_EFFICIENT_SCORER_TOKEN", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trl_efficient.cli",
            "serve-scorer",
            "--model",
            model_dir,
            "--device",
            "cpu",
            "--port",
            "0",
            "--port-file",
            port_file,
            "--log-level",
            "WARNING",
            *extra,
        ],  # fmt: skip
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + timeout
    while not os.path.exists(port_file):
        if proc.poll() is not None:
            raise RuntimeError(f"scorer server exited with {proc.returncode}: {proc.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("scorer server did not start in time")
        time.sleep(0.05)
    with open(port_file) as f:
        port = int(f.read())
    return proc, f"http://127.0.0.1:{port}"


def stop_server(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
