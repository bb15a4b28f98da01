"""LASER-D and LASER-DE recipes (methods.md §7, arXiv 2505.15612): the LASER step reward with per-difficulty-bucket
targets from a periodic monitoring pass (`trl_efficient.methods.laser`).

Reward builders `laser_d` / `laser_de` build the reward together with its `LaserMonitor` (the monitor is owned by
the reward, which forwards the stateful-component contract to it: checkpointed state, the `laser_target_<bucket>`
columns, `attach` registering the monitor as a callback). The monitor's settings are the builders' keyword
arguments (`RewardSpec.kwargs`), so they live in the recipe, and a run changes them with the config's
`reward_kwargs` (e.g. `--reward_kwargs '{"laser_d": {"monitor_interval": 10}}'`); the grid cap defaults to
`max_completion_length`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.lengths import LengthMeter
from ..rewards.laser import get_laser_d_reward
from .registry import LASER_SECTION, Recipe, RewardSpec, register_recipe, reward_builder

_MONITOR_KEYS = (
    "monitor_interval",
    "monitor_prompts",
    "monitor_rollouts",
    "grid_lower",
    "grid_step",
    "grid_cap",
    "multipliers",
    "seed",
    "batch_size",
)

# methods.md §7: monitor every 20 steps, 8 rollouts, grid lb 2048 step 1024 (up to the cap); 64 monitor prompts is
# the proposed default for small runs (paper 500).
LASER_D_MONITOR = {
    "monitor_interval": 20,
    "monitor_prompts": 64,
    "monitor_rollouts": 8,
    "grid_lower": 2048,
    "grid_step": 1024,
}


def _declare(name: str, paper: str, exploration: bool) -> None:
    @reward_builder(
        name,
        get_laser_d_reward,
        paper,
        whole_groups=True,
        receives=("length",),
        # the monitor's settings (_MONITOR_KEYS) are builder kwargs too; a reference: the monitor is a trainer part
        also_receives=("trl_efficient.methods.laser:LaserMonitor",),
    )
    def build(args, length_unit: str, length_scope: str, tokenizer, **kwargs) -> Callable:
        meter = LengthMeter(length_unit, length_scope, tokenizer)
        monitor_kwargs = {k: kwargs.pop(k) for k in _MONITOR_KEYS if k in kwargs}
        from ..methods.laser import LaserMonitor

        monitor = LaserMonitor(**monitor_kwargs, meter=meter)
        return get_laser_d_reward(exploration=exploration, monitor=monitor, length_unit=length_unit,
                                  length_scope=length_scope, tokenizer=tokenizer, **kwargs)  # fmt: skip

    build.__doc__ = (
        f"`{name}` builder: `get_laser_d_reward(exploration={exploration})` with its `LaserMonitor` (monitor kwargs: "
        + ", ".join(_MONITOR_KEYS)
        + "; the rest go to the reward)."
    )


_declare("laser_d", "LASER-D, arXiv:2505.15612 (step reward, per-bucket targets from a monitoring pass)", False)
_declare("laser_de", "LASER-DE, arXiv:2505.15612 (LASER-D + alpha for long non-repetitive wrong answers)", True)

_PROPOSED = (
    "LASER-D monitor: 64 prompts x 8 rollouts (paper 500 x 8), drawn once with the run's seed from the training set",
    "LASER-D grid: lb 2048, step 1024 up to max_completion_length, which is always the last grid point",
    "LASER-D monitor generation with transformers generate (also under use_vllm)",
)


register_recipe(
    Recipe(
        name="laser-d",
        section=LASER_SECTION,
        method="LASER-D (difficulty-aware length step reward)",
        description="LASER step reward with a target L_k per difficulty bucket, chosen every 20 steps from the length "
        "coverage of a monitoring pass (§7).",
        rewards=(RewardSpec("laser_d", kwargs=dict(LASER_D_MONITOR)),),
        proposed_defaults=_PROPOSED,
    )
)
register_recipe(
    Recipe(
        name="laser-de",
        section=LASER_SECTION,
        method="LASER-DE (LASER-D + exploration bonus)",
        description="LASER-D, plus +alpha for wrong answers longer than L_k that are not repetitive (§7).",
        rewards=(RewardSpec("laser_de", kwargs=dict(LASER_D_MONITOR)),),
        proposed_defaults=_PROPOSED,
    )
)
