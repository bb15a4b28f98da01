"""The verdict history of the testbed's method checks: every version of a world's `compare.json` in git
(`perf/testbed/results/` for world v2, `perf/testbed/results_v3/` for world v3), and the working tree's when it
differs, paired with the one before it; for each recipe whose verdict moved, the old and the new verdict (with the
check's first difference and its interval), the change and its reason (`perf/testbed/verdict_changes.yaml`, by
commit, shared by both worlds; the working tree's version is `protocol-1`).

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


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def versions(world: str = "v2") -> list[dict]:
    """The versions of `world`'s compare.json from its first comparison on, oldest first: `{"commit", "date",
    "subject", "verdicts"}`, and the working tree's as `protocol-1` when it differs from the last commit's."""
    compare, first, _, _ = paths(world)
    log = _git("log", "--reverse", "--format=%h %ad %s", "--date=short", "--", compare).splitlines()
    out, started = [], False
    for line in log:
        commit, date, subject = line.split(" ", 2)
        started = started or commit.startswith(first)
        if not started:
            continue
        data = json.loads(_git("show", f"{commit}:{compare}"))
        out.append({"commit": commit, "date": date, "subject": subject, "verdicts": verdicts(data),
                    "protocol": (data.get("protocol") or {}).get("sha256")})  # fmt: skip
    with open(os.path.join(ROOT, compare)) as f:
        current = json.load(f)
    if not out or verdicts(current) != out[-1]["verdicts"] or (current.get("protocol") or {}).get("sha256") != out[
            -1]["protocol"]:  # fmt: skip
        out.append({"commit": "working tree", "date": "2026-12-03", "subject": "working tree",
                    "verdicts": verdicts(current),
                    "protocol": (current.get("protocol") or {}).get("sha256")})  # fmt: skip
    return out


def _why(before: dict, after: dict, changes: dict) -> dict:
    """The `verdict_changes.yaml` entry of `after`: by its commit, else by its protocol's hash when it changed."""
    return (changes.get(after["commit"])
            or next((v for k, v in changes.items() if after["commit"].startswith(k)), None)
            or next((v for v in changes.values() if v.get("protocol") and v["protocol"] == after["protocol"]
                     and after["protocol"] != before["protocol"]), None)
            or {})  # fmt: skip


def change_list(vs: list[dict], changes: dict) -> list[dict]:
    """Every version after the first with its change and reason, and how many verdicts it moved (0 included)."""
    out = []
    for before, after in zip(vs, vs[1:], strict=False):
        why = _why(before, after, changes)
        moved = sum(1 for r, v in after["verdicts"].items() if (before["verdicts"].get(r) or {}).get("verdict")
                    != v["verdict"])  # fmt: skip
        out.append(
            {
                "commit": after["commit"],
                "date": after["date"],
                "change": why.get("change", after["subject"]),
                "reason": why.get("reason", "-"),
                "after_verdict": why.get("after_verdict"),
                "moved": moved,
            }
        )
    return out


def history(vs: list[dict], changes: dict) -> list[dict]:
    """Every move of a verdict between consecutive versions: `{"date", "commit", "recipe", "old", "new", "change",
    "reason", "after_verdict"}` (`old` None for a recipe new in that version)."""
    entries = []
    for before, after in zip(vs, vs[1:], strict=False):
        why = _why(before, after, changes)
        for recipe, new in after["verdicts"].items():
            old = before["verdicts"].get(recipe)
            if old is not None and old["verdict"] == new["verdict"]:
                continue
            entries.append({"date": after["date"], "commit": after["commit"], "recipe": recipe, "old": old,
                            "new": new, "change": why.get("change", after["subject"]),
                            "reason": why.get("reason", "-"), "after_verdict": why.get("after_verdict")})  # fmt: skip
    return entries


def render(data: dict) -> str:
    """The markdown table of the history (`data`: what `main` writes to verdict_history.json)."""
    first, world = data["versions"][0], data.get("world", "v2")
    seeds = ", one seed" if world == "v2" else ""
    lines = [
        f"Verdicts at world {world}'s first comparison ({first['commit']}, {first['date']}{seeds}): "
        + ", ".join(f"{r} {v['verdict']}" for r, v in sorted(first["verdicts"].items()))
        + ".",
        "",
        "| date | commit | recipe | old verdict | new verdict | after the verdict was seen |",
        "|---|---|---|---|---|---|",
    ]
    for e in data["entries"]:
        old = (
            "-" if e["old"] is None else f"{e['old']['verdict']} ({e['old']['seeds']} seeds; {e['old']['difference']})"
        )
        new = f"{e['new']['verdict']} ({e['new']['seeds']} seeds; {e['new']['difference']})"
        seen = {True: "yes", False: "no", None: "-"}[e["after_verdict"]]
        lines.append(f"| {e['date']} | {e['commit']} | {e['recipe']} | {old} | {new} | {seen} |")
    lines += ["", "The changes (`perf/testbed/verdict_changes.yaml`), each with the verdicts it moved:", ""]
    for c in data.get("changes") or []:
        seen = {True: "; made after the verdicts it moves were seen", False: "", None: ""}[c["after_verdict"]]
        lines.append(f"- **{c['commit']}** ({c['date']}, {c['moved']} moved{seen}): {c['change']}. Reason: "
                     f"{c['reason']}")  # fmt: skip
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
    data = {"versions": [{k: v[k] for k in ("commit", "date", "subject", "protocol", "verdicts")} for v in vs],
            "entries": history(vs, changes), "changes": change_list(vs, changes)}  # fmt: skip
    if args.world != "v2":  # world v2's file predates the key; its rendering names it by default
        data["world"] = args.world
    _, _, out_json, out_md = paths(args.world)
    with open(out_json, "w") as f:
        json.dump(data, f, indent=1)
    with open(out_md, "w") as f:
        f.write(render(data))
    print(f"wrote {out_json} and {out_md}: {len(data['entries'])} moves over {len(vs)} versions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
