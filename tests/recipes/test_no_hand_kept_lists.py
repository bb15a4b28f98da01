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
import os

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
