"""The `testbed:formats` base model's data: the methods' prompt formats with random values, traces unchanged."""

from trl_efficient.overthinking.base import BASE_MODEL_SIZES, BaseModelConfig, _encode_examples, build_testbed_tokenizer


def test_formats_change_prompts_not_traces():
    tok = build_testbed_tokenizer()
    plain = _encode_examples(tok, BaseModelConfig(num_train_tasks=40))
    mixed = _encode_examples(tok, BaseModelConfig(num_train_tasks=40, method_prompt_share=1.0))
    seen = set()
    for (p0, c0), (p1, c1) in zip(plain, mixed, strict=True):
        prompt = tok.decode(p1)
        assert p0 != p1  # every prompt carries a format at share 1.0
        if prompt.rstrip().endswith("tokens"):  # HBPO prefill: the trace continues after its "<think>"
            seen.add("hbpo")
            assert "<think> I will answer the question with" in prompt
            assert tok.decode(c0) == "<think>" + tok.decode(c1)
        else:
            assert c0 == c1  # the same trace: the value in the prompt means nothing to the base model
            seen.add("l1-max" if "Think for maximum" in prompt else "l1" if "Think for " in prompt else "saber")
    assert seen == {"hbpo", "l1", "l1-max", "saber"}


def test_plain_base_key_is_unchanged_by_the_new_field():
    assert "method_prompt_share" not in BASE_MODEL_SIZES["base"].to_dict()
    assert BASE_MODEL_SIZES["formats"].to_dict()["method_prompt_share"] == 0.3
    assert BASE_MODEL_SIZES["formats"].key() != BASE_MODEL_SIZES["base"].key()


def test_plain_base_key_is_pinned():
    # the README's quickstart numbers come from this model: its cache key (config + data version) must not move
    assert BASE_MODEL_SIZES["base"].key() == "0591bd1f65"
    assert "method_prompt_follow" not in BASE_MODEL_SIZES["base"].to_dict()
    assert BASE_MODEL_SIZES["formats"].to_dict()["method_prompt_follow"] == 1.0


def test_plain_base_data_ignore_the_follow_field():
    tok = build_testbed_tokenizer()
    plain = _encode_examples(tok, BaseModelConfig(num_train_tasks=30))
    assert _encode_examples(tok, BaseModelConfig(num_train_tasks=30, method_prompt_follow=1.0)) == plain


def test_followed_traces_track_the_prompted_value_and_never_undercut_the_floor():
    import re

    from trl_efficient.overthinking.analysis import floor_tokens
    from trl_efficient.overthinking.world import make_tasks
    from trl_efficient_testbed.checks import pearson

    tok = build_testbed_tokenizer()
    config = BaseModelConfig(num_train_tasks=300, method_prompt_share=1.0, method_prompt_follow=1.0)
    tasks = make_tasks(config.num_train_tasks, seed=config.seed, min_ops=config.min_ops, max_ops=config.max_ops)
    exact, seen = [], set()
    for task, (p, c) in zip(tasks, _encode_examples(tok, config), strict=True):
        prompt, n = tok.decode(p), len(c)
        if "with" not in prompt and "Think for" in prompt:
            assert n >= floor_tokens(task, tok)  # never shorter than the shortest correct trace
        if "with" in prompt and prompt.rstrip().endswith("tokens"):  # HBPO: the budget counts tokens after the prefill
            budget = int(re.search(r"with (\d+) tokens", prompt).group(1))
            assert n <= max(budget, floor_tokens(task, tok) + 1)  # + 1: the prefill's "<think>" merges differently
            seen.add("hbpo")
        elif m := re.search(r"Think for maximum (\d+) tokens", prompt):
            assert n <= max(int(m.group(1)), floor_tokens(task, tok))
            seen.add("l1-max")
        elif m := re.search(r"Think for (\d+) tokens", prompt):
            exact.append((int(m.group(1)), n))
            seen.add("l1")
    assert seen == {"hbpo", "l1", "l1-max"}
    assert pearson([t for t, _ in exact], [n for _, n in exact]) > 0.5


def test_world_v2_shortest_follow_candidate_slips_like_the_teacher():
    """`follow_slips` (world v2): under a budget below every checked candidate the trace is a verbosity-0 draw whose
    late steps slip unchecked (about 1 - 0.8^6 = 74% wrong at 8 operations), not the error-free minimal trace; without
    it (world v1's rule) the same budget always gets the correct minimal trace."""
    import random

    from trl_efficient.overthinking.base import follow_trace
    from trl_efficient.overthinking.world import WORLD_V2, Task, minimal_trace

    task = Task(4, (("+", 7),) * 8)
    count = lambda text, thinking_only: len(text.split())  # noqa: E731
    draws = [follow_trace(task, "x " * 999, "l1-max", 1, random.Random(i), WORLD_V2, count, "longest", True)
             for i in range(200)]  # fmt: skip
    wrong = sum(not d.endswith(f"\\boxed{{{task.answer}}}") for d in draws) / len(draws)
    assert 0.6 < wrong < 0.88
    assert all("Check" not in d and len(d.split()) == len(minimal_trace(task).split()) for d in draws)
    usual = {
        follow_trace(task, "x " * 999, "l1-max", 1, random.Random(i), WORLD_V2, count, "longest") for i in range(20)
    }
    assert usual == {minimal_trace(task)}
    assert "follow_slips" not in BASE_MODEL_SIZES["formats"].to_dict() and BASE_MODEL_SIZES["v2"].follow_slips
