"""Throughput of Bingo's significance scorer, and its share of a training step. Prints numbers; not a test.

    python perf/bingo_scorer_throughput.py                        # tiny offline classifier, CPU
    python perf/bingo_scorer_throughput.py --arch large --device cuda --texts 256
    python perf/bingo_scorer_throughput.py --model /models/llmlingua-2-xlm-roberta-large-meetingbank --device cuda

Without `--model` the classifier is built offline with random weights: `--arch tiny` (2 layers, hidden 32, the test
fixture), `base` (12 x 768, multilingual-BERT compute) or `large` (24 x 1024, XLM-R-large compute). Random weights
do not change the cost of a forward pass, only what is significant.

Sections:
1. scorer throughput: tokens per second of `LLMLingua2Scorer.score` on fresh texts (every call batched), for several
   `batch_size`s, and on repeated texts (the LRU cache);
2. over HTTP: the same texts through `trl-efficient serve-scorer` (in-process server thread) and `ScorerClient`;
3. share of a training step: a few GRPO steps of a tiny Qwen2 policy with the `bingo` rewards (group reference and
   the cached frozen-model reference), time inside the Bingo reward vs the whole step (`--steps 0` skips it).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

WORDS = (
    "the so then wait step check first we need to compute sum of and is are let me think again answer final "
    "equation x y z value number total each two three four five because therefore hence so = + - * / ( ) . , ?"
).split()
ARCHS = {"tiny": (32, 2, 2, 64), "base": (768, 12, 12, 3072), "large": (1024, 24, 16, 4096)}


def build_classifier(path: str, arch: str) -> str:
    from trl_efficient.testing.scorers import save_tiny_token_classifier

    hidden, layers, heads, inter = ARCHS[arch]
    return save_tiny_token_classifier(path, (*WORDS, *map(str, range(100))), hidden, layers, heads, inter)


def make_texts(n: int, min_words: int, max_words: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        words = []
        for _ in range(rng.randint(min_words, max_words)):
            words.append(rng.choice(WORDS) if rng.random() < 0.85 else str(rng.randint(0, 99)))
            if rng.random() < 0.07:
                words.append(".\n" if rng.random() < 0.3 else ".")
        texts.append(" ".join(words) + r" so the answer is \boxed{" + str(rng.randint(0, 99)) + "}")
    return texts


def timed(fn, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def scorer_section(model_dir: str, device: str, texts: list[str], batch_sizes: list[int], dtype: str | None):
    from trl_efficient.significance import LLMLingua2Scorer

    print("\n== 1. in-process LLMLingua2Scorer ==")
    print(f"{len(texts)} texts; device {device}; dtype {dtype or 'float32'}")
    for bs in batch_sizes:
        scorer = LLMLingua2Scorer(model_dir, device=device, batch_size=bs, cache_size=0, dtype=dtype)
        scorer.score(texts[:4])  # warm-up
        scorer.stats = type(scorer.stats)()
        seconds = timed(lambda scorer=scorer: scorer.score(texts), repeat=3)  # best of 3 (shared machines are noisy)
        tokens = scorer.stats.tokens // 3
        chunks = sum(len(s.chunk_sizes) for s in scorer.score(texts[:32]))
        print(f"  batch_size {bs:3d}: {tokens:8d} tokens in {seconds:7.3f} s -> {tokens / seconds:10.0f} tokens/s "
              f"({len(texts) / seconds:8.1f} texts/s; {chunks / min(32, len(texts)):.2f} chunks/text)")  # fmt: skip
    cached = LLMLingua2Scorer(model_dir, device=device, batch_size=batch_sizes[-1], cache_size=len(texts), dtype=dtype)
    cached.score(texts)
    seconds = timed(lambda: cached.score(texts), repeat=3)
    print(f"  repeated texts (LRU cache): {len(texts) / seconds:10.0f} texts/s")
    return cached


def http_section(scorer, texts: list[str]):
    from trl_efficient.significance import ScorerClient
    from trl_efficient.significance.server import make_server

    print("\n== 2. over HTTP (serve-scorer on loopback, same model) ==")
    scorer.clear_cache()
    server = make_server(scorer, port=0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        client = ScorerClient(server.url, cache_size=0)
        client.score(texts[:2])
        scorer.clear_cache()
        before_model, before_tokens = scorer.stats.seconds, client.stats.tokens
        seconds = timed(lambda: client.score(texts))
        model_seconds = scorer.stats.seconds - before_model
        tokens = client.stats.tokens - before_tokens
        print(f"  {len(texts)} texts, {tokens} tokens in {seconds:.3f} s ({tokens / seconds:.0f} tokens/s end to end); "
              f"model {model_seconds:.3f} s, HTTP + JSON {max(0.0, seconds - model_seconds):.3f} s")  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()


def training_section(model_dir: str, device: str, steps: int, completion_length: int):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from work import StepTimer

    from trl_efficient.api import resolve_model
    from trl_efficient.rewards import correctness_reward
    from trl_efficient.rewards.bingo import get_bingo_length_reward
    from trl_efficient.trainer import EfficientGRPOConfig, EfficientGRPOTrainer

    print(f"\n== 3. share of a training step (tiny Qwen2 policy, CPU, {steps} steps of 2 prompts x G 8 rollouts, "
          f"up to {completion_length} new tokens) ==")  # fmt: skip
    policy = resolve_model("tiny:qwen2-16")
    tok = AutoTokenizer.from_pretrained(policy)
    rows = [("What is 6 * 7?", "42"), ("What is 2 + 3?", "5"), ("What is 9 - 2?", "7"), ("What is 3 * 3?", "9")] * 16
    data = Dataset.from_dict({"prompt": [[{"role": "user", "content": q}] for q, _ in rows],
                              "solution": [a for _, a in rows], "idx": list(range(len(rows)))})  # fmt: skip

    for reference in ("group", "model"):
        extra = {} if reference == "group" else dict(reference_model=policy, tokenizer=tok, reference_samples=4,
                                                     max_new_tokens=completion_length, device="cpu")  # fmt: skip
        reward = get_bingo_length_reward(model_dir, reference=reference, scorer_kwargs={"device": device}, **extra)
        timer = StepTimer()
        with tempfile.TemporaryDirectory() as out:
            args = EfficientGRPOConfig(
                output_dir=out, per_device_train_batch_size=16, num_generations=8,
                max_completion_length=completion_length, max_steps=steps, learning_rate=1e-4, logging_steps=1,
                report_to="none", use_cpu=True, bf16=False, save_strategy="no", seed=0, beta=0.0,
                generation_kwargs={"sequence_bias": [[[tok.eos_token_id], 1.0]]},
            )  # fmt: skip
            trainer = EfficientGRPOTrainer(model=policy, reward_funcs=[correctness_reward, reward], args=args,
                                           train_dataset=data, callbacks=[timer])  # fmt: skip
            trainer.train()
        logs = [h for h in trainer.state.log_history if "bingo/seconds" in h]
        bingo = [h["bingo/seconds"] for h in logs]
        ref = [h.get("bingo/reference_seconds", 0.0) for h in logs]
        scorer_stats = reward.scorer.stats
        total = sum(timer.durations)
        print(f"  reference={reference:5s}: step {total / steps:6.3f} s; Bingo reward {sum(bingo) / steps:6.3f} s/step "
              f"({100 * sum(bingo) / total:4.1f}% of the step), of which reference generation "
              f"{sum(ref) / steps:6.3f} s/step (first visit of each prompt only); scorer "
              f"{scorer_stats.tokens_per_second:8.0f} tokens/s over {scorer_stats.scored} texts, "
              f"{scorer_stats.cache_hits} cache hits")  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="A real LLMLingua-2 checkpoint (default: build one offline).")
    parser.add_argument("--arch", choices=sorted(ARCHS), default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--min-words", type=int, default=150)
    parser.add_argument("--max-words", type=int, default=1500)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--steps", type=int, default=3, help="Training steps for section 3 (0 skips it).")
    parser.add_argument("--completion-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice).")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, {os.cpu_count()} CPUs, load average "
        f"{' '.join(open('/proc/loadavg').read().split()[:3]) if os.path.exists('/proc/loadavg') else 'n/a'}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model or build_classifier(os.path.join(tmp, f"{args.arch}-bert-base-multilingual-cased"),
                                                   args.arch)  # fmt: skip
        texts = make_texts(args.texts, args.min_words, args.max_words)
        scorer = scorer_section(model_dir, args.device, texts, args.batch_sizes, args.dtype)
        http_section(scorer, texts)
        if args.steps > 0:
            training_section(model_dir, args.device, args.steps, args.completion_length)
    return 0


if __name__ == "__main__":
    sys.exit(main())
