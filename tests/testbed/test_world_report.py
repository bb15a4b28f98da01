"""`testbed world-report`: the steps-only generation (the minimal trace: every sentence opens with a step label) and
the whole report end to end on the `small` base (plumbing: seconds)."""

import json
import statistics

import pytest

from trl_efficient.overthinking.data import load_testbed_dataset
from trl_efficient_testbed.report import steps_only_constraint


def test_steps_only_generation_opens_every_sentence_with_a_step_label(small_base):
    """Under the steps-only constraint, every token drawn after a sentence end (".") or after `<think>`, until the
    thinking closes, is a step label or the opening of `</think>`; without it the same model writes other openings
    (so the constraint is what holds them back)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_efficient_testbed.streams import generate_paired, sample_seed

    tok, model = AutoTokenizer.from_pretrained(small_base), AutoModelForCausalLM.from_pretrained(small_base)
    constraint = steps_only_constraint(tok)
    assert {tok.decode([i]) for i in constraint.allowed} == {f" {x}" for x in "abcdefgh"} | {" </"}
    rows = list(load_testbed_dataset("test", n=24, seed=0))
    prompts = [tok(tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True),
                   add_special_tokens=False)["input_ids"] for r in rows]  # fmt: skip
    seeds = [sample_seed(0, i, 0) for i in range(len(rows))]

    def openings(gens):
        out = []
        for prompt, ids in zip(prompts, gens, strict=True):
            previous, bound = prompt[-1], True
            for t in ids:
                if bound and previous in constraint.triggers:
                    out.append(t)
                bound, previous = bound and t not in constraint.release, t
        return out

    kwargs = dict(max_new_tokens=96, eos_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, temperature=1.5, top_p=1.0)
    constrained = openings(generate_paired(model, prompts, seeds, constraint=constraint, **kwargs))
    free = openings(generate_paired(model, prompts, seeds, **kwargs))
    assert len(constrained) >= 5 and set(constrained) <= set(constraint.allowed)
    assert not set(free) <= set(constraint.allowed)


def test_world_report_end_to_end(small_base, tmp_path, capsys):
    from trl_efficient_testbed.cli import main

    out = tmp_path / "report.json"
    assert main(["world-report", "--model", small_base, "--num-tasks", "8", "--max-new-tokens", "12",
                 "--json", str(out)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "| tokens / floor |" in printed and "length-following Pearson, hbpo" in printed
    report = json.loads(out.read_text())
    dr, tr = report["dynamic_range"], report["tradeoff"]
    s = report["summary"]
    assert dr["ratio"] == pytest.approx(s["mean_tokens"] / s["mean_floor_tokens"])
    assert dr["ratio_interval"][0] <= dr["ratio"] <= dr["ratio_interval"][1]
    assert sum(c["n"] for c in tr["by_difficulty"].values()) == 8
    assert tr["accuracy_own"] == pytest.approx(s["accuracy"])
    own = statistics.fmean(c["own"] * c["n"] for c in tr["by_difficulty"].values()) * len(tr["by_difficulty"]) / 8
    assert own == pytest.approx(s["accuracy"])
    assert set(report["following"]) == {"l1", "l1-max", "hbpo"}
