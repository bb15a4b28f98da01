"""The real-model experiment's rules and verdicts (`trl_efficient_testbed.realmodel`), without a model: the task's
data, the paired claims on synthetic run files, and the refusal of run files written under other rules."""

import json

import numpy as np
import pytest

from trl_efficient_testbed import realmodel


def test_task_is_seeded_held_out_and_checkable():
    rules = realmodel.load()
    train, held_out = realmodel.datasets(rules)
    assert len(train) == rules["task"]["train_problems"] and len(held_out) == rules["task"]["eval_problems"] >= 256
    texts = {r["prompt"][1]["content"] for r in train}
    assert not texts & {r["prompt"][1]["content"] for r in held_out}
    assert realmodel.datasets(rules) == (train, held_out)
    from trl_efficient.rewards import correctness_reward

    row = held_out[0]
    import re

    a, b = [int(t) for t in re.findall(r"\d+", row["prompt"][1]["content"])]
    assert int(row["solution"]) in (a + b, a - b) and int(row["solution"]) >= 0
    assert correctness_reward([f"The answer is {row['solution']}."], [row["solution"]]) == [1.0]


def _runs(arm, seeds, correct, tokens, tasks=256):
    import zlib

    rng = np.random.default_rng(zlib.crc32(arm.encode()))
    out = []
    for s in seeds:
        c = (rng.random(tasks) < correct).astype(float)
        t = rng.normal(tokens, 3.0, tasks)
        out.append({"arm": arm, "seed": s, "correct": c.tolist(), "tokens": t.tolist()})
    return out


def _rules():
    rules = realmodel.load()
    rules = json.loads(json.dumps(rules))
    rules["statistics"]["bootstrap"] = 300
    return rules


def test_claims_on_synthetic_runs():
    rules = _rules()
    seeds = [0, 1, 2]
    grpo = _runs("grpo", seeds, 0.6, 60)

    def shorter(by):  # grpo's answers, `by` tokens shorter each (paired: the accuracy difference is exactly 0)
        return [{**r, "arm": "x", "tokens": [t - by for t in r["tokens"]]} for r in grpo]

    runs = {"base": _runs("base", [None], 0.3, 60), "grpo": grpo, "kimi": shorter(20), "constant-penalty": shorter(19)}
    c = realmodel.claims(runs, rules)
    assert c["setup"]["held"] is True  # grpo moved accuracy from 0.3 to 0.6
    assert c["vs_grpo"]["held"] is True and c["vs_grpo"]["tokens_saved"][0] > 15
    # exactly one token shorter at the same accuracy: below the token margin (2) and not more accurate: not held
    assert c["vs_constant_penalty"]["held"] is False and c["vs_constant_penalty"]["tokens_saved"][0] == 1.0
    # a recipe that is shorter but loses a third of its accuracy is not held against grpo
    runs["kimi"] = _runs("kimi", seeds, 0.25, 40)
    assert realmodel.claims(runs, rules)["vs_grpo"]["held"] is False
    # a recipe as long as grpo fails both directions against a much shorter constant penalty
    runs["kimi"] = _runs("kimi", seeds, 0.6, 60)
    runs["constant-penalty"] = _runs("constant-penalty", seeds, 0.6, 30)
    assert realmodel.claims(runs, rules)["vs_constant_penalty"]["held"] is False


def test_render_refuses_run_files_of_other_rules(tmp_path):
    run = {"arm": "base", "seed": None, "correct": [1.0, 0.0], "tokens": [10, 12], "protocol_sha256": "0" * 16}
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "base.json").write_text(json.dumps(run))
    with pytest.raises(ValueError, match="another version of the rules"):
        realmodel.render(str(tmp_path))


@pytest.mark.parametrize("version", sorted(realmodel.RULES))
def test_committed_results_rerender_from_their_run_files(tmp_path, monkeypatch, version):
    """Each version's committed table is what its committed run files give under its own rules (`--rules N
    --no-train`), and the docs hold what `--update-docs` pastes."""
    import os
    import shutil

    root = os.path.join(os.path.dirname(__file__), "..", "..")
    rules_path, directory = realmodel.RULES[version]
    committed = os.path.join(root, directory)
    if not os.path.exists(os.path.join(committed, "realmodel.json")):
        pytest.skip(f"no committed real-model results for version {version}")
    shutil.copytree(os.path.join(committed, "runs"), tmp_path / "runs")
    result = realmodel.render(str(tmp_path), realmodel.load(rules_path))
    with open(os.path.join(committed, "realmodel.json")) as f:
        assert json.load(f) == json.loads(json.dumps(result))
    assert (tmp_path / "realmodel.md").read_text() == open(os.path.join(committed, "realmodel.md")).read()
    from trl_efficient.recipes.tables import readme_section

    monkeypatch.chdir(root)
    for path, (marker, text) in realmodel.paste_targets(result, directory, version).items():
        with open(path) as f:
            assert readme_section(f.read(), marker) == text, f"{path}: run realmodel --rules {version} --update-docs"


def test_old_rules_are_kept_byte_for_byte():
    """A version's rules file is never edited once its runs exist: each old version's hash is the one its runs
    record."""
    assert realmodel.load(realmodel.RULES[1][0])["sha256"] == "987b4f063367799b"
    assert realmodel.load(realmodel.RULES[2][0])["sha256"] == "3161025635678037"
    assert realmodel.load(realmodel.RULES[3][0])["sha256"] == "5f31b144508f46ea"
    assert len({realmodel.load(path)["sha256"] for path, _ in realmodel.RULES.values()}) == len(realmodel.RULES)
