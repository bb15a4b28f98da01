"""Tiny offline models and tokenizers (`tiny:<arch>[-<hidden>]` model names, built in-process), for quick runs with no
download and for the test suite. Above `data` and `significance`, below everything that trains.

Importing this package registers the `tiny:` model-name scheme (`tiny.py`) in `trl_efficient.core.models`."""

from . import tiny  # noqa: F401  (registers the tiny: scheme)
