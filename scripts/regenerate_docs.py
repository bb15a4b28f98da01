"""Regenerate every file the library generates from its registries, in one command (docs/adding-a-method.md):

    python scripts/regenerate_docs.py           # rewrite them
    python scripts/regenerate_docs.py --check   # write nothing; exit 1 naming each file that drifted

- `README.md`: the recipe and reward tables between their markers (`trl_efficient.recipes.tables.update_readme`, what
  `trl-efficient recipes --update-readme README.md` writes);
- `docs/methods.md`: the method reference (`trl_efficient.recipes.reference.render_reference`, what
  `python -m trl_efficient.recipes.reference docs/methods.md` writes).

Nothing else is generated from the library's registries; `docs/scale.md`'s table belongs to the comparison instrument
(`trl-efficient testbed scale-table`), and a library recipe declares nothing for it. Needs only the package itself
(`pip install -e .`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generated_files() -> list[tuple[str, Callable[[str], str]]]:
    """(path under the checkout, `render(current text) -> new text`) for every generated file."""
    from trl_efficient.recipes import reference, tables

    return [("README.md", tables.update_readme), ("docs/methods.md", lambda _text: reference.render_reference())]


def regenerate(root: str = ROOT, check: bool = False) -> list[str]:
    """Rewrite (or, with `check`, only compare) every generated file under `root`; the paths that differed."""
    drifted = []
    for path, render in generated_files():
        full = os.path.join(root, path)
        with open(full, encoding="utf-8") as f:
            text = f.read()
        new = render(text)
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
