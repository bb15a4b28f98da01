"""
The method reference (`docs/methods.md`), rendered from the registry and the code's own docstrings, so that what it
says is what runs: per method, what it does (the recipe's description), the formula as implemented (the `$$` blocks
of the docstrings of its reward factories, estimator, filter, sampler and rollout plan), its defaults (the recipe's
method settings and reward arguments, the factories' keyword defaults) with our own choices marked
**[no paper default]**, the recipe names, and the sources (papers, released code).

Sections keep the numbers the code cites (`docs/methods.md §7` is LASER); each recipe declares its own
(`Recipe.section`), so no list of sections is kept here. Regenerate after changing a recipe or a
docstring: `python -m trl_efficient.recipes.reference docs/methods.md`; `tests/recipes/test_reference.py` fails when
the file drifts.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable

from .registry import RECIPES, REWARD_BUILDERS, REWARD_INFO, Recipe, Section, reward_kwargs_receivers

__all__ = ["render_reference", "sections"]

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
    from ..trainer.prompt_samplers import PROMPT_SAMPLERS
    from ..trainer.rollout import ROLLOUT_PLANS

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


def sections() -> list[tuple[Section, list[Recipe]]]:
    """The reference's sections by number, each with its recipes in registration order (`Recipe.section`); two
    recipes that declare the same number with a different title or code are a registration error.

    >>> [(s.number, [r.name for r in recipes]) for s, recipes in sections()][4]
    (4, ['dler', 'da-dler'])
    """
    by_number: dict[int, tuple[Section, list[Recipe]]] = {}
    for _, recipe in RECIPES.items():  # registration order (Registry.names() sorts)
        if recipe.section is None:
            continue
        section, recipes = by_number.setdefault(recipe.section.number, (recipe.section, []))
        if section != recipe.section:
            raise ValueError(f"recipe {recipe.name!r} declares {recipe.section}, but {recipes[0].name!r} declares "
                             f"{section} under the same number")  # fmt: skip
        recipes.append(recipe)
    return [by_number[number] for number in sorted(by_number)]


def render_reference() -> str:
    """`docs/methods.md`: one section per method family, numbered as the code cites them.

    >>> text = render_reference()
    >>> text.count("\\n## ") >= len(sections()), "## §8. Kimi k1.5 length penalty" in text
    (True, True)
    """
    others = tuple(name for name in RECIPES.names() if RECIPES.get(name).section is None)  # listed after the sections
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
    for section, recipes in sections():
        lines += [f"## §{section.number}. {section.title}", ""]
        for recipe in recipes:
            lines += _recipe_block(recipe)
        if section.code:
            lines += ["*Released code*: " + ", ".join(f"[{r}](https://github.com/{r})" for r in section.code), ""]
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
