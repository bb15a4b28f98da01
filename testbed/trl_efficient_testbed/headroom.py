"""
What RL does in a world: accuracy headroom, and the cost of over-shortening (world v3's figures, issue 35).

The world report (`report.world_report`) measures the base model alone. Two properties need training, and decide
whether the testbed can rank methods the way papers do:

5. **Accuracy resolves.** After the comparison's GRPO run, accuracy is well below saturation
   (`MIN_TRAINED_ACCURACY`-`MAX_TRAINED_ACCURACY`, overall), so that two methods' accuracies can differ; and the
   paired accuracy difference of a recipe pair (`constant-penalty` - `grpo`, the seeds given) has a 95% half-width
   of at most `MAX_PAIR_HALF_WIDTH`: a difference of 0.02 at matched length resolves.
6. **Over-shortening costs.** A deliberately over-aggressive length penalty (`constant-penalty` with `AGGRESSIVE`
   times its alpha) loses at least `MIN_AGGRESSIVE_LOSS` accuracy on hard tasks (k >= 6, `report.TRADEOFF_HARD`)
   against GRPO, its 95% interval excluding 0, while the moderate one (`constant-penalty` as the comparison trains
   it: alpha = 1/cap) does not (the lower end of its interval above -`MIN_AGGRESSIVE_LOSS`): cutting filler is free,
   cutting the work of hard tasks is not, as the papers report for aggressive penalties.

All three rows are `jobs.Job`s trained exactly as `compare` trains them (same settings, seeds, base model, result
files under `<output_dir>/runs/` named by the hash of their config), so in a comparison's output directory `grpo` and
`constant-penalty` reuse its runs and only the aggressive point trains. Every difference is paired by task and seed
(`runner.panel_row`'s intervals: bootstrap over tasks, Student t over seeds). The targets are fixed here, before the
runs (docs/testbed.md, "World v3").
"""

from __future__ import annotations

__all__ = ["AGGRESSIVE", "rl_figures", "rl_figures_items", "rl_figures_markdown", "world_report_markdown_with_rl"]

# The targets, fixed before any run under them (issue 35, item 2)
MIN_TRAINED_ACCURACY, MAX_TRAINED_ACCURACY = 0.55, 0.80  # GRPO's overall accuracy after the comparison's steps
MAX_PAIR_HALF_WIDTH = 0.015  # 95% half-width of a recipe pair's paired accuracy difference
MIN_AGGRESSIVE_LOSS = 0.05  # hard-task accuracy the over-aggressive penalty loses against GRPO (and the moderate not)
AGGRESSIVE = 4.0  # the over-aggressive penalty: 4 x constant-penalty's alpha (4/cap: a 96-token trace costs a correct
# answer, about the floor of a 7-8 step task)
PENALTY_KEY = "reward.constant_length.alpha"


def rl_figures(settings=None, output_dir: str = "outputs/testbed", workers: int = 1, show_progress: bool = True
               ) -> dict:  # fmt: skip
    """Train (or reuse) `grpo`, `constant-penalty` and its `AGGRESSIVE` point with `settings.seeds` seeds, and measure
    the two properties (module docstring). Returns the JSON-ready figures (`rl_figures_markdown` renders them)."""
    import numpy as np

    from trl_efficient.overthinking.base import base_model_id, resolve_base_model

    from .jobs import plan_job, run_jobs
    from .report import TRADEOFF_HARD
    from .runner import TestbedSettings, _difference, load_panels, panel_row, plan_runs
    from .scaling import settings_scale
    from .specs import BASE_RECIPE, FIXED_PENALTY
    from .sweep import changed_overrides, resolve_point
    from .training import hub_offline, torch_threads

    settings = settings or TestbedSettings()
    penalty = FIXED_PENALTY
    scale = settings_scale(penalty, settings)
    config_overrides, reward_overrides, resolved = resolve_point(penalty, {PENALTY_KEY: f"x{AGGRESSIVE}"}, settings,
                                                                 scale)  # fmt: skip
    with torch_threads(), hub_offline():
        plan = plan_runs([BASE_RECIPE, penalty], settings, output_dir)
        base_id = base_model_id(resolve_base_model(settings.base_model))
        changed = changed_overrides(penalty, config_overrides, settings, scale)
        plan["aggressive"] = [plan_job(penalty, s, settings, output_dir, base_id, changed, reward_overrides)
                              for s in settings.training_seeds()]  # fmt: skip
        outcomes = run_jobs([j for js in plan.values() for j in js], workers, show_progress, "world v3: RL figures")
    panels, _, errors = load_panels(plan, outcomes)
    if errors:
        raise RuntimeError(f"RL figures: runs failed: {errors}")
    grpo = panels[BASE_RECIPE]
    hard = np.isin(grpo.difficulty, TRADEOFF_HARD)
    args = (settings.bootstrap, settings.seed)
    row = panel_row(BASE_RECIPE, grpo, settings)
    hard_accuracy = row["by_difficulty"]

    def versus(name: str) -> dict:
        acc = _difference(panels[name], grpo, *args, "correct")
        return {"tokens": _difference(panels[name], grpo, *args, "tokens"), "accuracy": acc,
                "accuracy_hard": _difference(panels[name], grpo, *args, "correct", mask=hard),
                "half_width": (acc[2] - acc[1]) / 2}  # fmt: skip

    moderate, aggressive = versus(penalty), versus("aggressive")
    hard_n = sum(c["n"] for k, c in hard_accuracy.items() if int(k) in TRADEOFF_HARD)
    hard_correct = sum(c["accuracy"] * c["n"] for k, c in hard_accuracy.items() if int(k) in TRADEOFF_HARD)
    return {
        "settings": settings.to_dict(),
        "seeds": settings.training_seeds(),
        "hard_difficulties": list(TRADEOFF_HARD),
        "grpo": {
            "accuracy": row["accuracy"],
            "interval": row["ci"]["accuracy"],
            "accuracy_hard": hard_correct / hard_n if hard_n else None,
            "mean_tokens": row["mean_tokens"],
            "accuracy_by_difficulty": row["accuracy_by_difficulty"],
        },
        "moderate": {"alpha": scale.reward_kwargs["constant_length"]["alpha"], **moderate},
        "aggressive": {"alpha": resolved[PENALTY_KEY], "factor": AGGRESSIVE, **aggressive},
        "targets": {
            "trained_accuracy": [MIN_TRAINED_ACCURACY, MAX_TRAINED_ACCURACY],
            "pair_half_width": MAX_PAIR_HALF_WIDTH,
            "aggressive_loss": MIN_AGGRESSIVE_LOSS,
        },
    }


def rl_figures_items(rl: dict) -> list[dict]:
    """The two properties judged: `[{"property", "measured", "target", "met"}, ...]` (headroom, resolution, the
    aggressive penalty's cost, the moderate one's), from `rl_figures`' output.

    >>> rl = {"grpo": {"accuracy": 0.7, "interval": [0.68, 0.72]},
    ...       "moderate": {"accuracy_hard": [-0.01, -0.03, 0.01], "half_width": 0.012},
    ...       "aggressive": {"factor": 4.0, "accuracy_hard": [-0.09, -0.13, -0.05]}}
    >>> [i["met"] for i in rl_figures_items(rl)]
    [True, True, True, True]
    >>> rl["aggressive"]["accuracy_hard"] = [-0.06, -0.12, 0.002]  # its interval reaches 0: not beyond it
    >>> [i["met"] for i in rl_figures_items(rl)][2]
    False
    """
    grpo, mod, agg = rl["grpo"], rl["moderate"], rl["aggressive"]
    low, high = grpo["interval"]
    a_point, a_low, a_high = agg["accuracy_hard"]
    m_point, m_low, m_high = mod["accuracy_hard"]
    return [
        {"property": "accuracy headroom: GRPO accuracy", "measured": f"{grpo['accuracy']:.3f} [{low:.3f}, {high:.3f}]",
         "target": f"{MIN_TRAINED_ACCURACY}-{MAX_TRAINED_ACCURACY}",
         "met": MIN_TRAINED_ACCURACY <= grpo["accuracy"] <= MAX_TRAINED_ACCURACY},
        {"property": "accuracy resolves: half-width of constant-penalty - grpo accuracy",
         "measured": f"{mod['half_width']:.4f}", "target": f"<= {MAX_PAIR_HALF_WIDTH}",
         "met": mod["half_width"] <= MAX_PAIR_HALF_WIDTH},
        {"property": f"over-aggressive penalty ({agg['factor']:g} x alpha) - grpo, hard-task accuracy",
         "measured": f"{a_point:+.3f} [{a_low:+.3f}, {a_high:+.3f}]",
         "target": f"<= -{MIN_AGGRESSIVE_LOSS}, interval below 0",
         "met": a_point <= -MIN_AGGRESSIVE_LOSS and a_high < 0},
        {"property": "moderate penalty (constant-penalty) - grpo, hard-task accuracy",
         "measured": f"{m_point:+.3f} [{m_low:+.3f}, {m_high:+.3f}]", "target": f"low end > -{MIN_AGGRESSIVE_LOSS}",
         "met": m_low > -MIN_AGGRESSIVE_LOSS},
    ]  # fmt: skip


def rl_figures_markdown(rl: dict) -> str:
    """The figures as Markdown: the judged properties, then the three rows' tokens and accuracies."""
    seeds = rl["seeds"]
    lines = [
        f"RL on this world: `grpo`, `constant-penalty` (alpha {rl['moderate']['alpha']:.5f}) and its over-aggressive "
        f"point (alpha {rl['aggressive']['alpha']:.5f}), {len(seeds)} training seeds ({seeds[0]}-{seeds[-1]}), the "
        f"comparison's settings; differences paired by task and seed, 95% intervals; hard = k in "
        f"{rl['hard_difficulties']}.",
        "",
        "| property | measured | target | met |",
        "|---|---|---|---|",
    ]
    for item in rl_figures_items(rl):
        lines.append(f"| {item['property']} | {item['measured']} | {item['target']} | "
                     f"{'yes' if item['met'] else 'no'} |")  # fmt: skip
    lines += ["", "| row - grpo | tokens | accuracy | accuracy, hard |", "|---|---|---|---|"]
    for name in ("moderate", "aggressive"):
        f = rl[name]
        lines.append(
            f"| {name} | {f['tokens'][0]:+.1f} [{f['tokens'][1]:+.1f}, {f['tokens'][2]:+.1f}] | "
            f"{f['accuracy'][0]:+.3f} [{f['accuracy'][1]:+.3f}, {f['accuracy'][2]:+.3f}] | "
            f"{f['accuracy_hard'][0]:+.3f} [{f['accuracy_hard'][1]:+.3f}, {f['accuracy_hard'][2]:+.3f}] |"
        )
    g = rl["grpo"]
    by_k = ", ".join(f"{k}: {v:.2f}" for k, v in sorted(g["accuracy_by_difficulty"].items(), key=lambda kv: int(kv[0])))
    lines += ["", f"grpo: {g['mean_tokens']:.1f} tokens, accuracy per k {by_k}."]
    return "\n".join(lines) + "\n"


def world_report_markdown_with_rl(report: dict) -> str:
    """`report.world_report_markdown`, then the RL figures when the report has them (`world-report --rl`)."""
    from .report import world_report_markdown

    text = world_report_markdown(report)
    return text + "\n" + rl_figures_markdown(report["rl"]) if report.get("rl") else text
