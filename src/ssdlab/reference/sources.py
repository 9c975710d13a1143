"""The documents the packaged reference figures come from, cited so that a reader can find
them.

The data files (``data/vendor-specs.csv``, ``data/published-db.csv``) name a document by
its key in the project's reference collection (``001_7e2a2261cc4b3893.txt``), a file
ssdlab does not ship. ``data/sources.csv`` gives each key what the document itself
states: its title, language, where and when it was published, and in English what it is
about; an empty cell is something the document does not state.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from importlib import resources

SOURCES_RESOURCE = "data/sources.csv"


@dataclass(frozen=True)
class Source:
    """One reference document."""

    id: str  # the data files' key
    about: str  # what it is, in English
    title: str  # as the document gives it ("" when it has none)
    language: str
    where: str  # where it was published, when the document says
    published: str  # its date (YYYY-MM-DD), when the document says

    def cite(self) -> str:
        """``Toshiba CD5 and CM5-R NVMe SSDs: "Тестирование SSD Toshiba CD5 и CM5-R", a
        review in Russian, 2019-07-11``."""
        parts = [f'"{self.title}"' if self.title else "", f"a review in {self.language}",
                 self.where, self.published]
        return f"{self.about}: " + ", ".join(p for p in parts if p)


@cache
def load_sources() -> dict[str, Source]:
    """The packaged documents by key."""
    text = resources.files("ssdlab.reference").joinpath(SOURCES_RESOURCE).read_text(
        encoding="utf-8")
    return {row["source"]: Source(row["source"], row["about"], row["title"], row["language"],
                                  row["where"], row["published"])
            for row in csv.DictReader(io.StringIO(text))}


def cite(source: str) -> str:
    """How to cite the document ``source`` names: the packaged document's citation, or
    ``source`` as given (a user's own data names its documents as it likes)."""
    known = load_sources().get(source)
    return known.cite() if known is not None else source


def shipped(resource: str) -> str:
    """Where the package data ``resource`` (``data/vendor-specs.csv``) is on this host."""
    return str(resources.files("ssdlab.reference").joinpath(resource))
