"""Tiny offline models and tokenizers (`tiny:<arch>[-<hidden>]` model names, built in-process), for quick runs with no
download and for the test suite. Above `data` and `significance`, below everything that trains."""
