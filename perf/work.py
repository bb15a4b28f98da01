"""Exact, machine-independent counters of the work a training step does, for benchmarks (`perf/trainer_overhead.py`).

`WorkCounter` counts while it is active (a context manager). Two of its hooks outlive it: `wrap_rewards` swaps
each reward object's class for a timing subclass (made on the fly, so such a reward no longer pickles), and
`time_method` leaves a timing wrapper as an instance attribute; both only time, and count nothing once the counter
has exited. It counts:

- **generated tokens**: every `transformers` `generate` call (policy rollouts, refills, a reward's reference samples, a
  monitor's passes), the new tokens of each row up to and including its first EOS (what vLLM would decode), and the
  prompt tokens prefilled (non-padding);
- **forward tokens per pass**: every outermost forward of a `transformers.PreTrainedModel` outside `generate`, the
  tokens of its input ids (padding included: a forward computes them), labelled by the model's role (`policy`,
  `ref`, or its class name for any other model, e.g. Bingo's scorer), the grad mode (`train`: gradients recorded,
  the loss's forward; `no-grad`: old/reference log-probs, entropy, SAR and other signal passes) and the innermost
  `trl` / `trl_efficient` function that asked for it;
- **reward time**: seconds of CPU time (`time.process_time`) per reward function (`wrap_rewards`);
- **timed sections**: seconds spent in any method wrapped with `time_method` (the group stage).

It installs global module hooks (`torch.nn.modules.module.register_module_forward_pre_hook`) and patches
`GenerationMixin.generate` for its duration, so it costs time itself: count in a run of its own, time in others.

>>> import torch
>>> from trl_efficient.testing.tiny import build_tiny_model, build_tiny_tokenizer
>>> model = build_tiny_model(build_tiny_tokenizer(), hidden_size=16)
>>> counter = WorkCounter({"policy": model}, eos_token_ids=[])
>>> with counter, torch.no_grad():  # one pass of 2 x 5 tokens
...     _ = model(input_ids=torch.ones(2, 5, dtype=torch.long))
>>> counter.forward_tokens(), dict(counter.passes)
({'policy no-grad': 10}, {'policy no-grad (-)': 1})
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable

from transformers import TrainerCallback

__all__ = ["StepTimer", "WorkCounter", "bench_tiny_model", "run_arm_in_fresh_process"]


def bench_tiny_model(folder: str, hidden: int, layers: int, num_kv_heads: int | None = None) -> str:
    """The benchmarks' tiny random Qwen2 (`perf/lisa_memory.py`, `perf/brorl_memory.py`): `layers` decoder layers of
    width `hidden`, heads of 64 (4 heads below a width of 64), `num_kv_heads` (default: as many as heads), saved under
    the temporary directory's `folder` and reused; returns its path."""
    from trl_efficient.testing.tiny import save_tiny_model

    heads = max(1, hidden // 64) if hidden >= 64 else 4
    path = os.path.join(tempfile.gettempdir(), folder, f"qwen2-{hidden}x{layers}")
    return save_tiny_model(path, hidden_size=hidden, num_heads=heads, num_kv_heads=num_kv_heads or heads,
                           num_layers=layers)  # fmt: skip


def run_arm_in_fresh_process(script: str, args: list[str], tag: str, label: str) -> dict:
    """Run `python script *args` in a fresh process, so that its peak memory is its own, and return the JSON row it
    printed on its last stdout line starting with `tag` (the worker prints `tag + " " + json.dumps(row)`); a worker
    that fails or prints no row ends the benchmark with its exit status and the end of its stderr, naming `label`.

    >>> import os, tempfile
    >>> script = os.path.join(tempfile.mkdtemp(), "arm.py")
    >>> _ = open(script, "w").write("import sys; print('noise'); print('ROW', '{\\"n\\": %s}' % sys.argv[1])")
    >>> run_arm_in_fresh_process(script, ["3"], "ROW", "arm 3")
    {'n': 3}
    >>> run_arm_in_fresh_process(script, [], "ROW", "arm none")
    Traceback (most recent call last):
    SystemExit: arm none failed (exit 1):
    ...
    """
    done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, check=False)
    lines = [x for x in done.stdout.splitlines() if x.startswith(tag + " ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{label} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1].split(" ", 1)[1])


class StepTimer(TrainerCallback):
    """Seconds of every optimizer step (`on_step_begin` to `on_step_end`) in `durations`, CUDA kernels synchronised
    at both ends (they run asynchronously). The benchmarks in `perf/` time steps with it.

    `clock="wall"` (default) reads `time.perf_counter`; `clock="cpu"` reads this process's CPU time
    (`time.process_time`, all its threads): on a CPU-only run it is the step's own work, without the time the process
    waited for a core another process held, so paired step times vary far less on a shared machine (it is the wrong
    clock for a GPU step, whose kernels run off the process's CPU time).

    >>> StepTimer(clock="cpu").clock, StepTimer(clock="gpu")
    Traceback (most recent call last):
    ...
    ValueError: clock must be 'wall' or 'cpu', got 'gpu'.
    """

    CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}

    def __init__(self, clock: str = "wall") -> None:
        if clock not in self.CLOCKS:
            raise ValueError(f"clock must be 'wall' or 'cpu', got {clock!r}.")
        self.clock = clock
        self._now = self.CLOCKS[clock]
        self.durations: list[float] = []
        self._start: float | None = None

    @staticmethod
    def _synchronize() -> None:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def on_step_begin(self, args, state, control, **kwargs) -> None:
        self._synchronize()
        self._start = self._now()

    def on_step_end(self, args, state, control, **kwargs) -> None:
        self._synchronize()
        self.durations.append(self._now() - self._start)


def _caller() -> str:
    """`module.function` of the innermost `trl` / `trl_efficient` frame on the stack ("-" when none)."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith(("trl_efficient.", "trl.")) and module != __name__:
            return f"{module.rsplit('.', 1)[-1]}.{frame.f_code.co_name}"
        frame = frame.f_back
    return "-"


class WorkCounter:
    """Counters of generated and forward tokens, reward CPU time and timed sections (see the module docstring).

    Args:
        roles (`dict[str, torch.nn.Module]`):
            Names for the models whose work is counted by role (`{"policy": model, "ref": ref_model}`); any other
            `PreTrainedModel` is counted under its class name.
        eos_token_ids (`Iterable[int]`):
            The ids that end a generated row (counted, then nothing after them).
    """

    def __init__(self, roles: dict, eos_token_ids: Iterable[int]) -> None:
        self.roles = {id(m): name for name, m in roles.items() if m is not None}
        self.eos = set(int(i) for i in eos_token_ids)
        self.generated: dict[str, int] = defaultdict(int)  # label -> new tokens up to the first EOS
        self.prefilled: dict[str, int] = defaultdict(int)  # label -> prompt tokens given to generate
        self.forward: dict[str, int] = defaultdict(int)  # label -> input tokens of outermost forwards
        self.passes: dict[str, int] = defaultdict(int)  # "label (caller)" -> number of outermost forwards
        self.seconds: dict[str, float] = defaultdict(float)  # reward / section name -> seconds
        self._stack: list = []  # outermost PreTrainedModel call in progress: [label, counted?]
        self._generating = 0
        self._handles: list = []
        self._original_generate = None

    # ------------------------------------------------------------------------------------------------- labels
    def _role(self, module) -> str:
        return self.roles.get(id(module), type(module).__name__)

    # -------------------------------------------------------------------------------------------------- hooks
    def _pre_hook(self, module, args) -> None:
        from torch import nn
        from transformers import PreTrainedModel

        if self._generating:
            return
        if isinstance(module, PreTrainedModel):
            if not self._stack:
                import torch

                grad = "train" if torch.is_grad_enabled() else "no-grad"
                label = f"{self._role(module)} {grad}"
                self._stack.append([label, False])
                self.passes[f"{label} ({_caller()})"] += 1
            else:
                self._stack.append(None)  # an inner PreTrainedModel (the backbone): same pass
        elif isinstance(module, nn.Embedding) and self._stack and not self._stack[0][1] and args:
            self._stack[0][1] = True  # the first embedding lookup of the pass: its input ids are the pass's tokens
            self.forward[self._stack[0][0]] += int(args[0].numel())

    def _post_hook(self, module, args, output) -> None:
        from transformers import PreTrainedModel

        if not self._generating and isinstance(module, PreTrainedModel) and self._stack:
            self._stack.pop()

    def _generate(self, original: Callable) -> Callable:
        counter = self

        def generate(model, *args, **kwargs):
            input_ids = kwargs.get("input_ids", args[0] if args else None)
            mask = kwargs.get("attention_mask")
            counter._generating += 1
            try:
                out = original(model, *args, **kwargs)
            finally:
                counter._generating -= 1
            sequences = getattr(out, "sequences", out)
            if counter._generating or input_ids is None or not hasattr(sequences, "shape"):
                return out
            label = f"{counter._role(model)} ({_caller()})"
            counter.prefilled[label] += int(mask.sum()) if mask is not None else int(input_ids.numel())
            for row in sequences[:, input_ids.shape[1] :].tolist():
                n = len(row)
                for i, token in enumerate(row):
                    if token in counter.eos:
                        n = i + 1
                        break
                counter.generated[label] += n
            return out

        return generate

    def __enter__(self) -> WorkCounter:
        from torch.nn.modules import module as torch_module
        from transformers import GenerationMixin

        self._handles = [
            torch_module.register_module_forward_pre_hook(self._pre_hook),
            torch_module.register_module_forward_hook(self._post_hook, always_call=True),
        ]
        self._original_generate = GenerationMixin.generate
        GenerationMixin.generate = self._generate(self._original_generate)
        return self

    def __exit__(self, *exc) -> None:
        from transformers import GenerationMixin

        for handle in self._handles:
            handle.remove()
        self._handles = []
        GenerationMixin.generate = self._original_generate
        self._stack.clear()

    # ---------------------------------------------------------------------------------------------- wrappers
    def wrap_rewards(self, reward_funcs: list, names: list[str]) -> list:
        """`reward_funcs` with each call's CPU time added to `seconds["reward:<name>"]`. A class instance keeps its
        identity (its class is swapped for a timed subclass, so components that hold it still see it); a plain
        function is replaced by a wrapper with its signature (`functools.wraps`)."""
        import types

        out = []
        for func, name in zip(reward_funcs, names, strict=True):
            key = f"reward:{name}"
            if isinstance(func, (types.FunctionType, types.MethodType, functools.partial)):
                out.append(self._timed_function(func, key))
            elif hasattr(func, "__dict__") and not hasattr(func, "forward"):  # a reward class, not a reward model
                func.__class__ = self._timed_class(type(func), key)
                out.append(func)
            else:  # a reward model (TRL scores it itself): its forwards are counted, not its time
                out.append(func)
        return out

    def _charged(self, key: str, call: Callable) -> Callable:
        """`call` with the CPU time of each of its calls added to `seconds[key]`: the one timing wrapper."""
        counter = self

        def timed(*args, **kwargs):
            t0 = time.process_time()
            try:
                return call(*args, **kwargs)
            finally:
                counter.seconds[key] += time.process_time() - t0

        return timed

    def _timed_class(self, cls: type, key: str) -> type:
        return type(cls.__name__, (cls,), {"__call__": self._charged(key, cls.__call__), "__module__": cls.__module__})

    def _timed_function(self, func: Callable, key: str) -> Callable:
        return functools.wraps(func)(self._charged(key, func))

    def time_method(self, obj, name: str, key: str | None = None) -> None:
        """Add the CPU time of every call of `obj.<name>` to `seconds[key or name]` (an instance attribute that
        shadows the bound method; nothing else changes)."""
        setattr(obj, name, self._charged(key or name, getattr(obj, name)))

    # ------------------------------------------------------------------------------------------------ results
    def forward_tokens(self) -> dict[str, int]:
        """Forward tokens by `"<role> <train|no-grad>"`."""
        return dict(self.forward)

    def summary(self, steps: int) -> dict:
        """Everything counted, per optimizer step (`steps` of them), as plain numbers."""
        per = 1.0 / max(steps, 1)
        return {
            "generated": {k: v * per for k, v in sorted(self.generated.items())},
            "prefilled": {k: v * per for k, v in sorted(self.prefilled.items())},
            "forward": {k: v * per for k, v in sorted(self.forward.items())},
            "passes": {k: v * per for k, v in sorted(self.passes.items())},
            "seconds": {k: v * per for k, v in sorted(self.seconds.items())},
        }
