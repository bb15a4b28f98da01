"""
Tiny random models and tokenizers built in-process, so tests and the offline quickstart need no download.

- `build_tiny_tokenizer()`: a byte-level BPE trained in milliseconds on a fixed corpus, with a ChatML template
  (`<|im_end|>` ends a turn and is the EOS; `<|endoftext|>` pads on the left).
- `build_tiny_model(tokenizer)`: a randomly initialised Qwen2 (or Llama) `...ForCausalLM`, seeded.
- `save_tiny_model(dir)`: both, saved so that `AutoModelForCausalLM.from_pretrained(dir)` works offline (needed for
  `beta > 0`, vLLM and the CLI, which reload the model from its path).
- `resolve_tiny_model(name)` (the `tiny:` scheme of `trl_efficient.core.models.resolve_model_name`): turns
`"tiny:<arch>[-<hidden>]"` or `TINY_MODEL_NAME` into a cached local directory
  and passes every other name (Hub id, local path) through unchanged.
- `eos_bias_generation_kwargs(tokenizer)`: the EOS logit bias a random model needs to ever stop
  (docs/testing.md §4).

The default size, hidden 128 with 2 heads, gives `head_dim` 64, which the vLLM CPU attention backend accepts; for
the fastest unit tests use `hidden_size=16, num_heads=4` (about 11k parameters, HF `generate` only).
"""

import json
import logging
import os
import shutil
import tempfile

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.utils import logging as hf_logging

from ..core.models import MODEL_SCHEMES
from ..data.loaders import DEFAULT_INSTRUCTION

logger = logging.getLogger(__name__)

__all__ = [
    "CHATML_TEMPLATE",
    "DEFAULT_CORPUS",
    "TINY_MODEL_NAME",
    "build_tiny_model",
    "build_tiny_tokenizer",
    "eos_bias_generation_kwargs",
    "resolve_tiny_model",
    "save_tiny_model",
]

TINY_MODEL_NAME = "trl-efficient/tiny-random"

CHATML_TEMPLATE = (
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)

_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2

# Strings that tests and recipes put in prompts and completions, so they tokenise into a few pieces. Changing this
# list changes every tiny tokenizer (and so the cached tiny models): append, don't reorder.
DEFAULT_CORPUS: tuple[str, ...] = (
    DEFAULT_INSTRUCTION,
    "Solve the problem step by step, then answer.",
    "Let's think step by step. The final answer is \\boxed{42}.",
    "<think> short reasoning </think> The final answer is \\boxed{42}",
    "<think>\nOkay, I think I have finished thinking.\n</think>\n\n\\boxed{7}",
    "<think></think> \\boxed{} \\boxed{0} \\boxed{\\frac{1}{2}} \\fbox{3}",
    "<answer> 12 </answer>",
    "0123456789 + - * / = ( ) , . $ % ^ #### 18",
    "What is 2 + 3? The answer is 5. What is 7 * 6? The answer is 42. What is 12 - 4? It is 8.",
    "16 - 3 - 4 = 9 and 9 * 2 = 18 so 100 / 4 = 25 then 1,234 + 66 = 1,300",
    "Think for 512 tokens. Think for maximum 1024 tokens. Think for 128 tokens.",
    "I will answer the question with 1024 tokens. I will answer the question with 512 tokens.",
    "<think> I will answer the question with 256 tokens. I will answer the question with minimal tokens.",
    "Use at most 128 tokens. Use at most 2048 tokens. IMPORTANT: You should use exactly 64 tokens.",
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins with four.",
    "She sells the remainder at the farmers' market daily for $2 per fresh duck egg.",
    "How much in dollars does she make every day? How many apples does Tom have left?",
    "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take?",
    "Find $x$ if $2x + 3 = 11$. Let $f(x) = x^2 + 1$. Compute the sum, the product and the total cost.",
    "system user assistant You are a helpful assistant.",
)


def build_tiny_tokenizer(extra_corpus: list[str] | None = None, vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """
    A byte-level BPE tokenizer trained in-process, with a ChatML chat template (docs/testing.md §2.1).

    Any byte sequence round-trips, since the byte-level alphabet is always in the vocabulary. The result is
    deterministic for a given corpus. With the default corpus the vocabulary is smaller than `vocab_size` (the
    corpus limits the merges).

    Args:
        extra_corpus (`list[str]` or `None`, *optional*, defaults to `None`):
            Strings added to `DEFAULT_CORPUS`, so that they tokenise into few pieces.
        vocab_size (`int`, *optional*, defaults to `512`): upper bound on the vocabulary (tokens).

    >>> tok = build_tiny_tokenizer()
    >>> tok.eos_token, tok.pad_token, tok.padding_side, tok.convert_ids_to_tokens([0, 1, 2])
    ('<|im_end|>', '<|endoftext|>', 'left', ['<|endoftext|>', '<|im_start|>', '<|im_end|>'])
    >>> tok.apply_chat_template([{"role": "user", "content": "2 + 3?"}], tokenize=False, add_generation_prompt=True)
    '<|im_start|>user\\n2 + 3?<|im_end|>\\n<|im_start|>assistant\\n'
    >>> tok.decode(tok("<think> 7 * 6 = 42 </think> \\\\boxed{42}")["input_ids"])
    '<think> 7 * 6 = 42 </think> \\\\boxed{42}'
    """
    corpus = list(DEFAULT_CORPUS) + list(extra_corpus or [])
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus * 20, trainer=trainer)  # repeated so every pair clears min_frequency
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",  # the end of an assistant turn is the stop token
        pad_token="<|endoftext|>",
        padding_side="left",
        chat_template=CHATML_TEMPLATE,
    )
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    return tokenizer


_ARCHITECTURES = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}


def build_tiny_model(
    tokenizer: PreTrainedTokenizerFast,
    arch: str = "qwen2",
    hidden_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 2,
    num_kv_heads: int = 1,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 2048,
    seed: int = 0,
) -> PreTrainedModel:
    """
    A randomly initialised causal LM sized for CPU tests (docs/testing.md §2.2), float32, seeded.

    Its `generation_config` carries the tokenizer's EOS and pad ids and `do_sample=True`. A random model almost
    never samples EOS: pass `eos_bias_generation_kwargs(tokenizer)` to `generate` (or GRPO's `generation_kwargs`).

    Args:
        tokenizer: the tokenizer whose vocabulary, EOS and pad ids the model uses.
        arch (`str`, *optional*, defaults to `"qwen2"`): `"qwen2"` or `"llama"`.
        hidden_size (`int`, *optional*, defaults to `128`): with `num_heads=2`, `head_dim` is 64 (vLLM-CPU safe).
        num_layers (`int`, *optional*, defaults to `2`): decoder layers.
        num_heads (`int`, *optional*, defaults to `2`): attention heads; must divide `hidden_size`.
        num_kv_heads (`int`, *optional*, defaults to `1`): key/value heads (grouped-query attention).
        intermediate_size (`int` or `None`, *optional*, defaults to `2 * hidden_size`): MLP width.
        max_position_embeddings (`int`, *optional*, defaults to `2048`): context length in tokens (RoPE, so it
            costs no parameters; long enough for byte-level GSM8K prompts plus completions).
        seed (`int`, *optional*, defaults to `0`): initialisation seed; the global torch RNG is left untouched.

    >>> tok = build_tiny_tokenizer()
    >>> model = build_tiny_model(tok, hidden_size=16, num_heads=4)
    >>> type(model).__name__, model.config.head_dim, model.generation_config.eos_token_id == tok.eos_token_id
    ('Qwen2ForCausalLM', 4, True)
    """
    if arch not in _ARCHITECTURES:
        raise ValueError(f"Unknown tiny arch {arch!r}; choose one of {sorted(_ARCHITECTURES)}.")
    if hidden_size % num_heads or num_heads % num_kv_heads:
        raise ValueError(
            f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads}), and num_heads by "
            f"num_kv_heads ({num_kv_heads})."
        )
    config_cls, model_cls = _ARCHITECTURES[arch]
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=hidden_size // num_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):  # seeded init without disturbing the caller's RNG
        torch.manual_seed(seed)
        model = model_cls(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None, do_sample=True
    )
    return model


_TOKENIZER_KWARGS = ("extra_corpus", "vocab_size")
_MARKER_FILE = "trl_efficient_tiny.json"


def _holds_model(path: str) -> bool:
    if not os.path.isfile(os.path.join(path, "config.json")):
        return False
    files = os.listdir(path)
    has_weights = any(f.endswith((".safetensors", ".bin")) or f.endswith(".index.json") for f in files)
    return has_weights and "tokenizer_config.json" in files


def save_tiny_model(output_dir: str, **kwargs) -> str:
    """
    Build a tiny tokenizer and model and `save_pretrained` both into `output_dir`; return the directory.

    `kwargs` go to `build_tiny_tokenizer` (`extra_corpus`, `vocab_size`) and `build_tiny_model` (the rest).
    Idempotent: if `output_dir` already holds a model, it is returned as is, whatever `kwargs` say. The files are
    written to a temporary sibling directory and renamed into place, so concurrent ranks can call this safely.

    Example (run in `tests/test_tiny.py`; not a doctest because the first `save_pretrained` imports DeepSpeed when
    it is installed, which prints a notice to stdout)::

        path = save_tiny_model("/tmp/tiny-qwen2", hidden_size=16, num_heads=4)
        model = AutoModelForCausalLM.from_pretrained(path)  # offline
        tokenizer = AutoTokenizer.from_pretrained(path)
    """
    output_dir = os.path.abspath(os.path.expanduser(output_dir))
    if _holds_model(output_dir):
        return output_dir
    tokenizer_kwargs = {k: kwargs.pop(k) for k in _TOKENIZER_KWARGS if k in kwargs}
    tokenizer = build_tiny_tokenizer(**tokenizer_kwargs)
    model = build_tiny_model(tokenizer, **kwargs)

    save_pretrained_atomic(
        output_dir, model, tokenizer, _MARKER_FILE, {"tokenizer": tokenizer_kwargs, "model": kwargs}, _holds_model
    )
    logger.info("Saved tiny model to %s", output_dir)
    return output_dir


def _save_quietly(model, directory: str) -> None:
    """`model.save_pretrained(directory)` without transformers' "Writing model shards" bar (transformers 5.24 draws
    one even for a single shard): a tiny model built on first use inside a CLI command must not print to stderr,
    where a bad-input error is the one line a user reads. The bar setting is restored afterwards."""
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(directory)
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def save_pretrained_atomic(
    output_dir, model, tokenizer, marker_file: str, marker: dict, is_complete=None, replace: bool = False
) -> str:
    """`save_pretrained` model and tokenizer plus a JSON `marker_file` into a temporary sibling directory, then
    rename it into place, so concurrent processes (torchrun ranks, parallel tests) never see a half-written model.

    If `output_dir` already exists and is not empty: when `is_complete(output_dir)` holds, another process won the
    race (its copy is identical) and it is kept; else with `replace=True` (a cache directory we own) it is replaced;
    else the files are moved into it and nothing already there is deleted.
    """
    output_dir = os.path.abspath(os.path.expanduser(output_dir))
    parent = os.path.dirname(output_dir)
    os.makedirs(parent, exist_ok=True)
    tmp_dir = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(output_dir)}.tmp-")
    try:
        _save_quietly(model, tmp_dir)
        tokenizer.save_pretrained(tmp_dir)
        with open(os.path.join(tmp_dir, marker_file), "w") as f:
            json.dump(marker, f, indent=1, sort_keys=True)
        try:
            os.rename(tmp_dir, output_dir)  # atomic; replaces an empty directory
        except OSError:
            if is_complete is not None and is_complete(output_dir):
                pass
            elif replace:
                shutil.rmtree(output_dir)
                os.rename(tmp_dir, output_dir)
            else:
                for name in os.listdir(tmp_dir):
                    shutil.move(os.path.join(tmp_dir, name), os.path.join(output_dir, name))
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return output_dir


def _default_cache_root() -> str:
    return os.environ.get("TRL_EFFICIENT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "trl_efficient")


def _parse_tiny_spec(name: str) -> tuple[str, int]:
    spec = "" if name == TINY_MODEL_NAME else name[len("tiny:") :]
    arch, _, size = spec.strip().partition("-")
    arch = arch or "qwen2"
    try:
        hidden = int(size) if size else 128
    except ValueError:
        hidden = -1
    if arch not in _ARCHITECTURES or hidden <= 0:
        raise ValueError(
            f"Bad tiny model name {name!r}: expected 'tiny:<arch>[-<hidden_size>]' with arch in "
            f"{sorted(_ARCHITECTURES)}, e.g. 'tiny:qwen2' or 'tiny:llama-16'."
        )
    return arch, hidden


def _heads_for(hidden: int) -> int:
    if hidden % 64 == 0:
        return hidden // 64  # head_dim 64, as the vLLM CPU backend requires
    if hidden % 4 == 0:
        return 4
    raise ValueError(f"tiny hidden_size must be a multiple of 64 (head_dim 64) or of 4, got {hidden}.")


def resolve_tiny_model(name: str, cache_dir: str | None = None) -> str:
    """
    A local directory for tiny model names, the name itself otherwise.

    `"tiny:<arch>[-<hidden_size>]"` (e.g. `"tiny:"`, `"tiny:qwen2"`, `"tiny:llama-16"`) and `TINY_MODEL_NAME` (the
    default `"tiny:qwen2"`, hidden 128) are built once with `save_tiny_model` into
    `<cache_dir>/tiny-<arch>-<hidden_size>`; `cache_dir` defaults to `$TRL_EFFICIENT_CACHE` or
    `~/.cache/trl_efficient`. Heads: `hidden_size // 64` when it is a multiple of 64 (head_dim 64), else 4. Any
    other name (a Hub id such as `"Qwen/Qwen2.5-1.5B-Instruct"`, or a local path) is returned unchanged.

    >>> resolve_tiny_model("Qwen/Qwen2.5-Math-1.5B")
    'Qwen/Qwen2.5-Math-1.5B'
    """
    if not (name == TINY_MODEL_NAME or name.startswith("tiny:")):
        return name
    arch, hidden = _parse_tiny_spec(name)
    path = os.path.join(cache_dir or _default_cache_root(), f"tiny-{arch}-{hidden}")
    return save_tiny_model(path, arch=arch, hidden_size=hidden, num_heads=_heads_for(hidden))


def eos_bias_generation_kwargs(tokenizer, bias: float = 4.0) -> dict:
    """
    `generate` kwargs that add `bias` to the EOS logit, so a random model stops after a few tokens.

    Without it every completion of a tiny random model hits `max_completion_length`, length rewards have zero
    spread and GRPO learns nothing (docs/testing.md §4). Use a lower bias (2-3) for a small vocabulary.
    This is a transformers `generate` option only: pass it as `GRPOConfig(generation_kwargs=...)` **without**
    `use_vllm=True`, because vLLM's `SamplingParams` have no `sequence_bias` field.

    >>> eos_bias_generation_kwargs(build_tiny_tokenizer())
    {'sequence_bias': [[[2], 4.0]]}
    """
    if tokenizer.eos_token_id is None:
        raise ValueError("The tokenizer has no eos_token_id to bias.")
    return {"sequence_bias": [[[tokenizer.eos_token_id], float(bias)]]}


MODEL_SCHEMES.register("tiny", resolve_tiny_model)
