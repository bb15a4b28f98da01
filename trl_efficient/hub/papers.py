"""The one home of paper citations: arXiv id -> title and authors, and the BibTeX entry a model card prints.

Titles and authors were checked, entry by entry, against the authors' own BibTeX in the method's repository (the
"Source repositories" of `methods.md`) or the paper's arXiv listing; each entry of `hub_cards/papers.yaml` names
which (`checked`). Titles are the arXiv titles (not the method's short name, e.g. 2509.23962 has no "CANON:"
prefix). Where only part of the author list could be checked, the entry ends in BibTeX's `and others`, or has no
author at all: a shorter entry, never an invented one. Every entry carries `eprint`/`archivePrefix` and the paper's
arXiv page, so a reader can always reach the paper.

>>> print(bibtex("2503.04697").splitlines()[0])
@misc{arxiv2503_04697,
>>> "https://arxiv.org/abs/2503.04697" in bibtex("2503.04697")
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PAPERS", "Paper", "arxiv_url", "bibtex", "trl_bibtex"]

_ARXIV_ID = re.compile(r"^\d{4}\.\d{4,5}$")


@dataclass(frozen=True)
class Paper:
    """A cited paper: `title`, `authors` (BibTeX `author` value; `""` when unchecked) and `arxiv_id`."""

    arxiv_id: str
    title: str
    authors: str = ""

    @property
    def year(self) -> int:
        """The year of the first arXiv version: the id's `YYMM` prefix (2503.04697 -> 2025)."""
        return 2000 + int(self.arxiv_id[:2])


def _load_papers() -> dict[str, Paper]:
    """`hub_cards/papers.yaml`, the checked entries (package data, so a new paper is a data edit)."""
    from importlib import resources

    import yaml

    text = resources.files("trl_efficient").joinpath("hub_cards", "papers.yaml").read_text(encoding="utf-8")
    return {arxiv_id: Paper(arxiv_id, entry["title"], entry.get("authors", "")) for arxiv_id, entry in
            yaml.safe_load(text).items()}  # fmt: skip


PAPERS: dict[str, Paper] = _load_papers()


def trl_bibtex() -> str | None:
    """TRL's own citation, read from TRL's model-card template (`trl/templates/lm_model_card.md`, the `{% raw %}`
    block) so it is never retyped here; `None` if that template is not found."""
    from importlib import resources

    try:
        text = resources.files("trl").joinpath("templates", "lm_model_card.md").read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError, OSError):
        return None
    found = re.search(r"\{% raw %\}(.*?vonwerra2020trl.*?)\{% endraw %\}", text, flags=re.DOTALL)
    return found.group(1).strip() if found else None


def arxiv_url(arxiv_id: str) -> str:
    """The paper's arXiv abstract page; a malformed id is a `ValueError` (a card never links a made-up page)."""
    if not _ARXIV_ID.match(str(arxiv_id)):
        raise ValueError(f"not an arXiv id (YYMM.NNNNN): {arxiv_id!r}")
    return f"https://arxiv.org/abs/{arxiv_id}"


def bibtex(arxiv_id: str) -> str:
    """The BibTeX entry of `arxiv_id`. An id missing from `PAPERS` (a new method's paper whose title and authors no
    one has checked yet) gets the short entry this module allows, never an invented one: no title or author, only
    the year, the eprint and the arXiv page, so a card still cites it and a reader can reach it. A malformed id is a
    `ValueError` (`arxiv_url`).

    >>> print(bibtex("2504.01296"))
    @misc{arxiv2504_01296,
      year          = {2025},
      eprint        = {2504.01296},
      archivePrefix = {arXiv},
      url           = {https://arxiv.org/abs/2504.01296}
    }
    """
    paper = PAPERS.get(arxiv_id) or Paper(str(arxiv_id), "")
    arxiv_url(paper.arxiv_id)  # a malformed id raises here, before the year is read from it
    fields = [("title", "{" + paper.title + "}")] if paper.title else []
    if paper.authors:
        fields.append(("author", paper.authors))
    fields += [
        ("year", str(paper.year)),
        ("eprint", paper.arxiv_id),
        ("archivePrefix", "arXiv"),
        ("url", arxiv_url(paper.arxiv_id)),
    ]
    body = ",\n".join(f"  {k:<13} = {{{v}}}" for k, v in fields)
    return f"@misc{{arxiv{arxiv_id.replace('.', '_')},\n{body}\n}}"
