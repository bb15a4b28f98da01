"""Fixtures for the significance scorer and Bingo tests: a tiny LLMLingua-2-format token classifier built offline
(docs/testing.md §9) and a deterministic word scorer."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # bingo_testing.py

from bingo_testing import CLASSIFIER_WORDS, build_tiny_token_classifier  # noqa: E402


@pytest.fixture(scope="session")
def tiny_classifier_dir(tmp_path_factory):
    # the directory name must contain "bert-base-multilingual-cased" for llmlingua (docs/testing.md §8)
    path = tmp_path_factory.mktemp("scorer") / "tiny-bert-base-multilingual-cased"
    build_tiny_token_classifier(str(path), CLASSIFIER_WORDS)
    return str(path)


@pytest.fixture(scope="session")
def tiny_scorer(tiny_classifier_dir):
    from trl_efficient.significance import LLMLingua2Scorer

    return LLMLingua2Scorer(tiny_classifier_dir, device="cpu", cache_size=0)
