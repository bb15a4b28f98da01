r"""BudgetThinker (arXiv 2508.17196, methods.md §23): budget prompts with an epoch curriculum, forced control tokens
during generation, and the control tokens masked out of the loss.

- `BudgetThinkerRolloutPlan` (`rollout_plan="budgetthinker"`): every example is told its budget `B`
  (`BUDGETTHINKER_INSTRUCTION`, appended to the last user message) and gets the per-row column `budget`.
  `B` follows the released curriculum (`easyr1/examples/8ratio_v1.yaml`, `easyr1/verl/utils/dataset.py`), a pure
  function of the epoch `e = ⌊trainer_state.epoch⌋`:

  .. math:: B(e) = (6000, 4000, 3500, 3000, 2500, 2000)_e \ (e < 6), \qquad B(e) \sim U\{2000, 4000, 6000\}\ (e \ge 6)

  The random choice of epochs 7-8 (and, a documented extension, any later epoch) is drawn per example and epoch from
  `(seed, epoch, example)`, so every rollout of an example, every process and a resumed run see the same budget:
  no state besides the epoch, which the HF Trainer checkpoints (`trainer_state.json`).
  `epoch_steps` (extension, proposed default `None` = the trainer's epochs as in the paper): one curriculum epoch
  lasts `epoch_steps` optimizer steps, `e = ⌊global_step / epoch_steps⌋` (also checkpointed), so a run shorter than
  a data epoch (the synthetic world's) can still go through the curriculum.
- `BudgetThinkerTrainer`: installs `BudgetControlProcessor` (`trl_efficient.rewards.budgetthinker`) into TRL's
  transformers generation (wraps `GRPOTrainer._generate_single_turn`), and after
  `GRPOTrainer._generate_and_score_completions` takes the control tokens (all forced: the processor suppresses them
  elsewhere) out of the loss through TRL's loss-only `tool_mask`, not out of the attention mask, and recomputes
  `num_items_in_batch` (methods.md §23 pitfalls: the forced tokens' log-probs are not the policy's). The control
  tokens are added to the tokenizer and the model at construction (`add_budget_tokens`, idempotent).

vLLM is not supported in this version (a clear error at construction): forcing needs a vLLM logits processor on
the server side, which TRL's vLLM client does not expose per request.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import torch
from accelerate.utils import gather
from transformers import LogitsProcessorList

from ..core.checks import check_positive_int
from ..prompts import BUDGETTHINKER_INSTRUCTION
from ..rewards.budgetthinker import BudgetControlProcessor, add_budget_tokens
from ..trainer import EfficientGRPOTrainer
from ..trainer.rollout import ROLLOUT_PLANS, RolloutAssignment, RolloutPlan, TargetLengthRolloutPlan
from ..trainer.step import StepContext
from ..trainer.trl_internals import metric_buffer

__all__ = ["BUDGETS_BY_EPOCH", "FINAL_CHOICES", "BudgetThinkerRolloutPlan", "BudgetThinkerTrainer"]

BUDGETS_BY_EPOCH = (6000, 4000, 3500, 3000, 2500, 2000)  # [code] epochs 1-6
FINAL_CHOICES = (2000, 4000, 6000)  # [code] epochs 7-8: a random choice per example
PLAN_KEYS = ("budgets_by_epoch", "final_choices", "epoch_steps")


@dataclass
class BudgetThinkerStep(StepContext):
    """`BudgetThinkerTrainer`'s step context (`trainer/step.py`): `row_budgets`, this process's budget per row, from
    `_generate_and_score_completions` (which knows the rows) to `_generate_single_turn` (which forces the tokens)."""

    row_budgets: list[int | None] | None = None


@ROLLOUT_PLANS.register("budgetthinker")
class BudgetThinkerRolloutPlan(RolloutPlan):
    """State the epoch's budget in the user message and emit it as the `budget` column (module docstring).

    >>> plan = BudgetThinkerRolloutPlan(seed=0)
    >>> row = {"prompt": [{"role": "user", "content": "2+2?"}], "idx": 3}
    >>> [plan.budget(row, e) for e in range(6)]
    [6000, 4000, 3500, 3000, 2500, 2000]
    >>> plan.budget(row, 6) in FINAL_CHOICES and plan.budget(row, 6) == BudgetThinkerRolloutPlan(seed=0).budget(row, 6)
    True
    >>> plan.assign(row, 0, 4, 0, 0, epoch=1).metadata
    {'budget': 4000}
    """

    name = "budgetthinker"
    metadata_keys = ("budget",)

    def __init__(
        self,
        budgets_by_epoch=BUDGETS_BY_EPOCH,
        final_choices=FINAL_CHOICES,
        seed: int = 0,
        epoch_steps: int | None = None,
    ) -> None:
        self.budgets_by_epoch = [check_positive_int("budgets_by_epoch", b) for b in budgets_by_epoch]
        self.final_choices = [check_positive_int("final_choices", b) for b in final_choices]
        if not self.budgets_by_epoch and not self.final_choices:
            raise ValueError("rollout_plan_kwargs: budgets_by_epoch and final_choices cannot both be empty.")
        self.epoch_steps = None if epoch_steps is None else check_positive_int("epoch_steps", epoch_steps)
        self.seed = seed
        self._trainer = None  # set by attach(); its `state` is read live (Trainer.train() replaces the object)

    @classmethod
    def from_config(cls, args) -> BudgetThinkerRolloutPlan:
        """From `rollout_plan_kwargs` (`budgets_by_epoch`, `final_choices`, `epoch_steps`; unknown keys raise) and
        `seed`."""
        kwargs = dict(getattr(args, "rollout_plan_kwargs", None) or {})
        unknown = sorted(set(kwargs) - set(PLAN_KEYS))
        if unknown:
            raise ValueError(
                f"rollout_plan_kwargs {unknown} unknown to rollout_plan='budgetthinker' (it takes {list(PLAN_KEYS)})."
            )
        return cls(**kwargs, seed=getattr(args, "seed", 0))

    def token_lengths(self) -> dict[str, list[int]]:
        return {
            "rollout_plan_kwargs budgets_by_epoch": self.budgets_by_epoch,
            "rollout_plan_kwargs final_choices": self.final_choices,
        }

    def attach(self, trainer) -> None:
        """Read the epoch (or the step) from the trainer's state (checkpointed by the HF Trainer). The trainer is
        kept, not its `state`: `Trainer.train()` assigns a new `TrainerState` (and a resume loads one), so a state
        object captured here would stay at epoch 0, step 0 for the whole run."""
        self._trainer = trainer

    def current_epoch(self) -> int:
        """`⌊trainer_state.epoch⌋`, or `⌊global_step / epoch_steps⌋` with `epoch_steps` (0 before training or
        without a trainer)."""
        state = getattr(self._trainer, "state", None)
        if self.epoch_steps is not None:
            return int(getattr(state, "global_step", 0) or 0) // self.epoch_steps
        return int(getattr(state, "epoch", 0) or 0)

    def budget(self, row: dict, epoch: int) -> int:
        """The budget of `row`'s example in 0-based `epoch`."""
        if epoch < len(self.budgets_by_epoch):
            return self.budgets_by_epoch[epoch]
        if not self.final_choices:
            return self.budgets_by_epoch[-1]
        key = TargetLengthRolloutPlan.example_key(row)
        # random.Random(str) seeds from the string's SHA-512: stable across processes and PYTHONHASHSEED.
        return random.Random(f"{self.seed}:budgetthinker:{epoch}:{key}").choice(self.final_choices)

    def num_prompt_subgroups(self, group_size: int) -> int:
        return 1

    def assign(self, row, group_pos, group_size, group_id, step, epoch: int | None = None) -> RolloutAssignment:
        budget = self.budget(row, self.current_epoch() if epoch is None else epoch)
        return RolloutAssignment(
            user_suffix=BUDGETTHINKER_INSTRUCTION.format(budget=budget), metadata={"budget": budget}
        )


class BudgetThinkerTrainer(EfficientGRPOTrainer):
    """`EfficientGRPOTrainer` that forces BudgetThinker's control tokens while generating (transformers path) and
    masks them out of the loss. Needs `rollout_plan="budgetthinker"` (the per-row budgets) and `use_vllm=False`."""

    _name = "BudgetThinker"
    step_context = BudgetThinkerStep

    def __init__(self, *args, **kwargs) -> None:
        config = kwargs.get("args", args[2] if len(args) > 2 else None)
        if getattr(config, "use_vllm", False):
            raise ValueError(
                "BudgetThinkerTrainer forces its control tokens with a transformers LogitsProcessor; vLLM is not "
                "supported in this version: set use_vllm=False."
            )
        if getattr(config, "budget_forcing", None):
            raise ValueError(
                "BudgetThinkerTrainer already forces its own control tokens during generation; budget_forcing "
                "(s1) cannot be combined with it: set budget_forcing=None."
            )
        if getattr(config, "use_transformers_paged", False):
            raise ValueError(
                "BudgetThinkerTrainer needs plain transformers generate: set use_transformers_paged=False."
            )
        super().__init__(*args, **kwargs)
        if not isinstance(self.rollout_plan, BudgetThinkerRolloutPlan):
            raise ValueError(
                "BudgetThinkerTrainer needs rollout_plan='budgetthinker' (the per-row budgets it forces tokens for), "
                f"got {type(self.rollout_plan).__name__ if self.rollout_plan is not None else None}."
            )
        self.control_ids = add_budget_tokens(self.model, self.processing_class)
        if getattr(self, "ref_model", None) is not None:
            add_budget_tokens(self.accelerator.unwrap_model(self.ref_model), self.processing_class)

    # Wraps EfficientGRPOTrainer._generate_and_score_completions (-> GRPOTrainer's, TRL 1.16.0): the local rows'
    # budgets are kept for generation; afterwards the control tokens leave the loss.
    def _generate_and_score_completions(self, inputs):
        epoch = self.rollout_plan.current_epoch()
        with self.step_scope() as step:
            step.row_budgets = [self.rollout_plan.budget(row, epoch) for row in inputs]
            output = super()._generate_and_score_completions(inputs)
        self.mask_control_tokens(output)
        return output

    def mask_control_tokens(self, output: dict) -> None:
        """The control tokens leave the loss (`tool_mask = 0`), not the context; `num_items_in_batch` recomputed over
        the kept tokens (`EfficientGRPOTrainer.mask_completion_tokens`, shared with budget forcing)."""
        control = torch.isin(
            output["completion_ids"], torch.tensor(self.control_ids, device=output["completion_ids"].device)
        )
        self.mask_completion_tokens(output, control)
        mode = "train" if self.model.training else "eval"
        metric_buffer(self, mode)["budgetthinker/control_tokens_mean"].append(
            gather(control.sum(dim=1).float()).mean().item()
        )

    # Wraps GRPOTrainer._generate_single_turn (TRL 1.16.0): its transformers path calls
    # `unwrapped_model.generate(..., generation_config=...)` with no logits processors; we bind one for this call.
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        budgets = self.step.row_budgets if self.step is not None else None
        if budgets is None or len(budgets) != len(prompt_ids):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        processor = BudgetControlProcessor(budgets, self.control_ids)
        with _bind_logits_processor(self.accelerator.unwrap_model(self.model_wrapped), processor):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )


@contextmanager
def _bind_logits_processor(model, processor):
    """Within the block, `model.generate(...)` also gets `logits_processor=[processor]` (an instance attribute
    shadowing the class method, removed on exit)."""
    had = "generate" in vars(model)
    previous = vars(model).get("generate")
    model.generate = partial(type(model).generate, model, logits_processor=LogitsProcessorList([processor]))
    try:
        yield
    finally:
        if had:
            model.generate = previous
        else:
            del model.generate
