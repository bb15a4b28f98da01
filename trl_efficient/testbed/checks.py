"""
Method checks: does each recipe do on the testbed what its paper says it does?

A check is measured from evaluations under the recipe's own conditions (`check_modes`: HBPO prompted with each
budget, L1 with each target, SABER with each tier's system prompt) plus the plain evaluation of every row, and is
reported as the measured values and whether the claim held (`True`/`False`, or `None` = inconclusive: the claim
cannot be tested, or the effect goes the claimed way but within two standard errors). Nothing is hidden: a claim that
fails is printed as failed.

The prompt-conditioned recipes are checked against **the base model under the same prompts** (`testbed:formats`
already follows the formats loosely, so "length follows the prompt" alone would credit the method with what the
base model brings): the effect of training is the change from the base, per task (the same check tasks under the
same prompts, so differences are paired by task and their noise is two standard errors of the paired differences):

- HBPO: the budget spread (mean length at the largest prompted budget minus at the smallest) grows over the base's
  beyond noise, *and* easy tasks (1-2 ops) get shorter than the base's easy tasks beyond noise (adaptive: HBPO cuts
  where little thinking is needed); the per-budget means, Spearman rho and hard-easy gaps of both are printed;
- L1-Exact: mean abs(length - target) falls from the base's beyond noise *and* the Pearson correlation of target and
  length rises over the base's (a uniform cut that does not follow the target is not L1's claim);
- L1-Max: mean overshoot max(0, length - target) falls from the base's beyond noise *and* the Pearson correlation
  rises over the base's;
- SABER: the tier gap (thinking tokens under the largest tier's prompt minus the smallest's) grows over the base's
  beyond noise;
- DLER / DA-DLER: fewer truncations than the base model, not longer, measured at a tighter cap
  (`TIGHT_CAP_FRACTION` of the cap: 96 tokens at the testbed's 192): the base model truncates 0.4% of completions at
  192, so a difference at the training cap is untestable; at 96 a completion is truncated when it has not ended
  (EOS) within 96 tokens, read from the same 192-token samples (sampling is token by token, so this is exactly what
  a 96-token generation would give);
- Bingo: redundant share below the reference's at similar accuracy;
- DAPO overlong: truncated fraction not above the reference's;
- ASRR: under the no-think prefix (the `asrr` evaluation mode), accuracy above the base model's under the same prefix
  beyond noise (it learns to reason after the prefix where needed) and fewer tokens than the reference;
- LSPO (which targets accuracy, not length): accuracy above the reference's beyond noise;
- the other length methods: shorter than the reference by more than two standard errors, at similar accuracy
  (within `ACCURACY_TOLERANCE`).

The reference is the `grpo` row when the comparison has one, else the base model.

>>> round(pearson([1, 2, 3, 4], [2, 4, 5, 9]), 4), spearman([1, 2, 3, 4], [2, 4, 5, 9])
(0.9648, 1.0)
"""

from __future__ import annotations

import math

__all__ = [
    "ACCURACY_TOLERANCE",
    "CONDITIONED",
    "TIGHT_CAP_FRACTION",
    "check_modes",
    "fraction_noise",
    "mean_noise",
    "method_check",
    "paired_gain",
    "pearson",
    "rank",
    "spearman",
]

ACCURACY_TOLERANCE = 0.04  # about the noise of 256 eval samples (two per task on 128 tasks)
EASY_OPS, HARD_OPS = ("1", "2"), ("7", "8")
CONDITIONED = ("hbpo", "l1-exact", "l1-max", "saber", "asrr")  # checked under their prompts, against the base
TIGHT_CAP_FRACTION = 0.5  # DLER's check: truncation at this fraction of the cap (96 of 192 tokens)

_SHORTER = {"kimi", "cosine", "shorter-better", "laser", "gdpo", "drpo", "grpo-lead", "canon", "gfpo",
            "gfpo-adaptive", "hapo", "a-dlp", "alp", "grpo-lambda", "dot", "laser-d", "laser-de", "lapo", "curriculum",
            "budgetthinker", "frugal", "step-pruner", "grsp", "pear", "o1-pruner", "sar"}  # fmt: skip
_NOT_LESS_ACCURATE = {"lspo", "canon-entropy"}  # final accuracy, not length (methods.md §20, §26 entropy)


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
    if recipe == "asrr":
        return parse_mode("asrr")
    return []


def paired_gain(before: list[float], after: list[float]) -> tuple[float, float]:
    """Mean of `before[i] - after[i]` and two standard errors of it (pairs = the same task under the same prompt).

    >>> paired_gain([10, 20, 30, 40], [8, 18, 28, 38])
    (2.0, 0.0)
    """
    d = [b - a for b, a in zip(before, after, strict=True)]
    if not d:
        return 0.0, 0.0
    m = sum(d) / len(d)
    var = sum((x - m) ** 2 for x in d) / max(1, len(d) - 1)
    return m, 2 * math.sqrt(var / len(d))


def _verdict(gain: float, noise: float, also: bool = True) -> bool | None:
    """held when the gain exceeds the noise (and `also`), inconclusive when it is positive within noise (and `also`),
    not held otherwise."""
    if gain > noise and also:
        return True
    if 0 < gain <= noise and also:
        return None
    return False


def _fmt(x, digits=1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _cells(by_difficulty: dict, levels) -> list[dict]:
    return [
        by_difficulty.get(d, by_difficulty.get(int(d))) for d in levels if d in by_difficulty or int(d) in by_difficulty
    ]


def _mean_over(by_difficulty: dict, levels) -> float | None:
    cells = _cells(by_difficulty, levels)
    n = sum(c["n"] for c in cells)
    return sum(c["mean_tokens"] * c["n"] for c in cells) / n if n else None


def _pooled(by_difficulty: dict, levels) -> dict:
    """`{"mean_tokens", "std_tokens", "num_samples"}` of the samples of these difficulty levels together."""
    cells = _cells(by_difficulty, levels)
    n = sum(c["n"] for c in cells)
    if not n:
        return {"mean_tokens": None, "std_tokens": None, "num_samples": 0}
    mean = sum(c["mean_tokens"] * c["n"] for c in cells) / n
    second = sum(((c.get("std_tokens") or 0.0) ** 2 + c["mean_tokens"] ** 2) * c["n"] for c in cells) / n
    return {"mean_tokens": mean, "std_tokens": math.sqrt(max(0.0, second - mean**2)), "num_samples": n}


def _by_value(records: dict, key: str = "lengths") -> list[tuple[int, list[float]]]:
    return sorted((rec["value"], rec[key]) for rec in records.values())


def _budget_summary(records: dict) -> tuple[str, float | None]:
    per = [(v, sum(xs) / len(xs)) for v, xs in _by_value(records)]
    rho = spearman([v for v, _ in per], [m for _, m in per])
    return ", ".join(f"{v}: {m:.1f}" for v, m in per), rho


def _target_pairs(records: dict) -> tuple[list[int], list[float]]:
    targets, lengths = [], []
    for value, xs in _by_value(records):
        targets += [value] * len(xs)
        lengths += xs
    return targets, lengths


def _l1_check(recipe: str, mode_records: dict, base_records: dict | None) -> dict:
    exact = recipe == "l1-exact"
    name = "abs(length - target)" if exact else "overshoot max(0, length - target)"
    claim = (f"length follows the prompted target better than the base model under the same prompts: mean {name} "
             "falls beyond noise (paired by task) and the target-length Pearson rises")  # fmt: skip
    targets, lengths = _target_pairs(mode_records)
    r, rho = pearson(targets, lengths), spearman(targets, lengths)
    if not base_records or any(k not in base_records for k in mode_records):
        return {"claim": claim, "measured": f"pearson {_fmt(r, 2)}, spearman {_fmt(rho, 2)}; no base evaluation under "
                "the same prompts", "held": None}  # fmt: skip
    b_targets, b_lengths = _target_pairs({k: base_records[k] for k in mode_records})
    err = (lambda n, t: abs(n - t)) if exact else (lambda n, t: max(0, n - t))
    before = [err(n, t) for n, t in zip(b_lengths, b_targets, strict=True)]
    after = [err(n, t) for n, t in zip(lengths, targets, strict=True)]
    gain, noise = paired_gain(before, after)
    r_b, rho_b = pearson(b_targets, b_lengths), spearman(b_targets, b_lengths)
    rises = r is not None and (r_b is None or r > r_b)
    means = lambda recs: ", ".join(f"{v}: {sum(xs) / len(xs):.1f}" for v, xs in _by_value(recs))  # noqa: E731
    measured = (f"mean {'abs(length - target)' if exact else 'overshoot'} {sum(before) / len(before):.1f} (base) -> "
                f"{sum(after) / len(after):.1f} (gain {gain:.1f}, noise +-{noise:.1f}, n {len(after)}); pearson "
                f"{_fmt(r_b, 2)} -> {_fmt(r, 2)}, spearman {_fmt(rho_b, 2)} -> {_fmt(rho, 2)}; mean tokens by target: "
                f"base {means({k: base_records[k] for k in mode_records})}; trained {means(mode_records)}")  # fmt: skip
    return {"claim": claim, "measured": measured, "held": _verdict(gain, noise, rises)}


def _hbpo_check(row: dict, mode_records: dict, base: dict | None, base_records: dict | None) -> dict:
    claim = (
        "vs the base model under the same budget prefills: the budget spread (length at the largest budget minus "
        "the smallest) grows beyond noise, and easy tasks (1-2 ops) get shorter than the base's beyond noise"
    )
    by = row["by_difficulty"]
    easy, hard = _mean_over(by, EASY_OPS), _mean_over(by, HARD_OPS)
    per, rho = _budget_summary(mode_records)
    if base is None or not base_records or any(k not in base_records for k in mode_records) or len(mode_records) < 2:
        return {"claim": claim, "measured": f"easy {_fmt(easy)} vs hard {_fmt(hard)} tokens; by budget {per} (rho "
                f"{_fmt(rho, 2)}); no base evaluation under the same prompts", "held": None}  # fmt: skip
    vals = _by_value(mode_records)
    b_vals = _by_value({k: base_records[k] for k in mode_records})
    spread = [hi - lo for lo, hi in zip(vals[0][1], vals[-1][1], strict=True)]
    b_spread = [hi - lo for lo, hi in zip(b_vals[0][1], b_vals[-1][1], strict=True)]
    s_gain, s_noise = paired_gain(spread, b_spread)  # spread - base spread
    b_easy, t_easy = _pooled(base["by_difficulty"], EASY_OPS), _pooled(by, EASY_OPS)
    e_gain = (b_easy["mean_tokens"] or 0.0) - (t_easy["mean_tokens"] or 0.0)
    e_noise = mean_noise(t_easy, b_easy)
    b_per, b_rho = _budget_summary({k: base_records[k] for k in mode_records})
    b_hard = _mean_over(base["by_difficulty"], HARD_OPS)
    measured = (f"budget spread {sum(b_spread) / len(b_spread):.1f} (base) -> {sum(spread) / len(spread):.1f} "
                f"(gain {s_gain:.1f}, noise +-{s_noise:.1f}); easy tokens {_fmt(b_easy['mean_tokens'])} (base) -> "
                f"{_fmt(easy)} (noise +-{e_noise:.1f}); hard-easy gap "
                f"{_fmt((b_hard or 0) - (b_easy['mean_tokens'] or 0))} -> {_fmt((hard or 0) - (easy or 0))}; "
                f"by budget: base {b_per} (rho {_fmt(b_rho, 2)}); trained {per} "
                f"(rho {_fmt(rho, 2)})")  # fmt: skip
    v1, v2 = _verdict(s_gain, s_noise), _verdict(e_gain, e_noise)
    held = False if False in (v1, v2) else (True if (v1, v2) == (True, True) else None)
    return {"claim": claim, "measured": measured, "held": held}


def _saber_check(mode_records: dict, base_records: dict | None) -> dict:
    vals = _by_value(mode_records, "thinking")
    if len(vals) < 2:
        return {"claim": "-", "measured": "no tier evaluations", "held": None}
    (lo_v, lo), (hi_v, hi) = vals[0], vals[-1]
    claim = (f"vs the base model under the same tier prompts: the gap in thinking tokens between the {hi_v}-token and "
             f"the {lo_v}-token tier prompt grows beyond noise")  # fmt: skip
    m = lambda xs: sum(xs) / len(xs)  # noqa: E731
    if not base_records or any(k not in base_records for k in mode_records):
        return {"claim": claim, "measured": f"thinking tokens {m(lo):.1f} vs {m(hi):.1f}; no base evaluation",
                "held": None}  # fmt: skip
    b_vals = _by_value({k: base_records[k] for k in mode_records}, "thinking")
    b_lo, b_hi = b_vals[0][1], b_vals[-1][1]
    gap = [h - low for low, h in zip(lo, hi, strict=True)]
    b_gap = [h - low for low, h in zip(b_lo, b_hi, strict=True)]
    gain, noise = paired_gain(gap, b_gap)
    measured = (
        f"thinking tokens at tier {lo_v} / {hi_v}: base {m(b_lo):.1f} / {m(b_hi):.1f} (gap {m(b_gap):.1f}) -> "
        f"trained {m(lo):.1f} / {m(hi):.1f} (gap {m(gap):.1f}); gain {gain:.1f}, noise +-{noise:.1f}"
    )
    return {"claim": claim, "measured": measured, "held": _verdict(gain, noise)}


def _dler_check(row: dict, base: dict, base_name: str) -> dict:
    cap = row.get("tight_cap")
    if cap is None or base.get("tight_cap") != cap:
        return {"claim": f"fewer truncations than {base_name} at a tight cap, not longer",
                "measured": "no truncation rate at the tight cap", "held": None}  # fmt: skip
    claim = f"fewer truncations than {base_name} at a {cap}-token cap (half the training cap), not longer"
    t, t_ref = row["tight_truncated_fraction"], base["tight_truncated_fraction"]
    noise = fraction_noise(t, row.get("num_samples"), t_ref, base.get("num_samples"))
    measured = (f"truncated at {cap}: {t:.3f} vs {base_name} {t_ref:.3f} (noise +-{noise:.3f}); at the cap: "
                f"{row['truncated_fraction']:.3f} vs {base['truncated_fraction']:.3f}; tokens {row['mean_tokens']:.1f} "
                f"vs {base['mean_tokens']:.1f}")  # fmt: skip
    return {"claim": claim, "measured": measured,
            "held": _verdict(t_ref - t, noise, row["mean_tokens"] <= base["mean_tokens"])}  # fmt: skip


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


def _asrr_check(row: dict, mode_records: dict, reference: dict | None, reference_name: str,
                base_records: dict | None) -> dict:  # fmt: skip
    """ASRR (methods.md §24): under the no-think prefix the trained model recovers accuracy over the base model under
    the same prefix (it learns to reason in the answer where needed) beyond noise, and stays shorter than the
    reference's plain evaluation."""
    claim = (f"under the no-think prefix: accuracy above the base's under the same prefix (beyond noise) and fewer "
             f"tokens than {reference_name}")  # fmt: skip
    mine, base = mode_records.get("asrr"), (base_records or {}).get("asrr")
    if not mine or not base or reference is None or mine.get("accuracy") is None or base.get("accuracy") is None:
        return {"claim": claim, "measured": "no asrr-mode records", "held": None}
    n1, n2 = len(mine["lengths"]), len(base["lengths"])
    gain, noise = mine["accuracy"] - base["accuracy"], fraction_noise(mine["accuracy"], n1, base["accuracy"], n2)
    tokens = sum(mine["lengths"]) / max(1, n1)
    shorter = tokens < reference["mean_tokens"]
    measured = (f"prefix accuracy {mine['accuracy']:.3f} vs base {base['accuracy']:.3f} (noise +-{noise:.3f}); "
                f"prefix tokens {tokens:.1f} vs {reference_name} {reference['mean_tokens']:.1f}")  # fmt: skip
    return {"claim": claim, "measured": measured, "held": _verdict(gain, noise, shorter)}


def _not_less_accurate(row, ref, ref_name) -> dict:
    noise = fraction_noise(row["accuracy"], row.get("num_samples"), ref["accuracy"], ref.get("num_samples"))
    gain = row["accuracy"] - ref["accuracy"]
    measured = f"accuracy {row['accuracy']:.3f} vs {ref['accuracy']:.3f} (noise +-{noise:.3f})"
    held = True if gain > noise else (None if gain >= -noise else False)
    return {"claim": f"more accurate than {ref_name} (the method targets accuracy, not length)", "measured": measured,
            "held": held}  # fmt: skip


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


def method_check(
    recipe: str,
    row: dict,
    mode_records: dict,
    reference: dict | None,
    reference_name: str,
    base: dict | None = None,
    base_records: dict | None = None,
) -> dict:
    """The check of one recipe: `{"claim", "measured", "held"}` (`held` is `None` when inconclusive or untestable).

    `row` is the recipe's comparison row, `mode_records[mode_name] = {"value": int, "lengths": [...],
    "thinking": [...] }` its per-sample lengths under each of `check_modes` (one sample per check task, in task
    order), `reference` the reference row, `base` the base model's row and `base_records` its records under the same
    modes (the conditioned recipes and DLER are checked against the base model).
    """
    if recipe == "grpo":
        return {"claim": "baseline", "measured": "-", "held": None}
    if recipe == "dr-grpo":  # GRPO without its length and std biases (methods.md §32): a baseline, not a length method
        return {"claim": "baseline (unbiased)", "measured": "-", "held": None}
    if recipe == "hbpo":
        return _hbpo_check(row, mode_records, base, base_records)
    if recipe in ("l1-exact", "l1-max"):
        return _l1_check(recipe, mode_records, base_records)
    if recipe == "saber":
        return _saber_check(mode_records, base_records)
    if recipe in ("dler", "da-dler"):
        if base is None:
            return {"claim": "-", "measured": "no base row", "held": None}
        return _dler_check(row, base, "base")
    if recipe == "asrr":
        return _asrr_check(row, mode_records, reference, reference_name, base_records)
    if reference is None:
        return {"claim": "-", "measured": "no reference row", "held": None}
    if recipe in _NOT_LESS_ACCURATE:
        return _not_less_accurate(row, reference, reference_name)
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
        check = _shorter_at_similar_accuracy(row, reference, reference_name)
        if recipe == "budgetthinker":  # its budget claim needs the control tokens: perf/testbed/budget_forcing.py
            check["claim"] += " under the plain prompt (budgets: perf/testbed/budget_forcing.py)"
        return check
    return {"claim": "no check defined", "measured": "-", "held": None}
