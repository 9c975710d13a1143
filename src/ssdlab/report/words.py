"""Stored values as a reader reads them, wherever a report, ``show`` or an export prints a
value it did not format itself: never Python's ``True``, ``False`` or ``None``."""

from __future__ import annotations

from collections.abc import Mapping

#: a value that was not recorded, or is empty
MISSING = "-"


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


def plain(value: object) -> str:
    """``value`` in words: a flag as yes or no, nothing as "-", a list as its items
    separated by commas, a mapping as "key value" pairs (underscores as spaces)."""
    if value is None or value == "":
        return MISSING
    if isinstance(value, bool):
        return yes_no(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{str(k).replace('_', ' ')} {plain(v)}" for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(plain(v) for v in value) or MISSING
    return str(value)
