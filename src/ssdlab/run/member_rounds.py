"""Every member, every round (issue 15): while a suite runs on a target with member
devices under it (an array, a partition, a loop device, a file on a btrfs file system),
the run reads each member's ``/sys/block/NAME/stat`` right before and after every measured
fio run and stores what the members did as one ``members`` event per round
(:class:`ssdlab.plan.member_rounds.MemberRound`).

A target with nothing below it (tmpfs, FUSE such as the emulated SSD's file, a network
share), or whose members' statistics cannot be read, is not sampled; the run says so in
one event and goes on. Sampling only reads sysfs: it never fails a run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ssdlab.analysis.member_rounds import periods_between, textbook_penalty
from ssdlab.engine.model import FioOutput
from ssdlab.errors import TargetError
from ssdlab.plan.member_rounds import EVENT_KIND, MemberRound
from ssdlab.store.db import Store
from ssdlab.targets.identity import PROC, SYSFS
from ssdlab.targets.members import StatReading, members_of_target, read_stats
from ssdlab.targets.nbd import NBD_KIND

T = TypeVar("T")

#: the kind of the event saying a run's members are not sampled, and why
OFF_KIND = "members-off"


@dataclass(frozen=True)
class Sample:
    """The members' readings right before and after one measured period."""

    before: StatReading
    after: StatReading


def host_io(output: FioOutput | None) -> tuple[int, int, int, int]:
    """Read I/Os, write I/Os, read bytes and write bytes fio completed, over every job."""
    if output is None:
        return 0, 0, 0, 0
    jobs = output.jobs
    return (sum(j.read.total_ios for j in jobs), sum(j.write.total_ios for j in jobs),
            sum(j.read.io_bytes for j in jobs), sum(j.write.io_bytes for j in jobs))


def array_level(details: Mapping[str, object]) -> tuple[str | None, str | None]:
    """The RAID level and backend of an array ssdlab built (``details["array"]``), else
    (None, None)."""
    array = details.get("array")
    if not isinstance(array, Mapping):
        return None, None
    level, backend = array.get("level"), array.get("backend")
    return (level if isinstance(level, str) else None,
            backend if isinstance(backend, str) else None)


class MemberSampler:
    """The members under one target, read around measured periods."""

    def __init__(self, names: list[str], *, level: str | None = None,
                 backend: str | None = None, sysfs: Path = SYSFS) -> None:
        self.names = names
        self.level = level
        self.textbook = textbook_penalty(level, backend)
        self.sysfs = sysfs

    def read(self) -> StatReading | None:
        """Every member's stat line now (None when one cannot be read: a member gone)."""
        try:
            return read_stats(self.names, sysfs=self.sysfs)
        except (TargetError, OSError):
            return None

    def sample(self, measured: Callable[[], T]) -> tuple[T, Sample | None]:
        """``measured()`` between two readings: its result and the readings (None when
        either could not be taken). Exceptions of ``measured`` go through unchanged."""
        before = self.read()
        result = measured()
        after = self.read() if before is not None else None
        return result, Sample(before, after) if before is not None and after is not None \
            else None

    def record(self, sample: Sample, round_no: int, phase: str, output: FioOutput | None,
               *, last_round: int | None = None) -> MemberRound | None:
        """The round's record (None when the readings do not make one: a counter that went
        backwards, a device re-created between them)."""
        seconds = sample.after.at - sample.before.at
        try:
            periods = periods_between(sample.before.lines, sample.after.lines, seconds)
        except ValueError:
            return None
        return MemberRound.build(round_no, phase, seconds, periods, host=host_io(output),
                                 level=self.level, textbook=self.textbook,
                                 last_round=last_round)

    def store(self, store: Store, run_id: str, test: str, sample: Sample, round_no: int,
              phase: str, output: FioOutput | None, *,
              last_round: int | None = None) -> MemberRound | None:
        """Store the round's ``members`` event; the record stored (None: none was)."""
        record = self.record(sample, round_no, phase, output, last_round=last_round)
        if record is not None:
            store.add_event(run_id, test, EVENT_KIND, record.message, record.to_json())
        return record


def find_sampler(path: str, kind: str, name: str, details: Mapping[str, object], *,
                 sysfs: Path = SYSFS, proc: Path = PROC) -> tuple[MemberSampler | None, str]:
    """The sampler of a target's members (a block device ``name``, else the file or
    directory ``path``), or None and why there is none (one line)."""
    if kind == NBD_KIND:
        return None, (f"member devices not sampled: {path} is an NBD export; its devices "
                      "are the server's")
    try:
        names = members_of_target(path, kind, name, sysfs=sysfs, proc=proc)
    except (TargetError, OSError) as exc:
        return None, f"member devices not sampled: cannot find those under {path} ({exc})"
    if not names:
        return None, (f"member devices not sampled: {path} has no block device below it "
                      "(tmpfs, FUSE, a network file system)")
    level, backend = array_level(details)
    sampler = MemberSampler(names, level=level, backend=backend, sysfs=sysfs)
    if sampler.read() is None:
        return None, (f"member devices not sampled: the I/O statistics of "
                      f"{', '.join(names)} cannot be read")
    return sampler, ""
