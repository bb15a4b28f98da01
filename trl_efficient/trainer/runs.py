"""Run directories: a rerun of `trl-efficient train` into an `output_dir` that already holds a run resumes it or is
refused, never silently restarted over it (docs/cli.md, "Resume").

`decide_resume` runs at config time (before any model loads) and returns the checkpoint to pass to the Trainer's own
`train(resume_from_checkpoint=...)`, or None for a new run: `--resume_from_checkpoint true` (`yes`/`1`) is the last
complete checkpoint, `false` none, anything else a checkpoint folder; with no flag, the last complete checkpoint
(transformers' `get_last_checkpoint`, else the newest complete one by `sort_checkpoints`) when the settings recorded
in `trl_efficient_run.json` match this command's but for `RESUMABLE_CHANGES`. Refused, in one line naming the command
to use: other settings, a finished run (unless a larger `--max_steps` trains it further), a trained model without a
checkpoint (`save_strategy: no`).

A checkpoint is complete when the Trainer wrote `trainer_state.json` in it (transformers writes it after the weights,
optimizer and RNG states) and, for this package's trainer, `trl_efficient_state.json` (written after it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

from transformers.trainer_utils import get_last_checkpoint, sort_checkpoints

from ..core.checks import check_writable
from .state import STATE_FILE

logger = logging.getLogger("trl_efficient")

__all__ = [
    "BEFORE_EVAL_FILE",
    "RESUMABLE_CHANGES",
    "RUN_FILE",
    "checkpoint_step",
    "decide_resume",
    "last_complete_checkpoint",
    "run_settings",
    "write_run_settings",
]

RUN_FILE = "trl_efficient_run.json"  # the settings of the run in output_dir, written when it starts
BEFORE_EVAL_FILE = "trl_efficient_eval_before.json"  # the before-training evaluation, read back by a resume
TRAINER_STATE = "trainer_state.json"  # transformers' TRAINER_STATE_NAME
MODEL_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "adapter_model.safetensors")
SUMMARY_FILE = "trl_efficient_summary.json"  # hub.card.SUMMARY_FILE (the hub layer sits below; same name)

# Settings a resume may change: how long to train, how and where to save, log and push, the evaluation extras, and
# the device and dataloader plumbing. Every other setting (the recipe, the model, the data, every optimisation and
# method setting) must equal the recorded run's for a rerun to resume it without being asked.
RESUMABLE_CHANGES = frozenset(
    {
        "resume_from_checkpoint", "output_dir", "run_name", "max_steps", "num_train_epochs",
        "save_strategy", "save_steps", "save_total_limit", "save_only_model", "save_on_each_node",
        "logging_steps", "logging_strategy", "logging_first_step", "log_level", "log_level_replica",
        "log_completions", "num_completions_to_print", "report_to", "project", "trackio_space_id",
        "trackio_bucket_id", "trackio_static_space_id", "disable_tqdm", "push_to_hub", "hub_model_id", "hub_strategy",
        "hub_token", "hub_private_repo", "hub_always_push", "hub_revision", "eval_before_after", "eval_max_new_tokens",
        "smoke_run", "dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers",
        "dataloader_prefetch_factor", "local_rank", "ddp_timeout", "use_cpu", "skip_memory_metrics",
    }
)  # fmt: skip
TRUE, FALSE = ("true", "yes", "1"), ("false", "no", "0", "")


def run_settings(*configs) -> dict:
    """The settings of a run as one JSON-able mapping, from its parsed dataclasses (`TrainingArguments.to_dict()` for
    the trainer config, which hides the Hub token; `dataclasses.asdict` for the others); a later config's field wins
    over an earlier one's of the same name. Values that JSON cannot hold become their `str`."""
    settings = {}
    for config in configs:
        settings.update(config.to_dict() if hasattr(config, "to_dict") else dataclasses.asdict(config))
    return json.loads(json.dumps(settings, default=str))


def write_run_settings(output_dir: str, settings: dict) -> str:
    """Write `settings` to `output_dir/trl_efficient_run.json` (creating the folder) atomically, so that the other
    processes of a launch, reading it in `decide_resume` meanwhile, see the old file or the new one; returns the
    path."""
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, RUN_FILE)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path


def _complete(checkpoint: str) -> bool:
    """The Trainer finished writing `checkpoint` (see the module docstring)."""
    return all(os.path.isfile(os.path.join(checkpoint, name)) for name in (TRAINER_STATE, STATE_FILE))


def checkpoint_step(checkpoint: str) -> tuple[int, int]:
    """`(global_step, max_steps)` from a checkpoint's `trainer_state.json`."""
    with open(os.path.join(checkpoint, TRAINER_STATE), encoding="utf-8") as f:
        state = json.load(f)
    return int(state.get("global_step", 0)), int(state.get("max_steps", 0))


def last_complete_checkpoint(output_dir: str) -> str | None:
    """The last complete checkpoint folder of `output_dir`, or None: transformers' `get_last_checkpoint`, else (the
    last one was cut off while saving) the newest complete one in transformers' `sort_checkpoints` order."""
    if not os.path.isdir(output_dir):
        return None
    last = get_last_checkpoint(output_dir)
    if last is None or _complete(last):
        return last
    complete = [path for path in sort_checkpoints(output_dir) if _complete(path)]
    return complete[-1] if complete else None


def _differences(recorded: dict, settings: dict) -> list[str]:
    """`key: <recorded> there, <now> now` for every setting outside `RESUMABLE_CHANGES` that differs."""
    keys = sorted((set(recorded) | set(settings)) - RESUMABLE_CHANGES)
    return [
        f"{k}: {recorded.get(k)!r} there, {settings.get(k)!r} now" for k in keys if recorded.get(k) != settings.get(k)
    ]


def _flag(value) -> str | bool | None:
    """`--resume_from_checkpoint` as given: True (the last), None (none) or a path."""
    if value is None or isinstance(value, bool):
        return value or None
    text = str(value).strip()
    return True if text.lower() in TRUE else None if text.lower() in FALSE else text


def _recorded(output_dir: str) -> dict | None:
    """The settings recorded in `output_dir/trl_efficient_run.json`, or None."""
    path = os.path.join(output_dir, RUN_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _refuse_finished(output_dir: str, checkpoint: str, settings: dict) -> None:
    """Refuse to resume a finished run from `checkpoint` unless this command trains it further: a finished run is the
    last step's checkpoint (the Trainer always saves it) and the summary written after training; resuming it with no
    step left would train nothing and write over its model (issue 47), whether asked by a plain rerun or by
    `--resume_from_checkpoint`."""
    step, max_steps = checkpoint_step(checkpoint)
    recorded = _recorded(output_dir)
    finished = os.path.isfile(os.path.join(output_dir, SUMMARY_FILE)) and step >= max_steps > 0
    longer = int(settings.get("max_steps") or -1) > step or (
        recorded is not None and settings.get("num_train_epochs") != recorded.get("num_train_epochs")
    )
    if finished and not longer:
        name = os.path.basename(os.path.normpath(checkpoint))
        raise ValueError(
            f"{output_dir} holds a finished run ({name}, step {step} of {max_steps}; its model and summary are "
            f"there): to train it further pass --max_steps <more than {step}> (it resumes from {name}), or "
            "--output_dir <a new folder> for a new run"
        )


def decide_resume(output_dir: str, resume_from_checkpoint, settings: dict) -> str | None:
    """The checkpoint this run resumes from, or None for a new run; raises `ValueError` (one line, naming what to pass)
    to refuse. See the module docstring for the rules. `settings`: this command's `run_settings`."""
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise ValueError(f"--output_dir {output_dir} is a file, not a folder: pass --output_dir <a new folder>")
    check_writable("--output_dir", output_dir, folder=True)  # before any model loads, not at the first save
    asked = _flag(resume_from_checkpoint)
    if isinstance(asked, str):
        if not (os.path.isdir(asked) and _complete(asked)):
            what = "is not a complete checkpoint (no trainer_state.json)" if os.path.isdir(asked) else "does not exist"
            raise ValueError(
                f"--resume_from_checkpoint {asked} {what}: pass a checkpoint-N folder the Trainer saved, or "
                f"--resume_from_checkpoint true to resume from the last one in {output_dir}"
            )
        _refuse_finished(output_dir, asked, settings)
        logger.info("trl-efficient: resuming from %s (step %d), as --resume_from_checkpoint asks", asked,
                    checkpoint_step(asked)[0])  # fmt: skip
        return asked
    last = last_complete_checkpoint(output_dir)
    if asked is True:
        if last is None:
            raise ValueError(
                f"--resume_from_checkpoint true: {output_dir} holds no complete checkpoint to resume from; drop the "
                "flag to start a new run there"
            )
        _refuse_finished(output_dir, last, settings)
        logger.info("trl-efficient: resuming from %s (step %d), the last checkpoint of %s", last,
                    checkpoint_step(last)[0], output_dir)  # fmt: skip
        return last
    if last is None:
        if os.path.isdir(output_dir) and any(os.path.exists(os.path.join(output_dir, f)) for f in MODEL_FILES):
            raise ValueError(
                f"{output_dir} already holds a trained model and no checkpoint to resume from: pass --output_dir "
                "<a new folder> for a new run (or delete that one to train over it)"
            )
        return None
    step, max_steps = checkpoint_step(last)
    recorded = _recorded(output_dir)
    if recorded is not None:
        differences = _differences(recorded, settings)
        if differences:
            shown = "; ".join(differences[:3]) + (f"; and {len(differences) - 3} more" if len(differences) > 3 else "")
            raise ValueError(
                f"{output_dir} holds {os.path.basename(last)} of a run with other settings ({shown}): pass "
                f"--resume_from_checkpoint true to resume it with this command's settings, or --output_dir <a new "
                "folder> for a new run"
            )
    _refuse_finished(output_dir, last, settings)
    unchecked = "" if recorded is not None else f" (its settings were not recorded in {RUN_FILE}, so not compared)"
    logger.info("trl-efficient: resuming from %s (step %d of %d)%s; pass --output_dir <a new folder> for a new run",
                last, step, max_steps, unchecked)  # fmt: skip
    return last
