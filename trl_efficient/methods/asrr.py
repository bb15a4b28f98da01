"""ASRR, Adaptive Self-Recovery Reasoning ("When to Continue Thinking", arXiv 2505.15400; methods.md §24): the
no-think rollout plan.

Every rollout starts its assistant turn with a closed think block, `ASRR_NO_THINK_PREFIX` (the paper's figure:
`<think> Okay, I think I have finished thinking. </think>`), placed as an assistant **prefill**: for a conversational
prompt the chat template is rendered with the generation prompt and the prefix appended
(`trl_efficient.trainer.rollout.apply_assignment`), so the model continues after `</think>` and may still reason
implicitly in its answer on hard questions. The prefill is part of the prompt: it is neither trained on nor counted in
the completion length (`get_asrr_reward`). All `G` rollouts of a prompt get the same prefix (one prompt subgroup,
K = 1), so TRL's vLLM server de-duplication sees identical prompts.

The reward is `trl_efficient.rewards.get_asrr_reward` (accuracy-gated overlong penalty); the `asrr` recipe
(`trl_efficient/recipes/solve_rate.py`) combines the two. At inference, use the same prefix (`trl-efficient eval
--modes asrr`).

Chat templates that already open the think block in their generation prompt (DeepSeek-R1-Distill ends it with
`<think>\\n`) then show `<think>` twice; pass `rollout_plan_kwargs={"prefix": " Okay, I think I have finished thinking.
</think>"}` to drop the second one (and use the same text at inference).
"""

from __future__ import annotations

from ..prompts import ASRR_NO_THINK_PREFIX
from ..trainer.rollout import ROLLOUT_PLANS, RolloutAssignment, RolloutPlan

__all__ = ["ASRRRolloutPlan"]


@ROLLOUT_PLANS.register("asrr")
class ASRRRolloutPlan(RolloutPlan):
    """Prefill every rollout with ASRR's no-think prefix (the same text for all G rollouts of a prompt).

    >>> plan = ASRRRolloutPlan()
    >>> plan.assign({}, 0, 4, 0, 0).prefill
    '<think> Okay, I think I have finished thinking. </think>'
    >>> plan.num_prompt_subgroups(8), plan.uses_prefill
    (1, True)
    """

    name = "asrr"
    uses_prefill = True

    def __init__(self, prefix: str = ASRR_NO_THINK_PREFIX) -> None:
        if not isinstance(prefix, str) or not prefix.strip():
            raise ValueError(f"rollout_plan_kwargs prefix must be a non-empty string, got {prefix!r}.")
        if "</think>" not in prefix:
            raise ValueError(f"rollout_plan_kwargs prefix must close the think block with '</think>', got {prefix!r}.")
        self.prefix = prefix

    @classmethod
    def from_config(cls, args) -> ASRRRolloutPlan:
        """From `rollout_plan_kwargs` (optional key `prefix`)."""
        kwargs = dict(getattr(args, "rollout_plan_kwargs", None) or {})
        unknown = sorted(set(kwargs) - {"prefix"})
        if unknown:
            raise ValueError(f"rollout_plan_kwargs {unknown} unknown to rollout_plan='asrr' (it takes 'prefix').")
        return cls(**kwargs)

    def num_prompt_subgroups(self, group_size: int) -> int:
        return 1

    def assign(self, row, group_pos, group_size, group_id, step) -> RolloutAssignment:
        return RolloutAssignment(prefill=self.prefix)
