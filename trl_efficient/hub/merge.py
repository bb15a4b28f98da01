"""`trl-efficient merge`: merge a base and a trained model (or a LoRA adapter into its base) into one loadable model
directory, with a card (README.md) saying how it was merged.

Methods (α is always the weight of the *trained* model: α = 0 gives the base, α = 1 the trained model); the
narrative, the released script's conventions and the card: docs/publish.md, "`trl-efficient merge`":

- `uniform`: `θ = (1 − α) θ_base + α θ_trained` per tensor (Lin et al., arXiv 2309.06256, §3; released
  `scripts/postprocess/weight_interpolation.py`).
- `layerwise`: HMA (same paper), `θ = (1 − α_b) θ_base + α_b θ_trained`, band `⌊3i / L⌋` (proposed default; 26
  layers split 9/9/8) or `--split-layers a,b` (the script's `merge_split`); embeddings (a tied head too) join the lower
  band, final norm and LM head the upper one (proposed default: the script gives them the global ratio).
- `update-selective`: DLER (arXiv 2510.15110; unpublished, methods.md §4's proposal), `θ = θ_base + M ⊙ (θ_trained −
  θ_base)`, `M` the `k = ⌈keep · n⌉` largest `|Δ|` per tensor (`torch.topk`; the ceiling is a proposed default),
  computed exactly as `where(M, θ_trained, θ_base)`.
- `lora`: PEFT `merge_and_unload` (`W + (α/r) B A`; Hu et al., arXiv 2106.09685); base from `adapter_config.json`
  unless `--base`.

One line each: the card's `base_model` holds Hub ids only, `license` only when the cards state one; a `lora` merge of a
trl-efficient run keeps its training card and `eval/` results (proposed default); float32 per tensor, cast to the
trained dtype, tied weights once; buffers, config and tokenizer are the trained model's; a grown vocabulary resizes
the base (`resize_base_vocabulary`); nothing is written unless everything is (`run_merge`, a staging folder).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from huggingface_hub import ModelCardData

from ..core.errors import CommandParser
from ..core.models import model_scheme, resolve_model_name
from .card import (
    EVAL_RESULTS_PATH,
    MERGE_DATA_FILE,
    RUN_FILES,
    card_label,
    choose_license,
    eval_results_metadata,
    eval_table,
    hub_cache_id,
    load_card_data,
    load_eval_results,
    model_license,
    own_entries,
    resolve_base_model,
)
from .card import render_card as render_training_card
from .papers import PAPERS, bibtex

if TYPE_CHECKING:  # torch loads when a merge runs, not for `trl-efficient merge --help`
    import torch

__all__ = [
    "METHODS",
    "MERGE_PAPERS",
    "MergeOptions",
    "card_info",
    "check_compatible",
    "describe_model",
    "keep_count",
    "layer_bands",
    "layerwise_merge",
    "main",
    "merge_lora",
    "merge_models",
    "merge_section",
    "render_card",
    "uniform_merge",
    "update_selective_merge",
]

METHODS = ("uniform", "layerwise", "update-selective", "lora")

# The paper of each merge method (titles and BibTeX: `hub.papers`, the one table of cited papers).
MERGE_PAPERS = {
    "uniform": "2309.06256",
    "layerwise": "2309.06256",
    "update-selective": "2510.15110",
    "lora": "2106.09685",
}

FORMULAS = {
    "uniform": "θ = (1 − α) θ_base + α θ_trained",
    "layerwise": "θ = (1 − α_b) θ_base + α_b θ_trained, b = band of the tensor (lower / middle / upper)",
    "update-selective": "θ = θ_base + M ⊙ (θ_trained − θ_base), M keeps the ⌈keep·n⌉ largest |Δ| of each tensor",
    "lora": "W = W_base + (lora_alpha / r) B A for every adapted module (PEFT merge_and_unload)",
}

BAND_NAMES = ("lower", "middle", "upper")
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|blocks|block|layer)\.(\d+)\.")
_SHOWN = 5  # tensors named in one error message


def _names(names: list[str]) -> str:
    more = f" (+{len(names) - _SHOWN} more)" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def check_compatible(base: Mapping[str, torch.Tensor], trained: Mapping[str, torch.Tensor]) -> None:
    """Raise one `ValueError` naming the tensors when the two state dicts differ in names or shapes."""
    only_base = sorted(set(base) - set(trained))
    only_trained = sorted(set(trained) - set(base))
    shapes = [
        f"{n} {tuple(base[n].shape)} vs {tuple(trained[n].shape)}"
        for n in base
        if n in trained and base[n].shape != trained[n].shape
    ]
    found = {"shapes differ (base vs trained)": shapes, "only in base": only_base, "only in trained": only_trained}
    problems = [f"{what}: {_names(names)}" for what, names in found.items() if names]
    if problems:
        raise ValueError(
            "the base and trained models do not match, so they cannot be merged: " + "; ".join(problems) + "."
        )


def resize_base_vocabulary(base_model, trained_model) -> tuple[int, int] | None:
    """A trained model whose vocabulary grew (tokens added during training, such as BudgetThinker's control tokens):
    resize the base's token embeddings to the trained model's rows with transformers' `resize_token_embeddings`, and
    copy the new rows (input embeddings, and the output embeddings when they are not tied) from the trained model,
    so every method merges the old rows and keeps the trained model's new ones (equal in both models, they merge to
    themselves). Returns `(base rows, trained rows)`, or None when the vocabulary did not grow (a smaller trained
    vocabulary is left to `check_compatible`)."""
    import torch

    old = base_model.get_input_embeddings().weight.shape[0]
    new = trained_model.get_input_embeddings().weight.shape[0]
    if new <= old:
        return None
    base_model.resize_token_embeddings(new, mean_resizing=False)
    with torch.no_grad():
        base_in, trained_in = base_model.get_input_embeddings(), trained_model.get_input_embeddings()
        base_in.weight[old:] = trained_in.weight[old:].to(base_in.weight.dtype)
        base_out, trained_out = base_model.get_output_embeddings(), trained_model.get_output_embeddings()
        if base_out is not None and trained_out is not None and base_out.weight is not base_in.weight:
            base_out.weight[old:] = trained_out.weight[old:].to(base_out.weight.dtype)
            if getattr(base_out, "bias", None) is not None and getattr(trained_out, "bias", None) is not None:
                base_out.bias[old:] = trained_out.bias[old:].to(base_out.bias.dtype)
    return old, new


def _average(base: torch.Tensor, trained: torch.Tensor, alpha: float) -> torch.Tensor:
    return ((1 - alpha) * base.float() + alpha * trained.float()).to(trained.dtype)


def uniform_merge(
    base: Mapping[str, torch.Tensor], trained: Mapping[str, torch.Tensor], alpha: float
) -> dict[str, torch.Tensor]:
    """`(1 − α) θ_base + α θ_trained` per tensor (arXiv 2309.06256 §3), in float32, cast to the trained dtype."""
    check_compatible(base, trained)
    return {n: _average(base[n], t, alpha) for n, t in trained.items()}


def layer_bands(names: list[str], split_layers: tuple[int, int] | None = None) -> dict[str, int]:
    """
    The HMA band (0 lower, 1 middle, 2 upper) of each parameter name, `names` in the model's parameter order.

    A decoder-layer tensor (`...layers.<i>.` / `h.<i>.` / `blocks.<i>.`) goes to band `⌊3i / L⌋`, or with
    `split_layers=(a, b)` to band 0 when `i ≤ a`, 1 when `a < i ≤ b`, else 2 (the released script's rule). Other
    tensors go to band 0 before the first layer tensor (embeddings), band 2 after it (final norm, head).

    >>> names = ["embed.weight", *[f"model.layers.{i}.w" for i in range(4)], "norm.weight", "lm_head.weight"]
    >>> list(layer_bands(names).values())
    [0, 0, 0, 1, 2, 2, 2]
    >>> list(layer_bands(names, split_layers=(0, 2)).values())
    [0, 0, 1, 1, 2, 2, 2]
    """
    index = {n: int(m.group(1)) for n in names if (m := _LAYER_RE.search(n))}
    if not index:
        raise ValueError(
            "layerwise merge: no decoder-layer tensors (named like `model.layers.<i>.`) in the model; "
            "use --method uniform."
        )
    num_layers = max(index.values()) + 1
    a, b = split_layers or (0, 0)
    if split_layers is not None and not 0 <= a < b < num_layers - 1:
        raise ValueError(
            f"--split-layers {a},{b}: need 0 <= a < b < {num_layers - 1} for a model with {num_layers} layers."
        )
    bands, seen_layer = {}, False
    for n in names:
        if n in index:
            seen_layer, i = True, index[n]
            bands[n] = (0 if i <= a else 1 if i <= b else 2) if split_layers else (3 * i) // num_layers
        else:
            bands[n] = 2 if seen_layer else 0
    return bands


def layerwise_merge(
    base: Mapping[str, torch.Tensor],
    trained: Mapping[str, torch.Tensor],
    ratios: tuple[float, float, float],
    split_layers: tuple[int, int] | None = None,
) -> dict[str, torch.Tensor]:
    """HMA (arXiv 2309.06256): `(1 − α_b) θ_base + α_b θ_trained` with `b = layer_bands(...)[name]`; `trained` in
    the model's parameter order."""
    check_compatible(base, trained)
    bands = layer_bands(list(trained), split_layers)
    return {n: _average(base[n], t, ratios[bands[n]]) for n, t in trained.items()}


def keep_count(numel: int, keep: float) -> int:
    """Entries an update-selective mask keeps in a tensor of `numel` entries: `⌈keep · numel⌉` (proposed default).

    >>> keep_count(7, 0.5), keep_count(8, 0.5), keep_count(1, 0.01), keep_count(10, 1.0)
    (4, 4, 1, 10)
    """
    return min(numel, math.ceil(keep * numel - 1e-9))


def update_selective_merge(
    base: Mapping[str, torch.Tensor], trained: Mapping[str, torch.Tensor], keep: float
) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """DLER update-selective merge (methods.md §4 proposal): per tensor, the `keep_count(n, keep)` entries with the
    largest `|θ_trained − θ_base|` take the trained value, the rest the base value. Returns (merged, kept counts)."""
    import torch

    check_compatible(base, trained)
    merged, kept = {}, {}
    for n, t in trained.items():
        b = base[n].to(t.dtype)
        k = keep_count(t.numel(), keep)
        delta = (t.float() - b.float()).abs().flatten()
        mask = torch.zeros(t.numel(), dtype=torch.bool, device=t.device)
        mask[torch.topk(delta, k, sorted=False).indices] = True
        merged[n] = torch.where(mask.view(t.shape), t, b)
        kept[n] = k
    return merged, kept


def _looks_local(name: str) -> bool:
    """A path rather than a Hub id (`org/name`): absolute, `./`, `~`, or more than one `/`."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or os.path.isabs(name)


def _load_model(name: str, flag: str):
    from transformers import AutoModelForCausalLM

    path = resolve_model_name(name)
    if _looks_local(name) and not os.path.isdir(os.path.expanduser(path)):
        raise ValueError(f"{flag} {name}: no such model directory.")
    try:
        return AutoModelForCausalLM.from_pretrained(os.path.expanduser(path), dtype="auto")
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise ValueError(f"{flag} {name} could not be loaded as a causal LM ({type(err).__name__}: {first})") from err


def _save_tokenizer(sources: list[str], output: str) -> str | None:
    """Save the first loadable tokenizer of `sources` into `output`; return its source (None when none loads)."""
    from transformers import AutoTokenizer

    for source in sources:
        try:
            AutoTokenizer.from_pretrained(os.path.expanduser(resolve_model_name(source))).save_pretrained(output)
            return source
        except (OSError, ValueError, TypeError):
            continue
    return None


def merge_models(
    base: str,
    trained: str,
    output: str,
    method: str = "uniform",
    alpha: float = 0.5,
    ratios: tuple[float, float, float] | None = None,
    split_layers: tuple[int, int] | None = None,
    keep: float = 0.5,
    final: str | None = None,
) -> dict:
    """Merge `trained` with `base` by `method` (`uniform`, `layerwise`, `update-selective`) and save the result,
    the trained model's tokenizer and the card into `output`. Returns the card's parameters. `final`: the folder the
    card names when `output` is a staging folder moved there afterwards (`main`); default `output`."""
    import torch

    base_model, trained_model = _load_model(base, "--base"), _load_model(trained, "--trained")
    if base_model.config.model_type != trained_model.config.model_type:
        raise ValueError(
            f"architectures differ: base is {base_model.config.model_type!r}, trained is "
            f"{trained_model.config.model_type!r}; merge two checkpoints of the same model."
        )
    grown = resize_base_vocabulary(base_model, trained_model)  # added tokens (BudgetThinker's control tokens...)
    base_params = dict(base_model.named_parameters())  # tied weights appear once
    trained_params = dict(trained_model.named_parameters())
    params: dict = {}
    with torch.no_grad():
        if method == "uniform":
            merged = uniform_merge(base_params, trained_params, alpha)
            params = {"alpha": alpha}
        elif method == "layerwise":
            merged = layerwise_merge(base_params, trained_params, ratios, split_layers)
            bands = layer_bands(list(trained_params), split_layers)
            params = {"ratios": list(ratios), "bands": _describe_bands(bands, ratios)}
            if split_layers:
                params["split_layers"] = list(split_layers)
        elif method == "update-selective":
            merged, kept = update_selective_merge(base_params, trained_params, keep)
            total = sum(p.numel() for p in trained_params.values())
            params = {"keep": keep, "kept_entries": sum(kept.values()), "total_entries": total}
        else:
            raise ValueError(f"--method {method}: choose one of {', '.join(METHODS)}.")
        for n, p in trained_params.items():
            p.copy_(merged[n])
    if grown is not None:
        (rows_base, rows_trained), added = grown, grown[1] - grown[0]
        params["added_tokens"] = (
            f"the base's {rows_base} embedding rows resized to the trained model's {rows_trained}; the {added} new "
            "rows are the trained model's"
        )
    del base_model
    trained_model.save_pretrained(output)
    tokenizer_from = _save_tokenizer([trained, base], output)
    _write_card(output, card_info(method, [base, trained], params, tokenizer_from), final)
    return params


def _describe_bands(bands: dict[str, int], ratios) -> dict:
    layers: dict[int, set[int]] = {0: set(), 1: set(), 2: set()}
    others: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for n, b in bands.items():
        if m := _LAYER_RE.search(n):
            layers[b].add(int(m.group(1)))
        else:
            others[b].append(n)
    out = {}
    for b, name in enumerate(BAND_NAMES):
        parts = []
        if layers[b]:
            lo, hi = min(layers[b]), max(layers[b])
            parts.append(f"layers {lo}-{hi}" if hi > lo else f"layer {lo}")
        parts.extend(others[b])
        out[name] = {"ratio": ratios[b], "tensors": ", ".join(parts) or "none"}
    return out


def merge_lora(adapter: str, output: str, base: str | None = None, final: str | None = None) -> dict:
    """Merge the LoRA `adapter` into its base (`base`, else the adapter config's `base_model_name_or_path`) with
    PEFT's `merge_and_unload`, and save model, tokenizer and card into `output` (`final`: as in `merge_models`)."""
    from peft import PeftConfig, PeftModel

    if not os.path.isdir(os.path.expanduser(adapter)) and _looks_local(adapter):
        raise ValueError(f"--adapter {adapter}: no such adapter directory.")
    try:
        config = PeftConfig.from_pretrained(os.path.expanduser(adapter))
    except (OSError, ValueError) as err:
        raise ValueError(f"--adapter {adapter}: no PEFT adapter config could be read ({type(err).__name__}).") from err
    base = base or config.base_model_name_or_path
    if not base:
        raise ValueError(f"--adapter {adapter}: its config names no base model; pass --base.")
    model = PeftModel.from_pretrained(_load_model(base, "--base"), os.path.expanduser(adapter))
    merged = model.merge_and_unload()
    merged.save_pretrained(output)
    tokenizer_from = _save_tokenizer([adapter, base], output)
    params = {"adapter": adapter, "peft_type": str(config.peft_type.value if config.peft_type else "")}
    params.update({key: getattr(config, key) for key in ("r", "lora_alpha") if getattr(config, key, None) is not None})
    adapter_dir = os.path.expanduser(adapter)
    info = card_info("lora", [base, adapter], params, tokenizer_from)
    if os.path.isdir(adapter_dir) and _copy_run_files(adapter_dir, output):
        _write_training_card(output, info, adapter_dir, final)
    else:
        _write_card(output, info, final)
    return params


EVAL_FILES = ("results.json", "results.md", "pareto.png")


def _copy_run_files(adapter_dir: str, output: str) -> bool:
    """Copy the run's card data and evaluation results from `adapter_dir` into `output`; False when it has no
    card data (not a trl-efficient run)."""
    present = [n for n in RUN_FILES if os.path.isfile(os.path.join(adapter_dir, n))]
    if not present:
        return False
    for name in present:
        shutil.copy2(os.path.join(adapter_dir, name), os.path.join(output, name))
    eval_dir = os.path.dirname(os.path.join(adapter_dir, EVAL_RESULTS_PATH))
    for name in EVAL_FILES:
        if os.path.isfile(os.path.join(eval_dir, name)):
            os.makedirs(os.path.join(output, "eval"), exist_ok=True)
            shutil.copy2(os.path.join(eval_dir, name), os.path.join(output, "eval", name))
    return True


def describe_model(name: str) -> tuple[str | None, str]:
    """`(Hub id or None, Markdown)` naming one source model of a merge on its card: a Hub id (or Hub-cache snapshot)
    is linked; a local directory whose card names a Hub base (`hub.card.resolve_base_model`) says so; a `tiny:` /
    `testbed:` name (`core.models.model_scheme`) or another local model is named as not on the Hub.

    >>> describe_model("Qwen/Qwen3-0.6B")
    ('Qwen/Qwen3-0.6B', '[Qwen/Qwen3-0.6B](https://huggingface.co/Qwen/Qwen3-0.6B)')
    >>> describe_model("tiny:qwen2")
    (None, '`tiny:qwen2`, an offline test model built by trl-efficient (not on the Hub)')
    """
    path = resolve_model_name(name) if model_scheme(name) is not None else name  # built: the merge loaded it
    hub_id, text = resolve_base_model(None, path)
    link = f"[{hub_id}](https://huggingface.co/{hub_id})" if hub_id else ""
    if hub_id and (hub_id == name or hub_cache_id(name) == hub_id):
        return hub_id, link
    if hub_id and ": " in text:  # a model trl-efficient built from a Hub model (its card's `trl_efficient_origin`)
        return hub_id, f"`{name}`, {text.split(': ', 1)[1].rstrip('.')}, whose base is {link}"
    if hub_id:
        return hub_id, f"`{name}`, a local model whose card names {link} as its base"
    if model_scheme(name) is not None:
        return None, f"`{name}`, an offline test model built by trl-efficient (not on the Hub)"
    return None, f"`{name}`, a local model (not on the Hub)"


def card_info(method: str, models: list[str], params: dict, tokenizer_from: str | None = None) -> dict:
    """Everything the merge card shows, as JSON (saved as `trl_efficient_merge.json`, re-rendered by `push`):
    method, the two models as given and described (`describe_model`), their Hub ids (`base_models`, the card's
    `base_model`: Hub ids only), parameters, tokenizer source, and the license their cards state
    (`hub.card.choose_license`)."""
    described = [describe_model(name) for name in models]
    paths = {name: resolve_model_name(name) if model_scheme(name) is not None else name for name in models}
    license, license_text = choose_license({card_label(name): model_license(paths[name]) for name in models})
    return {
        "method": method,
        "models": list(models),
        "model_lines": [text for _, text in described],
        "base_models": list(dict.fromkeys(hub_id for hub_id, _ in described if hub_id)),
        "parameters": params,
        "tokenizer": tokenizer_from,
        "license": license,
        "license_text": license_text,
    }


def _body(info: dict, model_id: str, with_license: bool = True) -> str:
    """`hub_cards/merge.md` rendered with `str.format` for `card_info(...)`; no empty part (no bands outside a
    layer-wise merge)."""
    method, params = info["method"], info["parameters"]
    second_role = "adapter" if method == "lora" else "trained model"
    bands = params.get("bands") or {}
    band_lines = "\n".join(f"- {name}: ratio {b['ratio']} — {b['tensors']}" for name, b in bands.items())
    if method == "lora":
        how = "The adapter was folded into the base model's weights by PEFT's `merge_and_unload`."
    else:
        how = (f"Every parameter tensor was merged once (tied weights are one tensor), in float32, and saved in the "
               f"dtype of the {second_role}.")  # fmt: skip
    tokenizer = info.get("tokenizer")
    arxiv = MERGE_PAPERS[method]
    template = resources.files("trl_efficient").joinpath("hub_cards/merge.md").read_text(encoding="utf-8")
    body = template.format(
        method=method,
        first=info["model_lines"][0],
        second=info["model_lines"][1],
        second_role=second_role,
        license_text=info.get("license_text") or "" if with_license else "",
        model_id=model_id,
        formula=FORMULAS[method],
        parameters="\n".join(f"- `{k}`: {v}" for k, v in params.items() if k != "bands"),
        bands=f"Layer bands (α of each band, and the tensors in it):\n\n{band_lines}" if band_lines else "",
        how=how,
        tokenizer=f"The tokenizer was copied from `{tokenizer}`."
        if tokenizer
        else "No tokenizer could be loaded from either model: save one into the model directory before use.",
        paper_title=PAPERS[arxiv].title,
        arxiv=arxiv,
        bibtex=bibtex(arxiv),
    )
    return re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"


def render_card(info: dict, model_id: str, eval_entries: list[dict] | None = None) -> str:
    """README.md of a merged model from `card_info(...)`: metadata (`base_model`: the Hub ids among the two models,
    left out when neither is on the Hub; `license` when their cards state one; tags, method and parameters;
    `model-index` from `trl-efficient eval` results of this model) and the body. `model_id`: the local directory,
    or the repo id when pushed."""
    entries = list(eval_entries or [])
    own = own_entries(entries, (model_id,))
    base_models = info.get("base_models") or []
    meta = ModelCardData(
        base_model=(base_models[0] if len(base_models) == 1 else base_models) or None,
        license=info.get("license") or None,
        library_name="transformers",
        model_name=os.path.basename(os.path.normpath(model_id)),
        pipeline_tag="text-generation",
        tags=["merge", "trl-efficient", info["method"]],
        eval_results=eval_results_metadata(own) or None,
        merge_method=info["method"],
        merge_parameters=info["parameters"],
    )
    body = _body(info, model_id)
    if entries:
        body += "\n## Evaluation\n\nResults of `trl-efficient eval`:\n\n" + eval_table(entries) + "\n"
    return f"---\n{meta.to_yaml()}\n---\n\n{body}"


def merge_section(info: dict, model_id: str) -> str:
    """The merge card's body (without title, license line and metadata) as a "How this model was merged" section
    of another card (the training card of a `lora` merge of a run), its headings one level down."""
    lines = _body(info, model_id, with_license=False).splitlines()[1:]  # the "# Merged model" title
    lines = ["#" + line if line.startswith("## ") else line for line in lines]
    return "## How this model was merged\n\n" + "\n".join(lines).strip() + "\n"


def _write_training_card(output: str, info: dict, adapter_dir: str, final: str | None = None) -> None:
    """README.md = the run's training card + `merge_section`; `trl_efficient_merge.json` for `push`. The card names
    `final` (default `output`)."""
    final = final or output
    section = merge_section(info, os.path.abspath(final))
    refs = [os.path.abspath(adapter_dir), info["models"][1]]
    with open(os.path.join(output, MERGE_DATA_FILE), "w", encoding="utf-8") as f:
        json.dump({**info, "eval_model_refs": refs}, f, indent=1, ensure_ascii=False)
    data = load_card_data(output)
    data.model_id = os.path.abspath(final)
    data.model_name = os.path.basename(os.path.normpath(final))
    data.tags = list(dict.fromkeys([*data.tags, "merge", "lora"]))
    results = os.path.join(output, EVAL_RESULTS_PATH)
    entries = load_eval_results(results) if os.path.isfile(results) else None
    card = render_training_card(data, entries, model_refs=(final, *refs))
    with open(os.path.join(output, "README.md"), "w", encoding="utf-8") as f:
        f.write(str(card).rstrip("\n") + "\n\n" + section)


def _write_card(output: str, info: dict, final: str | None = None) -> None:
    """README.md (the merge card, naming `final`, default `output`) and `trl_efficient_merge.json`, from which `push`
    renders it again."""
    with open(os.path.join(output, MERGE_DATA_FILE), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1, ensure_ascii=False)
    with open(os.path.join(output, "README.md"), "w", encoding="utf-8") as f:
        f.write(render_card(info, os.path.abspath(final or output)))


def _unit(text: str, flag: str, low_open: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r}: not a number.") from None
    if not (0 < value <= 1 if low_open else 0 <= value <= 1):
        raise ValueError(f"{flag} {text}: must be in {'(0, 1]' if low_open else '[0, 1]'}.")
    return value


@dataclass
class MergeOptions:
    """The options of `trl-efficient merge`, by name: its parser fills them from the command line (`main`) and
    `trl_efficient.merge` from its keywords; `run_merge` takes them. `ratios` and `split_layers` are the command's
    comma-separated text or a tuple of numbers; `alpha` and `keep` a number or its text.

    >>> MergeOptions(output="m", ratios=(0.2, 0.5, 0.8), alpha=1).ratios
    '0.2,0.5,0.8'
    """

    output: str | None = None
    method: str = "uniform"
    base: str | None = None
    trained: str | None = None
    adapter: str | None = None
    alpha: str = "0.5"
    ratios: str | None = None
    split_layers: str | None = None
    keep: str = "0.5"

    def __post_init__(self) -> None:
        for name in ("ratios", "split_layers"):  # one comma-separated value on the command line
            if isinstance(getattr(self, name), (list, tuple)):
                setattr(self, name, ",".join(str(v) for v in getattr(self, name)))
        for name in ("output", "base", "trained", "adapter"):
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        if self.output is None:
            raise ValueError("merge needs an output directory: pass --output <a new directory>.")
        if self.method not in METHODS:
            raise ValueError(f"--method {self.method}: choose one of {', '.join(METHODS)}.")


def build_parser() -> CommandParser:
    """The parser of `trl-efficient merge`, which parses the command line into `MergeOptions` (`main`): it sets only
    what the command line gives (`argument_default=SUPPRESS`), the defaults are `MergeOptions`'."""
    parser = CommandParser(
        prog="trl-efficient merge",
        description="Merge a trained model with its base (uniform / layer-wise HMA / DLER update-selective), or a "
        "LoRA adapter into its base; writes a loadable model directory with a card.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("--method", choices=METHODS, help="default uniform")
    parser.add_argument("--base", help="base model (directory, Hub id or tiny:<arch>); for lora: default from adapter")
    parser.add_argument("--trained", help="trained model (not for lora)")
    parser.add_argument("--adapter", help="LoRA adapter directory (lora only)")
    parser.add_argument("--output", required=True, help="output directory (must be new or empty)")
    parser.add_argument("--alpha", help="uniform: weight of the trained model, in [0, 1] (0.5)")
    parser.add_argument("--ratios", help="layerwise: three weights of the trained model, lower,middle,upper band")
    parser.add_argument("--split-layers", help="layerwise: a,b — layers <= a lower, <= b middle (default thirds)")
    parser.add_argument("--keep", help="update-selective: fraction of entries kept per tensor (0.5)")
    return parser


def _validate(args: MergeOptions) -> dict:
    if os.path.isdir(args.output) and os.listdir(args.output):
        raise ValueError(f"--output {args.output}: not empty; choose a new directory.")
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise ValueError(f"--output {args.output}: a file, not a directory; pass --output <a new directory>.")
    parent = _existing_parent(args.output)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(
            f"--output {args.output}: {parent} is not writable; pass --output <a directory you can write>."
        )
    if args.method == "lora":
        if not args.adapter:
            raise ValueError("--method lora needs --adapter <adapter directory>.")
        if args.trained:
            raise ValueError("--method lora takes --adapter, not --trained.")
        return {}
    if not args.base or not args.trained:
        raise ValueError(f"--method {args.method} needs both --base and --trained.")
    if args.adapter:
        raise ValueError(f"--adapter is for --method lora, not {args.method}.")
    if args.method == "uniform":
        return {"alpha": _unit(args.alpha, "--alpha")}
    if args.method == "update-selective":
        return {"keep": _unit(args.keep, "--keep", low_open=True)}
    if not args.ratios:
        raise ValueError("--method layerwise needs --ratios lower,middle,upper (e.g. 0.2,0.5,0.8).")
    parts = args.ratios.split(",")
    if len(parts) != 3:
        raise ValueError(f"--ratios {args.ratios}: give three comma-separated weights (lower,middle,upper).")
    out = {"ratios": tuple(_unit(p.strip(), "--ratios") for p in parts)}
    if args.split_layers:
        try:
            a, b = (int(p) for p in args.split_layers.split(","))
        except ValueError:
            raise ValueError(f"--split-layers {args.split_layers}: give two layer indices a,b.") from None
        out["split_layers"] = (a, b)
    return out


def _existing_parent(path: str) -> str:
    """The nearest existing folder at or above `path`'s parent (where the output's folders will be created)."""
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    return parent


def _staged(output: str) -> str:
    """A staging folder in the nearest existing folder above `output` (no folder of the output's path is created
    before the merge is written); `_publish` moves it to `output`."""
    name = os.path.basename(os.path.normpath(os.path.abspath(output)))
    staging = os.path.join(_existing_parent(output), f".{name}.merging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    return staging


def _publish(staging: str, output: str) -> None:
    """Move the finished `staging` folder to `output` in one rename (an empty `output` folder is replaced)."""
    if os.path.isdir(output):
        os.rmdir(output)  # empty (checked by _validate); a folder that filled up since fails here, nothing lost
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    os.replace(staging, output)


def run_merge(args: MergeOptions) -> dict:
    """Run the merge `args` describes (`MergeOptions`) and return the card's parameters; a bad value raises
    `ValueError` naming the flag.

    Nothing is written unless everything is: the output path is checked first (`_validate`), the model, tokenizer
    and card are written into a staging folder beside it, and that folder is renamed to `--output` only once all
    of it is written; any failure removes it."""
    values = _validate(args)
    staging = _staged(args.output)
    try:
        if args.method == "lora":
            info = merge_lora(args.adapter, staging, base=args.base, final=args.output)
        else:
            info = merge_models(args.base, args.trained, staging, method=args.method, final=args.output, **values)
        _publish(staging, args.output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return info


def main(argv: list[str] | None = None) -> int:
    """`trl-efficient merge ...` (`run_merge`); returns 0, or 2 after one `trl-efficient merge: error: ...` line on
    stderr."""
    args = MergeOptions(**vars(build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))))
    try:
        run_merge(args)
    except ValueError as err:
        print(f"trl-efficient merge: error: {err}", file=sys.stderr)
        return 2
    print(f"merged ({args.method}) into {args.output}")
    return 0
