"""PEAR (methods.md §29): token entropy, the phase split, phase entropies, the reward, and PEARTrainer's columns."""

import math

import pytest
import torch
from helpers import ScriptedGenerationMixin, make_dataset, tiny_config

from trl_efficient.methods.entropy import ENTROPY_COLUMN, mean_entropy, token_entropy
from trl_efficient.methods.pear import PEARTrainer, phase_entropies
from trl_efficient.rewards import correctness_reward, get_pear_reward
from trl_efficient.trainer import EfficientGRPOTrainer


def thinking_by_decoding(ids, tok):
    """Independent reference: the shortest prefix whose decoded text holds every `</think>` of the whole text (linear
    scan), `None` without one."""
    total = tok.decode(ids, skip_special_tokens=False).count("</think>")
    if total == 0:
        return None
    return next(
        k for k in range(1, len(ids) + 1) if tok.decode(ids[:k], skip_special_tokens=False).count("</think>") == total
    )


def test_token_entropy_of_known_distributions():
    # p = (.5, .25, .25): H = .5 ln 2 + 2 * .25 ln 4 = 1.5 ln 2 = 1.03972 ; uniform over 4: ln 4 = 1.38629 ; one-hot: 0
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25, 1e-30], [0.25, 0.25, 0.25, 0.25], [1.0, 1e-30, 1e-30, 1e-30]]))
    assert token_entropy(logits).tolist() == pytest.approx([1.5 * math.log(2), math.log(4), 0.0], abs=1e-5)
    assert mean_entropy([]) == 0.0 and mean_entropy([0.5, 1.5]) == 1.0


def test_phase_split_is_the_length_meters(tiny_tokenizer):
    """PEAR's thinking phase is `LengthMeter.thinking_tokens`: up to the token completing the LAST `</think>`, all of
    the completion without one; the phase entropies then read the answer as empty."""
    from trl_efficient.core.lengths import LengthMeter

    meter = LengthMeter(scope="thinking", tokenizer=tiny_tokenizer)

    def ids(text):
        return tiny_tokenizer(text, add_special_tokens=False)["input_ids"]

    last = ids("<think>a</think>b</think>")
    assert meter.thinking_tokens(last + ids("42")) == len(last)
    assert meter.thinking_tokens(ids("<think>a b")) == len(ids("<think>a b"))  # no tag: all thinking
    n = len(ids("<think>a b"))
    assert phase_entropies([1.0] * n, meter.thinking_tokens(ids("<think>a b"))) == (1.0, 0.0)


def test_phase_entropies_and_edges():
    # think = (2 + 1 + .5) / 3 = 1.16667 ; answer = .1
    assert phase_entropies([2.0, 1.0, 0.5, 0.1], 3) == (1.1667, 0.1)
    assert phase_entropies([2.0, 1.0], None) == (1.5, 0.0)  # no </think>: all thinking, H_answer = 0 (§29)
    assert phase_entropies([2.0, 1.0], 2) == (1.5, 0.0)  # empty answer
    assert phase_entropies([], None) == (0.0, 0.0)  # empty completion
    assert phase_entropies([0.4], 0) == (0.0, 0.4)  # everything in the answer


def test_reward_values_and_errors():
    reward = get_pear_reward()  # lam .5, alpha 1 (proposed defaults)
    out = reward([None] * 4, pear_think_entropy=[1.2, 0.4, 2.0, None], pear_answer_entropy=[0.2, 0.9, 0.0, 0.3])
    # -.5 * max(0, 1.2 - .2) = -.5 ; max(0, .4 - .9) = 0 ; -.5 * 2 = -1 ; None -> 0: max(0, 0 - .3) = 0
    assert out == [-0.5, 0.0, -1.0, 0.0]
    # lam 2, alpha .5: -2 * max(0, 1.2 - .1) = -2.2
    assert get_pear_reward(lam=2.0, alpha=0.5)([None], pear_think_entropy=[1.2], pear_answer_entropy=[0.2]) == [
        pytest.approx(-2.2)
    ]
    with pytest.raises(ValueError, match="lam"):
        get_pear_reward(lam=-1)


class ScriptedPEAR(PEARTrainer, ScriptedGenerationMixin):
    pass


def test_plain_trainer_rejects_the_reward(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="pear_think_entropy"):
        EfficientGRPOTrainer(
            model=tiny_model_dir,
            reward_funcs=[correctness_reward, get_pear_reward()],
            args=tiny_config(tmp_path),
            train_dataset=make_dataset(8),
        )


def test_trainer_columns(tiny_model_dir, tmp_path):
    seen = []

    def spy(completions, completion_ids, pear_think_entropy, pear_answer_entropy, mean_token_entropy, **kwargs):
        seen.append((completion_ids, pear_think_entropy, pear_answer_entropy, mean_token_entropy))
        return [0.0] * len(completions)

    trainer = ScriptedPEAR(
        model=tiny_model_dir,
        reward_funcs=[correctness_reward, get_pear_reward(), spy],
        args=tiny_config(tmp_path, max_steps=1),
        train_dataset=make_dataset(8),
    )
    trainer.train()
    assert seen
    tok = trainer.processing_class
    for ids_list, think, answer, mean in seen:
        for ids, ht, ha, m in zip(ids_list, think, answer, mean, strict=True):
            assert all(math.isfinite(v) and v >= 0 for v in (ht, ha, m))
            n = thinking_by_decoding(ids, tok)
            if n is None:
                assert ha == 0.0
                assert ht == pytest.approx(m, abs=2e-4)
            else:  # the overall mean is the token-weighted mean of the two phases
                assert m == pytest.approx((n * ht + (len(ids) - n) * ha) / len(ids), abs=2e-4)
    assert any(h > 0 for _, think, _, _ in seen for h in think)
    assert ENTROPY_COLUMN == "mean_token_entropy"
