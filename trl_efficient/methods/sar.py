r"""SAR, Self-Aligned Reward (arXiv 2509.05489, ICLR 2026; methods.md §25; released code
`amazon-science/Self-Aligned-Reward-Towards_Effective_and_Efficient_Reasoners`, `verl/trainer/ppo/ray_trainer.py`
`create_ans_only_batch` / `compute_perplexity`): `SARTrainer`, the two perplexities per completion and the column
`sar_score` (the formula: `trl_efficient.rewards.sar`).

Per completion $a$ of prompt $q$, under `no_grad`, batched over this process's rows through TRL's own
`_get_per_token_logps_and_entropies` (its chunking by `per_device_*_batch_size`, its fused LM head, log-probs of the
sampling distribution at `temperature`, as TRL's `old_per_token_logps` and the released code's `old_log_probs`):

$$ \log ppl(a \mid q) = -\frac{1}{|a|}\sum_t \log \pi(a_t \mid q, a_{<t}), \qquad
   \log ppl(a) = -\frac{1}{|a|}\sum_t \log \pi(a_t \mid s, a_{<t}) $$

where $s$ is the **standalone prompt** (`standalone_messages`; released `create_ans_only_batch`: chat template,
system prompt, **empty user message**). Documented choices, one line each (reasons: docs/structure-methods.md, "SAR"):
- the row's own system message(s) are kept, tokenized through TRL's `_tokenize_prompts` (same template and tools);
- a plain-text prompt (a plan's rendered prefill included) gets the **empty prompt** (proposed default), else BOS,
  else EOS when that tokenizes to nothing, so the first answer token is still scored;
- `model="policy"` (default, released) or `"reference"` (TRL's `ref_model`: needs `beta > 0`, no PEFT, the same
  vocabulary size; a ValueError at construction otherwise);
- $ppl(a)$ costs one extra no-grad forward; $ppl(a|q)$ reuses TRL's `old_per_token_logps` / `ref_per_token_logps`
  when computed (identified by model, never by order), else a second forward; text-only;
- an empty completion: $\log ppl = 0$ and `sar_score` 0 (never NaN); every rank runs the same passes (ZeRO-3 safe).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import torch

from ..rewards.sar import SAR_COLUMN, SAR_MODELS, sar_score
from ..trainer import EfficientGRPOTrainer
from ..trainer.forward import completion_forward
from ..trainer.step import StepContext
from ..trainer.trl_internals import metric_buffer, tokenize_prompts, trl_tokenizer

__all__ = ["SAR_LOG_PPL_COLUMNS", "SARTrainer", "mean_nll", "standalone_messages"]

# log ppl(a|q), log ppl(a) per row (nats/token), provided with `sar_score` for rewards and metrics
SAR_LOG_PPL_COLUMNS = ("sar_log_ppl_qa", "sar_log_ppl_a")


def standalone_messages(prompt) -> list[dict] | None:
    """The standalone prompt of a conversational prompt: its leading system message(s), then an empty user message
    (released `create_ans_only_batch`); `None` for a plain-text prompt (the empty prompt, module docstring).

    >>> standalone_messages([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}])
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': ''}]
    >>> standalone_messages([{"role": "user", "content": "2+2?"}]), standalone_messages("Q: 2+2?")
    ([{'role': 'user', 'content': ''}], None)
    """
    if isinstance(prompt, str):
        return None
    system = []
    for message in prompt:
        if message.get("role") != "system":
            break
        system.append(dict(message))
    return [*system, {"role": "user", "content": ""}]


def mean_nll(logps: torch.Tensor, n: int) -> float | None:
    """$-\\frac{1}{n}\\sum_{t<n} \\log p_t$ (float64) of one row's first `n` token log-probs; `None` when `n == 0`.

    >>> round(mean_nll(torch.log(torch.tensor([0.5, 0.25, 0.9])), 2), 6)  # (ln 2 + ln 4) / 2 = 1.5 ln 2
    1.039721
    """
    if n == 0:
        return None
    return float(-logps[:n].double().sum() / n)


@dataclass
class SARStep(StepContext):
    """`SARTrainer`'s step context (`trainer/step.py`), per generation batch: `captured`, the no-grad log-probs
    (and `logits_to_keep`) of each TRL pass on the model of `_trl_scores_with()` between generation and the rewards;
    `scoring`, set when the rewards start (SAR's own passes follow and are not recorded)."""

    captured: list = field(default_factory=list)
    scoring: bool = False

    def begin_generation_batch(self) -> None:
        super().begin_generation_batch()
        self.captured = []
        self.scoring = False


class SARTrainer(EfficientGRPOTrainer):
    """`EfficientGRPOTrainer` that provides, per row and before the rewards, `sar_score` (SAR's self-aligned score)
    and the two log-perplexities `sar_log_ppl_qa`, `sar_log_ppl_a` (module docstring). Recipe `sar`
    (`get_sar_reward` reads `sar_score`).

    Args (beyond `EfficientGRPOTrainer`'s):
        sar_model (`str`, *optional*): `"policy"` or `"reference"`; by default the `sar_model` of the SAR reward
            functions (`get_sar_reward(model=...)`; they must agree), else `"policy"`.
    """

    provides_columns = (*EfficientGRPOTrainer.provides_columns, SAR_COLUMN, *SAR_LOG_PPL_COLUMNS)
    step_context = SARStep

    def __init__(self, *args, sar_model: str | None = None, **kwargs) -> None:
        self._sar_standalone_cache: dict[str, list[int]] = {}
        self.sar_reused_logps = 0  # generation batches whose ppl(a|q) came from TRL's own pass (tests, perf)
        super().__init__(*args, **kwargs)
        self.sar_model = self._resolve_sar_model(sar_model)
        if self.environment_factories is not None or self.rollout_func is not None:
            raise NotImplementedError(
                "SARTrainer scores the prompt token ids of `_generate`; environment_factory and rollout_func are not "
                "supported."
            )

    def _resolve_sar_model(self, sar_model: str | None) -> str:
        wanted = {f.sar_model for f in self.reward_funcs if isinstance(getattr(f, "sar_model", None), str)}
        if sar_model is None:
            if len(wanted) > 1:
                raise ValueError(f"The SAR reward functions disagree on the scoring model {sorted(wanted)}: pick one.")
            sar_model = wanted.pop() if wanted else "policy"
        if sar_model not in SAR_MODELS:
            raise ValueError(f"sar_model must be one of {list(SAR_MODELS)}, got {sar_model!r}.")
        if sar_model == "reference":
            if self.ref_model is None:
                raise ValueError(
                    "SAR with model='reference' scores with TRL's ref_model, which exists only with beta > 0 and a "
                    f"non-PEFT model (beta={self.beta}): set beta > 0 (e.g. 0.001, §25) or reward_kwargs "
                    "{'sar': {'model': 'policy'}}."
                )
            vocab = [self._vocab_size(m) for m in (self.model, self.ref_model)]
            if None not in vocab and vocab[0] != vocab[1]:
                raise ValueError(
                    f"SAR's reference model has vocabulary size {vocab[1]}, the policy {vocab[0]}: they must share "
                    "the tokenizer (use the policy's checkpoint as reference, or reward_kwargs "
                    "{'sar': {'model': 'policy'}})."
                )
        return sar_model

    def _vocab_size(self, model) -> int | None:
        config = getattr(self.accelerator.unwrap_model(model), "config", None)
        if config is None:
            return None
        if callable(getattr(config, "get_text_config", None)):
            config = config.get_text_config()
        return getattr(config, "vocab_size", None)

    def _scoring_model(self):
        return self.ref_model if self.sar_model == "reference" else self.model

    def _trl_scores_with(self):
        """The model of the one no-grad log-prob pass TRL 1.16 runs between generation and the rewards
        (`GRPOTrainer._generate_and_score_completions`) that we may reuse, or `None`: the reference model when
        `beta != 0` (`ref_per_token_logps`); the policy when `old_per_token_logps` is computed and no reference pass
        runs on the same module (a PEFT policy with `beta != 0` computes its reference with the adapter off on the
        policy itself: two passes on one model, so none is reused)."""
        if self.sar_model == "reference":
            return self.ref_model if self.beta != 0.0 else None
        generate_every = self.args.steps_per_generation * self.num_iterations
        old_pass = self.args.gradient_accumulation_steps % generate_every != 0 or (
            self.use_vllm and self.vllm_importance_sampling_correction
        )
        peft_reference_pass = self.beta != 0.0 and self.ref_model is None
        return self.model if old_pass and not peft_reference_pass else None

    # Wraps GRPOTrainer._get_per_token_logps_and_entropies (TRL 1.16.0): between generation (`step.prompt_ids` set)
    # and the rewards, records each no-grad pass on the model of `_trl_scores_with()`; the reuse needs exactly one.
    # Results are returned untouched.
    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        out = super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
        )
        step = self.step
        in_window = step is not None and step.prompt_ids is not None and not step.scoring
        if in_window and not torch.is_grad_enabled():
            target = self._trl_scores_with()
            if target is not None and model is target:
                step.captured.append((out[0].detach(), int(logits_to_keep)))
        return out

    def standalone_prompt_ids(self, prompt) -> list[int]:
        """Token ids of the standalone prompt of `prompt` (`standalone_messages`; the empty prompt for plain text,
        falling back to BOS, else EOS, when it has no token), tokenized by TRL's `_tokenize_prompts`; cached."""
        messages = standalone_messages(prompt)
        key = json.dumps(messages, sort_keys=True, default=str)
        ids = self._sar_standalone_cache.get(key)
        if ids is None:
            ids = list(tokenize_prompts(self, [messages if messages is not None else ""])[0][0])
            if not ids:
                tok = trl_tokenizer(self)
                start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
                if start is None:
                    raise ValueError("SAR's empty standalone prompt needs a BOS or EOS token in the tokenizer.")
                ids = [int(start)]
            self._sar_standalone_cache[key] = ids
        return list(ids)

    def completion_log_ppl(self, model, prompt_ids_list, completion_ids_list) -> list[float | None]:
        """$\\log ppl$ (mean token NLL, nats) of each completion after its prompt under `model`: one no-grad pass
        through TRL's `_get_per_token_logps_and_entropies` (chunked by the per-device batch size); `None` for an
        empty completion."""
        widths = [len(ids) for ids in completion_ids_list]
        if not widths or max(widths) == 0:
            return [None for _ in widths]
        logps, _ = completion_forward(self, model, prompt_ids_list, completion_ids_list)
        return [mean_nll(logps[i], n) for i, n in enumerate(widths)]

    def _reused_log_ppl(self, widths: list[int]) -> list[float | None] | None:
        captured = self.step.captured
        if len(captured) != 1:  # no pass to reuse, or more than the one TRL runs: recompute
            return None
        logps, keep = captured[0]
        if logps.dim() != 2 or logps.size(0) != len(widths) or (widths and keep < max(widths)):
            return None  # not the rows we score (e.g. a multi-turn tool loop): recompute
        logps = logps.float().cpu()
        self.sar_reused_logps += 1
        return [mean_nll(logps[i], n) for i, n in enumerate(widths)]

    # Wraps GRPOTrainer._calculate_rewards (TRL 1.16.0) (through EfficientGRPOTrainer's wrapper): the SAR columns are
    # added to copies of the rows first, so every reward gets them as keyword arguments (docs/trl-integration.md §5.1).
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self.step.scoring = True  # our own passes below are not TRL's
        prompt_ids = self.step.prompt_ids
        if prompt_ids is None or len(prompt_ids) != len(completion_ids_list):
            raise RuntimeError(
                f"{type(self).__name__} needs the prompt token ids from `_generate` (a rollout_func or environment "
                "that bypasses it is not supported)."
            )
        model = self._scoring_model()
        widths = [len(ids) for ids in completion_ids_list]
        log_ppl_qa = self._reused_log_ppl(widths)
        if log_ppl_qa is None:
            log_ppl_qa = self.completion_log_ppl(model, prompt_ids, completion_ids_list)
        standalone = [self.standalone_prompt_ids(p) for p in prompts]
        log_ppl_a = self.completion_log_ppl(model, standalone, completion_ids_list)
        scores = [sar_score(qa, a) for qa, a in zip(log_ppl_qa, log_ppl_a, strict=True)]
        qa_col = [0.0 if v is None else v for v in log_ppl_qa]
        a_col = [0.0 if v is None else v for v in log_ppl_a]
        rows = [
            {**row, SAR_COLUMN: s, SAR_LOG_PPL_COLUMNS[0]: qa, SAR_LOG_PPL_COLUMNS[1]: a}
            for row, s, qa, a in zip(inputs, scores, qa_col, a_col, strict=True)
        ]
        metrics = metric_buffer(self, "train" if self.model.training else "eval")  # this process's rows
        scored = [i for i, n in enumerate(widths) if n > 0]
        if scored:
            for key, values in (("sar/score", scores), ("sar/log_ppl_qa", qa_col), ("sar/log_ppl_a", a_col)):
                metrics[key].append(sum(values[i] for i in scored) / len(scored))
        return super()._calculate_rewards(rows, prompts, completions, completion_ids_list)
