"""Every member, every round (issue 15): while a suite runs on a target with member devices
under it (an array: two or more devices at the bottom of its stack, such as md, dm over
several devices or a file on a btrfs of several devices, or an array ssdlab built), the
run reads each member's ``/sys/block/NAME/stat`` right before and after every measured fio
run and stores what the members did as one ``members`` event per round
(:class:`ssdlab.plan.member_rounds.MemberRound`).

A fio run with a warm-up (``ramp_time``: the peak finder, latency-iops, curves) does I/O
that fio does not report: its figures are the measured period's only. There the members
are read again at every progress tick after fio's start-up and the warm-up, and the round
counts them from the first of those readings taken after fio's I/O began to the end of
fio's I/O, against fio's host I/Os scaled to that window (fio's measured seconds): rates
over the same period, never warm-up I/Os against measured ones. The end is where fio
stamped its JSON output (``timestamp_ms``), as it wrote its results, not the reading after
fio exited: on a loaded host fio's start-up can take half a second more than
:data:`ssdlab.run.cpu_window.FIO_STARTUP_S` and its exit a few tenths, idle time that
counted as I/O time lowered the penalty (a mirror measured 1.68). Both ends are only as
exact as the host's scheduling (fio stamps its output up to a few tenths of a second after
its last I/O on a loaded host): the longer the measured period, the closer the figure.
Without a stamp the period ends at the reading after fio exited; without a tick after the
warm-up (a short run), no write penalty is given.

A plain drive (one device at the bottom of the target's stack: a disk, a partition, a
loop device, the emulated SSD, a dm over one device) has no members: no ``members``
event and no write penalty, and one ``members-off`` event says so. Its device is read all
the same, as every target's devices are: each round stores one ``devices`` event
(:class:`ssdlab.plan.device_rounds.DeviceRound`), the bytes fio and the devices below
moved over the fio run and, where the fio gate releases the round's cells one after
another (engine/gate.py), over each cell; the cache-bound check judges them
(docs/consistency.md). A target with nothing below it (tmpfs, FUSE, a network share), or
whose devices' statistics cannot be read, is not sampled; the run says why in one event
and goes on. Sampling only reads sysfs: it never fails a run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ssdlab.analysis.member_rounds import periods_between, textbook_penalty
from ssdlab.analysis.members import MemberPeriod
from ssdlab.engine.gate import watching
from ssdlab.engine.jobtext import JobFileError, job_file_of, positions
from ssdlab.engine.model import FioOutput
from ssdlab.engine.runner import TickFn
from ssdlab.errors import TargetError
from ssdlab.plan.device_rounds import EVENT_KIND as DEVICES_KIND
from ssdlab.plan.device_rounds import DeviceIO, DeviceRound
from ssdlab.plan.member_rounds import EVENT_KIND, MemberRound
from ssdlab.run.cpu_window import FIO_STARTUP_S
from ssdlab.store.db import Store
from ssdlab.targets.extents import never_written_share
from ssdlab.targets.identity import PROC, SYSFS
from ssdlab.targets.members import StatReading, members_of_target, read_stats
from ssdlab.targets.nbd import NBD_KIND

T = TypeVar("T")

#: the kind of the event saying a run's members are not sampled, and why
OFF_KIND = "members-off"


@dataclass(frozen=True)
class Sample:
    """The members' readings right before and after one fio run; with a warm-up
    (``ramp_s``), the reading at the first tick after it (None: there was none); and the
    readings the fio gate asked for right before it released each position's jobs
    (``opened``: the position's number and the reading)."""

    before: StatReading
    after: StatReading
    ramp_s: float = 0.0
    measured_from: StatReading | None = None
    opened: tuple[tuple[int, StatReading], ...] = ()
    never_written: float | None = None  # a file target's share no write had reached
    #: the readings at the ticks after ``measured_from``
    later: tuple[StatReading, ...] = ()
    #: the wall clock (``time.time()``) at the ``after`` reading: where fio's stamp of the
    #: end of its I/O (:func:`io_end_wall`) lies on the readings' clock
    after_wall: float | None = None
    #: the array device's own stat lines right before and after the fio run (None: the
    #: target is no array device, or one could not be read)
    array_lines: tuple[str, str] | None = None


class RampWindow:
    """The members' readings at every progress tick after fio's start-up and a warm-up of
    ``ramp_s``: the measured period starts at one of them (module docstring)."""

    def __init__(self, sampler: MemberSampler, ramp_s: float) -> None:
        self.sampler = sampler
        self.ramp_s = ramp_s
        self.from_s = ramp_s + FIO_STARTUP_S
        self.readings: list[StatReading] = []

    def wrap(self, tick: TickFn) -> TickFn:
        """``tick``, with a reading taken at every call past the warm-up."""
        def on_tick(elapsed_s: float) -> None:
            if elapsed_s >= self.from_s:
                reading = self.sampler.read()
                if reading is not None:
                    self.readings.append(reading)
            tick(elapsed_s)
        return on_tick

    def of(self, sample: Sample) -> Sample:
        first = self.readings[0] if self.readings else None
        return dataclasses.replace(sample, ramp_s=self.ramp_s, measured_from=first,
                                   later=tuple(self.readings[1:]))


def measured_seconds(output: FioOutput | None) -> float | None:
    """The longest measured period fio reported over its jobs (None: none)."""
    runtimes = [max(j.read.runtime_ms, j.write.runtime_ms) for j in output.jobs] \
        if output is not None else []
    longest = max(runtimes, default=0)
    return longest / 1000 if longest > 0 else None


def io_end_wall(output: FioOutput | None) -> float | None:
    """When fio ended its I/O, on the wall clock: the time it stamped its last JSON
    document with as it wrote its results (None: not stamped)."""
    stamp = output.documents[-1].get("timestamp_ms") if output and output.documents else None
    return stamp / 1000 if isinstance(stamp, (int, float)) and stamp > 0 else None


def measured_window(sample: Sample, output: FioOutput | None,
                    host_seconds: float) -> tuple[StatReading, float]:
    """After a warm-up (``sample.measured_from`` set): the reading the members' period
    starts at and the time it ends, on the readings' clock (module docstring)."""
    assert sample.measured_from is not None
    start, end = sample.measured_from, sample.after.at
    io_end = io_end_wall(output)
    if io_end is None or sample.after_wall is None:
        return start, end
    tail = sample.after_wall - io_end
    if not 0 <= tail < end - start.at:
        return start, end  # the two clocks do not agree: the readings' alone
    end -= tail
    began = end - host_seconds - sample.ramp_s  # fio's I/O (its warm-up) began after this
    inside = [r for r in (start, *sample.later) if began <= r.at < end]
    return (inside[0] if inside else start), end


def host_io(output: FioOutput | None) -> tuple[int, int, int, int]:
    """Read I/Os, write I/Os, read bytes and write bytes fio completed, over every job."""
    if output is None:
        return 0, 0, 0, 0
    jobs = output.jobs
    return (sum(j.read.total_ios for j in jobs), sum(j.write.total_ios for j in jobs),
            sum(j.read.io_bytes for j in jobs), sum(j.write.io_bytes for j in jobs))


def small_write_of(details: Mapping[str, object]) -> tuple[float | None, str | None]:
    """What a small random write costs the array ssdlab built, as it recorded at build
    time (``details["array"]["small_write"]``: md's, with the write method md takes on a
    parity level), and that method; (None, None) where it did not record one."""
    array = details.get("array")
    small = array.get("small_write") if isinstance(array, Mapping) else None
    if not isinstance(small, Mapping) or not isinstance(small.get("penalty"), int | float):
        return None, None
    method = small.get("method")
    return float(small["penalty"]), method if isinstance(method, str) else None


def zfs_members(details: Mapping[str, object]) -> list[str]:
    """The kernel names of the members of the ZFS array ssdlab built that the target is
    (its zvol) or is on (its dataset), as recorded at build time ([] for any other
    target): a zvol lists no ``slaves`` in sysfs and a dataset has no block device, so
    the stack cannot be walked down to the members as md's and dm's can."""
    array = details.get("array")
    if not isinstance(array, Mapping) or array.get("backend") != "zfs":
        return []
    members = array.get("members")
    return [str(m["name"]) for m in members or () if isinstance(m, Mapping) and m.get("name")]


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
    """The devices under one target, read around measured periods; ``figures``: they are
    members (two or more, or an array ssdlab built), whose write penalty, imbalance and
    slow member a ``members`` event gives; else only the ``devices`` events are stored."""

    def __init__(self, names: list[str], *, level: str | None = None,
                 backend: str | None = None, sysfs: Path = SYSFS,
                 clock: Callable[[], float] = time.monotonic, figures: bool = True,
                 file: str | None = None, wall: Callable[[], float] = time.time,
                 small_write: tuple[float | None, str | None] = (None, None),
                 array: str | None = None) -> None:
        self.names = names
        #: the array device itself (``md127``), read around each fio run beside its members
        self.array = array
        #: a file target: how much of it was never written is read before each fio run
        self.file = file
        self.level = level
        #: the value a small write costs: what the array recorded (md's, by the write
        #: method it takes) or else the level's textbook value
        self.textbook = small_write[0] if small_write[0] is not None else \
            textbook_penalty(level, backend, len(names))
        self.method = small_write[1]
        self.sysfs = sysfs
        self.clock = clock
        self.wall = wall
        self.figures = figures

    def read(self) -> StatReading | None:
        """Every member's stat line now (None when one cannot be read: a member gone)."""
        try:
            return read_stats(self.names, sysfs=self.sysfs, clock=self.clock)
        except (TargetError, OSError):
            return None

    def sample(self, measured: Callable[[], T]) -> tuple[T, Sample | None]:
        """``measured()`` between two readings, and one more where the fio gate releases
        each position (:func:`ssdlab.engine.gate.watching`): its result and the readings
        (None when the first or last could not be taken). Exceptions of ``measured`` go
        through unchanged."""
        opened: list[tuple[int, StatReading]] = []

        def on_open(number: int) -> None:
            reading = self.read()
            if reading is not None:
                opened.append((number, reading))

        never = never_written_share(self.file) if self.file is not None else None
        if never is None:
            self.file = None  # it cannot be told here (no FIEMAP, too many extents)
        array_before = self._array_line()
        before = self.read()
        with watching(on_open):
            result = measured()
        after = self.read() if before is not None else None
        after_wall = self.wall()
        array_after = self._array_line()
        array = (array_before, array_after) \
            if array_before is not None and array_after is not None else None
        return result, Sample(before, after, opened=tuple(opened), never_written=never,
                              after_wall=after_wall, array_lines=array) \
            if before is not None and after is not None else None

    def _array_line(self) -> str | None:
        if self.array is None:
            return None
        try:
            return read_stats([self.array], sysfs=self.sysfs, clock=self.clock).lines[self.array]
        except (TargetError, OSError):
            return None

    def record(self, sample: Sample, round_no: int, phase: str, output: FioOutput | None,
               *, last_round: int | None = None) -> MemberRound | None:
        """The round's record (None when the readings do not make one: a counter that went
        backwards, a device re-created between them). After a warm-up, from the reading
        past it (module docstring)."""
        start, end = sample.measured_from or sample.before, sample.after.at
        host_seconds = measured_seconds(output) if sample.measured_from else None
        if sample.measured_from is not None and host_seconds is not None:
            start, end = measured_window(sample, output, host_seconds)
        seconds = end - start.at
        note = None
        if sample.ramp_s > 0 and (sample.measured_from is None or host_seconds is None):
            note = ("the warm-up (ramp) could not be told apart from the measured period: "
                    "its I/Os are in the members' counts, not in fio's")
        try:
            periods = periods_between(start.lines, sample.after.lines, seconds)
            # the array's own counts where they span the members' period: no warm-up
            array = periods_between({self.array: sample.array_lines[0]},
                                    {self.array: sample.array_lines[1]}, seconds)[0] \
                if self.array and sample.array_lines and sample.measured_from is None \
                else None
        except ValueError:
            return None
        return MemberRound.build(round_no, phase, seconds, periods, host=host_io(output),
                                 level=self.level, textbook=self.textbook,
                                 last_round=last_round, host_seconds=host_seconds, note=note,
                                 method=self.method, array=array)

    def store(self, store: Store, run_id: str, test: str, sample: Sample, round_no: int,
              phase: str, output: FioOutput | None, *, last_round: int | None = None,
              job_text: str = "") -> MemberRound | None:
        """Store the round's ``devices`` event and, where the devices are members, its
        ``members`` event; the members record stored (None: none was). ``job_text``: the
        fio run's job file, whose positions the gate's readings are of."""
        devices = device_round(sample, round_no, phase, output, job_text,
                               last_round=last_round)
        if devices is not None:
            store.add_event(run_id, test, DEVICES_KIND, devices.message, devices)
        if not self.figures:
            return None
        record = self.record(sample, round_no, phase, output, last_round=last_round)
        if record is not None:
            store.add_event(run_id, test, EVENT_KIND, record.message, record)
        return record


def _moved(before: StatReading, after: StatReading) -> list[MemberPeriod] | None:
    try:
        return periods_between(before.lines, after.lines, max(0.0, after.at - before.at))
    except ValueError:  # a counter went backwards, a device was re-created
        return None


def _stretch(cells: list[str], before: StatReading, after: StatReading,
             host: tuple[int, int]) -> DeviceIO | None:
    periods = _moved(before, after)
    if periods is None:
        return None
    return DeviceIO(cells, round(after.at - before.at, 6), host[0], host[1],
                    sum(p.read_bytes for p in periods), sum(p.write_bytes for p in periods),
                    sum(p.reads for p in periods), sum(p.writes for p in periods))


def _cell_stretches(sample: Sample, output: FioOutput, job_text: str) -> list[DeviceIO]:
    """Each gate position's stretch: from the reading right before it was released to the
    one before the next (the last: to the end of the fio run), with the bytes fio moved in
    its jobs ([]: the readings do not cover every position, or the jobs cannot be told)."""
    try:
        cut = positions(job_file_of(job_text).jobs)
    except (JobFileError, ValueError):
        return []
    if len(cut) < 2 or [n for n, _ in sample.opened] != list(range(len(cut))):
        return []
    ends = [reading for _, reading in sample.opened[1:]] + [sample.after]
    stretches = []
    for jobs, (_, start), end in zip(cut, sample.opened, ends, strict=True):
        names = [job.name for job in jobs]
        ran = [j for j in output.jobs if j.name in names]
        stretch = _stretch([j.name for j in ran] or names, start, end,
                           (sum(j.read.io_bytes for j in ran), sum(j.write.io_bytes for j in ran)))
        if stretch is None:
            return []
        stretches.append(stretch)
    return stretches


def device_round(sample: Sample, round_no: int, phase: str, output: FioOutput | None,
                 job_text: str = "", *, last_round: int | None = None) -> DeviceRound | None:
    """What the devices and fio moved over the fio run and, where the gate's readings
    cover each position, over each one (None: no fio output, or readings that do not
    make one)."""
    if output is None or not output.jobs:
        return None
    _, _, read_bytes, write_bytes = host_io(output)
    total = _stretch([j.name for j in output.jobs], sample.before, sample.after,
                     (read_bytes, write_bytes))
    if total is None:
        return None
    return DeviceRound(round_no, phase, sorted(sample.before.lines), total,
                       _cell_stretches(sample, output, job_text), last_round,
                       None if sample.never_written is None
                       else round(sample.never_written, 4))


def find_sampler(path: str, kind: str, name: str, details: Mapping[str, object], *,
                 sysfs: Path = SYSFS, proc: Path = PROC) -> tuple[MemberSampler | None, str]:
    """The sampler of the devices under a target (a block device ``name``, else the file
    or directory ``path``) and, where they are no members (a plain drive: its sampler's
    ``figures`` is False) or there is no sampler (None), why, in one line ("" else)."""
    if kind == NBD_KIND:
        return None, (f"member devices not sampled: {path} is an NBD export; its devices "
                      "are the server's")
    try:
        names = zfs_members(details) or members_of_target(path, kind, name, sysfs=sysfs,
                                                          proc=proc)
    except (TargetError, OSError) as exc:
        return None, f"member devices not sampled: cannot find those under {path} ({exc})"
    if not names:
        return None, (f"member devices not sampled: {path} has no block device below it "
                      "(tmpfs, FUSE, a network file system)")
    level, backend = array_level(details)
    plain = len(names) < 2 and level is None
    # a block target above two or more devices (md, dm) counts the host's I/Os itself
    array = name if kind == "block" and len(names) > 1 and name not in names else None
    sampler = MemberSampler(names, level=level, backend=backend, sysfs=sysfs,
                            figures=not plain, file=path if kind == "file" else None,
                            small_write=small_write_of(details), array=array)
    if sampler.read() is None:
        return None, (f"member devices not sampled: the I/O statistics of "
                      f"{', '.join(names)} cannot be read")
    if plain:  # its one device is read for the cache-bound check only
        where = "is a plain drive" if kind == "block" else "is on a plain drive"
        return sampler, (f"member devices not sampled: {path} {where} (one device below "
                         f"it, {names[0]}, and no array): no members to compare")
    return sampler, ""
