"""Shared testbed fixtures."""

import os

import pytest


@pytest.fixture(scope="module")
def small_base(tmp_path_factory):
    """The `testbed:small` base model (trained in seconds), cached in a fresh `TRL_EFFICIENT_CACHE` per test module
    (the variable is restored afterwards)."""
    root = str(tmp_path_factory.mktemp("tbcache"))
    old = os.environ.get("TRL_EFFICIENT_CACHE")
    os.environ["TRL_EFFICIENT_CACHE"] = root
    from trl_efficient.overthinking.base import resolve_base_model

    yield resolve_base_model("testbed:small")
    if old is None:
        os.environ.pop("TRL_EFFICIENT_CACHE", None)
    else:
        os.environ["TRL_EFFICIENT_CACHE"] = old
