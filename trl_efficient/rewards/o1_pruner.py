r"""
O1-Pruner's length-harmonizing weight as an online GRPO reward (Luo et al., "O1-Pruner: Length-Harmonizing Fine-Tuning
for O1-Like Reasoning Pruning", arXiv 2501.12570; methods.md §10).

The paper is an offline, off-policy method: each pre-sampled solution gets the weight
$w = \bar L_{\text{ref}}/L - 1 + \alpha (c - \bar a_{\text{ref}})$, clipped to $[-2, 4]$ and standardised over the
dataset (released code: the authors' O1-Pruner repository at 04c0863, `o1_scripts/construct_dataset.py`,
`generate_pruning_dataset`).
methods.md §10's proposed default for GRPO: use $w$ as the reward, with the per-prompt reference statistics
$\bar L_{\text{ref}}$, $\bar a_{\text{ref}}$ sampled once, before training, from the frozen initial model
(`trl_efficient.methods.o1_pruner`, which adds them as the columns `o1_ref_length` and `o1_ref_accuracy`).
"""

from __future__ import annotations

import math
from typing import Any

from ..core.answers import is_correct
from ..core.lengths import LengthMeter, completion_text
from ..core.state import StatefulComponent

__all__ = [
    "O1_ALPHA",
    "O1_CLIP",
    "O1_K",
    "O1_PRUNER_REWARD_PROPOSED_DEFAULTS",
    "REF_ACCURACY_COLUMN",
    "REF_LENGTH_COLUMN",
    "get_o1_pruner_reward",
    "o1_pruner_weight",
]

O1_ALPHA = 5.0  # accuracy weight [code] (the paper's alpha; construct_dataset.py takes it as an argument)
O1_CLIP = (-2.0, 4.0)  # [code] lower_bound / upper_bound of construct_dataset.py
# reference samples per problem [code] (methods.md §10; construct_dataset.py's --K defaults to 16): the reference
# statistics this reward reads are means over O1_K samples (trl_efficient.methods.o1_pruner samples them)
O1_K = 12
REF_LENGTH_COLUMN = "o1_ref_length"
REF_ACCURACY_COLUMN = "o1_ref_accuracy"

O1_PRUNER_REWARD_PROPOSED_DEFAULTS = (
    "O1-Pruner weight used online as the GRPO reward; GRPO's group normalisation replaces the offline dataset "
    "standardisation (methods.md §10)",
    "O1-Pruner: an empty completion (length 0, or no text) gets the lower clip -2 (the released code divides by zero)",
    "O1-Pruner correctness needs a closed </think> and reads the answer after it, the check of the reference pre-pass",
)


def o1_pruner_weight(
    length: float,
    correct: float,
    ref_length: float,
    ref_accuracy: float,
    alpha: float = O1_ALPHA,
    clip: tuple[float, float] = O1_CLIP,
) -> float:
    r"""
    The O1-Pruner weight of one solution (arXiv 2501.12570, Eq. of the length-harmonizing objective; methods.md §10;
    released code `construct_dataset.py`: `length_term = (avg_length - length) / length`,
    `acc_term = alpha * (correctness - avg_acc)`, then clipped to `[lower_bound, upper_bound]`):

    $$ w = \mathrm{clip}\Bigl(\frac{\bar L_{\text{ref}}}{L} - 1 + \alpha\,(c - \bar a_{\text{ref}}),\; -2,\; 4\Bigr) $$

    `length` $L$ and `ref_length` $\bar L_{\text{ref}}$ are in the same unit (the recipe's `LengthMeter`), `correct`
    $c \in \{0, 1\}$, `ref_accuracy` $\bar a_{\text{ref}} \in [0, 1]$.

    Edge case (proposed default): $L \le 0$ (an empty completion) returns the **lower clip**. The paper's ratio is
    undefined there and the released code divides by zero; treating $L$ as one token instead would give an empty,
    wrong completion $\bar L_{\text{ref}} - 1 - \alpha \bar a_{\text{ref}}$, usually the *upper* clip, i.e. reward
    the degenerate output most. The lower clip is the least any completion can get, so emptiness never pays.
    $\bar L_{\text{ref}} = 0$ (every reference sample empty in this scope) is a valid input: $w = -1 + \alpha(c -
    \bar a_{\text{ref}})$, clipped.

    >>> o1_pruner_weight(100, 1, 150, 0.5)   # 1.5 - 1 + 5 * 0.5 = 3.0
    3.0
    >>> o1_pruner_weight(50, 1, 400, 0.5)    # 8 - 1 + 2.5 = 9.5 -> upper clip
    4.0
    >>> o1_pruner_weight(0, 0, 400, 0.5)     # empty completion -> lower clip
    -2.0
    """
    low, high = clip
    if not low <= high:
        raise ValueError(f"clip must be (low, high) with low <= high, got {clip!r}.")
    if length <= 0:
        return float(low)
    weight = ref_length / length - 1.0 + alpha * (float(correct) - ref_accuracy)
    return float(min(max(weight, low), high))


def _check_reference(name: str, value: Any, upper: float | None) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0 or (upper is not None and number > upper):
        bound = f"[0, {upper:g}]" if upper is not None else ">= 0"
        raise ValueError(
            f"o1_pruner reward: column {name!r} must be {bound}, got {value!r}; rebuild the reference statistics "
            "(trl_efficient.methods.o1_pruner.prepare_dataset)."
        )
    return number


def get_o1_pruner_reward(
    alpha: float = O1_ALPHA,
    clip: tuple[float, float] | list[float] = O1_CLIP,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
    require_think_close: bool = True,
    reference: dict | None = None,
) -> _O1PrunerReward:
    r"""
    O1-Pruner's length-harmonizing weight as a per-completion reward (`o1_pruner_weight`; methods.md §10, proposed
    default "expose it as a reward w with alpha = 5, clipped to [-2, 4]"):

    $$ r_i = \mathrm{clip}\Bigl(\frac{\bar L_{\text{ref}}(q)}{L_i} - 1 + \alpha\,(c_i - \bar a_{\text{ref}}(q)),
    \; -2,\; 4\Bigr) $$

    with $\bar L_{\text{ref}}(q)$ and $\bar a_{\text{ref}}(q)$ the mean length and accuracy of $K$ samples of the
    frozen initial model on the prompt (columns `o1_ref_length`, `o1_ref_accuracy`, added by
    `trl_efficient.methods.o1_pruner.prepare_dataset` in the same length unit and scope).

    The offline method standardises the clipped weights over the whole dataset; in GRPO the group normalisation of the
    advantage plays that role (proposed default), so the reward is the raw clipped weight.

    Edge cases (documented values, never NaN):
    - an empty completion ($L = 0$, or whitespace-only text, e.g. EOS alone) gets the lower clip (see
      `o1_pruner_weight`);
    - no thinking block: with `require_think_close=True` (default, the check the reference pre-pass used, so $c$ and
      $\bar a_{\text{ref}}$ agree) it is wrong, $c = 0$; its length is measured as usual (under
      `length_scope="thinking"` the whole completion counts as thinking, see `LengthMeter`);
    - a closed thinking block with no answer after it: $c = 0$, the formula applies;
    - a gold answer that does not parse: `None` (the row is not scored), as every correctness-based reward;
    - a reference column that is missing, negative, NaN or an accuracy above 1: `ValueError` naming the column.

    Args:
        alpha (`float`, *optional*, defaults to `5.0`): weight of the accuracy term [code].
        clip (`tuple[float, float]`, *optional*, defaults to `(-2.0, 4.0)`): clipping range [code].
        length_unit, length_scope, tokenizer: see `trl_efficient.core.lengths.LengthMeter`; must be the reference
            statistics' unit and scope (the recipe passes the config's to both).
        require_think_close (`bool`, *optional*, defaults to `True`): a completion without `</think>` is wrong.
        reference (`dict`, *optional*): the reference-statistics payload this run trained with (`{"key": ...,
            "stats": [...]}`, see `trl_efficient.methods.o1_pruner`). It is the reward's checkpointed state: written
            to every checkpoint, and a resume whose statistics differ from the checkpoint's is an error.

    Returns a picklable, stateful callable named `o1_pruner_reward`.

    >>> reward = get_o1_pruner_reward(length_unit="chars")
    >>> reward(completions=["<think>ab</think>\\boxed{4}", "", "\\boxed{4}"], solution=["4", "4", "4"],
    ...        o1_ref_length=[30.0] * 3, o1_ref_accuracy=[0.5] * 3)  # 30/26 - 1 + 2.5; empty; 30/9 - 1 - 2.5
    [2.6538461538461537, -2.0, -0.16666666666666652]
    """
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not math.isfinite(alpha) or alpha < 0:
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}.")
    if (
        not isinstance(clip, tuple | list)
        or len(clip) != 2
        or not all(isinstance(x, int | float) and math.isfinite(x) for x in clip)
        or clip[0] > clip[1]
    ):
        raise ValueError(f"clip must be [low, high] with finite low <= high, got {clip!r}.")
    if not isinstance(require_think_close, bool):
        raise ValueError(f"require_think_close must be a bool, got {require_think_close!r}.")
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _O1PrunerReward(float(alpha), (float(clip[0]), float(clip[1])), meter, require_think_close, reference)


class _O1PrunerReward(StatefulComponent):
    # A class rather than a closure so it pickles for TRL's async rollout worker; stateful so that the reference
    # statistics travel in every checkpoint (trl_efficient/trainer/state.py).
    __name__ = "o1_pruner_reward"
    state_key = "o1_pruner_reference"
    proposed_defaults = O1_PRUNER_REWARD_PROPOSED_DEFAULTS

    def __init__(self, alpha, clip, meter, require_think_close, reference) -> None:
        self.alpha = alpha
        self.clip = clip
        self.meter = meter
        self.require_think_close = require_think_close
        self.reference = dict(reference or {})

    def __call__(
        self,
        completions: list,
        solution: list,
        o1_ref_length: list,
        o1_ref_accuracy: list,
        completion_ids: list | None = None,
        **kwargs,
    ) -> list[float | None]:
        ids_list = [None] * len(completions) if completion_ids is None else completion_ids
        rows = zip(completions, solution, o1_ref_length, o1_ref_accuracy, ids_list, strict=True)
        rewards: list[float | None] = []
        for completion, gold, ref_length, ref_accuracy, ids in rows:
            ref_length = _check_reference(REF_LENGTH_COLUMN, ref_length, None)
            ref_accuracy = _check_reference(REF_ACCURACY_COLUMN, ref_accuracy, 1.0)
            correct = is_correct(
                completion, gold, answer_after_think=True, require_think_close=self.require_think_close
            )
            if correct is None:
                rewards.append(None)
                continue
            text = completion_text(completion)
            length = self.meter(text, ids) if text.strip() else 0
            rewards.append(o1_pruner_weight(length, float(correct), ref_length, ref_accuracy, self.alpha, self.clip))
        return rewards

    def state_dict(self) -> dict:
        return self.reference

    def load_state_dict(self, state: dict) -> None:
        """Resume: the checkpoint's reference statistics must be this run's (the dataset columns were built from
        them), else the rewards of the resumed run would differ."""
        if not state:
            return
        if self.reference and self.reference.get("stats") != state.get("stats"):
            raise ValueError(
                "The checkpoint's O1-Pruner reference statistics differ from this run's; resume with the same "
                "output_dir (its o1_pruner_reference.json) or recipe_kwargs stats, or start a new run."
            )
        self.reference = dict(state)
