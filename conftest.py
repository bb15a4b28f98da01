# Root conftest: applies to the doctests under trl_efficient/ as well as tests/.
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DS_ACCELERATOR", "cpu")  # DeepSpeed prints its accelerator notice to stdout otherwise

import trl_efficient  # noqa: E402,F401  (register every method family once, before doctests import modules)
