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
import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from accelerate.utils import gather, gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from ..hub.card import ModelCardInfo
from .advantages import ADVANTAGE_ESTIMATORS, TRL_DEFAULT, finalize_advantages
from .budget_forcing import FORCED_TEXT, budget_force
from .chunking import generate_in_chunks
from .config import build_group_component, build_rollout_plan, check_budget_forcing
from .filters import COMPLETION_FILTERS
from .group import GroupBatch
from .lisa import build_lisa
from .prompt_samplers import build_prompt_sampler
from .reference import ReferenceReset
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

    The group-stage pipeline. `group_stage(batch, output)` runs once per gathered generation batch (train and eval),
    inside `_generate_and_score_completions`, after TRL has scored the rows and computed its own advantages. It calls,
    in this order, five public steps, each `step(batch, output) -> None`:

    1. `run_stages`: every `group_stages` callable `stage(batch, trainer)`, in list order. Stages read the gathered
       batch and may add per-row data to `batch.extras` for the steps after them.
    2. `compute_advantages`: the advantage estimator (if not `"grpo"`) replaces `output["advantages"]` with this
       process's slice of its global advantages (NaN -> 0).
    3. `apply_filter`: the completion filter (if any) masks the rows it drops (`completion_mask`, advantages, and
       `num_items_in_batch`).
    4. `log_group_metrics`: `trl_efficient/*` metrics of the batch.
    5. `update_state`: in training only, `update(batch)` of every stateful component.

    `batch` is the gathered `GroupBatch` (global rows); `output` is TRL's output dict for this process's rows, which
    steps may patch in place. A subclass extends a step by overriding it and calling `super()` (before or after its
    own work), and overrides `group_stage` itself only to change when the pipeline runs (e.g. `DLERTrainer` defers
    it while refilling a batch). Private methods are not extension points.

    Components plug in through declared contracts only: columns (`provides_columns` / `needs_columns`, checked at
    construction; see `trainer/state.py`), `attach(trainer)` (called once for every reward function, the rollout
    plan, the estimator, the filter and every stateful component that has it, at the end of `__init__`), and
    `batch.extras` for per-row data.
    """

    _tag_names = ["trl", "grpo", "trl-efficient"]
    _name = "EfficientGRPO"

    # Per-row columns this trainer adds to every row before the rewards run (`_prepare_rows`).
    provides_columns = ("group_size",)
    # The class of `self.step` (`trainer/step.py`); a subclass with carriers of its own names a subclass of it.
    step_context: type[StepContext] = StepContext

    def __init__(
        self, *args, rollout_plan=None, group_stages=None, stateful_components=None, card_info=None, **kwargs
    ) -> None:
        check_trl(type(self))  # a TRL whose private surface moved fails here, in one line naming the symbol
        super().__init__(*args, **kwargs)
        self.card_info = card_info if card_info is not None else ModelCardInfo()
        for func in self.reward_funcs:  # rewards that judge "stopped" use the EOS ids generation stops on
            if callable(getattr(func, "set_eos_token_ids", None)):
                func.set_eos_token_ids(self.eos_token_ids)
        self.rollout_plan = rollout_plan if rollout_plan is not None else build_rollout_plan(self.args)
        estimator = getattr(self.args, "advantage_estimator", TRL_DEFAULT)
        self.advantage_estimator = None  # None: TRL's own advantages, untouched
        if estimator != TRL_DEFAULT:
            entry = ADVANTAGE_ESTIMATORS.get(estimator)
            self.advantage_estimator = build_group_component(
                entry, self.args, self.args.advantage_kwargs, "advantage_kwargs"
            )
        name = getattr(self.args, "completion_filter", None)
        self.completion_filter = None
        if name is not None:
            self.completion_filter = build_group_component(
                COMPLETION_FILTERS.get(name), self.args, self.args.filter_kwargs, "filter_kwargs"
            )
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
        if self.prompt_sampler is not None:
            components.append(self.prompt_sampler)
        # ProRL's reference resets (trainer/reference.py): a callback and a stateful component; None when off
        self.reference_reset = ReferenceReset.from_config(self.args)
        if self.reference_reset is not None:
            components.append(self.reference_reset)
            self.add_callback(self.reference_reset)
        # LISA's layer sampler (trainer/lisa.py): a callback (registered by its attach) and a stateful component
        self.lisa = build_lisa(self.args)  # None unless lisa_activated_layers is set
        if self.lisa is not None:
            components.append(self.lisa)
        components += [f for f in self.reward_funcs if is_stateful(f)]
        for obj in (self.rollout_plan, self.advantage_estimator, self.completion_filter):
            if is_stateful(obj):
                components.append(obj)
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
        seen, out = set(), []
        for comp in (
            *self.reward_funcs,
            self.rollout_plan,
            self.advantage_estimator,
            self.completion_filter,
            *self.stateful_components.values(),
        ):
            if comp is not None and id(comp) not in seen:
                seen.add(id(comp))
                out.append(comp)
        return out

    def update_card_info(self, **fields) -> ModelCardInfo:
        """Replace fields of `card_info` (`recipe`, `datasets`, `base_model_id`, `summary`) and return it."""
        import dataclasses

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
        mode = "train" if self.model.training else "eval"
        forced = torch.tensor([float(bool(s)) for s in spans] or [0.0], device=ids.device)
        metric_buffer(self, mode)["budget_forcing/forced_fraction"].append(gather(forced).mean().item())
        metric_buffer(self, mode)["budget_forcing/inserted_tokens_mean"].append(
            gather(drop.sum(dim=1).float()).mean().item()
        )

    # Wraps GRPOTrainer._generate_single_turn (TRL 1.16.0): (1) vLLM server mode de-duplicates prompts with
    # `all_prompts[::num_generations]`, so with K prompt subgroups we ask for G // K samples of each distinct prompt
    # (docs/trl-integration.md §10); (2) with `budget_forcing`, TRL's own generation runs in phases
    # (`_budget_forced_turn`);
    # (3) per-rollout hard caps truncate after generation (§4); (4) with `generation_chunk_size`, TRL's call runs on
    # chunks of rows (`_trl_generate_single_turn`, trainer/chunking.py).
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
        done = budget_force(
            [list(p) for p in prompt_ids],
            generate,
            forcing,
            self.processing_class,
            self.eos_token_ids,
            self.max_completion_length,
        )
        self.step.forced_spans = [c.inserted for c in done]
        return [c.ids for c in done], None

    # Wraps GRPOTrainer._calculate_rewards (TRL 1.16.0): the rewards come back gathered; we gather the matching
    # lengths, truncation flags and row metadata so the group stage sees whole groups.
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        eos_ids = set(self.eos_token_ids)
        keys = ["idx", *(self.rollout_plan.metadata_keys if self.rollout_plan is not None else ())]
        local = [
            (len(ids), not (len(ids) > 0 and ids[-1] in eos_ids), {k: row.get(k) for k in keys if k in row})
            for ids, row in zip(completion_ids_list, inputs, strict=True)
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
        """Step 4: `trl_efficient/*` metrics (accuracy, lengths, truncation, per-budget / per-mode subgroups)."""
        self._log_group_metrics(batch)

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
        if getattr(self.completion_filter, "loss_normalizer", "kept") == "all":
            normaliser = output["num_items_in_batch"]
        else:
            normaliser = None
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
            logger.error(
                "trl-efficient: writing the model card %s failed (%s: %s); the model and checkpoints are not affected.",
                os.path.join(self.args.output_dir, "README.md"),
                type(exc).__name__,
                exc,
            )
