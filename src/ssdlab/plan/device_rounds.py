"""What the devices below a target moved over each measured fio run, beside what fio
moved: the evidence of the cache-bound check (docs/consistency.md).

Every run on a target with a block device below it (a drive, a partition, a loop device,
an array, a file on a file system of one or more devices) reads the devices'
``/sys/block/NAME/stat`` right before and after each measured fio run, and, where the fio
gate runs the round's cells one after another (engine/gate.py), right before each cell's
jobs are released: one event of kind :data:`EVENT_KIND` per round, its detail a
:class:`DeviceRound`. The check (run/consistency.py) reads them back with
:func:`device_rounds`. Member figures (write penalty, imbalance) are another matter, kept
where members exist (plan/member_rounds.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ssdlab.jsonrecord import Record, key
from ssdlab.plan.member_rounds import round_label

#: the kind of the events that hold a round's device counts
EVENT_KIND = "devices"


def mib(n: float) -> str:
    """Bytes as MiB in words: ``120 MiB``, ``0.3 MiB``, ``0 MiB``."""
    value = n / 2**20
    if value == 0:
        return "0 MiB"
    return f"{value:,.0f} MiB" if value >= 10 else f"{value:,.1f} MiB" if value >= 0.05 \
        else f"{value:,.3f} MiB"


@dataclass(frozen=True)
class DeviceIO(Record):
    """One stretch of a fio run: the cells (fio jobs, by name) that ran in it, the bytes
    fio read and wrote in them and the bytes the devices below read and wrote over it, and
    in how many I/Os (their size tells direct I/O from pages of the page cache)."""

    cells: list[str] = field(default_factory=list)
    seconds: float = 0.0
    host_read_bytes: int = 0
    host_write_bytes: int = 0
    device_read_bytes: int = 0
    device_write_bytes: int = 0
    device_reads: int = 0
    device_writes: int = 0

    @property
    def message(self) -> str:
        return (f"fio read {mib(self.host_read_bytes)}, wrote {mib(self.host_write_bytes)}; "
                f"the devices below read {mib(self.device_read_bytes)}, wrote "
                f"{mib(self.device_write_bytes)}")


@dataclass(frozen=True)
class DeviceRound(Record):
    """One measured fio run of a test: the devices below the target, what fio and they
    moved over the whole run (``total``) and, where the gate released its cells one after
    another, over each cell's stretch (``cells``; empty: they could not be told apart).
    A fio run a suite cuts into several rounds has one record, to ``last_round``. A file
    target also says how much of it had never been written (``never_written``)."""

    OMIT_NONE: ClassVar[frozenset[str]] = frozenset({"last_round", "never_written"})

    round_no: int = key("round")
    phase: str = ""
    devices: list[str] = field(default_factory=list)
    total: DeviceIO = field(default_factory=DeviceIO)
    cells: list[DeviceIO] = field(default_factory=list)
    last_round: int | None = None
    #: a file target: the share of it no write had reached right before the fio run (its
    #: holes and allocated but unwritten extents, which read as zeros without the drive)
    never_written: float | None = None

    @property
    def message(self) -> str:
        """``devices loop4, loop5 over round 3: fio read 40 MiB, wrote 0 MiB; the devices
        below read 0.1 MiB, wrote 0 MiB (9 cells apart)``."""
        apart = f" ({len(self.cells)} cells apart)" if self.cells else ""
        return (f"devices {', '.join(self.devices)} over "
                f"{round_label(self.round_no, self.last_round)}: {self.total.message}{apart}")


def device_rounds(events: Iterable[Any]) -> dict[str, list[DeviceRound]]:
    """A run's device rounds by test, each test's in round order (StoredDataError when a
    stored one does not have the record's shape)."""
    out: dict[str, list[DeviceRound]] = {}
    for event in events:
        if event.kind != EVENT_KIND or not isinstance(event.detail, Mapping):
            continue
        test = event.test or ""
        out.setdefault(test, []).append(
            DeviceRound.from_json(dict(event.detail), f"{test} devices event"))
    for rounds in out.values():
        rounds.sort(key=lambda r: r.round_no)
    return out


__all__ = ["EVENT_KIND", "DeviceIO", "DeviceRound", "device_rounds", "mib"]
