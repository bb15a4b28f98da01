"""Importing a layer loads that layer and the layers below it, nothing above (pyproject's import-linter contract is
the static half; this is the run-time half): registration is explicit, one place per layer, not an import side
effect of the package root."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UPPER = ("trl_efficient.trainer", "trl_efficient.methods", "trl_efficient.recipes", "trl_efficient.overthinking",
         "trl_efficient.cli", "peft")  # fmt: skip


def _loaded(statement):
    script = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "statement, forbidden",
    [
        ("import trl_efficient", ("trl_efficient.rewards", "trl_efficient.testing", "trl", "torch", *UPPER)),
        ("import trl_efficient.rewards", ("trl_efficient.testing", *UPPER)),
        (
            "import trl_efficient.trainer",
            ("trl_efficient.methods", "trl_efficient.recipes", "trl_efficient.overthinking"),
        ),  # noqa: E501
        # the registry names trainers by reference (Recipe.trainer_class): it loads no method, trainer or torch
        (
            "import trl_efficient.recipes",
            (
                "trl_efficient.methods",
                "trl_efficient.trainer",
                "trl_efficient.overthinking",
                "torch",
                "transformers",
                "peft",
            ),
        ),
    ],
)
def test_a_layer_loads_nothing_above_it(statement, forbidden):
    loaded = _loaded(statement)
    assert sorted(m for m in forbidden if m in loaded) == []


def test_each_layer_registers_its_parts_when_imported():
    import trl_efficient.methods  # noqa: F401
    import trl_efficient.overthinking  # noqa: F401
    import trl_efficient.testing  # noqa: F401
    from trl_efficient.core.models import MODEL_SCHEMES
    from trl_efficient.recipes import RECIPES
    from trl_efficient.trainer import ADVANTAGE_ESTIMATORS

    assert "hbpo" in ADVANTAGE_ESTIMATORS and "dler" in RECIPES  # methods registers its estimators, recipes its own
    assert {"tiny", "testbed"} <= set(MODEL_SCHEMES.names())


def test_root_exposes_the_trainer_lazily():
    import trl_efficient
    from trl_efficient.trainer import EfficientGRPOConfig

    assert trl_efficient.EfficientGRPOConfig is EfficientGRPOConfig
    with pytest.raises(AttributeError):
        trl_efficient.no_such_name  # noqa: B018


def test_architecture_module_map_lists_every_module():
    """docs/architecture.md's module map names every module of the package (`layer/module.py`, or `layer.py`)."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    package = root / "trl_efficient"
    doc = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## Module map", 1)[1].split("\n## ", 1)[0]
    modules = [path.relative_to(package).as_posix() for path in package.rglob("*.py")]
    missing = [m for m in modules if f"`{m}`" not in section]
    assert len(modules) > 100 and not missing, f"docs/architecture.md's module map lacks {missing}"
