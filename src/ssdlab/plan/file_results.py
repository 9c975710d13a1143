"""The result of a file-system preset's test: one record for the four presets (aja,
diskfill, smallfiles, copy): each measured phase (a fio phase or a timed copy, one stored
round each) with how it met the page cache, the means of each group, what became of the
work directory. Read back by the report (report/file_presets_pages.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.plan.filejobs import Direction
from ssdlab.plan.results import StoredPlan, TestParams

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


#: a measured phase: a fio phase or a timed copy
PhaseRecord = FioPhaseRecord | CopyPhaseRecord


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


# -- what a run stores beside its result ---------------------------------------------------


@dataclass(frozen=True)
class FilePresetPlan(StoredPlan):
    """A preset's stored plan: the preset's identity, the arguments and options, what it
    does in words, its one test, the page-cache policy."""

    preset: str = ""
    preset_version: int = 0
    preset_title: str = ""
    profile: str = ""
    args: JsonObject = field(default_factory=dict)
    options: JsonObject = field(default_factory=dict)
    summary: str = ""
    tests: tuple[str, ...] = ()
    page_cache: str = ""


@dataclass(frozen=True)
class FilePresetParams(TestParams):
    """The test's parameters: as the plan, and the directory it ran in."""

    preset: str = ""
    preset_version: int = 0
    preset_title: str = ""
    profile: str = ""
    options: JsonObject = field(default_factory=dict)
    summary: str = ""
    directory: JsonObject = field(default_factory=dict)
    page_cache: str = ""


@dataclass(frozen=True)
class PrepareStep(Record):
    """A phase that is not measured (a copy set's source files made by fio)."""

    phase: str
    label: str
    io_bytes: int
    files: int


@dataclass(frozen=True)
class WaitStep(Record):
    """A wait between phases: as planned, and as it took."""

    seconds: float
    waited_s: float


@dataclass(frozen=True)
class PhaseCell(Record):
    """A measured phase's cell as stored, a fio phase's or a copy's (each key where its
    record has it: plan/file_presets.py's ``phase_of`` reads it as its own record)."""

    OMIT_NONE = frozenset({"repetition", "block_bytes", "iops", "lat_mean_us", "command",
                           "frames", "frames_per_s"})

    cell: str
    label: str
    group: str
    direction: str
    repetition: int | None = None  # a copy
    io_bytes: int = 0
    files: int = 0
    file_bytes: int = 0
    block_bytes: int | None = None  # a fio phase
    seconds: float = 0.0
    timing: str = ""
    bw_bytes_per_s: float = 0.0
    iops: float | None = None  # a fio phase
    lat_mean_us: float | None = None  # a fio phase
    direct: bool = False
    cache: CacheRecord | None = None
    command: str | None = None  # a copy
    fsync: str | None = None
    frames: int | None = None  # AJA
    frames_per_s: float | None = None
