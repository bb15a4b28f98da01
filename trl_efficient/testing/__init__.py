"""Tiny offline models and tokenizers (`tiny:<arch>[-<hidden>]` model names, built in-process), for quick runs with no
download and for the test suite. Above `data` and `significance`, below everything that trains.

Importing this package registers the `tiny:` model-name scheme (`tiny.py`) and the `smollm2:` scheme (`smollm.py`: a
real pretrained chat model converted from a PyPI wheel) in `trl_efficient.core.models`."""

from . import smollm, tiny  # noqa: F401  (register the smollm2: and tiny: schemes)
