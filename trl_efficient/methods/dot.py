r"""DOT, Dynamic Outlier Truncation (USTC/Xiaohongshu, "Anti-Length Shift", arXiv 2601.03969; methods.md §21).

Released code: `U-rara/DOT`, `projects/dot/length_truncation.py` (`apply_length_truncation`) and
`projects/dot/dot_ray_trainer.py` (`AdaptiveDynamicSamplingStats`, the predictive dynamic sampling).

What this module adds, on top of `DLERTrainer`'s post-hoc truncation and dynamic-sampling refill (`methods/dler.py`),
whose helpers it reuses (decode and re-score the cut rows, mask past the cut, move rows between generation batches):

- `dot_cut_lengths`: in groups whose success rate is >= `success_threshold` (1.0), rows longer than
  $T(q) = \lfloor \bar L + \alpha\, s_L \rfloor$ by at least the margin `m` are cut to $T(q)$;
- `PassRateWindow`: the predictive oversampling factor from a 20-step window of pass rates;
- completion filter `"dot"` (`DOTFilter`): DAPO's zero-variance filter with DOT's settings (its `filter_kwargs`) and
  the window, saved in every checkpoint (`dot_sampling`);
- `DOTTrainer`: cuts and re-scores every training batch, then refills it as `DLERTrainer` does, the first refill pass
  drawing the predicted number of prompts at once.

**Small groups.** With $G$ samples, no sample's z-score (sample std) can exceed $(G-1)/\sqrt{G}$ (`max_z_score`): with
the paper's $\alpha = 3$ nothing is ever cut when $G < 11$ ($G = 10$: 2.85). The paper runs $G = 32$ (max 5.48). At
small $G$ pass a smaller `alpha` in `filter_kwargs`; `DOTTrainer` warns at construction when `alpha` makes every cut
impossible.

**Left out.** The KL-Cov loss (methods.md §21: optional; TRL's `dapo` loss with clip-higher is the proposed default).
"""

from __future__ import annotations

import logging
import math

import torch

from ..core.checks import check_number as _check_number
from ..core.state import StatefulComponent
from ..trainer import COMPLETION_FILTERS, GroupBatch
from ..trainer.trl_internals import metric_buffer
from .dler import DADLERAdvantage, DLERTrainer, DynamicSamplingFilter

logger = logging.getLogger(__name__)

__all__ = ["DOTFilter", "DOTTrainer", "PassRateWindow", "dot_cut_lengths", "effective_margin", "max_z_score"]

MIN_FRACTION_MARGIN = 16  # tokens: the floor of a fractional margin (length_truncation.py)


def max_z_score(group_size: int) -> float:
    r"""Largest z-score (sample std) any sample of a group of `group_size` can have: $(G-1)/\sqrt{G}$, reached by one
    outlier among $G-1$ equal values. $T(q)$ can only be exceeded when $\alpha$ is below it.

    >>> round(max_z_score(8), 4), round(max_z_score(10), 4), round(max_z_score(11), 4), round(max_z_score(32), 4)
    (2.4749, 2.846, 3.0151, 5.4801)
    """
    return (group_size - 1) / math.sqrt(group_size) if group_size > 0 else 0.0


def effective_margin(length: int, margin: float) -> int:
    """The margin `m` for a response of `length` tokens: `0 < m < 1` is a fraction of the length with a floor of 16
    tokens, `max(int(length * m), 16)`; otherwise `int(m)` tokens (`length_truncation.py`).

    >>> effective_margin(100, 32), effective_margin(100, 0.5), effective_margin(100, 0.1), effective_margin(100, 0)
    (32, 50, 16, 0)
    """
    if 0.0 < margin < 1.0:
        return max(int(length * margin), MIN_FRACTION_MARGIN)
    return int(margin)


def dot_cut_lengths(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    group_size: int,
    success_threshold: float = 1.0,
    alpha: float = 3.0,
    margin: float = 32,
) -> torch.Tensor:
    r"""DOT's outlier cut (arXiv 2601.03969, methods.md §21; `U-rara/DOT` `projects/dot/length_truncation.py`):
    `(B,)` cut length of every row, 0 = keep.

    For a group $q$ with success rate $\ge$ `success_threshold` and at least one correct row, over all its $G$ lengths:

    $$ T(q) = \Big\lfloor \bar L + \alpha\, s_L \Big\rfloor, \qquad
       s_L = \sqrt{\tfrac{1}{G-1} \textstyle\sum_i (L_i - \bar L)^2}, \qquad
       L_i \leftarrow T(q) \ \text{ if } L_i - T(q) \ge m_i , $$

    with $s_L = 0$ for $G = 1$ and $m_i$ = `effective_margin(L_i, margin)`. Defaults as in the released code:
    threshold 1.0, $\alpha = 3$, $m = 32$. The success rate is taken over the scorable rows (a group with none is
    untouched); the released code counts rewards equal to 1.0 over all rows, which is the same when every row is
    scored. Edge choice (not in the paper): $T(q) \ge 1$, so no response is cut to nothing.

    >>> ten, hundred = [10.0] * 11, [100.0]   # mean 17.5, s = sqrt(675) = 25.98
    >>> dot_cut_lengths(torch.ones(12), torch.tensor(ten + hundred), 12, alpha=2.0, margin=16).tolist()[-2:]
    [0, 69]
    """
    n = lengths.shape[0]
    L = lengths.double().view(-1, group_size)
    acc = torch.nanmean(correct.float().view(-1, group_size), dim=1)
    any_correct = (correct.view(-1, group_size) == 1).any(dim=1)
    easy = (torch.nan_to_num(acc, nan=-1.0) >= success_threshold) & any_correct
    std = L.std(dim=1, unbiased=True) if group_size > 1 else torch.zeros(L.shape[0], dtype=L.dtype)
    cutoff = torch.floor(L.mean(dim=1) + alpha * std).clamp(min=1.0).long()  # (groups,)
    cuts = torch.zeros(n, dtype=torch.long)
    for g in torch.nonzero(easy).flatten().tolist():
        t = int(cutoff[g])
        for j in range(group_size):
            i = g * group_size + j
            length = int(lengths[i])
            if length > t and length - t >= effective_margin(length, margin):
                cuts[i] = t
    return cuts


class PassRateWindow:
    r"""Predictive dynamic sampling (`U-rara/DOT` `projects/dot/dot_ray_trainer.py`, `AdaptiveDynamicSamplingStats`;
    methods.md §21): a window of the last `history_window` (20) pass rates $p$ (share of sampled groups that survive
    the zero-variance filter after truncation) predicts the next step's oversampling factor

    $$ f = \mathrm{clip}\Big(\frac{1 + \mathrm{std}(p)}{\mathrm{mean}(p)},\ f_{\min},\ f_{\max}\Big), $$

    with `np.std` (population) as in the code, $f = f_{\max}$ when the mean is 0, and `initial_factor` (1.5) while
    the window is empty; $f_{\min} = 1.2$, $f_{\max} = 3.0$ (class default; the released script passes 5.0).

    >>> w = PassRateWindow()
    >>> w.factor(); w.record(0.5); w.factor(); w.record(0.25); w.factor()   # 1/.5 | 1.125/.375 = 3
    1.5
    2.0
    3.0
    """

    def __init__(
        self, history_window: int = 20, initial_factor: float = 1.5, min_factor: float = 1.2, max_factor: float = 3.0
    ) -> None:
        self.history_window = int(history_window)
        self.initial_factor, self.min_factor, self.max_factor = float(initial_factor), float(min_factor), max_factor
        self.rates: list[float] = []

    def record(self, pass_rate: float) -> None:
        self.rates = [*self.rates, float(pass_rate)][-self.history_window :]

    def factor(self) -> float:
        if not self.rates:
            return self.initial_factor
        mean = sum(self.rates) / len(self.rates)
        if mean <= 0:
            return float(self.max_factor)
        std = math.sqrt(sum((p - mean) ** 2 for p in self.rates) / len(self.rates))
        return float(min(max((1.0 + std) / mean, self.min_factor), self.max_factor))

    def state_dict(self) -> dict:
        return {"rates": list(self.rates)}

    def load_state_dict(self, state: dict) -> None:
        self.rates = [float(p) for p in state["rates"]][-self.history_window :]


@COMPLETION_FILTERS.register("dot")
class DOTFilter(DynamicSamplingFilter, StatefulComponent):
    """Completion filter `"dot"`: DAPO's zero-variance filter (`"dynamic_sampling"`), holding DOT's settings and its
    pass-rate window; it runs only under `DOTTrainer`, which cuts, re-scores and refills (methods.md §21).

    `filter_kwargs`:
    - truncation (`dot_cut_lengths`): `success_threshold` (1.0), `alpha` (3.0; see `max_z_score` for small G),
      `margin` (32 tokens; `0 < margin < 1` is a fraction of the length, at least 16 tokens);
    - predictive sampling (`PassRateWindow`): `history_window` (20), `initial_factor` (1.5), `min_factor` (1.2),
      `max_factor` (3.0, the class default of the released code; its script passes 5.0);
    - refill (`DynamicSamplingFilter`): `max_generation_batches` (2 = the dataloader's batch plus one predictive
      pass, proposed default for DOT's single sampling round), `tol` (1e-6), `on_shortfall` (`"mask"`; the released
      code pads by repeating kept groups instead).

    The window is saved in every checkpoint under `dot_sampling`.
    """

    state_key = "dot_sampling"

    def __init__(
        self,
        args,
        success_threshold: float = 1.0,
        alpha: float = 3.0,
        margin: float = 32,
        history_window: int = 20,
        initial_factor: float = 1.5,
        min_factor: float = 1.2,
        max_factor: float = 3.0,
        max_generation_batches: int = 2,
        tol: float = 1e-6,
        on_shortfall: str = "mask",
    ) -> None:
        super().__init__(args, max_generation_batches=max_generation_batches, tol=tol, on_shortfall=on_shortfall)
        _check_number("filter_kwargs['success_threshold']", success_threshold, 0.0, 1.0)
        _check_number("filter_kwargs['alpha']", alpha, 0.0)
        _check_number("filter_kwargs['margin']", margin, 0.0)
        if margin >= 1:
            _check_number("filter_kwargs['margin'] (>= 1: tokens)", margin, integer=True)
        _check_number("filter_kwargs['history_window']", history_window, 1, integer=True)
        _check_number("filter_kwargs['min_factor']", min_factor, 1.0)
        _check_number("filter_kwargs['max_factor']", max_factor, min_factor)
        _check_number("filter_kwargs['initial_factor']", initial_factor, 1.0)
        self.success_threshold, self.alpha, self.margin = float(success_threshold), float(alpha), margin
        self.window = PassRateWindow(history_window, initial_factor, min_factor, max_factor)

    def attach(self, trainer) -> None:
        """Component contract: `"dot"` cuts and re-scores inside `DOTTrainer`; refuse any other trainer."""
        super().attach(trainer)
        if not isinstance(trainer, DOTTrainer):
            raise ValueError(
                "completion_filter='dot' needs trl_efficient.methods.dot.DOTTrainer, which applies DOT's truncation "
                "and predictive refill (recipe 'dot' uses it)."
            )

    def cut_lengths(self, batch: GroupBatch) -> torch.Tensor:
        return dot_cut_lengths(
            batch.correct, batch.lengths, batch.group_size, self.success_threshold, self.alpha, self.margin
        )

    def state_dict(self) -> dict:
        return self.window.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.window.load_state_dict(state)


class DOTTrainer(DLERTrainer):
    """DOT (methods.md §21) as thin overrides of `DLERTrainer`'s hooks; the GRPO update itself is unchanged.

    Settings come from `completion_filter: dot` and its `filter_kwargs` (`DOTFilter`). In training:

    1. Truncation and re-scoring (`cut_lengths`, called by `DLERTrainer._calculate_rewards` after the first scoring):
       the cuts come from the gathered lengths and correctness (`dot_cut_lengths`), so every rank takes the same
       decision; when a row is cut, the cut ids of the local rows are decoded and every reward function runs a second
       time on the batch, and those rewards replace the first ones (TRL's advantages use them). When no row is cut,
       nothing changes and nothing is scored twice. The `GroupBatch` is built from the re-scoring pass, so its
       lengths are the cut lengths and cut rows count as truncated (no EOS). After TRL's
       `_generate_and_score_completions`, `completion_mask` is zeroed past each cut and `num_items_in_batch`
       recomputed (`DLERTrainer._apply_cuts`), before the group stage.
    2. Predictive dynamic sampling (`refill_prompt_count`, `refill_finished`): the dataloader's batch is generated
       and cut as usual; if it has fewer informative groups than the batch holds, the first refill pass draws
       `floor(B * f) - B` prompts at once (`B` prompts per batch, `f` the window's factor; at least one, rounded up so
       the rows split evenly over processes), and further passes (if `max_generation_batches` allows them) draw `B`
       each, as in `DLERTrainer`. The step's pass rate, the informative share of all groups generated this step,
       is recorded in the window. Not done as in the released code: it draws `B * f` prompts in one generation call
       and always; here the dataloader's `B` prompts come first and the extra is drawn only when they fall short
       (the kept groups are the same kind; no generation is spent when the batch is already full), and a shortfall
       is masked instead of padded with repeated groups.

    Not supported: tools, environments and `rollout_func` (the cut rows are re-decoded), DA-DLER's truncation at the
    same time.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.completion_filter, DOTFilter):
            raise ValueError(
                "DOTTrainer reads its settings from completion_filter='dot' (filter_kwargs: alpha, margin, "
                "success_threshold, ...); set completion_filter='dot'."
            )
        if isinstance(self.advantage_estimator, DADLERAdvantage):
            raise ValueError("DOTTrainer applies DOT's truncation; advantage_estimator='da_dler' would cut twice.")
        if self.correctness_index is None:
            raise ValueError(
                "DOTTrainer reads each group's success rate from the correctness reward: set correctness_reward "
                "(e.g. 'correctness_reward')."
            )
        if self.tools or self.environment_factories is not None or self.rollout_func is not None:
            raise NotImplementedError(
                "DOT re-decodes and re-scores plain completions; tools, environment_factory and rollout_func are not "
                "supported by DOTTrainer."
            )
        self.dot = self.completion_filter
        if self.dot.alpha >= max_z_score(self.num_generations):
            logger.warning(
                "DOT: alpha=%s >= (G-1)/sqrt(G)=%.3f for G=%d, so no response can exceed the cut-off and DOT never "
                "truncates; pass a smaller filter_kwargs['alpha'] (the paper's 3 needs G >= 11).",
                self.dot.alpha,
                max_z_score(self.num_generations),
                self.num_generations,
            )

    def cut_lengths(self, batch: GroupBatch) -> torch.Tensor:
        """DOT's cut (`dot_cut_lengths`) on the gathered batch, with its metrics."""
        cuts = self.dot.cut_lengths(batch)
        acc = batch.group_accuracy()
        metrics = metric_buffer(self, "train")
        metrics["trl_efficient/dot/cut_fraction"].append(float((cuts > 0).float().mean()))
        metrics["trl_efficient/dot/easy_group_fraction"].append(
            float((torch.nan_to_num(acc, nan=-1.0) >= self.dot.success_threshold).float().mean())
        )
        cut_rows = cuts > 0
        if bool(cut_rows.any()):
            removed = (batch.lengths[cut_rows] - cuts[cut_rows].float()).sum()
            metrics["trl_efficient/dot/tokens_removed"].append(float(removed))
        return cuts

    def refill_prompt_count(self, attempt: int, need: int, found: int) -> int:
        """First refill pass: `floor(need * f) - need` prompts (`f` = `PassRateWindow.factor()`), at least one, rounded
        up to a multiple of `world / gcd(world, G)`; later passes: `need`."""
        world = self.accelerator.num_processes
        divisor = world // math.gcd(world, self.num_generations)
        if attempt == 1:
            count = max(int(need * self.dot.window.factor() + 1e-9) - need, 1)
        else:
            count = need
        return -(-count // divisor) * divisor

    def refill_finished(self, informative: list[torch.Tensor]) -> None:
        """Record this step's pass rate (informative groups / groups generated, after truncation) in the window."""
        total = sum(len(m) for m in informative)
        rate = sum(int(m.sum()) for m in informative) / total if total else 0.0
        metrics = metric_buffer(self, "train")
        metrics["trl_efficient/dot/oversample_factor"].append(self.dot.window.factor())  # the factor this step used
        metrics["trl_efficient/dot/pass_rate"].append(rate)
        self.dot.window.record(rate)
