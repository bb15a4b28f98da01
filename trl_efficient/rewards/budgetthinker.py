r"""BudgetThinker (arXiv 2508.17196, methods.md §23): control tokens, the forcing logits processor and the reward.

These pieces live below `eval` and `methods` so that training (`trl_efficient.methods.budgetthinker`) and
`trl-efficient eval --modes budgetthinker:B` share them. The reasoning behind each choice below, the walk through the
released loop and the history of the fixes: docs/structure-methods.md, "BudgetThinker".

**Control tokens.** `<remaining>7/8` ... `<remaining>1/8` (`trl_efficient.prompts.BUDGETTHINKER_CONTROL_TOKENS`),
added by `add_budget_tokens(model, tokenizer)` (released `Preparation/add_special_tokens.py`).

**Forcing.** Released vLLM patch (MobileLLM/BudgetThinker `f0466b9`, `to_replace/vllm/worker/model_runner.py`,
`ModelRunner.execute_model`, mode `remaining=8ratio`), followed over the paper's text `k \lfloor B/K \rfloor`:

.. math:: \Delta = \lfloor B / 8 \rfloor + 1

and the k-th control token (`<remaining>{8-k}/8`, k = 1..7) is the generated token at 0-based position

.. math:: p_k = k\,(\Delta + 1) - 1 = k\,(\lfloor B/8 \rfloor + 2) - 1,

(B = 16: positions 3, 7, ..., 27), stopping after `<remaining>1/8`. `BudgetControlProcessor` (a transformers
`LogitsProcessor`) sets every logit but the control token's to `-inf` at a forced position. Documented choices:
- each row is forced at its own budget (the patch uses the batch's first stated budget for every row);
- self-generated control tokens are suppressed (`-inf`) at non-forced positions; a row left with no finite logit
  (top-k/top-p kept only control tokens) is left untouched;
- `B < 8`: `Δ = 1`, control tokens at generated tokens 1, 3, ..., 13 (the formula, unchanged);
- a row without a budget (`None`): nothing is forced, control tokens are suppressed;
- forcing counts generated tokens only, ignores `</think>` (as the patch); a forced token after EOS becomes padding.

**Reward** (released `easyr1/verl/utils/reward_score/reason_with_in_limit.py` at MobileLLM/BudgetThinker `f0466b9`,
`reason_with_in_limit_compute_score` and `anwser_length_reward`):

.. math::
    r = 0.7\,\mathrm{acc} + 0.15\,\mathrm{format} + 0.15\,\mathrm{len},\qquad \delta = (L - B) / B,

    \mathrm{len} = \begin{cases} 1 & \text{correct and } L \le B \\ \max(0, 1 - 16\delta^2) & L \ge B \\
    \max(0, 1 - \delta^2) & L < B,\ B \ge 1500 \\ \max(0, 1 - 16\delta^2) & L < B,\ B < 1500 \end{cases}

`format` = 1 for `**Final Answer**\boxed{...}`; every branch is clipped at 0 as released, so the reward is in [0, 1].
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ..core.answers import extract_boxed, is_correct
from ..core.checks import check_number, ids_or_none
from ..core.lengths import LengthMeter, completion_text
from ..prompts import BUDGETTHINKER_CONTROL_TOKENS

__all__ = [
    "BudgetControlProcessor",  # noqa: F822  (defined on first access: __getattr__)
    "add_budget_tokens",
    "budget_interval",
    "budgetthinker_format",
    "budgetthinker_length_score",
    "control_token_ids",
    "forced_positions",
    "get_budgetthinker_reward",
]

NUM_PARTS = 8  # [paper] 8 parts, 7 control tokens
FINAL_ANSWER = "**Final Answer**"


def add_budget_tokens(model, tokenizer) -> list[int]:
    """Add the 7 control tokens to `tokenizer` (as special tokens) and make `model`'s embeddings cover them.

    Idempotent: tokens already in the vocabulary are not added again, and the embedding matrix is resized only when
    a control id does not fit (`resize_token_embeddings(len(tokenizer))`). `model` may be `None` (tokenizer only).
    Returns the control ids in forcing order (`<remaining>7/8` first).
    """
    vocab = tokenizer.get_vocab()
    missing = [t for t in BUDGETTHINKER_CONTROL_TOKENS if t not in vocab]
    if missing:
        tokenizer.add_tokens(missing, special_tokens=True)
    ids = control_token_ids(tokenizer)
    if model is not None and max(ids) >= model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(len(tokenizer))
    return ids


def control_token_ids(tokenizer) -> list[int]:
    """The control ids in forcing order; a clear error when the tokenizer lacks them."""
    vocab = tokenizer.get_vocab()
    missing = [t for t in BUDGETTHINKER_CONTROL_TOKENS if t not in vocab]
    if missing:
        raise ValueError(
            f"The tokenizer has no BudgetThinker control tokens {missing}: use a BudgetThinker-trained model (its "
            "tokenizer is saved with them) or call trl_efficient.rewards.budgetthinker.add_budget_tokens(model, "
            "tokenizer) first."
        )
    return [vocab[t] for t in BUDGETTHINKER_CONTROL_TOKENS]


def budget_interval(budget: int | None) -> int | None:
    """`Δ = ⌊B/8⌋ + 1` (released code), or `None` without a budget.

    >>> [budget_interval(b) for b in (None, 1, 7, 8, 100, 6000)]
    [None, 1, 1, 2, 13, 751]
    """
    if budget is None:
        return None
    budget = int(budget)
    if budget <= 0:
        raise ValueError(f"a BudgetThinker budget must be a positive number of tokens, got {budget}.")
    return budget // NUM_PARTS + 1


def forced_positions(budget: int | None, length: int) -> list[int]:
    """0-based completion positions holding control tokens among the first `length` generated tokens: the k-th at
    `k·(Δ + 1) - 1`, k = 1..7 (module docstring: `Δ = ⌊B/8⌋ + 1` free tokens before and between them).

    >>> forced_positions(16, 100)   # Δ = 16 // 8 + 1 = 3: period 4 -> 0-based 3, 7, ..., 27
    [3, 7, 11, 15, 19, 23, 27]
    >>> forced_positions(16, 8), forced_positions(None, 50), forced_positions(3, 20)
    ([3, 7], [], [1, 3, 5, 7, 9, 11, 13])
    """
    delta = budget_interval(budget)
    if delta is None:
        return []
    return [k * (delta + 1) - 1 for k in range(1, NUM_PARTS) if k * (delta + 1) - 1 < length]


@functools.cache
def _budget_control_processor() -> type:
    """`BudgetControlProcessor`, defined on first use: it subclasses transformers' `LogitsProcessor` and computes in
    torch, and this module imports neither at import time, so that the reward (and the recipe registry that declares
    it) loads without them. The module's `__getattr__` hands it out as `BudgetControlProcessor`."""
    import torch
    from transformers import LogitsProcessor

    class BudgetControlProcessor(LogitsProcessor):
        """Force the next control token after every `Δ = ⌊B/8⌋ + 1` free generated tokens of each row (the k-th at
        0-based position `k·(Δ + 1) - 1`, module docstring).

        Args:
            budgets: one budget per row of the `generate` batch (`None`: no forcing for that row), or one `int` (or
                `None`) for every row of any batch.
            control_ids: the 7 control ids in forcing order (`control_token_ids(tokenizer)`).
            prompt_length: the (padded) prompt length; `None` detects it: a call whose `input_ids` are not the previous
                call's plus one token per row starts a new `generate` call, whose prompt length is its current length.
                One processor can then serve several `generate` calls (the eval backend's batches).

        Rows are matched by position: with `num_return_sequences > 1` pass the budgets of the expanded batch.
        """

        def __init__(self, budgets, control_ids, prompt_length: int | None = None) -> None:
            self.broadcast = budgets is None or isinstance(budgets, int)
            self.deltas = [budget_interval(budgets)] if self.broadcast else [budget_interval(b) for b in budgets]
            self.fixed_prompt_length = prompt_length
            self._previous: torch.Tensor | None = None
            self.control_ids = [int(i) for i in control_ids]
            if len(self.control_ids) != NUM_PARTS - 1:
                raise ValueError(f"BudgetControlProcessor needs {NUM_PARTS - 1} control ids, got {self.control_ids}.")
            self.prompt_length = prompt_length

        def forced_token(self, row: int, position: int) -> int | None:
            """The control id forced at 0-based generated `position` of `row`, or `None`."""
            delta = self.deltas[0 if self.broadcast else row]
            if delta is None or (position + 1) % (delta + 1):
                return None
            k = (position + 1) // (delta + 1)
            return self.control_ids[k - 1] if 1 <= k < NUM_PARTS else None

        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
            if self.fixed_prompt_length is None:
                previous, self._previous = self._previous, input_ids.detach().clone()
                continuing = (
                    previous is not None
                    and previous.shape[0] == input_ids.shape[0]
                    and previous.shape[1] + 1 == input_ids.shape[1]
                    and torch.equal(previous.to(input_ids.device), input_ids[:, :-1])
                )
                if not continuing:
                    self.prompt_length = input_ids.shape[1]
            if not self.broadcast and input_ids.shape[0] != len(self.deltas):
                raise ValueError(
                    f"BudgetControlProcessor got {input_ids.shape[0]} rows for {len(self.deltas)} budgets; pass one "
                    "budget per generated sequence."
                )
            return self.apply(scores, input_ids.shape[1] - self.prompt_length)

        def apply(self, scores: torch.FloatTensor, position: int) -> torch.FloatTensor:
            """`scores` (B, V) for the token at 0-based generated `position`: the control tokens suppressed, or the
            forced one alone where one is due (what `__call__` does once it knows the position; the comparison's paired
            sampler calls it directly)."""
            out = scores.clone()
            control = torch.tensor(self.control_ids, device=scores.device)
            out[:, control] = float("-inf")  # suppressed outside the forced positions
            dead = ~torch.isfinite(out).any(dim=-1)
            out[dead] = scores[dead]  # never leave a row without a finite logit
            for row in range(out.shape[0]):
                token = self.forced_token(row, position)
                if token is not None:
                    out[row] = float("-inf")
                    out[row, token] = 0.0
            return out

    BudgetControlProcessor.__qualname__ = "BudgetControlProcessor"  # pickled and shown as the module's attribute
    return BudgetControlProcessor


def __getattr__(name: str):
    """`BudgetControlProcessor` (PEP 562), built on first access by `_budget_control_processor`."""
    if name == "BudgetControlProcessor":
        return _budget_control_processor()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def budgetthinker_format(text: str) -> int:
    r"""1 when the completion ends its answer as `**Final Answer**\boxed{...}` (released code's format check).

    >>> [budgetthinker_format(t) for t in ("x</think>\n**Final Answer**\\boxed{4}", "**Final Answer** 4", "\\boxed{4}")]
    [1, 0, 0]
    """
    pos = text.rfind(FINAL_ANSWER)
    if pos < 0:
        return 0
    rest = text[pos + len(FINAL_ANSWER) :].lstrip()
    return int(bool(re.match(r"\\boxed\s*\{", rest)) and extract_boxed(rest) is not None)


def budgetthinker_length_score(length: float, budget: float, correct: bool, long_budget: float = 1500) -> float:
    """`len` of the reward (module docstring; released `anwser_length_reward`, every branch clipped at 0);
    `long_budget` is the released code's 1500-token threshold.

    >>> budgetthinker_length_score(90, 100, True), budgetthinker_length_score(110, 100, True)  # 1 ; 1 - 16 * 0.01
    (1.0, 0.84)
    >>> budgetthinker_length_score(50, 100, False)   # δ = -0.5: max(0, 1 - 16 * 0.25) = max(0, -3)
    0.0
    >>> budgetthinker_length_score(90, 100, False)   # δ = -0.1, B < 1500: max(0, 1 - 16 * 0.01)
    0.84
    >>> budgetthinker_length_score(1000, 2000, False)  # δ = -0.5, B >= 1500: max(0, 1 - 0.25)
    0.75
    """
    if correct and length <= budget:
        return 1.0
    delta = (length - budget) / budget
    if length < budget and budget >= long_budget:
        return max(0.0, 1.0 - delta**2)
    return max(0.0, 1.0 - 16.0 * delta**2)  # L >= B (any budget), or L < B with B < 1500


def get_budgetthinker_reward(
    accuracy_weight: float = 0.7,
    format_weight: float = 0.15,
    length_weight: float = 0.15,
    long_budget: int = 1500,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _BudgetThinkerReward:
    r"""BudgetThinker's RL reward `0.7 acc + 0.15 format + 0.15 len` (arXiv 2508.17196, methods.md §23; formula in
    the module docstring). Reads the per-row `budget` column (`rollout_plan="budgetthinker"`); a row whose budget
    is `None` gets `len = 0` (documented choice: the paper always states a budget). Unscorable answers -> `None`.

    Args:
        accuracy_weight, format_weight, length_weight (`float`, defaults `0.7`, `0.15`, `0.15`): [paper].
        long_budget (`int`, default `1500`): [code] budgets from here on use the mild `max(0, 1 - δ²)` below `B`.
        length_unit, length_scope, tokenizer: see `trl_efficient.core.lengths.LengthMeter` (control tokens count).

    >>> reward = get_budgetthinker_reward()
    >>> reward(completions=["a</think>\n**Final Answer**\\boxed{4}", "a</think>\\boxed{5}"], solution=["4", "4"],
    ...        completion_ids=[[0] * 80, [0] * 120], budget=[100, 100])  # 0.7 + 0.15 + 0.15 ; 0.15 * (1 - 16 * 0.04)
    [1.0, 0.054]
    """
    for name, value in (
        ("accuracy_weight", accuracy_weight),
        ("format_weight", format_weight),
        ("length_weight", length_weight),
    ):
        check_number(name, value)
    check_number("long_budget", long_budget, 1)
    weights = (float(accuracy_weight), float(format_weight), float(length_weight))
    return _BudgetThinkerReward(weights, float(long_budget), LengthMeter(length_unit, length_scope, tokenizer))


class _BudgetThinkerReward:
    __name__ = "budgetthinker_reward"

    def __init__(self, weights, long_budget: float, meter: LengthMeter) -> None:
        self.accuracy_weight, self.format_weight, self.length_weight = weights
        self.long_budget, self.meter = long_budget, meter

    def __call__(self, completions: list, solution: list, completion_ids: list | None = None, **kwargs) -> list:
        n = len(completions)
        if kwargs.get("budget") is None:
            raise ValueError("budgetthinker_reward needs the per-row `budget` column (rollout_plan='budgetthinker').")
        ids = ids_or_none(completion_ids, n)
        out: list[float | None] = []
        for completion, gold, row_ids, budget in zip(completions, solution, ids, kwargs["budget"], strict=True):
            text = completion_text(completion)
            correct = is_correct(text, gold)
            if correct is None:
                out.append(None)
                continue
            length = self.meter(text, row_ids)
            score = 0.0 if budget is None else budgetthinker_length_score(length, budget, correct, self.long_budget)
            value = (
                self.accuracy_weight * float(correct)
                + self.format_weight * budgetthinker_format(text)
                + self.length_weight * score
            )
            out.append(round(value, 12))
        return out
