r"""Every prompt text a method trains or evaluates with: the one home for templates, budget sets and tiers.

Training (rollout plans, recipes), evaluation modes and the synthetic world all read these, so the text a model is
trained on is the text it is evaluated and prompted with.

- **HBPO** (arXiv 2507.15844, methods.md §2): the budget statement is an assistant prefill
  `"<think> I will answer the question with {budget} tokens"`, budgets 512/1024/2048/2560 [code]; the paper's
  "efficiency prompting" replaces the number with "minimal".
- **L1 / LCPO** (arXiv 2503.04697, §6): `" Think for N tokens."` (Exact) or `" Think for maximum N tokens."` (Max)
  appended to the question (cmu-l3/l1 `scripts/data/deepscaler_dataset.py`); evaluation targets 512/1024/2048/3600.
- **SABER** (arXiv 2508.10026, §3): the paper publishes neither its system prompts nor its tiers; the texts and the
  tiers 128/4096/16384 below are our proposed defaults.

>>> HBPO_TEMPLATE.format(budget=512)
'<think> I will answer the question with 512 tokens'
>>> l1_instruction(800, "max")
' Think for maximum 800 tokens.'
>>> list(saber_mode_prompts())
['NoThink', 'FastThink', 'CoreThink', 'DeepThink']
"""

from __future__ import annotations

__all__ = [
    "ASRR_NO_THINK_PREFIX",
    "BUDGET_PROMPT",
    "DEFAULT_INSTRUCTION",
    "HBPO_BUDGETS",
    "HBPO_MINIMAL_PROMPT",
    "HBPO_TEMPLATE",
    "INSTRUCTION_POSITIONS",
    "L1_MODES",
    "L1_TARGETS",
    "MODE_NAMES",
    "NO_THINK_PROMPT",
    "SABER_TIERS",
    "UNLIMITED_PROMPT",
    "bad_instruction_position",
    "format_prompt",
    "l1_instruction",
    "saber_mode_prompts",
    "saber_system_prompt",
    "validate_tiers",
]

# The question-then-instruction prompt of the math datasets (`trl_efficient.data`), model cards and evaluation.
DEFAULT_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

INSTRUCTION_POSITIONS = ("after", "before")


def bad_instruction_position(value) -> str:
    """The error message of an `instruction_position` that is neither `"after"` nor `"before"`."""
    return f"instruction_position must be one of {list(INSTRUCTION_POSITIONS)}, got {value!r}."


def format_prompt(
    question: str,
    instruction: str | None = DEFAULT_INSTRUCTION,
    system_prompt: str | None = None,
    instruction_position: str = "after",
) -> list[dict[str, str]]:
    r"""
    Conversational prompt: an optional system message, then the user message `"<question>\n<instruction>"`.

    Args:
        question (`str`): the problem text.
        instruction (`str` or `None`, *optional*, defaults to `DEFAULT_INSTRUCTION`):
            Appended (or prepended) to the question on its own line; `None` or `""` leaves the question alone.
        system_prompt (`str` or `None`, *optional*, defaults to `None`): a system message, or none.
        instruction_position (`str`, *optional*, defaults to `"after"`):
            `"after"` puts the instruction on the line after the question, `"before"` on the line before it.

    >>> format_prompt("2 + 3?")
    [{'role': 'user', 'content': '2 + 3?\nPlease reason step by step, and put your final answer within \\boxed{}.'}]
    >>> format_prompt("What is 2 + 3?", "Answer briefly.", system_prompt="Be kind.", instruction_position="before")
    [{'role': 'system', 'content': 'Be kind.'}, {'role': 'user', 'content': 'Answer briefly.\nWhat is 2 + 3?'}]
    """
    if instruction_position not in INSTRUCTION_POSITIONS:
        raise ValueError(bad_instruction_position(instruction_position))
    question = str(question).strip()
    if instruction:
        content = f"{question}\n{instruction}" if instruction_position == "after" else f"{instruction}\n{question}"
    else:
        content = question
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.append({"role": "user", "content": content})
    return messages


# ASRR's no-think prefix (arXiv 2505.15400, methods.md §24): the assistant turn starts with a closed think block, as
# in the paper's figure (the text says "Okay, I have finished thinking."); used as training prefill and eval mode.
ASRR_NO_THINK_PREFIX = "<think> Okay, I think I have finished thinking. </think>"

HBPO_TEMPLATE = "<think> I will answer the question with {budget} tokens"
HBPO_MINIMAL_PROMPT = "<think> I will answer the question with minimal tokens"  # HBPO's "efficiency prompting"
HBPO_BUDGETS = (512, 1024, 2048, 2560)  # methods.md §2 [code]

L1_MODES = ("exact", "max")
L1_TARGETS = (512, 1024, 2048, 3600)  # L1's evaluation targets, methods.md §6


def l1_instruction(target: int, mode: str = "exact") -> str:
    """The L1 instruction appended to the question: `" Think for N tokens."` (Exact) or
    `" Think for maximum N tokens."` (Max)."""
    if mode not in L1_MODES:
        raise ValueError(f"L1 mode must be one of {list(L1_MODES)}, got {mode!r}.")
    return f" Think for {target} tokens." if mode == "exact" else f" Think for maximum {target} tokens."


# LAPO stage-2 prefill (arXiv 2507.15758, methods.md §28; ZJU-REAL/LAPO README prompt "Assistant: <think> I will
# answer the question with {length} tokens."): the recorded per-prompt length opens the assistant's thinking.
LAPO_TEMPLATE = "<think> I will answer the question with {length} tokens."

# "Train Long, Think Short" (arXiv 2508.08940, methods.md §22): the current budget B(t) stated in the prompt.
CURRICULUM_BUDGET_INSTRUCTION = " IMPORTANT: You should use exactly {budget} tokens in your response."


# Proposed defaults (methods.md §3); the paper publishes none of these.
SABER_TIERS = (128, 4096, 16384)  # [secondary] budgets; the boundaries as a function of t_base are ours
BUDGET_PROMPT = (
    "Think step by step, keeping your reasoning strictly under {budget} tokens, then give the final answer in "
    "\\boxed{{}}."
)
UNLIMITED_PROMPT = "Think step by step as long as you need, then give the final answer in \\boxed{}."
NO_THINK_PROMPT = "Answer directly without reasoning."
MODE_NAMES = ("FastThink", "CoreThink", "DeepThink")


def validate_tiers(tiers, field_name: str = "tiers") -> tuple[int, ...]:
    """Tiers as a tuple of strictly increasing positive ints, or a `ValueError` naming `field_name`.

    >>> validate_tiers([128, 4096])
    (128, 4096)
    >>> validate_tiers([4096, 128])
    Traceback (most recent call last):
    ...
    ValueError: tiers must be strictly increasing positive token counts, got [4096, 128].
    """
    try:
        values = [int(t) for t in tiers]
        ok = bool(values) and all(float(t) == int(t) for t in tiers)
    except (TypeError, ValueError):
        values, ok = [], False
    if not ok or values[0] <= 0 or any(b <= a for a, b in zip(values, values[1:])):
        raise ValueError(f"{field_name} must be strictly increasing positive token counts, got {list(tiers)!r}.")
    return tuple(values)


def saber_system_prompt(
    mode: str,
    budget: int | None = None,
    budget_prompt: str = BUDGET_PROMPT,
    unlimited_prompt: str = UNLIMITED_PROMPT,
    no_think_prompt: str = NO_THINK_PROMPT,
) -> str:
    """System prompt of a row in `mode` (`"budget"`, `"unlimited"` or `"nothink"`).

    >>> saber_system_prompt("budget", 128)
    'Think step by step, keeping your reasoning strictly under 128 tokens, then give the final answer in \\\\boxed{}.'
    """
    if mode == "budget":
        return budget_prompt.format(budget=budget)
    if mode == "unlimited":
        return unlimited_prompt
    if mode == "nothink":
        return no_think_prompt
    raise ValueError(f"saber mode must be 'budget', 'unlimited' or 'nothink', got {mode!r}.")


def saber_mode_prompts(tiers=SABER_TIERS) -> dict[str, str]:
    """Inference modes -> system prompt: NoThink, then one mode per tier (FastThink / CoreThink / DeepThink for
    three tiers, `Think<B>` otherwise). Proposed default mapping (methods.md §3).

    >>> list(saber_mode_prompts([256, 1024]))
    ['NoThink', 'Think256', 'Think1024']
    """
    tiers = validate_tiers(tiers)
    names = MODE_NAMES if len(tiers) == len(MODE_NAMES) else tuple(f"Think{t}" for t in tiers)
    prompts = {"NoThink": NO_THINK_PROMPT}
    prompts.update({name: saber_system_prompt("budget", t) for name, t in zip(names, tiers)})
    return prompts


# s1 budget forcing (arXiv 2501.19393, §3.1; methods.md "inference control"): `force:B` closes the thinking at B
# generated tokens with the end-of-thinking delimiter plus this answer prefix (s1 appends "Final Answer:"; we open a
# `\boxed{` so the checker finds the forced answer), `wait:N` replaces an early end of thinking by "Wait" (s1's
# `ignore_str`, appended without a space as in the s1 README).
BUDGET_FORCING_END_THINK = "</think>"
BUDGET_FORCING_ANSWER_PREFIX = "\n\nThe final answer is \\boxed{"
BUDGET_FORCING_WAIT = "Wait"

# BudgetThinker (arXiv 2508.17196, methods.md §23): the 7 control tokens (added to the vocabulary) that split the
# thinking into 8 parts, in the order they are forced ("7/8 of the budget remains" first), and the prompt suffix
# stating the budget B, explaining the tokens and the target format `</think>\n**Final Answer**\boxed{...}`.
BUDGETTHINKER_CONTROL_TOKENS = tuple(f"<remaining>{k}/8" for k in range(7, 0, -1))
BUDGETTHINKER_INSTRUCTION = (
    " You have a thinking budget of {budget} tokens. The special tokens <remaining>7/8, ..., <remaining>1/8 will "
    "appear in your thinking to tell you how much of the budget remains; they split it into 8 parts. End your "
    "thinking with </think>, then write **Final Answer**\\boxed{{your answer}}."
)
