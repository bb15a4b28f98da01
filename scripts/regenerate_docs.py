"""Regenerate every file the library generates from its registries, in one command (docs/adding-a-method.md):

    python scripts/regenerate_docs.py           # rewrite them
    python scripts/regenerate_docs.py --check   # write nothing; exit 1 naming each file that drifted

- `README.md`: the recipe table between `<!-- recipes-table:start -->` and `<!-- recipes-table:end -->`
  (`trl_efficient.recipes.tables.recipes_table`);
- `docs/recipes.md`: the reward-builder table between `<!-- rewards-table:start -->` and `<!-- rewards-table:end -->`
  (`trl_efficient.recipes.tables.rewards_table`);
- `docs/methods.md`: the method reference (`trl_efficient.recipes.reference.render_reference`, what
  `python -m trl_efficient.recipes.reference docs/methods.md` writes).

(`trl-efficient recipes --update-readme PATH` rewrites the tables of one file; this script does all three.) Nothing
else is generated from the library's registries: docs/scale.md's table is the comparison instrument's (from its
specs: `trl-efficient testbed scale-table`), and those of docs/speed.md, docs/testbed*.md, docs/prompted.md and
docs/literature.md are measurements that perf/ and testbed commands write; a new method touches none of them. Needs
only the package itself (`pip install -e .`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Each generated file -> the markers of the tables it holds (`trl_efficient.recipes.tables.TABLES`), or None for a file
# rendered whole (docs/methods.md).
GENERATED: dict[str, tuple[str, ...] | None] = {
    "README.md": ("recipes-table",),
    "docs/recipes.md": ("rewards-table",),
    "docs/methods.md": None,
}


def _tables(markers: tuple[str, ...]) -> Callable[[str], str]:
    def render(text: str) -> str:
        from trl_efficient.recipes import tables

        sections = tables.generated_sections()
        for marker in markers:
            text = tables.replace_readme_section(text, marker, sections[marker])
        return text

    return render


def _reference(_text: str) -> str:
    from trl_efficient.recipes import reference

    return reference.render_reference()


def generated_files() -> list[tuple[str, Callable[[str], str]]]:
    """(path under the checkout, `render(current text) -> new text`) for every generated file."""
    return [(path, _reference if markers is None else _tables(markers)) for path, markers in GENERATED.items()]


def regenerate(root: str = ROOT, check: bool = False) -> list[str]:
    """Rewrite (or, with `check`, only compare) every generated file under `root`; the paths that differed. A file
    that lost a table's markers raises a `ValueError` naming it."""
    drifted = []
    for path, render in generated_files():
        full = os.path.join(root, path)
        with open(full, encoding="utf-8") as f:
            text = f.read()
        try:
            new = render(text)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from err
        if new != text:
            drifted.append(path)
            if not check:
                with open(full, "w", encoding="utf-8") as f:
                    f.write(new)
    return drifted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a generated file drifted")
    parser.add_argument("--root", default=ROOT, help="the checkout (default: this script's)")
    args = parser.parse_args(argv)
    drifted = regenerate(args.root, args.check)
    for path in drifted:
        verb = "differs from the registry: run `python scripts/regenerate_docs.py`" if args.check else "regenerated"
        print(f"{path}: {verb}", file=sys.stderr if args.check else sys.stdout)
    return 1 if args.check and drifted else 0


if __name__ == "__main__":
    raise SystemExit(main())
