"""Typed, frozen descriptions of fio work. Pure data: no I/O happens here.

A :class:`FioJob` is one fio invocation (one job file). It holds one or more
:class:`CellSpec` sections that fio runs one after another (``stonewall``), each a
reporting group of ``threads`` jobs, so one round of a PTS test is one fio run.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Protocol

from ssdlab.jsonrecord import JsonObject

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
#: --purge: targets/purge.py keeps the same list (docs/pts.md, "Before each test")
PURGE_METHODS = ("auto", "blkdiscard", "nvme-format", "nvme-sanitize", "ata-secure-erase",
                 "scsi-sanitize", "none")
IOENGINES = ("libaio", "io_uring", "psync", "sync")
#: a target named by one of these is an NBD export, which fio reaches through its ``nbd``
#: engine with ``uri=`` (targets/nbd.py keeps the same schemes)
NBD_URI_PREFIXES = ("nbd://", "nbd+unix://")
NBD_ENGINE = "nbd"


def is_nbd_uri(target: str | None) -> bool:
    """Whether a job's target is an NBD export's URI (not a file or device path)."""
    return target is not None and target.lower().startswith(NBD_URI_PREFIXES)


class Pattern(enum.StrEnum):
    RANDOM = "random"
    SEQUENTIAL = "sequential"


@dataclass(frozen=True)
class Mix:
    """A read/write mix as the SNIA tables write it: ``65/35`` is 65 % reads."""

    read_pct: int

    def __post_init__(self) -> None:
        if not 0 <= self.read_pct <= 100:
            raise ValueError(f"read share must be 0..100, got {self.read_pct}")

    @property
    def write_pct(self) -> int:
        return 100 - self.read_pct

    @property
    def label(self) -> str:
        return f"{self.read_pct}/{self.write_pct}"

    @classmethod
    def parse(cls, text: str) -> Mix:
        """``"65/35"`` or ``"65"`` -> Mix(65). Raises ValueError on anything else."""
        parts = text.strip().split("/")
        if len(parts) == 2 and _digits(parts[0]) and _digits(parts[1]):
            read, write = int(parts[0]), int(parts[1])
            if read + write != 100:
                raise ValueError(f"mix {text!r} does not add up to 100")
            return cls(read)
        if len(parts) == 1 and _digits(parts[0]):
            return cls(int(parts[0]))
        raise ValueError(f"mix {text!r} is not of the form R/W, e.g. 65/35")


def _digits(text: str) -> bool:
    """A short run of ASCII digits (``str.isdigit`` also accepts '²', which int() refuses)."""
    text = text.strip()
    return text.isascii() and text.isdigit() and len(text) <= 9


def block_label(block_bytes: int) -> str:
    """1024 KiB style label used in tables: 512 -> '0.5 KiB', 4096 -> '4 KiB'."""
    kib = block_bytes / KIB
    if kib == int(kib):
        return f"{int(kib)} KiB"
    return f"{kib:g} KiB"


def cell_name(test: str, block_bytes: int, read_pct: int) -> str:
    """A cell's name in a test's round: ``iops_bs4096_r65``."""
    return f"{test}_bs{block_bytes}_r{read_pct}"


def cell_label(block_bytes: int, read_pct: int) -> str:
    """A cell as tables and messages say it: ``4 KiB 65/35``."""
    return f"{block_label(block_bytes)} {Mix(read_pct).label}"


def sector_blocks(blocks: tuple[int, ...], mixes: tuple[int, ...], logical_sector: int
                  ) -> tuple[tuple[int, ...], tuple[tuple[str, str], ...]]:
    """The block sizes a device of ``logical_sector``-byte sectors takes (whole sectors),
    and the cells of the others, one per mix, as (label, why it is skipped)."""
    kept = tuple(b for b in blocks if b % logical_sector == 0)
    skipped = tuple(
        (cell_label(b, m), f"{block_label(b)} is smaller than or not a multiple of the "
         f"device's {logical_sector}-byte logical sector")
        for b in blocks if b % logical_sector for m in mixes
    )
    return kept, skipped


#: the active range is aligned to the largest block size
RANGE_ALIGN = MIB


@dataclass(frozen=True)
class ActiveRange:
    """The part of the target a test's I/O stays in (the SNIA active range)."""

    offset_bytes: int
    size_bytes: int


def active_range(capacity_bytes: int, pct: float) -> ActiveRange:
    """The first ``pct`` % of the capacity, aligned down to :data:`RANGE_ALIGN`."""
    size = int(capacity_bytes * pct / 100)
    size -= size % RANGE_ALIGN
    return ActiveRange(0, size)


@dataclass(frozen=True)
class CellSpec:
    """One workload cell: a block size, a mix and an access pattern at a load.

    Either time based (``runtime_s``) or size based (``io_bytes``): exactly one is set.
    ``offset_bytes``/``size_bytes`` restrict I/O to the active range.
    """

    name: str
    pattern: Pattern
    block_bytes: int
    mix: Mix
    threads: int
    iodepth: int
    offset_bytes: int
    size_bytes: int
    runtime_s: float | None = None
    ramp_s: float = 0.0
    io_bytes: int | None = None

    def __post_init__(self) -> None:
        if (self.runtime_s is None) == (self.io_bytes is None):
            raise ValueError("a cell is either time based or size based")
        if self.block_bytes <= 0 or self.threads <= 0 or self.iodepth <= 0:
            raise ValueError("block size, threads and iodepth must be positive")

    @property
    def fio_rw(self) -> str:
        """fio's ``rw=`` value for this pattern and mix."""
        rnd = self.pattern is Pattern.RANDOM
        if self.mix.read_pct == 100:
            return "randread" if rnd else "read"
        if self.mix.read_pct == 0:
            return "randwrite" if rnd else "write"
        return "randrw" if rnd else "rw"

    @property
    def planned_seconds(self) -> float | None:
        return None if self.runtime_s is None else self.runtime_s + self.ramp_s



class JobText(Protocol):
    """What a plan is given to write its fio job files with: (cells, what the job does,
    extra global options) -> the job file's text, headed as the run heads it."""

    def __call__(self, cells: tuple[CellSpec, ...], what: str,
                 extra: tuple[tuple[str, str], ...] = (), /) -> str: ...


@dataclass(frozen=True)
class JobSection:
    """A job section that is not a :class:`CellSpec` (a curve point, a trace replay): its
    name and its fio options in order, as fio reads them."""

    name: str
    options: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class FioJob:
    """One fio invocation: global options plus the cells, run in order, then the other
    sections.

    ``target_path`` None: the sections say what is read and where it goes (a trace
    replay: ``read_iolog`` and ``replay_redirect``), so the global options name no file.
    """

    target_path: str | None
    cells: tuple[CellSpec, ...]
    ioengine: str = "libaio"
    direct: bool = True
    json_plus: bool = False
    percentiles: tuple[float, ...] = (50.0, 99.0, 99.9, 99.99)
    extra_global: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    sections: tuple[JobSection, ...] = ()

    @property
    def planned_seconds(self) -> float | None:
        """Wall time if every cell is time based, else None."""
        total = 0.0
        for cell in self.cells:
            secs = cell.planned_seconds
            if secs is None:
                return None
            total += secs
        return total


def cell_dict(cell: CellSpec) -> JsonObject:
    """A cell's spec as stored with a test's parameters (pattern and mix as plain values)."""
    data: JsonObject = dataclasses.asdict(cell)
    data["pattern"] = str(cell.pattern)
    data["read_pct"] = cell.mix.read_pct
    del data["mix"]
    return data
