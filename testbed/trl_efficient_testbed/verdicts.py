"""
The verdicts of the method checks under the protocol (`protocol.yaml`, issue 32): controls scored on every check,
identical runs merged, the Benjamini-Hochberg correction across the family, and the words of each verdict.

- `score_controls`: every negative control (`placebo`, `constant-penalty`; those a protocol row names, protocol 4)
  run through the recipe's own check, with the recipe's reference and matching control, and the recipe against
  `constant-penalty` (a better trade-off in either direction: what the method adds to a fixed length penalty), stored
  in `method_check["controls"]` and `method_check["vs_constant_penalty"]`.
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

from .checks import CONDITIONED, TRADE_OFF, claim_check, is_baseline, method_check
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
    """The other panels `name`'s row reads: its matching control and the negative controls scored on its check."""
    control = matching_control(name, base_model)
    return ([control] if control else []) + [n for n in row_negative_controls(name) if n != name]


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


def score_controls(name: str, row: dict, panels: dict, ref: str | None, floor: float, settings, tight_cap) -> None:
    """Score every negative control on `name`'s check, and `name` against `constant-penalty` (module docstring)."""
    check = row.get("method_check") or {}
    if is_baseline(check) or is_control(name) or check.get("claim") == "-":
        return
    controls = {}
    scored = row_negative_controls(name)  # all, unless the protocol's row names fewer (protocol 4)
    for control in scored:
        if control not in panels:
            continue
        panel = _restricted(panels[control], list(panels[name].modes))
        result = method_check(name, check_inputs(name, panels, ref, floor, settings, panel=panel), tight_cap)
        controls[control] = _brief(result)
    check["controls"] = controls
    if FIXED_PENALTY in panels and FIXED_PENALTY in scored and name not in CONDITIONED:
        inputs = check_inputs(name, panels, ref, floor, settings)
        inputs.reference, inputs.reference_name = panels[FIXED_PENALTY], FIXED_PENALTY
        check["vs_constant_penalty"] = _brief(claim_check(TRADE_OFF, inputs))


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
    for row in rows:
        check = row.get("method_check")
        if row.get("status", "ok") != "ok" or not check:
            continue
        if is_control(row["recipe"]) and not is_baseline(check):
            check["control"] = True
        twin = duplicates.get(row["recipe"])
        if twin:
            check["duplicate_of"] = twin
            check["cannot_judge"] = (f"its run files measured exactly what {twin}'s did (the same records "
                                     f"and check records, seed by seed): one row, {twin}")  # fmt: skip
            check["held"] = None
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
    return counts


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
    counts = {"held": 0, "not held": 0}
    for row in rows:
        check = row.get("method_check") or {}
        if check.get("label") not in counts:
            continue
        check["confirmed"] = None if row["recipe"] not in again else again[row["recipe"]] == check["label"]
        counts[check["label"]] += bool(check["confirmed"])
    return counts


def headline(rows: list[dict], confirmation: dict | None, protocol: dict) -> str:
    """The README's headline of the testbed's verdicts (issue 32 item 5), from the rows of a `compare.json`, its
    `confirmation` record (`runner.confirm`) and its `protocol`: only a verdict that the confirmation pass repeated is
    stated as a result; the rest are counted and named as what they are; then the negative controls' scores.

    >>> rows = [{"recipe": "a", "method_check": {"label": "held", "confirmed": True}},
    ...         {"recipe": "b", "method_check": {"label": "held", "confirmed": False}},
    ...         {"recipe": "c", "method_check": {"label": "inconclusive"}},
    ...         {"recipe": "placebo", "method_check": {"label": "control", "scored_on": 4, "passes": []}}]
    >>> text = headline(rows, {"seeds": [1000, 1001, 1002], "seed": 1000}, {"version": 5})
    >>> text.split(" (")[0], "**1 held** (`a`), **0 not held**." in text
    ('Confirmed verdicts', True)
    >>> "not confirmed: 1 (`b`). Inconclusive after the looks: 1." in text, text.split(". ")[-1]
    (True, 'Negative controls: `placebo` passes 0 of the 4 checks it is scored on.')
    >>> headline(rows[2:3], None, {}).split(":")[0]
    'No verdict is confirmed yet'
    """
    checks = {r["recipe"]: r["method_check"] for r in rows if r.get("status", "ok") == "ok" and r.get("method_check")}

    def names(pred) -> list[str]:
        return [name for name, c in checks.items() if pred(c)]

    def listed(items: list[str]) -> str:
        return f" ({', '.join(f'`{n}`' for n in items)})" if items else ""

    if not confirmation:
        decided = names(lambda c: c.get("label") in ("held", "not held"))
        return (f"No verdict is confirmed yet: {len(decided)} decided at the looks{listed(decided)} await the "
                "confirmation pass (`python perf/testbed/compare.py --confirm`).")  # fmt: skip
    held = names(lambda c: c.get("label") == "held" and c.get("confirmed") is True)
    not_held = names(lambda c: c.get("label") == "not held" and c.get("confirmed") is True)
    unconfirmed = names(lambda c: c.get("label") in ("held", "not held") and c.get("confirmed") is not True)
    inconclusive = names(lambda c: c.get("label") == "inconclusive")
    cannot = names(lambda c: c.get("label") == "cannot be judged")
    seeds = confirmation.get("seeds") or []
    where = (f"protocol {protocol.get('version', '?')}: decided after the looks, then the same verdict again on "
             f"training seeds {seeds[0]}-{seeds[-1]} and a fresh task set, seed {confirmation.get('seed')}"
             if seeds else f"protocol {protocol.get('version', '?')}")  # fmt: skip
    text = [
        f"Confirmed verdicts ({where}): **{len(held)} held**{listed(held)}, **{len(not_held)} not held**"
        f"{listed(not_held)}. Decided at the looks but not confirmed: {len(unconfirmed)}{listed(unconfirmed)}. "
        f"Inconclusive after the looks: {len(inconclusive)}. Cannot be judged here: {len(cannot)}{listed(cannot)}."
    ]
    controls = []
    for name, check in checks.items():
        if check.get("label") == "control" and "scored_on" in check:
            passes = check.get("passes") or []
            controls.append(f"`{name}` passes {len(passes)} of the {check['scored_on']} checks it is scored on"
                            f"{listed(passes)}")  # fmt: skip
    if controls:
        text.append("Negative controls: " + "; ".join(controls) + ".")
    return " ".join(text)
