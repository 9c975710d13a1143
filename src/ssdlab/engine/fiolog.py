"""fio's per-I/O and averaged logs (``write_lat_log``, ``write_bw_log``, ``write_iops_log``).

Each line is ``time_ms, value, direction, block_size[, offset], priority`` (fio's HOWTO,
"Log File Formats"). Direction is 0 read, 1 write, 2 trim. fio 3.33 writes five fields,
the fifth being the command priority, or six with ``log_offset=1`` (offset, then
priority); older fio wrote four. Without ``log_avg_msec`` every I/O has a line, stamped
with its completion time. With ``log_avg_msec=MS`` (and ``per_job_logs``, the default)
each job N writes ``NAME_iops.N.log`` / ``NAME_bw.N.log``: one line per direction about
every MS milliseconds with the rate over the time since the job's previous line (IOPS,
or KiB/s for bandwidth), block size and offset 0. fio writes no line for a window without
a completion.

:class:`RateLogMerger` merges several jobs' averaged logs into one series over a common
grid of intervals (the sum of the jobs' rates), :func:`throughput_points` turns it into
(elapsed s, bytes so far, rate) points for cliff detection, and :class:`RateLogFollower`
does both while polling the files (see :mod:`ssdlab.engine.logtail`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ssdlab.engine.logtail import FioLogError, Line, LogTail

__all__ = [
    "DIRECTIONS",
    "FioLogError",
    "LogEntry",
    "RateInterval",
    "RateLogFollower",
    "RateLogMerger",
    "ThroughputPoint",
    "completions",
    "fio_log_path",
    "merge_rate_logs",
    "parse_log_lines",
    "parse_numbered_lines",
    "read_log",
    "throughput_points",
]

DIRECTIONS = {0: "read", 1: "write", 2: "trim"}

RateKind = Literal["iops", "bw"]


@dataclass(frozen=True)
class LogEntry:
    time_ms: int
    value: int  # latency in ns, bandwidth in KiB/s or IOPS, by log kind
    direction: str
    block_size: int  # 0 in averaged logs
    offset: int | None  # only with log_offset=1
    priority: int | None = None  # fio >= 3.2x; absent in older logs


def fio_log_path(prefix: str | Path, kind: str, job: int) -> Path:
    """The file fio writes for ``write_<kind>_log=prefix`` of job ``job`` (1-based).

    ``kind`` is fio's suffix: ``iops``, ``bw``, ``lat``, ``clat``, ``slat`` or
    ``clat_hist``. Jobs are numbered in the order fio starts them, across sections.
    """
    if job < 1:
        raise ValueError(f"fio numbers its jobs from 1, not {job}")
    return Path(f"{prefix}_{kind}.{job}.log")


def _integer(text: str) -> int:
    # log_prio=1 writes the priority as hex ("0x..."); everything else is decimal
    return int(text, 16) if text[:2].lower() == "0x" else int(text)


def _parse_entry(text: str, source: str, number: int) -> LogEntry:
    fields = [f.strip() for f in text.split(",")]
    try:
        if not 4 <= len(fields) <= 6:
            raise ValueError
        direction = DIRECTIONS[int(fields[2])]
        offset = int(fields[4]) if len(fields) == 6 else None
        priority = _integer(fields[-1]) if len(fields) >= 5 else None
        time_ms, value, block_size = int(fields[0]), int(fields[1]), int(fields[3])
        if min(time_ms, value, block_size) < 0:
            raise ValueError
    except (ValueError, KeyError):
        raise FioLogError(f"{source}, line {number}: not a fio log line: {text!r}") from None
    return LogEntry(time_ms, value, direction, block_size, offset, priority)


def parse_log_lines(lines: Iterable[str], source: str = "fio log") -> list[LogEntry]:
    """Parse a whole log's lines (numbered from 1 for error messages); blank lines skipped."""
    return parse_numbered_lines((Line(n, text) for n, text in enumerate(lines, 1)), source)


def parse_numbered_lines(lines: Iterable[Line], source: str = "fio log") -> list[LogEntry]:
    """Parse lines as :class:`~ssdlab.engine.logtail.LogTail` returns them."""
    return [_parse_entry(line.text, source, line.number) for line in lines if line.text.strip()]


def read_log(path: str | Path) -> list[LogEntry]:
    with open(path, encoding="ascii", errors="replace") as handle:
        return parse_log_lines(handle, str(path))


def completions(entries: Iterable[LogEntry], direction: str) -> list[tuple[float, int]]:
    """(completion time in s, bytes) of every I/O of one direction, in time order."""
    picked = [(e.time_ms / 1000.0, e.block_size) for e in entries if e.direction == direction]
    picked.sort(key=lambda item: item[0])
    return picked


# --------------------------------------------------------------------------- averaged logs


@dataclass(frozen=True)
class RateInterval:
    """One interval of the merged series: all jobs together."""

    start_ms: int
    end_ms: int
    rate: float  # sum of the jobs' rates over the interval, in the log's unit per second
    cumulative: float  # I/Os (iops log) or KiB (bw log) done from fio's start to end_ms


@dataclass(frozen=True)
class ThroughputPoint:
    elapsed_s: float  # end of the interval, seconds since fio started the jobs
    bytes_done: float  # bytes transferred in that direction from the start to elapsed_s
    rate: float  # IOPS for an iops log, bytes/s for a bw log (fio's KiB/s x 1024)


class RateLogMerger:
    """Merge several jobs' averaged logs (``log_avg_msec``) into one series.

    How a job's lines become amounts: a line stamped ``t`` with rate ``r`` covers the
    time since the job's previous line of that direction (fio computes the rate over
    exactly that time), or the time since the job started (fio's time 0) for its first
    line, and ``r`` is taken as constant within it. Each job's amounts are spread over a common
    grid of intervals ``(k * step, (k + 1) * step]`` ms by overlap, and summed over jobs;
    so jobs whose lines are stamped a few ms apart (they always are) merge correctly.

    An interval is complete once every job has a line at or after its end; with
    ``final=True`` (fio has exited) the intervals up to the last line of any job are
    complete, jobs that ended earlier adding nothing after their end.

    Limitation: fio writes no line for a window without completions, so the rate of the
    line after such a gap is spread over the gap as well. Continuous writes at any queue
    depth have completions in every window; a drive that stalls every I/O for longer
    than ``log_avg_msec`` shows a lower, longer dip instead of a zero and a spike.
    """

    def __init__(
        self,
        jobs: Iterable[int],
        log_avg_msec: int,
        *,
        direction: str = "write",
        step_ms: int | None = None,
    ) -> None:
        self.jobs = tuple(jobs)
        if not self.jobs or len(set(self.jobs)) != len(self.jobs):
            raise ValueError(f"jobs must be distinct and at least one, not {self.jobs}")
        if log_avg_msec <= 0 or (step_ms is not None and step_ms <= 0):
            raise ValueError("log_avg_msec and step_ms must be positive")
        if direction not in DIRECTIONS.values():
            raise ValueError(f"direction must be one of {sorted(DIRECTIONS.values())}")
        self.log_avg_msec = log_avg_msec
        self.step_ms = step_ms or log_avg_msec
        self.direction = direction
        self._last: dict[int, int | None] = dict.fromkeys(self.jobs)
        self._amounts: dict[int, float] = {}  # grid index -> amount, all jobs
        self._emitted = 0  # grid intervals handed out
        self._cumulative = 0.0

    def add(self, job: int, entries: Iterable[LogEntry], source: str = "fio log") -> None:
        """Add a job's new lines (in file order; other directions are ignored)."""
        if job not in self._last:
            raise ValueError(f"job {job} is not one of {self.jobs}")
        step = self.step_ms
        for entry in entries:
            if entry.direction != self.direction:
                continue
            last = self._last[job]
            end = entry.time_ms
            if last is not None and end < last:
                raise FioLogError(
                    f"{source}: time goes back from {last} to {end} ms: not one job's log"
                )
            start = 0 if last is None else last
            self._last[job] = end
            if end <= start:
                continue  # two lines in one ms: no time to spread over
            if start < self._emitted * step:
                raise FioLogError(
                    f"{source}: a line at {end} ms arrived after the series was merged up "
                    f"to {self._emitted * step} ms (job {job} added after a final merge?)"
                )
            first, last_k = start // step, (end - 1) // step
            for k in range(first, last_k + 1):
                overlap = min(end, (k + 1) * step) - max(start, k * step)
                self._amounts[k] = self._amounts.get(k, 0.0) + entry.value * overlap / 1000.0

    def horizon_ms(self, final: bool = False) -> int:
        """The time up to which the merged series is known."""
        ends = [t for t in self._last.values() if t is not None]
        if final:
            return max(ends, default=0)
        return min(ends) if len(ends) == len(self.jobs) else 0

    def complete(self, final: bool = False) -> list[RateInterval]:
        """The intervals completed since the previous call, in time order."""
        step = self.step_ms
        horizon = self.horizon_ms(final)
        done = horizon // step
        if final and horizon % step:
            done += 1  # the last, partial interval: its rate is over its real length
        out = []
        for k in range(self._emitted, done):
            amount = self._amounts.pop(k, 0.0)
            self._cumulative += amount
            start, end = k * step, min((k + 1) * step, horizon)
            out.append(RateInterval(start, end, amount * 1000.0 / (end - start), self._cumulative))
        self._emitted = max(self._emitted, done)
        return out


def merge_rate_logs(
    jobs: Sequence[Sequence[LogEntry]],
    log_avg_msec: int,
    *,
    direction: str = "write",
    step_ms: int | None = None,
    final: bool = True,
) -> list[RateInterval]:
    """Merge whole logs (one entry list per job) at once; see :class:`RateLogMerger`."""
    merger = RateLogMerger(
        range(1, len(jobs) + 1), log_avg_msec, direction=direction, step_ms=step_ms
    )
    for number, entries in enumerate(jobs, 1):
        merger.add(number, entries, f"job {number}")
    return merger.complete(final=final)


def throughput_points(
    intervals: Iterable[RateInterval], kind: RateKind, block_size: int | None = None
) -> list[ThroughputPoint]:
    """(elapsed s, bytes so far, rate) per merged interval.

    ``kind`` is ``"iops"`` (then ``block_size`` is needed: fio writes 0 there in averaged
    logs) or ``"bw"`` (KiB/s; the points' rate is in bytes/s).
    """
    if kind == "iops":
        if not block_size or block_size <= 0:
            raise ValueError("an iops log needs the block size to count bytes")
        per_unit, rate_scale = float(block_size), 1.0
    elif kind == "bw":
        per_unit, rate_scale = 1024.0, 1024.0
    else:
        raise ValueError(f"kind must be 'iops' or 'bw', not {kind!r}")
    return [
        ThroughputPoint(i.end_ms / 1000.0, i.cumulative * per_unit, i.rate * rate_scale)
        for i in intervals
    ]


class RateLogFollower:
    """Poll the averaged logs of several jobs and merge them as they grow.

    ``prefix`` is the ``write_iops_log=`` / ``write_bw_log=`` value, ``kind`` fio's
    suffix (``iops`` or ``bw``), ``jobs`` the job numbers (1..numjobs for one section).
    """

    def __init__(
        self,
        prefix: str | Path,
        kind: RateKind,
        jobs: Iterable[int],
        log_avg_msec: int,
        *,
        direction: str = "write",
        step_ms: int | None = None,
    ) -> None:
        self.kind: RateKind = kind
        self.merger = RateLogMerger(jobs, log_avg_msec, direction=direction, step_ms=step_ms)
        self.tails = {job: LogTail(fio_log_path(prefix, kind, job)) for job in self.merger.jobs}

    def poll(self, final: bool = False) -> list[RateInterval]:
        """Read what the files gained; return the intervals completed since the last poll.

        ``final=True`` once fio has exited: reads a last line without its newline too and
        completes the series up to the last line of any job.
        """
        for job, tail in self.tails.items():
            lines = tail.read_rest() if final else tail.read_new()
            source = str(tail.path)
            self.merger.add(job, parse_numbered_lines(lines, source), source)
        return self.merger.complete(final=final)
