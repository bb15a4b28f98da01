r"""DRPO, Decoupled Reward Policy Optimization (Texas A&M, arXiv 2510.04474; methods.md §16), as an **advantage-level
formulation** whose policy gradient equals DRPO's at the sampling policy.

DRPO's per-question objective (`Optimization-AI/DRPO`, `compute_policy_loss_drpo`), over the groups with at least one
correct and one wrong response, divided by the number `Q` of questions in the batch:

$$ J_q(\theta) = \sum_{i \in +} w_i\, s_\theta(o_i) - \tau \log \frac{1}{|-|} \sum_{j \in -} e^{s_\theta(o_j)/\tau},
   \qquad w_i = \frac{e^{(1 - L_i/C)/\lambda}}{\sum_{k \in +} e^{(1 - L_k/C)/\lambda}} $$

with $s_\theta(o) = \frac{1}{|o|}\sum_t \log \pi_\theta(o_t \mid \cdot)$ (mean token log-probability) and the length
preference entering only through the weights $w$ over the **correct** responses. Its gradient is

$$ \nabla J_q = \sum_{i \in +} w_i \nabla s_\theta(o_i) - \sum_{j \in -} \mathrm{softmax}_{j \in -}(s_\theta(o_j)/\tau)
   \, \nabla s_\theta(o_j). $$

So with per-row advantages $A_i = G\, c_i$, $c_i = w_i$ for correct rows and
$-\mathrm{softmax}_j(s_{\theta_{old}}/\tau)$ for wrong rows (0 elsewhere), TRL's `loss_type="grpo"` (per-sequence
token mean, averaged over the `B = Q G` rows) has exactly DRPO's gradient $-\frac1Q \sum_q \nabla J_q$ whenever
the loss is evaluated at the sampling policy: there the PPO ratio is 1 (clipping inactive) and DRPO's KL
trust-region term $\beta \max(KL - \delta, 0) KL$ is 0 with zero gradient. That holds for every micro-batch with
TRL's defaults (`num_iterations=1`, `steps_per_generation = gradient_accumulation_steps`: one optimizer step per
generation batch). With more than one optimizer step per generation batch, the later steps use the weights frozen at
$\theta_{old}$ and TRL's PPO clip instead of DRPO's KL constraint; `DRPOTrainer` warns. We chose this over a
`_compute_loss` replacement because DRPO's per-question terms couple the rows of a group, which TRL's shuffle, split
and process sharding separate.

**vLLM.** With `use_vllm=True`, TRL's `vllm_importance_sampling_correction` (on by default in TRL 1.16) multiplies
every token's loss by a (truncated or masked) ratio $\pi_{\theta_{old}} / \pi_{vLLM}$, so the loss no longer has
DRPO's gradient: each term is reweighted by how far vLLM's sampler drifts from the trainer's weights. DRPO's
released code (verl, vLLM rollouts) has no such correction. Set `vllm_importance_sampling_correction=False` (recipe
`drpo` does, in `configs/drpo.yaml`); `DRPOTrainer` warns when it is left on. The scores below are then the training
model's own log-probs, as DRPO's `old_log_prob`.

The scores $s_{\theta_{old}}$ come from `DRPOTrainer`, which computes them after generation (one extra no-grad
forward pass unless TRL already computed `old_per_token_logps`) and gathers them into the `GroupBatch` as
`batch.extras["drpo_seq_logp"]`.
"""

from __future__ import annotations

import logging
import math

import torch
from accelerate.utils import gather
from trl.models.utils import disable_gradient_checkpointing

from ..core.checks import check_number as _check_number
from ..trainer import ADVANTAGE_ESTIMATORS, EfficientGRPOTrainer, GroupBatch
from ..trainer.trl_internals import loss_mask

logger = logging.getLogger(__name__)

__all__ = ["DRPOAdvantage", "DRPOTrainer", "drpo_advantages"]

SCORES_KEY = "drpo_seq_logp"  # batch.extras key: (B,) mean token log-prob of each completion under the sampling policy


def drpo_advantages(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    scores: torch.Tensor,
    group_size: int,
    length_norm: float,
    lam: float = 0.1,
    tau: float = 10.0,
) -> torch.Tensor:
    r"""`(B,)` DRPO advantages $A_i = G c_i$ (module docstring). `correct` is 1/0/NaN (NaN rows get 0 and are in
    neither set), `lengths` in tokens, `scores` the mean token log-probs, `length_norm` is `C`.

    >>> drpo_advantages(torch.tensor([1., 1., 0., 0.]), torch.tensor([10., 20., 30., 40.]),
    ...                 torch.tensor([-1., -1., -1., -2.]), 4, length_norm=100, lam=0.1, tau=1.0)
    tensor([ 2.9242,  1.0758, -2.9242, -1.0758])
    """
    G = group_size
    c = correct.float().view(-1, G)
    pos, neg = c == 1, c == 0
    valid = pos.any(dim=1, keepdim=True) & neg.any(dim=1, keepdim=True)
    length_logit = (1 - lengths.float().view(-1, G) / length_norm) / lam
    w = torch.softmax(length_logit.masked_fill(~pos, -math.inf), dim=1)  # self-normalised over the correct rows
    s = (scores.float().view(-1, G) / tau).masked_fill(~neg, -math.inf)
    neg_w = torch.softmax(s, dim=1)  # softmax over the wrong rows of s_old / tau
    coef = torch.where(pos, w, torch.zeros_like(w)) - torch.where(neg, neg_w, torch.zeros_like(neg_w))
    coef = torch.where(valid, torch.nan_to_num(coef, nan=0.0), torch.zeros_like(coef))
    return (G * coef).view(-1)


@ADVANTAGE_ESTIMATORS.register("drpo")
class DRPOAdvantage:
    """Advantage estimator `"drpo"`: the advantage-level, on-policy-exact DRPO formulation (module docstring).

    `advantage_kwargs`: `lam` (0.1, paper's λ), `tau` (10, paper's τ), `length_norm` (`C` in tokens; default
    `max_completion_length`, proposed default: DRPO uses the padded response width, which equals its
    `max_response_length`). Positive/negative rows come from the correctness reward column (`> 0.5` is correct), not
    the summed reward. Needs `loss_type="grpo"` and `DRPOTrainer` (for the sampling-policy scores).
    """

    def __init__(self, args, lam: float = 0.1, tau: float = 10.0, length_norm: float | None = None) -> None:
        _check_number("advantage_kwargs['lam']", lam, 1e-12)
        _check_number("advantage_kwargs['tau']", tau, 1e-12)
        if length_norm is None:
            length_norm = getattr(args, "max_completion_length", None)
        _check_number("advantage_kwargs['length_norm']", length_norm, 1)
        loss_type = getattr(args, "loss_type", "grpo")
        if loss_type != "grpo":
            raise ValueError(
                f"advantage_estimator='drpo' needs loss_type='grpo' (the per-sequence token mean is DRPO's score "
                f"s_theta, averaged over rows), got loss_type={loss_type!r}."
            )
        self.lam, self.tau, self.length_norm = float(lam), float(tau), float(length_norm)

    def __call__(self, batch: GroupBatch) -> torch.Tensor:
        scores = batch.extras.get(SCORES_KEY)
        if scores is None:
            raise RuntimeError(
                "advantage_estimator='drpo' needs the sampling policy's per-completion scores, which "
                "trl_efficient.methods.drpo.DRPOTrainer computes (recipe 'drpo' uses it)."
            )
        if batch.correctness_index is None:
            raise RuntimeError("advantage_estimator='drpo' needs a correctness reward (set correctness_reward).")
        # DRPO's only group rule is its own (`compute_policy_loss_drpo`): a group contributes iff it has at least one
        # correct and one wrong response; truncation plays no part.
        return drpo_advantages(
            batch.correct, batch.lengths, scores, batch.group_size, self.length_norm, self.lam, self.tau
        )


class DRPOTrainer(EfficientGRPOTrainer):
    """`EfficientGRPOTrainer` that puts the sampling policy's mean token log-prob of every completion on the gathered
    batch (`batch.extras["drpo_seq_logp"]`, in `run_stages`, before the `group_stages` callables and the `"drpo"`
    estimator run). It reuses TRL's `old_per_token_logps`
    when TRL computed them, else runs one no-grad forward pass over the batch (the cost of TRL's own old-log-prob
    pass). Multimodal inputs are not supported."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.advantage_estimator, DRPOAdvantage):
            raise ValueError("DRPOTrainer needs advantage_estimator='drpo'.")
        if self.correctness_index is None:
            raise ValueError(
                "advantage_estimator='drpo' splits each group by a binary correctness reward: add one (e.g. the "
                "'correctness' builder) or set correctness_reward."
            )
        self._warn_on_vllm_importance_sampling()
        if self.num_iterations > 1 or self.args.steps_per_generation != self.args.gradient_accumulation_steps:
            logger.warning(
                "DRPO: with num_iterations > 1 or steps_per_generation != gradient_accumulation_steps some optimizer "
                "steps are off-policy; the 'drpo' advantages then keep their weights from the sampling policy and "
                "TRL's PPO clip stands in for DRPO's KL trust region."
            )

    def _warn_on_vllm_importance_sampling(self) -> bool:
        """Warn (and return True) when TRL's vLLM importance-sampling correction would reweight DRPO's gradient."""
        if not (self.use_vllm and self.vllm_importance_sampling_correction):
            return False
        logger.warning(
            "DRPO: use_vllm=True with vllm_importance_sampling_correction=True multiplies each token's loss by TRL's "
            "vLLM importance ratio, so the loss no longer has DRPO's gradient (DRPO's code has no such correction); "
            "set vllm_importance_sampling_correction=False for the exact DRPO formulation (recipe 'drpo' does)."
        )
        return True

    @torch.no_grad()
    def _sequence_scores(self, output: dict) -> torch.Tensor:
        if any(key in output for key in ("pixel_values", "num_images")):
            raise NotImplementedError("DRPOTrainer does not support multimodal inputs.")
        logps = output.get("old_per_token_logps")
        if logps is None:
            prompt_completion_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
            attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
            training = self.model.training
            batch_size = self.args.per_device_train_batch_size if training else self.args.per_device_eval_batch_size
            with disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
                logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.model,
                    prompt_completion_ids,
                    attention_mask,
                    output["completion_ids"].size(1),
                    batch_size=batch_size,
                )
        mask = loss_mask(output).to(logps.dtype)
        return (logps * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)

    # Pipeline step 1 (`EfficientGRPOTrainer.run_stages`): the scores go into `batch.extras` before the stages run.
    def run_stages(self, batch: GroupBatch, output: dict) -> None:
        scores = self._sequence_scores(output)
        scores = gather(scores) if self.accelerator.num_processes > 1 else scores
        batch.extras[SCORES_KEY] = scores.detach().float().cpu()
        super().run_stages(batch, output)
