"""Option values more than one suite reads the same way: a choice among names, a comma
list of block sizes or of read/write mixes. Every failure is a one-line
:class:`UserError` naming the option, the bad value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable

from ssdlab.errors import UserError
from ssdlab.plan.specs import IOENGINES, KIB, PURGE_METHODS, Mix
from ssdlab.units import parse_size


def choice(option: str, value: str, allowed: tuple[str, ...] | list[str]) -> str:
    if value not in allowed:
        raise UserError(f"{option} {value!r} is not one of: {', '.join(allowed)}")
    return value


def purge_and_engine(purge: str, ioengine: str, purges: tuple[str, ...] = PURGE_METHODS
                     ) -> None:
    """``--purge`` (one of ``purges``) and ``--ioengine``, checked in that order."""
    choice("--purge", purge, purges)
    choice("--ioengine", ioengine, IOENGINES)


def parse_block_sizes(option: str, text: str) -> tuple[int, ...]:
    """``1024,128,4,0.5`` (KiB, as the SNIA tables) or with units: ``4k,512b``."""
    def block_size(part: str) -> int:
        size = parse_size(part, default_unit="kib")
        if size <= 0 or size % 512:
            raise UserError(f"{option}: {part!r} must be a positive multiple of 512 bytes")
        if size > 64 * 1024 * KIB:
            raise UserError(f"{option}: {part!r} is larger than 64 MiB")
        return size
    return parse_list(option, text, block_size, "block size",
                      "block sizes in KiB, e.g. 4,64 or 4k,512b")


def parse_mixes(option: str, text: str) -> tuple[int, ...]:
    return parse_list(option, text, lambda part: Mix.parse(part).read_pct, "mix",
                      "read/write mixes, e.g. 100/0,65/35,0/100")


def parse_list(option: str, text: str, parse: Callable[[str], int], item: str,
               example: str) -> tuple[int, ...]:
    """A comma list, each entry read by ``parse`` (its ValueError names ``option``), no
    ``item`` twice; an empty one asks for ``example``."""
    if not text.strip():
        raise UserError(f"{option} is empty; give {example}")
    values: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            values.append(parse(part))
        except ValueError as exc:
            raise UserError(f"{option}: {exc}") from None
    if len(set(values)) != len(values):
        raise UserError(f"{option}: {text!r} lists a {item} twice")
    return tuple(values)
