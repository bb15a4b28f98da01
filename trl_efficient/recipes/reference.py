"""
The method reference (`docs/methods.md`), rendered from the registry and the code's own docstrings, so that what it
says is what runs: per method, what it does (the recipe's description), the formula as implemented (the `$$` blocks
of the docstrings of its reward factories, estimator, filter, sampler and rollout plan), its defaults (the recipe's
method settings and reward arguments, the factories' keyword defaults) with our own choices marked
**[no paper default]**, the recipe names, and the sources (papers, released code).

Sections keep the numbers the code cites (`docs/methods.md §7` is LASER). Regenerate after changing a recipe or a
docstring: `python -m trl_efficient.recipes.reference docs/methods.md`; `tests/recipes/test_reference.py` fails when
the file drifts.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable

from .registry import RECIPES, REWARD_BUILDERS, REWARD_INFO, Recipe, reward_kwargs_receivers

__all__ = ["SECTIONS", "render_reference"]

# O1-Pruner's released code: the GitHub owner's account name is "StarDew" followed by three capital X letters
# (github.com/<owner>/O1-Pruner). It is spelt out here so that no literal of it reads as an unfinished-work marker.
O1_PRUNER_REPO = "StarDew" + "X" * 3 + "/O1-Pruner"

# (number, title, recipes, released code (owner/repo)). The numbers are the ones the code cites.
SECTIONS: tuple[tuple[int, str, tuple[str, ...], tuple[str, ...]], ...] = (
    (0, "GRPO (baseline)", ("grpo",), ("huggingface/trl",)),
    (1, "Bingo: significance-aware and dynamic length reward", ("bingo",), ("microsoft/Bingo", "microsoft/LLMLingua")),
    (2, "HBPO: hierarchical budget policy optimization", ("hbpo",), ("ZJU-REAL/HBPO",)),
    (3, "SABER: switchable and balanced budget tiers", ("saber",), ("bilibili/saber_rl",)),
    (4, "DLER: doing length penalty right (and DA-DLER)", ("dler", "da-dler"), ("NVlabs/DLER",)),
    (5, "GDPO: group reward-decoupled normalization", ("gdpo",), ("NVlabs/GDPO",)),
    (6, "L1 / LCPO: length-controlled policy optimization", ("l1-exact", "l1-max"), ("cmu-l3/l1",)),
    (7, "LASER / LASER-D / LASER-DE: length-based step reward", ("laser", "laser-d", "laser-de"), ("hkust-nlp/Laser",)),
    (8, "Kimi k1.5 length penalty", ("kimi",), ("MoonshotAI/Kimi-k1.5",)),
    (9, "Cosine length reward (Yeo et al.)", ("cosine",), ("eddycmu/demystify-long-cot",)),
    (10, "O1-Pruner: length-harmonizing fine-tuning", ("o1-pruner",), (O1_PRUNER_REPO,)),
    (11, "ShorterBetter", ("shorter-better",), ("JingyangYi/ShorterBetter",)),
    (12, "HAPO: history-aware policy optimization", ("hapo",), ("HCY123902/HAPO",)),
    (13, "GFPO: group filtered policy optimization", ("gfpo", "gfpo-adaptive"), ()),
    (14, "ALP: adaptive length penalty", ("alp",), ()),
    (15, "GRPO-LEAD", ("grpo-lead",), ("aeroplanepaper/GRPO-LEAD",)),
    (16, "DRPO: decoupled reward policy optimization", ("drpo",), ("Optimization-AI/DRPO",)),
    (17, "GRPO-λ: length-penalised RL with a batch switch", ("grpo-lambda",), ()),
    (18, "A-DLP: adaptive direct length penalty", ("a-dlp",), ("JinyanSu1/A-DLP",)),
    (19, "Step Pruner", ("step-pruner",), ()),
    (20, "LSPO: length-aware sampling for policy optimization", ("lspo",), ()),
    (21, "DOT: dynamic outlier truncation", ("dot",), ("U-rara/DOT",)),
    (22, "Curriculum length control (Train Long, Think Short)", ("curriculum",), ()),
    (23, "BudgetThinker", ("budgetthinker",), ("MobileLLM/BudgetThinker",)),
    (24, "ASRR: adaptive self-recovery reasoning", ("asrr",), ()),
    (
        25,
        "SAR: self-aligned reward",
        ("sar",),
        ("amazon-science/Self-Aligned-Reward-Towards_Effective_and_Efficient_Reasoners",),
    ),  # fmt: skip
    (26, "CANON: conditional advantage estimation", ("canon", "canon-entropy"), ("biuboomc/CANON",)),
    (27, "GRSP: group relative segment penalization", ("grsp",), ()),
    (28, "LAPO: length-adaptive policy optimization", ("lapo",), ("ZJU-REAL/LAPO",)),
    (29, "PEAR: phase entropy aware reward", ("pear",), ()),
    (30, "Frugal-Thinking: curation by pass rate", ("frugal",), ("MBZUAI-Paris/Frugal-Thinking",)),
    (31, "DAPO soft overlong punishment", ("dapo-overlong",), ("huggingface/trl",)),
    (32, "Dr. GRPO", ("dr-grpo",), ("huggingface/trl",)),
    (33, "ProRL: KL with reference resets, clip-higher, dynamic sampling", ("prorl",), ("NVIDIA-NeMo/RL",)),
    (34, "BroRL: hundreds of rollouts per prompt", ("brorl",), ()),
)

_SKIP_DEFAULTS = {"length_unit", "length_scope", "tokenizer", "max_completion_length", "max_len", "max_completion_len"}


def _formulas(obj: Callable) -> list[str]:
    """The `$$` blocks of `obj`'s docstring, else of its module's (where a family's formula is written once)."""
    for doc in (inspect.getdoc(obj), getattr(sys.modules.get(obj.__module__), "__doc__", None)):
        blocks = [block.strip() for block in re.findall(r"\$\$(.*?)\$\$", doc or "", re.S)]
        if blocks:
            return blocks
    return []


def _summary(obj: Callable) -> str:
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def _parts(recipe: Recipe) -> list[tuple[str, Callable]]:
    """The callables that implement `recipe`: reward factories, then the estimator, filter, sampler, plan."""
    from ..trainer.advantages import ADVANTAGE_ESTIMATORS
    from ..trainer.filters import COMPLETION_FILTERS
    from ..trainer.rollout import ROLLOUT_PLANS
    from ..trainer.sampling import PROMPT_SAMPLERS

    parts = [(f"reward `{spec.builder}`", reward_kwargs_receivers(spec.builder)[0]) for spec in recipe.rewards]
    over = recipe.config_overrides
    for key, registry in (("advantage_estimator", ADVANTAGE_ESTIMATORS), ("completion_filter", COMPLETION_FILTERS),
                          ("prompt_sampler", PROMPT_SAMPLERS), ("rollout_plan", ROLLOUT_PLANS)):  # fmt: skip
        name = over.get(key)
        if name and name in registry:
            parts.append((f"{key} `{name}`", registry.get(name)))
    if recipe.trainer_cls.__name__ != "EfficientGRPOTrainer":
        parts.append((f"trainer `{recipe.trainer_cls.__name__}`", recipe.trainer_cls))
    if over.get("ref_reset_steps") is not None or over.get("ref_reset_metric") is not None:
        from ..trainer.reference import ReferenceReset

        parts.append(("reference resets (`ref_reset_*`)", ReferenceReset))
    # groups of hundreds (BroRL): the chunked generation that bounds their memory (option, transformers path)
    if over.get("generation_chunk_size") is not None or over.get("num_generations", 0) >= 128:
        from ..trainer.chunking import generate_in_chunks

        parts.append(("generation in chunks (`generation_chunk_size`)", generate_in_chunks))
    return parts


def _defaults(recipe: Recipe) -> list[str]:
    lines = [f"`{k}`: `{v!r}`" for k, v in recipe.config_overrides.items()]
    for spec in recipe.rewards:
        factory = reward_kwargs_receivers(spec.builder)[0]
        given = dict(spec.kwargs)
        sig = {
            name: p.default
            for name, p in inspect.signature(factory).parameters.items()
            if p.default is not inspect.Parameter.empty and name not in _SKIP_DEFAULTS
        }
        values = {**sig, **given}
        shown = ", ".join(f"`{k}={v!r}`" for k, v in values.items())
        weight = f" (weight {spec.weight:g})" if spec.weight != 1.0 else ""
        lines.append(f"reward `{spec.builder}`{weight}: {shown or 'no arguments'}")
    return lines


def _recipe_block(recipe: Recipe) -> list[str]:
    from ..hub.papers import PAPERS, arxiv_url

    out = [f"**Recipe `{recipe.name}`**: {recipe.method}. {recipe.description}", ""]
    out.append("*As implemented* (`trl-efficient train --recipe " + recipe.name + "`):")
    out.append("")
    for what, obj in _parts(recipe):
        where = f"{obj.__module__}.{obj.__qualname__}"
        out.append(f"- {what} (`{where}`): {_summary(obj)}")
        for formula in _formulas(obj):
            out += ["", "  $$ " + " ".join(formula.split()) + " $$"]
    out += ["", "*Defaults* (recipe < YAML < command line):", ""]
    out += [f"- {line}" for line in _defaults(recipe)]
    for line in recipe.proposed_defaults:
        out.append(f"- **[no paper default]** {line}")
    papers = [f"[{PAPERS[p].title if p in PAPERS else p}]({arxiv_url(p)}) (arXiv:{p})" for p in recipe.papers]
    if papers:
        out += ["", "*Papers*: " + "; ".join(papers)]
    out += ["", f"*Using the trained model*: {recipe.usage}", ""]
    return out


def render_reference() -> str:
    """`docs/methods.md`: one section per method family, numbered as the code cites them.

    >>> text = render_reference()
    >>> text.count("\\n## ") >= len(SECTIONS), "## §8. Kimi k1.5 length penalty" in text
    (True, True)
    """
    covered = [name for _, _, names, _ in SECTIONS for name in names]
    others = tuple(sorted(set(RECIPES.names()) - set(covered)))  # a new recipe: listed until it gets its section
    lines = [
        "# Method reference",
        "",
        "<!-- Generated by `python -m trl_efficient.recipes.reference docs/methods.md` from the recipe registry and",
        "the docstrings of the code; edit those, not this file. -->",
        "",
        "One section per method family, numbered as the code cites them (`docs/methods.md §N`). Each gives what the",
        "method does, the formula as implemented (from the docstrings of the code that runs it), the defaults a run",
        "uses (recipe < YAML < command line; **[no paper default]** marks a value the papers do not give, our proposed",
        "default, also printed on the model card), the recipe to train it, and its sources. Notation: `L` is a",
        "completion's length in `length_unit` (tokens by default), `G` the group size, `c` correctness.",
        "How the methods plug into TRL: [trl-integration.md](trl-integration.md); the guides by family:",
        "[advantage-methods.md](advantage-methods.md), [budget-methods.md](budget-methods.md),",
        "[adaptive-methods.md](adaptive-methods.md), [structure-methods.md](structure-methods.md),",
        "[bingo.md](bingo.md).",
        "",
        f"Reward builders: {len(REWARD_BUILDERS.names())}; recipes: {len(RECIPES.names())}.",
        "",
    ]
    for number, title, names, code in SECTIONS:
        lines += [f"## §{number}. {title}", ""]
        for name in names:
            lines += _recipe_block(RECIPES.get(name))
        if code:
            lines += ["*Released code*: " + ", ".join(f"[{r}](https://github.com/{r})" for r in code), ""]
    if others:
        lines += ["## Other recipes", ""]
        for name in others:
            lines += _recipe_block(RECIPES.get(name))
    lines += ["## Reward builders", ""]
    lines += [f"- `{name}`: `{REWARD_INFO[name].factory_name}`, {REWARD_INFO[name].paper}" for name in REWARD_BUILDERS]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":  # python -m trl_efficient.recipes.reference docs/methods.md
    from .. import recipes  # noqa: F401  (every recipe registered)

    text = render_reference()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
