"""Protocol 4's rows (issue 33 item 5): ProRL, BroRL and LISA as rows of the comparison with their own steps, config,
check and negative controls, on panels built by hand (accuracy above the matching control beyond the margin;
accuracy not below it by more than the tolerance), and their run keys (a row's own steps are part of its key, the
committed runs' keys do not move)."""

import numpy as np
import pytest

from trl_efficient_testbed import protocol
from trl_efficient_testbed.checks import CheckInputs, method_check
from trl_efficient_testbed.jobs import plan_job, trained_recipe
from trl_efficient_testbed.stats import Panel
from trl_efficient_testbed.training import TestbedSettings
from trl_efficient_testbed.verdicts import related, score_controls

TASKS = 1000
DIFFICULTY = np.array([1 + i % 8 for i in range(TASKS)])


def _panel(share: float, logs=None, seeds=(0, 1, 2)):
    """Tasks 0 .. share x 1000 - 1 correct on every seed (so two panels differ on a fixed set of tasks)."""
    correct = np.tile((np.arange(TASKS) < round(share * TASKS)).astype(float), (len(seeds), 1))
    metrics = {"correct": correct, "tokens": np.full_like(correct, 100.0)}
    return Panel(list(seeds), DIFFICULTY, metrics, {}, {}, 1, logs or {})


def _inputs(panel, control, name):
    return CheckInputs(panel, control, name, None, 60.0, 400, alpha=0.0079)


def test_prorl_and_brorl_more_accurate_than_their_matching_control():
    for recipe, control in (("prorl", "grpo-kl"), ("brorl", "brorl-n8")):
        assert protocol.matching_control(recipe) == control
        c = method_check(recipe, _inputs(_panel(0.80), _panel(0.70), control))
        # 100 of 1000 tasks right only for the recipe: +0.100, its task-bootstrap spread sqrt(0.09 / 1000) = 0.0095,
        # so the 98.4% low end (z 2.41) is near 0.077, above the margin 0.02
        assert c["held"] is True and c["differences"]["accuracy"][0] == pytest.approx(0.1)
        assert c["differences"]["accuracy"][1] > 0.02
        assert method_check(recipe, _inputs(_panel(0.70), _panel(0.70), control))["held"] is False  # 0 [0, 0]
        missing = method_check(recipe, _inputs(_panel(0.80), None, control))
        assert missing["held"] is None and "has not been trained" in missing["measured"]


def test_prorl_prints_the_training_logs_by_thirds():
    logs = {"reward": [[0.5, 0.5, 0.6, 0.6, 0.7, 0.7]] * 3, "kl": [[0.0, 0.0, 0.02, 0.04, 0.06, 0.08]] * 3}
    stalled = {"reward": [[0.5, 0.5, 0.6, 0.6, 0.6, 0.6]] * 3}
    c = method_check("prorl", _inputs(_panel(0.8, logs), _panel(0.7, stalled), "grpo-kl"))
    # thirds of 6 logged steps: reward (0.5, 0.5), (0.6, 0.6), (0.7, 0.7); kl 0, 0.03, 0.07
    assert "recipe reward 0.5 / 0.6 / 0.7, kl 0 / 0.03 / 0.07" in c["measured"]
    assert "grpo-kl reward 0.5 / 0.6 / 0.6" in c["measured"]


def test_lisa_not_less_accurate_than_full_fine_tuning():
    assert protocol.matching_control("lisa") == "grpo" and trained_recipe("lisa") == "grpo"
    # 20 of 1000 tasks lost: -0.020, spread sqrt(0.02 x 0.98 / 1000) = 0.0044, low end near -0.031 >= -0.04: held
    c = method_check("lisa", _inputs(_panel(0.78), _panel(0.80), "grpo"))
    assert c["held"] is True and c["differences"]["accuracy"][0] == pytest.approx(-0.02)
    assert -0.04 < c["differences"]["accuracy"][1] < -0.02
    # 100 lost: -0.100, high end near -0.077 < -0.04: not held (it loses more than the tolerance)
    assert method_check("lisa", _inputs(_panel(0.70), _panel(0.80), "grpo"))["held"] is False
    # 45 lost: -0.045 [about -0.060, -0.030] straddles -0.04: inconclusive
    assert method_check("lisa", _inputs(_panel(0.755), _panel(0.80), "grpo"))["held"] is None


def test_rows_score_only_the_negative_controls_they_name():
    assert protocol.row_negative_controls("lisa") == [] and related("lisa") == ["grpo"]
    assert protocol.row_negative_controls("kimi") == ["placebo", "constant-penalty", "constant-penalty-half"]
    panels = {"lisa": _panel(0.78), "grpo": _panel(0.80), "placebo": _panel(0.80), "constant-penalty": _panel(0.5)}
    settings = TestbedSettings(bootstrap=200)
    row = {"method_check": method_check("lisa", _inputs(panels["lisa"], panels["grpo"], "grpo"))}
    score_controls("lisa", row, panels, "grpo", 60.0, settings, None)
    assert row["method_check"]["controls"] == {} and "vs_constant_penalty" not in row["method_check"]


def test_unknown_row_check_is_one_line(monkeypatch):
    monkeypatch.setattr(protocol, "row_check", lambda name: "no-such-check")
    with pytest.raises(ValueError, match="unknown check 'no-such-check'"):
        method_check("lisa", _inputs(_panel(0.8), _panel(0.8), "grpo"))


def test_row_settings_and_keys():
    settings = TestbedSettings()
    assert protocol.row_settings("prorl", settings).max_steps == 120
    assert protocol.row_settings("brorl-n8", settings).max_steps == 10
    assert protocol.row_settings("kimi", settings) is settings
    monkey = {"settings": {"max_stepz": 3}}
    with pytest.MonkeyPatch.context() as m:
        m.setattr(protocol, "row_spec", lambda name: monkey)
        with pytest.raises(ValueError, match=r"unknown settings \['max_stepz'\]"):
            protocol.row_settings("x", settings)
    base_id = "/cache/testbed-v2@weights"
    prorl = plan_job("prorl", 0, settings, "/out", base_id)
    control = plan_job("grpo-kl", 0, settings, "/out", base_id)
    # the same recipe and steps, the resets off: the keys differ in the control's name, its config and `trains`
    assert prorl.key["settings"]["max_steps"] == control.key["settings"]["max_steps"] == 120
    assert control.key["trains"] == "prorl" and control.key["config_overrides"] == {"ref_reset_steps": None}
    assert prorl.key["testbed_scale"] == control.key["testbed_scale"]  # a reset every 12 steps for both
    assert prorl.key["testbed_scale"]["config"]["ref_reset_steps"] == 12
    lisa, grpo = plan_job("lisa", 0, settings, "/out", base_id), plan_job("grpo", 0, settings, "/out", base_id)
    assert lisa.key["config_overrides"] == {"lisa_activated_layers": 1, "lisa_interval_steps": 5}
    assert {k: v for k, v in lisa.key.items() if k not in ("recipe", "trains", "config_overrides")} == {
        k: v for k, v in grpo.key.items() if k not in ("recipe", "config_overrides")
    }  # otherwise grpo's key: full fine-tuning with the same settings is its control
    assert "trains" not in grpo.key and grpo.key["settings"]["max_steps"] == 40


def test_cap_controls_train_at_their_recipes_training_cap_under_each_scale_rule():
    """A matching control trained at a recipe's cap (protocol 7) is GRPO at exactly the cap that recipe trains at under
    the scale rule of the comparison's world: world v2's own rules (192 for DLER, 230 for FRUGAL) and world v3's one
    rule (116 for DLER and DA-DLER, 119 for DOT-4K, 227 for FRUGAL); no recipe is left with a control at another
    cap, and a recipe without a training cap of its own has none."""
    from trl_efficient_testbed.scaling import recipe_scale

    seen = set()
    for base_model in ("testbed:v2", "testbed:v3"):
        regime = protocol.scale_regime(base_model)
        for name, entry in protocol.matching_controls().items():
            cap = (entry.get("config") or {}).get("max_completion_length")
            if cap is None or entry.get("scale", regime) != regime:
                continue
            assert trained_recipe(name) == "grpo" and name == f"grpo-cap{cap}"
            for recipe in entry["for"]:
                assert recipe_scale(recipe, 384, 40, base_model).config["max_completion_length"] == cap, (recipe, cap)
                assert protocol.matching_control(recipe, base_model) == name
                seen.add((base_model, recipe))
        for recipe in ("dler", "da-dler", "dot", "frugal", "kimi"):
            trains_at = recipe_scale(recipe, 384, 40, base_model).config.get("max_completion_length", 384)
            assert ((base_model, recipe) in seen) == (trains_at != 384), (base_model, recipe, trains_at)
