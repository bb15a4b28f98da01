"""
Method checks: does each recipe do on the testbed what its paper says it does?

A check is measured from evaluations under the recipe's own conditions (`check_modes`: HBPO prompted with each
budget, L1 with each target, SABER with each tier's system prompt) plus the plain evaluation of every row, and is
reported as the measured values and whether the claim held (`True`/`False`, or `None` = inconclusive: the claim
cannot be tested, or the effect goes the claimed way but within two standard errors). Nothing is hidden: a claim that fails is printed as failed.

- HBPO: mean tokens on easy tasks (1-2 ops) < hard tasks (7-8 ops) *and* per-budget mean lengths increase with the
  prompted budget (Spearman rho of budget vs length = 1);
- L1-Exact / L1-Max: generated length follows the prompted target (Pearson and Spearman correlation above
  2/sqrt(n), two standard errors of a zero correlation);
- DLER / DA-DLER: truncated fraction below the base model's (untestable when the base never truncates), and
  not longer than it;
- SABER: thinking tokens under the smallest tier's prompt < under the largest tier's;
- Bingo: redundant share below the reference's at similar accuracy;
- DAPO overlong: truncated fraction not above the reference's;
- the other length methods: shorter than the reference by more than two standard errors, at similar accuracy
  (within `ACCURACY_TOLERANCE`).

The reference is the `grpo` row when the comparison has one, else the base model.

>>> round(pearson([1, 2, 3, 4], [2, 4, 5, 9]), 4), spearman([1, 2, 3, 4], [2, 4, 5, 9])
(0.9648, 1.0)
"""

from __future__ import annotations

import math

__all__ = ["ACCURACY_TOLERANCE", "check_modes", "fraction_noise", "mean_noise", "method_check", "pearson", "rank",
           "spearman"]

ACCURACY_TOLERANCE = 0.04  # about the noise of 256 eval samples (two per task on 128 tasks)
EASY_OPS, HARD_OPS = ("1", "2"), ("7", "8")

_SHORTER = {"kimi", "cosine", "shorter-better", "laser", "gdpo", "drpo", "grpo-lead", "canon", "gfpo",
            "gfpo-adaptive"}  # fmt: skip


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
    """The evaluation modes (`trl_efficient.eval.evaluate.EvalMode`) a recipe's check needs, from its testbed scale."""
    from ..eval.evaluate import EvalMode, parse_mode

    if recipe == "hbpo":
        return [m for b in scale.config["budgets"] for m in parse_mode(f"hbpo:{b}")]
    if recipe in ("l1-exact", "l1-max"):
        low, high = scale.config["target_length_range"]
        targets = sorted({int(round(low + (high - low) * q)) for q in (0.1, 0.3, 0.5, 0.7, 0.9)})
        family = "l1" if recipe == "l1-exact" else "l1-max"
        return [m for t in targets for m in parse_mode(f"{family}:{t}")]
    if recipe == "saber":
        from ..prompts import saber_system_prompt

        tiers = scale.recipe_kwargs["tiers"]
        return [EvalMode(f"saber:{t}", system=saber_system_prompt("budget", t), value=t) for t in (tiers[0], tiers[-1])]
    return []


def _fmt(x, digits=1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _mean_over(by_difficulty: dict, levels) -> float | None:
    cells = [by_difficulty[d] for d in levels if d in by_difficulty]
    n = sum(c["n"] for c in cells)
    return sum(c["mean_tokens"] * c["n"] for c in cells) / n if n else None


def mean_noise(row: dict, ref: dict) -> float:
    """Two standard errors of a difference of mean tokens (0 when the rows lack `std_tokens` / `num_samples`).

    >>> mean_noise({"std_tokens": 30.0, "num_samples": 100}, {"std_tokens": 40.0, "num_samples": 100})  # 2 sqrt(9 + 16)
    10.0
    """
    if not all(r.get("std_tokens") is not None and r.get("num_samples") for r in (row, ref)):
        return 0.0
    return 2 * math.sqrt(row["std_tokens"] ** 2 / row["num_samples"] + ref["std_tokens"] ** 2 / ref["num_samples"])


def fraction_noise(p1: float, n1: int | None, p2: float, n2: int | None) -> float:
    """Two standard errors of a difference of two fractions (0 without sample counts).

    >>> round(fraction_noise(0.5, 100, 0.5, 100), 4)
    0.1414
    """
    if not n1 or not n2:
        return 0.0
    return 2 * math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)


def _shorter_at_similar_accuracy(row, ref, ref_name) -> dict:
    noise = mean_noise(row, ref)
    gap = ref["mean_tokens"] - row["mean_tokens"]
    similar = row["accuracy"] >= ref["accuracy"] - ACCURACY_TOLERANCE
    measured = (f"tokens {row['mean_tokens']:.1f} vs {ref['mean_tokens']:.1f} (noise +-{noise:.1f}), accuracy "
                f"{row['accuracy']:.3f} vs {ref['accuracy']:.3f}")  # fmt: skip
    held = bool(gap > noise and similar)
    if similar and 0 < gap <= noise:
        held, measured = None, measured + ": shorter, within noise"
    return {"claim": f"shorter than {ref_name} at similar accuracy (>= {ref_name} - {ACCURACY_TOLERANCE})",
            "measured": measured, "held": held}  # fmt: skip


def method_check(recipe: str, row: dict, mode_records: dict, reference: dict | None, reference_name: str) -> dict:
    """The check of one recipe: `{"claim", "measured", "held"}` (`held` is `None` when untestable).

    `row` is the recipe's comparison row, `mode_records[mode_name] = {"value": int, "lengths": [...],
    "thinking": [...] }` its per-sample lengths under each of `check_modes`, `reference` the reference row.
    """
    if recipe == "grpo":
        return {"claim": "baseline", "measured": "-", "held": None}
    if recipe == "hbpo":
        by = row["by_difficulty"]
        easy, hard = _mean_over(by, EASY_OPS), _mean_over(by, HARD_OPS)
        budgets = [(rec["value"], sum(rec["lengths"]) / len(rec["lengths"])) for rec in mode_records.values()]
        budgets.sort()
        rho = spearman([b for b, _ in budgets], [m for _, m in budgets])
        held = easy is not None and hard is not None and easy < hard and rho is not None and rho >= 1.0 - 1e-9
        per = ", ".join(f"{b}: {m:.1f}" for b, m in budgets)
        return {"claim": "easy (1-2 ops) shorter than hard (7-8 ops); length rises with the prompted budget",
                "measured": f"easy {_fmt(easy)} vs hard {_fmt(hard)} tokens; by budget {per} (rho {_fmt(rho, 2)})",
                "held": bool(held)}  # fmt: skip
    if recipe in ("l1-exact", "l1-max"):
        targets, lengths, means = [], [], []
        for rec in mode_records.values():
            targets += [rec["value"]] * len(rec["lengths"])
            lengths += rec["lengths"]
            means.append(f"{rec['value']}: {sum(rec['lengths']) / len(rec['lengths']):.1f}")
        r, rho = pearson(targets, lengths), spearman(targets, lengths)
        bar = 2 / math.sqrt(max(1, len(lengths)))  # two standard errors of a zero correlation
        held = r is not None and rho is not None and r > bar and rho > bar
        return {"claim": "generated length follows the prompted target (Pearson and Spearman > 2/sqrt(n))",
                "measured": f"pearson {_fmt(r, 2)}, spearman {_fmt(rho, 2)} (n {len(lengths)}, bar {bar:.2f}); mean "
                f"tokens by target {', '.join(means)}",
                "held": bool(held)}  # fmt: skip
    if reference is None:
        return {"claim": "-", "measured": "no reference row", "held": None}
    if recipe in ("dler", "da-dler"):
        t, t_ref = row["truncated_fraction"], reference["truncated_fraction"]
        measured = (f"truncated {t:.3f} vs {reference_name} {t_ref:.3f}; tokens {row['mean_tokens']:.1f} vs "
                    f"{reference['mean_tokens']:.1f}")  # fmt: skip
        claim = f"fewer truncations than {reference_name}, not longer"
        if t_ref == 0:
            return {"claim": claim, "measured": measured + f" ({reference_name} never truncates: untestable)",
                    "held": None}  # fmt: skip
        noise = fraction_noise(t, row.get("num_samples"), t_ref, reference.get("num_samples"))
        measured += f" (noise +-{noise:.3f})"
        if 0 < t_ref - t <= noise:
            return {"claim": claim, "measured": measured + ": fewer, within noise", "held": None}
        return {"claim": claim, "measured": measured,
                "held": bool(t_ref - t > noise and row["mean_tokens"] <= reference["mean_tokens"])}  # fmt: skip
    if recipe == "saber":
        recs = sorted(mode_records.values(), key=lambda rec: rec["value"])
        if len(recs) < 2:
            return {"claim": "-", "measured": "no tier evaluations", "held": None}
        lo, hi = recs[0], recs[-1]
        m_lo, m_hi = (sum(r["thinking"]) / len(r["thinking"]) for r in (lo, hi))
        return {"claim": f"thinking shorter under the {lo['value']}-token tier prompt than the {hi['value']}-token one",
                "measured": f"thinking tokens {m_lo:.1f} vs {m_hi:.1f}", "held": bool(m_lo < m_hi)}  # fmt: skip
    if recipe == "bingo":
        lower = row["redundant_share"] < reference["redundant_share"]
        similar = row["accuracy"] >= reference["accuracy"] - ACCURACY_TOLERANCE
        return {"claim": f"fewer insignificant (redundant) tokens than {reference_name} at similar accuracy",
                "measured": f"redundant share {row['redundant_share']:.3f} vs {reference['redundant_share']:.3f}, "
                f"accuracy {row['accuracy']:.3f} vs {reference['accuracy']:.3f}",
                "held": bool(lower and similar)}  # fmt: skip
    if recipe == "dapo-overlong":
        t, t_ref = row["truncated_fraction"], reference["truncated_fraction"]
        return {"claim": f"no more truncations than {reference_name}",
                "measured": f"truncated {t:.3f} vs {t_ref:.3f}", "held": bool(t <= t_ref)}  # fmt: skip
    if recipe in _SHORTER:
        return _shorter_at_similar_accuracy(row, reference, reference_name)
    return {"claim": "no check defined", "measured": "-", "held": None}
