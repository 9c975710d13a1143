"""Every member, every round (issue 15): while a suite runs on a target with member devices
under it (an array: two or more devices at the bottom of its stack, such as md, dm over
several devices or a file on a btrfs of several devices, or an array ssdlab built), the
run reads each member's ``/sys/block/NAME/stat`` right before and after every measured fio
run and stores what the members did as one ``members`` event per round
(:class:`ssdlab.plan.member_rounds.MemberRound`).

A fio run with a warm-up (``ramp_time``: the peak finder, latency-iops, curves) does I/O
that fio does not report: its figures are the measured period's only. There the members
are read again at the first progress tick after fio's start-up and the warm-up, and the
round counts them from that reading to the end, against fio's host I/Os scaled to that
window (fio's measured seconds): rates over the same period, never warm-up I/Os against
measured ones. Without such a tick (a short run), no write penalty is given for the round.

A plain drive (one device at the bottom of the target's stack: a disk, a partition, a
loop device, the emulated SSD, a dm over one device) has no members: it is not sampled
and has no write penalty. Neither has a target with nothing below it (tmpfs, FUSE, a
network share), or whose members' statistics cannot be read; the run says why in one
event and goes on. Sampling only reads sysfs: it never fails a run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ssdlab.analysis.member_rounds import periods_between, textbook_penalty
from ssdlab.engine.model import FioOutput
from ssdlab.engine.runner import TickFn
from ssdlab.errors import TargetError
from ssdlab.plan.member_rounds import EVENT_KIND, MemberRound
from ssdlab.run.cpu_window import FIO_STARTUP_S
from ssdlab.store.db import Store
from ssdlab.targets.identity import PROC, SYSFS
from ssdlab.targets.members import StatReading, members_of_target, read_stats
from ssdlab.targets.nbd import NBD_KIND

T = TypeVar("T")

#: the kind of the event saying a run's members are not sampled, and why
OFF_KIND = "members-off"


@dataclass(frozen=True)
class Sample:
    """The members' readings right before and after one fio run; with a warm-up
    (``ramp_s``), the reading at the first tick after it (None: there was none)."""

    before: StatReading
    after: StatReading
    ramp_s: float = 0.0
    measured_from: StatReading | None = None


class RampWindow:
    """The members' reading at the first progress tick after fio's start-up and a warm-up
    of ``ramp_s``: where the measured period starts (:class:`ssdlab.run.cpu_window.
    CpuWindow` finds it the same way)."""

    def __init__(self, sampler: MemberSampler, ramp_s: float) -> None:
        self.sampler = sampler
        self.ramp_s = ramp_s
        self.from_s = ramp_s + FIO_STARTUP_S
        self.reading: StatReading | None = None

    def wrap(self, tick: TickFn) -> TickFn:
        """``tick``, with the reading taken at the first call past the warm-up."""
        def on_tick(elapsed_s: float) -> None:
            if self.reading is None and elapsed_s >= self.from_s:
                self.reading = self.sampler.read()
            tick(elapsed_s)
        return on_tick

    def of(self, sample: Sample) -> Sample:
        return dataclasses.replace(sample, ramp_s=self.ramp_s, measured_from=self.reading)


def measured_seconds(output: FioOutput | None) -> float | None:
    """The longest measured period fio reported over its jobs (None: none)."""
    runtimes = [max(j.read.runtime_ms, j.write.runtime_ms) for j in output.jobs] \
        if output is not None else []
    longest = max(runtimes, default=0)
    return longest / 1000 if longest > 0 else None


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
                 backend: str | None = None, sysfs: Path = SYSFS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.names = names
        self.level = level
        self.textbook = textbook_penalty(level, backend)
        self.sysfs = sysfs
        self.clock = clock

    def read(self) -> StatReading | None:
        """Every member's stat line now (None when one cannot be read: a member gone)."""
        try:
            return read_stats(self.names, sysfs=self.sysfs, clock=self.clock)
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
        backwards, a device re-created between them). After a warm-up, from the reading
        past it (module docstring)."""
        start = sample.measured_from or sample.before
        seconds = sample.after.at - start.at
        host_seconds = measured_seconds(output) if sample.measured_from else None
        note = None
        if sample.ramp_s > 0 and (sample.measured_from is None or host_seconds is None):
            note = ("the warm-up (ramp) could not be told apart from the measured period: "
                    "its I/Os are in the members' counts, not in fio's")
        try:
            periods = periods_between(start.lines, sample.after.lines, seconds)
        except ValueError:
            return None
        return MemberRound.build(round_no, phase, seconds, periods, host=host_io(output),
                                 level=self.level, textbook=self.textbook,
                                 last_round=last_round, host_seconds=host_seconds, note=note)

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
    if len(names) < 2 and level is None:
        plain = "is a plain drive" if kind == "block" else "is on a plain drive"
        return None, (f"member devices not sampled: {path} {plain} (one device below it, "
                      f"{names[0]}, and no array): no members to compare")
    sampler = MemberSampler(names, level=level, backend=backend, sysfs=sysfs)
    if sampler.read() is None:
        return None, (f"member devices not sampled: the I/O statistics of "
                      f"{', '.join(names)} cannot be read")
    return sampler, ""
