"""The doctests of a method module pass when that module is the only thing collected (`pytest
trl_efficient/methods/gfpo.py`, as docs/architecture.md's walkthrough runs them): the root conftest registers the
method layer first, so the collector does not import the module a second time and register its names twice."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_method_modules_doctests_run_alone():
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "trl_efficient/methods/gfpo.py"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "error" not in proc.stdout.lower()
