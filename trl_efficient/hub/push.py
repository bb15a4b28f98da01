"""`trl-efficient push OUTPUT_DIR --repo-id ORG/NAME`: upload a trained output directory to the Hugging Face Hub.

One commit through `huggingface_hub` (`HfApi.create_repo` + `create_commit`) with the model (or PEFT adapter) files
at the top of `OUTPUT_DIR`, `README.md` rendered again with the repo id (the training card, `hub.card.render_card`,
or the merge card of `trl-efficient merge`, `hub.merge.render_card`), the `trl-efficient eval` results and
`training_args.bin` with `hub_token` cleared (transformers pickles the whole config, token included). What is
uploaded, the license, the token checks and offline mode: docs/publish.md, "`trl-efficient push`".
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys

from ..core.errors import CommandParser
from .card import (
    CARD_DATA_FILE,
    EVAL_RESULTS_PATH,
    MERGE_DATA_FILE,
    RUN_FILES,
    CardDataError,
    base_model_license,
    choose_license,
    load_card_data,
    load_eval_results,
    mark_adapter,
    render_card,
)

logger = logging.getLogger(__name__)

__all__ = [
    "PushError",
    "build_parser",
    "collect_files",
    "main",
    "merge_info",
    "push",
    "sanitized_training_args",
]

TRAINING_ARGS_FILE = "training_args.bin"
TOKEN_FIELDS = ("hub_token", "push_to_hub_token")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")  # either one turns huggingface_hub offline
_SCAN_LIMIT = 64 * 1024 * 1024  # weights are larger and hold no text; every other file is searched for tokens


class PushError(RuntimeError):
    """A push that cannot go ahead; the message names what to change."""


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="trl-efficient push", description=__doc__.split("\n\n")[0])
    p.add_argument("output_dir", help="output directory of `trl-efficient train` (model, tokenizer, card data)")
    p.add_argument("--repo-id", required=True, help="target model repository, e.g. my-org/qwen-0.5b-hbpo")
    p.add_argument("--eval", default=None, help=f"`trl-efficient eval` results.json or its folder (default: "
                   f"OUTPUT_DIR/{EVAL_RESULTS_PATH} when present)")  # fmt: skip
    p.add_argument("--license", default=None, help="card license (default: the one the card was written with)")
    p.add_argument("--private", action="store_true", help="create the repository as private")
    p.add_argument("--revision", default=None, help="branch to commit to (default: main)")
    p.add_argument("--commit-message", default=None)
    p.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the stored login); never printed")
    return p


def _has_weights(folder: str) -> bool:
    """Full-model weights (not an adapter's) at the top of `folder`."""
    names = [n for n in os.listdir(folder) if not n.startswith("adapter_model")]
    return any(n.endswith((".safetensors", ".safetensors.index.json")) or n.startswith("pytorch_model") for n in names)


def _read_json(path: str, what: str, fix: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        raise PushError(f"{path}: not {what} ({err}); {fix}.") from err


def _adapter_config(folder: str) -> dict | None:
    """The `adapter_config.json` of a PEFT adapter saved in `folder` (config and weights), else `None`."""
    path = os.path.join(folder, ADAPTER_CONFIG)
    if not os.path.isfile(path) or not any(os.path.isfile(os.path.join(folder, w)) for w in ADAPTER_WEIGHTS):
        return None
    config = _read_json(path, "a readable adapter config", "save the adapter again")
    return config if isinstance(config, dict) else None


def merge_info(output_dir: str) -> dict | None:
    """The merge card data (`hub.merge.card_info`, plus `eval_model_refs` for a `lora` merge of a run) that
    `trl-efficient merge` saved in `output_dir`, else `None`."""
    path = os.path.join(output_dir, MERGE_DATA_FILE)
    if not os.path.isfile(path):
        return None
    merge = _read_json(path, "readable", "run `trl-efficient merge` again")
    if not isinstance(merge, dict) or not {"method", "models", "model_lines", "parameters"} <= set(merge):
        raise PushError(f"{path}: not written by this version of `trl-efficient merge`; run the merge again.")
    return merge


def _offline_variable() -> str | None:
    """The variable that turned huggingface_hub's offline mode on (read at its import), else `None`."""
    from huggingface_hub import constants

    if not constants.HF_HUB_OFFLINE:
        return None
    set_ = [v for v in OFFLINE_VARIABLES if os.environ.get(v, "").upper() in {"1", "ON", "YES", "TRUE"}]
    return set_[0] if set_ else "HF_HUB_OFFLINE"


def _offline_error(variable: str) -> PushError:
    return PushError(f"push needs the network and {variable} is set (Hugging Face Hub offline mode): unset "
                     f"{variable} and push again.")  # fmt: skip


def sanitized_training_args(path: str) -> tuple[bytes | None, list[str]]:
    """`(training_args.bin without tokens, the token values removed)`; `(None, [])` when the file cannot be read
    back (it is then not uploaded)."""
    import torch

    try:
        args = torch.load(path, weights_only=False)
    except Exception as exc:  # another library's or version's pickle: do not upload what we cannot check
        logger.warning("%s: cannot be read back (%s); it is not uploaded.", path, type(exc).__name__)
        return None, []
    removed = []
    for name in TOKEN_FIELDS:
        value = getattr(args, name, None)
        if value:
            removed.append(str(value))
            setattr(args, name, None)
    buffer = io.BytesIO()
    torch.save(args, buffer)
    return buffer.getvalue(), removed


def collect_files(output_dir: str, eval_path: str | None) -> tuple[dict[str, str | bytes], list[str]]:
    """`({path in repo: local path or bytes}, secrets)`: the top-level files of `output_dir` (not README.md, not
    the raw training_args.bin), the sanitized training arguments, and the evaluation summary files."""
    files: dict[str, str | bytes] = {}
    secrets: list[str] = []
    for name in sorted(os.listdir(output_dir)):
        path = os.path.join(output_dir, name)
        if not os.path.isfile(path) or name.startswith(".") or name.endswith(".tmp") or name == "README.md":
            continue
        if name == TRAINING_ARGS_FILE:
            content, removed = sanitized_training_args(path)
            secrets += removed
            if content is not None:
                files[name] = content
            continue
        files[name] = path
    if eval_path:
        folder = eval_path if os.path.isdir(eval_path) else os.path.dirname(eval_path)
        files["eval/results.json"] = eval_path if os.path.isfile(eval_path) else os.path.join(folder, "results.json")
        for extra in ("results.md", "pareto.png"):
            if os.path.isfile(os.path.join(folder, extra)):
                files[f"eval/{extra}"] = os.path.join(folder, extra)
    return files, secrets


def _check_no_secret(files: dict[str, str | bytes], secrets: list[str]) -> None:
    needles = [s.encode() for s in dict.fromkeys(secrets) if s and len(s) >= 8]
    for repo_path, content in files.items():
        if isinstance(content, str):
            if content.endswith(WEIGHT_SUFFIXES) and os.path.getsize(content) > _SCAN_LIMIT:
                continue
            with open(content, "rb") as f:
                content = f.read()
        if any(n in content for n in needles):
            raise PushError(f"{repo_path} contains a Hub token; remove it from the file before pushing.")


def push(
    output_dir: str,
    repo_id: str,
    eval_path: str | None = None,
    license: str | None = None,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    token: str | None = None,
) -> str:
    """Render the card and upload `output_dir` to `repo_id` in one commit; returns the commit URL."""
    from huggingface_hub import CommitOperationAdd, HfApi, get_token

    if not os.path.isdir(output_dir):
        raise PushError(f"{output_dir} is not a directory; give the output directory of `trl-efficient train`.")
    is_model = os.path.isfile(os.path.join(output_dir, "config.json")) and _has_weights(output_dir)
    adapter = None if is_model else _adapter_config(output_dir)
    if not is_model and adapter is None:
        raise PushError(
            f"{output_dir} has no model (config.json and weights) and no PEFT adapter (adapter_config.json and "
            "adapter_model.safetensors); train or save the model there first."
        )
    if eval_path is None and os.path.isfile(os.path.join(output_dir, EVAL_RESULTS_PATH)):
        eval_path = os.path.join(output_dir, EVAL_RESULTS_PATH)
    try:
        entries = load_eval_results(eval_path) if eval_path else None
    except ValueError as err:
        raise PushError(str(err)) from err
    merge = merge_info(output_dir)
    if merge is not None and not any(os.path.isfile(os.path.join(output_dir, n)) for n in RUN_FILES):
        readme, card_json, what = _merge_card(merge, repo_id, license, entries)
        card_file = MERGE_DATA_FILE
    else:
        data = load_card_data(output_dir)
        data.model_id = repo_id
        data.model_name = repo_id.split("/")[-1]
        if license or (not data.license and data.base_model):  # given; or unknown when saved (offline): look again
            data.license, data.license_text = base_model_license(None, data.base_model, license)
        card_json = data.to_json()  # the model's data, with the repo id (not this machine's path), as the run saved it
        if adapter is not None:
            mark_adapter(data, adapter)
        refs: tuple[str, ...] = ()
        if merge is not None:  # a `lora` merge of a run: the training card + how it was merged
            from .merge import merge_section

            data.tags = list(dict.fromkeys([*data.tags, "merge", merge["method"]]))
            refs = tuple(str(r) for r in merge.get("eval_model_refs") or [])
        card = render_card(data, entries, model_refs=(output_dir, repo_id, *refs))
        readme = str(card).rstrip("\n") + "\n"
        if merge is not None:
            readme += "\n" + merge_section(merge, repo_id)
        card_file, what = CARD_DATA_FILE, f"{data.recipe} {'adapter' if adapter is not None else 'model'}"
    files, secrets = collect_files(output_dir, eval_path)
    files["README.md"] = readme.encode("utf-8")
    files[card_file] = card_json.encode("utf-8")
    token = token or get_token()
    _check_no_secret(files, [*secrets, *([token] if token else [])])
    offline = _offline_variable()
    if offline:
        raise _offline_error(offline)
    from huggingface_hub.errors import OfflineModeIsEnabled

    api = HfApi(token=token)
    operations = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=c) for p, c in files.items()]
    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        info = api.create_commit(
            repo_id,
            operations,
            commit_message=commit_message or f"Upload {what} made with trl-efficient",
            revision=revision,
        )
    except OfflineModeIsEnabled as err:  # offline mode turned on after huggingface_hub was imported
        raise _offline_error(_offline_variable() or "HF_HUB_OFFLINE") from err
    except Exception as err:
        unreachable = network_error(err)
        if unreachable is None:
            raise
        raise PushError(
            f"the Hugging Face Hub at {api.endpoint} cannot be reached ({type(unreachable).__name__}: "
            f"{' '.join(str(unreachable).split())}): nothing was uploaded; check the network (or HF_ENDPOINT) and "
            "run the same push again"
        ) from err
    logger.info("pushed %d files of %s to %s", len(operations), output_dir, repo_id)
    return str(getattr(info, "commit_url", "") or repo_id)


def _merge_card(merge: dict, repo_id: str, license: str | None, entries) -> tuple[str, str, str]:
    """`(README.md, trl_efficient_merge.json, what)` of a model merged by `trl-efficient merge` (not from a run):
    the merge card rendered again with the repo id, `license` (`--license`) over the one the merge found."""
    from .merge import render_card as render_merge_card

    if license:
        merge = {**merge}
        merge["license"], merge["license_text"] = choose_license({}, license)
    readme = render_merge_card(merge, repo_id, entries)
    return readme, json.dumps(merge, indent=1, ensure_ascii=False), f"{merge['method']} merge"


NETWORK_ERROR_WORDS = ("Connect", "Timeout", "Network", "NameResolution", "ProtocolError", "RemoteProtocol")


def network_error(err: BaseException) -> BaseException | None:
    """The exception in `err`'s chain that says the server could not be reached (connection refused, DNS, timeout:
    `ConnectionError`/`TimeoutError`, or an httpx/httpcore/requests/urllib3 error so named), else None. An HTTP
    answer (401, 404, ...) is not one."""
    import socket

    seen, depth = err, 0
    while seen is not None and depth < 10:
        kind = type(seen)
        if isinstance(seen, (ConnectionError, TimeoutError, socket.gaierror)):
            return seen
        if kind.__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3") and any(
            word in kind.__name__ for word in NETWORK_ERROR_WORDS
        ):
            return seen
        seen, depth = seen.__cause__ or seen.__context__, depth + 1
    return None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    options = dict(vars(args))  # the parser's options are `push`'s keywords, but for --eval (`eval_path`)
    try:
        url = push(options.pop("output_dir"), options.pop("repo_id"), eval_path=options.pop("eval"), **options)
    except (PushError, CardDataError) as err:
        print(f"trl-efficient push: error: {err}", file=sys.stderr)
        return 2
    print(f"trl-efficient push: {args.output_dir} -> {args.repo_id} ({url})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
