"""The TRL border (`trl_efficient/trainer/trl_internals.py`): the installed TRL has every private symbol the table
names, with the signature it was read with; a mismatch fails the trainer's start in one line; and no module outside
the border reads TRL's private state."""

import inspect
import pathlib
import re

import pytest
import trl
from trl import GRPOTrainer

from trl_efficient.trainer import trl_internals
from trl_efficient.trainer.trl_internals import (
    GENERATE_OUTPUT_KEYS,
    PRIVATE_ATTRIBUTES,
    PRIVATE_CLASS_ATTRIBUTES,
    PRIVATE_METHODS,
    TRL_ATTRIBUTES,
    TrlInternalsError,
    check_trl,
)

PACKAGE = pathlib.Path(trl_internals.__file__).resolve().parent.parent


def test_installed_trl_is_the_version_the_table_was_read_from():
    assert trl.__version__.startswith(trl_internals.TRL_READ_FROM.rsplit(".", 1)[0])
    check_trl()


@pytest.mark.parametrize("name", sorted(PRIVATE_METHODS))
def test_each_private_method_exists_with_its_signature(name):
    owner, params, _ = PRIVATE_METHODS[name]
    cls = trl_internals._owner(owner)
    assert name in vars(cls), f"{owner}.{name} is not defined on {owner} itself"
    assert tuple(inspect.signature(getattr(cls, name)).parameters)[: len(params)] == params


@pytest.mark.parametrize("name", sorted(PRIVATE_ATTRIBUTES))
def test_each_private_attribute_is_set_by_its_owner(name):
    owner, _ = PRIVATE_ATTRIBUTES[name]
    assert f"self.{name} =" in inspect.getsource(trl_internals._owner(owner).__init__)


@pytest.mark.parametrize("name", sorted(PRIVATE_CLASS_ATTRIBUTES))
def test_each_private_class_attribute_is_defined_by_its_owner(name):
    assert name in vars(trl_internals._owner(PRIVATE_CLASS_ATTRIBUTES[name][0]))


def test_the_output_keys_dler_moves_are_the_borders_and_trl_returns_them():
    from trl_efficient.methods import dler

    source = inspect.getsource(trl_internals._owner("GRPOTrainer")._generate_and_score_completions)
    assert all(f'"{key}"' in source for key in GENERATE_OUTPUT_KEYS)
    assert {**dler._PAD_VALUES, **dict.fromkeys(dler._RECOMPUTED)} == GENERATE_OUTPUT_KEYS


def _check_trl_error() -> str:
    """`check_trl()`'s error message, run afresh (it checks once per process) and cleared again after."""
    check_trl.cache_clear()
    try:
        with pytest.raises(TrlInternalsError) as err:
            check_trl()
    finally:
        check_trl.cache_clear()
    return str(err.value)


def test_a_class_attribute_or_output_key_that_moved_fails_in_one_line(monkeypatch):
    monkeypatch.delattr(trl_internals._owner("GRPOTrainer"), "_paper")
    monkeypatch.setitem(GENERATE_OUTPUT_KEYS, "no_such_key", 0)
    message = _check_trl_error()
    assert "\n" not in message
    assert "class attribute _paper" in message and "['no_such_key']" in message


def test_a_moved_symbol_fails_in_one_line_naming_it(monkeypatch):
    def renamed(self, prompt_ids, images, multimodal_fields, n):  # a TRL that renamed num_generations -> n
        return None

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", renamed)
    message = _check_trl_error()
    assert "\n" not in message
    assert "GRPOTrainer._generate_single_turn" in message and f"trl{trl_internals.TRL_SUPPORTED}" in message


def test_the_surface_is_what_the_table_names():
    # 12 methods (9 of GRPOTrainer, 3 of transformers' Trainer) + 3 attributes + 3 class attributes
    # + 22 undocumented attributes + 10 output keys
    assert len(trl_internals.private_surface()) == 50


@pytest.mark.parametrize("name", sorted(TRL_ATTRIBUTES))
def test_each_undocumented_attribute_is_set_by_grpo_trainers_init(name):
    assert f"self.{name} =" in inspect.getsource(trl_internals._owner(TRL_ATTRIBUTES[name][0]).__init__)


def test_an_undocumented_attribute_that_moved_fails_in_one_line(monkeypatch):
    monkeypatch.setitem(TRL_ATTRIBUTES, "no_such_attribute", ("GRPOTrainer", "a TRL that renamed it"))
    message = _check_trl_error()
    assert "\n" not in message and "no longer sets self.no_such_attribute" in message


def _trl_init_attributes() -> set[str]:
    """The public-looking attributes `GRPOTrainer.__init__` sets (`self.x = ...`), which are not members of the class
    (methods, properties) nor set by transformers' `Trainer` (its documented state: `model`, `args`, ...)."""
    import transformers.trainer

    pattern = r"self\.([a-zA-Z]\w*)\s*(?::[^=\n]*)?=(?!=)"
    grpo_init = set(re.findall(pattern, inspect.getsource(trl_internals._owner("GRPOTrainer").__init__)))
    trainer_sets = set(re.findall(pattern, inspect.getsource(transformers.trainer)))
    return grpo_init - trainer_sets - set(dir(GRPOTrainer))


def test_the_undocumented_attributes_read_are_the_tables():
    """Every `self.x` in a class of ours that subclasses `GRPOTrainer`, and every `trainer.x` anywhere in the package,
    that names an attribute `GRPOTrainer.__init__` sets is in `TRL_ATTRIBUTES`, and every entry is read somewhere (no
    stale entry); `generation_config`, the one we write, is reached only through `generation_config_override`."""
    import importlib

    undocumented = _trl_init_attributes()
    assert {"num_generations", "generation_config", "ref_model"} <= undocumented  # the scan sees TRL's __init__
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "trl_internals.py" or path.parts[-2] not in ("trainer", "methods", "eval", "hub"):
            continue
        where = path.relative_to(PACKAGE).as_posix()
        texts = [(path.read_text(), r"\btrainer\.([a-zA-Z]\w*)")]  # a trainer held by a callback, a helper
        module = importlib.import_module("trl_efficient." + where[:-3].replace("/", ".").removesuffix(".__init__"))
        for obj in vars(module).values():  # our trainer classes defined in this module: their `self.x`
            if isinstance(obj, type) and issubclass(obj, GRPOTrainer) and obj.__module__ == module.__name__:
                texts.append((inspect.getsource(obj), r"\bself\.([a-zA-Z]\w*)"))
        for text, pattern in texts:
            for name in set(re.findall(pattern, text)) & undocumented:
                found.setdefault(name, set()).add(where)
    expected = set(TRL_ATTRIBUTES) - {"generation_config"}  # reached only through the border's accessor
    assert set(found) == expected, (sorted(set(found) - expected), sorted(expected - set(found)))
    users = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
             if "generation_config_override(" in path.read_text()}  # fmt: skip
    assert users == {"trainer/trl_internals.py", "trainer/trainer.py"}  # the budget forcing's phases


def _trl_private_names():
    """TRL's private surface: the private class members of `GRPOTrainer` (and what it inherits), and every private
    instance attribute that `GRPOTrainer` or transformers' `Trainer` assigns (`self._x = ...` in their modules: set
    in `__init__` or later, so not in `dir(GRPOTrainer)`)."""
    import transformers.trainer
    import trl.trainer.grpo_trainer

    grpo = {n for n in dir(GRPOTrainer) if n.startswith("_") and not n.startswith("__")}
    assigned = set()
    for module in (trl.trainer.grpo_trainer, transformers.trainer):
        assigned |= set(re.findall(r"self\.(_[a-zA-Z]\w*)\s*(?::[^=\n]*)?=(?!=)", inspect.getsource(module)))
    assert {"_buffered_inputs", "_step", "_metrics"} <= assigned  # instance attributes, absent from dir(GRPOTrainer)
    return grpo | assigned | set(PRIVATE_ATTRIBUTES) | set(PRIVATE_METHODS) | set(PRIVATE_CLASS_ATTRIBUTES)


def test_nothing_outside_the_border_uses_an_unlisted_private_symbol():
    """Every `self._x` / `trainer._x` / `super()._x` / `getattr(self, "_x")` naming a TRL private symbol (a class
    member or an instance attribute TRL or transformers' `Trainer` assigns), outside trl_internals.py, is a method the
    table lists (overrides and their `super()` calls); private attributes are read only through the border."""
    private = _trl_private_names()
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "trl_internals.py":
            continue
        text = path.read_text()
        for match in re.finditer(
            r"(?:self|trainer|super\([^)]*\))\.(_[a-zA-Z]\w*)|^    def (_[a-zA-Z]\w*)\(\s*self\b"
            r"|(?:get|has|set)attr\(\s*(?:self|trainer)\s*,\s*[\"'](_[a-zA-Z]\w*)[\"']"
            r"|^    (_[a-zA-Z]\w*)\s*(?::[^=\n]*)?=(?!=)",  # a class attribute set in a class body
            text,
            re.M,
        ):
            name = match.group(1) or match.group(2) or match.group(3) or match.group(4)
            if name in private:
                found.setdefault(name, set()).add(path.relative_to(PACKAGE).as_posix())
    allowed = set(PRIVATE_METHODS) | set(PRIVATE_CLASS_ATTRIBUTES)
    assert {"_tag_names", "_name", "_paper"} <= set(found)  # the scan sees our trainers' class attributes
    assert set(found) <= allowed, sorted(set(found) - allowed)
    assert not set(found) & set(PRIVATE_ATTRIBUTES)


@pytest.mark.parametrize("where", ["trl.GRPOTrainer", "trl.trainer.grpo_trainer.GRPOTrainer"])
def test_the_check_inspects_the_class_we_subclass_not_the_rebound_name(where, monkeypatch, tiny_model_dir, tmp_path):
    """Unsloth rebinds TRL's `GRPOTrainer` to its own trainer, and a harness running TRL's GRPO tests against our
    subclass rebinds it to ours: the check must still read TRL's own class (in our MRO), whose `__init__` sets
    `_metrics`, not the rebound name's (ours, which sets none of TRL's private attributes)."""
    import importlib

    from helpers import RecordingTrainer, make_dataset, tiny_config

    from trl_efficient.rewards import correctness_reward

    class Harness(RecordingTrainer):  # what a harness hands TRL's tests as "GRPOTrainer"
        pass

    module, name = where.rsplit(".", 1)
    monkeypatch.setattr(importlib.import_module(module), name, Harness)
    check_trl.cache_clear()  # an earlier test may have checked already (once per process)
    try:
        trainer = Harness(
            model=tiny_model_dir,
            reward_funcs=[correctness_reward],
            args=tiny_config(tmp_path, max_steps=1),
            train_dataset=make_dataset(8),
        )
        trainer.train()
    finally:
        check_trl.cache_clear()
    assert trainer.state.global_step == 1 and len(trainer.records) == 1  # it started and trained one step


def test_a_name_rebound_to_a_foreign_trainer_is_named_unless_ours_subclasses_trl(monkeypatch):
    """Unsloth's trainer is a copy of TRL's source, not a subclass: with the name rebound to it, our trainer's MRO
    still holds TRL's class (checked); with no trainer class to go by, the error names the rebinding."""
    import trl.trainer.grpo_trainer

    from trl_efficient.trainer import EfficientGRPOTrainer

    class UnslothGRPOTrainer:  # stands for unsloth_compiled_cache.UnslothGRPOTrainer
        pass

    monkeypatch.setattr(trl.trainer.grpo_trainer, "GRPOTrainer", UnslothGRPOTrainer)
    monkeypatch.setattr(trl, "GRPOTrainer", UnslothGRPOTrainer)
    check_trl.cache_clear()
    try:
        check_trl(EfficientGRPOTrainer)
        with pytest.raises(TrlInternalsError, match=r"grpo_trainer\.GRPOTrainer is rebound to .*UnslothGRPOTrainer"):
            check_trl()
    finally:
        check_trl.cache_clear()
