r"""
The testbed's statistics: per-(seed, task) panels, intervals over tasks (bootstrap) and seeds (Student t), paired
differences, three-way verdicts and interval-aware Pareto dominance.

**Panels.** A model trained with seeds $s = 1..S$ and evaluated on the same tasks $t = 1..T$ (the same sampling
streams for every model: `sampling.sample_seed`) gives for every metric a matrix $X_{st}$: the mean over the
evaluation samples of task $t$ under training seed $s$. The base model has one "seed"; paired with a trained model
its row is repeated over the seeds.

**Estimates.** Every statistic is a ratio of weighted sums over the cells (a plain mean has $D = 1$):

$$ \hat\theta(w, v) = \frac{\sum_{s,t \in M} w_s v_t N_{st}}{\sum_{s,t \in M} w_s v_t D_{st}} $$

with $M$ a subset of tasks (a difficulty level), the point estimate at $w = v = 1$.

**Intervals** (`interval`): the unit of replication is the training seed, and a model is trained with few of them,
so the interval has two parts.

- *Seeds*: the statistic of each seed alone, $\hat\theta_s = \hat\theta(e_s, 1)$ ($e_s$ = seed $s$'s weights
  only), and the Student-t half-width over them, $h_S = t_{S-1,\,0.975}\, \mathrm{sd}(\hat\theta_1..\hat\theta_S) /
  \sqrt{S}$ (0 with one seed: nothing is known about seed-to-seed variation then).
- *Tasks*: `resamples` (default 2,000) seeded resamples of the tasks (`numpy.random.default_rng(seed)`,
  $v \sim \mathrm{Multinomial}(T, 1/T)$) with every seed in; the 2.5 and 97.5 percentiles of
  $\hat\theta(1, v^{(b)})$ give the distances $d_-, d_+$ below and above the point (resamples whose denominator is
  0, possible for a small difficulty subset, are left out).

The interval is $[\hat\theta - \sqrt{d_-^2 + h_S^2},\ \hat\theta + \sqrt{d_+^2 + h_S^2}]$: the two sources of error
are independent (which tasks, which training runs), so their variances add; the evaluation's sampling noise is in
both, which errs on the wide side. Until 2026-12-02 the seeds were resampled with the tasks in one joint bootstrap;
with three seeds that has only 10 distinct seed draws and treats the seeds' spread as known (the 1.96 of a normal
quantile instead of Student's 4.30 for two degrees of freedom, and a variance low by a factor 2/3), so it was too
narrow: ALP's 9.8 tokens saved against GRPO read [5.0, 13.9] (held) while the t-interval of its three per-seed
differences is [-2.2, 21.8] (docs/testbed.md, "The protocol").

**Paired differences.** Recipe minus reference is one statistic, $\hat\theta_A(w, v) - \hat\theta_B(w, v)$: on the
same task resample for both, so the task-to-task variation that both models share cancels out of the interval, and
per seed as the difference of the two models trained with that seed, whose runs share the data order and the
rollouts' random numbers.

**Verdicts** (`decide`): a claimed difference $\Delta$ with interval $[l, h]$ and margin $m$ (the smallest effect that
counts) is *held* when $l > m$ (the interval excludes every effect below the margin on the claimed side; until
2026-12-03, $l > 0$), *not held* when $h < m$ (it excludes every effect of the margin's size on the claimed side: no
effect, or a negligible one, or one the other way), else *inconclusive*: the same margin both ways (protocol 1,
`protocol.yaml`). The method checks read their intervals at the nominal level of the protocol's looks (`interval_at`:
Pocock's 0.0110 per side at protocol 6's three looks, the 97.8% interval), and `Spread.p_above` gives a claim's
one-sided p-value for the Benjamini-Hochberg correction across the checks. The claim is one-sided, so only the claimed
side's end decides "not held": an interval reaching further the other way ($[-0.1, 0.01]$ against a margin of 0.02) is
more evidence against the claim, not less. (Until 2026-12-02 "not held" also asked $l \ge -m$, the two-sided equivalence
test, which left such intervals inconclusive.) A side condition ("at similar accuracy": $\Delta_{acc} \ge -\tau$)
*holds* when $l \ge -\tau$, *fails* when $h < -\tau$, else is unknown (`constraint`).

>>> data = np.array([[1.0, 2.0, 3.0, 4.0]])
>>> point, low, high = interval(Bootstrap(1, 4, resamples=500, seed=0), lambda w, v: wmean(data, w, v))
>>> point, bool(low < point < high)
(2.5, True)
>>> decide((0.5, 0.3, 0.9), margin=0.2), decide((-0.05, -0.1, 0.1), margin=0.2), decide((0.3, -0.1, 0.7), margin=0.2)
(True, False, None)
>>> decide((0.5, 0.1, 0.9), margin=0.2)  # the low end is above 0 but not above the margin: no effect of its size shown

>>> decide((-0.05, -0.4, 0.1), margin=0.2)  # no effect of the margin's size on the claimed side
False
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "CONFIDENCE",
    "Bootstrap",
    "Estimate",
    "Spread",
    "Panel",
    "combine",
    "constraint",
    "decide",
    "dominates",
    "either",
    "interval",
    "interval_at",
    "interval_pareto_flags",
    "student_t_isf",
    "student_t_sf",
    "student_t_quantile",
    "wmean",
    "wpearson",
    "wratio",
]

CONFIDENCE = 0.95


@dataclass
class Bootstrap:
    """The weights `interval` evaluates a statistic at: `v` (resamples, T), seeded multinomial resamples of the tasks
    (module docstring); `point_w` / `point_v` all ones (the point estimate, every seed and task); `seed_w` (S, S)
    one row per seed, that seed's weight alone (the per-seed estimates)."""

    num_seeds: int
    num_tasks: int
    resamples: int = 2000
    seed: int = 0
    v: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.num_seeds < 1 or self.num_tasks < 1:
            raise ValueError(f"a bootstrap needs >= 1 seed and task, got {self.num_seeds} and {self.num_tasks}.")
        self.v = _task_resamples(self.num_seeds, self.num_tasks, self.resamples, self.seed)

    @property
    def point_w(self) -> np.ndarray:
        return np.ones((1, self.num_seeds))

    @property
    def point_v(self) -> np.ndarray:
        return np.ones((1, self.num_tasks))

    @property
    def seed_w(self) -> np.ndarray:
        return np.eye(self.num_seeds)


@functools.lru_cache(maxsize=32)
def _task_resamples(num_seeds: int, num_tasks: int, resamples: int, seed: int) -> np.ndarray:
    """`Bootstrap.v`: the seeded multinomial task resamples, drawn once per `(num_seeds, num_tasks, resamples, seed)`
    and shared read-only (a comparison builds thousands of bootstraps of a few shapes; drawing 2000 x 1024 counts
    took two thirds of rendering one). The seed resamples of the joint bootstrap this replaced are drawn and
    dropped, so that `v` is the same stream as before: one-seed intervals (the world report, the base row) are
    unchanged.

    >>> a, b = _task_resamples(2, 5, 10, 0), Bootstrap(2, 5, 10, 0).v
    >>> a is b, a.flags.writeable, a.sum(axis=1).tolist() == [5.0] * 10
    (True, False, True)
    """
    rng = np.random.default_rng(seed)
    rng.multinomial(num_seeds, [1 / num_seeds] * num_seeds, size=resamples)
    v = rng.multinomial(num_tasks, [1 / num_tasks] * num_tasks, size=resamples).astype(float)
    v.flags.writeable = False
    return v


def _wsum(x: np.ndarray, w: np.ndarray, v: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """$\\sum_{s,t \\in M} w_s v_t x_{st}$ for every resample row of `w` (B, S) and `v` (B, T): shape (B,)."""
    vv = v if mask is None else v * mask[None, :]
    return np.einsum("bs,st,bt->b", w, x, vv, optimize=True)


def wmean(x: np.ndarray, w: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Weighted mean of the cells `x` (S, T) over the tasks in `mask` (T,) bool, per resample: (B,)."""
    return wratio(x, np.ones_like(x), w, v, mask)


def wratio(
    num: np.ndarray, den: np.ndarray, w: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None
) -> np.ndarray:
    """Ratio of weighted sums $\\sum w_s v_t N_{st} / \\sum w_s v_t D_{st}$ per resample (NaN where the denominator is
    0): the redundant share (redundant / all tokens) and the tokens-to-floor ratio are ratios of sums, not means of
    ratios."""
    n, d = _wsum(num, w, v, mask), _wsum(den, w, v, mask)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d != 0, n / np.where(d != 0, d, 1.0), np.nan)


def wpearson(x: np.ndarray, y: np.ndarray, w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Weighted Pearson correlation of `x` and `y`, both (C, S, T) with C conditions (a target or budget per
    condition), every cell weighted $w_s v_t$, per resample (NaN when either side is constant).

    $$ r = \\frac{E[xy] - E[x]E[y]}{\\sqrt{(E[x^2] - E[x]^2)(E[y^2] - E[y]^2)}} $$
    """
    total = sum(_wsum(np.ones_like(xc), w, v, None) for xc in x)
    e = lambda z: sum(_wsum(zc, w, v, None) for zc in z) / total  # noqa: E731
    ex, ey = e(x), e(y)
    cov = e(x * y) - ex * ey
    var = (e(x * x) - ex**2) * (e(y * y) - ey**2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(var > 1e-12, cov / np.sqrt(np.where(var > 1e-12, var, 1.0)), np.nan)


@functools.lru_cache(maxsize=64)
def student_t_quantile(p: float, df: int) -> float:
    r"""The `p` quantile ($p > 1/2$) of Student's t with `df` degrees of freedom: the $x$ with
    $\int_0^x f(u)\,du = p - 1/2$, $f(u) = \frac{\Gamma((\nu+1)/2)}{\sqrt{\nu\pi}\,\Gamma(\nu/2)}
    (1 + u^2/\nu)^{-(\nu+1)/2}$, by bisection on the trapezoid integral (error below 1e-4 for the table values).

    >>> [round(student_t_quantile(0.975, k), 3) for k in (1, 2, 5, 30)]  # the t table: 12.706, 4.303, 2.571, 2.042
    [12.706, 4.303, 2.571, 2.042]
    """
    if not 0.5 < p < 1 or df < 1:
        raise ValueError(f"need 1/2 < p < 1 and df >= 1, got {p} and {df}.")
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def mass(x: float) -> float:  # the integral of f over [0, x]
        u = np.linspace(0.0, x, 20001)
        f = c * (1 + u * u / df) ** (-(df + 1) / 2)
        return float((f.sum() - (f[0] + f[-1]) / 2) * (u[1] - u[0]))

    low, high = 0.0, 1.0
    while mass(high) < p - 0.5:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if mass(mid) < p - 0.5 else (low, mid)
    return (low + high) / 2


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz; Numerical Recipes 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-13:
            break
    return h


def student_t_sf(x: float, df: int) -> float:
    """P(T > x) for Student's t with `df` degrees of freedom, through the regularized incomplete beta function:
    P(|T| > x) = I_{df / (df + x^2)}(df / 2, 1 / 2).

    >>> round(student_t_sf(4.303, 2), 4), round(student_t_sf(2.042, 30), 4), student_t_sf(0.0, 5)
    (0.025, 0.025, 0.5)
    >>> student_t_sf(1e-9, 2)  # x * x vanishes beside df: z = 1 exactly, P(T > x) = 1/2 to double precision
    0.5
    """
    z = df / (df + x * x)
    if x == 0 or z >= 1.0:  # (world v3's first comparison: a p-value's bisection near 1/2 reached x ~ 1e-9)
        return 0.5
    a, b = df / 2, 0.5
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(z) + b * math.log1p(-z))
    beta = front * _betacf(a, b, z) / a if z < (a + 1) / (a + b + 2) else 1.0 - front * _betacf(b, a, 1 - z) / b
    tail = 0.5 * beta
    return tail if x > 0 else 1.0 - tail


def student_t_isf(alpha: float, df: int) -> float:
    """The x with P(T > x) = `alpha` (0 < alpha < 1/2), by bisection on `student_t_sf`.

    >>> round(student_t_isf(0.025, 2), 3), round(student_t_isf(0.01, 5), 3)  # the t table: 4.303, 3.365
    (4.303, 3.365)
    """
    low, high = 0.0, 1.0
    while student_t_sf(high, df) > alpha:
        high *= 2
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if student_t_sf(mid, df) > alpha else (low, mid)
    return (low + high) / 2


@dataclass
class Spread:
    """What an interval is made of: the `point` estimate, the finite task-resample values `draws` and the per-seed
    estimates `per_seed` (`None` with one seed). `bounds(alpha)` gives the interval whose each end has one-sided
    level `alpha` (0.025: the 95% interval), `p_above(m)` the one-sided p-value of "the effect is above m"."""

    point: float
    draws: np.ndarray
    per_seed: np.ndarray | None
    limits: tuple[float, float] | None = None

    def _seed_half(self, alpha: float) -> float:
        if self.per_seed is None or len(self.per_seed) < 2:
            return 0.0
        n = len(self.per_seed)
        scale = student_t_quantile(1 - alpha, n - 1) if alpha in (0.025,) else student_t_isf(alpha, n - 1)
        return scale * float(np.std(self.per_seed, ddof=1)) / np.sqrt(n)

    def bounds(self, alpha: float) -> tuple[float, float]:
        q_low, q_high = np.quantile(self.draws, [alpha, 1 - alpha])
        below, above = max(self.point - float(q_low), 0.0), max(float(q_high) - self.point, 0.0)
        half = self._seed_half(alpha)
        low, high = self.point - float(np.hypot(below, half)), self.point + float(np.hypot(above, half))
        if self.limits is not None:
            low, high = max(low, self.limits[0]), min(high, self.limits[1])
        return low, high

    def p_above(self, threshold: float) -> float:
        """The smallest one-sided level at which the lower bound is above `threshold` (1 when the point is not; the
        resolution of 2,000 task resamples floors it near 1/2000)."""
        if not self.point > threshold:
            return 1.0
        low_alpha, high_alpha = 1e-6, 0.5
        if self.bounds(low_alpha)[0] > threshold:
            return low_alpha
        for _ in range(40):
            mid = math.sqrt(low_alpha * high_alpha)
            low_alpha, high_alpha = (low_alpha, mid) if self.bounds(mid)[0] > threshold else (mid, high_alpha)
        return high_alpha


class Estimate(tuple):
    """`(point, low, high)` that also carries its `Spread` (`spread`, `None` when it has no interval), so a verdict
    can be read at another level and its p-value computed."""

    spread: Spread | None

    def __new__(cls, values, spread: Spread | None = None) -> Estimate:
        obj = super().__new__(cls, values)
        obj.spread = spread
        return obj


def interval_at(boot: Bootstrap, statistic: Callable[[np.ndarray, np.ndarray], np.ndarray], alpha: float,
                limits: tuple[float, float] | None = None) -> Estimate:  # fmt: skip
    """`interval`'s estimate with each end at one-sided level `alpha` (the protocol's nominal level of a look:
    Pocock's 0.0110 at three looks gives the 97.8% interval), as an `Estimate` carrying its `Spread`."""
    point = float(statistic(boot.point_w, boot.point_v)[0])
    if not np.isfinite(point):
        return Estimate((None, None, None))
    draws = statistic(np.ones((boot.resamples, boot.num_seeds)), boot.v)
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return Estimate((point, None, None))
    per_seed = None
    if boot.num_seeds > 1:
        per_seed = statistic(boot.seed_w, np.ones((boot.num_seeds, boot.num_tasks)))
        if not np.all(np.isfinite(per_seed)):
            return Estimate((point, None, None))
    spread = Spread(point, draws, per_seed, limits)
    return Estimate((point, *spread.bounds(alpha)), spread)


def interval(boot: Bootstrap, statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
             confidence: float = CONFIDENCE,
             limits: tuple[float, float] | None = None) -> tuple[float | None, float | None, float | None]:  # fmt: skip
    """`(point, low, high)`: `statistic(w, v)` at weights 1, and the interval of the module docstring: the Student-t
    half-width over the per-seed estimates combined with the percentile distances of the task resamples (NaN
    resamples left out; all `None` when the point estimate is undefined; no interval when no task resample is
    defined or a seed's own estimate is undefined). `limits`: the values the statistic can take (an accuracy lies in
    [0, 1]); the interval is clipped to them, since the symmetric seed part can reach past them.

    >>> x = np.array([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])  # two seeds, three tasks: per-seed means 2 and 4
    >>> point, low, high = interval(Bootstrap(2, 3, resamples=1000), lambda w, v: wmean(x, w, v))
    >>> point, bool(high - point > 12.706)  # the seeds' t-interval alone: t(1) x sd sqrt(2) / sqrt(2 seeds) = 12.706
    (3.0, True)
    """
    point = float(statistic(boot.point_w, boot.point_v)[0])
    if not np.isfinite(point):
        return None, None, None
    ones = np.ones((boot.resamples, boot.num_seeds))
    draws = statistic(ones, boot.v)
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return point, None, None
    alpha = (1 - confidence) / 2
    q_low, q_high = np.quantile(draws, [alpha, 1 - alpha])
    below, above = max(point - float(q_low), 0.0), max(float(q_high) - point, 0.0)
    seeds_half = 0.0
    if boot.num_seeds > 1:
        per_seed = statistic(boot.seed_w, np.ones((boot.num_seeds, boot.num_tasks)))
        if not np.all(np.isfinite(per_seed)):
            return point, None, None
        scale = student_t_quantile(1 - alpha, boot.num_seeds - 1)
        seeds_half = scale * float(np.std(per_seed, ddof=1)) / np.sqrt(boot.num_seeds)
    low, high = point - float(np.hypot(below, seeds_half)), point + float(np.hypot(above, seeds_half))
    if limits is not None:
        low, high = max(low, limits[0]), min(high, limits[1])
    return point, low, high


def decide(estimate: Sequence[float | None], margin: float = 0.0) -> bool | None:
    """The verdict of a claimed difference `(point, low, high)` oriented so that the claim is "> 0", with the same
    margin on both sides (protocol 1, issue 32): `True` (held: low > margin, the interval excludes every effect
    smaller than the margin), `False` (not held: high < margin, it excludes every effect of at least the margin on the
    claimed side), `None` (inconclusive, or no interval). Until 2026-12-03 "held" asked only low > 0."""
    _, low, high = estimate
    if low is None or high is None:
        return None
    margin = max(margin, 0.0)
    if low > margin:
        return True
    if high < margin:
        return False
    return None


def constraint(estimate: Sequence[float | None], tolerance: float) -> bool | None:
    """Whether a difference `(point, low, high)` satisfies "> -tolerance" beyond its interval: `True` when
    low >= -tolerance, `False` when high < -tolerance, else `None` (unknown)."""
    _, low, high = estimate
    if low is None or high is None:
        return None
    if low >= -tolerance:
        return True
    if high < -tolerance:
        return False
    return None


def combine(*verdicts: bool | None) -> bool | None:
    """All parts of a claim together: any `False` -> `False`, all `True` -> `True`, else `None`.

    >>> combine(True, True), combine(True, None), combine(None, False)
    (True, None, False)
    """
    if any(v is False for v in verdicts):
        return False
    return True if all(v is True for v in verdicts) else None


def either(*verdicts: bool | None) -> bool | None:
    """Alternative forms of a claim (one suffices): any `True` -> `True`, all `False` -> `False`, else `None`.

    >>> either(False, True), either(False, None), either(False, False)
    (True, None, False)
    """
    if any(v is True for v in verdicts):
        return True
    return False if all(v is False for v in verdicts) else None


@dataclass
class Panel:
    """One model's per-(seed, task) cells: `metrics[name]` is an (S, T) array (the mean over that task's evaluation
    samples under that training seed), `seeds` the S training seeds (`[None]` for the base model), `difficulty` the
    (T,) difficulty of every task. `modes[mode][key]` holds (S, T_check) cells under each check prompt, with
    `mode_values[mode]` its prompted value."""

    seeds: list
    difficulty: np.ndarray
    metrics: dict[str, np.ndarray]
    modes: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    mode_values: dict[str, int | None] = field(default_factory=dict)
    samples: int = 1
    logs: dict[str, list] = field(default_factory=dict)  # per seed: what training logged (`LOGGED`), one list a seed

    @classmethod
    def from_runs(cls, runs: Sequence[dict]) -> Panel:
        """From run results (`runner.run_job`'s files) of one model, one per seed, all on the same tasks."""
        if not runs:
            raise ValueError("Panel.from_runs: no runs.")
        metrics, modes, values = {}, {}, {}
        first = runs[0]["records"]
        difficulty, counts = _per_task(first, "difficulty", first)
        for key in first:
            if key in ("task", "sample"):
                continue
            metrics[key] = np.stack([_per_task(r["records"], key, first)[0] for r in runs])
        if "tokens" in metrics and "floor_tokens" in metrics:
            metrics["excess"] = metrics["tokens"] - metrics["floor_tokens"]
        for name in runs[0].get("modes") or {}:
            if not all(name in (r.get("modes") or {}) for r in runs):
                continue
            rec = runs[0]["modes"][name]
            values[name] = rec.get("value")
            modes[name] = {
                key: np.stack([np.asarray(r["modes"][name][key], dtype=float) for r in runs])
                for key in ("lengths", "thinking", "correct")
                if key in rec
            }
        samples = int(counts.max()) if counts.size else 1
        return cls([r.get("seed") for r in runs], difficulty.astype(int), metrics, modes, values, samples,
                   _logs(runs))  # fmt: skip

    @property
    def num_tasks(self) -> int:
        return len(self.difficulty)

    def aligned(self, other: Panel) -> tuple[Panel, Panel]:
        """`(self, other)` restricted to their common seeds (a seedless panel, the base model, is repeated over the
        other's seeds), so cell (s, t) of both is the same seed and task."""
        if self.num_tasks != other.num_tasks:
            raise ValueError(f"panels on different tasks ({self.num_tasks} vs {other.num_tasks}) cannot be paired.")
        if other.seeds == [None] and self.seeds != [None]:
            return self, other._repeat(len(self.seeds), self.seeds)
        if self.seeds == [None] and other.seeds != [None]:
            return self._repeat(len(other.seeds), other.seeds), other
        common = [s for s in self.seeds if s in other.seeds]
        if not common:
            raise ValueError(f"no common seeds between {self.seeds} and {other.seeds}.")
        return self._select(common), other._select(common)

    def _repeat(self, n: int, seeds: list) -> Panel:
        rep = lambda a: np.repeat(a, n, axis=0)  # noqa: E731
        return Panel(list(seeds), self.difficulty, {k: rep(a) for k, a in self.metrics.items()},
                     {m: {k: rep(a) for k, a in d.items()} for m, d in self.modes.items()},
                     dict(self.mode_values), self.samples,
                     {k: [v[0]] * n for k, v in self.logs.items()})  # fmt: skip

    def _select(self, seeds: list) -> Panel:
        idx = [self.seeds.index(s) for s in seeds]
        return Panel(list(seeds), self.difficulty, {k: a[idx] for k, a in self.metrics.items()},
                     {m: {k: a[idx] for k, a in d.items()} for m, d in self.modes.items()},
                     dict(self.mode_values), self.samples,
                     {k: [v[i] for i in idx] for k, v in self.logs.items()})  # fmt: skip


# training logs a method check reads: A-DLP's controller's lambda at every logged step; the training reward and the KL
# to the reference (protocol 4: ProRL's row prints them by thirds of the run)
LOGGED = ("adlp/lambda", "reward", "kl")


def _lambda_bound(run: dict) -> float | None:
    """The upper bound on A-DLP's lambda a run trained under: `lambda_max`, else 1 / max_completion_length with
    `cap_lambda`, else `None` (unbounded)."""
    key = run.get("key") or {}
    for name, _, kwargs in key.get("rewards") or []:
        if name == "adlp_length":
            if kwargs.get("lambda_max") is not None:
                return float(kwargs["lambda_max"])
            if kwargs.get("cap_lambda"):
                return 1.0 / float(key["settings"]["max_completion_length"])
    return None


def _logs(runs: Sequence[dict]) -> dict[str, list]:
    """`{key: [values logged by seed 0, by seed 1, ...]}` for every `LOGGED` key all runs logged, and
    `adlp/lambda_max` (each run's bound on lambda) beside `adlp/lambda`."""
    out = {}
    for key in LOGGED:
        traces = [[float(h[key]) for h in r.get("log_history") or [] if key in h] for r in runs]
        if all(traces):
            out[key] = traces
    if "adlp/lambda" in out:
        out["adlp/lambda_max"] = [_lambda_bound(r) for r in runs]
    return out


def _per_task(records: dict, key: str, reference: dict) -> tuple[np.ndarray, np.ndarray]:
    """Mean of `records[key]` per task (records are one entry per completion, `records["task"]` its task index):
    `(means (T,), counts (T,))`, tasks in index order."""
    tasks = np.asarray(reference["task"], dtype=int)
    if list(records["task"]) != list(reference["task"]):
        raise ValueError("runs evaluated on different tasks or samples cannot form one panel.")
    values = np.asarray(records.get(key, [0] * len(tasks)), dtype=float)
    num = int(tasks.max()) + 1 if tasks.size else 0
    counts = np.bincount(tasks, minlength=num).astype(float)
    sums = np.bincount(tasks, weights=values, minlength=num)
    return sums / np.where(counts > 0, counts, 1.0), counts


def dominates(a: dict, b: dict, x: str = "mean_tokens", y: str = "accuracy") -> bool:
    """Whether point `a` dominates `b` beyond their intervals: `a` has fewer tokens and higher accuracy, each with
    `a`'s interval clear of `b`'s (`a`'s upper token bound below `b`'s lower one and `a`'s lower accuracy bound above
    `b`'s upper one). On an axis where either point has no interval the point values decide as in the classic
    front (fewer or equal tokens and higher or equal accuracy, one strictly), so rows without intervals (written
    before them) keep their old marking.

    >>> p = lambda t, lo, hi, a, alo, ahi: {"mean_tokens": t, "accuracy": a,
    ...                                     "ci": {"mean_tokens": [lo, hi], "accuracy": [alo, ahi]}}
    >>> dominates(p(60, 58, 62, 0.6, 0.58, 0.62), p(70, 68, 72, 0.5, 0.48, 0.52))
    True
    >>> dominates(p(60, 58, 69, 0.6, 0.58, 0.62), p(70, 68, 72, 0.5, 0.48, 0.52))  # token intervals overlap
    False
    """

    def bounds(p, key):
        ci = (p.get("ci") or {}).get(key)
        return (ci[0], ci[1]) if ci and ci[0] is not None and ci[1] is not None else None

    ax, bx, ay, by = bounds(a, x), bounds(b, x), bounds(a, y), bounds(b, y)
    if ax and bx:
        fewer = fewer_or_equal = ax[1] < bx[0]
    else:
        fewer, fewer_or_equal = a[x] < b[x], a[x] <= b[x]
    if ay and by:
        better = better_or_equal = ay[0] > by[1]
    else:
        better, better_or_equal = a[y] > b[y], a[y] >= b[y]
    return bool(fewer_or_equal and better_or_equal and (fewer or better))


def interval_pareto_flags(points: Sequence[dict], x: str = "mean_tokens", y: str = "accuracy") -> list[bool]:
    """For each point, whether no other point `dominates` it beyond the intervals (the interval-aware Pareto
    front: a point is dropped only when another is better in both tokens and accuracy beyond their intervals)."""
    for p in points:
        if p.get(x) is None or p.get(y) is None:
            raise ValueError(f"point {p.get('label') or p.get('recipe')!r} has no {x!r} / {y!r}.")
    return [not any(dominates(q, p, x, y) for q in points if q is not p) for p in points]
