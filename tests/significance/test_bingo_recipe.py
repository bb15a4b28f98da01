"""The `bingo` recipe and its reward builder: registration, where each value comes from, fail-fast checks."""

import socket
from types import SimpleNamespace

import pytest

from trl_efficient.recipes import REWARD_BUILDERS, get_recipe
from trl_efficient.recipes.bingo import DEFAULT_SCORER, build_bingo_length_reward
from trl_efficient.significance import ScorerUnavailableError


def _args(**extra):
    base = dict(max_completion_length=64, temperature=0.7, top_p=0.9, top_k=0, seed=3, chat_template_kwargs=None,
                generation_kwargs={"sequence_bias": [[[2], 3.0]], "other": 1}, model_init_kwargs={"dtype": "float32",
                "device_map": "auto"})  # fmt: skip
    return SimpleNamespace(**{**base, **extra})


def test_recipe_registration():
    recipe = get_recipe("bingo")
    assert [s.builder for s in recipe.rewards] == ["correctness", "bingo_length"]
    assert [s.weight for s in recipe.rewards] == [1.0, 1.0]  # total = 1[correct] + shaping = Bingo's R
    assert REWARD_BUILDERS.get("bingo_length") is build_bingo_length_reward
    assert recipe.papers == ("2506.08125",)


def test_builder_reads_the_config_and_the_tokenizer(monkeypatch, tiny_classifier_dir):
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_SCORER", tiny_classifier_dir)  # the default is checked below, offline
    monkeypatch.delenv("TRL_EFFICIENT_BINGO_REFERENCE", raising=False)
    monkeypatch.delenv("TRL_EFFICIENT_BINGO_KWARGS", raising=False)
    tok = SimpleNamespace(name_or_path="/models/policy")
    reward = build_bingo_length_reward(_args(), tok)
    assert reward.scorer_spec == tiny_classifier_dir and reward._scorer is None  # checked, built on first use
    gen = reward.generator
    assert gen.model_ref == "/models/policy" and gen.tokenizer is tok
    assert (gen.max_new_tokens, gen.temperature, gen.top_p, gen.top_k, gen.seed) == (64, 0.7, 0.9, None, 3)
    assert gen.generation_kwargs == {"sequence_bias": [[[2], 3.0]]}  # only the EOS bias is a generate() option here
    assert gen.model_kwargs == {"dtype": "float32"}


def test_precedence_recipe_config_environment(monkeypatch, tiny_classifier_dir):
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_REFERENCE", "group")
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_KWARGS", '{"lambda_c": 3.0, "threshold": 0.4}')
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_SCORER", tiny_classifier_dir)
    # recipe spec kwargs < the config's reward_kwargs (merged by Recipe.reward_kwargs) < the environment
    args = _args(reward_kwargs={"bingo_length": {"lambda_c": 1.0, "lambda_we": 4.0, "lambda_wn": 1.5}})
    (_, kwargs) = get_recipe("bingo").reward_kwargs(args)
    reward = build_bingo_length_reward(args, SimpleNamespace(name_or_path="x"), **kwargs)
    assert reward.reference == "group" and reward.generator is None and reward.scorer_spec == tiny_classifier_dir
    assert (reward.lambda_c, reward.lambda_wn, reward.lambda_we, reward.threshold) == (3.0, 1.5, 4.0, 0.4)


def test_recipe_kwargs_are_checked_and_handed_to_the_builder(monkeypatch, tiny_classifier_dir):
    from trl_efficient.recipes.bingo import prepare_bingo

    for var in ("TRL_EFFICIENT_BINGO_SCORER", "TRL_EFFICIENT_BINGO_REFERENCE", "TRL_EFFICIENT_BINGO_KWARGS"):
        monkeypatch.delenv(var, raising=False)
    args = _args()
    dataset = object()
    assert (
        prepare_bingo(dataset, args, None, reference="group", schedule_start=7, scorer=tiny_classifier_dir) is dataset
    )
    reward = build_bingo_length_reward(args, SimpleNamespace(name_or_path="x"))
    assert reward.reference == "group" and reward.schedule.start_step == 7
    with pytest.raises(ValueError, match=r"recipe_kwargs \['schedule_begin'\] are not arguments"):
        prepare_bingo(dataset, _args(), None, schedule_begin=7)


def test_bad_environment_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_KWARGS", "{lambda_c: 3}")
    with pytest.raises(ValueError, match="TRL_EFFICIENT_BINGO_KWARGS must be a JSON object"):
        build_bingo_length_reward(_args(), SimpleNamespace(name_or_path="x"))
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_KWARGS", '{"reference": "oracle"}')
    with pytest.raises(ValueError, match="reference must be one of"):
        build_bingo_length_reward(_args(), SimpleNamespace(name_or_path="x"))


def test_unreachable_server_fails_before_training(monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_SCORER", url)
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_KWARGS", '{"reference": "group", "scorer_kwargs": {"retries": 0}}')
    with pytest.raises(ScorerUnavailableError, match=url):
        build_bingo_length_reward(_args(), SimpleNamespace(name_or_path="x"))


def _default_scorer_cached() -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(DEFAULT_SCORER, "config.json"), str)


@pytest.mark.skipif(_default_scorer_cached(), reason="the default scorer is in this machine's Hugging Face cache")
def test_default_scorer_offline_is_one_line_before_the_policy_loads(monkeypatch, tmp_path, capsys):
    """Issue 36 item 3: offline (tests run with HF_HUB_OFFLINE=1) and without the default LLMLingua-2 checkpoint, the
    run stops at the reward builder, before the trainer (and so the policy) is built, with one line that names the
    scorer, says it could not be loaded offline and how to pass another. It used to fail at the first reward call,
    after the policy, the rollouts and minutes of work, with transformers' "couldn't connect" message."""
    import dataclasses

    from helpers import tiny_cli_args

    from trl_efficient.cli import main
    from trl_efficient.recipes import RECIPES

    for var in ("TRL_EFFICIENT_BINGO_SCORER", "TRL_EFFICIENT_BINGO_REFERENCE", "TRL_EFFICIENT_BINGO_KWARGS"):
        monkeypatch.delenv(var, raising=False)
    built = []
    cls = get_recipe("bingo").trainer_cls
    spy = type("Spy", (cls,), {"__init__": lambda t, *a, **k: (built.append(t), cls.__init__(t, *a, **k))[1]})
    monkeypatch.setitem(RECIPES._entries, "bingo", dataclasses.replace(get_recipe("bingo"), trainer_class=spy))
    assert main(["train", "--recipe", "bingo", *tiny_cli_args(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and built == []  # one line; no trainer, no policy
    assert err.startswith(
        f"trl-efficient: error: Bingo's significance scorer {DEFAULT_SCORER!r} cannot be loaded: it is not in the "
        "local Hugging Face cache and HF_HUB_OFFLINE=1 forbids downloading it (offline); "
    )
    assert 'or pass another with --recipe_kwargs \'{"scorer": "<spec>"}\'' in err


def test_scorer_specs_are_checked_without_loading(monkeypatch, tmp_path, tiny_classifier_dir):
    from trl_efficient.significance.factory import ScorerNotFoundError, check_scorer

    check_scorer(tiny_classifier_dir)  # a checkpoint directory, an object, a URL pass
    check_scorer(f"self-information:{tiny_classifier_dir}")
    check_scorer(SimpleNamespace(score=lambda texts: []))
    check_scorer("http://127.0.0.1:1")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ScorerNotFoundError, match=r"scorer 'llmlingua:.*empty' cannot be loaded: .*empty has no "):
        check_scorer(f"llmlingua:{tmp_path / 'empty'}")
    with pytest.raises(ScorerNotFoundError, match="scorer 'self-information:tiny:qwen2' cannot be loaded: neither a"):
        check_scorer("self-information:tiny:qwen2")
    # the fallback is checked too, and the error names its option
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_SCORER", tiny_classifier_dir)
    kwargs = '{"reference": "group", "on_scorer_error": "fallback", "fallback_scorer": "./no/such/scorer"}'
    monkeypatch.setenv("TRL_EFFICIENT_BINGO_KWARGS", kwargs)
    expected = (
        r"^Bingo's fallback significance scorer './no/such/scorer' cannot be loaded: no such directory; or pass "
        r"another with --recipe_kwargs '\{\"fallback_scorer\""
    )
    with pytest.raises(ScorerNotFoundError, match=expected):
        build_bingo_length_reward(_args(), SimpleNamespace(name_or_path="x"))
