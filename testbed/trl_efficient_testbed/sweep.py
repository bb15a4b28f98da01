"""
Sweep one recipe's setting on the testbed and draw its frontier: `trl-efficient testbed sweep` / `frontier`.

`run_sweep("laser", {"reward.laser.target_length": [24, 48, 96]}, TestbedSettings(), "outputs/testbed")` trains the
recipe at every point of the grid over the sets (in order: the first key varies slowest), each on top of the recipe's
testbed scale (`testbed.scaling`) and with everything else as in `compare` (same base model, data, training seeds,
steps), then evaluates every point on the same held-out tasks and sampling streams (`runner.evaluate_testbed`) and
writes `sweep_<recipe>.json`, `sweep_<recipe>.md` and `sweep_<recipe>.png` (the frontier: accuracy vs mean tokens
with 95% error bars, the points connected in sweep order, the Pareto-optimal ones ringed, base and grpo shown).
Every point carries the intervals of `runner.panel_row`; the front is interval-aware (`stats.dominates`: a point is
dominated only by one better in both tokens and accuracy beyond the intervals).

A key is
- an `EfficientGRPOConfig` field (`max_completion_length`), or one entry of a dict field (`advantage_kwargs.alpha`);
- `reward.<builder>.<kwarg>`: a keyword argument of the recipe's reward builder (`reward.laser.target_length`), or
  `reward.<builder>.weight` for the reward's weight (Kimi's length reward has no coefficient, only its weight 0.4).

A value `x<m>` (`x0.5`) is `m` times the value the recipe has at its testbed scale (else the reward factory's
default; an integer value gives the nearest integer: DA-DLER's `truncate_to` 58 x 0.75 is 44): per-token coefficients
and lengths already scaled to the cap are swept around the scaled value without
restating it. Every (point, seed) and the references (base, grpo) are `jobs.Job`s with result files in
`<output_dir>/runs/` named by the hash of their config, exactly as `compare` runs them: a sweep in a comparison's
output directory reuses its base and grpo, and the point where every key has the recipe's own value (the same
effective reward specs, no config change: `changed_overrides`) reuses the recipe's runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import re
from typing import Any

from .runner import TestbedSettings, _num, hub_offline, scaled_recipe, torch_threads, worst_ratio_cell
from .specs import BASE_RECIPE

logger = logging.getLogger(__name__)

__all__ = [
    "changed_overrides",
    "frontier_markdown",
    "parse_sweep_set",
    "resolve_point",
    "run_sweep",
    "sweep_grid",
    "sweep_markdown",
    "write_frontier",
]

REFERENCES = ("base", BASE_RECIPE)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text.strip()


def parse_sweep_set(item: str) -> tuple[str, list]:
    """`"key=v1,v2,v3"` -> `(key, [v1, v2, v3])` with JSON values (lists allowed: `key=[1,2],[3,4]`), else strings
    (`x0.5`, a multiplier).

    >>> parse_sweep_set("reward.laser.target_length=24,48,96")
    ('reward.laser.target_length', [24, 48, 96])
    >>> parse_sweep_set("target_length_range=[5,20],[5,40]")
    ('target_length_range', [[5, 20], [5, 40]])
    >>> parse_sweep_set("reward.l1.alpha=x0.5,x1,x2")
    ('reward.l1.alpha', ['x0.5', 'x1', 'x2'])
    """
    key, sep, values = item.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise ValueError(f"--set must look like key=v1,v2,..., got {item!r}.")
    try:
        parsed = json.loads(f"[{values}]")
    except json.JSONDecodeError:
        parsed = [_value(v) for v in values.split(",") if v.strip()]
    return key, parsed


def sweep_grid(sets: dict[str, list]) -> list[dict]:
    """Every combination of the sets' values, the first key varying slowest.

    >>> sweep_grid({"a": [1, 2], "b": ["x", "y"]})
    [{'a': 1, 'b': 'x'}, {'a': 1, 'b': 'y'}, {'a': 2, 'b': 'x'}, {'a': 2, 'b': 'y'}]
    """
    if not sets or any(not values for values in sets.values()):
        raise ValueError(f"a sweep needs at least one key with at least one value, got {sets!r}.")
    keys = list(sets)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(sets[k] for k in keys))]


def _multiplier(value) -> float | None:
    if isinstance(value, str):
        m = re.fullmatch(r"x([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)", value.strip())
        if m:
            return float(m.group(1))
    return None


def _factory_default(builder: str, kwarg: str):
    """The default of `kwarg` in the reward factory behind `builder` (`RewardInfo.factory`), or
    `inspect.Parameter.empty`; raises when the factory has no such parameter."""
    import inspect

    from trl_efficient.recipes.registry import REWARD_INFO

    info = REWARD_INFO.get(builder)
    factory = info.factory if info is not None else None
    if factory is None:
        return inspect.Parameter.empty
    params = inspect.signature(factory).parameters
    if kwarg not in params:
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return inspect.Parameter.empty
        raise ValueError(f"reward builder {builder!r} ({info.factory_name}) has no argument {kwarg!r}; its arguments "
                         f"are {[p for p in params if p != 'tokenizer']}.")  # fmt: skip
    return params[kwarg].default


def resolve_point(recipe_name: str, point: dict, settings: TestbedSettings, scale=None) -> tuple[dict, dict, dict]:
    """`(config_overrides, reward_overrides, resolved)` of one sweep point: the `train_recipe` arguments and the
    point with multipliers replaced by numbers. Raises `ValueError` naming the key on an unknown field, a reward the
    recipe does not use, an argument its factory lacks, or a multiplier without a numeric value to multiply."""
    import inspect

    from trl_efficient.recipes import get_recipe
    from trl_efficient.trainer import EfficientGRPOConfig

    from .runner import build_config
    from .scaling import settings_scale

    scale = scale or settings_scale(recipe_name, settings)
    recipe = scaled_recipe(get_recipe(recipe_name), scale)
    specs = {spec.builder: spec for spec in recipe.rewards}
    fields = {f.name for f in dataclasses.fields(EfficientGRPOConfig)}
    config_overrides: dict = {}
    reward_overrides: dict = {}
    resolved: dict = {}
    args = None
    for key, value in point.items():
        m = _multiplier(value)
        parts = key.split(".")
        if parts[0] == "reward":
            if len(parts) != 3:
                raise ValueError(f"sweep key {key!r}: a reward key is reward.<builder>.<kwarg>.")
            builder, kwarg = parts[1], parts[2]
            if builder not in specs:
                raise ValueError(f"sweep key {key!r}: recipe {recipe_name!r} has no reward {builder!r}; its rewards "
                                 f"are {sorted(specs)}.")  # fmt: skip
            spec = specs[builder]
            if kwarg == "weight":
                current = spec.weight
            else:
                default = _factory_default(builder, kwarg)
                current = spec.kwargs.get(kwarg, None if default is inspect.Parameter.empty else default)
            target = reward_overrides.setdefault(builder, {})
        else:
            if parts[0] not in fields or len(parts) > 2:
                raise ValueError(f"sweep key {key!r} is neither an EfficientGRPOConfig field (or field.entry of a "
                                 "dict field) nor reward.<builder>.<kwarg>.")  # fmt: skip
            if args is None:
                args = build_config(recipe, settings, os.path.join("outputs", "testbed", "_sweep_probe"), None, scale)
            current = getattr(args, parts[0])
            if len(parts) == 2:
                merged = config_overrides.get(parts[0], current)
                if merged is not None and not isinstance(merged, dict):
                    raise ValueError(f"sweep key {key!r}: {parts[0]} is not a dict field.")
                merged = dict(merged or {})
                current = merged.get(parts[1])
                config_overrides[parts[0]] = merged
                target, kwarg = merged, parts[1]
            else:
                target, kwarg = config_overrides, parts[0]
        if m is not None:
            if isinstance(current, bool) or not isinstance(current, (int, float)):
                raise ValueError(f"sweep key {key!r}: {value!r} multiplies the recipe's value at testbed scale, but "
                                 f"it has no number there ({current!r}); give the values themselves.")  # fmt: skip
            value = current * m
            if isinstance(current, int):  # an integer field (a length, a count) stays one: the nearest integer
                value = round(value)
        target[kwarg] = value
        resolved[key] = value
    return config_overrides, reward_overrides, resolved


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return json.dumps(value) if not isinstance(value, str) else value


def point_label(resolved: dict) -> str:
    """`"target_length=48"`: the last part of each key and its (resolved) value.

    >>> point_label({"reward.laser.target_length": 48, "reward.laser.alpha": 0.25})
    'target_length=48, alpha=0.25'
    """
    return ", ".join(f"{key.rsplit('.', 1)[-1]}={_fmt(value)}" for key, value in resolved.items())


def changed_overrides(recipe_name: str, config_overrides: dict, settings: TestbedSettings, scale) -> dict:
    """The entries of `config_overrides` that change the recipe's testbed config (`runner.build_config`): a point
    whose every key is at the recipe's own value has none, so its runs are `compare`'s runs (the same job hash)."""
    if not config_overrides:
        return {}
    from trl_efficient.recipes import get_recipe

    from .runner import build_config

    args = build_config(scaled_recipe(get_recipe(recipe_name), scale), settings,
                        os.path.join("outputs", "testbed", "_sweep_probe"), None, scale)  # fmt: skip
    return {k: v for k, v in config_overrides.items() if getattr(args, k, object()) != v}


def run_sweep(recipe: str, sets: dict[str, list], settings: TestbedSettings | None = None,
              output_dir: str = "outputs/testbed", overwrite: bool = False, references=REFERENCES,
              keep_models: bool = False, show_progress: bool = True, workers: int = 1) -> dict:  # fmt: skip
    """Train (with `settings.seeds` training seeds) and evaluate `recipe` at every point of `sweep_grid(sets)`; write
    `sweep_<recipe>.{json,md,png}` under `output_dir`. Every point is resolved (`resolve_point`) before anything
    trains, so a bad key fails at once. Runs are `jobs.Job`s in `<output_dir>/runs/`, shared with `compare` (the
    references, and a point equal to the recipe as `compare` trains it, reuse its files), run on `workers`
    processes. A point's row has 95% intervals and its paired differences from grpo (`runner.panel_row`); a point
    whose run raises is a failed row, the others still run. Returns the sweep (what the JSON holds) plus `"files"`."""
    from trl_efficient.overthinking.base import base_model_id, resolve_base_model
    from trl_efficient.recipes import get_recipe

    from .jobs import plan_job, run_jobs
    from .plots import frontier_plot
    from .runner import load_panels, panel_row, panel_rows, plan_runs
    from .scaling import settings_scale

    settings = settings or TestbedSettings()
    get_recipe(recipe)
    scale = settings_scale(recipe, settings)
    points = [resolve_point(recipe, p, settings, scale) + (p,) for p in sweep_grid(sets)]
    for _, reward_overrides, _, _ in points:
        scaled_recipe(get_recipe(recipe), scale).with_reward_kwargs(reward_overrides, "sweep")
    os.makedirs(output_dir, exist_ok=True)
    with torch_threads(), hub_offline():
        ref_plan = plan_runs(list(references), settings, output_dir, keep_models, overwrite)
        base_id = base_model_id(resolve_base_model(settings.base_model))
        point_plan = {}
        for config_overrides, reward_overrides, resolved, _ in points:
            changed = changed_overrides(recipe, config_overrides, settings, scale)
            point_plan[point_label(resolved)] = [
                plan_job(recipe, s, settings, output_dir, base_id, changed, reward_overrides, keep_models)
                for s in settings.training_seeds()
            ]  # fmt: skip
        if overwrite:
            for job in (j for js in point_plan.values() for j in js if os.path.isfile(j.path)):
                os.remove(job.path)
        jobs = [j for js in (*ref_plan.values(), *point_plan.values()) for j in js]
        outcomes = run_jobs(jobs, workers, show_progress, f"sweep {recipe}")
    panels, infos, errors = load_panels(ref_plan, outcomes)
    refs = panel_rows(panels, infos, errors, list(references), settings, checks=False)
    p_panels, p_infos, p_errors = load_panels(point_plan, outcomes)
    reference = BASE_RECIPE if BASE_RECIPE in panels else ("base" if "base" in panels else None)
    rows = []
    for _, _, resolved, given in points:
        label = point_label(resolved)
        if label in p_errors:
            row = {"recipe": recipe, "status": "failed", "num_generations": None, "error": p_errors[label]}
        else:
            info = p_infos[label]
            row = panel_row(recipe, p_panels[label], settings, panels.get(reference), reference, info["train_seconds"],
                            info["num_generations"], info["tight_cap"])  # fmt: skip
        rows.append({**row, "label": label, "point": resolved, "given": given})
    sweep = {"recipe": recipe, "keys": list(sets), "sets": sets, "settings": settings.to_dict(),
             "testbed_scale": scale.to_dict(), "references": refs, "points": rows}  # fmt: skip
    _mark_pareto([sweep])
    stem = os.path.join(output_dir, f"sweep_{recipe}")
    files = {"json": stem + ".json", "markdown": stem + ".md"}
    with open(files["json"], "w") as f:
        json.dump(sweep, f, indent=1)
    with open(files["markdown"], "w") as f:
        f.write(sweep_markdown(sweep))
    if any(p.get("status", "ok") == "ok" for p in rows):
        plot = frontier_plot([sweep], stem + ".png", title=f"Testbed sweep of {recipe} ({', '.join(sets)})")
        if plot:
            files["plot"] = plot
    return {**sweep, "files": files, "failed": [p["label"] for p in rows if p.get("status", "ok") != "ok"]}


def _ok(rows):
    return [r for r in rows if r.get("status", "ok") == "ok"]


def _mark_pareto(sweeps: list[dict]) -> None:
    """Set `pareto` on every point and reference of `sweeps`: Pareto-optimal among all of them (references counted
    once per name)."""
    from .plots import pareto_flags

    refs = {}
    for s in sweeps:
        for r in _ok(s.get("references", [])):
            refs.setdefault(r["recipe"], r)
    everything = [p for s in sweeps for p in _ok(s["points"])] + list(refs.values())
    flags = pareto_flags(everything) if everything else []
    on = {id(p) for p, f in zip(everything, flags, strict=True) if f}
    for s in sweeps:
        for p in _ok(s["points"]):
            p["pareto"] = id(p) in on
        for r in _ok(s.get("references", [])):
            r["pareto"] = id(refs[r["recipe"]]) in on


def _table(sweep: dict) -> list[str]:
    head = ["point", "accuracy", "mean tokens", "excess over floor", "worst tokens/floor (k)", "redundant share",
            "truncated", "Pareto", "train s"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    refs = sweep.get("references", [])
    table_rows = refs + sweep["points"]
    for r in table_rows:
        name = r.get("label") or r["recipe"]
        if r.get("status", "ok") != "ok":
            error = r.get("error", "").replace("|", "\\|")
            lines.append(f"| {name} | **failed**: {error} |" + " |" * (len(head) - 2))
            continue
        secs = "-" if r.get("train_seconds") is None else f"{r['train_seconds']:.0f}"
        lines.append(f"| {name} | {_num(r, 'accuracy', 3)} | {_num(r, 'mean_tokens', 1)} | "
                     f"{_num(r, 'excess_over_floor', 1)} | {worst_ratio_cell(r, refs + [r])} | "
                     f"{_num(r, 'redundant_share', 3)} | {_num(r, 'truncated_fraction', 3)} | "
                     f"{'**yes**' if r.get('pareto') else ''} | {secs} |")  # fmt: skip
    return lines


def sweep_markdown(sweep: dict) -> str:
    """One sweep as Markdown: the references then the points in sweep order (Pareto-optimal among these), with the
    testbed scale and the settings."""
    lines = [f"Sweep of `{sweep['recipe']}` over " + ", ".join(f"`{k}` = {sweep['sets'][k]}" for k in sweep["keys"])
             + " (x<m> = m times the value at testbed scale), on top of its testbed scale:", ""]  # fmt: skip
    lines += _table(sweep)
    lines += ["", f"Testbed scale of `{sweep['recipe']}`: {sweep['testbed_scale']['rule']}"]
    lines += ["", "Settings: " + ", ".join(f"{k}={v}" for k, v in sweep["settings"].items() if k != "extra")]
    return "\n".join(lines) + "\n"


def frontier_markdown(sweeps: list[dict], skipped: dict | None = None) -> str:
    """Several sweeps as Markdown: one table per recipe, Pareto-optimal over every point of every sweep."""
    lines = ["Frontier of the length-penalty recipes on the testbed: each recipe swept over one setting, accuracy vs "
             "mean tokens (values with their 95% intervals over tasks and seeds); **Pareto** = no other point (of any "
             "recipe, base or grpo) has fewer tokens and higher accuracy beyond both intervals (points without "
             "intervals: fewer or equal tokens and higher or equal accuracy, one strictly).", ""]  # fmt: skip
    for s in sweeps:
        lines += [f"### {s['recipe']}: " + ", ".join(f"`{k}` = {s['sets'][k]}" for k in s["keys"]), ""]
        lines += _table(s) + ["", f"Testbed scale: {s['testbed_scale']['rule']}", ""]
    for name, why in (skipped or {}).items():
        lines.append(f"- `{name}` skipped: {why}")
    if sweeps:
        lines += ["", "Settings: " + ", ".join(f"{k}={v}" for k, v in sweeps[0]["settings"].items() if k != "extra")]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_frontier(sweeps: list[dict], out_png: str, skipped: dict | None = None) -> dict:
    """`frontier.{json,md,png}` (the stem of `out_png`) of several sweeps (`run_sweep` results or loaded
    `sweep_<recipe>.json`), Pareto-optimal marked over all of them. The sweeps must share their settings (else their
    points are not comparable): `ValueError` otherwise."""
    from .plots import frontier_plot

    sweeps = [{k: v for k, v in s.items() if k not in ("files", "failed")} for s in sweeps]
    if not sweeps:
        raise ValueError("write_frontier: no sweeps.")
    for s in sweeps[1:]:
        if s["settings"] != sweeps[0]["settings"]:
            raise ValueError(f"sweeps of {sweeps[0]['recipe']!r} and {s['recipe']!r} ran with different settings; "
                             "their points are not comparable.")  # fmt: skip
    _mark_pareto(sweeps)
    stem = os.path.splitext(out_png)[0]
    os.makedirs(os.path.dirname(os.path.abspath(out_png)), exist_ok=True)
    files = {"json": stem + ".json", "markdown": stem + ".md"}
    with open(files["json"], "w") as f:
        json.dump({"sweeps": sweeps, "skipped": skipped or {}}, f, indent=1)
    with open(files["markdown"], "w") as f:
        f.write(frontier_markdown(sweeps, skipped))
    plot = frontier_plot(sweeps, out_png, title="Testbed frontier: the length-penalty recipes, swept")
    if plot:
        files["plot"] = plot
    return files
