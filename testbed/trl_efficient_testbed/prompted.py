r"""
The prompted recipes in their prompted mode (issue 35, item 3): each recipe whose testbed claim is conditioned
(`checks.CONDITIONED`: HBPO, L1-Exact, L1-Max, SABER, ASRR, BudgetThinker) against its comparator under the same
prompts, as their papers evaluate them: with the length or budget in the prompt.

`trl-efficient testbed prompted [RESULTS_DIR] [--json PATH]` prints the table; docs/prompted.md holds the committed
comparison's rendering.

**What is compared.** Every run of these recipes was evaluated under the recipe's own prompts (the run files'
`modes`: per prompt, one completion on each of the first `check_eval` evaluation tasks). The comparator is the
recipe's matching control (`protocol.matching_control`: `grpo-prompted`, GRPO trained with the same seeds and
evaluated under every conditioned recipe's prompts) when it holds every prompt of the recipe, else the base model
(`testbed:v2` before training). BudgetThinker's prompts force control tokens that only the base with those tokens
added has, so its comparator is the base, as in its method check (`protocol.yaml`, `unchanged_reference`). Each row
uses the runs `compare.json` lists for it (`runs[row]`), paired on the seeds both rows have; the base has one run and
is repeated over the recipe's seeds (`stats.Panel.aligned`).

**The measures**, per prompt and over all of a recipe's prompts ("all": the per-(seed, task) mean over its prompts,
as the method checks pool them), each a difference recipe minus comparator:

- accuracy (`correct`), in points: $\Delta_{acc} = \mathrm{acc}_{recipe} - \mathrm{acc}_{comparator}$;
- mean completion tokens (`lengths`): $\Delta_{tok} = L_{recipe} - L_{comparator}$ (negative: shorter);
- the length-following error of the recipe's method check (`checks.py`), for prompts with a target value $v$:
  $|L - v|$ (L1-Exact), $\max(0, L - v)$ (L1-Max, HBPO), $\max(0, T - v)$ with $T$ the thinking tokens (SABER,
  BudgetThinker); negative: follows its prompt better. ASRR's prompt (the no-think prefix) has no target.

**Intervals**: 95%, paired by training seed and task, from `checks.CheckInputs.paired` (`stats.interval_at`: the
Student-t half-width over the per-seed differences combined with the percentile distances of `settings.bootstrap`
task resamples seeded with `settings.seed`, as every method check computes them).

>>> following("l1-exact"), following("saber"), following("asrr")
(('lengths', 'abs'), ('thinking', 'over'), None)
"""

from __future__ import annotations

import json
import os

import numpy as np

from .literature import DEFAULT_RESULTS  # the committed comparison (world v2)

__all__ = ["DEFAULT_RESULTS", "compare_prompted", "following", "prompted", "prompted_markdown"]

MEASURES = {  # how `prompted_markdown` names each following error
    ("lengths", "abs"): "abs(L - v)",
    ("lengths", "over"): "max(0, L - v)",
    ("thinking", "over"): "max(0, think - v)",
}


def following(recipe: str) -> tuple[str, str] | None:
    """`(key, kind)` of the length-following error `recipe`'s method check scores (`checks._l1`, `_hbpo`, `_saber`,
    `_budgetthinker`): the mode record it reads (`lengths` or `thinking`) and `abs` ($|x - v|$) or `over`
    ($\\max(0, x - v)$); `None` for a claim without a target (ASRR)."""
    from .checks import claim_info
    from .specs import SPECS

    claim = claim_info(recipe)
    return None if claim.following is None else claim.following(SPECS[recipe])


def _error(panel, names: list[str], key: str, kind: str) -> np.ndarray:
    """(S, T) cells of the following error, the mean over the prompts `names` (`checks._overshoot` for `over`)."""
    from .checks import _overshoot

    if kind == "over":
        return _overshoot(panel, names, key)
    return np.mean([np.abs(panel.modes[m][key] - float(panel.mode_values[m])) for m in names], axis=0)


def _estimate(inputs, a: np.ndarray, b: np.ndarray) -> dict:
    """`{"recipe", "comparator" (means of the cells), "difference" ([point, low, high] of a - b, or None)}`."""
    difference = [None if x is None else float(x) for x in inputs.paired(a, b)]
    return {"recipe": float(a.mean()), "comparator": float(b.mean()),
            "difference": None if difference[0] is None else difference}  # fmt: skip


def compare_prompted(recipe: str, panel, comparator_name: str, comparator, settings: dict) -> list[dict]:
    """One row per prompt of `recipe` (by prompted value), then `all` (with two or more prompts): `{"recipe",
    "comparator", "prompt", "value", "seeds", "accuracy", "tokens", "following"}` (each measure `_estimate`'s dict,
    `following` also with its `measure`; `None` without a target). `panel` and `comparator` are `stats.Panel`s
    holding the recipe's prompts; `settings`: the comparison's (bootstrap, seed)."""
    from .checks import CheckInputs, _by_value, _mode_accuracy

    rec, ref = panel.aligned(comparator)
    inputs = CheckInputs(panel=rec, resamples=settings["bootstrap"], seed=settings["seed"])  # 95%: alpha 0.025
    names = _by_value(rec, rec.modes)
    measure = following(recipe)
    rows = []
    groups = [(m, [m]) for m in names] + ([("all", names)] if len(names) > 1 else [])
    for prompt, group in groups:
        tokens = [np.mean([p.modes[m]["lengths"] for m in group], axis=0) for p in (rec, ref)]
        row = {"recipe": recipe, "comparator": comparator_name, "prompt": prompt,
               "value": rec.mode_values.get(prompt) if prompt != "all" else None, "seeds": list(rec.seeds),
               "accuracy": _estimate(inputs, _mode_accuracy(rec, group), _mode_accuracy(ref, group)),
               "tokens": _estimate(inputs, *tokens), "following": None}  # fmt: skip
        targets = all(rec.mode_values.get(m) is not None for m in group)
        if measure is not None and targets:
            errors = _error(rec, group, *measure), _error(ref, group, *measure)
            row["following"] = {"measure": MEASURES[measure], **_estimate(inputs, *errors)}
        rows.append(row)
    return rows


def prompted(results_dir: str = DEFAULT_RESULTS) -> dict:
    """Every conditioned recipe of the comparison in `results_dir` (its `compare.json` and run files) against its
    comparator under its own prompts (module docstring): `{"results_dir", "rows", "missing"}`, `missing` naming
    each recipe without a finished row or without a comparator holding its prompts."""
    from .checks import CONDITIONED
    from .literature import _runs
    from .protocol import matching_control
    from .stats import Panel

    with open(os.path.join(results_dir, "compare.json")) as f:
        data = json.load(f)
    ok = {r["recipe"] for r in data["rows"] if r.get("status", "ok") == "ok"} | {"base"}
    panels: dict = {}

    def panel_of(name: str):
        if name not in panels:
            paths = data["runs"].get(name) if name in ok else None
            panels[name] = Panel.from_runs(_runs(results_dir, paths)) if paths else None
        return panels[name]

    rows, missing = [], []
    for recipe in CONDITIONED:
        panel = panel_of(recipe)
        if panel is None or not panel.modes:
            missing.append(f"{recipe}: no finished row with prompted evaluations")
            continue
        candidates = [n for n in (matching_control(recipe, data["settings"].get("base_model")), "base") if n]
        found = [(n, p) for n in candidates if (p := panel_of(n)) is not None and set(panel.modes) <= set(p.modes)]
        if not found:
            missing.append(f"{recipe}: no comparator evaluated under its prompts ({', '.join(candidates)})")
            continue
        rows += compare_prompted(recipe, panel, *found[0], data["settings"])
    return {"results_dir": results_dir, "rows": rows, "missing": missing}


def _cell(estimate: dict | None, scale: float, digits: int) -> tuple[str, str]:
    """`("recipe / comparator", "diff [low, high]")` of one measure; `-` without it."""
    if estimate is None:
        return "-", "-"
    means = f"{estimate['recipe'] * scale:.{digits}f} / {estimate['comparator'] * scale:.{digits}f}"
    if estimate["difference"] is None:
        return means, "-"
    point, low, high = (None if v is None else v * scale for v in estimate["difference"])
    interval = "[no interval]" if low is None else f"[{low:+.{digits}f}, {high:+.{digits}f}]"
    return means, f"{point:+.{digits}f} {interval}"


def prompted_markdown(result: dict) -> str:
    """The table: one line per recipe and prompt (then `all`), accuracy in % and tokens, each as recipe / comparator
    and the difference with its 95% interval, and the following error with its measure."""
    lines = ["| recipe | vs | prompt | seeds | accuracy % (recipe / vs) | Δ accuracy [95%] (pts) | tokens (recipe / "
             "vs) | Δ tokens [95%] | following error | error (recipe / vs) | Δ error [95%] |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in result["rows"]:
        acc, tok = _cell(r["accuracy"], 100, 1), _cell(r["tokens"], 1, 1)
        follow = r["following"]
        err = _cell(follow, 1, 1)
        prompt = "**all**" if r["prompt"] == "all" else f"`{r['prompt']}`"
        measure = follow["measure"] if follow else "-"
        lines.append(f"| {r['recipe']} | {r['comparator']} | {prompt} | {len(r['seeds'])} | {acc[0]} | {acc[1]} | "
                     f"{tok[0]} | {tok[1]} | {measure} | {err[0]} | {err[1]} |")  # fmt: skip
    if result["missing"]:
        lines += ["", "Not compared: " + "; ".join(result["missing"]) + "."]
    return "\n".join(lines)
