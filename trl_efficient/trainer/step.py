"""The one object that carries a generation batch's data from one of TRL's hooks to the next.

TRL's `GRPOTrainer._generate_and_score_completions` (TRL 1.16.0) calls, for one generation batch, `_generate`
(-> `_generate_single_turn`), the no-grad log-prob passes, then `_calculate_rewards`; our wrappers of those methods
need to hand data to each other (a row's token cap from the rollout plan to generation, the inserted spans of budget
forcing from generation to the loss mask, the gathered `GroupBatch` from the rewards to the group stage, a method's
own values). They put it in **one** `StepContext`, `trainer.step`, instead of ad-hoc attributes:

- `EfficientGRPOTrainer.step_scope()` creates it when a `_generate_and_score_completions` call starts and drops it
  when that call ends, an exception included, so nothing leaks into the next batch. Nested calls share it: a
  subclass's wrapper that opens the scope before calling `super()` (BudgetThinker's budgets), or DLER's refill loop,
  which calls the base method once per generation batch of one training batch.
- A trainer subclass that needs fields of its own declares a subclass of `StepContext` (a dataclass) and names it in
  its `step_context` class attribute (`DLERStep`, `SARStep`, `TokenEntropyStep`, `BudgetThinkerStep`).
- Outside a `_generate_and_score_completions` call `trainer.step` is `None`.

Per generation batch fields (set anew by each base call; DLER's refills overwrite them) and per call fields are
named as such below.
"""

from __future__ import annotations

from dataclasses import dataclass

from .group import GroupBatch

__all__ = ["StepContext"]


@dataclass
class StepContext:
    """What one `_generate_and_score_completions` call carries between TRL's hooks (module docstring).

    Attributes (all per generation batch):
        prompt_ids: this process's prompt token ids as `GRPOTrainer._generate` returned them (after any rollout plan
            rewrite), for methods that run an extra pass over prompt + completion (entropy, SAR).
        row_caps: per local row, the rollout plan's hard token cap (`None`: no cap), applied after generation.
        forced_spans: per local row, the token spans budget forcing inserted (masked out of the loss).
        group_batch: the gathered `GroupBatch`, built after TRL gathers the rewards, read by the group stage.
    """

    prompt_ids: list[list[int]] | None = None
    row_caps: list[int | None] | None = None
    forced_spans: list[list[tuple[int, int]]] | None = None
    group_batch: GroupBatch | None = None

    def begin_generation_batch(self) -> None:
        """Reset the per-generation-batch fields (a new base call within the same scope, e.g. a DLER refill)."""
        self.prompt_ids = None
        self.row_caps = None
        self.forced_spans = None
        self.group_batch = None
