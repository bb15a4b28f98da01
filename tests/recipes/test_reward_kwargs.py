"""`reward_kwargs` in the config (YAML / command line) reaches a recipe's reward builders over the recipe's own
`RewardSpec` kwargs; a builder the recipe does not use is a one-line error."""

import json
from types import SimpleNamespace

import pytest
from helpers import tiny_cli_args

from trl_efficient.cli import parse_train_args
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
