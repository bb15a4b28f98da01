"""
The verdicts of the method checks under the protocol (`protocol.yaml`, issue 32): controls scored on every check,
identical runs merged, the Benjamini-Hochberg correction across the family, and the words of each verdict.

- `score_controls`: every negative control (`placebo`, `constant-penalty`; those a protocol row names, protocol 4)
  run through the recipe's own check, with the recipe's reference and matching control, and the recipe against
  `constant-penalty` (a better trade-off in either direction: what the method adds to a fixed length penalty), stored
  in `method_check["controls"]` and `method_check["vs_constant_penalty"]`.
- `credit` (protocol 10, issue 48): a length claim (`credit.length_claims`) is generic when any control passes the
  same check at the row's own seeds (the negative controls, and the GRPO matching controls but its own comparator),
  and credited only when it is held, not generic, and beats the length-matched constant penalty (`nearest_point`);
  stored in `method_check["credit"]`. A mechanism check's row (`credit.mechanism_checks`: A-DLP) is counted on its
  length line, the mechanism's verdict in `method_check["mechanism"]` (`annotate`).
- `annotate(rows)`: after every row has its check: a recipe whose run files measured exactly what an earlier
  recipe's did (`records_sha256`) is `duplicate_of` it and cannot be judged on its own; the BH-adjusted p-value
  (`q_value`) of every check that can be judged, `held_after_bh`; `broken` when `placebo` passes the check;
  `label`, the verdict in words. Returns the counts.

>>> rows = [{"recipe": "a", "records_sha256": "x", "method_check": {"claim": "c", "held": True, "p_value": 0.001,
...          "alpha": 0.0110}},
...         {"recipe": "b", "records_sha256": "x", "method_check": {"claim": "c", "held": True, "p_value": 0.001,
...          "alpha": 0.0110}},
...         {"recipe": "c", "records_sha256": "y", "method_check": {"claim": "c", "held": True, "p_value": 0.009,
...          "alpha": 0.0110}},
...         {"recipe": "d", "records_sha256": "z", "method_check": {"claim": "c", "held": None, "p_value": 0.5,
...          "alpha": 0.0110}}]
>>> counts = annotate(rows)  # repeated p (K = 3) 0.0026, 0.021, 0.69; BH q 0.0079, 0.031 (0.021 x 3/2), 0.69
>>> [r["method_check"]["label"] for r in rows], counts["held"], counts["held_after_bh"], counts["cannot_judge"]
(['held', 'cannot be judged', 'held', 'inconclusive'], 2, 1, 1)
"""

from __future__ import annotations

import dataclasses

from .checks import CONDITIONED, TRADE_OFF, claim_check, claim_of, is_baseline, method_check
from .protocol import (
    CONTROL_JOBS,
    benjamini_hochberg,
    fdr_level,
    load,
    matching_control,
    repeated_p,
    row_negative_controls,
)
from .specs import FIXED_PENALTY, PLACEBO

__all__ = [
    "annotate",
    "check_inputs",
    "confirm_rows",
    "headline",
    "is_control",
    "label",
    "negative_controls",
    "related",
    "score_controls",
]


def negative_controls() -> list[str]:
    return list(load().get("negative_controls") or [])


def is_control(name: str) -> bool:
    """A negative control (`placebo`, `constant-penalty`) or a matching control run (`grpo-prompted`, ...)."""
    return name in negative_controls() or name in CONTROL_JOBS


def related(name: str, base_model: str | None = None) -> list[str]:
    """The other panels `name`'s row reads: its matching control, the negative controls scored on its check and, for
    a length claim (protocol 10, `credit`), the GRPO matching controls scored on it."""
    control = matching_control(name, base_model)
    credit_reads = grpo_controls() if credited_claim(name) is not None else []
    return list(
        dict.fromkeys(
            ([control] if control else [])
            + [n for n in row_negative_controls(name) if n != name]
            + [n for n in credit_reads if n != name]
        )
    )


def _restricted(panel, modes):
    """`panel` with only the check prompts `modes` (a control evaluated under every conditioned recipe's prompts,
    scored on one recipe's check); no prompts when it lacks one of them."""
    keep = {m: panel.modes[m] for m in modes if m in panel.modes}
    if len(keep) != len(modes):
        keep = {}
    return dataclasses.replace(panel, modes=keep, mode_values={m: panel.mode_values[m] for m in keep})


def _brief(result: dict) -> dict:
    return {k: result.get(k) for k in ("held", "p_value", "differences", "measured", "cannot_judge") if k in result}


def check_inputs(name: str, panels: dict, ref: str | None, floor: float, settings,
                 panel=None) -> object:  # fmt: skip
    """The `checks.CheckInputs` of `name`'s method check under the protocol (`protocol.matching_control`): the
    recipe's matching control replaces the base model (conditioned, DLER and DA-DLER checks: `base`) or grpo (FRUGAL:
    `reference`); the intervals at the nominal level of the look its seeds stand at (`protocol.nominal_level`).
    `panel`: score another model (a control) on `name`'s check instead of `name` itself."""
    from .checks import CheckInputs, claim_info
    from .protocol import matching_control, nominal_level

    control = matching_control(name, settings.base_model)
    base, base_name = panels.get("base"), "base"
    reference, reference_name = panels.get(ref), ref or "-"
    if control is not None:
        if claim_info(name).against_base:  # the conditioned checks and DLER's: the base is the comparator
            base, base_name = panels.get(control), control
        else:
            reference, reference_name = panels.get(control), control
    own = panels[name] if panel is None else panel
    return CheckInputs(own, reference, reference_name, base, floor, settings.bootstrap, settings.seed,
                       base_name=base_name, alpha=nominal_level(len(panels[name].seeds)),
                       constant=panels.get(FIXED_PENALTY))  # fmt: skip


def _own_seeds(panel, seeds):
    """`panel` on the seeds it shares with `seeds` (protocol 10: a control is scored at the row's own seeds, the seeds
    both have); `None` when it shares none."""
    if panel.seeds == [None]:
        return panel
    common = [s for s in panel.seeds if s in seeds]
    return panel._select(common) if common else None


def score_controls(name: str, row: dict, panels: dict, ref: str | None, floor: float, settings, tight_cap) -> None:
    """Score every negative control on `name`'s check (at the row's own seeds, protocol 10), `name` against
    `constant-penalty`, and the credit of a length claim (`credit`; module docstring)."""
    check = row.get("method_check") or {}
    if is_baseline(check) or is_control(name) or check.get("claim") == "-":
        return
    key = credited_claim(name)
    mechanism = key is not None and claim_of(name)[1] in mechanism_checks()
    controls = {}
    scored = row_negative_controls(name)  # all, unless the protocol's row names fewer (protocol 4)
    own_seeds = panels[name].seeds
    for control in scored:
        if control not in panels:
            continue
        panel = _own_seeds(_restricted(panels[control], list(panels[name].modes)), own_seeds)
        if panel is None:
            continue
        inputs = check_inputs(name, panels, ref, floor, settings, panel=panel)
        if mechanism:  # protocol 10: a mechanism check's row is judged on its length line; the controls on it too
            inputs.recipe, inputs.tight_cap = name, tight_cap
            result = claim_check(key, inputs)
        else:
            result = method_check(name, inputs, tight_cap)
        controls[control] = _brief(result)
    check["controls"] = controls
    if FIXED_PENALTY in panels and FIXED_PENALTY in scored and name not in CONDITIONED:
        inputs = check_inputs(name, panels, ref, floor, settings)
        inputs.reference, inputs.reference_name = panels[FIXED_PENALTY], FIXED_PENALTY
        check["vs_constant_penalty"] = _brief(claim_check(TRADE_OFF, inputs))
    if key is not None:
        check["credit"] = credit(name, key, check, panels, ref, floor, settings, tight_cap, mechanism)


# --- protocol 10 (`credit`): what a held length claim must also beat to count as the method's ----------------------


def credit_rules() -> dict:
    return dict(load().get("credit") or {})


def length_claims() -> list[str]:
    """The claim keys whose verdict is a length cut (`credit.length_claims`: shorter, tight-cap)."""
    return list(credit_rules().get("length_claims") or [])


def mechanism_checks() -> list[str]:
    """The checks of a mechanism (`credit.mechanism_checks`: A-DLP's controller moved): a column of their own."""
    return list(credit_rules().get("mechanism_checks") or [])


def unmatched_conditions() -> dict[str, str]:
    """Protocol 12 (`credit.unmatched_condition`): `{recipe: why}` for the held claims not counted because their
    matching control never trained under the condition the claim is measured in (ASRR's accuracy under the no-think
    prefix against grpo-prompted, GRPO trained without it)."""
    return {str(k): " ".join(str(v).split()) for k, v in (credit_rules().get("unmatched_condition") or {}).items()}


def constant_points() -> list[str]:
    """The constant penalty's sweep among the negative controls: `constant-penalty` and the rows trained as it with
    another alpha (`constant-penalty-half`)."""
    from .protocol import row_spec

    return [n for n in negative_controls() if n == FIXED_PENALTY or row_spec(n).get("recipe") == FIXED_PENALTY]


def grpo_controls() -> list[str]:
    """The matching controls that are GRPO itself trained or evaluated as a recipe is (cap-matched, prompt-matched):
    scored on every length claim (a check they pass is generic)."""
    from .protocol import matching_controls
    from .specs import BASE_RECIPE

    return [n for n, entry in matching_controls().items() if entry.get("recipe") == BASE_RECIPE]


def credited_claim(name: str) -> str | None:
    """The length claim of `name`'s row that `credit` judges (a key of `credit.length_claims`), `None` when its
    counted check is no length claim: the recipe's own claim; for a mechanism check (A-DLP) its generic line (the
    row's counted verdict under protocol 10); a protocol 3 specific check (LASER-D, HAPO, HBPO, Bingo) is judged
    against constant-penalty already and is no length claim, and its generic line is printed, not counted.

    >>> credited_claim("kimi"), credited_claim("dler"), credited_claim("a-dlp"), credited_claim("laser-d")
    ('shorter', 'tight-cap', 'shorter', None)
    >>> credited_claim("lspo"), credited_claim("lisa"), credited_claim("hbpo")
    (None, None, None)
    """
    from .protocol import row_check

    if row_check(name) is not None:
        return None
    claim, specific = claim_of(name)
    if specific is not None and specific not in mechanism_checks():
        return None
    return claim if claim in length_claims() else None


def nearest_point(panels: dict, name: str) -> tuple[str | None, dict]:
    """The length-matched constant penalty: of the constant penalty's points in `panels` (`constant_points`) the one
    whose mean tokens are nearest `name`'s, each read on the seeds both have; `(point, {point: [recipe's mean tokens,
    point's]})`.

    >>> import numpy as np
    >>> from trl_efficient_testbed.stats import Panel
    >>> p = lambda t: Panel([0, 1], np.array([1, 2]), {"tokens": np.full((2, 2), float(t)), "correct": np.ones((2, 2))})
    >>> nearest_point({"r": p(100), "constant-penalty": p(80), "constant-penalty-half": p(110)}, "r")[0]
    'constant-penalty-half'
    >>> nearest_point({"r": p(100), "constant-penalty": p(95), "constant-penalty-half": p(110)}, "r")[0]
    'constant-penalty'
    """
    means = {}
    for point in constant_points():
        if point not in panels or point == name:
            continue
        try:
            rec, cp = panels[name].aligned(panels[point])
        except ValueError:  # no common seeds
            continue
        means[point] = [float(rec.metrics["tokens"].mean()), float(cp.metrics["tokens"].mean())]
    if not means:
        return None, {}
    return min(means, key=lambda p: abs(means[p][0] - means[p][1])), means


def credit(name: str, key: str, check: dict, panels: dict, ref: str | None, floor: float, settings, tight_cap,
           mechanism: bool = False) -> dict:  # fmt: skip
    """Protocol 10's credit of `name`'s length claim `key` (`credit` in protocol.yaml): `generic`, the controls that
    pass the same check at the row's own seeds (the negative controls, already in `check["controls"]`, and the GRPO
    matching controls, `grpo_controls`, but the row's own comparator); `strongest_control`, the length-matched constant
    penalty (`nearest_point`), and `vs_strongest`, the row against it in either direction (`checks.TRADE_OFF`);
    `accuracy_difference`, recipe - its comparator `[point, low, high]`; `credited`: `None` when the length claim is
    not held, else `True` only when no control passes it and it beats the strongest control. `length` is the length
    line itself for a mechanism check's row (its counted verdict, `annotate`)."""
    from .checks import CHECKS, claim_check

    def inputs(panel=None):
        c = check_inputs(name, panels, ref, floor, settings, panel=panel)
        c.recipe, c.tight_cap = name, tight_cap
        return c

    own = inputs()
    comparator = own.base_name if CHECKS[key].against_base else own.reference_name
    length = claim_check(key, own) if mechanism else check
    scored = dict(check.get("controls") or {})
    for control in grpo_controls():
        if control in (comparator, name) or control not in panels or control in scored:
            continue
        panel = _own_seeds(panels[control], panels[name].seeds)
        if panel is None:
            continue
        scored[control] = _brief(claim_check(key, inputs(panel)))
    generic = [c for c, result in scored.items() if result.get("held") is True and not result.get("cannot_judge")]
    point, means = nearest_point(panels, name)
    vs = None
    if point is not None:
        c = inputs()
        c.reference, c.reference_name = panels[point], point
        vs = _brief(claim_check(TRADE_OFF, c))
    accuracy = (length.get("differences") or {}).get("accuracy")
    held = length.get("held")
    if held is not True:
        credited, reason = None, "the length claim is not held"
    elif generic:
        credited, reason = False, f"generic: {', '.join(generic)} pass{'es' if len(generic) == 1 else ''} it too"
    elif vs is None:
        credited, reason = False, "no constant-penalty point to match its length"
    elif vs.get("held") is not True:
        credited = False
        reason = (f"does not beat the length-matched constant penalty ({point}): "
                  f"{'worse' if vs.get('held') is False else 'inconclusive'}")  # fmt: skip
    else:
        credited, reason = True, f"no control passes it, and it beats the length-matched {point}"
    out = {"claim": key, "comparator": comparator, "credited": credited, "reason": reason, "generic": generic,
           "scored": scored, "strongest_control": point, "mean_tokens": means, "vs_strongest": vs,
           "accuracy_difference": accuracy}  # fmt: skip
    if mechanism:
        out["length"] = {k: length.get(k) for k in ("claim", "measured", "held", "p_value", "alpha", "differences",
                                                    "cannot_judge") if k in length}  # fmt: skip
    return out


def _twin(row: dict, per_seed: dict[str, dict]) -> str | None:
    """The earlier row whose run files measured exactly what `row`'s did on every seed `row` has (the same records and
    check records, seed by seed), though it may have more seeds (its later looks): LASER-DE's 3 seeds are LASER-D's
    seeds 0-2 once LASER-D trained more, and stay one row with it.

    >>> _twin({"seed_records_sha256": {"0": "a", "1": "b"}}, {"x": {"0": "a", "1": "b", "2": "c"}, "y": {"0": "a"}})
    'x'
    >>> _twin({"seed_records_sha256": {"0": "a", "1": "z"}}, {"x": {"0": "a", "1": "b", "2": "c"}}) is None
    True
    """
    mine = row.get("seed_records_sha256") or {}
    if not mine:
        return None
    return next((name for name, theirs in per_seed.items() if all(theirs.get(s) == d for s, d in mine.items())), None)


def label(check: dict) -> str:
    """The verdict in words: baseline, control, cannot be judged, broken (placebo passes), held, not held,
    inconclusive."""
    if is_baseline(check):
        return "baseline"
    if check.get("control"):
        return "control"
    if check.get("duplicate_of") or check.get("cannot_judge"):
        return "cannot be judged"
    if check.get("broken"):
        return "broken"
    return {True: "held", False: "not held", None: "inconclusive"}[check.get("held")]


def twins(rows: list[dict]) -> dict[str, str]:
    """`{recipe: the earlier recipe whose run files measured exactly what its did}` (the same `records_sha256`, or
    `_twin` seed by seed) among the judged rows (not baselines, not controls): one row under the protocol ("cannot
    be judged"), which `annotate` marks and `runner.undecided` stops at the look that finds it (a duplicate is not
    inconclusive: `looks.continue_when`).

    >>> twins([{"recipe": "laser-d", "records_sha256": "x", "method_check": {"claim": "c", "held": None}},
    ...        {"recipe": "laser-de", "records_sha256": "x", "method_check": {"claim": "c", "held": None}},
    ...        {"recipe": "kimi", "records_sha256": "y", "method_check": {"claim": "c", "held": None}}])
    {'laser-de': 'laser-d'}
    """
    seen: dict[str, str] = {}
    per_seed: dict[str, dict] = {}  # an earlier judged row's digest per training seed
    found: dict[str, str] = {}
    for row in rows:
        check = row.get("method_check")
        digest = row.get("records_sha256")
        if row.get("status", "ok") != "ok" or not check or not digest or is_baseline(check):
            continue
        if is_control(row["recipe"]):
            continue
        twin = seen.get(digest) or _twin(row, per_seed)
        if twin:
            found[row["recipe"]] = twin
        else:
            seen[digest] = row["recipe"]
            per_seed[row["recipe"]] = row.get("seed_records_sha256") or {}
    return found


def annotate(rows: list[dict]) -> dict:
    """Mark duplicates (`twins`), broken checks, BH q-values and labels on `rows` (in place); return the counts."""
    duplicates = twins(rows)
    unmatched = unmatched_conditions()
    for row in rows:
        check = row.get("method_check")
        if row.get("status", "ok") != "ok" or not check:
            continue
        _swap_mechanism(check)
        if is_control(row["recipe"]) and not is_baseline(check):
            check["control"] = True
        twin = duplicates.get(row["recipe"])
        if twin:
            check["duplicate_of"] = twin
            check["cannot_judge"] = (f"its run files measured exactly what {twin}'s did (the same records "
                                     f"and check records, seed by seed): one row, {twin}")  # fmt: skip
            check["held"] = None
        if row["recipe"] in unmatched:  # protocol 12: printed, never counted as a method claim
            check["unmatched"] = unmatched[row["recipe"]]
        placebo = (check.get("controls") or {}).get(PLACEBO) or {}
        if placebo.get("held") is True:
            check["broken"] = "placebo passes this check"
        constant = (check.get("controls") or {}).get(FIXED_PENALTY) or {}
        if constant.get("held") is True:  # said beside the verdict: the check credits any length penalty
            check["not_specific"] = (
                "constant-penalty passes this check too: it does not tell the method from a fixed penalty"
            )
    family = [r["method_check"] for r in rows if r.get("method_check") and label(r["method_check"]) in
              ("held", "not held", "inconclusive") and r["method_check"].get("p_value") is not None]  # fmt: skip
    repeated = load()["false_discovery_rate"].get("p_values") == "repeated"
    for check in family:  # protocol 2: BH on the look-adjusted p-values at the family's level (protocol 1: nominal)
        check["p_adjusted"] = repeated_p(check["p_value"]) if repeated else check["p_value"]
    level = fdr_level()
    for check, q in zip(family, benjamini_hochberg([c["p_adjusted"] for c in family]), strict=True):
        check["q_value"] = q
        check["held_after_bh"] = bool(check.get("held") is True and q <= (level if repeated else check["alpha"]))
    counts = {"held": 0, "not held": 0, "inconclusive": 0, "cannot be judged": 0, "broken": 0}
    for row in rows:
        check = row.get("method_check")
        if row.get("status", "ok") != "ok" or not check:
            continue
        check["label"] = label(check)
        if check["label"] != "held" and (check.get("credit") or {}).get("credited") is not None:
            check["credit"]["credited"] = None  # a duplicate, or broken: no held claim to credit
            check["credit"]["reason"] = f"the length claim's verdict is {check['label']}"
        if check["label"] in counts:
            counts[check["label"]] += 1
    for row in rows:  # each negative control's row: the checks it passes, of those it was scored on
        check = row.get("method_check") or {}
        if row["recipe"] in negative_controls() and check:
            scored = [(r["recipe"], r["method_check"]["controls"][row["recipe"]]) for r in rows
                      if row["recipe"] in ((r.get("method_check") or {}).get("controls") or {})]  # fmt: skip
            check["scored_on"] = len(scored)
            check["passes"] = [name for name, result in scored if result.get("held") is True]
            check["fails"] = [name for name, result in scored if result.get("held") is False]
    counts["cannot_judge"] = counts["cannot be judged"]
    counts["held_after_bh"] = sum(1 for c in family if c.get("held_after_bh"))
    counts["family"] = len(family)
    counts["specific"] = sum(1 for c in family if c.get("held_after_bh")
                             and (c.get("vs_constant_penalty") or {}).get("held") is True)  # fmt: skip
    # protocol 10 (`credit`): of the held checks, those counted as method claims
    held = [r["method_check"] for r in rows if r.get("status", "ok") == "ok" and r.get("method_check")
            and r["method_check"].get("label") == "held"]  # fmt: skip
    counts["credited"] = sum(1 for c in held if (c.get("credit") or {}).get("credited") is True)
    counts["generic"] = sum(1 for c in held if (c.get("credit") or {}).get("generic"))
    counts["not_credited"] = sum(1 for c in held if (c.get("credit") or {}).get("credited") is False
                                 and not (c.get("credit") or {}).get("generic"))  # fmt: skip
    counts["claims_held"] = sum(1 for c in held if counted(c))
    counts["claims_held_after_bh"] = sum(1 for c in held if counted(c) and c.get("held_after_bh"))
    counts["mechanism"] = sum(1 for r in rows if (r.get("method_check") or {}).get("mechanism"))
    return counts


def counted(check: dict) -> bool:
    """Whether a held check counts as a method claim (protocol 10): a length claim only when credited (no control
    passes it and it beats the length-matched constant penalty, `credit`); any other check only when no negative
    control passes it. A mechanism check is never counted (`annotate` puts it in `mechanism`), nor (protocol 12) a
    check whose matching control never trained under the condition it is measured in (`unmatched`)."""
    if check.get("label") != "held" or check.get("unmatched"):
        return False
    if "credit" in check:
        return check["credit"].get("credited") is True
    return not any(r.get("held") is True for r in (check.get("controls") or {}).values())


def _swap_mechanism(check: dict) -> None:
    """A mechanism check's row (protocol 10, `credit.mechanism_checks`: A-DLP's controller moved) is counted on its
    length line (`credit["length"]`): the mechanism's verdict moves to `check["mechanism"]`, a column of its own that
    no count or BH family reads. The looks' decisions were the mechanism's (`runner.undecided` reads the check before
    this); the row's counted verdict, its credit and its confirmation are the length line's."""
    length = (check.get("credit") or {}).get("length")
    if not length or "mechanism" in check:
        return
    keys = ("claim", "measured", "held", "p_value", "alpha", "differences", "cannot_judge")
    mechanism = {k: check[k] for k in keys if k in check}
    mechanism["label"] = ("cannot be judged" if mechanism.get("cannot_judge") else
                          {True: "held", False: "not held", None: "inconclusive"}[mechanism.get("held")])  # fmt: skip
    for k in keys:
        check.pop(k, None)
    check.update(length)
    check["mechanism"] = mechanism


def confirm_rows(rows: list[dict], confirmation: list[dict]) -> dict:
    """Mark every held or not-held check of `rows` `confirmed` (in place) from `confirmation`, the rows of the same
    recipes rerun once on training seeds never looked at and a fresh evaluation task set (`runner.confirm`): `True`
    when the confirmation gives the same verdict, `False` when it does not (an inconclusive rerun does not confirm),
    `None` when the recipe was not rerun. Returns `{"held", "not held"}`: the confirmed verdicts of each kind.

    >>> rows = [{"recipe": "a", "method_check": {"label": "held"}}, {"recipe": "b", "method_check": {"label": "held"}},
    ...         {"recipe": "c", "method_check": {"label": "not held"}}]
    >>> again = [{"recipe": "a", "method_check": {"label": "held"}},
    ...          {"recipe": "b", "method_check": {"label": "inconclusive"}}]
    >>> confirm_rows(rows, again), [r["method_check"]["confirmed"] for r in rows]
    ({'held': 1, 'not held': 0}, [True, False, None])
    """
    again = {r["recipe"]: (r.get("method_check") or {}).get("label") for r in confirmation}
    checks = {r["recipe"]: r.get("method_check") or {} for r in confirmation}
    counts = {"held": 0, "not held": 0}
    for row in rows:
        check = row.get("method_check") or {}
        if check.get("label") not in counts:
            continue
        check["confirmed"] = None if row["recipe"] not in again else again[row["recipe"]] == check["label"]
        counts[check["label"]] += bool(check["confirmed"])
        if "credit" in check and row["recipe"] in checks:  # protocol 10: the same credit rule in the confirmation
            theirs = checks[row["recipe"]].get("credit") or {}
            check["credit"]["confirmed"] = theirs.get("credited")
            check["credit"]["confirmed_generic"] = theirs.get("generic")
            check["credit"]["confirmed_accuracy_difference"] = theirs.get("accuracy_difference")
    return counts


def _est(estimate, digits: int) -> str:
    """`-0.010 [-0.030, +0.011]` (a stored `[point, low, high]`), `-` without one."""
    if not estimate or estimate[0] is None:
        return "-"
    if estimate[1] is None:
        return f"{estimate[0]:+.{digits}f}"
    return f"{estimate[0]:+.{digits}f} [{estimate[1]:+.{digits}f}, {estimate[2]:+.{digits}f}]"


def _accuracy_of(check: dict) -> list | None:
    """The accuracy difference a check states (recipe - its comparator): its credit's, else its own `accuracy` (or the
    one accuracy difference it has: ASRR's prefix accuracy, BudgetThinker's budget accuracy)."""
    credit = check.get("credit") or {}
    if credit.get("accuracy_difference"):
        return credit["accuracy_difference"]
    diffs = check.get("differences") or {}
    if "accuracy" in diffs:
        return diffs["accuracy"]
    found = [v for k, v in diffs.items() if "accuracy" in k]
    return found[0] if len(found) == 1 else None


def minimum_detectable(rows: list[dict]) -> dict[str, float | None]:
    """Protocol 10 (`credit.minimum_detectable`): per metric, the median half-width of the judged rows' paired
    intervals against grpo (`vs_reference`, 95%) at the seeds each used: the smallest effect the comparison resolves.

    >>> rows = [{"recipe": r, "method_check": {"label": "held"}, "vs_reference": {"reference": "grpo",
    ...          "mean_tokens": [-5, -5 - w, -5 + w], "accuracy": [0, -w / 100, w / 100]}} for r, w in
    ...         (("a", 4.0), ("b", 6.0), ("c", 10.0))]
    >>> minimum_detectable(rows)
    {'tokens': 6.0, 'accuracy': 0.06}
    """
    widths: dict[str, list[float]] = {"tokens": [], "accuracy": []}
    for row in rows:
        vs = row.get("vs_reference") or {}
        check = row.get("method_check") or {}
        if (
            vs.get("reference") != "grpo"
            or check.get("label") in (None, "baseline", "control")
            or is_control(row["recipe"])
        ):
            continue
        for metric, key in (("tokens", "mean_tokens"), ("accuracy", "accuracy")):
            est = vs.get(key) or []
            if len(est) == 3 and None not in est:
                widths[metric].append((est[2] - est[1]) / 2)
    return {k: (float(sorted(v)[len(v) // 2]) if len(v) % 2 else float(sum(sorted(v)[len(v) // 2 - 1:
            len(v) // 2 + 1]) / 2)) if v else None for k, v in widths.items()}  # fmt: skip


def _credit_text(name: str, check: dict) -> str:
    """`kimi` (tokens saved vs grpo +27.5 [...]; accuracy vs grpo +0.014 [...]; beats the length-matched ...): a
    credited length claim; another claim states its accuracy difference by name, or that accuracy is not part of it."""
    credit = check.get("credit")
    if credit is None:
        diffs = check.get("differences") or {}
        found = [(k, v) for k, v in diffs.items() if "accuracy" in k]
        text = "; ".join(f"{k.replace('_', ' ')} {_est(v, 3)}" for k, v in found) or "accuracy not part of the check"
        return f"`{name}` ({text})"
    comparator = credit.get("comparator") or "its comparator"
    diffs = check.get("differences") or {}
    parts = []
    if diffs.get("tokens_saved"):
        parts.append(f"tokens saved vs {comparator} {_est(diffs['tokens_saved'], 1)}")
    if diffs.get("tight_truncations_saved"):
        parts.append(f"truncations saved vs {comparator} {_est(diffs['tight_truncations_saved'], 3)}")
    acc = _accuracy_of(check)
    parts.append(f"accuracy vs {comparator} {_est(acc, 3)}" if acc else "accuracy not part of the check")
    if credit.get("confirmed_accuracy_difference"):
        parts.append(f"in the confirmation {_est(credit['confirmed_accuracy_difference'], 3)}")
    if credit.get("strongest_control"):
        parts.append(f"beats the length-matched {credit['strongest_control']}")
    return f"`{name}` ({'; '.join(parts)})"


def stated_claims(rows: list[dict]) -> list[str]:
    """The claims a world's headline states as results (`headline`), in row order: held and counted (`counted`:
    protocols 10 and 12), repeated by the confirmation pass and, for a length claim, credited again there; a length
    claim of a compare.json rendered before protocol 10 (no credit) is not stated.

    >>> c = {"label": "held", "confirmed": True}
    >>> stated_claims([{"recipe": "lspo", "method_check": c}, {"recipe": "kimi", "method_check": c},
    ...                {"recipe": "asrr", "method_check": {**c, "unmatched": "why"}}])
    ['lspo']
    """
    out = []
    for row in rows:
        c = row.get("method_check")
        if row.get("status", "ok") != "ok" or not c or not (counted(c) and c.get("confirmed") is True):
            continue
        if "credit" in c and c["credit"].get("confirmed") is not True:
            continue
        if "credit" not in c and credited_claim(row["recipe"]) is not None:  # rendered before protocol 10
            continue
        out.append(row["recipe"])
    return out


def headline(rows: list[dict], confirmation: dict | None, protocol: dict, world: str | None = None) -> str:
    """The results page's headline of one world's verdicts (issue 32 item 5, protocol 10), from the rows of a
    `compare.json`, its `confirmation` record (`runner.confirm`) and its `protocol`: stated as results only the claims
    the confirmation pass repeated that also beat their strongest control (a length claim: credited, `credit`, at the
    looks and in the confirmation; another claim: no control passes it), each with its accuracy difference; then what
    is held but not counted, and why (generic: a control passes; not better than the length-matched constant
    penalty; a mechanism check), what survives Benjamini-Hochberg, the smallest effect each metric resolves at the
    seeds used (`minimum_detectable`), the rest counted, and the negative controls' scores.

    >>> credit = {"comparator": "grpo", "accuracy_difference": [-0.01, -0.03, 0.01], "strongest_control": "cp"}
    >>> rows = [{"recipe": "a", "method_check": {"label": "held", "confirmed": True, "q_value": 0.04,
    ...          "held_after_bh": False, "credit": {**credit, "credited": True, "confirmed": True}}},
    ...         {"recipe": "b", "method_check": {"label": "held", "confirmed": True, "credit": {**credit,
    ...          "credited": False, "generic": ["grpo-cap230"]}}},
    ...         {"recipe": "c", "method_check": {"label": "inconclusive"}},
    ...         {"recipe": "placebo", "method_check": {"label": "control", "scored_on": 4, "passes": []}}]
    >>> text = headline(rows, {"seeds": [1000, 1001, 1002], "seed": 1000}, {"version": 10}, "world v2")
    >>> text.split(" (")[0], "strongest control: **1**: length claims (no control passes them; they beat" in text
    ('**World v2**', True)
    >>> "penalty): `a` (accuracy vs grpo -0.010 [-0.030, +0.010]; beats the length-matched cp)." in text
    True
    >>> "generic (a control passes the check): `b` (grpo-cap230, confirmed)" in text, "0 of the 1 checks" in text
    (True, True)
    >>> text.split(". ")[-1]
    'Negative controls: `placebo` passes 0 of the 4 checks it is scored on.'
    >>> lost = {"recipe": "d", "method_check": {"label": "held", "confirmed": True, "credit": {**credit,
    ...         "credited": True, "confirmed": False}}}
    >>> "credited at the looks but not in the confirmation (`d`)" in headline([lost], {"seeds": [1000]}, {})
    True
    >>> headline(rows[2:3], None, {}).split(":")[0]
    'No verdict is confirmed yet'
    """
    checks = {r["recipe"]: r["method_check"] for r in rows if r.get("status", "ok") == "ok" and r.get("method_check")}

    def names(pred) -> list[str]:
        return [name for name, c in checks.items() if pred(c)]

    def listed(items: list[str]) -> str:
        return f" ({', '.join(f'`{n}`' for n in items)})" if items else ""

    title = f"**{world[0].upper() + world[1:]}** " if world else ""
    if not confirmation:
        decided = names(lambda c: c.get("label") in ("held", "not held"))
        return (f"{title}No verdict is confirmed yet: {len(decided)} decided at the looks{listed(decided)} await the "
                "confirmation pass (`python perf/testbed/compare.py --confirm`).").lstrip()  # fmt: skip

    # a length claim of a compare.json rendered before protocol 10 has no credit: it is not stated as a result
    uncredited = names(lambda c: c.get("label") == "held" and "credit" not in c)
    uncredited = [n for n in uncredited if credited_claim(n) is not None]

    def held_confirmed(c: dict) -> bool:
        return c.get("label") == "held" and c.get("confirmed") is True

    claims = stated_claims(rows)
    length = [n for n in claims if "credit" in checks[n]]
    other = [n for n in claims if "credit" not in checks[n]]
    generic = names(lambda c: c.get("label") == "held" and (c.get("credit") or {}).get("generic"))
    losing = names(lambda c: c.get("label") == "held" and (c.get("credit") or {}).get("credited") is False
                   and not (c.get("credit") or {}).get("generic"))  # fmt: skip
    unmatched = names(lambda c: c.get("label") == "held" and c.get("unmatched"))
    passed = [n for n in names(lambda c: c.get("label") == "held" and "credit" not in c and not counted(c))
              if n not in uncredited and n not in unmatched]  # fmt: skip
    lost_in_confirmation = [n for n in names(lambda c: counted(c) and held_confirmed(c))
                            if n not in claims and n not in uncredited]  # credited at the looks, not again  # fmt: skip
    not_held = names(lambda c: c.get("label") == "not held" and c.get("confirmed") is True)
    unconfirmed = names(lambda c: c.get("label") in ("held", "not held") and c.get("confirmed") is not True)
    inconclusive = names(lambda c: c.get("label") == "inconclusive")
    cannot = names(lambda c: c.get("label") == "cannot be judged")
    mechanism = names(lambda c: bool(c.get("mechanism")))
    family = names(lambda c: "q_value" in c)
    survivors = names(lambda c: c.get("held_after_bh"))
    seeds = confirmation.get("seeds") or []
    where = (f"protocol {protocol.get('version', '?')}: decided after the looks, then the same verdict again on "
             f"training seeds {seeds[0]}-{seeds[-1]} and a fresh task set, seed {confirmation.get('seed')}"
             if seeds else f"protocol {protocol.get('version', '?')}")  # fmt: skip
    text = [f"{title}({where}). Confirmed claims that beat their strongest control: **{len(claims)}**: " + (
        "length claims (no control passes them; they beat the length-matched constant penalty): "
        + ", ".join(_credit_text(n, checks[n]) for n in length) if length else "no length claim") + (
        "; other claims (no control passes them; against their matching control): "
        + ", ".join(_credit_text(n, checks[n]) for n in other) if other else "") + "."]  # fmt: skip

    def why(name: str) -> str:
        credit = checks[name].get("credit") or {}
        tags = list(credit.get("generic") or []) + (["confirmed"] if checks[name].get("confirmed") is True else [])
        return f"`{name}` ({', '.join(tags)})" if tags else f"`{name}`"

    held_not = []
    if generic:
        held_not.append("generic (a control passes the check): " + ", ".join(why(n) for n in generic))
    if losing:
        held_not.append("not better than the length-matched constant penalty: " + ", ".join(
            f"`{n}` (vs {(checks[n].get('credit') or {}).get('strongest_control') or '-'}; accuracy "
            f"{_est(_accuracy_of(checks[n]), 3)})" for n in losing))  # fmt: skip
    if passed:
        held_not.append("a negative control passes it" + listed(passed))
    if unmatched:  # protocol 12
        held_not.append("no matching control trained under the condition the claim is measured in: " + ", ".join(
            f"`{n}` ({checks[n]['unmatched']}{', confirmed' if checks[n].get('confirmed') is True else ''})"
            for n in unmatched))  # fmt: skip
    if uncredited:
        held_not.append(
            "length claims not yet judged against their strongest control (this compare.json was "
            "rendered before protocol 10; rendering it again judges them)" + listed(uncredited)
        )
    if lost_in_confirmation:
        held_not.append("credited at the looks but not in the confirmation" + listed(lost_in_confirmation))
    if held_not:
        text.append("Held at the looks but not counted as method claims: " + "; ".join(held_not) + ".")
    if mechanism:
        text.append("Mechanism checks (their own column, never counted): " + ", ".join(
            f"`{n}` {checks[n]['mechanism'].get('label')}" for n in mechanism) + ".")  # fmt: skip
    text.append(f"Benjamini-Hochberg: {len(survivors)} of the {len(family)} checks that can be judged survive"
                f"{listed(survivors)}.")  # fmt: skip
    mde = minimum_detectable(rows)
    resolved = [
        f"+-{v:.1f} tokens" if k == "tokens" else f"+-{v:.3f} accuracy" for k, v in mde.items() if v is not None
    ]
    if resolved:
        text.append("Smallest effect resolved at the seeds used (median half-width of the rows' 95% paired "
                    f"intervals against grpo): {', '.join(resolved)}; an inconclusive verdict is an effect below "
                    "it.")  # fmt: skip
    text.append(f"Confirmed not held: {len(not_held)}{listed(not_held)}. Decided at the looks but not confirmed: "
                f"{len(unconfirmed)}{listed(unconfirmed)}. Inconclusive after the looks: {len(inconclusive)}. Cannot "
                f"be judged here: {len(cannot)}{listed(cannot)}.")  # fmt: skip
    controls = []
    for name, check in checks.items():
        if check.get("label") == "control" and "scored_on" in check:
            passes = check.get("passes") or []
            controls.append(f"`{name}` passes {len(passes)} of the {check['scored_on']} checks it is scored on"
                            f"{listed(passes)}")  # fmt: skip
    if controls:
        text.append("Negative controls: " + "; ".join(controls) + ".")
    return " ".join(text)
