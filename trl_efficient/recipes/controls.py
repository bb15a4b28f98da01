"""Two negative controls as recipes: `constant-penalty` (a fixed per-token length penalty) and
`placebo` (a zero-mean reward term that carries no information about length or correctness).

They claim nothing; they are what a comparison of methods must tell apart from a method. A check that
`constant-penalty` passes credits "a length penalty shortens", not the method; a check that `placebo` (or `grpo`)
passes is broken.
"""

from ..rewards.controls import get_constant_length_penalty, get_placebo_reward
from .registry import Recipe, RewardSpec, register_recipe, reward_builder

reward_builder(
    "constant_length",
    get_constant_length_penalty,
    "negative control: a fixed per-token penalty -alpha L (no paper)",
    needs=(),
    receives=("length",),
)
reward_builder(
    "placebo",
    get_placebo_reward,
    "negative control: zero-mean noise keyed by the completion's ids (no paper)",
    needs=(),
)


register_recipe(
    Recipe(
        name="constant-penalty",
        method="Constant length penalty (negative control)",
        description="r = 1[correct] - alpha L with a fixed alpha (1/cap in a comparison at cap C): the simplest length "
        "penalty, which a method check must beat to credit more than 'a length penalty shortens'.",
        rewards=(RewardSpec("correctness"), RewardSpec("constant_length")),
        proposed_defaults=("constant-penalty alpha 1/4096 per token (a comparison at cap C sets 1/C)",),
    )
)
register_recipe(
    Recipe(
        name="placebo",
        method="Placebo reward (negative control)",
        description="r = 1[correct] + u, u uniform in [-0.1, 0.1] keyed by the completion's token ids: zero mean, "
        "no information about length or correctness. A check it passes is a broken check.",
        rewards=(RewardSpec("correctness"), RewardSpec("placebo")),
        proposed_defaults=("placebo spread 0.1 (about constant-penalty's within-group spread in the synthetic world)",),
    )
)
