"""`GroupBatch`: the whole generation batch, gathered across processes, viewed as groups.

Everything group-level in `trl_efficient` (group min/max length, shortest correct length, group accuracy, subgroup
means, custom advantages, completion filters, per-prompt history) reads this object. It is built by
`EfficientGRPOTrainer._calculate_rewards` *after* TRL has gathered the rewards, so a group whose rollouts straddle
processes is always seen whole (docs/trl-integration.md §9): row `r` of every tensor is global row `r`, in TRL's
process-major
order, and `rows.view(-1, G)` yields complete groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class GroupBatch:
    """Gathered per-row signals of one generation batch.

    Attributes:
        rewards (`torch.Tensor`): `(B, F)` reward of each function, `NaN` where the function returned `None`.
        reward_names (`list[str]`): the `F` reward function names (`__name__`).
        reward_weights (`torch.Tensor`): `(F,)` weights from `GRPOConfig.reward_weights`.
        lengths (`torch.Tensor`): `(B,)` completion lengths in policy tokens (EOS included when generated).
        truncated (`torch.Tensor`): `(B,)` bool, the completion ended without EOS (hit a cap).
        group_size (`int`): rollouts per prompt, `G` (`num_generations` in training, `num_generations_eval` in eval).
        metadata (`dict[str, list]`): per-row values of the rollout plan and dataset (`budget`, `idx`, ...).
        correctness_index (`int | None`): column of `rewards` holding correctness (`> 0.5` is correct).
        process_index (`int`), local_size (`int`): this process's slice of the global rows.
        mode (`str`): `"train"` or `"eval"`.
        extras (`dict[str, torch.Tensor | list]`): per-row data that group stages add for the steps after them (e.g.
            `extras["drpo_seq_logp"]`, the `(B,)` sampling-policy scores `DRPOTrainer.run_stages` puts there for the
            `"drpo"` estimator, or `extras["gfpo_keep"]`, the keep mask the `"gfpo"` estimator leaves for the `"gfpo"`
            filter). Every value has one entry per global row (`B` rows, same order as `rewards`); keys are
            namespaced by the method that writes them. This is the only place a component may add data to a batch.

    >>> b = GroupBatch(rewards=torch.zeros(2, 1), reward_names=["r"], reward_weights=torch.ones(1),
    ...                lengths=torch.ones(2), truncated=torch.zeros(2, dtype=torch.bool), group_size=2)
    >>> b.extras["my_scores"] = torch.tensor([0.5, -1.0])
    >>> b.extras["my_scores"].tolist()
    [0.5, -1.0]
    """

    rewards: torch.Tensor
    reward_names: list[str]
    reward_weights: torch.Tensor
    lengths: torch.Tensor
    truncated: torch.Tensor
    group_size: int
    metadata: dict[str, list] = field(default_factory=dict)
    correctness_index: int | None = None
    process_index: int = 0
    local_size: int = 0
    mode: str = "train"
    extras: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rewards.shape[0] % self.group_size != 0:
            raise ValueError(
                f"The gathered batch has {self.rewards.shape[0]} rows, which is not a whole number of groups of "
                f"{self.group_size}; group statistics would be computed on partial groups."
            )

    # --- layout -------------------------------------------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        return self.rewards.shape[0]

    @property
    def num_groups(self) -> int:
        return self.num_rows // self.group_size

    @property
    def local_slice(self) -> slice:
        start = self.process_index * self.local_size
        return slice(start, start + self.local_size)

    def grouped(self, values: torch.Tensor) -> torch.Tensor:
        """`(B, ...)` -> `(num_groups, G, ...)`."""
        return values.view(self.num_groups, self.group_size, *values.shape[1:])

    # --- rewards ------------------------------------------------------------------------------------------------
    def total_reward(self) -> torch.Tensor:
        """`(B,)` weighted sum of the reward functions (TRL's `nansum`); `NaN` for rows every function skipped."""
        weights = self.reward_weights.to(self.rewards.device, self.rewards.dtype)
        total = (self.rewards * weights.unsqueeze(0)).nansum(dim=1)
        total[torch.isnan(self.rewards).all(dim=1)] = torch.nan
        return total

    @property
    def correct(self) -> torch.Tensor:
        """`(B,)` float: 1 correct, 0 wrong, `NaN` unknown (no correctness reward, or unparseable gold)."""
        if self.correctness_index is None:
            return torch.full((self.num_rows,), torch.nan, dtype=torch.float32)
        col = self.rewards[:, self.correctness_index].float()
        return torch.where(torch.isnan(col), col, (col > 0.5).float())

    # --- group statistics ---------------------------------------------------------------------------------------
    def group_accuracy(self) -> torch.Tensor:
        """`(num_groups,)` solve rate over the scorable rollouts of each group (`NaN` if none is scorable)."""
        return torch.nanmean(self.grouped(self.correct), dim=1)

    def subgroup_means(self, key: str, values: torch.Tensor) -> dict:
        """Mean of `values` over all rows sharing each value of `metadata[key]` (e.g. per budget), NaN-aware."""
        labels = self.metadata.get(key)
        if labels is None:
            return {}
        out = {}
        for label in sorted({x for x in labels if x is not None}, key=str):
            mask = torch.tensor([x == label for x in labels])
            out[label] = torch.nanmean(values.float()[mask]).item()
        return out
