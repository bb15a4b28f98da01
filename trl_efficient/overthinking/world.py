r"""
The testbed's synthetic reasoning world: digit chains that need one reasoning step per operation.

A task is a start digit and one operation (`+`, `-`, `*` with a digit) to apply 1 to 8 times, keeping only the
last digit (arithmetic mod 10). Each application needs exactly one step, `"a: 4 + 7 = 1."` (labelled a, b, c, ...),
so the difficulty is the number of applications and the shortest correct trace is known exactly:

    <think> a: 4 + 7 = 1. b: 1 + 7 = 8. c: 8 + 7 = 5. </think> \boxed{5}

(Each step needs only the previous result and the operation, so a tiny model trained from scratch for a few minutes
learns it; its errors come from the arithmetic table, from stopping at the wrong count, and from skipped steps.)

Teacher traces (`make_trace`) mix these necessary steps with redundant sentences at a random verbosity: re-checks
(`"Check: 4 + 7 = 1."`), restatements (`"So far: 1."`, `"Next: * 3."`) and hesitations (`"Wait."`), and
occasionally *skip* a step by merging two operations into one sentence (`"4 + 7 * 3 = 3."`), which a small model
gets wrong far more often. A model trained on them over-thinks: cutting the filler is free, cutting steps costs
accuracy.

Because the world is ours, every completion can be segmented exactly (`segment_completion`): each sentence of the
thinking part is a necessary `step`, a merged `skip` step, or `redundant`; the rest is `frame` (think tags, the
boxed answer, the EOS token).

>>> task = Task(start=4, ops=(("+", 7),) * 3)
>>> task.question, task.answer, task.difficulty
('Start at 4. Apply + 7 to it 3 times, keeping the last digit.', 5, 3)
>>> minimal_trace(task)
'<think> a: 4 + 7 = 1. b: 1 + 7 = 8. c: 8 + 7 = 5. </think> \\boxed{5}'
"""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass, field

__all__ = [
    "EPILOGUE",
    "FILLERS",
    "NECESSARY_KINDS",
    "OPS",
    "PREAMBLE",
    "SEGMENT_KINDS",
    "Segment",
    "Task",
    "TraceStyle",
    "WORLD_V2",
    "WORLD_V3",
    "apply_op",
    "classify_sentences",
    "make_task",
    "make_tasks",
    "make_trace",
    "minimal_trace",
    "world_corpus",
]

OPS = ("+", "-", "*")
LABELS = "abcdefghijklmnopqrstuvwxyz"  # operation i of a task is labelled LABELS[i] in the question and its step
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
INSTRUCTION = "Put the final answer in \\boxed{}."  # appended to every question (testbed.data.task_prompt)

# Redundant sentences. `{a} {op} {b} = {c}` is the previous step, `{c}` the running value, `{nop} {nb}` the next
# operation. Each is one sentence ending with "." so that segmentation is a split on sentence ends.
FILLERS: dict[str, tuple[str, ...]] = {
    "recheck": ("Check: {a} {op} {b} = {c}.", "Let me recheck: {a} {op} {b} = {c}."),
    "restate": ("So far: {c}.", "The value is {c}."),
    "preview": ("Next: {nop} {nb}.",),
    "hesitate": ("Wait.", "Hmm.", "Let me think.", "Let me be careful."),
}


# World v2 (`WORLD_V2`): sentences that frame the work whatever its length (a restated task before the first step,
# a re-read answer after the last one), so that easy tasks are over-thought at least as much as hard ones, as real
# reasoning models do. `{s}` start, `{op} {b}` the operation, `{k}` its count, `{ans}` the answer.
PREAMBLE = (
    "Let me read the task.",
    "We start at {s}.",
    "The operation is {op} {b}.",
    "It is applied {k} times.",
    "Each step keeps the last digit.",
    "Let me go step by step.",
)
EPILOGUE = (
    "So the answer is {ans}.",
    "That makes {k} steps.",
    "Let me make sure I counted right.",
    "I am confident in this.",
)
CHECK_TEMPLATES = FILLERS["recheck"]  # a check recomputes the last operation from the same left operand


def apply_op(a: int, op: str, b: int) -> int:
    """One step, mod 10.

    >>> apply_op(4, "+", 7), apply_op(1, "-", 3), apply_op(6, "*", 7)
    (1, 8, 2)
    """
    if op == "+":
        return (a + b) % 10
    if op == "-":
        return (a - b) % 10
    if op == "*":
        return (a * b) % 10
    raise ValueError(f"Unknown operation {op!r}; expected one of {OPS}.")


@dataclass(frozen=True)
class Task:
    start: int
    ops: tuple[tuple[str, int], ...]

    @property
    def difficulty(self) -> int:
        return len(self.ops)

    @property
    def values(self) -> list[int]:
        """Running values after each operation (`values[-1]` is the answer)."""
        out, v = [], self.start
        for op, b in self.ops:
            v = apply_op(v, op, b)
            out.append(v)
        return out

    @property
    def answer(self) -> int:
        return self.values[-1]

    @property
    def expression(self) -> str:
        return " ".join([str(self.start)] + [f"{op} {b}" for op, b in self.ops])

    @property
    def question(self) -> str:
        (op, b), k = self.ops[0], self.difficulty
        if any(o != self.ops[0] for o in self.ops):
            raise ValueError("testbed tasks apply one operation repeatedly; got different operations.")
        times = "time" if k == 1 else "times"
        return f"Start at {self.start}. Apply {op} {b} to it {k} {times}, keeping the last digit."


def make_task(rng: random.Random, num_ops: int) -> Task:
    """A start digit and one operation (`+`, `-` or `*` with a digit, never `* 0`, `* 1`, `+ 0` or `- 0`, which
    would make every step trivial), applied `num_ops` times."""
    if not 1 <= num_ops <= 9:
        raise ValueError(f"num_ops must be between 1 and 9, got {num_ops}.")
    op = rng.choice(OPS)
    b = rng.randint(2, 9) if op == "*" else rng.randint(1, 9)
    return Task(rng.randint(0, 9), ((op, b),) * num_ops)


def make_tasks(n: int, seed: int, min_ops: int = 1, max_ops: int = 8) -> list[Task]:
    """`n` tasks with a difficulty drawn uniformly from `[min_ops, max_ops]`, seeded.

    >>> [t.difficulty for t in make_tasks(4, seed=0, min_ops=2, max_ops=3)]
    [3, 3, 3, 2]
    """
    if not 1 <= min_ops <= max_ops:
        raise ValueError(f"need 1 <= min_ops <= max_ops, got {min_ops}, {max_ops}.")
    rng = random.Random(seed)
    return [make_task(rng, rng.randint(min_ops, max_ops)) for _ in range(n)]


def _step(i, a, op, b, c) -> str:
    return f"{LABELS[i]}: {a} {op} {b} = {c}."


def minimal_trace(task: Task) -> str:
    """The shortest correct trace: every necessary step, nothing else."""
    steps, a = [], task.start
    for i, ((op, b), c) in enumerate(zip(task.ops, task.values, strict=True)):
        steps.append(_step(i, a, op, b, c))
        a = c
    return f"{THINK_OPEN} {' '.join(steps)} {THINK_CLOSE} \\boxed{{{task.answer}}}"


@dataclass(frozen=True)
class TraceStyle:
    """How teacher traces are drawn.

    Args:
        verbosity_weights: probabilities of verbosity levels 0, 1, 2, ...; a trace of level `v` draws
            `Binomial(v, filler_prob)` redundant sentences after each step.
        filler_prob: see above.
        skip_prob: probability that two consecutive operations are merged into one (skipped) step.
        filler_kinds: weights of the filler kinds in `FILLERS`.
        slip_prob: world v2. Probability that a step from the `slip_from`-th operation on (0-based) writes a wrong
            result (a *slip*: the correct digit plus 1-9, mod 10). With probability `check_prob` the teacher catches
            it with a check (`"Check: a op b = c."`, the correct value) and continues from the check's value;
            otherwise the chain continues from the wrong value (the trace's answer is then wrong, as a real model's
            would be). A model trained on these traces slips at about this rate, cannot repair a slip that it does
            not check, and learns that a check repairs one. 0: no slips (world v1).
        check_prob: world v2. See `slip_prob`.
        slip_from: world v2. The first operation (0-based) that can slip: chains are error-free for their first
            `slip_from` operations, so easy tasks gain nothing from checks and hard ones gain much.
        check_habit: world v2. False: the teacher checks only a step that slipped (with probability `check_prob`),
            so whether to check hinges on noticing the slip. True: at verbosity >= 1 the teacher checks *every*
            (unmerged) step from the `slip_from`-th on with probability `check_prob`, whether it slipped or not, as a
            habit: the check always carries the correct value, so it repairs a slip (a useful check) and restates a
            correct step (a useless one). A model trained on these traces checks late steps out of habit, its checks
            are more reliable than its steps (they are never wrong in its data), and forbidding checks costs it
            accuracy on long chains only.
        framing_prob: world v2. A trace of verbosity `v` opens with `Binomial(framing_per_level * v, framing_prob)`
            sentences of `PREAMBLE` and closes with as many draws from `EPILOGUE` (a fixed cost whatever the task's
            length). 0: no framing (world v1).
        framing_per_level: see `framing_prob`.
    """

    verbosity_weights: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4)
    filler_prob: float = 0.6
    skip_prob: float = 0.08
    filler_kinds: dict[str, float] = field(
        default_factory=lambda: {"recheck": 0.35, "restate": 0.25, "preview": 0.15, "hesitate": 0.25}
    )
    slip_prob: float = 0.0
    slip_from: int = 2
    check_prob: float = 1.0
    check_habit: bool = False
    framing_prob: float = 0.0
    framing_per_level: int = 2

    def to_dict(self) -> dict:
        """The style as a dict, world v2's fields left out while at their v1 values (so the cache keys of the
        models trained before they existed are unchanged)."""
        out = dataclasses.asdict(self)
        for name in ("slip_prob", "slip_from", "check_prob", "framing_prob", "framing_per_level", "check_habit"):
            at_v1 = out[name] == getattr(TraceStyle, name)
            if at_v1 and (name == "check_habit" or not (self.slip_prob or self.framing_prob)):
                out.pop(name)
        return out


# World v2: the teacher over-thinks about 3x the floor, easy tasks relatively more (framing sentences); from the third
# operation on it slips (one step in five) and checks each step out of habit (nine in ten), so checks repair slips
# on long chains and are pure cost on short ones; see docs/testbed.md ("World v2").
WORLD_V2 = TraceStyle(
    verbosity_weights=(0.05, 0.1, 0.2, 0.3, 0.35),
    filler_prob=0.55,
    skip_prob=0.04,
    filler_kinds={"recheck": 0.0, "restate": 0.4, "preview": 0.2, "hesitate": 0.4},  # every check is a real check
    slip_prob=0.2,
    slip_from=2,
    check_prob=0.9,
    check_habit=True,
    framing_prob=0.6,
    framing_per_level=3,
)


# World v3 (candidate d of docs/testbed.md, "World v3", picked by the rule written there before its penalty figures
# were read): v2's teacher, more error-prone and more verbose. From the third operation on a step slips 45 times in 100
# (v2: 20) and is checked out of habit 55 times in 100 (v2: 90), two operations are merged into one sentence 18 times
# in 100 (v2: 4; the shortcut a length penalty finds, which the model gets wrong far more often than a single step),
# and per-step filler and framing are a little more frequent (0.65 and 0.7; v2: 0.55 and 0.6) to keep v2's dynamic
# range. Trained GRPO answers about 0.69 of the tasks (v2: 0.93), and a length penalty costs accuracy on hard tasks.
WORLD_V3 = dataclasses.replace(
    WORLD_V2, slip_prob=0.45, check_prob=0.55, skip_prob=0.18, filler_prob=0.65, framing_prob=0.7
)


def make_trace(task: Task, rng: random.Random, style: TraceStyle = TraceStyle()) -> str:
    """A teacher trace for `task`, with redundant sentences and occasional merged steps; correct unless a world-v2
    slip goes unchecked.

    >>> t = Task(start=4, ops=(("+", 7), ("*", 3)))
    >>> make_trace(t, random.Random(1), TraceStyle(verbosity_weights=(1.0,), skip_prob=0.0)) == minimal_trace(t)
    True
    """
    levels = list(range(len(style.verbosity_weights)))
    verbosity = rng.choices(levels, weights=style.verbosity_weights)[0]
    kinds, kind_weights = zip(*style.filler_kinds.items(), strict=True)
    sentences, a, i = [], task.start, 0  # `a`: the running value as written (a slip left unchecked changes it)
    (op0, b0), k = task.ops[0], task.difficulty
    if style.framing_prob:
        for _ in range(sum(rng.random() < style.framing_prob for _ in range(style.framing_per_level * verbosity))):
            sentences.append(rng.choice(PREAMBLE).format(s=task.start, op=op0, b=b0, k=k))
    while i < len(task.ops):
        op, b = task.ops[i]
        if i + 1 < len(task.ops) and rng.random() < style.skip_prob:
            op2, b2 = task.ops[i + 1]
            mid = apply_op(a, op, b)
            c = apply_op(mid, op2, b2)
            sentences.append(f"{LABELS[i]}: {a} {op} {b} {op2} {b2} = {c}.")
            i += 2
            prev = (mid, op2, b2, c)  # re-checks of a merged step restate its last operation
        else:
            c = apply_op(a, op, b)
            late = bool(style.slip_prob) and i >= style.slip_from
            slipped = (c + rng.randint(1, 9)) % 10 if late and rng.random() < style.slip_prob else None
            sentences.append(_step(i, a, op, b, c if slipped is None else slipped))
            if style.check_habit:
                checked = late and verbosity >= 1 and rng.random() < style.check_prob
            else:
                checked = slipped is not None and rng.random() < style.check_prob
            if checked:  # the check carries the correct value; the chain continues from it
                sentences.append(rng.choice(CHECK_TEMPLATES).format(a=a, op=op, b=b, c=c))
            elif slipped is not None:  # not caught: the chain continues from the wrong value
                c = slipped
            prev = (a, op, b, c)
            i += 1
        a = c
        for _ in range(verbosity):
            if rng.random() >= style.filler_prob:
                continue
            kind = rng.choices(kinds, weights=kind_weights)[0]
            if kind == "preview" and i >= len(task.ops):
                kind = "restate"
            nop, nb = task.ops[i] if i < len(task.ops) else ("", "")
            template = rng.choice(FILLERS[kind])
            sentences.append(template.format(a=prev[0], op=prev[1], b=prev[2], c=prev[3], nop=nop, nb=nb))
    if style.framing_prob:
        for _ in range(sum(rng.random() < style.framing_prob for _ in range(style.framing_per_level * verbosity))):
            sentences.append(rng.choice(EPILOGUE).format(ans=a, k=k))
    return f"{THINK_OPEN} {' '.join(sentences)} {THINK_CLOSE} \\boxed{{{a}}}"


def world_corpus(style: TraceStyle | None = None) -> list[str]:
    """Strings covering the world's vocabulary, for the testbed tokenizer (`build_tiny_tokenizer(extra_corpus=)`).

    With a world-v2 `style` (slips or framing), 200 traces of that style are added, so its framing sentences are
    words of the vocabulary; with the v1 style (or None) the corpus, hence the tokenizer, is the v1 one."""
    rng = random.Random(0)
    corpus = [f"{t.question} {INSTRUCTION}" for t in make_tasks(200, seed=1)]
    corpus += [make_trace(t, rng) for t in make_tasks(200, seed=2)]
    corpus += [f"{THINK_OPEN} {THINK_CLOSE} \\boxed{{{d}}}" for d in range(10)]
    if style is not None and (style.slip_prob or style.framing_prob):
        corpus += [make_trace(t, rng, style) for t in make_tasks(200, seed=3)]
    return corpus


# ---------------------------------------------------------------------------------------------------------------
# Exact segmentation of completions
# ---------------------------------------------------------------------------------------------------------------

_SENTENCE = re.compile(r"[^.]*\.|[^.]+$")
_STEP = re.compile(r"^(?:[a-z]: )?(\d) ([+\-*]) (\d) = (\d+)\.$")
_SKIP = re.compile(r"^(?:[a-z]: )?(\d)((?: [+\-*] \d){2,}) = (\d+)\.$")
_CHECK = re.compile(r"^(?:Check|Let me recheck): (\d) ([+\-*]) (\d) = (\d+)\.$")

SEGMENT_KINDS = ("step", "skip", "check_useful", "check_useless", "filler", "frame")
NECESSARY_KINDS = ("step", "skip", "check_useful", "frame")  # the rest (useless checks, filler) is redundant


@dataclass(frozen=True)
class Segment:
    start: int  # character offsets into the completion text
    end: int
    kind: str  # one of SEGMENT_KINDS
    text: str


def classify_sentences(task: Task, thinking: str, offset: int = 0) -> list[Segment]:
    """Label each sentence of a thinking text (without the think tags) with one of `SEGMENT_KINDS`.

    - `step`: performs the **next pending operation** of the task (`"[label: ]a op b = c."` whose operation and
      operand are the next ones, whose left operand `a` is the running value (any `a` for the first step), whatever
      its arithmetic); its `c` becomes the running value;
    - `skip`: performs the next two or more pending operations at once (a merged step);
    - `check_useful`: recomputes the last step's operation from the same left operand (`"Check: a op b = c."` or
      `"Let me recheck: ..."`) and **changes the running value** (it repairs, or breaks, the step before it); the
      chain continues from its `c`;
    - `check_useless`: such a check that agrees with the running value;
    - `filler`: everything else (restatements, previews, hesitations, framing, repeated steps, stray text).
    Whitespace between sentences is filler too (none in well-formed traces).

    >>> task = Task(start=4, ops=(("+", 7),) * 3)
    >>> text = " a: 4 + 7 = 1. Check: 4 + 7 = 1. a: 4 + 7 = 1. 1 + 7 + 7 = 5. Wait."
    >>> [s.kind for s in classify_sentences(task, text)]
    ['step', 'check_useless', 'filler', 'skip', 'filler']
    >>> [s.kind for s in classify_sentences(task, " a: 4 + 7 = 2. Check: 4 + 7 = 1. b: 1 + 7 = 8.")]
    ['step', 'check_useful', 'step']
    """
    segments, pending, last, last_op = [], 0, None, None
    for match in _SENTENCE.finditer(thinking):
        raw = match.group(0)
        text = raw.strip()
        if not text:
            continue
        lead = len(raw) - len(raw.lstrip())
        start, end = offset + match.start() + lead, offset + match.start() + len(raw.rstrip())
        kind = "filler"
        step = _STEP.match(text)
        skip = _SKIP.match(text)
        check = _CHECK.match(text)
        # a step continues from the running value (whatever its arithmetic); a repeat does not
        if (
            step
            and pending < task.difficulty
            and (step.group(2), int(step.group(3))) == task.ops[pending]
            and (last is None or int(step.group(1)) == last)
        ):
            kind, pending, last = "step", pending + 1, int(step.group(4))
            last_op = (int(step.group(1)), step.group(2), int(step.group(3)))
        elif skip and (last is None or int(skip.group(1)) == last):
            ops = tuple((o, int(b)) for o, b in re.findall(r"([+\-*]) (\d)", skip.group(2)))
            if task.ops[pending : pending + len(ops)] == ops:
                kind, pending, last = "skip", pending + len(ops), int(skip.group(3))
                last_op = (None, *ops[-1])  # a check of a merged step restates its last operation, from any value
        elif check and last_op is not None:
            a, op, b, c = int(check.group(1)), check.group(2), int(check.group(3)), int(check.group(4))
            if (op, b) == last_op[1:] and last_op[0] in (None, a):
                kind = "check_useless" if c == last else "check_useful"
                last = c
        segments.append(Segment(start, end, kind, text))
    return segments


def parse_expression(expression: str) -> Task:
    """Inverse of `Task.expression`.

    >>> parse_expression("4 + 7 * 3") == Task(4, (("+", 7), ("*", 3)))
    True
    """
    parts = expression.split()
    if len(parts) < 3 or len(parts) % 2 == 0:
        raise ValueError(f"Not a testbed expression: {expression!r}.")
    return Task(int(parts[0]), tuple((parts[i], int(parts[i + 1])) for i in range(1, len(parts), 2)))
