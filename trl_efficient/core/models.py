"""Model names: a Hub id or a local path passes through; `<scheme>:<spec>` names are built locally by the scheme
registered under `<scheme>` (`tiny:` by `trl_efficient.testing.tiny`, `testbed:` by `trl_efficient.overthinking`; each
registers when its module is imported, and `MODEL_SCHEMES` names both packages as its providers, so a lookup imports
them when it needs to: `core.registry`).

Loading: `load_tokenizer` turns a name that does not resolve (not cached while `HF_HUB_OFFLINE=1`, no such directory,
no such Hub id) into a one-line `ModelUnavailableError` (`model_lookup_error`); `model_init_kwargs` and
`check_quantization` read TRL's `ModelConfig` for the trainer, which loads the policy itself (TRL's
`create_model_from_path`).

>>> resolve_model_name("Qwen/Qwen2.5-Math-1.5B")
'Qwen/Qwen2.5-Math-1.5B'
>>> MODEL_SCHEMES.register("echo", lambda name, cache_dir=None: name.upper())  # doctest: +ELLIPSIS
<function <lambda> at ...>
>>> resolve_model_name("echo:x")
'ECHO:X'
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from .registry import Registry

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "MODEL_SCHEMES",
    "ModelUnavailableError",
    "check_quantization",
    "load_tokenizer",
    "model_lookup_error",
    "model_init_kwargs",
    "model_scheme",
    "resolve_model_name",
]

# scheme -> resolver(name, cache_dir=None) -> local directory of the built (or cached) model
MODEL_SCHEMES: Registry[Callable[..., str]] = Registry(
    "model name scheme", providers=("trl_efficient.testing", "trl_efficient.overthinking")
)


def model_scheme(name: str) -> str | None:
    """The registered scheme of `name` (`"tiny"` for `"tiny:qwen2"`), or `None` for Hub ids and paths."""
    scheme, sep, _ = str(name).partition(":")
    return scheme if sep and scheme in MODEL_SCHEMES else None


def resolve_model_name(name: str, cache_dir: str | None = None) -> str:
    """A local directory for a registered `<scheme>:<spec>` name (built once, cached), else `name` unchanged."""
    scheme = model_scheme(name)
    return name if scheme is None else MODEL_SCHEMES.get(scheme)(name, cache_dir)


class ModelUnavailableError(ValueError):
    """A model name that cannot be loaded as given (not in the local cache while offline, no such Hub id or
    directory). A `ValueError`, so `trl-efficient` prints it as one line and exits 2."""


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def load_tokenizer(name: str, cache_dir: str | None = None, **kwargs) -> PreTrainedTokenizerBase:
    """The tokenizer of `name` (a `<scheme>:<spec>` name is built first); a name that cannot be found raises
    `ModelUnavailableError` naming it, and the offline setting when `HF_HUB_OFFLINE=1` is what stops the download."""
    from transformers import AutoTokenizer

    path = resolve_model_name(name, cache_dir)
    try:
        return AutoTokenizer.from_pretrained(path, **kwargs)
    except OSError as err:
        lookup = model_lookup_error(err, name)
        if lookup is None:
            raise
        raise lookup from err


# huggingface_hub errors that mean "this name does not resolve to a model", as opposed to I/O failures
_LOOKUP_ERRORS = (
    "LocalEntryNotFoundError",
    "HFValidationError",
    "RepositoryNotFoundError",
    "RevisionNotFoundError",
    "EntryNotFoundError",
    "GatedRepoError",
    "OfflineModeIsEnabled",
)


def model_lookup_error(err: BaseException, name: str | None = None) -> ModelUnavailableError | None:
    """A one-line `ModelUnavailableError` for a model name that does not resolve (the Hub lookup failed, offline or
    not; a path that does not exist), naming `name` and what to change; `None` for other errors (disk, network...,
    and, when no `name` is given, a Hub API request that offline mode refused: not a model lookup).
    transformers raises these as `OSError`s chained from huggingface_hub's errors."""
    chain, seen = [], err
    while seen is not None and len(chain) < 10:
        chain.append(type(seen).__name__)
        seen = seen.__cause__ or seen.__context__
    found = {kind for kind in chain if kind in _LOOKUP_ERRORS}
    if not found or (name is None and found == {"OfflineModeIsEnabled"}):
        # No lookup error; or, with no model name, a Hub request refused by offline mode alone (`create_repo` of
        # `push`...): a file lookup of a model missing from the cache fails with `LocalEntryNotFoundError` too.
        return None
    what = f"model {name!r}" if name else f"the model ({_first_line(err)})"
    if name and missing_model_dir(name) is not None:
        return missing_model_dir(name)
    if _offline():
        target = name or "<id>"
        return ModelUnavailableError(
            f"{what} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 forbids downloading it: download "
            f"it first (`hf download {target}`) or unset HF_HUB_OFFLINE, or pass a local directory instead"
        )
    detail = f" ({_first_line(err)})" if name else ""
    return ModelUnavailableError(f"cannot find {what}{detail}: pass a Hub id you can access or a local directory")


def missing_model_dir(name: str, flag: str = "--model_name_or_path") -> ModelUnavailableError | None:
    """The error for a model name written as a local path (`/`, `.`, `~`) that is not a directory, else `None`;
    checked before anything is loaded, since the Hub would otherwise reject the path as a malformed repo id.

    >>> str(missing_model_dir("/no/such/dir", "--model"))
    "model '/no/such/dir': no such directory; pass --model <an existing directory or a Hub id>"
    >>> missing_model_dir("Qwen/Qwen2.5-0.5B") is None
    True

    An existing directory that holds no model (no `config.json`, no `adapter_config.json`) is refused the same way.
    """
    if name.startswith(("/", ".", "~")) and not os.path.isdir(os.path.expanduser(name)):
        return ModelUnavailableError(
            f"model {name!r}: no such directory; pass {flag} <an existing directory or a Hub id>"
        )
    path = os.path.expanduser(name)
    if os.path.isdir(path) and not any(os.path.isfile(os.path.join(path, f)) for f in MODEL_CONFIG_FILES):
        # transformers would otherwise fail on the tokenizer, with a message about sentencepiece
        return ModelUnavailableError(
            f"model {name!r}: a directory without a model (no config.json or adapter_config.json); pass {flag} <a "
            "model directory (a run's output_dir or one of its checkpoint-N folders) or a Hub id>"
        )
    return None


MODEL_CONFIG_FILES = ("config.json", "adapter_config.json")  # a model directory holds one of them


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def check_quantization(model_args) -> None:
    """Config-time checks of TRL's `ModelConfig` quantisation flags (`load_in_4bit` / `load_in_8bit`): bitsandbytes
    quantises the frozen base weights on a CUDA GPU, and only LoRA adapters train on top (TRL's field help: "Works
    only with LoRA"). Raises a one-line `ValueError` naming what to change."""
    flag = "--load_in_4bit" if model_args.load_in_4bit else "--load_in_8bit" if model_args.load_in_8bit else None
    if flag is None:
        return
    import torch

    if not torch.cuda.is_available():
        raise ValueError(
            f"{flag} needs a CUDA GPU (bitsandbytes quantisation) and this machine has none: drop {flag} to train "
            "the model unquantised on CPU"
        )
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ValueError(f"{flag} needs the bitsandbytes package: `pip install bitsandbytes`, or drop {flag}")
    if not model_args.use_peft:
        raise ValueError(f"{flag} quantises the frozen base model, so it trains only LoRA adapters: add --use_peft")


def model_init_kwargs(model_args, trust_remote_code: bool = False, overrides: dict | None = None) -> dict:
    """`from_pretrained` keyword arguments from TRL's `ModelConfig`, as TRL's own `trl grpo` script builds them
    (trl/scripts/grpo.py, TRL 1.16): `revision`, `trust_remote_code`, `attn_implementation` and `dtype`, then the
    config's `model_init_kwargs` on top (a YAML's `model_init_kwargs: {dtype: bfloat16}` wins over `--dtype`).
    Quantisation goes to the trainer as `quantization_config` (TRL's `get_quantization_config`), and TRL's
    `create_model_from_path` picks the device map.

    >>> from trl import ModelConfig
    >>> model_init_kwargs(ModelConfig(dtype="bfloat16", attn_implementation="sdpa"), overrides={"dtype": "float32"})
    {'revision': 'main', 'trust_remote_code': False, 'attn_implementation': 'sdpa', 'dtype': 'float32'}
    """
    kwargs = dict(
        revision=model_args.model_revision,
        trust_remote_code=trust_remote_code,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
    )
    kwargs.update(overrides or {})
    return kwargs
