"""`reward_kwargs` in the config (YAML / command line) reaches a recipe's reward builders over the recipe's own
`RewardSpec` kwargs; a builder the recipe does not use is a one-line error."""

import json
from types import SimpleNamespace

import pytest
from helpers import tiny_cli_args

from trl_efficient.api.training import parse_train_args
from trl_efficient.recipes import get_recipe


def test_config_kwargs_override_the_recipe_spec():
    recipe = get_recipe("laser-d")
    (spec,) = recipe.rewards
    assert spec.kwargs["monitor_interval"] == 20  # the paper's interval, in the recipe
    (merged,) = recipe.reward_kwargs(SimpleNamespace(reward_kwargs={"laser_d": {"monitor_interval": 5}}))
    assert merged["monitor_interval"] == 5 and merged["monitor_rollouts"] == spec.kwargs["monitor_rollouts"]
    assert recipe.reward_kwargs(SimpleNamespace(reward_kwargs=None)) == [spec.kwargs]


def test_unknown_builder_is_a_clear_error():
    with pytest.raises(ValueError, match=r"reward_kwargs names \['kimi_length'\], which recipe 'hapo' does not use"):
        get_recipe("hapo").reward_kwargs(SimpleNamespace(reward_kwargs={"kimi_length": {"weight": 1}}))
    with pytest.raises(ValueError, match="must map builder names to dicts"):
        get_recipe("hapo").reward_kwargs(SimpleNamespace(reward_kwargs={"hapo_length": 3}))


def test_command_line_reward_kwargs_build_the_reward(tmp_path):
    args = tiny_cli_args(tmp_path, reward_kwargs=json.dumps({"hapo_length": {"variant": "linear"}}))
    script, _, config = parse_train_args(["--config", "configs/hapo.yaml", *args])
    assert config.reward_kwargs == {"hapo_length": {"variant": "linear"}}
    funcs, _ = get_recipe("hapo").build_reward_funcs(config, None)
    assert [getattr(f, "variant", None) for f in funcs][-1] == "linear"


def test_reward_kwargs_are_checked_against_the_factory_signature():
    """Every builder's valid keys come from its factory's signature (plus `also_receives`), never a hand list: a
    misspelled key is refused with the valid names, and every recipe's own `RewardSpec` kwargs pass the same check."""
    import inspect

    from trl_efficient.recipes import RECIPES
    from trl_efficient.recipes.registry import REWARD_BUILDERS, check_reward_kwargs, reward_kwargs_receivers

    refused = 0
    for name in REWARD_BUILDERS.names():
        receivers = reward_kwargs_receivers(name)
        takes_any = any(
            p.kind is inspect.Parameter.VAR_KEYWORD for r in receivers for p in inspect.signature(r).parameters.values()
        )
        if takes_any:  # e.g. think_format_reward(completions, **kwargs): no name can be refused
            check_reward_kwargs(name, {"anything": 1})
            continue
        first = next(p for p in inspect.signature(receivers[0]).parameters if p != "tokenizer")
        check_reward_kwargs(name, {first: None, "weight": 0.5})  # a real parameter and the spec's weight pass
        with pytest.raises(ValueError, match=rf"unknown argument\(s\) \['{first}_typo'\] for reward builder '{name}'"):
            check_reward_kwargs(name, {f"{first}_typo": 1})
        refused += 1
    assert refused >= len(REWARD_BUILDERS.names()) - 1  # only think_format takes **kwargs
    for recipe_name in RECIPES.names():
        for spec in RECIPES.get(recipe_name).rewards:
            check_reward_kwargs(spec.builder, spec.kwargs)


def test_laser_d_monitor_settings_are_valid_reward_kwargs():
    """LASER-D's builder hands the monitor's settings to `LaserMonitor` (`also_receives`): accepted, and listed."""
    from trl_efficient.recipes.registry import check_reward_kwargs

    check_reward_kwargs("laser_d", {"monitor_interval": 5, "alpha": 0.5})
    with pytest.raises(ValueError, match=r"valid names: \[.*'monitor_interval'.*\]"):
        check_reward_kwargs("laser_d", {"monitor_intervall": 5})
