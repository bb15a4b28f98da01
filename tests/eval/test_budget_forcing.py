"""s1 budget forcing (`force:B`, `wait:N`): token-by-token checks on a scripted model and on the tiny model."""

import json

import pytest

from trl_efficient.eval.cli import main as eval_main
from trl_efficient.eval.evaluate import TransformersBackend, evaluate_model, parse_mode
from trl_efficient.prompts import BUDGET_FORCING_ANSWER_PREFIX
from trl_efficient.trainer.budget_forcing import BudgetForcing, budget_force, think_end_span


class Script:
    """A scripted "model": after the prompt (one id, the row's index) it emits `seg[row]` filler tokens since the
    last "Wait" (or the start), then `</think>` (or EOS when `close` is False), then the answer "42" and EOS. After a
    `</think>` anywhere in the prefix it emits only the answer and EOS."""

    def __init__(self, tok, segs, close=None):
        self.tok, self.segs = tok, segs
        self.close = close or [True] * len(segs)
        self.fill = tok.encode(" x", add_special_tokens=False)
        self.think = tok.encode("</think>", add_special_tokens=False)
        self.wait = tok.encode("Wait", add_special_tokens=False)
        self.answer = tok.encode("42", add_special_tokens=False) + [tok.eos_token_id]
        assert len(self.fill) == 1
        self.calls = []

    def continuation(self, prefix):
        row, done = prefix[0], prefix[1:]
        if think_end_span(done, self.tok) is not None:
            return list(self.answer)
        since = done
        for i in range(len(done) - len(self.wait), -1, -1):  # filler tokens since the last inserted "Wait"
            if done[i : i + len(self.wait)] == self.wait:
                since = done[i + len(self.wait) :]
                break
        todo = self.segs[row] - len(since)
        end = self.think + self.answer if self.close[row] else [self.tok.eos_token_id]
        return self.fill * max(todo, 0) + end

    def __call__(self, prefixes, max_new):
        self.calls.append((len(prefixes), max_new))
        return [self.continuation(list(p))[:max_new] for p in prefixes]


@pytest.fixture
def tok(tiny_tokenizer):
    return tiny_tokenizer


def test_parse_and_errors():
    assert BudgetForcing.parse("force:16") == BudgetForcing("force", 16, 32)
    assert BudgetForcing.parse("wait:1").kind == "wait" and BudgetForcing.parse("") is None
    for bad in ("force", "force:-3", "stop:4", "wait:x"):
        with pytest.raises(ValueError, match="force:<B> or wait:<N>"):
            BudgetForcing.parse(bad)
    with pytest.raises(ValueError, match="Unknown mode"):
        parse_mode("forcing:3")
    assert [m.name for m in parse_mode("force:16")] == ["force:16"] and parse_mode("wait:1")[0].forcing == "wait:1"


@pytest.mark.parametrize("first_given", [False, True])
def test_force_closes_thinking_at_the_budget(tok, first_given):
    B = 16
    script = Script(tok, segs=[3, 13, 50, 14, 16])
    eos = [tok.eos_token_id]
    forced = tok.encode("</think>" + BUDGET_FORCING_ANSWER_PREFIX, add_special_tokens=False)
    prompts = [[i] for i in range(5)]
    first = script(prompts, 200) if first_given else None  # trainer path: TRL's full-length phase 1
    out = budget_force(prompts, script, BudgetForcing("force", B, answer_cap=8), tok, eos, 200, first=first)
    w = len(script.think)  # 3 tokens in the tiny tokenizer
    # row 0: 3 fillers + </think> end at 3 + 3 = 6 <= 16; row 1: 13 + 3 = 16 <= 16 -> both untouched
    for r, seg in ((0, 3), (1, 13)):
        assert out[r].ids == script.fill * seg + script.think + script.answer and out[r].inserted == []
        assert out[r].finished and not out[r].forced
    # rows 2 (50 fillers), 3 (14 fillers: the tag would end at 17 > 16) and 4 (16 fillers: ends at 19): cut at 16,
    # `</think>` + prefix inserted at [16, 16 + len(forced)), then the answer continues ("42", EOS).
    for r in (2, 3, 4):
        c = out[r]
        head = (script.fill * 14 + script.think)[:16] if r == 3 else script.fill * 16
        assert c.ids == head + forced + script.answer, r
        assert c.inserted == [(B, B + len(forced))] and c.forced and c.finished
        text = tok.decode(c.ids, skip_special_tokens=True)
        assert text.count("</think>" + BUDGET_FORCING_ANSWER_PREFIX) == 1
        assert think_end_span(c.ids, tok)[0] >= B  # no generated thinking beyond B tokens
    assert w == 3
    if not first_given:  # phase 1 stops at B = 16 tokens; row 1 closed exactly at 16 and continues its answer
        assert script.calls == [(5, 16), (1, 200 - 16), (3, 8)]  # then the 3 forced rows (answer cap 8)


def test_force_answer_cap_and_short_max_new_tokens(tok):
    script = Script(tok, segs=[40])
    script.answer = tok.encode("1234567890", add_special_tokens=False) + [tok.eos_token_id]
    out = budget_force([[0]], script, BudgetForcing("force", 4, answer_cap=2), tok, [tok.eos_token_id], 100)
    forced = tok.encode("</think>" + BUDGET_FORCING_ANSWER_PREFIX, add_special_tokens=False)
    assert out[0].ids == script.fill * 4 + forced + script.answer[:2] and not out[0].finished  # 4 + |forced| + 2
    # max_new_tokens (10) below the budget (20): nothing to force, the row is simply truncated at 10
    out = budget_force([[0]], script, BudgetForcing("force", 20), tok, [tok.eos_token_id], 10)
    assert out[0].ids == script.fill * 10 and out[0].inserted == [] and not out[0].finished


def test_wait_replaces_early_end_of_thinking(tok):
    script = Script(tok, segs=[3, 2, 4], close=[True, False, True])
    eos = [tok.eos_token_id]
    out = budget_force([[0], [1], [2]], script, BudgetForcing("wait", 2), tok, eos, 200)
    W, F = script.wait, script.fill
    w = len(W)
    # row 0: x x x </think> -> x x x Wait x x x Wait x x x </think> 42 EOS; "Wait" at 3 and 3 + w + 3
    assert out[0].ids == F * 3 + W + F * 3 + W + F * 3 + script.think + script.answer
    assert out[0].inserted == [(3, 3 + w), (6 + w, 6 + 2 * w)] and out[0].finished and out[0].forced
    # row 1: EOS inside the thinking (no </think>) is replaced too: x x Wait x x Wait x x EOS (N = 2 used up)
    assert out[1].ids == F * 2 + W + F * 2 + W + F * 2 + eos
    assert out[1].inserted == [(2, 2 + w), (4 + w, 4 + 2 * w)]
    # wait:1 on row 2 (4 fillers): one "Wait" at position 4, then it finishes
    one = budget_force([[2]], Script(tok, segs=[3, 2, 4]), BudgetForcing("wait", 1), tok, eos, 200)[0]
    assert one.ids == F * 4 + W + F * 4 + script.think + script.answer and one.inserted == [(4, 4 + w)]
    # the token cap holds across rounds: 5 tokens -> x x x Wait(+w) then stop (not finished)
    capped = budget_force([[0]], Script(tok, segs=[3]), BudgetForcing("wait", 5), tok, eos, 3 + w)[0]
    assert capped.ids == F * 3 + W and not capped.finished


def test_transformers_backend_force_on_the_tiny_model(tiny_model_dir, tok):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    backend = TransformersBackend(model, tok, batch_size=4, show_progress=False)
    forced = tok.encode("</think>" + BUDGET_FORCING_ANSWER_PREFIX, add_special_tokens=False)
    B, cap = 5, 3
    gens = backend.generate(["Q: 1+1?", "Q: 2+2?"], 3, 20, 1.0, 1.0, seed=0, forcing=BudgetForcing("force", B, cap))
    assert [len(g) for g in gens] == [3, 3]
    for g in (s for row in gens for s in row):
        span = think_end_span(g.ids, tok)
        if g.forced:  # a random tiny model (almost) never closes its thinking: cut at B, inserted, <= cap answer
            assert g.ids[B : B + len(forced)] == forced and g.inserted == [(B, B + len(forced))]
            assert len(g.ids) <= B + len(forced) + cap and span[0] >= B
        else:
            assert g.inserted == [] and (span is None or span[1] <= B or g.finished)
    assert any(g.forced for row in gens for g in row)
    waited = backend.generate(["Q: 1+1?"], 2, 12, 1.0, 1.0, forcing=BudgetForcing("wait", 1))
    assert all(len(s.ids) <= 12 + len(tok.encode("Wait", add_special_tokens=False)) for s in waited[0])


def test_evaluate_model_reports_forced_fraction(tiny_model_dir, tok):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": "1+1?"}], "solution": "2"}])
    r = evaluate_model(model, tok, ds, max_new_tokens=8, num_samples=2, mode=parse_mode("force:4")[0],
                       show_progress=False)  # fmt: skip
    assert r.num_samples == 2 and 0.0 <= r.extra["budget_forced"] <= 1.0
    if r.extra["budget_forced"] == 1.0:  # forced: 4 generated thinking tokens + the inserted `</think>` (3 tokens)
        assert r.mean_thinking_tokens == 4 + 3


def test_eval_cli_accepts_the_modes(tiny_model_dir, tmp_path):
    out = tmp_path / "eval"
    args = ["--model", tiny_model_dir, "--label", "tiny", "--benchmarks", "gsm8k", "--modes", "force:4", "wait:1",
            "--n", "2", "--limit", "2", "--max-new-tokens", "8", "--output-dir", str(out), "--quiet",
            "--no-plot"]  # fmt: skip
    assert eval_main(args) == 0
    for slug, mode in (("force_4", "force:4"), ("wait_1", "wait:1")):
        entry = json.loads((out / "tiny" / slug / "gsm8k.json").read_text())
        assert entry["mode"] == mode and "budget_forced" in entry["result"]["extra"]
        assert entry["result"]["num_problems"] == 2
