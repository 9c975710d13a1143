"""fio's data-verification failures, as it reports them (fio 3.33, ``verify=`` jobs).

With ``continue_on_error=verify`` fio reports every block that fails its check and goes
on; each failure is one line on standard error (or, mixed into the JSON, on standard
output), for example (wrapped here)::

    verify: bad magic header ac35, wanted acca at file /dev/loop0 offset 5242880,
        length 4096 (requested block: offset=5242880, length=131072)
    crc32c: verify failed at file /dev/loop0 offset 8192, length 4096
        (requested block: offset=0, length=131072)

``offset``/``length`` locate the failing verify interval on the target.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_FAILURE = re.compile(
    r"^(?P<what>[^\n]*?)\s+at file (?P<file>\S+) offset (?P<offset>\d+), length (?P<length>\d+)",
    re.M,
)


@dataclass(frozen=True)
class VerifyFailure:
    offset: int
    length: int
    what: str  # "verify: bad magic header ac35, wanted acca", "crc32c: verify failed"
    file: str


def verify_failures(*texts: str) -> list[VerifyFailure]:
    """Every failure fio reported in ``texts`` (stderr, stray stdout), in offset order,
    each location once."""
    seen: dict[tuple[int, int], VerifyFailure] = {}
    for text in texts:
        for m in _FAILURE.finditer(text or ""):
            key = (int(m["offset"]), int(m["length"]))
            seen.setdefault(key, VerifyFailure(key[0], key[1], m["what"].strip(), m["file"]))
    return sorted(seen.values(), key=lambda f: f.offset)


def ranges(failures: Iterable[VerifyFailure]) -> list[tuple[int, int]]:
    """Adjacent or overlapping failures merged: (offset, length) of each corrupt range."""
    merged: list[list[int]] = []
    for f in sorted(failures, key=lambda f: f.offset):
        if merged and f.offset <= merged[-1][0] + merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], f.offset + f.length - merged[-1][0])
        else:
            merged.append([f.offset, f.length])
    return [(a, b) for a, b in merged]
