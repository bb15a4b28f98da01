"""The verdict history of the testbed's method checks: every version of a world's `compare.json` in git
(`perf/testbed/results/` for world v2, `perf/testbed/results_v3/` for world v3), and the working tree's when it
differs, paired with the one before it; for each recipe whose verdict moved, the old and the new verdict (with the
check's first difference and its interval), the change and its reason (`perf/testbed/verdict_changes.yaml`, by
commit, shared by both worlds; the working tree's version is `protocol-1`). Also, per version, the confirmation
verdicts (`confirmation`: confirmed held / confirmed not held / not confirmed, each with the rerun's verdict, p-value
and level from `confirm/compare.json`) and the rules a verdict is read under (`rules`: the nominal levels, the
confirmation level, the margins, the looks, `seeds`/`max_seeds`, the seeds read per row, the confirmation seeds): every
change lists which of these it changed, every move of a confirmation verdict is rendered like a move of a verdict,
and each confirmation verdict is stated at the level in force when the check was first confirmed beside today's
(issue 48). `unrecorded` names the versions that change a verdict, a confirmation verdict or a rule without an entry
in `verdict_changes.yaml`, and `unmarked` the entries that move a verdict someone had seen without
`after_verdict: true`; the script exits 1 when either is not empty (tests/testbed/test_verdicts.py checks both).

    python perf/testbed/verdict_history.py          # -> results/verdict_history.{json,md} (needs the git history)
    python perf/testbed/verdict_history.py --world v3   # -> results_v3/verdict_history.{json,md}

`python perf/testbed/update_readme.py` pastes `results/verdict_history.md`'s table into docs/testbed.md, and
tests/testbed/test_readme_table.py checks that it is the rendering of the committed JSON, whose last version's
verdicts are the committed compare.json's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHANGES = os.path.join(HERE, "verdict_changes.yaml")
# world -> (its results folder, its first comparison: the history starts there)
WORLDS = {"v2": ("results", "797b244"), "v3": ("results_v3", "0f501f0")}


def paths(world: str = "v2") -> tuple[str, str, str, str]:
    """`(compare.json relative to the repository, first commit, history JSON, history markdown)` of `world`."""
    folder, first = WORLDS[world]
    out = os.path.join(HERE, folder, "verdict_history")
    return f"perf/testbed/{folder}/compare.json", first, out + ".json", out + ".md"


def verdicts(compare: dict) -> dict[str, dict]:
    """`{recipe: {"verdict", "seeds", "difference"}}` of every method check of a `compare.json` (not the baselines):
    the verdict in words (`label` when the file has it, else from `held`), and the check's first difference."""
    out = {}
    for row in compare.get("rows", []):
        check = row.get("method_check") or {}
        if not check or str(check.get("claim") or "baseline").startswith("baseline"):
            continue
        if row.get("status", "ok") != "ok":
            continue
        verdict = check.get("label") or {True: "held", False: "not held", None: "inconclusive"}[check.get("held")]
        if verdict == "control":  # the negative controls claim nothing (their scores are in each check)
            continue
        if verdict == "held" and "held_after_bh" in check:  # protocol 1 on: whether it survives the BH correction
            verdict += "" if check["held_after_bh"] else " (not after BH)"
        diffs = check.get("differences") or {}
        first = next(iter(diffs.items()), None)
        difference = "-"
        if first and first[1] and first[1][0] is not None:
            name, (point, low, high) = first
            difference = f"{name} {point:+.3g}" + ("" if low is None else f" [{low:+.3g}, {high:+.3g}]")
        out[row["recipe"]] = {"verdict": verdict, "seeds": len(row.get("seeds") or [1]), "difference": difference}
    return out


def confirmation(compare: dict, again: dict | None) -> dict | None:
    """`{recipe: {"confirmation", "rerun", "p_value", "level"}}` of every check of a `compare.json` that its
    confirmation pass reran (`None` when the file holds no pass): `confirmation` is "confirmed held" / "confirmed not
    held" when the rerun repeats the verdict, else "not confirmed"; `rerun`, `p_value` and `level` are the rerun's
    verdict, p-value and nominal level in `again`, the pass's own `confirm/compare.json` (`None` when absent)."""
    if not compare.get("confirmation"):
        return None
    reruns = {r["recipe"]: r.get("method_check") or {} for r in (again or {}).get("rows", [])}
    out = {}
    for row in compare.get("rows", []):
        check = row.get("method_check") or {}
        if check.get("confirmed") is None or check.get("label") not in ("held", "not held"):
            continue
        rerun = reruns.get(row["recipe"]) or {}
        out[row["recipe"]] = {
            "confirmation": f"confirmed {check['label']}" if check["confirmed"] else "not confirmed",
            "rerun": rerun.get("label"),
            "p_value": rerun.get("p_value"),
            "level": rerun.get("alpha"),
        }
    return out


def rules(compare: dict, again: dict | None) -> dict:
    """What a verdict of a `compare.json` is read under, as far as the file records it (`None` where it does not):
    the looks' nominal levels, the confirmation's level (its checks' `alpha` in `again`, the pass's own compare.json),
    the margins, the looks, the first look's seeds and `max_seeds`, the seeds read per row (every row, controls
    included) and the confirmation's training seeds."""
    protocol, settings = compare.get("protocol") or {}, compare.get("settings") or {}
    levels = {(r.get("method_check") or {}).get("alpha") for r in (again or {}).get("rows", [])} - {None}
    return {
        "nominal_levels": protocol.get("nominal_levels"),
        "confirmation_level": min(levels) if levels else None,
        "margins": protocol.get("margins"),
        "looks": protocol.get("looks"),
        "seeds": settings.get("seeds"),
        "max_seeds": settings.get("max_seeds"),
        "row_seeds": {r["recipe"]: len(r.get("seeds") or [1]) for r in compare.get("rows", [])},
        "confirmation_seeds": (compare.get("confirmation") or {}).get("seeds"),
    }


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def _version(commit: str, date: str, subject: str, data: dict, again: dict | None) -> dict:
    from trl_efficient_testbed.verdicts import stated_claims

    return {"commit": commit, "date": date, "subject": subject, "verdicts": verdicts(data),
            "protocol": (data.get("protocol") or {}).get("sha256"), "confirmation": confirmation(data, again),
            "rules": rules(data, again), "stated": stated_claims(data.get("rows") or [])}  # fmt: skip


def _again_path(compare_path: str, data: dict) -> str | None:
    """The confirmation pass's compare.json next to `compare_path` (None when `data` holds no pass)."""
    conf = data.get("confirmation")
    if not conf:
        return None
    return os.path.join(os.path.dirname(compare_path), conf.get("output_dir") or "confirm", "compare.json")


def versions(world: str = "v2") -> list[dict]:
    """The versions of `world`'s compare.json from its first comparison on, oldest first: `{"commit", "date",
    "subject", "verdicts", "protocol", "confirmation", "rules"}`, and the working tree's as `protocol-1` when it
    differs from the last commit's."""
    compare, first, _, _ = paths(world)
    # full hashes for git, shown by their first 7 digits: git's own abbreviation grows with the clone's object count,
    # so a fresh clone and a working checkout would name the same commit differently
    log = _git("log", "--reverse", "--format=%H %ad %s", "--date=short", "--", compare).splitlines()
    out, started = [], False
    for line in log:
        full, date, subject = line.split(" ", 2)
        commit = full[:7]
        started = started or commit.startswith(first)
        if not started:
            continue
        data = json.loads(_git("show", f"{full}:{compare}"))
        again_path = _again_path(compare, data)
        again = json.loads(_git("show", f"{full}:{again_path}")) if again_path else None
        out.append(_version(commit, date, subject, data, again))
    with open(os.path.join(ROOT, compare)) as f:
        current = json.load(f)
    again_path = _again_path(compare, current)
    again = None
    if again_path and os.path.exists(os.path.join(ROOT, again_path)):
        with open(os.path.join(ROOT, again_path)) as f:
            again = json.load(f)
    tree = _version("working tree", "2026-12-03", "working tree", current, again)
    if not out or any(tree[k] != out[-1][k] for k in ("verdicts", "protocol", "confirmation", "rules")):
        out.append(tree)
    return out


def _why(before: dict, after: dict, changes: dict) -> dict:
    """The `verdict_changes.yaml` entry of `after`: by its commit, else by its protocol's hash when it changed."""
    return (changes.get(after["commit"])
            or next((v for k, v in changes.items() if after["commit"].startswith(k)), None)
            or next((v for v in changes.values() if v.get("protocol") and v["protocol"] == after["protocol"]
                     and after["protocol"] != before["protocol"]), None)
            or {})  # fmt: skip


def _level(value) -> str:
    """A level or a list of per-look levels in words (`not recorded` for None)."""
    if value is None:
        return "not recorded"
    if isinstance(value, list):
        return (f"{value[0]:.4f} a look" if len(set(value)) == 1 else ", ".join(f"{v:.4f}" for v in value)) if value \
            else "none"  # fmt: skip
    return f"{value:.4f}"


def _seq(value) -> str:
    return "not recorded" if value is None else ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _pairs(vs: list[dict]):
    """`(before, after, last)` for every version after the first: `last` is the confirmation of the latest version
    before `after` that held a confirmation pass (None when none did), against which `after`'s pass is read."""
    last = None
    for before, after in zip(vs, vs[1:], strict=False):
        if before.get("confirmation") is not None:
            last = before
        yield before, after, last


def changed(before: dict, after: dict, last: dict | None) -> list[str]:
    """What `after` changed of the rules a verdict is read under (levels, margins, looks, seeds), in words: the looks'
    rules against `before`, the confirmation's level and seeds against `last` (the last version with a pass)."""
    old, new = before.get("rules") or {}, after.get("rules") or {}
    out = []
    if old.get("nominal_levels") != new.get("nominal_levels"):
        out.append(f"nominal level {_level(old.get('nominal_levels'))} -> {_level(new.get('nominal_levels'))}")
    if after.get("confirmation") is None:
        if before.get("confirmation") is not None:
            out.append("confirmation: none in this version's compare.json (the last pass's verdicts are not restated)")
    else:
        prior = (last or {}).get("rules") or {}
        if prior.get("confirmation_level") != new.get("confirmation_level"):
            out.append(f"confirmation level {_level(prior.get('confirmation_level'))} -> "
                       f"{_level(new.get('confirmation_level'))}")  # fmt: skip
        if prior.get("confirmation_seeds") != new.get("confirmation_seeds"):
            out.append(f"confirmation seeds {_seq(prior.get('confirmation_seeds'))} -> "
                       f"{_seq(new.get('confirmation_seeds'))}")  # fmt: skip
    a, b = old.get("margins"), new.get("margins")
    if a != b:
        if a is None or b is None:
            out.append(f"margins {a and json.dumps(a) or 'not recorded'} -> {b and json.dumps(b) or 'not recorded'}")
        else:
            out += [f"margin {k} {a.get(k)} -> {b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    for key, name in (("looks", "looks (seeds)"), ("seeds", "first look's seeds"), ("max_seeds", "max_seeds")):
        if old.get(key) != new.get(key):
            out.append(f"{name} {_seq(old.get(key))} -> {_seq(new.get(key))}")
    a, b = old.get("row_seeds") or {}, new.get("row_seeds") or {}
    moves: dict[tuple, list] = {}
    for recipe in b:
        if recipe in a and a[recipe] != b[recipe]:
            moves.setdefault((a[recipe], b[recipe]), []).append(recipe)
    for (n, m), recipes in sorted(moves.items()):
        every = len(recipes) == len(a) == len(b)
        out.append(
            f"seeds read {n} -> {m}: " + ("every row" if every else ", ".join(recipes)) + f" ({len(recipes)} rows)"
        )
    added = [f"{r} ({b[r]})" for r in b if r not in a]
    if a and added:
        out.append("rows added (seeds): " + ", ".join(added))
    gone = [r for r in a if r not in b]
    if gone:
        out.append("rows removed: " + ", ".join(gone))
    return out


def history(vs: list[dict], changes: dict) -> list[dict]:
    """Every move of a verdict between consecutive versions: `{"date", "commit", "recipe", "old", "new", "change",
    "reason", "after_verdict"}` (`old` None for a recipe new in that version, `new` None for one that left it)."""
    entries = []
    for before, after in zip(vs, vs[1:], strict=False):
        why = _why(before, after, changes)
        for recipe, new in after["verdicts"].items():
            old = before["verdicts"].get(recipe)
            if old is not None and old["verdict"] == new["verdict"]:
                continue
            entries.append(_entry(after, recipe, old, new, why))
        for recipe, old in before["verdicts"].items():  # a row that left the comparison (protocol 11: ProRL, BroRL
            if recipe not in after["verdicts"]:  # in world v3): a move to no verdict (`new` None)
                entries.append(_entry(after, recipe, old, None, why))
    return entries


def _entry(after: dict, recipe: str, old, new, why: dict) -> dict:
    """One move of `recipe`'s verdict (or confirmation) at version `after`, with the change that made it."""
    return {"date": after["date"], "commit": after["commit"], "recipe": recipe, "old": old, "new": new,
            "change": why.get("change", after["subject"]), "reason": why.get("reason", "-"),
            "after_verdict": why.get("after_verdict")}  # fmt: skip


def confirmation_history(vs: list[dict], changes: dict) -> list[dict]:
    """Every move of a confirmation verdict: `{"date", "commit", "recipe", "old", "new", "change", "reason",
    "after_verdict"}`, each version's pass read against the last version that held one (`old` None for a check first
    rerun then, `new` None for one no longer rerun)."""
    entries = []
    for before, after, last in _pairs(vs):
        if after.get("confirmation") is None:
            continue
        why = _why(before, after, changes)
        old_pass, new_pass = (last or {}).get("confirmation") or {}, after["confirmation"]
        for recipe in [*new_pass, *(r for r in old_pass if r not in new_pass)]:
            old, new = old_pass.get(recipe), new_pass.get(recipe)
            if (old or {}).get("confirmation") == (new or {}).get("confirmation"):
                continue
            entries.append(_entry(after, recipe, old, new, why))
    return entries


def stated_history(vs: list[dict], changes: dict) -> list[dict]:
    """Every move of a claim into or out of the headline's results (`verdicts.stated_claims`, read with today's
    headline rules from each version's compare.json): `{"date", "commit", "recipe", "old", "new", "change", "reason",
    "after_verdict"}` with `old`/`new` "stated" or "not stated" (a move of what the results page says, which need not
    move a verdict: protocol 12 left ASRR's held verdict as it was and took it out of the results)."""
    entries = []
    for before, after in zip(vs, vs[1:], strict=False):
        old, new = set(before.get("stated") or []), set(after.get("stated") or [])
        why = _why(before, after, changes)
        for recipe in sorted(old ^ new):
            entry = _entry(after, recipe, None, None, why)
            entry.update(old="stated" if recipe in old else "not stated", new="stated" if recipe in new else
                         "not stated")  # fmt: skip
            entries.append(entry)
    return entries


def change_list(vs: list[dict], changes: dict) -> list[dict]:
    """Every version after the first with its change and reason, how many verdicts it moved (0 included), how many
    confirmation verdicts it moved (`confirmation_moved`) or first stated (`confirmation_new`), the rules it changed
    (`changed`), and the entry's correction when it has one."""
    out = []
    conf = confirmation_history(vs, changes)
    stated = stated_history(vs, changes)
    for before, after, last in _pairs(vs):
        why = _why(before, after, changes)
        stated_moved = sum(1 for e in stated if e["commit"] == after["commit"])
        stated_seen = sum(1 for e in stated if e["commit"] == after["commit"] and e["old"] == "stated")  # was said
        left = sum(1 for r in before["verdicts"] if r not in after["verdicts"])  # rows that left the comparison
        moved = left + sum(1 for r, v in after["verdicts"].items() if (before["verdicts"].get(r) or {}).get("verdict")
                           != v["verdict"])  # fmt: skip
        seen = left + sum(1 for r, v in after["verdicts"].items() if r in before["verdicts"]
                          and before["verdicts"][r]["verdict"] != v["verdict"])  # fmt: skip
        mine = [e for e in conf if e["commit"] == after["commit"]]
        item = {
            "commit": after["commit"],
            "date": after["date"],
            "change": why.get("change", after["subject"]),
            "reason": why.get("reason", "-"),
            "after_verdict": why.get("after_verdict"),
            "moved": moved,
            "moved_seen": seen + sum(1 for e in mine if e["old"] is not None) + stated_seen,
            "stated_moved": stated_moved,
            "confirmation_moved": sum(1 for e in mine if e["old"] is not None),
            "confirmation_new": sum(1 for e in mine if e["old"] is None),
            "changed": changed(before, after, last),
            "recorded": bool(why),
        }
        for key in ("correction", "after_verdict_recorded"):
            if key in why:
                item[key] = why[key]
        out.append(item)
    return out


def unrecorded(data: dict) -> list[str]:
    """The versions of `data` (what `main` writes) that move a verdict, a confirmation verdict or a claim stated in the
    headline, or change a level, margin, the looks or seeds, without an entry in `verdict_changes.yaml`."""
    return [
        c["commit"]
        for c in data["changes"]
        if not c["recorded"]
        and (c["moved"] or c["confirmation_moved"] or c["confirmation_new"] or c.get("stated_moved") or c["changed"])
    ]


def unmarked(data: dict) -> list[str]:
    """The entries of `data` that move a verdict or a confirmation verdict that an earlier version had stated (and
    so someone had seen) without `after_verdict: true`."""
    return [c["commit"] for c in data["changes"] if c["moved_seen"] and c["after_verdict"] is not True]


def confirmation_levels(vs: list[dict]) -> list[dict]:
    """Each check of the last version's confirmation pass, stated at the level in force when it was first confirmed
    (`first`: the first version whose pass reran it) beside today's (`today`: the last version's), and whether the
    two say the same."""
    last = next((v for v in reversed(vs) if v.get("confirmation") is not None), None)
    out = []
    for recipe, today in ((last or {}).get("confirmation") or {}).items():
        first_v = next(v for v in vs if (v.get("confirmation") or {}).get(recipe))
        first = first_v["confirmation"][recipe]
        out.append({"recipe": recipe, "first": {"commit": first_v["commit"], "date": first_v["date"], **first},
                    "today": {"commit": last["commit"], "date": last["date"], **today},
                    "same": first["confirmation"] == today["confirmation"]})  # fmt: skip
    return out


def _conf_cell(c: dict | None) -> str:
    if c is None:
        return "- (not rerun)"
    rerun = c.get("rerun") or "?"
    p = "" if c.get("p_value") is None else f", p {c['p_value']:.4f}"
    return f"{c['confirmation']} (rerun {rerun}{p} at level {_level(c.get('level'))})"


def _verdict_cell(v: dict) -> str:
    return f"{v['verdict']} ({v['seeds']} seeds; {v['difference']})"


def _moves(entries: list[dict], columns: tuple[str, str], cell, gone: str = "-") -> list[str]:
    """A markdown table of `entries` (`{"date", "commit", "recipe", "old", "new", "after_verdict"}`), `columns` naming
    the old and new state, `cell` rendering one (`old` None: "-"; `new` None: `gone`)."""
    seen = {True: "yes", False: "no", None: "-"}
    lines = [f"| date | commit | recipe | {columns[0]} | {columns[1]} | after the verdict was seen |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for e in entries:
        old = "-" if e["old"] is None else cell(e["old"])
        new = gone if e["new"] is None else cell(e["new"])
        lines.append(f"| {e['date']} | {e['commit']} | {e['recipe']} | {old} | {new} | {seen[e['after_verdict']]} |")
    return lines


def render(data: dict) -> str:
    """The markdown table of the history (`data`: what `main` writes to verdict_history.json)."""
    first, world = data["versions"][0], data.get("world", "v2")
    seeds = ", one seed" if world == "v2" else ""
    lines = [
        f"Verdicts at world {world}'s first comparison ({first['commit']}, {first['date']}{seeds}): "
        + ", ".join(f"{r} {v['verdict']}" for r, v in sorted(first["verdicts"].items()))
        + ".",
    ]
    if first.get("confirmation"):
        lines += ["", "Its confirmation verdicts: " + ", ".join(f"{r} {_conf_cell(c)}"
                                                                for r, c in sorted(first["confirmation"].items()))
                  + "."]  # fmt: skip
    lines += ["", *_moves(data["entries"], ("old verdict", "new verdict"), _verdict_cell, "not in the comparison")]
    conf = data.get("confirmation_entries")
    if conf is not None:
        lines += ["", "The confirmation verdicts (each check decided at the looks, rerun once on unseen training seeds "
                  "and a fresh task set: compare.json's `confirmation`, the rerun in `confirm/compare.json`), each "
                  "version's pass against the last version that held one:", ""]  # fmt: skip
        columns = ("old confirmation", "new confirmation")
        lines += _moves(conf, columns, _conf_cell, _conf_cell(None)) if conf else ["No confirmation verdict moved."]
    stated = data.get("stated_entries")
    if stated is not None:
        lines += ["", "The claims the headline states as results (confirmed, counted, credited: "
                  "`verdicts.stated_claims`, read with today's rules from each version's compare.json), every move in "
                  "or out:", ""]  # fmt: skip
        lines += _moves(stated, ("before", "after"), str) if stated else ["No claim moved in or out of the results."]
    levels = data.get("confirmation_levels")
    if levels:
        lines += ["", "Each confirmation verdict at the level in force when the check was first confirmed, and at "
                  "today's (**bold** where the two differ):", "",
                  "| recipe | first confirmed | at the level then | today | at today's level |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for c in levels:
            then, now = _conf_cell(c["first"]), _conf_cell(c["today"])
            if not c["same"]:
                then, now = f"**{then}**", f"**{now}**"
            lines.append(f"| {c['recipe']} | {c['first']['commit']} ({c['first']['date']}) | {then} | "
                         f"{c['today']['commit']} | {now} |")  # fmt: skip
    lines += ["", "The changes (`perf/testbed/verdict_changes.yaml`), each with the verdicts it moved:", ""]
    for c in data.get("changes") or []:
        seen = {True: "; made after the verdicts it moves were seen", False: "", None: ""}[c["after_verdict"]]
        conf_moves = ""
        if c.get("confirmation_moved") or c.get("confirmation_new"):
            conf_moves = (f", {c['confirmation_moved']} confirmation verdicts moved, {c['confirmation_new']} first "
                          "stated")  # fmt: skip
        line = f"- **{c['commit']}** ({c['date']}, {c['moved']} moved{conf_moves}{seen}): {c['change']}. Reason: " \
               f"{c['reason']}"  # fmt: skip
        if c.get("changed"):
            line += ". Changed: " + "; ".join(c["changed"])
        if c.get("correction"):
            line += f". Correction: {c['correction']}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import argparse

    import yaml

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", choices=sorted(WORLDS), default="v2")
    args = parser.parse_args(argv)
    with open(CHANGES) as f:
        changes = {str(k): v for k, v in yaml.safe_load(f).items()}
    vs = versions(args.world)
    data = {"versions": [{k: v[k] for k in ("commit", "date", "subject", "protocol", "verdicts", "confirmation",
                                            "rules")} for v in vs],
            "entries": history(vs, changes), "confirmation_entries": confirmation_history(vs, changes),
            "stated_entries": stated_history(vs, changes),
            "confirmation_levels": confirmation_levels(vs), "changes": change_list(vs, changes)}  # fmt: skip
    if args.world != "v2":  # world v2's file predates the key; its rendering names it by default
        data["world"] = args.world
    _, _, out_json, out_md = paths(args.world)
    with open(out_json, "w") as f:
        json.dump(data, f, indent=1)
    with open(out_md, "w") as f:
        f.write(render(data))
    print(f"wrote {out_json} and {out_md}: {len(data['entries'])} moves, {len(data['confirmation_entries'])} "
          f"confirmation moves and {len(data['stated_entries'])} moves of the stated claims over {len(vs)} "
          "versions")  # fmt: skip
    status = 0
    for name, bad in (("no entry in verdict_changes.yaml", unrecorded(data)),
                      ("moves a verdict already seen without after_verdict: true", unmarked(data))):  # fmt: skip
        if bad:
            print(f"{name}: {', '.join(bad)}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
