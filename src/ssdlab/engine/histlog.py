"""fio's completion-latency histogram logs, merged per round, with fio's own percentiles.

fio job options ``write_hist_log=NAME``, ``log_hist_msec=MS``, ``log_hist_coarseness=C``
make each job N write ``NAME_clat_hist.N.log``. A line is

    time_ms, direction, block_size, count_0, count_1, ..., count_B-1

(fio's HOWTO, "Log File Formats"; iolog.c ``flush_hist_samples``): the number of I/Os of
that direction whose completion latency fell in each of fio's latency bins *since the
job's previous line* (fio differences its running histogram). ``block_size`` is that of
the I/O whose completion closed the interval.

**Bins.** fio 3.x keeps ``FIO_IO_U_PLAT_NR = FIO_IO_U_PLAT_GROUP_NR x FIO_IO_U_PLAT_VAL =
29 x 64 = 1856`` bins of nanoseconds (stat.h; ``FIO_IO_U_PLAT_BITS = 6``). Latencies below
128 ns have a bin each; above, group ``g = idx // 64 >= 2`` spans ``[2^(g+5), 2^(g+6))`` in
64 bins of ``2^(g-1)`` ns, and a bin stands for the middle of its range
(:func:`bin_value_ns`, fio's ``plat_idx_to_val``); the last bin also takes everything
above 2^34 ns. fio's json+ ``clat_ns.bins`` are keyed by the same values. With coarseness
C (0..6) fio sums each run of ``2^C`` bins, so a line has ``1856 >> C`` counts (fio 3.33's
HOWTO and option help still say 1216 >> C: the bin count of microsecond-era fio). A coarse
bin stands for the value of its highest fine bin, so percentiles from coarse logs are an
upper bound of fio's, at most one coarse bin width (``2^C / 64`` of the value) above.

**Percentiles** are computed as fio computes its json+ ``percentile`` list
(``calc_clat_percentiles``): the value of the first bin, in ascending order, at which the
cumulative count reaches ``pct`` % of all samples; the comparison is exact, like fio's
long-double one (:func:`ssdlab.engine.parser.merged_percentile_ns`). So merging every
line of every job of a run reproduces fio's json+ percentiles of that run (with
``group_reporting``), provided the log holds every I/O - see below.

**Rounds.** Each job stamps its own lines, about ``log_hist_msec`` apart and a few ms
away from the other jobs'. A line belongs to the round that holds the *middle* of its
interval, ``time_ms - log_hist_msec / 2``: with lines at ``k x log_hist_msec`` plus up to
half an interval of lateness, and ``log_hist_msec`` dividing the round length, every round
gets the same number of lines from each job. A round is complete once every job has a
line in a later round (or fio has exited, see :meth:`HistRounds.complete`). Its IOPS is the
sum over jobs of the job's I/Os over the time its lines cover (from its previous line's
stamp, or the job's start, to its last one), not an average of rates.

**What fio does not log.** fio writes a histogram line only when an I/O completes after
the interval ended (stat.c ``add_clat_sample``), so the I/Os after a job's last line - the
last, partial interval - are in fio's json+ totals but in no line; a ``time_based`` run
loses up to one interval per job at its end. fio 3.33 also keeps the lines in memory and
writes the files when the job ends. And ``ramp_time`` resets fio's histogram but not the
log's previous snapshot: do not combine the two.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ssdlab.engine.fiolog import DIRECTIONS, fio_log_path
from ssdlab.engine.logtail import FioLogError, Line, LogTail
from ssdlab.engine.parser import merged_percentile_ns

__all__ = [
    "DEFAULT_PERCENTILES",
    "FIO_DEFAULT_PERCENTILES",
    "MAX_COARSENESS",
    "PLAT_BITS",
    "PLAT_GROUP_NR",
    "PLAT_NR",
    "PLAT_VAL",
    "HistInterval",
    "HistLogFollower",
    "HistRounds",
    "LatencyHistogram",
    "RoundLatency",
    "bin_bounds_ns",
    "bin_index",
    "bin_value_ns",
    "job_of_path",
    "merge_histograms",
    "parse_hist_line",
    "parse_hist_lines",
    "read_hist_log",
    "round_of",
    "rounds_from_intervals",
]

PLAT_BITS = 6  # FIO_IO_U_PLAT_BITS
PLAT_VAL = 1 << PLAT_BITS  # FIO_IO_U_PLAT_VAL: bins per group
PLAT_GROUP_NR = 29  # FIO_IO_U_PLAT_GROUP_NR (fio >= 3.0, nanosecond latencies)
PLAT_NR = PLAT_GROUP_NR * PLAT_VAL  # FIO_IO_U_PLAT_NR = 1856
MAX_COARSENESS = 6  # fio's log_hist_coarseness range is 0..6

#: what a WSAT round reports: median, p99, p99.9, p99.99
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 99.0, 99.9, 99.99)
#: fio's default percentile_list (the json+ "percentile" keys)
FIO_DEFAULT_PERCENTILES: tuple[float, ...] = (
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0,
    90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99,
)  # fmt: skip

_MAX_COUNT = 1 << 63  # fio's counts are uint64 differences; above this one went negative
_JOB_IN_NAME = re.compile(r"\.(\d+)\.log$")


# --------------------------------------------------------------------------- bins


def bin_value_ns(index: int) -> int:
    """The latency (ns) fio reports for fine bin ``index``: fio's ``plat_idx_to_val``."""
    if not 0 <= index < PLAT_NR:
        raise ValueError(f"bin index must be within [0, {PLAT_NR}), not {index}")
    if index < 2 * PLAT_VAL:
        return index
    error_bits = (index >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    k = index % PLAT_VAL
    # base + (k + 0.5) * 2^error_bits, an integer since error_bits >= 1
    return base + k * (1 << error_bits) + (1 << (error_bits - 1))


def bin_index(latency_ns: int) -> int:
    """The fine bin fio counts a latency in: fio's ``plat_val_to_idx``."""
    if latency_ns < 0:
        raise ValueError(f"latency must not be negative, not {latency_ns}")
    msb = max(latency_ns.bit_length() - 1, 0)
    if msb <= PLAT_BITS:
        return latency_ns
    error_bits = msb - PLAT_BITS
    index = ((error_bits + 1) << PLAT_BITS) + ((PLAT_VAL - 1) & (latency_ns >> error_bits))
    return min(index, PLAT_NR - 1)


def bin_bounds_ns(index: int) -> tuple[int, float]:
    """Lowest latency counted in fine bin ``index`` and the lowest of the next bin.

    The last bin is unbounded above (``math.inf``).
    """
    if not 0 <= index < PLAT_NR:
        raise ValueError(f"bin index must be within [0, {PLAT_NR}), not {index}")
    if index < 2 * PLAT_VAL:
        low, width = index, 1
    else:
        error_bits = (index >> PLAT_BITS) - 1
        width = 1 << error_bits
        low = (1 << (error_bits + PLAT_BITS)) + (index % PLAT_VAL) * width
    return low, (math.inf if index == PLAT_NR - 1 else float(low + width))


def _check_coarseness(coarseness: int) -> None:
    if not 0 <= coarseness <= MAX_COARSENESS:
        raise ValueError(f"coarseness must be within [0, {MAX_COARSENESS}], not {coarseness}")


def _bins_at(coarseness: int) -> int:
    return PLAT_NR >> coarseness


_COARSENESS_OF_BINS = {_bins_at(c): c for c in range(MAX_COARSENESS + 1)}


# --------------------------------------------------------------------------- histograms


@dataclass(frozen=True)
class LatencyHistogram:
    """Counts per fio latency bin at one coarseness; only non-empty bins are kept."""

    coarseness: int = 0
    counts: Mapping[int, int] = field(default_factory=dict)  # bin index -> count

    def __post_init__(self) -> None:
        _check_coarseness(self.coarseness)
        bins = _bins_at(self.coarseness)
        kept: dict[int, int] = {}
        for index, count in sorted(self.counts.items()):
            if not 0 <= index < bins:
                raise ValueError(f"bin {index} outside [0, {bins}) at coarseness {self.coarseness}")
            if count < 0:
                raise ValueError(f"negative count {count} in bin {index}")
            if count:
                kept[index] = count
        object.__setattr__(self, "counts", types.MappingProxyType(kept))

    @classmethod
    def from_list(cls, counts: Sequence[int], coarseness: int = 0) -> LatencyHistogram:
        """From a full list of counts, as in a log line (``1856 >> coarseness`` of them)."""
        _check_coarseness(coarseness)
        if len(counts) != _bins_at(coarseness):
            raise ValueError(
                f"{len(counts)} counts, but coarseness {coarseness} has {_bins_at(coarseness)}"
            )
        return cls(coarseness, {i: c for i, c in enumerate(counts) if c})

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __add__(self, other: LatencyHistogram) -> LatencyHistogram:
        if not isinstance(other, LatencyHistogram):
            return NotImplemented
        if other.coarseness != self.coarseness:
            raise ValueError(
                f"cannot merge histograms of coarseness {self.coarseness} and {other.coarseness}"
            )
        merged = dict(self.counts)
        for index, count in other.counts.items():
            merged[index] = merged.get(index, 0) + count
        return LatencyHistogram(self.coarseness, merged)

    def value_ns(self, index: int) -> int:
        """The latency bin ``index`` stands for: fio's value, or for a coarse bin, that of
        its highest fine bin."""
        bins = _bins_at(self.coarseness)
        if not 0 <= index < bins:
            raise ValueError(f"bin {index} outside [0, {bins}) at coarseness {self.coarseness}")
        return bin_value_ns(((index + 1) << self.coarseness) - 1)

    def value_counts(self) -> dict[int, int]:
        """Non-empty bins as {latency ns: count}: the layout of fio's json+ ``bins``."""
        return {self.value_ns(i): c for i, c in self.counts.items()}

    def percentile_ns(self, pct: float) -> float | None:
        """fio's ``pct`` percentile (see the module doc); ``None`` without samples."""
        return merged_percentile_ns([self.value_counts()], pct)

    def percentiles_ns(self, pcts: Iterable[float] = DEFAULT_PERCENTILES) -> dict[float, float]:
        """{pct: latency ns} for each of ``pcts``; empty without samples."""
        values = self.value_counts()
        out: dict[float, float] = {}
        for pct in pcts:
            value = merged_percentile_ns([values], pct)
            if value is not None:
                out[pct] = value
        return out

    @property
    def min_ns(self) -> int | None:
        return self.value_ns(min(self.counts)) if self.counts else None

    @property
    def max_ns(self) -> int | None:
        return self.value_ns(max(self.counts)) if self.counts else None


def merge_histograms(
    histograms: Iterable[LatencyHistogram], coarseness: int = 0
) -> LatencyHistogram:
    """The sum of histograms of one coarseness (an empty one if there are none)."""
    merged: dict[int, int] = {}
    for histogram in histograms:
        if histogram.coarseness != coarseness:
            raise ValueError(
                f"cannot merge a histogram of coarseness {histogram.coarseness} "
                f"into coarseness {coarseness}"
            )
        for index, count in histogram.counts.items():
            merged[index] = merged.get(index, 0) + count
    return LatencyHistogram(coarseness, merged)


# --------------------------------------------------------------------------- log lines


@dataclass(frozen=True)
class HistInterval:
    """One line of a histogram log: one job's completions over one interval."""

    job: int  # the N of NAME_clat_hist.N.log (0 if not known)
    line: int  # line number in its file
    time_ms: int  # fio's stamp: when the interval closed, ms since the job's start
    direction: str  # "read", "write" or "trim"
    block_size: int  # of the I/O whose completion closed the interval
    histogram: LatencyHistogram

    @property
    def ios(self) -> int:
        return self.histogram.total


def parse_hist_line(
    text: str,
    source: str = "histogram log",
    number: int = 1,
    job: int = 0,
    coarseness: int | None = None,
) -> HistInterval:
    """Parse one line; ``coarseness`` (if given) must match the line's number of bins."""
    where = f"{source}, line {number}"
    fields = [f.strip() for f in text.split(",")]
    try:
        values = [int(f) for f in fields]
    except ValueError:
        raise FioLogError(
            f"{where}: not a fio histogram log line (a field is not an integer): {_quote(text)}"
        ) from None
    if len(values) < 4:
        raise FioLogError(f"{where}: not a fio histogram log line: {_quote(text)}")
    time_ms, direction, block_size, counts = values[0], values[1], values[2], values[3:]
    if direction not in DIRECTIONS:
        raise FioLogError(f"{where}: direction {direction} is not 0, 1 or 2")
    if time_ms < 0 or block_size < 0:
        raise FioLogError(f"{where}: negative time or block size: {_quote(text)}")
    found = _COARSENESS_OF_BINS.get(len(counts))
    if found is None:
        raise FioLogError(
            f"{where}: {len(counts)} latency bins; fio 3.x writes {PLAT_NR} >> coarseness "
            f"({', '.join(str(n) for n in sorted(_COARSENESS_OF_BINS, reverse=True))})"
        )
    if coarseness is not None and found != coarseness:
        raise FioLogError(
            f"{where}: {len(counts)} latency bins is coarseness {found}, expected {coarseness}"
        )
    for index, count in enumerate(counts):
        if not 0 <= count < _MAX_COUNT:
            raise FioLogError(
                f"{where}: bin {index} has count {count}: fio's histogram went backwards "
                "(ramp_time resets it but not the log)"
            )
    return HistInterval(
        job,
        number,
        time_ms,
        DIRECTIONS[direction],
        block_size,
        LatencyHistogram.from_list(counts, found),
    )


def _quote(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:80] + "...")


def parse_hist_lines(
    lines: Iterable[Line | str],
    source: str = "histogram log",
    job: int = 0,
    coarseness: int | None = None,
) -> list[HistInterval]:
    """Parse lines (plain strings numbered from 1, or :class:`Line`); blank lines skipped."""
    out = []
    for number, item in enumerate(lines, 1):
        line = item if isinstance(item, Line) else Line(number, item)
        if line.text.strip():
            out.append(parse_hist_line(line.text, source, line.number, job, coarseness))
    return out


def job_of_path(path: str | Path) -> int:
    """The job number N of fio's ``..._clat_hist.N.log`` (0 if the name has none)."""
    match = _JOB_IN_NAME.search(str(path))
    return int(match.group(1)) if match else 0


def read_hist_log(
    path: str | Path, job: int | None = None, coarseness: int | None = None
) -> list[HistInterval]:
    """Every line of a finished log (the job number from the file name unless given)."""
    tail = LogTail(path)
    if not tail.path.exists():
        raise FioLogError(f"{tail.path}: no such histogram log")
    number = job_of_path(path) if job is None else job
    return parse_hist_lines(tail.read_rest(), str(path), number, coarseness)


# --------------------------------------------------------------------------- rounds


def round_of(time_ms: int, round_ms: int, hist_msec: int) -> int:
    """The round (0-based) of a line stamped ``time_ms``: the one holding its middle."""
    return max(0, math.floor((time_ms - hist_msec / 2) / round_ms))


@dataclass(frozen=True)
class RoundLatency:
    """Latency and IOPS of one round, from the histogram logs of all jobs."""

    index: int  # 0-based
    start_s: float  # nominal bounds: index * round length ...
    end_s: float  # ... (index + 1) * round length, s since fio started the jobs
    ios: int  # completions in the round, all jobs
    iops: float  # sum over jobs of ios / time covered by the job's lines
    lines: int  # histogram lines merged (jobs x round / log_hist_msec when complete)
    histogram: LatencyHistogram
    percentiles_ns: dict[float, float]  # fio's percentiles of the merged histogram

    @property
    def max_ns(self) -> int | None:
        return self.histogram.max_ns


@dataclass
class _JobRound:
    histogram: dict[int, int] = field(default_factory=dict)
    ios: int = 0
    covered_ms: int = 0
    lines: int = 0


class HistRounds:
    """Cut histogram-log lines of several jobs into rounds, handing out complete ones.

    Add lines as they are read (any order across jobs; in file order within one job),
    then :meth:`complete` returns every round completed since the previous call, each
    once. Only the rounds not yet handed out are kept in memory.
    """

    def __init__(
        self,
        jobs: Iterable[int],
        round_ms: int,
        hist_msec: int,
        *,
        direction: str = "write",
        percentiles: Sequence[float] = DEFAULT_PERCENTILES,
        coarseness: int = 0,
    ) -> None:
        self.jobs = tuple(jobs)
        if not self.jobs or len(set(self.jobs)) != len(self.jobs):
            raise ValueError(f"jobs must be distinct and at least one, not {self.jobs}")
        if round_ms <= 0 or hist_msec <= 0:
            raise ValueError("round_ms and hist_msec must be positive")
        if direction not in DIRECTIONS.values():
            raise ValueError(f"direction must be one of {sorted(DIRECTIONS.values())}")
        _check_coarseness(coarseness)
        self.round_ms, self.hist_msec = round_ms, hist_msec
        self.direction = direction
        self.percentiles = tuple(percentiles)
        self.coarseness = coarseness
        self._last: dict[int, int | None] = dict.fromkeys(self.jobs)
        self._rounds: dict[int, dict[int, _JobRound]] = {}
        self._next = 0  # first round not handed out

    def add(self, intervals: Iterable[HistInterval]) -> None:
        for interval in intervals:
            if interval.direction != self.direction:
                continue
            job = interval.job
            if job not in self._last:
                raise ValueError(f"a line of job {job}, which is not one of {self.jobs}")
            if interval.histogram.coarseness != self.coarseness:
                raise FioLogError(
                    f"job {job}, line {interval.line}: coarseness "
                    f"{interval.histogram.coarseness}, expected {self.coarseness}"
                )
            last = self._last[job]
            if last is not None and interval.time_ms < last:
                raise FioLogError(
                    f"job {job}, line {interval.line}: time goes back from {last} to "
                    f"{interval.time_ms} ms"
                )
            index = round_of(interval.time_ms, self.round_ms, self.hist_msec)
            if index < self._next:
                raise FioLogError(
                    f"job {job}, line {interval.line}: belongs to round {index + 1}, "
                    "which was already complete"
                )
            covered = (
                interval.time_ms - last
                if last is not None
                else interval.time_ms  # the first line: since the job started
            )
            self._last[job] = interval.time_ms
            state = self._rounds.setdefault(index, {}).setdefault(job, _JobRound())
            for bin_, count in interval.histogram.counts.items():
                state.histogram[bin_] = state.histogram.get(bin_, 0) + count
            state.ios += interval.ios
            state.covered_ms += covered
            state.lines += 1

    def complete(
        self, final: bool = False, final_slack_ms: int | None = None
    ) -> list[RoundLatency]:
        """Rounds completed since the previous call.

        A round is complete once every job has a line in a later round. With
        ``final=True`` (fio has exited and every line is read) a round is also complete
        when each job's last line is within ``final_slack_ms`` (default ``hist_msec``:
        the interval fio never logs) of the round's end; a later round is partial and
        left out. Nothing is complete while a job has no line at all.
        """
        lasts = [t for t in self._last.values() if t is not None]
        if not lasts or len(lasts) < len(self.jobs):
            return []
        if final:
            slack = self.hist_msec if final_slack_ms is None else final_slack_ms
            done = (min(lasts) + slack) // self.round_ms
        else:
            done = min(round_of(t, self.round_ms, self.hist_msec) for t in lasts)
        out = [self._finish(i, self._rounds.pop(i, {})) for i in range(self._next, done)]
        self._next = max(self._next, done)
        return out

    def _finish(self, index: int, jobs: Mapping[int, _JobRound]) -> RoundLatency:
        histogram = merge_histograms(
            (LatencyHistogram(self.coarseness, j.histogram) for j in jobs.values()),
            self.coarseness,
        )
        iops = sum(j.ios * 1000.0 / j.covered_ms for j in jobs.values() if j.covered_ms > 0)
        return RoundLatency(
            index=index,
            start_s=index * self.round_ms / 1000.0,
            end_s=(index + 1) * self.round_ms / 1000.0,
            ios=sum(j.ios for j in jobs.values()),
            iops=iops,
            lines=sum(j.lines for j in jobs.values()),
            histogram=histogram,
            percentiles_ns=histogram.percentiles_ns(self.percentiles),
        )


def rounds_from_intervals(
    intervals: Iterable[HistInterval],
    jobs: Iterable[int],
    round_ms: int,
    hist_msec: int,
    *,
    direction: str = "write",
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    coarseness: int = 0,
    final: bool = True,
) -> list[RoundLatency]:
    """All complete rounds of whole logs at once; see :class:`HistRounds`."""
    rounds = HistRounds(
        jobs,
        round_ms,
        hist_msec,
        direction=direction,
        percentiles=percentiles,
        coarseness=coarseness,
    )
    ordered = sorted(intervals, key=lambda i: (i.job, i.time_ms, i.line))
    rounds.add(ordered)
    return rounds.complete(final=final)


class HistLogFollower:
    """Poll the histogram logs of several jobs and cut them into rounds as they grow.

    ``prefix`` is the ``write_hist_log=`` value, ``jobs`` fio's job numbers (1..numjobs
    for one section).
    """

    def __init__(
        self,
        prefix: str | Path,
        jobs: Iterable[int],
        round_ms: int,
        hist_msec: int,
        *,
        direction: str = "write",
        percentiles: Sequence[float] = DEFAULT_PERCENTILES,
        coarseness: int = 0,
    ) -> None:
        self.rounds = HistRounds(
            jobs,
            round_ms,
            hist_msec,
            direction=direction,
            percentiles=percentiles,
            coarseness=coarseness,
        )
        self.tails = {
            job: LogTail(fio_log_path(prefix, "clat_hist", job)) for job in self.rounds.jobs
        }

    def _read(self, final: bool) -> Iterator[HistInterval]:
        for job, tail in self.tails.items():
            lines = tail.read_rest() if final else tail.read_new()
            yield from parse_hist_lines(lines, str(tail.path), job, self.rounds.coarseness)

    def poll(self, final: bool = False) -> list[RoundLatency]:
        """Read what the files gained; return the rounds completed since the last poll.

        ``final=True`` once fio has exited (see :meth:`HistRounds.complete`).
        """
        self.rounds.add(self._read(final))
        return self.rounds.complete(final=final)
