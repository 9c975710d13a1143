"""The result of a file-system preset's test: one record for the four presets (aja,
diskfill, smallfiles, copy): each measured phase (a fio phase or a timed copy, one stored
round each) with how it met the page cache, the means of each group, what became of the
work directory. Read back by the report (report/file_presets_pages.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ssdlab.jsonrecord import Record
from ssdlab.plan.filejobs import Direction

#: how a write phase gets its data to the device, inside the time measured
WRITE_FSYNC = "fsync_on_close + end_fsync, inside the timed job"
COPY_FSYNC = "sync -f of the copy's file system, inside the timed copy"


def group_name(group: str, direction: str) -> str:
    """``write pass 1``, ``copy 100x1GiB``; ``write`` for a group named as its direction."""
    return group if group == direction else f"{direction} {group}"


@dataclass(frozen=True)
class CacheRecord(Record):
    """How a phase met the page cache: O_DIRECT, or buffered, the caches synced and
    dropped first (or why not: not a read, not root)."""

    OMIT_NONE = frozenset({"synced", "dropped", "why", "note"})

    direct: bool
    synced: bool | None = None
    dropped: bool | None = None
    why: str | None = None  # why the caches were not dropped
    note: str | None = None  # e.g. the files are in RAM (tmpfs)


@dataclass(frozen=True)
class FioPhaseRecord(Record):
    """A measured fio phase (one stored round): what it moved, in how long, how fast."""

    OMIT_NONE = frozenset({"frames", "frames_per_s"})

    cell: str  # the phase's key
    label: str
    group: str  # what the report groups by: a file size, a pass, a phase
    direction: Direction
    io_bytes: int
    files: int
    file_bytes: int
    block_bytes: int
    seconds: float
    timing: str  # where the seconds come from
    bw_bytes_per_s: float
    iops: float
    lat_mean_us: float
    direct: bool
    cache: CacheRecord
    fsync: str | None  # writes: the fsync inside the timed job; reads: None
    frames: int | None = None  # AJA: video frames in the file
    frames_per_s: float | None = None


@dataclass(frozen=True)
class CopyPhaseRecord(Record):
    """A timed copy of a file set (cp, then sync -f; one stored round)."""

    cell: str
    label: str
    group: str  # the file set
    direction: Literal["copy"]
    repetition: int
    io_bytes: int
    files: int
    file_bytes: int
    seconds: float
    timing: str
    bw_bytes_per_s: float
    direct: bool
    cache: CacheRecord
    command: str  # the copy command without its paths
    fsync: str


PhaseRecord = FioPhaseRecord | CopyPhaseRecord


def phase_of(cell: dict[str, Any], where: str = "phase") -> PhaseRecord:
    """A stored round's cell read as its phase record."""
    record: type[PhaseRecord] = (CopyPhaseRecord if cell.get("direction") == "copy"
                                 else FioPhaseRecord)
    return record.from_json(cell, where)


@dataclass(frozen=True)
class SummaryRow(Record):
    """The means over the measured phases of one group and direction (a set's copies)."""

    group: str
    direction: str
    count: int
    io_bytes: int
    mean_seconds: float
    mean_bw_bytes_per_s: float


@dataclass(frozen=True)
class Cleanup(Record):
    """The work directory (None: none was made) and whether it is gone."""

    work_dir: str | None
    removed: bool


@dataclass(frozen=True)
class FilePresetResult(Record):
    """A preset's test. Complete: every measured phase, their means, the cleanup, notes
    (e.g. O_DIRECT refused) and a one-line message. Failed or stopped: the error and the
    cleanup. Running: nothing yet."""

    OMIT_NONE = frozenset({"error", "phases", "summary", "cleanup", "notes", "message"})

    error: str | None = None
    phases: list[PhaseRecord] | None = None
    summary: list[SummaryRow] | None = None
    cleanup: Cleanup | None = None
    notes: list[str] | None = None
    message: str | None = None
