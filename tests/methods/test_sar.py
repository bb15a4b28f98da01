"""SAR (methods.md §25): the score by hand, the reward, the standalone prompt, the perplexities against an independent
forward pass, the construction errors, and SARTrainer's columns when training from the recipe."""

import math

import pytest
import torch
from datasets import Dataset
from helpers import ScriptedGenerationMixin, make_dataset, tiny_config
from transformers import AutoModelForCausalLM, AutoTokenizer

from trl_efficient.methods.sar import SARTrainer, mean_nll, standalone_messages
from trl_efficient.recipes import get_recipe
from trl_efficient.rewards import correctness_reward
from trl_efficient.rewards.sar import get_sar_reward, sar_score
from trl_efficient.trainer import EfficientGRPOTrainer

L = math.log


def by_hand(ppl_qa, ppl_a):
    # the paper's formula on perplexities, both clips: clip((ppl(a) - ppl(a|q)) / ppl(a), -1, 1)
    return min(1.0, max(-1.0, (ppl_a - ppl_qa) / ppl_a))


def test_score_by_hand():
    # (4 - 2) / 4 = .5 ; (6 - 1.5) / 6 = .75 ; (3 - 3) / 3 = 0 ; (2 - 10) / 2 = -4 -> clipped to -1
    assert sar_score(L(2), L(4)) == pytest.approx(0.5)
    assert sar_score(L(1.5), L(6)) == pytest.approx(0.75)
    assert sar_score(L(3), L(3)) == 0.0
    assert sar_score(L(10), L(2)) == -1.0
    assert sar_score(L(2), L(3)) == pytest.approx(by_hand(2, 3))  # 1/3
    # log ppl 1000 vs 0: ppl(a|q) = e^1000 overflows a float; the score is the clip, not NaN
    assert sar_score(1000.0, 0.0) == -1.0
    assert sar_score(0.0, 1000.0) == pytest.approx(1.0)  # upper bound approached, never exceeded
    # empty answer (None) and non-finite inputs: documented 0
    assert sar_score(None, 1.0) == sar_score(1.0, None) == sar_score(float("nan"), 1.0) == 0.0
    assert sar_score(float("inf"), 1.0) == 0.0


def test_reward_values_and_errors():
    reward = get_sar_reward()  # alpha .2 (§25 [code] reward_factors [1, .2])
    out = reward([None] * 4, sar_score=[0.5, -1.0, None, 0.0])
    assert out == [pytest.approx(0.1), pytest.approx(-0.2), 0.0, 0.0]
    assert get_sar_reward(alpha=1.0)([None], sar_score=[0.75]) == [0.75]
    assert reward.sar_model == "policy" and get_sar_reward(model="reference").sar_model == "reference"
    with pytest.raises(ValueError, match="alpha"):
        get_sar_reward(alpha=-0.1)
    with pytest.raises(ValueError, match="policy"):
        get_sar_reward(model="ref")


def test_mean_nll():
    assert mean_nll(torch.log(torch.tensor([0.5, 0.25, 0.125])), 3) == pytest.approx((L(2) + L(4) + L(8)) / 3)
    assert mean_nll(torch.log(torch.tensor([0.5, 0.25])), 1) == pytest.approx(L(2))  # padding after n ignored
    assert mean_nll(torch.zeros(3), 0) is None


# ------------------------------------------------------------------------------------------------ one trainer
@pytest.fixture(scope="module")
def trainer(tiny_model_dir, tmp_path_factory):
    return SARTrainer(
        model=tiny_model_dir,
        reward_funcs=[correctness_reward, get_sar_reward()],
        args=tiny_config(tmp_path_factory.mktemp("sar"), temperature=0.7),
        train_dataset=make_dataset(8),
    )


def test_standalone_prompt_token_by_token(trainer, tiny_tokenizer):
    tok = tiny_tokenizer
    system = {"role": "system", "content": "Be brief."}
    prompt = [system, {"role": "user", "content": "What is 6 * 7?"}]
    assert standalone_messages(prompt) == [system, {"role": "user", "content": ""}]
    # ChatML (tiny tokenizer's template), written out by hand: the system turn kept, an empty user turn
    expected = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n"
    ids = trainer.standalone_prompt_ids(prompt)
    assert ids == tok(expected, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == expected
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>") and ids.count(tok.eos_token_id) == 2  # two <|im_end|>
    # no system message: only the empty user turn (the question and anything after the system turn are dropped)
    no_system = trainer.standalone_prompt_ids([{"role": "user", "content": "What is 2 + 3?"}])
    assert tok.decode(no_system) == "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n"
    # plain text: the empty prompt; the tiny tokenizer gives no token for "" and has no BOS, so EOS (<|im_end|>)
    assert tok("")["input_ids"] == [] and tok.bos_token_id is None
    assert trainer.standalone_prompt_ids("What is 6 * 7?") == [tok.eos_token_id]


def independent_log_ppl(model, prompt_ids, completion_ids, temperature):
    """Mean NLL of the completion from a plain forward (no padding, no TRL): log_softmax(logits / T), gathered."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0].double() / temperature
    logp = torch.log_softmax(logits, dim=-1)
    n = len(completion_ids)
    targets = ids[0, len(prompt_ids) :]
    return -logp[len(prompt_ids) - 1 : len(prompt_ids) - 1 + n].gather(1, targets[:, None]).sum().item() / n


def test_log_ppl_against_an_independent_forward(trainer, tiny_model_dir, tiny_tokenizer):
    tok = tiny_tokenizer
    reference = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
        for q in ("What is 6 * 7?", "How much in dollars does she make every day? Use at most 128 tokens.")
    ] + ["Q"]
    prompt_ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    completion_ids = [
        tok("<think> so 6 * 7 = 42 </think> The final answer is \\boxed{42}")["input_ids"],
        [],  # empty answer: None (the score's 0), no NaN
        tok("then 5")["input_ids"],
    ]
    assert len({len(p) for p in prompt_ids}) == 3  # left padding is exercised
    got = trainer.completion_log_ppl(trainer.model, prompt_ids, completion_ids)
    assert got[1] is None
    for i in (0, 2):
        assert got[i] == pytest.approx(independent_log_ppl(reference, prompt_ids[i], completion_ids[i], 0.7), abs=1e-4)


def test_uniform_model_gives_log_vocab(tiny_model_dir, tmp_path, tiny_tokenizer):
    # a model whose logits are all 0: every token has probability 1/V, so log ppl(a|q) = log ppl(a) = ln V, score 0
    sar = SARTrainer(
        model=tiny_model_dir,
        reward_funcs=[get_sar_reward()],
        args=tiny_config(tmp_path),
        train_dataset=make_dataset(4),
    )
    head = sar.model.get_output_embeddings()
    with torch.no_grad():
        head.weight.zero_()
        if head.bias is not None:
            head.bias.zero_()
    V = head.weight.shape[0]
    completion = tiny_tokenizer("The final answer is 42")["input_ids"]
    q = sar.completion_log_ppl(sar.model, [[5, 6, 7]], [completion])
    a = sar.completion_log_ppl(sar.model, [sar.standalone_prompt_ids([{"role": "user", "content": "x"}])], [completion])
    assert q[0] == pytest.approx(math.log(V), abs=1e-5) and a[0] == pytest.approx(math.log(V), abs=1e-5)
    assert sar_score(q[0], a[0]) == pytest.approx(0.0, abs=1e-5)


# ------------------------------------------------------------------------------------------- construction errors
def test_construction_errors(tiny_model_dir, tmp_path):
    def build(rewards, **overrides):
        return SARTrainer(
            model=tiny_model_dir, reward_funcs=rewards, args=tiny_config(tmp_path, **overrides),
            train_dataset=make_dataset(4),
        )  # fmt: skip

    with pytest.raises(ValueError, match="beta > 0"):  # no ref_model without beta
        build([correctness_reward, get_sar_reward(model="reference")])
    with pytest.raises(ValueError, match="disagree"):
        build([get_sar_reward(), get_sar_reward(model="reference")], beta=0.1)
    with pytest.raises(ValueError, match="sar_score"):  # a plain trainer does not provide the column
        EfficientGRPOTrainer(
            model=tiny_model_dir, reward_funcs=[correctness_reward, get_sar_reward()], args=tiny_config(tmp_path),
            train_dataset=make_dataset(4),
        )  # fmt: skip
    sar = build([correctness_reward, get_sar_reward(model="reference")], beta=0.1)
    assert sar.sar_model == "reference" and sar.ref_model is not None
    # a reference of another vocabulary (so another tokenizer) is refused
    config = AutoModelForCausalLM.from_pretrained(tiny_model_dir).config
    config.vocab_size += 8
    sar.ref_model = AutoModelForCausalLM.from_config(config)
    with pytest.raises(ValueError, match="vocabulary size"):
        sar._resolve_sar_model("reference")


# ----------------------------------------------------------------------------------------- trainer and recipe
class ScriptedSAR(SARTrainer, ScriptedGenerationMixin):
    """Scripted completions; the first row of every process batch is EOS alone, the shortest completion TRL passes
    (an empty list breaks TRL's own `_generate`; `completion_log_ppl` handles it, see above)."""

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        completions, logprobs = super()._generate_single_turn(
            prompt_ids, images, multimodal_fields, num_generations, has_tool_images
        )
        return [[self.processing_class.eos_token_id], *completions[1:]], logprobs


@pytest.mark.parametrize(
    "case, overrides, reused",
    [
        ("policy", {}, False),  # TRL computes no old log-probs (aligned steps): two extra passes
        ("policy", {"num_iterations": 2}, True),  # TRL's old_per_token_logps are reused for ppl(a|q)
        ("reference", {"beta": 0.1}, True),  # TRL's ref_per_token_logps are reused
        ("plain-text", {}, False),
    ],
)
def test_trainer_columns_from_the_recipe(case, overrides, reused, tiny_model_dir, tmp_path):
    T = 0.1  # a low temperature sharpens the tiny random model, so the two perplexities differ visibly
    recipe = get_recipe("sar")
    model = "reference" if case == "reference" else "policy"
    args = tiny_config(
        tmp_path, max_steps=2 if case == "reference" else 1, temperature=T, per_device_train_batch_size=8,
        reward_kwargs={"sar": {"model": model}},
        **recipe.config_overrides, **overrides,
    )  # fmt: skip
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    funcs, weights = recipe.build_reward_funcs(args, tok)
    assert weights == [1.0, 1.0] and funcs[1].alpha == 0.2 and args.loss_type == "dr_grpo"
    seen = []

    def spy(prompts, completions, completion_ids, sar_score, sar_log_ppl_qa, sar_log_ppl_a, **kwargs):
        seen.append((prompts, completion_ids, sar_score, sar_log_ppl_qa, sar_log_ppl_a))
        return [0.0] * len(completions)

    dataset = make_dataset(8)
    if case == "plain-text":
        dataset = Dataset.from_dict({"prompt": [p[0]["content"] for p in dataset["prompt"]], **{
            k: dataset[k] for k in ("solution", "idx")}})  # fmt: skip
    assert recipe.trainer_cls is SARTrainer
    trainer = ScriptedSAR(model=tiny_model_dir, reward_funcs=[*funcs, spy], args=args, train_dataset=dataset)
    assert isinstance(trainer, SARTrainer) and trainer.sar_model == model
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()  # the weights at generation time
    trainer.train()
    assert seen and (trainer.sar_reused_logps > 0) == reused
    rows, scores_seen, eos_only = 0, [], 0
    for prompts, ids_list, scores, log_qa, log_a in seen:
        for prompt, ids, s, qa, a in zip(prompts, ids_list, scores, log_qa, log_a, strict=True):
            assert all(math.isfinite(v) for v in (s, qa, a))
            eos_only += ids == [tok.eos_token_id]
            if isinstance(prompt, str):
                q_ids = tok(prompt)["input_ids"]
                s_ids = [tok.eos_token_id]  # empty prompt -> EOS (tiny tokenizer: no BOS, "" has no token)
            else:
                q_ids = tok.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
                q_ids = tok(q_ids, add_special_tokens=False)["input_ids"]
                s_ids = tok("<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
                s_ids = s_ids["input_ids"]
            want_qa = independent_log_ppl(initial, q_ids, ids, T)
            want_a = independent_log_ppl(initial, s_ids, ids, T)
            assert qa == pytest.approx(want_qa, abs=1e-4) and a == pytest.approx(want_a, abs=1e-4)
            assert s == pytest.approx(by_hand(math.exp(want_qa), math.exp(want_a)), abs=1e-4)
            rows += 1
            scores_seen.append(s)
    if case == "reference":  # 2 steps: the second batch is scored by the frozen reference, not the moved policy
        assert len(seen) == 2
        prompt, ids, qa = seen[-1][0][1], seen[-1][1][1], seen[-1][3][1]
        q_text = tok.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        q_ids = tok(q_text, add_special_tokens=False)["input_ids"]
        assert abs(independent_log_ppl(trainer.model.eval(), q_ids, ids, T) - qa) > 1e-3
    assert eos_only >= 1 and rows >= 6 and max(abs(v) for v in scores_seen) > 0.01  # the scores are not all ~0
    logged = trainer.state.log_history[0]
    assert math.isfinite(logged["sar/score"]) and math.isfinite(logged["loss"])
