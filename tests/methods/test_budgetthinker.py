"""BudgetThinker (arXiv 2508.17196, methods.md §23): control tokens, forcing, loss mask, reward, curriculum."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessor, LogitsProcessorList

from tests.helpers import make_dataset, tiny_config, train_yaml
from trl_efficient.eval.evaluate import TransformersBackend, evaluate_model, parse_mode
from trl_efficient.methods.budgetthinker import BudgetThinkerRolloutPlan, BudgetThinkerTrainer
from trl_efficient.prompts import BUDGETTHINKER_CONTROL_TOKENS
from trl_efficient.rewards import get_correctness_reward
from trl_efficient.rewards.budgetthinker import (
    BudgetControlProcessor,
    add_budget_tokens,
    budgetthinker_length_score,
    control_token_ids,
    forced_positions,
    get_budgetthinker_reward,
)
from trl_efficient.trainer.trl_internals import loss_mask

CTRL = [100, 101, 102, 103, 104, 105, 106]  # fake control ids for processor unit tests (vocabulary of 200)


@pytest.fixture
def model_and_tokenizer(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)  # a fresh copy: the session tokenizer stays untouched
    return model, tok


def test_add_budget_tokens_is_idempotent(model_and_tokenizer):
    model, tok = model_and_tokenizer
    n_before = len(tok)
    ids = add_budget_tokens(model, tok)
    assert len(tok) == n_before + 7 and ids == [tok.convert_tokens_to_ids(t) for t in BUDGETTHINKER_CONTROL_TOKENS]
    rows = model.get_input_embeddings().weight.shape[0]
    assert max(ids) < rows
    assert add_budget_tokens(model, tok) == ids and len(tok) == n_before + 7  # second call: nothing added
    assert model.get_input_embeddings().weight.shape[0] == rows
    # special: decoding with skip_special_tokens drops them (TRL's completions text)
    assert tok.decode([ids[0]], skip_special_tokens=True) == ""
    with pytest.raises(ValueError, match="control tokens"):
        control_token_ids(AutoTokenizer.from_pretrained(model.name_or_path))


def _released_ratio_mode(budget: int, steps: int) -> dict[int, int]:
    """The released forcing loop, transcribed for one sequence: MobileLLM/BudgetThinker f0466b9,
    to_replace/vllm/worker/model_runner.py, ModelRunner.execute_model, `elif "ratio" in os.getenv("remaining")`
    with N = 8 (`remaining=8ratio`, easyr1/examples/8ratio_v1.sh). Control ids as in the patch: 151665 + i, i < 7,
    `<remaining>7/8` = 151671 ... `<remaining>1/8` = 151665. Returns {0-based generated position: control id}."""
    delta = budget // 8 + 1  # `delta = budget // N + 1`
    special_tokens = [151665 + i for i in range(8 - 1)]
    out: list[int] = []  # `output_token_ids_till_now`: the tokens generated before this step
    for _ in range(steps):
        token = 0  # the sampled (free) token
        last_idx, last = None, None
        for idx in range(len(out) - 1, -1, -1):  # the last special token in the output
            if out[idx] in special_tokens:
                last_idx, last = idx, out[idx]
                break
        if last == 151665:  # `<remaining>1/8` reached: no more forcing
            pass
        elif last_idx is not None:
            if len(out) - last_idx - 1 == delta:  # `distance_to_last_special_token == delta`
                token = last - 1
        elif len(out) == delta:  # no special token yet: `last_special_token = 151671 + 1`
            token = 151671
        out.append(token)
    return {p: t for p, t in enumerate(out) if t}


def test_forced_positions_follow_the_released_vllm_patch():
    # Walking the released loop by hand for B = 16: delta = 16 // 8 + 1 = 3.
    #   step with len(out) = 0, 1, 2: no special yet, len != 3 -> free tokens at 0, 1, 2
    #   len(out) = 3 == delta -> index 3 is forced to 151671 (<remaining>7/8)
    #   len(out) = 4, 5, 6: distance 4 - 3 - 1 = 0, 1, 2 != 3 -> free at 4, 5, 6
    #   len(out) = 7: distance 7 - 3 - 1 = 3 == delta -> index 7 forced to 151670 (<remaining>6/8)
    #   ... period delta + 1 = 4: indices 3, 7, 11, 15, 19, 23, 27; after 151665 (1/8) at 27 nothing more
    # i.e. delta = floor(B/8) + 1 = 3 free tokens before and between the control tokens.
    released = _released_ratio_mode(16, 40)
    assert released == {3: 151671, 7: 151670, 11: 151669, 15: 151668, 19: 151667, 23: 151666, 27: 151665}
    assert forced_positions(16, 40) == [3, 7, 11, 15, 19, 23, 27]
    for budget in (1, 7, 8, 15, 100, 1499, 2000):  # ours == the transcription, positions and order
        steps = 8 * (budget // 8 + 2) + 5
        want = _released_ratio_mode(budget, steps)
        assert forced_positions(budget, steps) == sorted(want), budget
        assert [151671 - k for k in range(len(want))] == [want[p] for p in sorted(want)]
    # B = 100: delta = 13, period 14 -> 13, 27, 41, ...; only those below 40
    assert forced_positions(100, 40) == [13, 27]
    assert forced_positions(7, 20) == [1, 3, 5, 7, 9, 11, 13]  # B < 8: delta = 1, one free token before each
    assert forced_positions(None, 20) == []  # no budget: nothing forced
    with pytest.raises(ValueError, match="positive"):
        forced_positions(0, 5)


def test_processor_token_by_token():
    # rows: B = 16 (Δ = 3, period 4), B = 3 (Δ = 1, period 2), no budget, B = 8 (Δ = 2, period 3); prompt length 5;
    # 25 decoding steps. The k-th control token at 0-based k (Δ + 1) - 1 (test above).
    proc = BudgetControlProcessor([16, 3, None, 8], CTRL)
    expected = {0: {3: 100, 7: 101, 11: 102, 15: 103, 19: 104, 23: 105},
                1: {2 * k + 1: 100 + k for k in range(7)},
                2: {},
                3: {2: 100, 5: 101, 8: 102, 11: 103, 14: 104, 17: 105, 20: 106}}  # fmt: skip
    ids = torch.zeros(4, 5, dtype=torch.long)
    for pos in range(25):
        scores = torch.zeros(4, 200)
        scores[:, CTRL] = 50.0  # the model "wants" the control tokens everywhere
        out = proc(ids, scores)
        for row in range(4):
            want = expected[row].get(pos)
            if want is not None:  # forced: only the control token is finite
                assert torch.isfinite(out[row]).nonzero().flatten().tolist() == [want], (row, pos)
            else:  # free: control tokens suppressed, the rest untouched
                assert torch.isinf(out[row, CTRL]).all() and (out[row, :100] == 0).all(), (row, pos)
        ids = torch.cat([ids, out.argmax(-1, keepdim=True)], dim=1)
    # a new generate call (shorter input) restarts the count at its own prompt length
    fresh = proc(torch.zeros(4, 3, dtype=torch.long), torch.zeros(4, 200))
    assert torch.isinf(fresh[1, CTRL]).all()  # row 1 (Δ = 1): position 0 is free
    again = proc(torch.zeros(4, 4, dtype=torch.long), torch.zeros(4, 200))  # the same call's next step
    assert torch.isfinite(again[1]).nonzero().flatten().tolist() == [100]  # position 1 forced
    # a row whose only finite logits are control tokens keeps them (no all -inf row)
    only_ctrl = torch.full((1, 200), float("-inf"))
    only_ctrl[0, 103] = 1.0
    assert BudgetControlProcessor([None], CTRL)(torch.zeros(1, 2, dtype=torch.long), only_ctrl)[0, 103] == 1.0


class _Boost(LogitsProcessor):
    def __init__(self, ids):
        self.ids = ids

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        scores[:, self.ids] += 30.0  # without suppression the model would emit control tokens everywhere
        return scores


def test_forcing_in_generate_token_by_token(model_and_tokenizer):
    model, tok = model_and_tokenizer
    ctrl = add_budget_tokens(model, tok)
    tok.padding_side = "left"
    enc = tok(["What is 2 + 3?", "6 * 7?", "Hi"], return_tensors="pt", padding=True, add_special_tokens=False)
    budgets = [16, None, 5]  # Δ = 3 (positions 3, 7, ..., 23), none, Δ = 1 (1, 3, ..., 13)
    torch.manual_seed(0)
    gen = model.generate(
        **enc, max_new_tokens=24, min_new_tokens=24, do_sample=True, pad_token_id=tok.pad_token_id,
        logits_processor=LogitsProcessorList([_Boost(ctrl), BudgetControlProcessor(budgets, ctrl)]),
    )  # fmt: skip
    completions = gen[:, enc["input_ids"].shape[1] :].tolist()
    for row, budget in enumerate(budgets):
        want = dict(zip(forced_positions(budget, 24), ctrl))
        got = {p: t for p, t in enumerate(completions[row]) if t in ctrl}
        assert got == want, (row, got, want)


def test_reward_by_hand():
    reward = get_budgetthinker_reward()
    good = "x</think>\n**Final Answer**\\boxed{4}"
    out = reward(
        completions=[good, good, "x</think>\\boxed{4}", "x</think>\\boxed{5}", good, good],
        solution=["4"] * 6,
        completion_ids=[[0] * 100, [0] * 125, [0] * 50, [0] * 200, [0] * 1000, [0] * 90],
        budget=[100, 100, 100, 100, 2000, None],
    )
    # 1) correct, L = B: 0.7 + 0.15 + 0.15 = 1.0
    # 2) correct, L = 125 > 100: δ = 0.25, len = 1 - 16 * 0.0625 = 0 -> 0.85
    # 3) correct, no format, L = 50 <= B: len 1 -> 0.7 + 0.15 = 0.85
    # 4) wrong, L = 200: δ = 1, len = max(0, -15) = 0 -> 0
    # 5) correct, L = 1000 <= 2000: len 1 -> 1.0
    # 6) no budget: len 0 -> 0.85
    assert out == pytest.approx([1.0, 0.85, 0.85, 0.0, 1.0, 0.85])
    # wrong and short: every branch clipped at 0 (B < 1500: 1 - 16 δ², B >= 1500: 1 - δ²)
    assert budgetthinker_length_score(50, 100, False) == 0.0  # δ = -0.5: max(0, 1 - 4) = 0
    assert budgetthinker_length_score(1000, 2000, False) == pytest.approx(1 - 0.25)
    assert budgetthinker_length_score(2500, 2000, True) == pytest.approx(0.0)  # δ = 0.25: 1 - 16/16
    assert budgetthinker_length_score(2200, 2000, True) == pytest.approx(1 - 16 * 0.01)  # 0.84
    with pytest.raises(ValueError, match="budget"):
        reward(completions=[good], solution=["4"], completion_ids=[[0]])


def test_reward_clips_every_length_branch_as_the_released_code():
    """MobileLLM/BudgetThinker f0466b9, easyr1/verl/utils/reward_score/reason_with_in_limit.py:

        def anwser_length_reward(current_length, budget) -> float:
            target_length = budget
            if budget >= 1500:
                if current_length >= budget:
                    anwser_length_reward = max((1 - 16 * ((current_length - target_length) / target_length) * (...)), 0)
                else:
                    anwser_length_reward = max((1 - ((current_length - target_length) / target_length) * (...)), 0)
            else:
                if current_length >= budget:
                    anwser_length_reward = max((1 - 16 * ((current_length - target_length) / target_length) * (...)), 0)
                else:
                    anwser_length_reward = max((1 - 16 * ((current_length - target_length) / target_length) * (...)), 0)
            return anwser_length_reward

    and `reason_with_in_limit_compute_score`: len = 1 if accuracy == 1 and L <= B; overall = 0.7 acc + 0.15 format
    + 0.15 len. (`(...)` repeats the first factor.)
    """
    reward = get_budgetthinker_reward()
    good_wrong = "x</think>\n**Final Answer**\\boxed{5}"  # format 1, accuracy 0
    out = reward(
        completions=[good_wrong, good_wrong, good_wrong, good_wrong],
        solution=["4"] * 4,
        completion_ids=[[0] * 100, [0] * 1300, [0] * 100, [0] * 1000],
        budget=[1499, 1499, 1500, 2000],
    )
    # 1) L = 100, B = 1499 < 1500, L < B: δ = -1399/1499 = -0.93329, 16 δ² = 13.936 -> max(0, -12.936) = 0
    #    -> 0.7 * 0 + 0.15 * 1 + 0.15 * 0 = 0.15 (the unclipped branch gave 0.15 + 0.15 * -12.936 = -1.79)
    # 2) L = 1300, B = 1499: δ = -199/1499 = -0.132755, δ² = 0.0176239, 1 - 16 δ² = 0.718017 -> 0.15 + 0.107703
    # 3) L = 100, B = 1500 (>= 1500), L < B: δ = -1400/1500, δ² = 0.871111 -> 1 - δ² = 0.128889 -> 0.15 + 0.019333
    # 4) L = 1000, B = 2000: δ = -0.5 -> 1 - 0.25 = 0.75 -> 0.15 + 0.1125
    assert out == pytest.approx([0.15, 0.257703, 0.169333, 0.2625], abs=1e-6)
    # the length term is never negative: the reward of a wrong answer stays >= 0 (>= 0.15 with the format)
    for length in (1, 10, 100, 500, 1000, 1498):
        assert budgetthinker_length_score(length, 1499, False) >= 0.0


def test_curriculum_by_epoch():
    plan = BudgetThinkerRolloutPlan()
    rows = [{"prompt": [{"role": "user", "content": f"q{i}"}], "idx": i} for i in range(40)]
    # [code] epochs 1-6
    assert [plan.budget(rows[0], e) for e in range(6)] == [6000, 4000, 3500, 3000, 2500, 2000]
    late = [plan.budget(r, 6) for r in rows]
    assert set(late) == {2000, 4000, 6000}  # 40 examples: every choice drawn
    assert late == [BudgetThinkerRolloutPlan().budget(r, 6) for r in rows]  # pure: same on resume / other ranks
    assert [plan.budget(r, 7) for r in rows] != late  # redrawn each epoch
    a = plan.assign(rows[1], 0, 4, 0, 0, epoch=2)
    assert a.metadata == {"budget": 3500} and "3500 tokens" in a.user_suffix

    class _State:
        epoch = 4.7  # mid fifth epoch (0-based 4)

    class _Trainer:
        state = _State()

    plan.attach(_Trainer())
    assert plan.current_epoch() == 4 and plan.assign(rows[0], 0, 4, 0, 0).metadata == {"budget": 2500}
    with pytest.raises(ValueError, match="unknown"):
        BudgetThinkerRolloutPlan.from_config(type("A", (), {"rollout_plan_kwargs": {"budgets": [1]}, "seed": 0}))


def test_curriculum_by_steps():
    # epoch_steps = 5: steps 0-4 are curriculum epoch 0, 5-9 epoch 1, ...; steps 30+ draw from final_choices
    plan = BudgetThinkerRolloutPlan.from_config(
        type("A", (), {"rollout_plan_kwargs": {"budgets_by_epoch": [115, 77, 67, 58, 48, 38],
                                               "final_choices": [38, 77, 115], "epoch_steps": 5}, "seed": 0})
    )  # fmt: skip
    row = {"prompt": [{"role": "user", "content": "q"}], "idx": 0}

    class _State:
        epoch, global_step = 0.01, 0  # far inside the first data epoch

    plan.attach(type("T", (), {"state": _State()})())
    budgets = []
    for step in (0, 4, 5, 9, 10, 15, 20, 29):
        _State.global_step = step
        budgets.append(plan.assign(row, 0, 8, 0, step).metadata["budget"])
    assert budgets == [115, 115, 77, 77, 67, 58, 48, 38]
    _State.global_step = 30
    assert plan.current_epoch() == 6 and plan.assign(row, 0, 8, 0, 30).metadata["budget"] in (38, 77, 115)
    with pytest.raises(ValueError, match="epoch_steps"):
        BudgetThinkerRolloutPlan(epoch_steps=0)


def _trainer(tmp_path, tiny_model_dir, **overrides):
    overrides.setdefault("rollout_plan_kwargs", {"budgets_by_epoch": [16], "final_choices": [16]})
    config = tiny_config(tmp_path, rollout_plan="budgetthinker", max_completion_length=24, **overrides)
    return BudgetThinkerTrainer(
        model=tiny_model_dir,
        reward_funcs=[get_budgetthinker_reward(), get_correctness_reward()],
        args=config,
        train_dataset=make_dataset(8),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )


def test_trainer_masks_forced_tokens(tmp_path, tiny_model_dir):
    trainer = _trainer(tmp_path, tiny_model_dir)
    ctrl = trainer.control_ids
    inputs = [dict(row) for row in make_dataset(1) for _ in range(4)]
    torch.manual_seed(0)
    output = trainer._generate_and_score_completions(inputs)
    ids, mask = output["completion_ids"], loss_mask(output)
    assert output["completion_mask"][ids != trainer.processing_class.pad_token_id].all()  # attention keeps them
    n_forced = 0
    for row in range(ids.shape[0]):
        length = int((output["completion_ids"][row] != trainer.processing_class.pad_token_id).sum())
        for pos in range(ids.shape[1]):
            token = int(ids[row, pos])
            if pos in forced_positions(16, 24) and pos < length and token in ctrl:
                assert token == ctrl[forced_positions(16, 24).index(pos)] and mask[row, pos] == 0
                n_forced += 1
            elif token in ctrl:
                raise AssertionError(f"control token at free position {pos} of row {row}")
    assert n_forced > 0
    assert int(output["num_items_in_batch"]) == int(mask.sum())


def test_control_tokens_stay_in_context_kl_zero_before_any_update(tmp_path, tiny_model_dir):
    """Regression (issue 36 item 1): the control tokens were zeroed in `completion_mask`, which TRL 1.16's
    `_compute_loss` also uses as the loss pass's attention mask, while the reference and old log-probs saw them (a
    SmolLM2 run logged KL = 4.42 at step 1). With learning rate 0 the policy is the reference: KL 0 up to rounding."""
    trainer = _trainer(tmp_path, tiny_model_dir, max_steps=1, beta=0.04, learning_rate=0.0,
                       generation_kwargs={"min_new_tokens": 20})  # fmt: skip
    trainer.train()
    (logged,) = [h for h in trainer.state.log_history if "kl" in h]
    assert logged["budgetthinker/control_tokens_mean"] > 0
    assert abs(logged["kl"]) < 1e-9, logged["kl"]  # 0.0 here; 2e-6 to 1.2e-5 with the holes


def test_training_follows_the_curriculum(tmp_path, tiny_model_dir):
    """Regression: the plan read a `TrainerState` captured at construction, which `Trainer.train()` replaces, so every
    step of a real run got epoch 0's budget. With epoch_steps = 1 the budgets of steps 1, 2, 3 are 16, 12, 8."""
    trainer = _trainer(
        tmp_path, tiny_model_dir, max_steps=3, logging_steps=1,
        rollout_plan_kwargs={"budgets_by_epoch": [16, 12, 8], "final_choices": [8], "epoch_steps": 1},
    )  # fmt: skip
    trainer.train()
    logged = [sorted(k for k in h if k.startswith("trl_efficient/budget_") and k.endswith("/accuracy"))
              for h in trainer.state.log_history if "loss" in h]  # fmt: skip
    assert logged == [["trl_efficient/budget_16/accuracy"], ["trl_efficient/budget_12/accuracy"],
                      ["trl_efficient/budget_8/accuracy"]]  # fmt: skip


def test_trainer_refuses_vllm_and_missing_plan(tmp_path, tiny_model_dir):
    with pytest.raises(ValueError, match="vLLM is not supported"):
        BudgetThinkerTrainer(model=tiny_model_dir, reward_funcs=[get_correctness_reward()],
                             args=tiny_config(tmp_path, use_vllm=True), train_dataset=make_dataset(4))  # fmt: skip
    with pytest.raises(ValueError, match="rollout_plan='budgetthinker'"):
        BudgetThinkerTrainer(model=tiny_model_dir, reward_funcs=[get_correctness_reward()],
                             args=tiny_config(tmp_path), train_dataset=make_dataset(4))  # fmt: skip


def test_eval_mode_forces_tokens(model_and_tokenizer):
    model, tok = model_and_tokenizer
    mode = parse_mode("budgetthinker:16")[0]
    assert mode.control_budget == 16 and "16 tokens" in mode.user_suffix
    ds = make_dataset(2)
    with pytest.raises(ValueError, match="control tokens"):  # an untrained tokenizer has none
        evaluate_model(model, tok, ds, max_new_tokens=8, mode=mode, show_progress=False)
    ctrl = add_budget_tokens(model, tok)
    backend = TransformersBackend(model, tok, batch_size=1, generation_kwargs={"min_new_tokens": 12},
                                  show_progress=False)  # fmt: skip
    _, records = evaluate_model(model, tok, ds, max_new_tokens=12, mode=mode, backend=backend, num_samples=2,
                                show_progress=False, return_records=True)  # fmt: skip
    assert records and "logits_processor" not in backend.generation_kwargs  # the caller's backend is not changed
    gens = backend.generate(["What is 2 + 3?"], 1, 12, 1.0, 1.0)  # plain backend: no forcing
    assert gens[0][0].ids
    from trl_efficient.eval.evaluate import budget_control_backend

    forced = budget_control_backend(backend, 16, tok).generate(["What is 2 + 3?", "6 * 7?"], 2, 12, 1.0, 1.0)
    for samples in forced:  # 4 generate calls of batch 1: the count restarts for each
        for s in samples:
            assert [s.ids[p] for p in forced_positions(16, len(s.ids))] == ctrl[: len(forced_positions(16, 12))]


def test_two_steps_from_yaml(tmp_path):
    config = train_yaml(
        "budgetthinker", tmp_path, max_completion_length=24,
        rollout_plan_kwargs={"budgets_by_epoch": [16, 8], "final_choices": [8, 16]},
    )  # fmt: skip
    assert config.rollout_plan == "budgetthinker" and not config.use_vllm
