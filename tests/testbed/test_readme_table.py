"""The README's testbed table is the rendering of the committed compare.json (so numbers cannot drift from data)."""

import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _updater():
    path = os.path.join(ROOT, "perf", "testbed", "update_readme.py")
    spec = importlib.util.spec_from_file_location("update_readme", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_testbed_section_equals_the_rendered_compare_json():
    up = _updater()
    with open(up.README) as f:
        section = up.readme_section(f.read())
    assert section == up.render_section(up.DEFAULT_JSON).strip()
    data = json.load(open(up.DEFAULT_JSON))
    assert data["rows"][0]["recipe"] == "base" and data["scales"]  # the committed data has rules and a base row
    for row in data["rows"]:
        assert row["recipe"] in section


def test_update_readme_check_flags_a_stale_table(tmp_path):
    up = _updater()
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{up.START}\nold table\n{up.END}\nrest\n")
    assert up.main(["--readme", str(readme), "--check"]) == 1
    assert up.main(["--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("rest\n") and "old table" not in text
    assert up.main(["--readme", str(readme), "--check"]) == 0
