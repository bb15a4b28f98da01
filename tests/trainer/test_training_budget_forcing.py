"""s1 budget forcing as a training generation option (`EfficientGRPOConfig.budget_forcing`): the inserted tokens sit at
exactly the expected positions and are masked out of the loss, token by token; off = TRL's path unchanged."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer
from trl import GRPOTrainer

from tests.helpers import make_dataset, tiny_config
from trl_efficient.methods.budgetthinker import BudgetThinkerTrainer
from trl_efficient.rewards import get_correctness_reward
from trl_efficient.trainer import EfficientGRPOTrainer
from trl_efficient.trainer.trl_internals import loss_mask

# Thinking length (filler tokens before `</think>`) of each question of `make_dataset` in the scripted model.
SEGMENTS = {"6 * 7": 3, "2 + 3": 20, "9 - 2": 5, "3 * 3": 30}
AFTER_WAIT = 2  # filler tokens the scripted model thinks after an inserted "Wait" before closing again


class ScriptedPhases(GRPOTrainer):
    """Replaces only TRL's backend generation: each completion is a pure function of its prefix (so the multi-phase
    calls compose), capped at `generation_config.max_new_tokens` as TRL's transformers path caps it.

    Script per question: `" x" * seg + "</think>" + " The final answer is \\boxed{42}" + EOS`; after an inserted
    "Wait": `" x" * AFTER_WAIT + "</think>" + answer + EOS`; after the forced `</think>` + answer prefix: `"42}" + EOS`.
    """

    def _script_ids(self):
        tok = self.processing_class
        enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
        return {
            "header": enc("<|im_start|>assistant\n"),
            "fill": enc(" x"),
            "think": enc("</think>"),
            "answer": enc(" The final answer is \\boxed{42}") + [tok.eos_token_id],
            "wait": enc("Wait"),
            "forced": enc("</think>\n\nThe final answer is \\boxed{"),
            "closing": enc("42}") + [tok.eos_token_id],
        }

    def continuation(self, prefix: list[int]) -> list[int]:
        s = self._script_ids()
        h = s["header"]
        cut = max(i for i in range(len(prefix) - len(h) + 1) if prefix[i : i + len(h)] == h) + len(h)
        prompt_text, gen = self.processing_class.decode(prefix[:cut]), prefix[cut:]
        if gen[-len(s["forced"]) :] == s["forced"]:
            return list(s["closing"])
        seg = next(n for q, n in SEGMENTS.items() if q in prompt_text)
        script = s["fill"] * seg + s["think"] + s["answer"]
        w = s["wait"]
        waits = [i for i in range(len(gen) - len(w) + 1) if gen[i : i + len(w)] == w]
        if waits:
            end = waits[-1] + len(w)
            script = gen[:end] + s["fill"] * AFTER_WAIT + s["think"] + s["answer"]
        assert script[: len(gen)] == gen, "prefix off the script"
        return script[len(gen) :]

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        cap = self.generation_config.max_new_tokens
        self.phase_calls.append((len(prompt_ids), cap))
        return [self.continuation(list(p))[:cap] for p in prompt_ids], None


class ScriptedTrainer(EfficientGRPOTrainer, ScriptedPhases):
    def __init__(self, *args, **kwargs):
        self.phase_calls = []
        super().__init__(*args, **kwargs)


def _scripted(tmp_path, tiny_model_dir, **overrides):
    return ScriptedTrainer(
        model=tiny_model_dir,
        reward_funcs=[get_correctness_reward()],
        args=tiny_config(tmp_path, **overrides),
        train_dataset=make_dataset(8),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )


def _inputs():
    return [dict(row) for row in make_dataset(4)]  # one row per question, SEGMENTS order


def test_force_positions_and_mask_token_by_token(tmp_path, tiny_model_dir):
    B = 8
    trainer = _scripted(tmp_path, tiny_model_dir, budget_forcing="force:8", max_completion_length=64)
    s = trainer._script_ids()
    output = trainer._generate_and_score_completions(_inputs())
    ids, mask = output["completion_ids"], loss_mask(output)
    for r, seg in enumerate(SEGMENTS.values()):
        row = ids[r].tolist()
        if seg + len(s["think"]) <= B:  # closed its thinking within B: as generated, every token kept
            want = s["fill"] * seg + s["think"] + s["answer"]
            keep = [1] * len(want)
        else:  # B filler tokens, then the inserted `</think>` + answer prefix (masked), then "42}" + EOS
            want = s["fill"] * B + s["forced"] + s["closing"]
            keep = [1] * B + [0] * len(s["forced"]) + [1] * len(s["closing"])
        assert row[: len(want)] == want, r
        pad = ids.size(1) - len(want)
        assert mask[r].tolist() == keep + [0] * pad, r  # token by token, padding 0
        # out of the loss, not out of the context: attention (completion_mask) keeps the inserted tokens
        assert output["completion_mask"][r].tolist() == [1] * len(want) + [0] * pad, r
    assert int(output["num_items_in_batch"]) == int(mask.sum())
    # phases: all 4 rows for min(B, 64) tokens; the 2 that closed in time up to 64 - B; the 2 forced ones answer_cap
    assert trainer.phase_calls == [(4, B), (2, 64 - B), (2, 32)]
    metrics = trainer._metrics["train" if trainer.model.training else "eval"]
    assert metrics["budget_forcing/forced_fraction"] == [0.5]
    assert metrics["budget_forcing/inserted_tokens_mean"] == [0.5 * len(s["forced"])]
    # rewards see the full text (inserted tokens included): every row ends in \boxed{42}, right on "6 * 7" only
    assert output["advantages"].shape[0] == 4


def test_wait_positions_and_mask_token_by_token(tmp_path, tiny_model_dir):
    trainer = _scripted(tmp_path, tiny_model_dir, budget_forcing="wait:1", max_completion_length=64)
    s = trainer._script_ids()
    output = trainer._generate_and_score_completions(_inputs())
    ids, mask = output["completion_ids"], loss_mask(output)
    for r, seg in enumerate(SEGMENTS.values()):
        # the first `</think>` (position seg) is replaced by "Wait"; the second one (N = 1 used up) stays
        want = s["fill"] * seg + s["wait"] + s["fill"] * AFTER_WAIT + s["think"] + s["answer"]
        want = want[:64]
        keep = [1] * seg + [0] * len(s["wait"]) + [1] * (len(want) - seg - len(s["wait"]))
        assert ids[r].tolist()[: len(want)] == want, r
        assert mask[r].tolist() == keep + [0] * (ids.size(1) - len(want)), r
        assert ids[r].tolist()[seg : seg + len(s["wait"])] == s["wait"]
    assert int(output["num_items_in_batch"]) == int(mask.sum())
    assert trainer.phase_calls[0] == (4, 64) and trainer.phase_calls[1][0] == 4  # one "Wait" round for every row


def test_force_then_train_two_steps_real_model(tmp_path, tiny_model_dir):
    """Real tiny-model generation (random tokens: the thinking never closes) -> every row forced at B; two steps."""
    B = 6
    trainer = EfficientGRPOTrainer(
        model=tiny_model_dir,
        reward_funcs=[get_correctness_reward()],
        args=tiny_config(tmp_path, budget_forcing=f"force:{B}", max_completion_length=24, max_steps=2),
        train_dataset=make_dataset(8),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    forced = trainer.processing_class.encode("</think>\n\nThe final answer is \\boxed{", add_special_tokens=False)
    torch.manual_seed(0)
    output = trainer._generate_and_score_completions(_inputs())
    ids, mask = output["completion_ids"], loss_mask(output)
    eos = trainer.processing_class.eos_token_id
    n_forced = 0
    for r in range(ids.size(0)):
        row = ids[r].tolist()
        if eos in row[:B]:
            continue  # ended before B: nothing inserted
        n_forced += 1
        assert row[B : B + len(forced)] == forced
        assert mask[r, :B].tolist() == [1] * B and mask[r, B : B + len(forced)].tolist() == [0] * len(forced)
        assert mask[r, B + len(forced)].item() == 1  # the answer the policy sampled after the prefix is kept
    assert n_forced > 0
    # the forced answer gets max(1, 24 - B - |inserted|) = 5 tokens: the rollout stays within max_completion_length
    assert ids.size(1) == 24 and mask[:, B + len(forced) :].sum() > 0
    trainer.train()
    assert trainer.state.global_step == 2
    logged = [h for h in trainer.state.log_history if "budget_forcing/forced_fraction" in h]
    assert len(logged) == 2 and all(h["budget_forcing/inserted_tokens_mean"] > 0 for h in logged)


@pytest.mark.parametrize("forcing", ["force:2", "wait:1"])
def test_forced_tokens_stay_in_context_kl_zero_before_any_update(tmp_path, tiny_model_dir, forcing):
    """Regression (issue 36 item 1): forced tokens were zeroed in `completion_mask`, which TRL 1.16's `_compute_loss`
    also uses as the loss pass's attention mask, while the reference and old log-probs saw them. With learning rate 0
    the policy *is* the reference, so the logged KL of step 1 must be 0 up to float rounding (it was 2e-6 to 1.2e-5
    on this tiny random model with the holes, 1.1 on a batch of SmolLM2's). Some rows must be forced for the test to
    mean anything: the scripted rollouts close their thinking (so "Wait" is inserted) and run past B (so `</think>`
    is forced); the log-probs are the tiny model's."""
    trainer = _scripted(tmp_path, tiny_model_dir, budget_forcing=forcing, max_completion_length=64, max_steps=1,
                        beta=0.04, learning_rate=0.0)  # fmt: skip
    trainer.train()
    (logged,) = [h for h in trainer.state.log_history if "kl" in h]
    assert logged["budget_forcing/inserted_tokens_mean"] > 0
    assert abs(logged["kl"]) < 1e-9, logged["kl"]  # 0.0 here; 2e-6 to 1.2e-5 with the holes


def test_unforced_loss_equals_trls(tmp_path, tiny_model_dir):
    """Nothing forced: the loss mask our masking writes (`tool_mask` of ones) leaves TRL's loss unchanged, value for
    value, against TRL's own output for the same sequences (beta > 0, so the KL term is compared too)."""
    trainer = EfficientGRPOTrainer(
        model=tiny_model_dir,
        reward_funcs=[get_correctness_reward()],
        args=tiny_config(tmp_path, max_completion_length=12, beta=0.04, loss_type="dapo"),
        train_dataset=make_dataset(8),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    torch.manual_seed(0)
    output = trainer._generate_and_score_completions(_inputs())
    output["advantages"] = torch.linspace(-1.0, 1.0, output["advantages"].numel())  # a loss that is not 0
    plain = trainer._compute_loss(trainer.model, dict(output))
    masked = dict(output)
    trainer.mask_completion_tokens(masked, torch.zeros_like(output["completion_ids"], dtype=torch.bool))
    assert torch.equal(masked["tool_mask"], torch.ones_like(output["completion_mask"]))
    assert int(masked["num_items_in_batch"]) == int(output["num_items_in_batch"])
    assert plain.item() != 0.0 and torch.equal(trainer._compute_loss(trainer.model, masked), plain)


def test_wait_trains_one_step_real_model(tmp_path, tiny_model_dir):
    trainer = EfficientGRPOTrainer(
        model=tiny_model_dir,
        reward_funcs=[get_correctness_reward()],
        args=tiny_config(tmp_path, budget_forcing="wait:2", max_completion_length=10, max_steps=1,
                         generation_kwargs={"min_new_tokens": 1}),
        train_dataset=make_dataset(8),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )  # fmt: skip
    trainer.train()
    assert trainer.state.global_step == 1


def test_off_is_trls_path(tmp_path, tiny_model_dir):
    """budget_forcing=None: same completions and masks as TRL's GRPOTrainer with the same seed."""
    outs = []
    for cls in (GRPOTrainer, EfficientGRPOTrainer):
        trainer = cls(
            model=tiny_model_dir,
            reward_funcs=[get_correctness_reward()],
            args=tiny_config(tmp_path, max_completion_length=12),
            train_dataset=make_dataset(8),
            processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
        )
        torch.manual_seed(0)
        outs.append(trainer._generate_and_score_completions(_inputs()))
    assert torch.equal(outs[0]["completion_ids"], outs[1]["completion_ids"])
    assert torch.equal(outs[0]["completion_mask"], outs[1]["completion_mask"])
    assert int(outs[0]["num_items_in_batch"]) == int(outs[1]["num_items_in_batch"])


def test_config_errors(tmp_path, tiny_model_dir):
    for bad in ("force", "force:0", "stop:4", "wait:x"):
        with pytest.raises(ValueError, match=r"^budget_forcing="):
            tiny_config(tmp_path, budget_forcing=bad)
    with pytest.raises(ValueError, match="never forces"):
        tiny_config(tmp_path, budget_forcing="force:48", max_completion_length=48)
    with pytest.raises(ValueError, match="transformers-only"):
        tiny_config(tmp_path, budget_forcing="force:8", use_vllm=True)
    with pytest.raises(ValueError, match="continuous_batching"):
        tiny_config(tmp_path, budget_forcing="wait:1", use_transformers_continuous_batching=True)
    assert tiny_config(tmp_path, budget_forcing=None).budget_forcing is None
    with pytest.raises(ValueError, match="budget_forcing"):
        BudgetThinkerTrainer(model=tiny_model_dir, reward_funcs=[get_correctness_reward()],
                             args=tiny_config(tmp_path, budget_forcing="force:8", rollout_plan="budgetthinker"),
                             train_dataset=make_dataset(4))  # fmt: skip


def test_perf_script_renders_table_and_plot(tmp_path):
    """perf/testbed/budget_forcing.py: the table and the plot from a result (the measurement itself is not run)."""
    import importlib.util
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location("bf", os.path.join(root, "perf", "testbed", "budget_forcing.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    point = {"thinking_tokens": 11.0, "max_thinking_tokens": 11, "tokens": 24.0, "forced_fraction": 1.0,
             "accuracy": 0.25, "n": 4}  # fmt: skip
    result = {"num_eval": 4, "seed": 0, "command": "python perf/testbed/budget_forcing.py", "seconds": 1.0,
              "max_new_tokens": 24,
              "force": {"model": "testbed:base", "close_tag_tokens": 3, "unforced": dict(point, forced_fraction=0.0),
                        "points": [dict(point, budget=8)]}}  # fmt: skip
    text = script.markdown(result)
    assert "| force:8 | 8 | 11.0 | 11 | 24.0 | 1.00 | 0.250 |" in text and "BudgetThinker is not in this run" in text
    assert "24 new tokens" in text
    script.plot(result, str(tmp_path / "bf.png"))
    assert (tmp_path / "bf.png").stat().st_size > 1000
