"""Where a results store is: an SQLite file (the default) or a PostgreSQL database.

``--store`` and ``$SSDLAB_STORE`` take either a file path (``results.sqlite``,
``~/lab/results.sqlite``, ``sqlite:///abs/path``) or a PostgreSQL URL
(``postgresql://user@host/db``, ``postgres://...``, with libpq's query parameters such
as ``?host=/run/pg`` for a Unix socket or ``?sslmode=require``). Any other
``scheme://`` is refused with one line: before this type existed,
``--store postgresql://x/y`` silently made a directory ``postgresql:`` and an SQLite
file in it. Messages show :meth:`StoreLocation.display`, which never shows a password
(the mask of :mod:`ssdlab.store.masking`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ssdlab.errors import UserError
from ssdlab.store.masking import redact

__all__ = ["DEFAULT_STORE_ENV", "StoreLocation", "default_store_location", "redact"]

DEFAULT_STORE_ENV = "SSDLAB_STORE"
SQLITE = "sqlite"
POSTGRESQL = "postgresql"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(//)?")
_PG_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class StoreLocation:
    """A results store's place: ``kind`` is "sqlite" (``path``) or "postgresql" (``url``)."""

    kind: str
    path: Path | None = None
    url: str | None = None

    @classmethod
    def parse(cls, text: str | Path) -> StoreLocation:
        """The location ``text`` names; UserError (one line) when it names none we can use."""
        if isinstance(text, Path):
            return cls(SQLITE, path=text.expanduser())
        text = text.strip()
        if not text:
            raise UserError("the results store location is empty: give a file path or "
                            "postgresql://USER@HOST/DATABASE")
        match = _SCHEME.match(text)
        if match is None or len(match.group(1)) == 1:  # "C:..." is no scheme, nor is "a.db"
            return cls(SQLITE, path=Path(text).expanduser())
        scheme = match.group(1).lower()
        if scheme in _PG_SCHEMES:
            if not match.group(2):
                raise UserError(f"results store {redact(text)!r} is not a PostgreSQL URL: "
                                "write postgresql://USER@HOST[:PORT]/DATABASE")
            return cls(POSTGRESQL, url=text)
        if scheme == SQLITE:
            rest = text[len(match.group(1)) + 1:]
            rest = rest[2:] if rest.startswith("//") else rest  # sqlite:///abs, sqlite:rel
            if not rest:
                raise UserError(f"results store {text!r} names no file: write "
                                "sqlite:///PATH or just the PATH")
            return cls(SQLITE, path=Path(rest).expanduser())
        if not match.group(2):
            return cls(SQLITE, path=Path(text).expanduser())  # "run:2.sqlite" is a file name
        raise UserError(f"results store {redact(text)!r}: ssdlab stores results in an SQLite "
                        f"file or a PostgreSQL database, not {scheme}:; give a file path or "
                        "postgresql://USER@HOST/DATABASE")

    @property
    def is_postgresql(self) -> bool:
        return self.kind == POSTGRESQL

    def sqlite_path(self) -> Path:
        if self.path is None:
            raise ValueError(f"{self} is not an SQLite store")
        return self.path

    def display(self) -> str:
        """The location for messages: the path, or the URL without any password."""
        if self.path is not None:
            return str(self.path)
        return redact(self.url or "")

    def __str__(self) -> str:
        return self.display()

    def exists(self) -> bool:
        """False when this is an SQLite file not made yet (a database server is asked
        only when the store is opened)."""
        return self.path is None or self.path.exists()


def default_store_location() -> StoreLocation:
    """``$SSDLAB_STORE``, else ``$XDG_DATA_HOME/ssdlab/results.sqlite``, else ~/.local/share."""
    explicit = os.environ.get(DEFAULT_STORE_ENV)
    if explicit:
        try:
            return StoreLocation.parse(explicit)
        except UserError as exc:
            raise UserError(f"${DEFAULT_STORE_ENV}: {exc}") from None
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return StoreLocation(SQLITE, path=base / "ssdlab" / "results.sqlite")
