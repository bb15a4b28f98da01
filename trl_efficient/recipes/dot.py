"""Recipe `dot`: DOT, Dynamic Outlier Truncation (arXiv 2601.03969, methods.md §21), run by
`trl_efficient.methods.dot.DOTTrainer`.

Values taken from the paper or its code cite methods.md; our own choices are listed in `proposed_defaults`.
"""

from __future__ import annotations

from .registry import Recipe, RewardSpec, Section, register_recipe

register_recipe(
    Recipe(
        name="dot",
        section=Section(21, "DOT: dynamic outlier truncation", ("U-rara/DOT",), papers=("2601.03969",)),
        method="DOT (outlier truncation, re-scoring, predictive dynamic sampling)",
        description="In all-correct groups, responses longer than mean + 3 std by >= 32 tokens are cut there and "
        "re-scored; zero-variance groups are refilled with a predicted oversampling factor (§21).",
        rewards=(RewardSpec("correctness"),),
        config_overrides={
            "completion_filter": "dot",
            # §21 [code]: length_truncation.py defaults; run_dot.sh passes max_oversample_factor 5.0
            "filter_kwargs": {
                "success_threshold": 1.0,
                "alpha": 3.0,
                "margin": 32,
                "history_window": 20,
                "initial_factor": 1.5,
                "min_factor": 1.2,
                "max_factor": 5.0,
                "max_generation_batches": 2,
            },
            "correctness_reward": "correctness_reward",
            "epsilon_high": 0.28,
            "loss_type": "dapo",
        },
        proposed_defaults=(
            "TRL's dapo loss with clip-higher 0.28 instead of DOT's KL-Cov loss (left out)",
            "predictive oversampling as one refill pass of floor(B*f) - B prompts after the dataloader's batch, only "
            "when that batch falls short (at most 2 generation batches); a shortfall is masked, not padded",
        ),
        trainer_class="trl_efficient.methods.dot:DOTTrainer",
    )
)
