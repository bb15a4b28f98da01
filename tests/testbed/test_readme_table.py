"""The testbed table and headline of docs/testbed-results.md (the README's until issue 46) are the rendering of the
committed compare.json, so numbers cannot drift from data."""

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _updater():
    path = os.path.join(ROOT, "perf", "testbed", "update_readme.py")
    spec = importlib.util.spec_from_file_location("update_readme", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_page_testbed_section_equals_the_rendered_compare_json():
    up = _updater()
    with open(up.RESULTS) as f:
        section = up.readme_section(f.read())
    assert section == up.render_section(up.DEFAULT_JSON).strip()
    data = json.load(open(up.DEFAULT_JSON))
    assert data["rows"][0]["recipe"] == "base" and data["scales"]  # the committed data has rules and a base row
    for row in data["rows"]:
        assert row["recipe"] in section
    # every run of the committed comparison ran on the AVX2 kernels (perf/testbed/compare.py's default), so a rerun
    # there reproduces it digit for digit (docs/testbed.md, "One base model on every machine")
    results = os.path.dirname(up.DEFAULT_JSON)
    kernels = {json.load(open(os.path.join(results, path)))["cpu_capability"]
               for paths in data["runs"].values() for path in paths}  # fmt: skip
    assert kernels == {"AVX2"}


def test_docs_scorecard_equals_the_committed_files():
    up = _updater()
    with open(up.DOCS) as f:
        section = up.readme_section(f.read(), up.SCORECARD)
    assert section == up.render_scorecard(up.DEFAULT_JSON).strip() and section.count("\n| ") == 9


def test_update_readme_check_flags_a_stale_table(tmp_path):
    up = _updater()
    page, docs = tmp_path / "testbed-results.md", tmp_path / "testbed.md"
    page.write_text(f"intro\n{up.START}\nold table\n{up.END}\nrest\n")
    docs.write_text(f"doc\n<!-- {up.SCORECARD}:start -->\nold card\n<!-- {up.SCORECARD}:end -->\n")
    paths = ["--results", str(page), "--docs", str(docs)]
    assert up.main([*paths, "--check"]) == 1
    assert up.main(paths) == 0
    text = page.read_text()
    assert text.startswith("intro\n") and text.endswith("rest\n") and "old table" not in text
    assert "old card" not in docs.read_text() and "| 6 | every check decides" in docs.read_text()
    assert up.main([*paths, "--check"]) == 0


@pytest.mark.parametrize("world", ["v2", "v3"])
def test_results_headline_states_only_confirmed_verdicts(world):
    """The results page's headline of each world is the rendering of its committed compare.json, and states as results
    only the checks whose `confirmed` flag the confirmation pass set (issue 32 item 5) and that count as method claims
    (protocol 10: a length claim credited at the looks and in the confirmation; no check a control passes)."""
    from trl_efficient_testbed.verdicts import counted

    up = _updater()
    marker, path = (up.HEADLINE, up.DEFAULT_JSON) if world == "v2" else (up.HEADLINE_V3, up.V3_JSON)
    with open(up.RESULTS) as f:
        section = up.readme_section(f.read(), marker)
    assert section and section == up.render_headline(path).strip()
    data = json.load(open(path))
    stated = section.split("Held at the looks but not counted")[0].split("Mechanism checks")[0]
    stated = stated.split("Benjamini-Hochberg:")[0]
    for row in data["rows"]:
        check = row.get("method_check") or {}
        if f"`{row['recipe']}`" in stated:
            assert check.get("label") == "held" and check.get("confirmed") is True and counted(check), row["recipe"]
            assert (check.get("credit") or {}).get("confirmed", True) is True, row["recipe"]
    assert "survive" in section and "Smallest effect resolved" in section


def test_protocol_line_names_the_looks_taken_of_the_design():
    """The protocol line of the docs reads the looks a compare.json took: all of the design's, or (protocol 13) those
    up to its `last_look`, with the design beside them (`update_readme._looks`; perf/ is outside pytest's doctests)."""
    up = _updater()
    assert up._looks({"looks": [3, 6, 9]}) == "3, 6, 9"
    assert up._looks({"looks": [3, 6, 9], "last_look": 6}) == "3, 6 (of the design's 3, 6, 9)"
    assert up._looks({"looks": [3, 6, 9], "last_look": 3}) == "3 (of the design's 3, 6, 9)"
