"""How a training run ends other than with its summary: `ExtraFailedError` (the model is saved, an extra after it
failed) and `InterruptedRunError` (Ctrl-C; the checkpoint to resume from). Light, so that `trl-efficient` catches them
without importing the pipeline."""

from __future__ import annotations


class ExtraFailedError(RuntimeError):
    """An extra after training (model card, push) failed; the trained model is already saved in `output_dir`."""

    def __init__(self, extra: str, output_dir: str, cause: BaseException) -> None:
        self.extra, self.output_dir, self.cause = extra, output_dir, cause
        super().__init__(
            f"{extra} failed ({type(cause).__name__}: {cause}); the trained model and its checkpoints are saved in "
            f"{output_dir}"
        )


class InterruptedRunError(Exception):
    """Ctrl-C during `trl-efficient train`: `main` prints one line naming the checkpoint to resume from."""

    def __init__(self, output_dir: str, argv: list[str] | None) -> None:
        import shlex

        from ..trainer.runs import checkpoint_step, last_complete_checkpoint

        last = last_complete_checkpoint(output_dir)
        if argv is None:  # `trl_efficient.train(...)`
            command = "the same trl_efficient.train(...) call"
        else:
            kept = [a for i, a in enumerate(argv) if not _is_resume_flag(argv, i)]
            command = f"trl-efficient train {shlex.join(kept)}".rstrip()
        if last is None:
            message = (
                f"interrupted before the first checkpoint of {output_dir}: nothing to resume from; `{command}` "
                "starts the run over"
            )
        else:
            message = f"interrupted; {last} (step {checkpoint_step(last)[0]}) is kept: `{command}` resumes from it"
        super().__init__(message)


def _is_resume_flag(argv: list[str], i: int) -> bool:
    """`argv[i]` is `--resume_from_checkpoint` (either spelling, `=value` too) or its value."""
    flags = ("--resume_from_checkpoint", "--resume-from-checkpoint")
    if argv[i] in flags or argv[i].startswith(tuple(f + "=" for f in flags)):
        return True
    return i > 0 and argv[i - 1] in flags
