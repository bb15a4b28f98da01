"""WorkCounter (perf/work.py): exact token counts, by role and grad mode, and timed rewards."""

import pytest
import torch
from work import WorkCounter

from trl_efficient.rewards import get_correctness_reward
from trl_efficient.testing.tiny import build_tiny_model, build_tiny_tokenizer


@pytest.fixture(scope="module")
def tiny():
    tokenizer = build_tiny_tokenizer()
    return tokenizer, build_tiny_model(tokenizer, hidden_size=16), build_tiny_model(tokenizer, hidden_size=16, seed=1)


def test_forward_tokens_by_role_and_grad_mode(tiny):
    _, policy, ref = tiny
    counter = WorkCounter({"policy": policy, "ref": ref}, eos_token_ids=[])
    ids = torch.ones(2, 5, dtype=torch.long)
    with counter:
        policy(input_ids=ids).logits.sum().backward()  # the loss's pass: 2 x 5 = 10 tokens
        with torch.no_grad():
            policy(input_ids=ids[:, :3])  # a signal pass: 6 tokens
            ref(input_ids=ids)  # reference log-probs: 10 tokens
    policy(input_ids=ids)  # after the context: not counted
    assert counter.forward_tokens() == {"policy train": 10, "policy no-grad": 6, "ref no-grad": 10}
    assert sum(counter.passes.values()) == 3  # one pass each, the inner backbone is not a second pass


def test_generated_tokens_stop_at_the_first_eos_and_forwards_inside_generate_are_not_passes(tiny):
    tokenizer, policy, _ = tiny
    prompt = torch.tensor([[5, 6, 7], [0, 8, 9]])  # left padding in row 2
    mask = torch.tensor([[1, 1, 1], [0, 1, 1]])
    torch.manual_seed(0)
    with torch.no_grad():
        out = policy.generate(input_ids=prompt, attention_mask=mask, max_new_tokens=6, do_sample=True,
                              eos_token_id=None, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    new = out[:, 3:].tolist()
    eos = new[0][2]  # count up to and including this id in row 1: at most 3 tokens there
    expected = 0
    for row in new:
        expected += next((i + 1 for i, t in enumerate(row) if t == eos), len(row))
    counter = WorkCounter({"policy": policy}, eos_token_ids=[eos])
    torch.manual_seed(0)
    with counter, torch.no_grad():
        again = policy.generate(input_ids=prompt, attention_mask=mask, max_new_tokens=6, do_sample=True,
                                eos_token_id=None, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    assert again.tolist() == out.tolist()
    assert sum(counter.generated.values()) == expected <= 3 + 6
    assert sum(counter.prefilled.values()) == 5  # 3 + 2 non-padding prompt tokens
    assert counter.forward_tokens() == {}  # the decoding forwards are generation, not passes


def test_rewards_are_timed_and_keep_identity_and_results():
    reward = get_correctness_reward()

    def plain(completions, **kwargs):
        return [1.0] * len(completions)

    counter = WorkCounter({}, eos_token_ids=[])
    timed, timed_plain = counter.wrap_rewards([reward, plain], ["correctness_reward", "plain"])
    assert timed is reward and timed.__name__ == "correctness_reward"  # components that hold it still see it
    assert timed(completions=[r"\boxed{2}", "3"], solution=["2", "2"]) == [1.0, 0.0]
    assert timed_plain(completions=["a"]) == [1.0] and timed_plain.__name__ == "plain"
    assert set(counter.seconds) == {"reward:correctness_reward", "reward:plain"}
    assert all(v >= 0.0 for v in counter.seconds.values())


def test_time_method_counts_calls_and_returns_the_result():
    class Obj:
        def f(self, x):
            return x + 1

    obj, counter = Obj(), WorkCounter({}, eos_token_ids=[])
    counter.time_method(obj, "f", "section")
    assert obj.f(1) == 2 and obj.f(2) == 3 and "section" in counter.seconds
    assert Obj().f(0) == 1 and "f" not in vars(Obj())  # the class itself is untouched


def test_summary_is_per_step():
    counter = WorkCounter({}, eos_token_ids=[])
    counter.generated["policy (x)"] += 30
    counter.forward["policy train"] += 60
    assert counter.summary(3)["generated"] == {"policy (x)": 10.0}
    assert counter.summary(3)["forward"] == {"policy train": 20.0}


def test_work_module_doctests():
    """perf/work.py's doctests (perf/ is outside the package's doctest collection)."""
    import doctest

    import work

    assert doctest.testmod(work, optionflags=doctest.ELLIPSIS).failed == 0
