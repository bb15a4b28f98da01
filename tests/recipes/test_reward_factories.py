"""Every registered reward factory imports from `trl_efficient.rewards` (issue 34): docs/recipes.md's plain-TRL section
and its reward table name factories without a module, so each one must be there, the one its builder calls; the
ones whose modules load torch or transformers are resolved lazily (PEP 562), so `import trl_efficient.rewards` stays
light."""

import importlib
import os
import re
import subprocess
import sys

import pytest

import trl_efficient.rewards
from trl_efficient.recipes import REWARD_INFO
from trl_efficient.recipes.registry import reward_kwargs_receivers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("name", sorted(REWARD_INFO))
def test_every_registered_factory_is_in_trl_efficient_rewards(name):
    declared, factory_name = REWARD_INFO[name].factory, REWARD_INFO[name].factory_name
    factory = getattr(trl_efficient.rewards, factory_name, None)
    assert factory is not None, f"builder {name!r}: {factory_name} cannot be imported from trl_efficient.rewards"
    assert factory is declared is reward_kwargs_receivers(name)[0]  # the very factory the builder's kwargs go to
    assert factory_name in trl_efficient.rewards.__all__ and factory_name in dir(trl_efficient.rewards)
    # defined in the rewards layer (a methods/ module would put a layer above rewards behind its import)
    assert factory.__module__.startswith("trl_efficient.rewards."), factory.__module__


def test_the_docs_reward_table_factories_all_import():
    with open(os.path.join(ROOT, "docs", "recipes.md"), encoding="utf-8") as f:
        readme = f.read()
    table = readme.split("<!-- rewards-table:start -->", 1)[1].split("<!-- rewards-table:end -->", 1)[0]
    factories = re.findall(r"^\| `\w+` \| `(\w+)` \|", table, re.M)
    assert len(factories) == len(REWARD_INFO)  # one row per builder
    namespace = {}
    exec(f"from trl_efficient.rewards import {', '.join(sorted(set(factories)))}", namespace)  # as docs/recipes.md does
    assert all(callable(namespace[f]) for f in factories)


def test_lazy_factories_load_their_module_on_first_use_only():
    script = (
        "import sys, trl_efficient.rewards as r\n"
        "assert 'torch' not in sys.modules and 'trl_efficient.rewards.budgetthinker' not in sys.modules\n"
        "f = r.get_budgetthinker_reward\n"
        "assert f.__module__ == 'trl_efficient.rewards.budgetthinker' and 'torch' not in sys.modules\n"
        "from trl_efficient.rewards import get_laser_d_reward\n"
        "assert not any(m.startswith(('trl_efficient.methods', 'trl_efficient.trainer')) for m in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="get_no_such_reward"):
        trl_efficient.rewards.get_no_such_reward  # noqa: B018
    assert importlib.import_module("trl_efficient.methods.laser").get_laser_d_reward is (
        trl_efficient.rewards.get_laser_d_reward
    )  # the methods module re-exports the one factory
