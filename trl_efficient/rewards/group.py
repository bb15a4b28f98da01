r"""
Group-relative length rewards: rewards that need the **whole group** of `G` rollouts of a prompt (group min/max
length, shortest correct length, ...).

TRL calls a reward on each process's slice of rows, and a group may straddle processes (`docs/trl-integration.md`
§9). So `GroupLengthReward` computes `(correct, length)` for its own rows, all-gathers them in rank order
(`gather_rows`, a collective every process reaches), scores whole groups of the global list and returns its own slice.
Group statistics of the local slice instead (open-r1's `len_reward`) are wrong whenever a group straddles ranks. `G`
is the trainer's `group_size` column, else the factory's `num_generations`; a global row count that is not a multiple
of `G` raises a `ValueError`. The subclass contract: docs/adding-a-method.md, "A group reward".

**Outside training** (evaluation scripts, notebooks; no `torch.distributed` process group), pass lists where each
run of `G` consecutive items is one prompt's group, and `num_generations=G`:

>>> reward = get_kimi_length_reward(num_generations=4)
>>> reward(completions=[r"\boxed{1}", r"\boxed{1}", r"\boxed{2}", r"\boxed{2}",   # group 1
...                     r"\boxed{1}", r"\boxed{1}", r"\boxed{1}", r"\boxed{1}"],  # group 2: equal lengths
...        solution=["1"] * 8, completion_ids=[[0] * n for n in (10, 20, 30, 50, 7, 7, 7, 7)])
[0.5, 0.25, 0.0, -0.5, 0.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

from typing import Any

from ..core.answers import is_correct
from ..core.checks import check_number as _check_number
from ..core.lengths import LengthMeter, completion_text

__all__ = [
    "GroupLengthReward",
    "gather_rows",
    "get_kimi_length_reward",
    "get_shorter_better_reward",
    "resolve_group_size",
]


def gather_rows(values: list) -> tuple[list, int]:
    """
    All-gather a per-row list across processes, in rank order.

    Returns `(global_values, offset)`, where `offset` is the global index of this rank's first row (the sum of the
    lower ranks' lengths), so that `global_values[offset:offset + len(values)] == values`. Without an initialised
    `torch.distributed` process group of more than one process, returns `(values, 0)`. Every process must call it
    (it is a collective); items must be picklable.

    >>> gather_rows([3, 4])
    ([3, 4], 0)
    """
    values = list(values)
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch is a dependency
        return values, 0
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() <= 1:
        return values, 0
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, values)
    rank = dist.get_rank()
    offset = sum(len(part) for part in gathered[:rank])
    return [item for part in gathered for item in part], offset


def resolve_group_size(num_generations: int | None, kwargs: dict, factory: str = "get_...()") -> int:
    """
    The group size `G` for a group reward call.

    Prefers the per-row `group_size` column that `EfficientGRPOTrainer` injects (all rows must agree, and so must
    `num_generations` when given); else `num_generations`; else raises a `ValueError` explaining how to provide it.

    >>> resolve_group_size(None, {"group_size": [4, 4]}), resolve_group_size(8, {})
    (4, 8)
    >>> resolve_group_size(None, {}, "get_kimi_length_reward()")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: this reward needs whole groups: pass num_generations=... to get_kimi_length_reward(), or use ...
    """
    column = kwargs.get("group_size")
    if column is not None and len(column) > 0:
        sizes = set()
        for size in column:
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"group_size column must hold positive ints, got {size!r}.")
            sizes.add(size)
        if len(sizes) != 1:
            raise ValueError(f"group_size column must be the same for every row of a call, got {sorted(sizes)}.")
        size = sizes.pop()
        if num_generations is not None and num_generations != size:
            raise ValueError(
                f"num_generations={num_generations} passed to {factory} disagrees with the trainer's group_size "
                f"column ({size}); drop num_generations when training with EfficientGRPOTrainer."
            )
        return size
    if num_generations is not None:
        return num_generations
    raise ValueError(
        f"this reward needs whole groups: pass num_generations=... to {factory}, or use EfficientGRPOTrainer "
        "(it passes a group_size column)."
    )


def _check_num_generations(num_generations: Any) -> None:
    if num_generations is not None and (
        isinstance(num_generations, bool) or not isinstance(num_generations, int) or num_generations < 1
    ):
        raise ValueError(f"num_generations must be a positive int or None, got {num_generations!r}.")


class GroupLengthReward:
    r"""Base of the whole-group rewards (module docstring). Subclasses set `__name__`, `_factory` (named in errors),
    `gathered_columns` (per-row keyword columns appended to each row, `None` per row when absent: `("finished",)` gives
    `(correct, length, finished)` rows) and `_score_group` (or `_score_batch`). A class, not a closure: it pickles.

    >>> class Shortest(GroupLengthReward):  # 1 for the group's shortest finished correct row, else 0
    ...     gathered_columns = ("finished",)
    ...     def _score_group(self, rows):
    ...         best = min((n for c, n, f in rows if c and f is not False), default=None)
    ...         return [float(bool(c) and f is not False and n == best) for c, n, f in rows]
    >>> Shortest(2, LengthMeter())([r"\boxed{1}"] * 2, ["1", "1"], [[0] * 3, [0] * 5], finished=[False, True])
    [0.0, 1.0]
    """

    __name__ = "group_length_reward"
    _factory = "get_...()"
    gathered_columns: tuple[str, ...] = ()

    def __init__(self, num_generations: int | None, meter: LengthMeter) -> None:
        _check_num_generations(num_generations)
        self.num_generations = num_generations
        self.meter = meter

    def _score_group(self, rows: list[tuple]) -> list[float | None]:
        """Rewards of one whole group from its `(correct, length, *gathered_columns)` rows (subclasses that override
        `_score_batch` need not implement it)."""
        raise NotImplementedError(f"{type(self).__name__} implements neither _score_group nor _score_batch")

    def _row_extra(self, completion: Any, ids: list[int] | None, kwargs: dict, i: int) -> Any:
        """A picklable per-row value computed from the row (a repetition flag) and gathered with it; `None` by default.
        `completion` is the row's text; `i` its index in this process's call."""
        return None

    def _row_extras(self, completions: list, completion_ids: list, kwargs: dict, rows: list) -> list:
        """`_row_extra` of every row of this process's call; a subclass may compute them for the whole call at once
        (vectorised), with the same values, or skip work that no score can use (`rows` are the call's own
        `(correct, length, *gathered_columns)` rows, before the gather)."""
        return [self._row_extra(c, ids, kwargs, i) for i, (c, ids) in enumerate(zip(completions, completion_ids))]

    def _score_batch(self, rows: list[tuple], extras: list, group_size: int) -> list[float | None]:
        """Rewards of the whole gathered batch (all processes, global row order) from its rows (as `_score_group`'s)
        and their `_row_extra` values. The default scores each group of `group_size` consecutive rows on its own
        with `_score_group`; batch-level rewards (a ranking across groups) override this."""
        rewards: list[float | None] = []
        for start in range(0, len(rows), group_size):
            rewards.extend(self._score_group(rows[start : start + group_size]))
        return rewards

    def _post_process(self, rewards: list[float | None], kwargs: dict) -> list[float | None]:
        """This process's slice of the rewards, with the call's keywords (Kimi's warm-up reads `trainer_state`)."""
        return rewards

    def __call__(
        self, completions: list, solution: list, completion_ids: list | None = None, **kwargs
    ) -> list[float | None]:
        n = len(completions)
        group_size = resolve_group_size(self.num_generations, kwargs, self._factory)
        if completion_ids is None:
            completion_ids = [None] * n
        texts = [completion_text(completion) for completion in completions]  # each completion's text, once
        columns = [[None] * n if kwargs.get(name) is None else kwargs[name] for name in self.gathered_columns]
        local = [
            (is_correct(text, gold), self.meter(text, ids), *values)
            for text, gold, ids, *values in zip(texts, solution, completion_ids, *columns, strict=True)
        ]
        local = list(zip(local, self._row_extras(texts, completion_ids, kwargs, local), strict=True))
        gathered, offset = gather_rows(local)  # collective: every rank reaches it (group size is resolved identically)
        rows = [row for row, _ in gathered]
        extras = [extra for _, extra in gathered]
        if len(rows) % group_size != 0:
            raise ValueError(
                f"{self.__name__} got {len(rows)} rows in total (all processes), which is not a multiple of the group "
                f"size {group_size}: it needs every rollout of each prompt, with the {group_size} rollouts of a "
                "prompt consecutive. Pass whole groups (or fix num_generations / the group_size column)."
            )
        rewards = self._score_batch(rows, extras, group_size)
        return self._post_process(rewards[offset : offset + n], kwargs)


def get_kimi_length_reward(
    num_generations: int | None = None,
    warmup_ratio: float = 0.1,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _KimiLengthReward:
    r"""
    Kimi k1.5 group-relative length reward (Kimi Team, arXiv 2501.12599, §2.3.3).

    $$ \lambda_i = 0.5 - \frac{L_i - \min_j L_j}{\max_j L_j - \min_j L_j}, \qquad
    r_i = \begin{cases} \lambda_i & \text{correct} \\ \min(0, \lambda_i) & \text{wrong} \end{cases} $$

    over the `G` rollouts of one prompt ($r_i = 0$ when all lengths are equal). The shortest rollout gets +0.5
    and the longest -0.5; wrong answers can only lose. Lengths are in `length_unit` (tokens by default). A row whose
    gold cannot be parsed gets `None` but its length still counts in the group's min/max.

    The paper adds this term "with a weighting parameter" that is not published; apply it with `reward_weights`
    (proposed default 0.4, LASER's reimplementation). Note that a long correct answer (-0.5) can score below a
    short wrong one (0): compare it with the correctness reward's weight. Warm-up: every scorable row gets 0 while
    `trainer_state.global_step < warmup_ratio * trainer_state.max_steps` (standard RL first, as in the paper); with
    no `trainer_state` (called outside a trainer) there is no warm-up.

    Args:
        num_generations (`int`, *optional*):
            Group size `G`. Leave `None` under `EfficientGRPOTrainer` (it passes a `group_size` column); required
            otherwise.
        warmup_ratio (`float`, *optional*, defaults to `0.1`):
            Fraction of `max_steps` without the term (proposed default), in [0, 1].
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `kimi_length_reward`.

    >>> reward = get_kimi_length_reward(num_generations=2)
    >>> reward(completions=[r"\boxed{1}", r"\boxed{2}"], solution=["1", "1"], completion_ids=[[0] * 30, [0] * 10])
    [-0.5, 0.0]
    """
    _check_number("warmup_ratio", warmup_ratio, 0.0, 1.0)
    return _KimiLengthReward(num_generations, LengthMeter(length_unit, length_scope, tokenizer), float(warmup_ratio))


class _KimiLengthReward(GroupLengthReward):
    __name__ = "kimi_length_reward"
    _factory = "get_kimi_length_reward()"

    def __init__(self, num_generations: int | None, meter: LengthMeter, warmup_ratio: float) -> None:
        super().__init__(num_generations, meter)
        self.warmup_ratio = warmup_ratio

    def _score_group(self, rows):
        lengths = [length for _, length in rows]
        shortest, longest = min(lengths), max(lengths)
        rewards: list[float | None] = []
        for correct, length in rows:
            if correct is None:
                rewards.append(None)
                continue
            lam = 0.0 if longest == shortest else 0.5 - (length - shortest) / (longest - shortest)
            rewards.append(lam if correct else min(0.0, lam))
        return rewards

    def _post_process(self, rewards, kwargs):
        state = kwargs.get("trainer_state")
        if state is None:
            return rewards
        max_steps = getattr(state, "max_steps", 0) or 0
        if max_steps > 0 and state.global_step < self.warmup_ratio * max_steps:
            return [None if r is None else 0.0 for r in rewards]
        return rewards


def get_shorter_better_reward(
    num_generations: int | None = None,
    alpha: float = 2.0,
    beta: float = 0.001,
    length_unit: str = "tokens",
    length_scope: str = "total",
    tokenizer: Any = None,
) -> _ShorterBetterReward:
    r"""
    ShorterBetter reward (Yi, Wang, Li, arXiv 2504.21370, method section "Sample Optimal Length"; α, β from the code,
    `JingyangYi/ShorterBetter`): correctness minus the distance to the group's Sample Optimal Length.

    $$ \mathrm{SOL} = \begin{cases} \min\{L_j : o_j \text{ correct}\} & \text{any correct} \\
    \tfrac1G \sum_j L_j & \text{otherwise} \end{cases}, \qquad
    r_i = \alpha\,\mathbb{1}[\text{correct}_i] - \beta\,|L_i - \mathrm{SOL}| $$

    over the `G` rollouts of one prompt, lengths in `length_unit` (tokens by default). At the code defaults
    ($\alpha = 2$, $\beta = 0.001$) a 2000-token deviation cancels a correct answer's reward. A row whose gold
    cannot be parsed gets `None`, counts as not correct for SOL, and its length counts in the mean.

    Args:
        num_generations (`int`, *optional*):
            Group size `G`. Leave `None` under `EfficientGRPOTrainer` (it passes a `group_size` column); required
            otherwise.
        alpha (`float`, *optional*, defaults to `2.0`): Correctness reward.
        beta (`float`, *optional*, defaults to `0.001`): Penalty per unit of length (token) of distance to SOL, >= 0.
        length_unit, length_scope, tokenizer: See `trl_efficient.core.lengths.LengthMeter`.

    Returns a picklable callable named `shorter_better_reward`.

    >>> reward = get_shorter_better_reward(num_generations=2, beta=0.25)
    >>> reward(completions=[r"\boxed{1}", r"\boxed{1}", r"\boxed{2}", r"\boxed{2}"], solution=["1"] * 4,
    ...        completion_ids=[[0] * n for n in (4, 8, 4, 12)])  # SOL 4 ; SOL mean(4, 12) = 8
    [2.0, 1.0, -1.0, -1.0]
    """
    _check_number("alpha", alpha)
    _check_number("beta", beta, 0.0)
    meter = LengthMeter(length_unit, length_scope, tokenizer)
    return _ShorterBetterReward(num_generations, meter, float(alpha), float(beta))


class _ShorterBetterReward(GroupLengthReward):
    __name__ = "shorter_better_reward"
    _factory = "get_shorter_better_reward()"

    def __init__(self, num_generations: int | None, meter: LengthMeter, alpha: float, beta: float) -> None:
        super().__init__(num_generations, meter)
        self.alpha = alpha
        self.beta = beta

    def _score_group(self, rows):
        correct_lengths = [length for correct, length in rows if correct]
        if correct_lengths:
            sol = float(min(correct_lengths))
        else:
            sol = sum(length for _, length in rows) / len(rows)
        return [
            None if correct is None else self.alpha * float(correct) - self.beta * abs(length - sol)
            for correct, length in rows
        ]
