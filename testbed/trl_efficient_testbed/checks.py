r"""
Method checks: does each recipe do on the testbed what its paper says it does?

Every check is a claimed **paired difference** with a 95% interval (`testbed.stats.interval`: the same evaluation tasks
and sampling streams for every model, cells paired by task and training seed; 2,000 seeded resamples of the tasks
combined with a Student-t interval over the training seeds) and a three-way verdict (`stats.decide`): **held** when the
interval excludes 0 on the claimed side (and the accuracy side condition holds within its interval: `stats.constraint`),
**not held** when its upper end is below the margin (it excludes every effect of the margin's size on the claimed side:
`TOKEN_MARGIN` x the mean floor in tokens, `FRACTION_MARGIN` for accuracy and other fractions, `PEARSON_MARGIN` for a
correlation), or when the side condition fails beyond its interval, else **inconclusive**. A claim of several parts
combines them (`stats.combine`: any part not held -> not held, all held -> held). The measured values, every difference
and its interval are printed; `differences` holds them as `[point, low, high]`.

The prompt-conditioned recipes are checked against **their matching control under the same prompts** (protocol 1:
`grpo-prompted`, GRPO evaluated under every conditioned recipe's prompts, replaces the base model, `CheckInputs.base`;
`testbed:v2`, like `testbed:formats`, already follows the formats loosely, so "length follows the prompt" alone would
credit the method with what the base model brings; "the base" below is that comparator):

- HBPO: the overshoot past the prefilled budget (max(0, length - budget), mean over the budgets) falls from the base's
  (its reward charges only length past the budget), *and* easy tasks (1-2 ops) get shorter than the base's easy tasks
  without a budget (adaptive: HBPO cuts where little thinking is needed). The budget spread (length at the largest
  budget minus the smallest) is printed but not judged: the v2 base already separates the budgets (docs/testbed.md);
- L1-Exact: mean abs(length - target) falls from the base's *and* the Pearson correlation of target and length rises
  over the base's (a uniform cut that does not follow the target is not L1's claim);
- L1-Max: mean overshoot max(0, length - target) falls from the base's at similar accuracy under the same prompts
  (its reward pays a correct answer for staying under the target, docs/methods.md §6). The Pearson correlation is
  printed, not judged: a maximum is met by any length below it, so the length follows the target only where the
  target binds, and under the Max prompt testbed:v2's base already writes less than 4 of the 5 targets ask
  (docs/testbed.md);
- SABER: the thinking overshoot past the tier's budget (max(0, thinking - tier), mean over the smallest, a middle
  and the largest tier) falls from the base's (the tier gap is printed, not judged, for HBPO's reason);
- DLER / DA-DLER: fewer truncations than the base model at a tighter cap (`TIGHT_CAP_FRACTION` of the cap: 192
  tokens at the testbed's 384; the base model rarely truncates at the full cap), read from the same samples (a
  completion that has not ended within that many tokens), and not longer (tokens within the token margin);
- BudgetThinker: under its budget prompts with the control tokens forced (its final budgets), accuracy above the
  base model's with the control tokens added (fresh embeddings, where its training starts) under the same prompts and
  forcing, *and* the thinking overshoot past the budget falls;
- ASRR: under the no-think prefix, accuracy above the base model's under the same prefix, and fewer tokens than the
  reference's plain evaluation on the same tasks;
- Bingo: a lower redundant share than the reference at similar accuracy;
- DAPO overlong: no more truncations than the reference (non-inferiority: the interval of reference - recipe stays
  above -`FRACTION_MARGIN`); "cannot be judged" where both arms truncate under `FRACTION_MARGIN` at the comparison's
  cap (protocol 9: the cap binds for neither, and a non-inferiority check of a rate both keep near zero is passed by
  anything that does no harm, the placebo included; protocols 1-8 said so only where both rates were exactly 0);
- LSPO, CANON-entropy (which target accuracy, not length): accuracy above the reference's;
- CANON (length; no preset direction, methods.md §26: "a better accuracy-cost frontier"): shorter at similar
  accuracy *or* more accurate at no more tokens (`stats.either`);
- the other length methods: shorter than the reference at similar accuracy (accuracy difference above
  -`ACCURACY_TOLERANCE` within its interval).

The reference is the `grpo` row when the comparison has one, else the base model.

>>> round(pearson([1, 2, 3, 4], [2, 4, 5, 9]), 4), spearman([1, 2, 3, 4], [2, 4, 5, 9])
(0.9648, 1.0)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .specs import BASE_RECIPE, FIXED_PENALTY, SPECS, RecipeSpec
from .stats import (
    Bootstrap,
    Estimate,
    Panel,
    Spread,
    combine,
    constraint,
    decide,
    either,
    interval_at,
    wmean,
    wpearson,
    wratio,
)

__all__ = [
    "ACCURACY_TOLERANCE",
    "CHECKS",
    "FRACTION_MARGIN",
    "PEARSON_MARGIN",
    "SPECIFIC_CHECKS",
    "TIGHT_CAP_FRACTION",
    "TOKEN_MARGIN",
    "TRADE_OFF",
    "CheckInputs",
    "Claim",
    "check",
    "check_modes",
    "claim_check",
    "claim_of",
    "family_of",
    "fraction_noise",
    "is_baseline",
    "method_check",
    "pearson",
    "rank",
    "spearman",
]

ACCURACY_TOLERANCE = 0.04  # "at similar accuracy": the recipe may lose at most this much accuracy
FRACTION_MARGIN = 0.02  # smallest claimed difference of accuracies or fractions that counts as an effect
TOKEN_MARGIN = 0.02  # the same for a difference in tokens, as a fraction of the mean floor
PEARSON_MARGIN = 0.02  # the same for a difference of correlations
EASY_OPS, HARD_OPS = ("1", "2"), ("7", "8")
TIGHT_CAP_FRACTION = 0.5  # DLER's check: truncation at this fraction of the cap (192 of 384 tokens)


@dataclass(frozen=True)
class Claim:
    """A claim a recipe's spec names (`RecipeSpec.claim`, or `RecipeSpec.specific` for protocol 3's checks of what a
    method adds to a fixed length penalty), registered with its check by `@check(name, ...)`.

    `run(c)`: the check, `CheckInputs -> {"claim", "measured", "held", "differences"}`; `needs_reference`: no
    verdict without a reference row; `conditioned`: checked under the recipe's own prompts (`modes`), against the
    base (the recipe's matching control replaces it); `against_base`: the comparator is `CheckInputs.base` (every
    conditioned claim, and DLER's truncations at a tight cap); `controls_evaluated`: the controls evaluated "under
    conditioned" carry its prompts (BudgetThinker's check keeps the base with its control tokens as the only
    comparator); `modes(spec, scale)`: the evaluation modes its check reads (`check_modes`); `following(spec)`: the
    length-following error its check scores (`prompted.following`); `earlier`: the claim whose check protocol 2
    judged by, printed beside a specific check (HBPO).
    """

    name: str
    run: Callable[[CheckInputs], dict]
    needs_reference: bool = True
    conditioned: bool = False
    against_base: bool = False
    controls_evaluated: bool = True
    modes: Callable | None = None
    following: Callable | None = None
    earlier: str | None = None


# The claims, by key, each registered next to its check below; registration order is the order of `CONDITIONED`
# (by claim, then by recipe name), the order of the check prompts a control evaluates under (`jobs.job_modes`,
# part of a run's key). No recipe name is kept here: the specs (`specs/`) name each recipe's claims.
CHECKS: dict[str, Claim] = {}
SPECIFIC_CHECKS: dict[str, Claim] = {}  # protocol 3: what the method adds to a fixed length penalty


def check(name: str, *, specific: bool = False, **attributes) -> Callable:
    """Register the decorated `(CheckInputs) -> dict` as the check of claim `name` (`Claim`'s `attributes`), in
    `SPECIFIC_CHECKS` with `specific`, else in `CHECKS`."""
    table = SPECIFIC_CHECKS if specific else CHECKS

    def register(run: Callable) -> Callable:
        if name in table:
            raise ValueError(f"claim {name!r} already has a check ({table[name].run.__name__}).")
        table[name] = Claim(name, run, **attributes)
        return run

    return register


def __getattr__(name: str):
    """`CONDITIONED`, from the specs on first use (PEP 562): the recipes whose declared claim is conditioned."""
    if name != "CONDITIONED":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return tuple(recipe for claim in CHECKS.values() if claim.conditioned for recipe in sorted(SPECS)
                 if SPECS[recipe].claim == claim.name)  # fmt: skip


def _spec(recipe: str) -> RecipeSpec | None:
    """`recipe`'s spec, checked against the registered claims; `None` for a name without one (a control run)."""
    spec = SPECS.get(recipe)
    if spec is None:
        return None
    for key, table in ((spec.claim, CHECKS), (spec.specific, SPECIFIC_CHECKS)):
        if key is not None and key not in table:
            raise ValueError(f"recipe {recipe!r} declares the testbed claim {key!r}; valid: {sorted(table)}.")
    return spec


def claim_of(recipe: str) -> tuple[str, str | None]:
    """The claims `recipe`'s spec declares (`RecipeSpec.claim`, `RecipeSpec.specific`); a name without a spec (a
    control run) has the default claim, shorter at similar accuracy, and no specific one.

    >>> claim_of("l1-max"), claim_of("hapo"), claim_of("grpo-prompted")
    (('follows-target', None), ('shorter', 'difficulty-aware'), ('shorter', None))
    """
    spec = _spec(recipe)
    return ("shorter", None) if spec is None else (spec.claim, spec.specific)


def claim_info(recipe: str) -> Claim:
    """The registered `Claim` of `recipe`'s method check (`claim_of`)."""
    return CHECKS[claim_of(recipe)[0]]


def family_of(recipe: str) -> str:
    """The method family of `recipe` (`RecipeSpec.family`; "other" without a spec): one panel of the per-difficulty
    small multiples each.

    >>> family_of("hbpo"), family_of("gfpo"), family_of("no-such")
    ('budget / prompted', 'sampling', 'other')
    """
    return SPECS[recipe].family if recipe in SPECS else "other"


def pearson(xs, ys) -> float | None:
    """Pearson correlation, `None` when either side is constant or there are fewer than 2 points."""
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / math.sqrt(sxx * syy)


def rank(xs) -> list[float]:
    """Ranks from 1, ties averaged.

    >>> rank([10, 30, 20, 20])
    [1.0, 4.0, 2.5, 2.5]
    """
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs, ys) -> float | None:
    """Spearman rank correlation (Pearson of the ranks)."""
    return pearson(rank(xs), rank(ys))


def check_modes(recipe: str, scale) -> list:
    """The evaluation modes (`trl_efficient.eval.evaluate.EvalMode`) a recipe's check needs, from its testbed scale
    (`Claim.modes`; none for a claim judged on plain evaluations)."""
    claim = claim_info(recipe)
    return [] if claim.modes is None else claim.modes(SPECS[recipe], scale)


def _budget_modes(spec: RecipeSpec, scale) -> list:
    """HBPO's check prompts: one budget prefill per scaled budget."""
    from trl_efficient.eval.evaluate import parse_mode

    return [m for b in scale.config["budgets"] for m in parse_mode(f"hbpo:{b}")]


def _target_modes(spec: RecipeSpec, scale) -> list:
    """L1's check prompts: five targets spread over the scaled target range, in the spec's prompt family."""
    from trl_efficient.eval.evaluate import parse_mode

    low, high = scale.config["target_length_range"]
    targets = sorted({int(round(low + (high - low) * q)) for q in (0.1, 0.3, 0.5, 0.7, 0.9)})
    return [m for t in targets for m in parse_mode(f"{spec.claim_options['mode']}:{t}")]


def _tier_modes(spec: RecipeSpec, scale) -> list:
    """SABER's check prompts: the smallest, a middle and the largest scaled tier."""
    from trl_efficient.eval.evaluate import EvalMode
    from trl_efficient.prompts import saber_system_prompt

    tiers = scale.recipe_kwargs["tiers"]
    chosen = sorted({tiers[0], tiers[len(tiers) // 2], tiers[-1]})  # the smallest, a middle and the largest tier
    return [EvalMode(f"saber:{t}", system=saber_system_prompt("budget", t), value=t) for t in chosen]


NO_THINK_MODE = "asrr"  # the evaluation mode of the no-think prefix (`trl_efficient.eval.evaluate.parse_mode`)


def _no_think_modes(spec: RecipeSpec, scale) -> list:
    from trl_efficient.eval.evaluate import parse_mode

    return parse_mode(NO_THINK_MODE)


def _forced_budget_modes(spec: RecipeSpec, scale) -> list:
    """BudgetThinker's check prompts: its final epochs' budgets, with the control tokens forced."""
    from trl_efficient.eval.evaluate import parse_mode

    budgets = scale.config["rollout_plan_kwargs"]["final_choices"]
    return [m for b in sorted(budgets) for m in parse_mode(f"budgetthinker:{b}")]


def fraction_noise(p1: float, n1: int | None, p2: float, n2: int | None) -> float:
    """Two standard errors of a difference of two fractions (0 without sample counts): what rows written before
    the bootstrap intervals are judged by (`analysis.worst_ratio_at_kept_accuracy` on old rows).

    >>> round(fraction_noise(0.5, 100, 0.5, 100), 4)
    0.1414
    """
    if not n1 or not n2:
        return 0.0
    return 2 * math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)


@dataclass
class CheckInputs:
    """What a check reads: the recipe's `panel`, the `reference` panel (grpo, else the base; FRUGAL's matching
    control) and its name, the `base` panel and its name `base_name` (the comparator of the conditioned and DLER
    checks: the recipe's matching control under protocol 1, `grpo-prompted` with records under every conditioned
    recipe's prompts, `grpo-cap192`, ...; the base model before it), the mean `floor` in tokens (the token margin is
    `TOKEN_MARGIN` x it), the bootstrap's `resamples` and `seed`, and `alpha`, the one-sided nominal level of the
    look (`protocol.nominal_level`; `None`: 0.025, the plain 95% interval). Every decided part is recorded in
    `parts` as `(estimate, threshold)`, from which `p_value` is computed. `method_check` sets `recipe` (the recipe
    checked, whose spec a check may read) and `tight_cap` (DLER's check)."""

    panel: Panel
    reference: Panel | None = None
    reference_name: str = "-"
    base: Panel | None = None
    floor: float = 0.0
    resamples: int = 2000
    seed: int = 0
    base_name: str = "base"
    alpha: float | None = None
    parts: list = field(default_factory=list)
    constant: Panel | None = None  # the `constant-penalty` control (protocol 3's specific checks compare with it)
    constant_name: str = FIXED_PENALTY
    recipe: str = ""
    tight_cap: int | None = None

    @property
    def token_margin(self) -> float:
        return TOKEN_MARGIN * self.floor

    @property
    def level(self) -> float:
        return 0.025 if self.alpha is None else self.alpha

    def paired(self, a: np.ndarray, b: np.ndarray, den_a=None, den_b=None, mask=None) -> Estimate:
        """`(point, low, high)` of the paired difference of the cells `a` - `b` (both (S, T), the same seeds and
        tasks), each a weighted mean (a ratio of sums with `den_*`), over the tasks in `mask`; each end at the
        one-sided level `level`."""
        boot = Bootstrap(a.shape[0], a.shape[1], self.resamples, self.seed)
        one_a = np.ones_like(a) if den_a is None else den_a
        one_b = np.ones_like(b) if den_b is None else den_b
        return interval_at(boot, lambda w, v: wratio(a, one_a, w, v, mask) - wratio(b, one_b, w, v, mask), self.level)

    def decide(self, estimate, margin: float) -> bool | None:
        """`stats.decide`, recording the part (claimed: above `margin`)."""
        self.parts.append((estimate, max(margin, 0.0)))
        return decide(estimate, margin)

    def constraint(self, estimate, tolerance: float) -> bool | None:
        """`stats.constraint`, recording the part (claimed: above -`tolerance`)."""
        self.parts.append((estimate, -tolerance))
        return constraint(estimate, tolerance)

    def p_value(self, parts=None) -> float | None:
        """The one-sided p-value of the whole claim, an intersection-union test: the largest of its parts'
        (`Spread.p_above` at each part's threshold); `None` when a part has no interval."""
        values = []
        for estimate, threshold in self.parts if parts is None else parts:
            spread = getattr(estimate, "spread", None)
            if spread is None:
                return None
            values.append(spread.p_above(threshold))
        return max(values) if values else None


def _fmt(x, digits=1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _d(est, digits=1) -> str:
    """`+2.3 [+1.1, +3.5]`: a difference and its 95% interval."""
    p, lo, hi = est
    if p is None:
        return "-"
    if lo is None:
        return f"{p:+.{digits}f} [no interval]"
    return f"{p:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def _point(panel: Panel, key: str, mask=None) -> float | None:
    value = wmean(panel.metrics[key], np.ones((1, len(panel.seeds))), np.ones((1, panel.num_tasks)), mask)[0]
    return float(value) if np.isfinite(value) else None


def _result(claim: str, measured: str, held, differences: dict) -> dict:
    return {"claim": claim, "measured": measured, "held": held,
            "differences": {k: list(v) for k, v in differences.items()}}  # fmt: skip


def _similar_accuracy(c: CheckInputs, rec: Panel, ref: Panel) -> tuple[tuple, bool | None, str]:
    d = c.paired(rec.metrics["correct"], ref.metrics["correct"])
    text = (f"accuracy {_fmt(_point(rec, 'correct'), 3)} vs {_fmt(_point(ref, 'correct'), 3)}: diff {_d(d, 3)} "
            f"(allowed >= -{ACCURACY_TOLERANCE})")  # fmt: skip
    return d, c.constraint(d, ACCURACY_TOLERANCE), text


@check("shorter")
def _shorter_at_similar_accuracy(c: CheckInputs) -> dict:
    rec, ref = c.panel.aligned(c.reference)
    d_tokens = c.paired(ref.metrics["tokens"], rec.metrics["tokens"])
    d_acc, similar, acc_text = _similar_accuracy(c, rec, ref)
    measured = (f"tokens {_fmt(_point(rec, 'tokens'))} vs {_fmt(_point(ref, 'tokens'))}: {c.reference_name} - recipe "
                f"{_d(d_tokens)} (margin +-{c.token_margin:.1f}); {acc_text}")  # fmt: skip
    return _result(f"shorter than {c.reference_name} at similar accuracy (>= {c.reference_name} - "
                   f"{ACCURACY_TOLERANCE})", measured, combine(c.decide(d_tokens, c.token_margin), similar),
                   {"tokens_saved": d_tokens, "accuracy": d_acc})  # fmt: skip


@check("not-less-accurate")  # final accuracy, not length (methods.md §20, §26 entropy)
def _not_less_accurate(c: CheckInputs) -> dict:
    rec, ref = c.panel.aligned(c.reference)
    d = c.paired(rec.metrics["correct"], ref.metrics["correct"])
    measured = (f"accuracy {_fmt(_point(rec, 'correct'), 3)} vs {_fmt(_point(ref, 'correct'), 3)}: diff {_d(d, 3)} "
                f"(margin +-{FRACTION_MARGIN})")  # fmt: skip
    return _result(f"more accurate than {c.reference_name} (the method targets accuracy, not length)", measured,
                   c.decide(d, FRACTION_MARGIN), {"accuracy": d})  # fmt: skip


@check("redundant-share")
def _bingo(c: CheckInputs) -> dict:
    rec, ref = c.panel.aligned(c.reference)
    d = c.paired(ref.metrics["redundant_tokens"], rec.metrics["redundant_tokens"], ref.metrics["tokens"],
                 rec.metrics["tokens"])  # fmt: skip
    d_acc, similar, acc_text = _similar_accuracy(c, rec, ref)
    measured = f"redundant share: {c.reference_name} - recipe {_d(d, 3)} (margin +-{FRACTION_MARGIN}); {acc_text}"
    return _result(
        f"fewer insignificant (redundant) tokens than {c.reference_name} at similar accuracy",
        measured,
        combine(c.decide(d, FRACTION_MARGIN), similar),
        {"redundant_share_saved": d, "accuracy": d_acc},
    )


@check("no-more-truncations")
def _dapo(c: CheckInputs) -> dict:
    rec, ref = c.panel.aligned(c.reference)
    d = c.paired(ref.metrics["truncated"], rec.metrics["truncated"])
    measured = (f"truncated {_fmt(_point(rec, 'truncated'), 3)} vs {_fmt(_point(ref, 'truncated'), 3)}: "
                f"{c.reference_name} - recipe {_d(d, 3)} (allowed >= -{FRACTION_MARGIN})")  # fmt: skip
    result = _result(f"no more truncations than {c.reference_name}", measured, c.constraint(d, FRACTION_MARGIN),
                     {"truncations_saved": d})  # fmt: skip
    rates = _point(rec, "truncated"), _point(ref, "truncated")
    if max(rates) < FRACTION_MARGIN:  # protocol 9: the cap binds for neither arm (before: only where both were 0)
        n = rec.metrics["truncated"].size
        result["cannot_judge"] = (f"the comparison's cap binds for neither arm: both truncate under the margin "
                                  f"{FRACTION_MARGIN} (recipe {rates[0]:.3f}, {c.reference_name} {rates[1]:.3f} of "
                                  f"{n} cells), where 'no more truncations' is passed by any arm that does no harm "
                                  f"(the placebo included)")  # fmt: skip
    return result


@check("tight-cap", needs_reference=False, against_base=True)
def _dler(c: CheckInputs) -> dict:
    cap = c.tight_cap
    # protocol 10: DLER's paper claims the cut at equal accuracy, so the check carries "at similar accuracy"
    claim = (f"fewer truncations than {c.base_name} at a {cap}-token cap (half the comparison's cap), not longer, at "
             f"similar accuracy (>= {c.base_name} - {ACCURACY_TOLERANCE})")  # fmt: skip
    if c.base is None:
        return _result(claim, f"no {c.base_name} row", None, {})
    rec, base = c.panel.aligned(c.base)
    d = c.paired(base.metrics["tight_truncated"], rec.metrics["tight_truncated"])
    d_tokens = c.paired(base.metrics["tokens"], rec.metrics["tokens"])
    d_acc, similar, acc_text = _similar_accuracy(c, rec, base)
    measured = (f"truncated at {cap}: {_fmt(_point(rec, 'tight_truncated'), 3)} vs {c.base_name} "
                f"{_fmt(_point(base, 'tight_truncated'), 3)}: {c.base_name} - recipe {_d(d, 3)} (margin "
                f"+-{FRACTION_MARGIN}); "
                f"tokens {_fmt(_point(rec, 'tokens'))} vs {_fmt(_point(base, 'tokens'))}: {c.base_name} - recipe "
                f"{_d(d_tokens)} (allowed >= -{c.token_margin:.1f}); {acc_text}")  # fmt: skip
    held = combine(c.decide(d, FRACTION_MARGIN), c.constraint(d_tokens, c.token_margin), similar)
    return _result(claim, measured, held, {"tight_truncations_saved": d, "tokens_saved": d_tokens, "accuracy": d_acc})


# protocol 3: checks of what the method adds to a fixed length penalty (`SPECIFIC_CLAIMS`, below `_specific`)


def _aligned3(a: Panel, b: Panel, c: Panel) -> tuple[Panel, Panel, Panel]:
    """Three panels on their common seeds (cell (s, t) the same seed and task in all three)."""
    common = [s for s in a.seeds if s in b.seeds and s in c.seeds]
    if not common:
        raise ValueError(f"no common seeds between {a.seeds}, {b.seeds} and {c.seeds}.")
    return a._select(common), b._select(common), c._select(common)


def _relative_cut_gap(rec: Panel, ref: Panel, easy, hard):
    """Per resample: (1 - recipe/ref tokens on easy tasks) - (1 - recipe/ref tokens on hard tasks), each a ratio of
    sums over the same tasks and seeds: how much more of the reference's length the recipe cuts on easy tasks."""
    a, b = rec.metrics["tokens"], ref.metrics["tokens"]
    return lambda w, v: wratio(a, b, w, v, hard) - wratio(a, b, w, v, easy)


def _generic_line(c: CheckInputs) -> dict:
    """The generic line, kept beside a specific check: shorter than the reference at similar accuracy (its own
    parts, not the specific check's)."""
    saved, c.parts = c.parts, []
    result = _shorter_at_similar_accuracy(c)
    result["p_value"] = c.p_value()
    c.parts = saved
    return {k: result[k] for k in ("claim", "measured", "held", "p_value")}


@check("difficulty-aware", specific=True)
def _difficulty_aware(c: CheckInputs) -> dict:
    """LASER-D, HAPO (and HBPO's second part): easy tasks (1-2 ops) cut more than hard ones (7-8 ops), each cut
    relative to the reference's tokens on the same tasks and seeds, by more than constant-penalty's same gap."""
    claim = (
        f"easy tasks (1-2 ops) cut more than hard ones (7-8 ops), relative to {c.reference_name}'s tokens on "
        f"the same tasks, by more than {c.constant_name}'s same gap (a fixed per-token penalty cuts long hard "
        f"tasks more in tokens; the measure is the relative cut per difficulty; margin {FRACTION_MARGIN})"
    )
    if c.reference is None or c.constant is None:
        return _result(claim, f"no {c.reference_name if c.reference is None else c.constant_name} row", None, {})
    rec, ref, cp = _aligned3(c.panel, c.reference, c.constant)
    easy = np.isin(rec.difficulty.astype(str), EASY_OPS)
    hard = np.isin(rec.difficulty.astype(str), HARD_OPS)
    gap_rec, gap_cp = _relative_cut_gap(rec, ref, easy, hard), _relative_cut_gap(cp, ref, easy, hard)
    boot = Bootstrap(len(rec.seeds), rec.num_tasks, c.resamples, c.seed)
    d_rec = interval_at(boot, gap_rec, c.level)
    d_cp = interval_at(boot, gap_cp, c.level)
    d = interval_at(boot, lambda w, v: gap_rec(w, v) - gap_cp(w, v), c.level)

    def cut(p, mask):
        return 1 - float(wratio(p.metrics["tokens"], ref.metrics["tokens"], boot.point_w, boot.point_v, mask)[0])

    measured = (f"relative cut vs {c.reference_name} (seeds {rec.seeds}): easy {cut(rec, easy):+.3f}, hard "
                f"{cut(rec, hard):+.3f}: easy - hard {_d(d_rec, 3)}; {c.constant_name} easy {cut(cp, easy):+.3f}, hard "
                f"{cut(cp, hard):+.3f}: easy - hard {_d(d_cp, 3)}; recipe - {c.constant_name} {_d(d, 3)} (margin "
                f"+-{FRACTION_MARGIN})")  # fmt: skip
    held = combine(c.decide(d_rec, FRACTION_MARGIN), c.decide(d, FRACTION_MARGIN))
    return _result(claim, measured, held, {"easy_minus_hard_cut": d_rec, "constant_penalty_gap": d_cp,
                                           "gap_over_constant_penalty": d})  # fmt: skip


def _seed_estimate(values: list[float]) -> Spread:
    """A mean over training seeds with its Student-t spread (no task part: the quantity is one number a seed)."""
    x = np.asarray(values, dtype=float)
    point = float(x.mean())
    spread = Spread(point, np.array([point]), x if len(x) > 1 else None)
    return spread


@check("adaptive-penalty", specific=True)
def _adlp(c: CheckInputs) -> dict:
    claim = ("the penalty adapts: lambda moves off its bound (mean over the logged steps of (bound - lambda) / bound, "
             f"a seed's one number, above the margin {FRACTION_MARGIN}); a lambda held at its bound is a constant "
             "per-token penalty")  # fmt: skip
    traces = c.panel.logs.get("adlp/lambda")
    if not traces:
        return _result(claim, "no logged adlp/lambda in the run files", None, {})
    bounds = c.panel.logs.get("adlp/lambda_max") or [None] * len(traces)
    tops = [b if b is not None else max(t) for t, b in zip(traces, bounds, strict=True)]
    below = [float(np.mean([(top - x) / top for x in t])) for t, top in zip(traces, tops, strict=True)]
    off = sum(sum(1 for x in t if x < top * (1 - 1e-6)) for t, top in zip(traces, tops, strict=True))
    steps = sum(len(t) for t in traces)
    spread = _seed_estimate(below)
    est = Estimate((spread.point, *spread.bounds(c.level)), spread)
    lows = ", ".join(f"{min(t):.6f}" for t in traces)
    start = sum(1 for t, top in zip(traces, tops, strict=True) if t[0] >= top * (1 - 1e-6))
    measured = (f"lambda bound {tops[0]:.6f} ({'cap' if bounds[0] is not None else 'its largest logged value'}); "
                f"at the bound at the first logged step in {start} of {len(traces)} seeds; {off} of {steps} logged "
                f"steps below it (smallest by seed: {lows}); mean (bound - lambda) / bound {_d(est, 4)} (margin "
                f"+-{FRACTION_MARGIN})")  # fmt: skip
    result = _result(claim, measured, c.decide(est, FRACTION_MARGIN), {"below_bound": est})
    if off == 0:
        result["cannot_judge"] = (
            "the controller never left its cap: as run it is a constant per-token penalty "
            f"(lambda = {tops[0]:.6f} at all {steps} logged steps of {len(traces)} seeds)"
        )
    return result


@check("redundant-vs-fixed-penalty", specific=True)
def _bingo_specific(c: CheckInputs) -> dict:
    claim = (f"insignificant (redundant) tokens cut more than {c.constant_name}'s at comparable length: redundant "
             f"share {c.constant_name} - recipe above {FRACTION_MARGIN}, tokens no more than {c.constant_name}'s + the "
             "token margin")  # fmt: skip
    if c.constant is None:
        return _result(claim, f"no {c.constant_name} row", None, {})
    rec, cp = c.panel.aligned(c.constant)
    d = c.paired(cp.metrics["redundant_tokens"], rec.metrics["redundant_tokens"], cp.metrics["tokens"],
                 rec.metrics["tokens"])  # fmt: skip
    d_tokens = c.paired(cp.metrics["tokens"], rec.metrics["tokens"])
    share = lambda p: float(p.metrics["redundant_tokens"].sum() / p.metrics["tokens"].sum())  # noqa: E731
    measured = (f"redundant share {share(rec):.3f} vs {c.constant_name} {share(cp):.3f} (seeds {rec.seeds}): "
                f"{c.constant_name} - recipe {_d(d, 3)} (margin +-{FRACTION_MARGIN}); tokens "
                f"{_fmt(_point(rec, 'tokens'))} vs {_fmt(_point(cp, 'tokens'))}: {c.constant_name} - recipe "
                f"{_d(d_tokens)} (allowed >= -{c.token_margin:.1f})")  # fmt: skip
    held = combine(c.decide(d, FRACTION_MARGIN), c.constraint(d_tokens, c.token_margin))
    return _result(claim, measured, held, {"redundant_share_cut": d, "tokens_vs_constant_penalty": d_tokens})


@check("budgets-differentiated", specific=True, earlier="budget-overshoot")
def _hbpo_specific(c: CheckInputs) -> dict:
    """HBPO's budgets differentiated: the budget spread (length at the largest budget - the smallest, issue 17)
    above its matching control's, and without a budget easy tasks cut more than hard ones relative to grpo, beyond
    constant-penalty's gap."""
    claim = (
        f"budgets differentiated: the budget spread (length at the largest budget - the smallest) above "
        f"{c.base_name}'s (margin: the token margin), and easy tasks (1-2 ops) cut more than hard ones relative "
        f"to {c.reference_name}'s tokens, beyond {c.constant_name}'s same gap (margin {FRACTION_MARGIN})"
    )
    sorted_modes = _sorted_modes(c, at_least=2)
    if sorted_modes is None:
        return _result(claim, f"no {c.base_name} evaluation under the same prompts", None, {})
    rec, base, names = sorted_modes
    lo, hi = names[0], names[-1]
    spread, b_spread = (p.modes[hi]["lengths"] - p.modes[lo]["lengths"] for p in (rec, base))
    d_spread = c.paired(spread, b_spread)
    held_spread = c.decide(d_spread, c.token_margin)
    aware = _difficulty_aware(c)
    measured = (f"budget spread {float(b_spread.mean()):.1f} ({c.base_name}) -> {float(spread.mean()):.1f}: recipe - "
                f"{c.base_name} {_d(d_spread)} (margin +-{c.token_margin:.1f}); {c.constant_name} has no evaluation "
                f"under the budget prefills (tokens cannot be matched there); {aware['measured']}")  # fmt: skip
    return _result(claim, measured, combine(held_spread, aware["held"]),
                   {"spread_gain": d_spread, **aware["differences"]})  # fmt: skip


def _specific(name: str, c: CheckInputs) -> dict:
    """Protocol 3's check of what the recipe claims beyond a fixed length penalty (its spec's `specific`, a key of
    `SPECIFIC_CHECKS`), with protocol 2's check beside it where the claim names one (`Claim.earlier`) and the generic
    line."""
    claim = SPECIFIC_CHECKS[name]
    result = claim.run(c)
    if claim.earlier is not None:
        saved, c.parts = c.parts, []
        earlier = CHECKS[claim.earlier].run(c)  # protocol 2's check (HBPO: overshoot past the budgets), kept beside
        c.parts = saved
        result["earlier_check"] = {k: earlier[k] for k in ("claim", "measured", "held")}
        tag = {True: "held", False: "not held", None: "inconclusive"}[earlier["held"]]
        result["measured"] += f"; protocol 2's check (overshoot past the budgets falls, easy tasks shorter): {tag}"
    if c.reference is not None:
        result["generic"] = _generic_line(c)
        tag = {True: "held", False: "not held", None: "inconclusive"}[result["generic"]["held"]]
        result["measured"] += f"; generic line ({result['generic']['claim']}): {tag}"
    return result


def _modes_pair(c: CheckInputs) -> tuple[Panel, Panel] | None:
    """The recipe and the base, aligned, when the base has records under every prompt of the recipe."""
    if c.base is None or not c.panel.modes or any(m not in c.base.modes for m in c.panel.modes):
        return None
    return c.panel.aligned(c.base)


def _by_value(panel: Panel, names) -> list[str]:
    return sorted(names, key=lambda m: panel.mode_values.get(m) or 0)


def _sorted_modes(c: CheckInputs, at_least: int = 1) -> tuple[Panel, Panel, list[str]] | None:
    """The recipe and the base aligned (`_modes_pair`) and the recipe's prompt modes by value, smallest first; `None`
    without the base under every prompt, or with fewer than `at_least` modes (a spread needs two)."""
    pair = _modes_pair(c)
    if pair is None or len(c.panel.modes) < at_least:
        return None
    rec, base = pair
    return rec, base, _by_value(rec, rec.modes)


def _mode_means(panel: Panel, names, key="lengths") -> str:
    return ", ".join(f"{panel.mode_values.get(m)}: {float(panel.modes[m][key].mean()):.1f}" for m in names)


def _overshoot(panel: Panel, names, key: str = "lengths") -> np.ndarray:
    """Per (seed, task): max(0, measured - prompted value) averaged over the prompts `names`."""
    return np.mean([np.maximum(panel.modes[m][key] - float(panel.mode_values[m]), 0.0) for m in names], axis=0)


@check("budget-overshoot", needs_reference=False, conditioned=True, against_base=True, modes=_budget_modes,
       following=lambda spec: ("lengths", "over"))  # fmt: skip
def _hbpo(c: CheckInputs) -> dict:
    claim = (f"vs {c.base_name}: under the same budget prefills the overshoot past the budget (max(0, length - "
             "budget), mean over the budgets) falls, and without a budget easy tasks (1-2 ops) get shorter than "
             f"{c.base_name}'s")  # fmt: skip
    sorted_modes = _sorted_modes(c, at_least=2)
    if sorted_modes is None:
        return _result(claim, f"no {c.base_name} evaluation under the same prompts", None, {})
    rec, base, names = sorted_modes
    lo, hi = names[0], names[-1]
    d_over = c.paired(_overshoot(base, names), _overshoot(rec, names))
    spread = rec.modes[hi]["lengths"] - rec.modes[lo]["lengths"]
    b_spread = base.modes[hi]["lengths"] - base.modes[lo]["lengths"]
    d_spread = c.paired(spread, b_spread)
    easy = np.isin(rec.difficulty.astype(str), EASY_OPS)
    d_easy = c.paired(base.metrics["tokens"], rec.metrics["tokens"], mask=easy)
    hard = np.isin(rec.difficulty.astype(str), HARD_OPS)
    gap = lambda p: (_point(p, "tokens", hard) or 0.0) - (_point(p, "tokens", easy) or 0.0)  # noqa: E731
    measured = (f"overshoot {float(_overshoot(base, names).mean()):.1f} ({c.base_name}) -> "
                f"{float(_overshoot(rec, names).mean()):.1f}: {c.base_name} - recipe {_d(d_over)} (margin "
                f"+-{c.token_margin:.1f}); easy tokens {_fmt(_point(base, 'tokens', easy))} ({c.base_name}) -> "
                f"{_fmt(_point(rec, 'tokens', easy))}: {c.base_name} - recipe {_d(d_easy)}; budget spread (not part "
                f"of the "
                f"verdict: the v2 base already follows budgets) {float(b_spread.mean()):.1f} -> "
                f"{float(spread.mean()):.1f}: diff {_d(d_spread)}; hard-easy gap {gap(base):.1f} -> {gap(rec):.1f}; "
                f"by budget: {c.base_name} {_mode_means(base, names)}; trained {_mode_means(rec, names)}")  # fmt: skip
    held = combine(c.decide(d_over, c.token_margin), c.decide(d_easy, c.token_margin))
    return _result(claim, measured, held,
                   {"overshoot_saved": d_over, "easy_tokens_saved": d_easy, "spread_gain": d_spread})  # fmt: skip


@check("follows-target", needs_reference=False, conditioned=True, against_base=True, modes=_target_modes,
       following=lambda spec: ("lengths", spec.claim_options["error"]))  # fmt: skip
def _l1(c: CheckInputs) -> dict:
    exact = SPECS[c.recipe].claim_options["error"] == "abs"  # L1-Exact: |length - target|; L1-Max: the overshoot
    name = "abs(length - target)" if exact else "overshoot max(0, length - target)"
    claim = (f"length follows the prompted target better than {c.base_name} under the same prompts: mean {name} "
             "falls and the target-length Pearson rises" if exact else
             f"vs {c.base_name} under the same maximum-length prompts: the mean overshoot max(0, length - target) "
             f"falls at similar accuracy (>= {c.base_name} - {ACCURACY_TOLERANCE})")  # fmt: skip
    sorted_modes = _sorted_modes(c)
    if sorted_modes is None:
        return _result(claim, f"no {c.base_name} evaluation under the same prompts", None, {})
    rec, base, names = sorted_modes
    targets = [float(rec.mode_values[m]) for m in names]

    def error(p):
        errs = [p.modes[m]["lengths"] - t for m, t in zip(names, targets, strict=True)]
        return np.mean([np.abs(e) if exact else np.maximum(e, 0.0) for e in errs], axis=0)

    d_err = c.paired(error(base), error(rec))
    x = np.stack([np.full_like(rec.modes[m]["lengths"], t) for m, t in zip(names, targets, strict=True)])
    y_rec, y_base = (np.stack([p.modes[m]["lengths"] for m in names]) for p in (rec, base))
    boot = Bootstrap(x.shape[1], x.shape[2], c.resamples, c.seed)
    d_r = interval_at(boot, lambda w, v: wpearson(x, y_rec, w, v) - wpearson(x, y_base, w, v), c.level)
    r = lambda y: wpearson(x, y, boot.point_w, boot.point_v)[0]  # noqa: E731
    measured = (f"mean {'abs(length - target)' if exact else 'overshoot'} {float(error(base).mean()):.1f} "
                f"({c.base_name}) -> {float(error(rec).mean()):.1f}: {c.base_name} - recipe {_d(d_err)} (margin "
                f"+-{c.token_margin:.1f}); pearson "
                f"{_fmt(r(y_base), 2)} -> {_fmt(r(y_rec), 2)}: diff {_d(d_r, 2)}; mean tokens by target: {c.base_name} "
                f"{_mode_means(base, names)}; trained {_mode_means(rec, names)}")  # fmt: skip
    if exact:
        held = combine(c.decide(d_err, c.token_margin), c.decide(d_r, PEARSON_MARGIN))
        return _result(claim, measured, held, {"error_reduction": d_err, "pearson_gain": d_r})
    acc = functools.partial(_mode_accuracy, names=names)
    d_acc = c.paired(acc(rec), acc(base))
    measured += (f"; accuracy under the prompts {float(acc(base).mean()):.3f} ({c.base_name}) -> "
                 f"{float(acc(rec).mean()):.3f}: diff {_d(d_acc, 3)} (allowed >= -{ACCURACY_TOLERANCE}); the Pearson "
                 "is not judged for a maximum")  # fmt: skip
    held = combine(c.decide(d_err, c.token_margin), c.constraint(d_acc, ACCURACY_TOLERANCE))
    return _result(claim, measured, held, {"error_reduction": d_err, "pearson_gain": d_r, "accuracy": d_acc})


@check("tier-overshoot", needs_reference=False, conditioned=True, against_base=True, modes=_tier_modes,
       following=lambda spec: ("thinking", "over"))  # fmt: skip
def _saber(c: CheckInputs) -> dict:
    sorted_modes = _sorted_modes(c, at_least=2)
    if sorted_modes is None:
        return _result("-", f"no {c.base_name} evaluation under the tier prompts", None, {})
    rec, base, names = sorted_modes
    lo, hi = names[0], names[-1]
    tiers = "/".join(str(rec.mode_values[m]) for m in names)
    claim = (f"vs {c.base_name} under the same tier prompts ({tiers} thinking tokens): the thinking overshoot past "
             "the tier's budget (max(0, thinking - tier), mean over the tiers) falls")  # fmt: skip
    d = c.paired(_overshoot(base, names, "thinking"), _overshoot(rec, names, "thinking"))
    gap = rec.modes[hi]["thinking"] - rec.modes[lo]["thinking"]
    b_gap = base.modes[hi]["thinking"] - base.modes[lo]["thinking"]
    d_gap = c.paired(gap, b_gap)
    measured = (f"thinking overshoot {float(_overshoot(base, names, 'thinking').mean()):.1f} ({c.base_name}) -> "
                f"{float(_overshoot(rec, names, 'thinking').mean()):.1f}: {c.base_name} - recipe {_d(d)} (margin "
                f"+-{c.token_margin:.1f}); thinking tokens by tier: {c.base_name} "
                f"{_mode_means(base, names, 'thinking')} -> "
                f"trained {_mode_means(rec, names, 'thinking')}; tier gap (not part of the verdict) "
                f"{float(b_gap.mean()):.1f} -> {float(gap.mean()):.1f}: diff {_d(d_gap)}")  # fmt: skip
    return _result(claim, measured, c.decide(d, c.token_margin), {"overshoot_saved": d, "gap_gain": d_gap})


@check("better-trade-off")  # CANON's (no preset direction), and every length recipe's against constant-penalty
def _canon(c: CheckInputs) -> dict:
    rec, ref = c.panel.aligned(c.reference)
    d_tokens = c.paired(ref.metrics["tokens"], rec.metrics["tokens"])
    d_acc, similar, acc_text = _similar_accuracy(c, rec, ref)
    shorter = combine(c.decide(d_tokens, c.token_margin), similar)
    more_accurate = combine(c.decide(d_acc, FRACTION_MARGIN), c.constraint(d_tokens, c.token_margin))
    measured = (f"tokens {_fmt(_point(rec, 'tokens'))} vs {_fmt(_point(ref, 'tokens'))}: {c.reference_name} - recipe "
                f"{_d(d_tokens)} (margin +-{c.token_margin:.1f}); {acc_text}")  # fmt: skip
    claim = (f"a better accuracy-cost trade-off than {c.reference_name}, in whichever direction pays (no preset "
             f"direction): shorter at similar accuracy, or more accurate (margin {FRACTION_MARGIN}) at no more "
             "tokens")  # fmt: skip
    result = _result(claim, measured, either(shorter, more_accurate), {"tokens_saved": d_tokens, "accuracy": d_acc})
    # parts: [similar accuracy, tokens saved] (shorter) and [accuracy gain, not longer] (more accurate); "either" is a
    # union: twice the smaller branch's p-value (Bonferroni), each branch an intersection-union test
    branches = [c.p_value(c.parts[0:2]), c.p_value(c.parts[2:4])]
    if None not in branches:
        result["p_value"] = min(1.0, 2 * min(branches))
    return result


@check("no-think-prefix", needs_reference=False, conditioned=True, against_base=True, modes=_no_think_modes)
def _asrr(c: CheckInputs) -> dict:
    claim = (f"under the no-think prefix: accuracy above {c.base_name}'s under the same prefix and fewer tokens than "
             f"{c.reference_name}")  # fmt: skip
    pair = _modes_pair(c)
    if (
        pair is None
        or NO_THINK_MODE not in c.panel.modes
        or c.reference is None
        or "correct" not in c.panel.modes[NO_THINK_MODE]
    ):
        return _result(claim, "no asrr-mode records", None, {})
    rec, base = pair
    d_acc = c.paired(rec.modes[NO_THINK_MODE]["correct"], base.modes[NO_THINK_MODE]["correct"])
    rec2, ref = c.panel.aligned(c.reference)
    lengths = rec2.modes[NO_THINK_MODE]["lengths"]
    d_tokens = c.paired(ref.metrics["tokens"][:, : lengths.shape[1]], lengths)
    measured = (f"prefix accuracy {float(rec.modes[NO_THINK_MODE]['correct'].mean()):.3f} vs {c.base_name} "
                f"{float(base.modes[NO_THINK_MODE]['correct'].mean()):.3f}: diff {_d(d_acc, 3)}; prefix tokens "
                f"{float(lengths.mean()):.1f}: {c.reference_name} (plain) - recipe {_d(d_tokens)}")  # fmt: skip
    held = combine(c.decide(d_acc, FRACTION_MARGIN), c.decide(d_tokens, c.token_margin))
    return _result(claim, measured, held, {"prefix_accuracy_gain": d_acc, "tokens_saved": d_tokens})


def _mode_accuracy(panel: Panel, names: list) -> np.ndarray:
    """(S, T) accuracy cells under the check prompts `names`, the mean over the prompts."""
    return np.mean([panel.modes[m]["correct"] for m in names], axis=0)


@check("forced-budgets", needs_reference=False, conditioned=True, against_base=True, controls_evaluated=False,
       modes=_forced_budget_modes, following=lambda spec: ("thinking", "over"))  # fmt: skip
def _budgetthinker(c: CheckInputs) -> dict:
    claim = ("vs the base model with the control tokens added (fresh embeddings: where training starts) under the same "
             "budget prompts and forced control tokens: accuracy rises and the thinking overshoot past the budget "
             "(max(0, thinking - budget), mean over the budgets) falls")  # fmt: skip
    sorted_modes = _sorted_modes(c)
    if sorted_modes is None:
        return _result(claim, "no base evaluation under the budget prompts", None, {})
    rec, base, names = sorted_modes
    acc = functools.partial(_mode_accuracy, names=names)
    d_acc = c.paired(acc(rec), acc(base))
    d_over = c.paired(_overshoot(base, names, "thinking"), _overshoot(rec, names, "thinking"))
    measured = (f"accuracy under the budgets {float(acc(base).mean()):.3f} (base) -> {float(acc(rec).mean()):.3f}: "
                f"diff {_d(d_acc, 3)} (margin +-{FRACTION_MARGIN}); thinking overshoot "
                f"{float(_overshoot(base, names, 'thinking').mean()):.1f} -> "
                f"{float(_overshoot(rec, names, 'thinking').mean()):.1f}: base - recipe {_d(d_over)} (margin "
                f"+-{c.token_margin:.1f}); thinking tokens by budget: base {_mode_means(base, names, 'thinking')}; "
                f"trained {_mode_means(rec, names, 'thinking')}")  # fmt: skip
    held = combine(c.decide(d_acc, FRACTION_MARGIN), c.decide(d_over, c.token_margin))
    return _result(claim, measured, held, {"budget_accuracy_gain": d_acc, "overshoot_saved": d_over})


def is_baseline(check: dict) -> bool:
    """A method check without a claim of its own (`grpo`, `dr-grpo`: its claim starts with "baseline"): it has no
    verdict and is not counted among the verdicts.

    >>> is_baseline({"claim": "baseline (unbiased)", "held": None}), is_baseline({"claim": "shorter", "held": True})
    (True, False)
    """
    return str(check.get("claim") or "baseline").startswith("baseline")


def method_check(recipe: str, inputs: CheckInputs, tight_cap: int | None = None) -> dict:
    """The check of one recipe: `{"claim", "measured", "held", "differences"}` (`held` is `None` when inconclusive
    or untestable; `differences[name] = [point, low, high]` at the look's nominal level `alpha`), from the
    per-(seed, task) panels of `inputs`, with `p_value` (the claim's one-sided p-value, `CheckInputs.p_value`),
    `alpha`, and `cannot_judge` (the reason) when the claimed quantity is 0 in every cell of both arms: nothing to
    measure in this world (DAPO's truncations at a cap nothing reaches)."""
    from .protocol import row_check

    inputs.parts, inputs.recipe, inputs.tight_cap = [], recipe, tight_cap
    declared = row_check(recipe)  # a protocol row names its check (protocol 4); else the recipe's own
    if declared is not None and declared not in ROW_CHECKS:
        raise ValueError(f"protocol row {recipe!r}: unknown check {declared!r}; valid: {sorted(ROW_CHECKS)}.")
    result = ROW_CHECKS[declared](inputs) if declared else _method_check(recipe, inputs)
    return _finish(result, inputs)


def claim_check(claim: str, inputs: CheckInputs) -> dict:
    """The check of claim `claim` (a key of `CHECKS`) on `inputs`, as `method_check` returns a recipe's: how the
    verdicts score every length recipe against `constant-penalty` (`TRADE_OFF`)."""
    inputs.parts = []
    return _finish(_run(CHECKS[claim], inputs), inputs)


def _finish(result: dict, inputs: CheckInputs) -> dict:
    """A check's result with its p-value and level (`method_check`)."""
    if is_baseline(result) or result.get("claim") == "-":
        return result
    result.setdefault("p_value", inputs.p_value())
    result["alpha"] = inputs.level
    if "cannot_judge" in result:
        result["held"] = None
    return result


def _method_check(recipe: str, inputs: CheckInputs) -> dict:
    from .protocol import CONTROL_JOBS, matching_controls

    if recipe in CONTROL_JOBS:  # GRPO run as a recipe's matching control (protocol.yaml)
        return {"claim": f"baseline (matching control of {', '.join(matching_controls()[recipe]['for'])})",
                "measured": "-", "held": None}  # fmt: skip
    claim, specific = claim_of(recipe)
    if specific is not None:  # protocol 3: what the method adds to a fixed length penalty
        return _specific(specific, inputs)
    return _run(CHECKS[claim], inputs)


def _run(claim: Claim, inputs: CheckInputs) -> dict:
    """`claim`'s check, or why it has no verdict: a claim that needs a reference row without one."""
    if claim.needs_reference and inputs.reference is None:
        if inputs.reference_name not in ("-", BASE_RECIPE, "base"):  # a matching control without runs
            missing = f"no {inputs.reference_name} row: the matching control has not been trained"
            return {"claim": f"vs {inputs.reference_name} (its matching control)", "held": None, "measured": missing}
        return {"claim": "-", "measured": "no reference row", "held": None}
    return claim.run(inputs)


@check("baseline", needs_reference=False)
def _baseline(c: CheckInputs) -> dict:
    """GRPO: the reference itself, no claim of its own."""
    return {"claim": "baseline", "measured": "-", "held": None}


@check("baseline-unbiased", needs_reference=False)
def _baseline_unbiased(c: CheckInputs) -> dict:
    """GRPO without its length and std biases (methods.md §32): not a length method."""
    return {"claim": "baseline (unbiased)", "measured": "-", "held": None}


TRADE_OFF = "better-trade-off"  # the claim every length recipe is also scored on against constant-penalty


# protocol 4 (issue 33 item 5): the checks a row of the protocol names (`rows: <row>: check:`), each against the row's
# matching control (`CheckInputs.reference`: grpo-kl for ProRL, brorl-n8 for BroRL, grpo for LISA)


def _thirds(traces: list) -> str:
    """`0.61 / 0.70 / 0.71`: the mean over seeds of each seed's logged values averaged over the first, middle and
    last third of its logged steps."""
    parts = [np.mean([np.mean(t[i * len(t) // 3 : (i + 1) * len(t) // 3] or t) for t in traces]) for i in range(3)]
    return " / ".join(f"{x:.3g}" for x in parts)


def _training_logs(name: str, panel: Panel) -> str:
    """What a row's training logged, by thirds of the run: the reward and, when there is a KL term, the KL."""
    out = [f"{key} {_thirds(panel.logs[key])}" for key in ("reward", "kl") if panel.logs.get(key)]
    return f"{name} " + ", ".join(out) if out else ""


def _against_control(c: CheckInputs, claim: str, allowed: str, decide) -> dict:
    """Accuracy against the matching control (the rows of protocol 4): `decide(d)` on the paired accuracy difference
    recipe - control, tokens and the logged training curves printed beside it; no verdict when the control has not
    been trained."""
    if c.reference is None:
        return _result(claim, f"no {c.reference_name} row: the matching control has not been trained", None, {})
    rec, ref = c.panel.aligned(c.reference)
    d = c.paired(rec.metrics["correct"], ref.metrics["correct"])
    d_tokens = c.paired(rec.metrics["tokens"], ref.metrics["tokens"])
    logs = "; ".join(x for x in (_training_logs("recipe", rec), _training_logs(c.reference_name, ref)) if x)
    measured = (f"accuracy {_fmt(_point(rec, 'correct'), 3)} vs {c.reference_name} {_fmt(_point(ref, 'correct'), 3)} "
                f"(seeds {rec.seeds}): recipe - {c.reference_name} {_d(d, 3)}; tokens {_fmt(_point(rec, 'tokens'))} "
                f"vs {_fmt(_point(ref, 'tokens'))}: diff {_d(d_tokens)}"
                + (f"; training logs by thirds of the run (not judged): {logs}" if logs else ""))  # fmt: skip
    return _result(claim, f"{measured} ({allowed})", decide(d), {"accuracy": d, "tokens": d_tokens})


def _accuracy_above_control(c: CheckInputs) -> dict:
    """ProRL (resets against GRPO with the same KL, over a longer run), BroRL (N = 128 against N = 8 at matched
    completions): final accuracy above the matching control's by more than `FRACTION_MARGIN`."""
    claim = f"more accurate than {c.reference_name}, its matching control (margin {FRACTION_MARGIN})"
    return _against_control(c, claim, f"margin +-{FRACTION_MARGIN}", lambda d: c.decide(d, FRACTION_MARGIN))


def _accuracy_not_below_control(c: CheckInputs) -> dict:
    """LISA: full fine-tuning's accuracy kept at matched steps, non-inferiority with the accuracy tolerance (held:
    the interval's low end above -`ACCURACY_TOLERANCE`; not held: its high end below it)."""
    claim = f"accuracy not below {c.reference_name}'s (its matching control) by more than {ACCURACY_TOLERANCE}"
    return _against_control(c, claim, f"allowed >= -{ACCURACY_TOLERANCE}",
                            lambda d: c.constraint(d, ACCURACY_TOLERANCE))  # fmt: skip


ROW_CHECKS = {"accuracy-above-control": _accuracy_above_control,
              "accuracy-not-below-control": _accuracy_not_below_control}  # fmt: skip
