"""
`trl-efficient testbed scorecard`: what the testbed promises, beside what was measured, in one table.

A comparison is only worth reading if the world it runs in has something to decide and the protocol has the power to
decide it. The scorecard reads the two files that say so, both written by commands anyone can rerun:

- the base model's **world report** (`trl-efficient testbed world-report --json world_report_v2.json`,
  `report.world_report`): how far the base over-thinks, where thinking pays, how its length follows L1 targets and
  HBPO budgets, all measured on its own generations;
- the **comparison** (`compare.json`, from `trl-efficient testbed compare` or `python perf/testbed/compare.py`): whether
  RL learns, the intervals of every recipe-minus-GRPO difference, the verdicts, and the comparison's own timing.

and prints each target (`TARGETS`, docs/testbed.md "Scorecard") with the measured value and whether it is met. A target
that is not met says so: the scorecard reports, it does not gate.

>>> compare = {"rows": [
...     {"recipe": "base", "mean_floor_tokens": 60.0, "seeds": [0], "num_tasks": 1024, "ci": {}},
...     {"recipe": "grpo", "mean_floor_tokens": 60.0, "seeds": [0, 1, 2], "num_tasks": 1024, "ci": {},
...      "vs_reference": {"reference": "base", "accuracy": [0.1, 0.05, 0.15], "mean_tokens": [-5.0, -9.0, -1.0]},
...      "method_check": {"claim": "baseline", "held": None}},
...     {"recipe": "kimi", "mean_floor_tokens": 60.0, "seeds": [0, 1, 2], "num_tasks": 1024, "ci": {},
...      "vs_reference": {"reference": "grpo", "accuracy": [0.0, -0.01, 0.01], "mean_tokens": [-20.0, -21.0, -19.0]},
...      "method_check": {"claim": "shorter", "held": True}}],
...     "timing": {"workers": 2, "seconds": 3000.0,
...                "looks": [{"seeds": 3, "runs": 7, "trained": 7, "seconds": 3000.0}]}}
>>> [(row["item"], row["met"]) for row in scorecard_rows(compare, None)]  # no world report: 1, 2, 4, 8, 9 unknown
[(1, None), (2, None), (3, True), (4, None), (5, True), (6, True), (7, None), (8, None), (9, None)]
>>> compare["confirmation"] = {"timing": {"workers": 2, "seconds": 900.0,
...                                       "looks": [{"seeds": 3, "runs": 9, "trained": 9, "seconds": 900.0}]}}
>>> next(r for r in scorecard_rows(compare, None) if r["item"] == 7)["met"]  # 50 + 15 minutes
True
"""

from __future__ import annotations

import json
import os
import statistics
from typing import Any

from .checks import FRACTION_MARGIN, TOKEN_MARGIN, is_baseline
from .headroom import (
    AGGRESSIVE,
    MAX_PAIR_HALF_WIDTH,
    MAX_TRAINED_ACCURACY,
    MIN_AGGRESSIVE_LOSS,
    MIN_TRAINED_ACCURACY,
    rl_figures_items,
)
from .report import MAX_EASY_GAIN, MIN_FLOOR_RATIO, MIN_FOLLOWING_PEARSON, MIN_HARD_GAIN, MIN_REDUNDANT_SHARE
from .specs import BASE_RECIPE, SCORECARD_RECIPE

__all__ = ["TARGETS", "load_inputs", "load_scorecard", "scorecard_markdown", "scorecard_rows", "world_report_path"]

# The comparison's targets (the world's are `report`'s): seeds and tasks per recipe, open checks, minutes on 2 cores
MIN_SEEDS, MIN_TASKS, MAX_INCONCLUSIVE, MAX_MINUTES = 3, 1024, 4, 120.0
# The testbed's targets (docs/testbed.md, "Scorecard"): item -> (what, target).
TARGETS = {
    1: ("dynamic range", f"base tokens / floor >= {MIN_FLOOR_RATIO}, redundant share >= {MIN_REDUNDANT_SHARE}, easy "
                         "(k = 1-2) ratio >= hard (k = 7-8)"),
    2: ("a real trade-off", f"own thinking over the forced minimal trace: hard (k >= 6) >= +{MIN_HARD_GAIN:.2f}, easy "
                            f"(k <= 2) <= +{MAX_EASY_GAIN:.2f}"),
    3: ("RL learns", "GRPO (correctness only) above the base's accuracy, interval excluding 0"),
    4: ("length instructions followed", f"Pearson(requested, generated length) >= {MIN_FOLLOWING_PEARSON} under "
                                        "every length prompt"),
    5: ("power", f">= {MIN_SEEDS} seeds, >= {MIN_TASKS:,} paired tasks; half-width of recipe - GRPO <= "
                 f"{TOKEN_MARGIN:.0%} of the floor in tokens and <= {FRACTION_MARGIN} in accuracy"),
    6: ("every check decides", f"<= {MAX_INCONCLUSIVE} checks inconclusive; every 'not held' diagnosed in "
                               "docs/testbed.md"),
    7: ("fast enough", f"the comparison on 2 cores in <= {MAX_MINUTES:.0f} minutes: every recipe and control x "
                       f"{MIN_SEEDS} seeds, the later looks and the confirmation"),
    # world v3 (issue 35): RL's figures in the world report (`world-report --rl`, `headroom.rl_figures`)
    8: ("accuracy resolves", f"GRPO accuracy {MIN_TRAINED_ACCURACY}-{MAX_TRAINED_ACCURACY}; half-width of a recipe "
                             f"pair's accuracy difference (constant-penalty - grpo) <= {MAX_PAIR_HALF_WIDTH}"),
    9: ("over-shortening costs", f"a {AGGRESSIVE:g}x constant penalty loses >= {MIN_AGGRESSIVE_LOSS} hard-task "
                                 "accuracy against GRPO (interval below 0); the moderate one does not (low end above "
                                 f"-{MIN_AGGRESSIVE_LOSS})"),
}  # fmt: skip


def world_report_path(output_dir: str, model: str) -> str:
    """Where `compare`'s scorecard looks for the world report of `model` (`testbed:v2` -> `world_report_v2.json`).

    >>> world_report_path("results", "testbed:v2")
    'results/world_report_v2.json'
    """
    name = model.split(":", 1)[1] if model.startswith("testbed:") else os.path.basename(model.rstrip("/"))
    return os.path.join(output_dir, f"world_report_{name}.json")


def _fmt_interval(values, spec: str = "+.3f") -> str:
    point, low, high = values
    return f"{point:{spec}} [{low:{spec}}, {high:{spec}}]"


def _rl_items(world: dict | None) -> list[dict]:
    """Items 8 and 9 from the world report's RL figures (`headroom.rl_figures_items`: headroom and resolution, the
    aggressive penalty's cost and the moderate one's)."""
    if not (world or {}).get("rl"):
        text = "no RL figures in the world report (trl-efficient testbed world-report --rl --json ...)"
        return [{"item": i, "measured": text, "met": None} for i in (8, 9)]
    items = rl_figures_items(world["rl"])
    return [{"item": 8 + i // 2, "measured": "; ".join(f"{it['property']} {it['measured']}" for it in pair),
             "met": all(it["met"] for it in pair)} for i, pair in ((0, items[:2]), (2, items[2:]))]  # fmt: skip


def _world_items(world: dict | None) -> list[dict]:
    if world is None:
        return [{"item": i, "measured": "no world report (trl-efficient testbed world-report --json ...)", "met": None}
                for i in (1, 2, 4)]  # fmt: skip
    dyn, trade, follow = world["dynamic_range"], world["tradeoff"], world["following"]
    floor_by_k = sorted(dyn["floor_by_difficulty"].items(), key=lambda kv: int(kv[0]))
    floors = ", ".join(f"{k}: {v:.0f}" for k, v in floor_by_k)
    low, high = dyn["ratio_interval"]
    one = {
        "item": 1,
        "measured": f"tokens / floor {dyn['ratio']:.2f} [{low:.2f}, {high:.2f}], redundant share "
        f"{dyn['redundant_share']:.3f}, easy {dyn['easy_ratio']:.2f} vs hard {dyn['hard_ratio']:.2f} (floor per k: "
        f"{floors})",
        "met": dyn["ratio"] >= MIN_FLOOR_RATIO
        and dyn["redundant_share"] >= MIN_REDUNDANT_SHARE
        and dyn["easy_ratio"] >= dyn["hard_ratio"],
    }
    hard, easy = trade["hard"], trade["easy"]
    two = {
        "item": 2,
        "measured": f"hard {hard['gain']:+.3f} [{hard['interval'][0]:+.3f}, {hard['interval'][1]:+.3f}], easy "
        f"{easy['gain']:+.3f} [{easy['interval'][0]:+.3f}, {easy['interval'][1]:+.3f}] (accuracy "
        f"{trade['accuracy_own']:.3f} own vs {trade['accuracy_forced_minimal']:.3f} forced minimal)",
        "met": hard["gain"] >= MIN_HARD_GAIN and easy["gain"] <= MAX_EASY_GAIN,
    }
    four = {
        "item": 4,
        "measured": ", ".join(
            f"{name} {f['pearson']:+.3f} [{f['interval'][0]:+.3f}, {f['interval'][1]:+.3f}]"
            for name, f in follow.items()
        ),
        "met": bool(follow) and all(f["pearson"] >= MIN_FOLLOWING_PEARSON for f in follow.values()),
    }
    return [one, two, four]


def _half_width(values) -> float:
    return (values[2] - values[1]) / 2


def _looks_trained_all(looks: list[dict]) -> bool:
    """Whether one invocation's looks trained every run they hold. A look holds all `seeds` of its rows, and a later
    look's rows all have its number of seeds (`runner.undecided`), so the runs it should train are its share of seeds
    new since the look before: `runs x (seeds - earlier) / seeds`.

    >>> _looks_trained_all([{"seeds": 3, "runs": 148, "trained": 148}, {"seeds": 6, "runs": 186, "trained": 93},
    ...                     {"seeds": 9, "runs": 198, "trained": 66}])
    True
    >>> _looks_trained_all([{"seeds": 3, "runs": 148, "trained": 140}, {"seeds": 6, "runs": 186, "trained": 93}])
    False
    """
    earlier = 0
    for look in looks:
        if look["trained"] != look["runs"] * (look["seeds"] - earlier) // look["seeds"]:
            return False
        earlier = look["seeds"]
    return True


def _compare_items(compare: dict) -> list[dict]:
    rows = [r for r in compare["rows"] if r.get("status", "ok") == "ok"]
    by_name = {r["recipe"]: r for r in rows}
    grpo = by_name.get(BASE_RECIPE)
    learns = (grpo or {}).get("vs_reference", {})
    three = {
        "item": 3,
        "measured": f"GRPO - base accuracy {_fmt_interval(learns['accuracy'])} on {len(grpo['seeds'])} seeds, tokens "
        f"{_fmt_interval(learns['mean_tokens'], '+.1f')}"
        if learns.get("accuracy")
        else "no GRPO row paired with the base",
        "met": learns["accuracy"][1] > 0 if learns.get("accuracy") else None,
    }
    from .protocol import CONTROL_JOBS

    # a matching control is GRPO itself (its difference from grpo is 0 by construction): not a recipe's power
    paired = [
        r for r in rows if r.get("vs_reference", {}).get("reference") == BASE_RECIPE and r["recipe"] not in CONTROL_JOBS
    ]
    floor = (grpo or rows[0])["mean_floor_tokens"] if rows else 0.0
    token_limit = TOKEN_MARGIN * floor
    tokens = [_half_width(r["vs_reference"]["mean_tokens"]) for r in paired]
    accuracy = [_half_width(r["vs_reference"]["accuracy"]) for r in paired]
    seeds = [len(r["seeds"]) for r in rows if r["recipe"] != "base"]
    tasks = [r["num_tasks"] for r in rows]
    if paired:
        measured = (
            f"seeds {min(seeds)}-{max(seeds)}, {min(tasks):,} tasks; token half-widths {min(tokens):.1f}-"
            f"{max(tokens):.1f} (median {statistics.median(tokens):.1f}; limit {token_limit:.1f}), "
            f"{sum(h <= token_limit for h in tokens)} of {len(tokens)} within; accuracy half-widths "
            f"{min(accuracy):.3f}-{max(accuracy):.3f} (median {statistics.median(accuracy):.3f}), "
            f"{sum(h <= FRACTION_MARGIN for h in accuracy)} of {len(accuracy)} within"
        )
        met = (min(seeds) >= MIN_SEEDS and min(tasks) >= MIN_TASKS and all(h <= token_limit for h in tokens)
               and all(h <= FRACTION_MARGIN for h in accuracy))  # fmt: skip
    else:
        measured, met = "no recipe paired with GRPO", None
    five = {"item": 5, "measured": measured, "met": met}
    checked = [r for r in rows if r.get("method_check") and not is_baseline(r["method_check"])]
    # protocol 1 files label every verdict (`verdicts.label`: controls are no claims, "cannot be judged" no verdict)
    words = {
        r["recipe"]: r["method_check"].get("label")
        or {True: "held", False: "not held", None: "inconclusive"}[r["method_check"]["held"]]
        for r in checked
    }
    words = {n: w for n, w in words.items() if w != "control"}
    open_ = [n for n, w in words.items() if w == "inconclusive"]
    refuted = [n for n, w in words.items() if w == "not held"]
    other = [f"{n} {w}" for n, w in words.items() if w not in ("held", "inconclusive", "not held")]
    after_bh = (compare.get("verdicts") or {}).get("held_after_bh")
    claims = (compare.get("verdicts") or {}).get("claims_held")  # protocol 10: held and counted as method claims
    six = {
        "item": 6,
        "measured": f"{sum(w == 'held' for w in words.values())} held"
        f"{'' if after_bh is None else f' ({after_bh} after BH)'}"
        f"{'' if claims is None else f', {claims} of them counted as method claims (protocol 10)'}, "
        f"{len(open_)} inconclusive"
        f"{' (' + ', '.join(open_) + ')' if open_ else ''}, {len(refuted)} not held"
        f"{' (' + ', '.join(refuted) + ')' if refuted else ''}{'; ' + ', '.join(other) if other else ''}; HBPO "
        f"{words.get(SCORECARD_RECIPE, '-')}",
        "met": len(open_) <= MAX_INCONCLUSIVE if words else None,
    }  # fmt: skip
    timing = compare.get("timing")
    if timing and timing.get("looks"):
        first, later = timing["looks"][0], timing["looks"][1:]
        confirmation = (compare.get("confirmation") or {}).get("timing")  # the confirmation pass's own compare
        # every run trained by these invocations: a later look also holds its rows' earlier seeds, which the earlier
        # looks trained (`_looks_trained_all`)
        complete = _looks_trained_all(timing["looks"]) and _looks_trained_all((confirmation or {}).get("looks", []))
        minutes = (timing["seconds"] + (confirmation or {}).get("seconds", 0.0)) / 60
        later_text = (f"; later looks {', '.join(str(look['trained']) for look in later)} runs in "
                      f"{sum(look['seconds'] for look in later) / 60:.1f} min" if later else "")  # fmt: skip
        confirm_text = (f"; confirmation {sum(look['trained'] for look in confirmation['looks'])} runs in "
                        f"{confirmation['seconds'] / 60:.1f} min"
                        if confirmation else "; no confirmation timed")  # fmt: skip
        seven = {
            "item": 7,
            "measured": f"{minutes:.1f} min on {timing['workers']} workers: first look (every recipe x "
            f"{first['seeds']} seeds) {first['trained']} of {first['runs']} runs trained in "
            f"{first['seconds'] / 60:.1f} min{later_text}{confirm_text}"
            + (
                ""
                if complete
                else "; finished runs were reused, so this is not the full runtime: time it from an empty --output-dir"
            ),  # fmt: skip
            "met": minutes <= MAX_MINUTES if complete and confirmation else None,
        }
    else:
        seven = {"item": 7, "measured": "not recorded in this compare.json", "met": None}
    return [three, five, six, seven]


def scorecard_rows(compare: dict, world: dict | None) -> list[dict]:
    """One dict per item of `TARGETS`, in order: `item`, `what`, `target`, `measured` (text), `met` (`True`,
    `False`, or `None` when the files cannot say). Item 7 is judged on the whole invocation (every look), and only
    when it trained every run of its first look (from an empty output directory)."""
    found = {row["item"]: row for row in _world_items(world) + _compare_items(compare) + _rl_items(world)}
    return [{"item": i, "what": TARGETS[i][0], "target": TARGETS[i][1], **found[i]} for i in sorted(TARGETS)]


def scorecard_markdown(compare: dict, world: dict | None, sources: str = "") -> str:
    """The scorecard as a Markdown table (`scorecard_rows`), with a line naming its sources."""
    mark = {True: "met", False: "**not met**", None: "-"}
    lines = ["| # | target | measured | |", "|---|---|---|---|"]
    for row in scorecard_rows(compare, world):
        cells = [str(row["item"]), f"{row['what']}: {row['target']}", row["measured"], mark[row["met"]]]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    if sources:
        lines += ["", sources]
    return "\n".join(lines)


def load_inputs(compare_json: str, world_json: str | None = None) -> tuple[dict, dict | None, str | None]:
    """The comparison of `compare_json`, and the world report next to it (`world_report_path` of its base model) or
    at `world_json`: `(compare, world, world_json)`, the last two `None` when there is no report."""
    with open(compare_json) as f:
        compare: dict[str, Any] = json.load(f)
    model = (compare.get("settings") or {}).get("base_model", "testbed:v2")
    world_json = world_json or world_report_path(os.path.dirname(compare_json) or ".", model)
    if not os.path.exists(world_json):
        return compare, None, None
    with open(world_json) as f:
        return compare, json.load(f), world_json


def load_scorecard(compare_json: str, world_json: str | None = None) -> str:
    """`scorecard_markdown` of a `compare.json` and its world report (`load_inputs`), with a line naming them."""
    compare, world, world_json = load_inputs(compare_json, world_json)
    sources = f"Sources: `{compare_json}`" + (f", `{world_json}`" if world is not None else "") + "."
    return scorecard_markdown(compare, world, sources)
