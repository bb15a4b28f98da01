# Root conftest: applies to the doctests under trl_efficient/ as well as tests/.
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DS_ACCELERATOR", "cpu")  # DeepSpeed prints its accelerator notice to stdout otherwise

# Register every method family once, under its own module names, before the doctest collector imports a module of
# it: `import trl_efficient` alone loads nothing, and a method module the collector imported first (importlib mode)
# would run twice and register its names twice (tests/test_doctests_alone.py).
import trl_efficient.methods  # noqa: E402,F401

# The speed scripts' shared work counters live beside them (perf/work.py, imported as `work`, as the scripts run)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "perf"))
