"""No hand-kept list of recipes outside the registry (issue 34 item 2): what a recipe is (its reference section, its
testbed claim and scale, its trainer) is declared on its `Recipe`, so adding a recipe means one registration, and
nothing elsewhere silently leaves it out.

The formulation: parse every module of the package (`ast`, so comments and docstrings do not count) and look at every
literal collection of strings, a tuple, list or set, and the keys of a dict. One of three or more strings that are all
registered recipe names is a hand-kept list of recipes, and fails this test, wherever it is. Two are allowed (a recipe
and its variant named together, `("dler", "da-dler")`), and so is a collection that mixes in other strings: names that
are both a recipe's and something else's (the testbed's prompt formats `l1-max`, `hbpo`, `saber` beside `l1` and
`saber-unlimited`; a check key) would otherwise read as recipes. A list built at run time from the registry is not a
literal and never matches; a name built from parts would escape this test, as it escapes a grep. `ALLOWED` holds the
one selection that is a user's choice rather than a property of the recipes it names.
"""

import ast
import importlib
import json
import os
import pkgutil
import subprocess
import sys

import pytest

from trl_efficient.recipes import RECIPES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "trl_efficient")
# (module, names): selections made for the user, not properties of the recipes
ALLOWED = {("testbed/trl_efficient_testbed/cli.py", ("grpo", "kimi", "shorter-better"))}  # `testbed compare`'s default


def _string_collections(tree: ast.AST):
    """(line, strings) for every tuple, list and set literal of the tree, and every dict literal's keys."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [key for key in node.keys if key is not None]
        else:
            continue
        strings = [item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]
        if strings and len(strings) == len(items):
            yield node.lineno, strings


def hand_kept_lists(root: str = PACKAGE, names=None) -> list[str]:
    names = set(RECIPES.names() if names is None else names)
    found = []
    for dirpath, _, files in os.walk(root):
        for filename in sorted(files):
            if not filename.endswith(".py"):
                continue
            path = os.path.join(dirpath, filename)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            module = os.path.relpath(path, ROOT)
            for line, strings in _string_collections(tree):
                if len(set(strings)) >= 3 and names.issuperset(strings) and (module, tuple(strings)) not in ALLOWED:
                    found.append(f"{module}:{line}: {sorted(set(strings))}")
    return found


def test_no_module_keeps_a_list_of_recipe_names():
    found = hand_kept_lists()
    assert not found, "declare it on the Recipe instead of listing recipes by name:\n" + "\n".join(found)


def test_the_scan_finds_a_list_tuple_set_and_dict_keys(tmp_path):
    (tmp_path / "m.py").write_text(
        '"""("grpo", "kimi", "laser") in a docstring is not a list."""\n'
        'A = ("grpo", "kimi", "laser")\n'
        'B = {"dler": 1, "da-dler": 2, "hbpo": 3}\n'
        'C = ["dler", "da-dler", "not-a-recipe"]\n'
        'D = {"saber", "asrr", "l1-max"}\n'
    )
    found = hand_kept_lists(str(tmp_path), RECIPES.names())
    assert [entry.split(":")[1] for entry in found] == ["2", "3", "5"], found  # C mixes in a name that is no recipe


# --- issue 46: registration is found, not listed, and does not depend on what the caller imported ----------------

PROVIDERS = ("trl_efficient/methods/__init__.py", "trl_efficient/recipes/__init__.py")


def _sibling_imports(path: str) -> list[str]:
    """The modules of `path`'s own package that `path` imports by name (`from . import x`, `from .x import y`)."""
    package = os.path.basename(os.path.dirname(path))
    siblings = {name[:-3] for name in os.listdir(os.path.dirname(path)) if name.endswith(".py")} | {
        name
        for name in os.listdir(os.path.dirname(path))
        if os.path.isfile(os.path.join(os.path.dirname(path), name, "__init__.py"))
    }
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            named = [alias.name for alias in node.names] if node.module is None else [node.module.split(".")[0]]
            found += [name for name in named if name in siblings]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith(f"trl_efficient.{package}.")]
    return found


@pytest.mark.parametrize("path", PROVIDERS)
def test_a_provider_package_keeps_no_list_of_its_modules(path):
    # `recipes/__init__.py` re-exports the registry's names (`from .registry import RECIPES, ...`): one module, the
    # registry itself, never the family modules; `methods/__init__.py` imports none
    allowed = {"registry"} if path.startswith("trl_efficient/recipes") else set()
    assert set(_sibling_imports(os.path.join(ROOT, path))) <= allowed
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        assert "import_submodules(__name__, __path__)" in f.read()


@pytest.mark.parametrize("package", ["trl_efficient.methods", "trl_efficient.recipes"])
def test_every_module_of_a_provider_is_imported(package):
    module = importlib.import_module(package)
    files = sorted(info.name for info in pkgutil.iter_modules(module.__path__))
    assert len(files) > 10 and [name for name in files if f"{package}.{name}" not in sys.modules] == []


def test_the_scan_of_an_init_finds_a_hand_kept_module_list(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    for name in ("a", "b", "registry"):
        (package / f"{name}.py").write_text("")
    (package / "__init__.py").write_text("from . import a, b  # noqa\nfrom .registry import X\nimport os\n")
    assert _sibling_imports(str(package / "__init__.py")) == ["a", "b", "registry"]


def test_discovery_imports_a_new_module_in_sorted_order(tmp_path, monkeypatch):
    """A module dropped into a provider package registers with no edit elsewhere, in sorted order."""
    from trl_efficient.core.registry import Registry, import_submodules

    package = tmp_path / "plugpkg46"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from trl_efficient.core.registry import import_submodules\nimport_submodules(__name__, __path__)\n"
    )
    (package / "reg.py").write_text("from trl_efficient.core.registry import Registry\nR = Registry('thing')\n")
    for name in ("zeta", "alpha", "mid"):
        (package / f"{name}.py").write_text(f"from .reg import R\nR.register({name!r}, object())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    lazy = Registry("thing view", providers=("plugpkg46",))
    assert not lazy.loaded and "plugpkg46" not in sys.modules  # creating a registry imports nothing
    assert "nothing" not in lazy and lazy.loaded  # the miss imported the provider, once
    reg = importlib.import_module("plugpkg46.reg").R
    assert list(reg._entries) == ["alpha", "mid", "zeta"]  # sorted module order, not file-creation order
    assert import_submodules("plugpkg46", [str(package)]) == ["alpha", "mid", "reg", "zeta"]
    for name in [m for m in sys.modules if m.startswith("plugpkg46")]:
        monkeypatch.delitem(sys.modules, name)


def test_a_registry_fills_itself_however_the_config_class_was_imported():
    """`from trl_efficient.trainer import EfficientGRPOConfig` alone (no `import trl_efficient.methods`) accepts the
    method layer's names: the registries import their provider on the first miss (issue 46)."""
    code = """
import json, sys
from trl_efficient.trainer import EfficientGRPOConfig
before = "trl_efficient.methods" in sys.modules
args = dict(output_dir="/tmp/unused-46", use_cpu=True, bf16=False, report_to="none", max_steps=4,
            per_device_train_batch_size=4, num_generations=4)
hbpo = EfficientGRPOConfig(advantage_estimator="hbpo", rollout_plan="curriculum", **args)
dot = EfficientGRPOConfig(completion_filter="dot", prompt_sampler="lspo", **args)
try:
    EfficientGRPOConfig(advantage_estimator="no-such-estimator", **args)
    refused = ""
except ValueError as err:
    refused = str(err)
print(json.dumps({"before": before, "hbpo": [hbpo.advantage_estimator, hbpo.rollout_plan],
                  "dot": [dot.completion_filter, dot.prompt_sampler], "refused": refused}))
"""
    env = {**os.environ, "PYTHONPATH": ROOT, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["before"] is False  # nothing imported the method layer beforehand
    assert seen["hbpo"] == ["hbpo", "curriculum"] and seen["dot"] == ["dot", "lspo"]
    assert "no-such-estimator" in seen["refused"] and "'hbpo'" in seen["refused"]  # the choices include the methods'
