"""`EfficientGRPOTrainer`: TRL's `GRPOTrainer` with thin hooks for what a reward function alone cannot do.

Each override below names the TRL method it wraps (checked against TRL 1.16.0), calls `super()`, and only
post-processes. With every `EfficientGRPOConfig` option off, the only visible difference from `GRPOTrainer` is one
extra per-row column, `group_size`, passed to the reward functions (which must accept `**kwargs` anyway), plus
extra `trl_efficient/*` metrics.

Data flow of one generation batch (docs/trl-integration.md §1):

1. `_generate_and_score_completions`: rewrite copies of the rows (rollout plan, state columns) -> `super()`.
2. inside it, `_generate_single_turn`: vLLM server de-duplication fix, budget forcing (`budget_forcing`, TRL's own
   generation run in phases by `trainer/budget_forcing.py`) and per-rollout hard caps.
3. inside it, `_calculate_rewards`: after TRL gathers the rewards, gather lengths and row metadata into a
   `GroupBatch` (in the step context, `trainer.step.group_batch`).
4. back in `_generate_and_score_completions`: the tokens budget forcing inserted leave the loss
   (`mask_completion_tokens`), then `group_stage(batch, output)`, the public group-stage pipeline
   (see `EfficientGRPOTrainer` and docs/architecture.md, "The group-stage pipeline").

The hooks hand data to each other only through `trainer.step`, a `StepContext` (`trainer/step.py`) that lives for one
`_generate_and_score_completions` call (`step_scope`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from accelerate.utils import gather, gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from ..core.lengths import completion_finished
from ..hub.card import ModelCardInfo
from .advantages import ADVANTAGE_ESTIMATORS, TRL_DEFAULT, finalize_advantages
from .budget_forcing import FORCED_TEXT, budget_force
from .chunking import generate_in_chunks
from .config import build_group_component, build_rollout_plan, check_budget_forcing
from .filters import COMPLETION_FILTERS
from .group import GroupBatch
from .lisa import build_lisa
from .prompt_samplers import build_prompt_sampler
from .reference import ReferenceReset, check_reference_reset_peft
from .rollout import apply_assignment
from .state import (
    PromptHistory,
    is_stateful,
    load_components,
    needed_columns,
    provided_columns,
    save_components,
    state_key,
)
from .step import StepContext
from .trl_internals import (
    check_trl,
    generation_config_override,
    is_vlm,
    metric_buffer,
    num_items_in_batch,
    output_dir,
)

logger = logging.getLogger(__name__)

SIGNAL_STREAK = 3  # generation batches in a row without gradient signal that make the louder warning

CORRECTNESS_NAMES = ("correctness_reward", "accuracy_reward", "reasoning_accuracy_reward")
# The keyword arguments GRPOTrainer._calculate_rewards (TRL 1.16.0) passes to every reward function besides the
# dataset's columns (`environments` only with environment_factory, which rollout plans do not support).
TRL_REWARD_KWARGS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")


def required_reward_arguments(func) -> list[str]:
    """Names of the arguments a reward callable requires (no default, not `*args`/`**kwargs`)."""
    import inspect

    target = func if inspect.isfunction(func) or inspect.ismethod(func) else getattr(func, "__call__", func)  # noqa: B004 (the method, for its signature)
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in params
        if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


@contextmanager
def quiet_deprecations() -> Iterator[None]:
    """Silence transformers' `is_gradient_checkpointing` FutureWarning, which TRL's generation context reads on every
    run (`trl.models.utils.disable_gradient_checkpointing`, TRL 1.16.0): nothing a user can change makes it stop."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning)
        yield


def no_signal_causes(batch: GroupBatch, args) -> list[str]:
    """The likely reasons a gathered batch carried no gradient signal, each with what to change (`log_group_metrics`).

    >>> import torch
    >>> b = GroupBatch(rewards=torch.zeros(4, 1), reward_names=["correctness_reward"], reward_weights=torch.ones(1),
    ...                lengths=torch.full((4,), 8.0), truncated=torch.ones(4, dtype=torch.bool), group_size=2,
    ...                correctness_index=0)
    >>> [c.split(" (")[0] for c in no_signal_causes(b, None)]
    ['every group all-wrong', 'the completion cap']
    """
    causes, correct = [], batch.correct
    scored = correct[~torch.isnan(correct)]
    if len(scored) and bool((scored == 0).all()):
        causes.append("every group all-wrong (the tasks are too hard for the model at this cap: easier data, a larger "
                      "cap, or more rollouts per prompt)")  # fmt: skip
    elif len(scored) and bool((scored == 1).all()):
        causes.append("every group all-right (nothing left to learn on these prompts: harder data)")
    elif bool((batch.grouped(batch.total_reward()).std(dim=1).nan_to_num(0) == 0).all()):
        causes.append("every group's rewards are equal (each group all-wrong or all-right)")
    cap = getattr(args, "max_completion_length", None)
    if bool(batch.truncated.all()):
        causes.append(f"the completion cap (every completion was cut at max_completion_length={cap}: raise it, or "
                      "make completions end sooner with eos_logit_bias)")  # fmt: skip
    if (getattr(args, "generation_kwargs", None) or {}).get("sequence_bias"):
        mean = batch.lengths.mean().item()
        causes.append(f"the eos bias (generation_kwargs.sequence_bias, `eos_logit_bias`: completions average "
                      f"{mean:.1f} tokens; too strong a bias ends them before an answer)")  # fmt: skip
    return causes or ["every row was masked by the completion filter or had a zero advantage"]


class EfficientGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` with rollout plans, a group-stage pipeline, pluggable advantages, completion filters, checkpointed
    state and length metrics.

    Args (beyond `GRPOTrainer`'s):
        rollout_plan (`RolloutPlan`, *optional*): overrides the plan built from `args.rollout_plan`.
        group_stages (`list[Callable[[GroupBatch, EfficientGRPOTrainer], None]]`, *optional*): called with every
            gathered batch, before advantages; for group statistics, custom metrics and per-row `batch.extras`.
        stateful_components (`list[StatefulComponent]`, *optional*): instances of `core.state.StatefulComponent`
            (`state_dict`/`load_state_dict`, and optionally `row_columns`, `update`, `provides_columns`,
            `needs_columns`, `attach`), saved with every checkpoint. Reward functions, the rollout plan and the
            advantage/filter objects that are `StatefulComponent`s are included automatically; nothing else is (a
            reward model's `state_dict` is TRL's, saved with the model, never in our JSON state).
        card_info (`ModelCardInfo`, *optional*): recipe, datasets, base model and summary for the model card; also
            settable later with `update_card_info`.

    Prompt sampler: with `args.prompt_sampler` set, `_get_train_sampler` returns `self.prompt_sampler` (built once in
    `__init__`, `trainer/prompt_samplers.py`) instead of TRL's `RepeatSampler`, with the same layout; it is a stateful
    component (checkpointed, `update(batch)` with the gathered batch), so every rank draws the same prompts.

    The group-stage pipeline (`group_stage`, once per gathered generation batch: `run_stages` ->
    `compute_advantages` -> `apply_filter` -> `log_group_metrics` -> `update_state`, each `step(batch, output)`) and
    the contracts components plug in through (columns, `attach`, `batch.extras`): docs/architecture.md, "The
    group-stage pipeline". A subclass extends a step by overriding it and calling `super()`, and overrides
    `group_stage` itself only to change when the pipeline runs (`DLERTrainer`); private methods are not extension
    points.
    """

    _tag_names = ["trl", "grpo", "trl-efficient"]
    _name = "EfficientGRPO"

    # Per-row columns this trainer adds to every row before the rewards run: `group_size` (`_prepare_rows`) and
    # `finished` (`_calculate_rewards`: `core.lengths.completion_finished`, the completion ended with an EOS id).
    provides_columns = ("group_size", "finished")
    # The class of `self.step` (`trainer/step.py`); a subclass with carriers of its own names a subclass of it.
    step_context: type[StepContext] = StepContext

    def __init__(
        self, *args, rollout_plan=None, group_stages=None, stateful_components=None, card_info=None, **kwargs
    ) -> None:
        check_trl(type(self))  # a TRL whose private surface moved fails here, in one line naming the symbol
        check_reference_reset_peft(kwargs.get("args"), kwargs.get("peft_config") is not None)  # before the model loads
        with quiet_deprecations():
            super().__init__(*args, **kwargs)
        self.signal_streak, self.signal_warned = 0, False  # generation batches in a row that trained on nothing
        self.card_info = card_info if card_info is not None else ModelCardInfo()
        for func in self.reward_funcs:  # rewards that judge "stopped" use the EOS ids generation stops on
            if callable(getattr(func, "set_eos_token_ids", None)):
                func.set_eos_token_ids(self.eos_token_ids)
        self.rollout_plan = rollout_plan if rollout_plan is not None else build_rollout_plan(self.args)
        args, estimator = self.args, getattr(self.args, "advantage_estimator", TRL_DEFAULT)
        self.advantage_estimator = None  # None: TRL's own advantages, untouched
        if estimator != TRL_DEFAULT:
            entry = ADVANTAGE_ESTIMATORS.get(estimator)
            self.advantage_estimator = build_group_component(entry, args, args.advantage_kwargs, "advantage_kwargs")
        name = getattr(args, "completion_filter", None)
        self.completion_filter = None
        if name is not None:
            entry = COMPLETION_FILTERS.get(name)
            self.completion_filter = build_group_component(entry, args, args.filter_kwargs, "filter_kwargs")
        self.group_stages = list(group_stages or [])
        if self.rollout_plan is not None:
            self.rollout_plan.validate(self.num_generations, self.args.max_completion_length)
            if self.tools or self.environment_factories is not None or self.rollout_func is not None:
                raise NotImplementedError(
                    "A rollout plan rewrites prompts and caps rows inside `_generate_single_turn`, which TRL also "
                    "calls on subsets of rows in the tool loop; tools, environment_factory and rollout_func are not "
                    "supported together with rollout_plan."
                )
        components = list(stateful_components or [])
        for comp in components:
            if not is_stateful(comp):
                raise TypeError(
                    f"stateful_components: {type(comp).__name__} is not a trl_efficient.core.state.StatefulComponent; "
                    "subclass it (or call StatefulComponent.register) so its state is checkpointed."
                )
        if getattr(self.args, "track_prompt_history", False):
            if self.train_dataset is not None and "idx" not in getattr(self.train_dataset, "column_names", ["idx"]):
                raise ValueError(
                    "track_prompt_history=True needs a stable `idx` column in train_dataset; add it with "
                    "`dataset.map(lambda _, i: {'idx': i}, with_indices=True)`."
                )
            components.append(PromptHistory())
        # TRL's RepeatSampler layout (GRPOTrainer._get_train_sampler, TRL 1.16.0), a registered sampler's choice
        self.prompt_sampler = build_prompt_sampler(
            self.args,
            self.train_dataset,
            mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            shuffle=self.shuffle_dataset,
            seed=self.args.seed,
        )
        # ProRL's reference resets (trainer/reference.py): a callback and a stateful component; None when off
        self.reference_reset = ReferenceReset.from_config(self.args)
        if self.reference_reset is not None:
            self.add_callback(self.reference_reset)
        # LISA's layer sampler (trainer/lisa.py): a callback (registered by its attach) and a stateful component
        self.lisa = build_lisa(self.args)  # None unless lisa_activated_layers is set
        components += [c for c in (self.prompt_sampler, self.reference_reset, self.lisa) if c is not None]
        plugged = (*self.reward_funcs, self.rollout_plan, self.advantage_estimator, self.completion_filter)
        components += [c for c in plugged if is_stateful(c)]
        self.stateful_components = {state_key(c): c for c in components}
        self._check_reward_columns()
        self.correctness_index = self._find_correctness_index()
        self.step: StepContext | None = None  # this generation batch's carriers, within `step_scope` only
        self.budget_forcing = check_budget_forcing(self.args)  # None: TRL's generation, untouched
        if getattr(self.args, "generation_chunk_size", None) is not None and is_vlm(self):
            raise NotImplementedError(
                f"generation_chunk_size={self.args.generation_chunk_size} splits text rows only; image inputs (a "
                "VLM's per-row image fields) are not split: unset generation_chunk_size for this model."
            )
        if self.budget_forcing is not None:
            self._check_budget_forcing_setup()
        self.model_card_error: Exception | None = None  # set by create_model_card when writing the card failed
        for comp in self.components():
            if callable(getattr(comp, "attach", None)):
                comp.attach(self)

    def components(self) -> list:
        """Every component plugged into this trainer, each once: reward functions, the rollout plan, the advantage
        estimator, the completion filter and the stateful components (in that order; `None` left out)."""
        comps = (*self.reward_funcs, self.rollout_plan, self.advantage_estimator, self.completion_filter)
        return list({id(c): c for c in (*comps, *self.stateful_components.values()) if c is not None}.values())

    def update_card_info(self, **fields) -> ModelCardInfo:
        """Replace fields of `card_info` (`recipe`, `datasets`, `base_model_id`, `summary`) and return it."""
        self.card_info = dataclasses.replace(self.card_info, **fields)
        return self.card_info

    # ------------------------------------------------------------------------------------------------------------
    def _find_correctness_index(self) -> int | None:
        wanted = getattr(self.args, "correctness_reward", None)
        names = list(self.reward_func_names)
        if wanted is not None:
            if wanted not in names:
                raise ValueError(f"correctness_reward={wanted!r} is not one of the reward functions {names}.")
            return names.index(wanted)
        for candidate in CORRECTNESS_NAMES:
            if candidate in names:
                return names.index(candidate)
        return None

    def accepted_reward_columns(self) -> set[str]:
        """The reward arguments this trainer can pass: TRL's standard kwargs (`TRL_REWARD_KWARGS`), the training
        dataset's columns, and the `provides_columns` of the trainer and every component (rollout plan included)."""
        columns = set(getattr(self.train_dataset, "column_names", None) or [])
        accepted = columns | set(TRL_REWARD_KWARGS) | set(provided_columns(self))
        for comp in self.components():
            accepted |= set(provided_columns(comp))
        return accepted

    def _check_reward_columns(self) -> None:
        """Fail at construction, not mid-training, when a reward needs a column nobody provides (e.g. `solution`), or
        a component declares in `needs_columns` a column the dataset lacks."""
        dataset = self.train_dataset
        columns = set(getattr(dataset, "column_names", None) or [])
        if not columns:
            return  # iterable or unknown dataset: nothing to check up front
        provided = self.accepted_reward_columns()
        for func, name in zip(self.reward_funcs, self.reward_func_names):
            if isinstance(func, torch.nn.Module):
                continue
            for column in required_reward_arguments(func):
                if column not in provided:
                    raise ValueError(
                        f"Reward function {name!r} needs a {column!r} column, but the training dataset has only "
                        f"{sorted(columns)}. Add the column (the trl_efficient.data loaders provide `solution`) or "
                        "drop the reward."
                    )
        for comp in self.components():
            missing = [c for c in needed_columns(comp) if c not in provided]
            if missing:
                raise ValueError(
                    f"{state_key(comp)} needs the column(s) {missing}, but the training dataset has only "
                    f"{sorted(columns)}."
                )

    def _check_budget_forcing_setup(self) -> None:
        """Budget forcing re-enters TRL's generation once per phase on this process's rows only: text models, no
        tool loop, and no sharded generation (ZeRO-3 / FSDP gather parameters collectively, and phases differ per
        rank)."""
        spec = self.budget_forcing.spec
        if is_vlm(self) or self.tools or self.environment_factories is not None or self.rollout_func is not None:
            raise NotImplementedError(
                f"budget_forcing={spec!r} supports text models without tools, environment_factory or rollout_func."
            )
        plugin = getattr(self.accelerator.state, "deepspeed_plugin", None)
        if self.is_fsdp_enabled or (plugin is not None and getattr(plugin, "zero_stage", 0) == 3):
            raise NotImplementedError(
                f"budget_forcing={spec!r} generates in a rank-dependent number of phases: not supported with FSDP or "
                "DeepSpeed ZeRO-3 (use ZeRO-1/2 or DDP)."
            )

    def _group_size(self) -> int:
        return self.num_generations if self.model.training else self.num_generations_eval

    def _render_chat(self, messages) -> str:
        return self.processing_class.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **(self.chat_template_kwargs or {})
        )

    def _prepare_rows(self, inputs: list[dict]) -> list[dict]:
        """Copies of the local rows with group position, state columns and the rollout plan applied."""
        G = self._group_size()
        start = self.accelerator.process_index * len(inputs)  # global row offset (docs/trl-integration.md §9)
        rows, caps = [], []
        for i, row in enumerate(inputs):
            new = dict(row)  # never mutate the dataset row
            new["group_size"] = G
            for comp in self.stateful_components.values():
                if callable(getattr(comp, "row_columns", None)):
                    new.update(comp.row_columns(new))
            cap = None
            if self.rollout_plan is not None:
                assignment = self.rollout_plan.assign(new, (start + i) % G, G, (start + i) // G, self.state.global_step)
                new["prompt"] = apply_assignment(new["prompt"], assignment, self._render_chat)
                new.update(assignment.metadata)
                cap = assignment.max_tokens
            caps.append(cap)
            rows.append(new)
        self.step.row_caps = caps if any(c is not None for c in caps) else None
        return rows

    @contextmanager
    def step_scope(self) -> Iterator[StepContext]:
        """Yield `self.step`, the `StepContext` of the current `_generate_and_score_completions` call: the outermost
        call creates it (of the class `self.step_context`) and drops it when it ends, an exception included; nested
        calls share it (`trainer/step.py`)."""
        if self.step is not None:
            yield self.step
            return
        self.step = self.step_context()
        try:
            yield self.step
        finally:
            self.step = None

    # Wraps GRPOTrainer._generate_and_score_completions (TRL 1.16.0): rows are rewritten before, the output dict is
    # post-processed after; nothing of the base method is copied.
    def _generate_and_score_completions(self, inputs):
        with self.step_scope() as step:
            step.begin_generation_batch()
            rows = self._prepare_rows(inputs)
            with quiet_deprecations():
                output = super()._generate_and_score_completions(rows)
            if self.budget_forcing is not None:
                self._mask_forced_tokens(output)
            if step.group_batch is not None:
                self.group_stage(step.group_batch, output)
        return output

    # Wraps GRPOTrainer._generate (TRL 1.16.0): records this process's prompt token ids (after any rollout-plan
    # rewrite) in the step context for methods with an extra pass over prompt + completion; the return is untouched.
    def _generate(self, prompts):
        out = super()._generate(prompts)
        if self.step is not None:
            self.step.prompt_ids = out[0]
        return out

    def mask_completion_tokens(self, output: dict, drop: torch.Tensor) -> None:
        """Take the tokens where the boolean `drop` (shape of `output["completion_ids"]`) is set out of the loss, not
        out of the context: tokens the policy did not sample (forced control tokens, budget-forcing insertions),
        whose log-probs must not enter the loss (methods.md §23 pitfalls) but which every later token was generated
        after. They go to TRL's loss-only mask `tool_mask` (created as ones when absent, as TRL pads it), never to
        `completion_mask`: TRL 1.16's `_compute_loss` builds the loss pass's attention mask from `completion_mask`,
        while the old and reference log-probs were computed with these tokens visible, so zeroing them there trains
        the policy on contexts with holes (a wrong gradient and a nonzero KL before any update).
        `num_items_in_batch` is recomputed as TRL computes it (`trl_internals.num_items_in_batch`)."""
        keep = (~drop.bool()).to(output["completion_mask"].dtype)
        output["tool_mask"] = keep if "tool_mask" not in output else output["tool_mask"] * keep
        output["num_items_in_batch"] = num_items_in_batch(output)

    def _mask_forced_tokens(self, output: dict) -> None:
        """Mask the spans `budget_force` inserted (`</think>` + answer prefix, or "Wait") out of the loss."""
        ids = output["completion_ids"]
        drop = torch.zeros_like(ids, dtype=torch.bool)
        spans = self.step.forced_spans or []
        for row, row_spans in enumerate(spans[: ids.size(0)]):
            for start, end in row_spans:
                drop[row, start : min(end, ids.size(1))] = True
        self.mask_completion_tokens(output, drop)
        buffer = metric_buffer(self, "train" if self.model.training else "eval")
        forced = torch.tensor([float(bool(s)) for s in spans] or [0.0], device=ids.device)
        buffer["budget_forcing/forced_fraction"].append(gather(forced).mean().item())
        buffer["budget_forcing/inserted_tokens_mean"].append(gather(drop.sum(dim=1).float()).mean().item())

    # Wraps GRPOTrainer._generate_single_turn (TRL 1.16.0): (1) vLLM server mode de-duplicates prompts with
    # `all_prompts[::num_generations]`, so with K prompt subgroups we ask for G // K samples of each distinct prompt
    # (docs/trl-integration.md §10); (2) with `budget_forcing`, TRL's own generation runs in phases
    # (`_budget_forced_turn`); (3) per-rollout hard caps truncate after generation (§4); (4) with
    # `generation_chunk_size`, TRL's call runs on chunks of rows (`_trl_generate_single_turn`, trainer/chunking.py).
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if self.rollout_plan is not None and self.use_vllm:
            num_generations = max(num_generations // self.rollout_plan.num_prompt_subgroups(num_generations), 1)
        if self.budget_forcing is not None:
            completion_ids, logprobs = self._budget_forced_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        else:
            completion_ids, logprobs = self._trl_generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        caps = self.step.row_caps if self.step is not None else None
        if caps is not None and len(caps) == len(completion_ids):
            completion_ids = [ids[:cap] if cap else ids for ids, cap in zip(completion_ids, caps)]
            if logprobs is not None:
                logprobs = [lp[:cap] if cap else lp for lp, cap in zip(logprobs, caps)]
        return completion_ids, logprobs

    def _trl_generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images):
        """`GRPOTrainer._generate_single_turn` (TRL 1.16.0) itself, on consecutive chunks of `generation_chunk_size`
        rows when that is set (BroRL's hundreds of rollouts per prompt in bounded memory; trainer/chunking.py), the
        completions concatenated in row order; one call otherwise."""

        def generate(ids, imgs):
            return super(EfficientGRPOTrainer, self)._generate_single_turn(
                ids, imgs, multimodal_fields, num_generations, has_tool_images
            )

        return generate_in_chunks(generate, prompt_ids, images, getattr(self.args, "generation_chunk_size", None))

    def _budget_forced_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images):
        """`budget_force` with `GRPOTrainer._generate_single_turn` (transformers path) as its `generate(prefixes,
        max_new)`: each phase is TRL's own call with `generation_config.max_new_tokens = max_new` (a copy, restored
        after). Stores the inserted spans per row for `_mask_forced_tokens`; logprobs are `None` as on TRL's path.

        Proposed default (training only; s1 and `trl-efficient eval` let the answer run `answer_cap` = 32 tokens past
        the inserted prefix): with `force:B` the answer after `</think>` + answer prefix gets at most
        `max(1, max_completion_length - B - |inserted|)` of those 32 tokens, so a forced rollout is no longer than
        `max_completion_length` unless B itself leaves no room (then B + |inserted| + 1)."""

        def generate(prefixes: list[list[int]], max_new: int) -> list[list[int]]:
            if max_new <= 0:
                return [[] for _ in prefixes]
            with generation_config_override(self, max_new_tokens=max_new):
                ids, _ = self._trl_generate_single_turn(
                    prefixes, images, multimodal_fields, num_generations, has_tool_images
                )
            return ids

        forcing = self.budget_forcing
        if forcing.kind == "force":  # proposed default: the forced answer stays within max_completion_length
            inserted = len(self.processing_class.encode(FORCED_TEXT, add_special_tokens=False))
            room = max(1, self.max_completion_length - forcing.value - inserted)
            forcing = dataclasses.replace(forcing, answer_cap=min(forcing.answer_cap, room))
        prefixes = [list(p) for p in prompt_ids]
        done = budget_force(
            prefixes, generate, forcing, self.processing_class, self.eos_token_ids, self.max_completion_length
        )
        self.step.forced_spans = [c.inserted for c in done]
        return [c.ids for c in done], None

    # Wraps GRPOTrainer._calculate_rewards (TRL 1.16.0): every reward gets the row column `finished` (a documented
    # reward keyword); the rewards come back gathered; we gather the matching lengths, truncation flags and row
    # metadata so the group stage sees whole groups.
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        eos_ids = set(self.eos_token_ids)
        finished = [completion_finished(ids, eos_ids) for ids in completion_ids_list]
        rows = [{**row, "finished": done} for row, done in zip(inputs, finished, strict=True)]
        rewards = super()._calculate_rewards(rows, prompts, completions, completion_ids_list)
        keys = ["idx", *(self.rollout_plan.metadata_keys if self.rollout_plan is not None else ())]
        local = [
            (len(ids), not done, {k: row.get(k) for k in keys if k in row})
            for ids, done, row in zip(completion_ids_list, finished, inputs, strict=True)
        ]
        everything = gather_object(local) if self.accelerator.num_processes > 1 else local
        metadata = {k: [m.get(k) for _, _, m in everything] for k in keys if any(k in m for _, _, m in everything)}
        self.step.group_batch = GroupBatch(
            rewards=rewards.detach().float().cpu(),
            reward_names=list(self.reward_func_names),
            reward_weights=self.reward_weights.detach().float().cpu(),
            lengths=torch.tensor([n for n, _, _ in everything], dtype=torch.float32),
            truncated=torch.tensor([t for _, t, _ in everything], dtype=torch.bool),
            group_size=self._group_size(),
            metadata=metadata,
            correctness_index=self.correctness_index,
            process_index=self.accelerator.process_index,
            local_size=len(inputs),
            mode="train" if self.model.training else "eval",
        )
        return rewards

    # ------------------------------------------------------------------------------------------------------------
    # --- the group-stage pipeline (class docstring; docs/architecture.md "The group-stage pipeline") ---------------
    def group_stage(self, batch: GroupBatch, output: dict) -> None:
        """Run the pipeline on one gathered batch: `run_stages` -> `compute_advantages` -> `apply_filter` ->
        `log_group_metrics` -> `update_state`."""
        self.run_stages(batch, output)
        self.compute_advantages(batch, output)
        self.apply_filter(batch, output)
        self.log_group_metrics(batch, output)
        self.update_state(batch, output)

    def run_stages(self, batch: GroupBatch, output: dict) -> None:
        """Step 1: call every `group_stages` callable as `stage(batch, self)`, in order."""
        for stage in self.group_stages:
            stage(batch, self)

    def compute_advantages(self, batch: GroupBatch, output: dict) -> None:
        """Step 2: replace `output["advantages"]` by this process's slice of the estimator's global advantages (no-op
        with `advantage_estimator="grpo"`: TRL's own advantages stay)."""
        if self.advantage_estimator is None:
            return
        device = output["advantages"].device
        advantages = finalize_advantages(self.advantage_estimator(batch), batch.num_rows)
        output["advantages"] = advantages[batch.local_slice].to(device, output["advantages"].dtype)
        metric_buffer(self, batch.mode)["trl_efficient/advantage_mean"].append(advantages.mean().item())
        metric_buffer(self, batch.mode)["trl_efficient/advantage_std"].append(advantages.std().item())

    def apply_filter(self, batch: GroupBatch, output: dict) -> None:
        """Step 3: mask the rows the completion filter drops (no-op without a filter)."""
        if self.completion_filter is None:
            return
        keep = self.completion_filter(batch).bool()
        self._apply_keep_mask(output, keep[batch.local_slice].to(output["advantages"].device))
        metric_buffer(self, batch.mode)["trl_efficient/filter_kept_fraction"].append(keep.float().mean().item())

    def log_group_metrics(self, batch: GroupBatch, output: dict) -> None:
        """Step 4: `trl_efficient/*` metrics (accuracy, lengths, truncation, per-budget / per-mode subgroups) and the
        gradient signal: `signal_rows`, the rows of the whole batch (all processes) that carry one (a non-zero
        advantage and a token left in the loss by the completion filter and TRL's masks), and `signal_fraction`."""
        self._log_group_metrics(batch)
        self._monitor_signal(batch, output)

    def _monitor_signal(self, batch: GroupBatch, output: dict) -> None:
        """Log the batch's signal rows; warn in one line the first time a training batch has none, louder when
        `SIGNAL_STREAK` in a row (and every such streak after) have none, with the likely causes."""
        adv = output["advantages"]
        rows = ((adv != 0) if adv.dim() == 1 else (adv != 0).any(dim=1)) & (output["completion_mask"].sum(dim=1) > 0)
        counts = gather(torch.tensor([[rows.sum().item(), rows.numel()]], device=adv.device, dtype=torch.float32))
        signal, total = counts.sum(dim=0).tolist()
        metric_buffer(self, batch.mode)["trl_efficient/signal_rows"].append(signal)
        metric_buffer(self, batch.mode)["trl_efficient/signal_fraction"].append(signal / max(total, 1.0))
        if batch.mode != "train":
            return
        self.signal_streak = 0 if signal > 0 else self.signal_streak + 1
        if self.signal_streak == 0 or not self.is_world_process_zero():
            return
        causes = "; ".join(no_signal_causes(batch, self.args))
        step = self.state.global_step + 1
        if not self.signal_warned:
            self.signal_warned = True
            logger.warning("trl-efficient: step %d trains on nothing (0 of %d rows carry a gradient signal): %s.",
                           step, int(total), causes)  # fmt: skip
        elif self.signal_streak % SIGNAL_STREAK == 0:
            logger.warning("trl-efficient: %d generation batches in a row trained on nothing (loss 0, grad_norm 0, "
                           "through step %d): the run is not learning. Likely: %s.",
                           self.signal_streak, step, causes)  # fmt: skip

    def update_state(self, batch: GroupBatch, output: dict) -> None:
        """Step 5: in training only, `update(batch)` of every stateful component that has it."""
        if batch.mode != "train":
            return
        for comp in self.stateful_components.values():
            if callable(getattr(comp, "update", None)):
                comp.update(batch)

    def _apply_keep_mask(self, output: dict, keep: torch.Tensor) -> None:
        """Mask (not drop) filtered rows, as TRL's `mask_truncated_completions` does (docs/trl-integration.md §6).

        The loss normaliser `num_items_in_batch` is recomputed over the kept tokens, unless the filter declares
        `loss_normalizer = "all"` (GFPO's paper form: masked rows still count in the DAPO denominator)."""
        keep_normaliser = getattr(self.completion_filter, "loss_normalizer", "kept") == "all"
        normaliser = output["num_items_in_batch"] if keep_normaliser else None
        adv = output["advantages"]
        output["advantages"] = adv * (keep if adv.dim() == 1 else keep[:, None]).to(adv.dtype)
        output["completion_mask"] = output["completion_mask"] * keep.unsqueeze(1).to(output["completion_mask"].dtype)
        output["num_items_in_batch"] = num_items_in_batch(output) if normaliser is None else normaliser

    def _log_group_metrics(self, batch: GroupBatch) -> None:
        metrics = metric_buffer(self, batch.mode)
        correct, lengths = batch.correct, batch.lengths
        if batch.correctness_index is not None:
            for name, mask in (("correct", correct == 1), ("incorrect", correct == 0)):
                if mask.any():
                    metrics[f"trl_efficient/tokens_{name}_mean"].append(lengths[mask].mean().item())
            acc = torch.nanmean(correct).item()
            if acc == acc:
                metrics["trl_efficient/accuracy"].append(acc)
        metrics["trl_efficient/truncated_fraction"].append(batch.truncated.float().mean().item())
        for key in ("budget", "length_mode"):
            for label, value in batch.subgroup_means(key, lengths).items():
                metrics[f"trl_efficient/{key}_{label}/mean_length"].append(value)
            if batch.correctness_index is not None:
                for label, value in batch.subgroup_means(key, correct).items():
                    if value == value:
                        metrics[f"trl_efficient/{key}_{label}/accuracy"].append(value)

    # Wraps GRPOTrainer._get_train_sampler (TRL 1.16.0): TRL's RepeatSampler unless a prompt sampler is configured.
    def _get_train_sampler(self, dataset=None):
        if self.prompt_sampler is None:
            return super()._get_train_sampler(dataset)
        if dataset is not None and len(dataset) != self.prompt_sampler.num_samples:
            raise ValueError(
                f"prompt_sampler was built over {self.prompt_sampler.num_samples} prompts, the dataloader has "
                f"{len(dataset)}; build the trainer with the dataset it trains on."
            )
        return self.prompt_sampler

    # Wraps GRPOTrainer.log (TRL 1.16.0), which logs `None` for a metric with no value in the window (TRL's
    # `clip_ratio/low_min` when every row is masked, as a completion filter can do): with a completion filter such a
    # metric is left out (`signal_rows` says why it is empty); without one, TRL's logs are untouched.
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        buffer = metric_buffer(self, "train" if self.model.training else "eval")
        empty = [k for k, v in buffer.items() if v and all(isinstance(x, float) and math.isnan(x) for x in v)]
        for key in empty if self.completion_filter is not None else ():
            del buffer[key]
        super().log(logs, start_time)

    # Wraps Trainer._issue_warnings_after_load (transformers): a resumed tied-embedding model "misses" its tied copy
    # (`lm_head.weight`, saved once as the embedding), which `tie_weights` restores: only other keys are reported.
    def _issue_warnings_after_load(self, load_result) -> None:
        params = dict(self.model.named_parameters(remove_duplicate=False))
        missing = set(getattr(load_result, "missing_keys", ()))
        loaded = {id(p) for name, p in params.items() if name not in missing}
        tied = [k for k in missing if k in params and id(params[k]) in loaded]
        if tied and hasattr(load_result, "_replace"):
            self.model.tie_weights()
            load_result = load_result._replace(missing_keys=[k for k in load_result.missing_keys if k not in tied])
        super()._issue_warnings_after_load(load_result)

    # ------------------------------------------------------------------------------------------------------------
    # Wraps GRPOTrainer._save_checkpoint (TRL 1.16.0): also writes every stateful component, mirroring TRL's own
    # `entropy_ctrl_state.json`.
    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:  # always written (possibly `{}`), so every checkpoint says what state it holds
            folder = os.path.join(output_dir(self, trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
            save_components(self.stateful_components, folder)
            if self.reference_reset is not None:  # the reference weights, once a reset moved them off the initial model
                self.reference_reset.save_reference(folder)

    # Wraps GRPOTrainer._load_optimizer_and_scheduler (TRL 1.16.0), which runs on resume on every rank.
    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None and self.stateful_components:
            if not load_components(self.stateful_components, checkpoint):
                logger.warning("Checkpoint %s has no trl_efficient state; stateful components start fresh.", checkpoint)
            elif self.reference_reset is not None:
                self.reference_reset.load_reference(checkpoint)

    # Wraps _BaseTrainer.create_model_card (TRL 1.16.0): adds license, base model and the method section.
    # TRL's `_save_checkpoint` writes the card *before* the checkpoint's weights, so a card that fails must not
    # raise here: the error is logged with its name, kept in `model_card_error`, and the checkpoint is saved.
    # `trl-efficient train` re-raises it once the final model is on disk (`api.training.run_training`).
    def create_model_card(self, model_name=None, dataset_name=None, tags=None, **kwargs) -> None:
        self.model_card_error = None
        try:
            super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags)
            if not self.is_world_process_zero():
                return
            from ..hub.card import finalize_model_card

            finalize_model_card(self, os.path.join(self.args.output_dir, "README.md"), **kwargs)
        except Exception as exc:  # an extra: never let it cost the trained model
            self.model_card_error = exc
            readme = os.path.join(self.args.output_dir, "README.md")
            message = (
                "trl-efficient: writing the model card %s failed (%s: %s); the model and checkpoints are not affected."
            )
            logger.error(message, readme, type(exc).__name__, exc)
