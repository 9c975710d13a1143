"""Parse the output of a sysbench 1.0.20 OLTP run into :class:`SysbenchRun`.

The command is ``sysbench oltp_<kind> ... --report-interval=1 --histogram=on
--percentile=99 run``; sysbench prints everything on stdout (its ``FATAL:`` lines too),
in this order:

* the banner ``sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)`` and the options
  (``Number of threads: 4``);
* one line per report interval, from the database driver's report
  (``[ 1s ] thds: 4 tps: 677.78 qps: 13619.50 (r/w/o: 9544.83/2715.12/1359.55)
  lat (ms,99%): 9.06 err/s: 0.00 reconn/s: 0.00``): rates over the interval, and the
  percentile of the latencies of the events that ended in it. The Lua
  ``sysbench.report_default`` prints ``err/s`` without its colon; both are read. With
  ``--rate`` a ``[ 1s ] queue length: 0, concurrency: 0`` line follows, skipped here;
* ``Latency histogram (values are in milliseconds)``: one line per non-empty bucket,
  ``value |**** count``, the value printed with 3 decimals;
* ``SQL statistics``, ``General statistics``, ``Latency (ms)`` (2 decimals) and
  ``Threads fairness`` blocks. The last line, ``execution time (avg/stddev):``, must be
  there with its line end: a cut in the middle of a number could not be told otherwise.
  ``total time`` can exceed ``--time`` by up to the slowest event: sysbench lets the
  events under way finish (3.28 s for a 3 s run whose longest event took 554 ms), and
  those are in no interval.

A ``FATAL:`` or ``ALERT:`` line (sysbench's error levels: a failed connection, an SQL
error in a thread, the ``--max-time`` forced shutdown) makes the run failed:
:func:`parse_sysbench` raises :class:`DbOutputError` with the first such line.

sysbench's latency histogram (``sb_histogram.c``): 1024 buckets spaced evenly in
log(latency) from 0.001 ms to 100,000 ms (adjacent values about 1.8 % apart). An event
goes to the bucket whose value is nearest in log space (rounded, clamped at both ends),
so a bucket value can be above the largest latency it holds: the printed maximum can be
below the last bucket's value. A percentile is a bucket value, never interpolated: see
:func:`histogram_percentile`. The histogram holds exactly the events counted in
``total number of events`` (both are updated when an event ends), which the parser
checks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

from ssdlab.engine.dboutput import (
    DECIMAL,
    INT,
    DbOutputError,
    clip,
    decimal,
    integer,
    output_error,
    quote,
    search,
)

__all__ = [
    "HISTOGRAM_BUCKETS",
    "HISTOGRAM_MAX_MS",
    "HISTOGRAM_MIN_MS",
    "DbOutputError",
    "SysbenchInterval",
    "SysbenchRun",
    "histogram_bucket_ms",
    "histogram_percentile",
    "parse_sysbench",
]

TOOL = "sysbench"

#: sysbench 1.0.20's latency histogram: buckets, smallest and largest value (ms)
HISTOGRAM_BUCKETS = 1024
HISTOGRAM_MIN_MS = 1e-3
HISTOGRAM_MAX_MS = 1e5
_LOG_MIN = math.log(HISTOGRAM_MIN_MS)
#: buckets per unit of log(latency in ms)
_BUCKETS_PER_LOG = (HISTOGRAM_BUCKETS - 1) / (math.log(HISTOGRAM_MAX_MS) - _LOG_MIN)


@dataclass(frozen=True)
class SysbenchInterval:
    """One ``--report-interval`` line: rates over the interval that ended at ``t_s``."""

    t_s: float  # seconds since the start, as printed (whole seconds)
    threads: int  # threads running
    tps: float
    qps: float
    reads_per_s: float
    writes_per_s: float
    other_per_s: float
    latency_pct: float  # the percentile of latency_ms (--percentile)
    latency_ms: float  # that percentile of the interval's event latencies
    errors_per_s: float  # ignored errors
    reconnects_per_s: float


@dataclass(frozen=True)
class SysbenchRun:
    """A sysbench OLTP run: its intervals, totals, latency summary and histogram."""

    version: str  # "1.0.20"
    threads: int
    intervals: list[SysbenchInterval]
    reads: int  # queries performed, by kind
    writes: int
    other: int
    queries: int  # reads + writes + other
    transactions: int
    tps: float  # transactions per second, as printed
    qps: float
    ignored_errors: int
    reconnects: int
    total_time_s: float
    events: int  # the same as transactions for the OLTP tests
    latency_min_ms: float
    latency_avg_ms: float
    latency_max_ms: float
    latency_pct: float  # --percentile
    latency_pct_ms: float  # sysbench's own figure, 2 decimals
    latency_sum_ms: float  # summed over the events (about threads x total time)
    histogram: list[tuple[float, int]]  # (bucket value in ms as printed, events)

    def histogram_pct_ms(self, pct: float) -> float:
        """The ``pct`` percentile of the run's latency, from its histogram (ms)."""
        return histogram_percentile(self.histogram, pct)

    @property
    def latency_p95_ms(self) -> float:
        """The 95th percentile of the run's latency, computed as sysbench would (ms)."""
        return self.histogram_pct_ms(95)

    @property
    def latency_p99_ms(self) -> float:
        """The 99th percentile from the histogram (``latency_pct_ms`` to 3 decimals)."""
        return self.histogram_pct_ms(99)


# --------------------------------------------------------------------------- percentiles


def histogram_percentile(histogram: Sequence[tuple[float, int]], pct: float) -> float:
    """The ``pct`` percentile of a sysbench latency histogram, the way sysbench computes it.

    sysbench rounds ``events * pct / 100`` half up to a whole number of events (in
    double arithmetic, done the same here), then walks its buckets upwards and takes the
    value of the first at which the running count reaches that number. So p99 of 150
    events is the value of the 149th (148.5 rounded up), and no interpolation happens.
    When the number rounds to 0 (``events * pct / 100 < 0.5``) sysbench stops at its
    first bucket, empty or not, and reports 0.001 ms: so does this function.

    The result is a bucket value of ``histogram``: for a parsed one, as sysbench printed
    it (3 decimals); :func:`histogram_bucket_ms` gives the value sysbench computed.
    Raises :class:`ValueError` for a ``pct`` outside [0, 100], a negative count or no
    events at all (sysbench itself hangs after a run without events).
    """
    if not 0.0 <= pct <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], not {pct!r}")
    if any(count < 0 for _, count in histogram):
        raise ValueError("a histogram count is negative")
    total = sum(count for _, count in histogram)
    if total == 0:
        raise ValueError("the histogram holds no events")
    rank = math.floor(float(total) * pct / 100 + 0.5)
    if rank == 0:
        return HISTOGRAM_MIN_MS
    cumulative = 0
    for value, count in sorted(histogram, key=lambda bucket: bucket[0]):
        cumulative += count
        if cumulative >= rank:
            return value
    raise AssertionError("unreachable: rank <= total")


def histogram_bucket_ms(value_ms: float) -> float:
    """The exact value of sysbench 1.0.20's histogram bucket nearest to ``value_ms``.

    sysbench prints bucket values with 3 decimals and percentiles with 2: rounding a
    printed bucket value again can differ from sysbench's figure in the last digit.
    This gives back the double sysbench computed (``f"{v:.2f}"`` of it is sysbench's
    percentile); for buckets above about 0.05 ms, where 3 decimals tell the buckets apart.
    """
    if not value_ms > 0.0:
        raise ValueError(f"a bucket value is positive, not {value_ms!r}")
    index = round((math.log(value_ms) - _LOG_MIN) * _BUCKETS_PER_LOG)
    index = min(max(index, 0), HISTOGRAM_BUCKETS - 1)
    return math.exp(index / _BUCKETS_PER_LOG + _LOG_MIN)


# --------------------------------------------------------------------------- parsing

_ERROR = re.compile(r"^(?:FATAL|ALERT): .*$", re.MULTILINE)
_BANNER = re.compile(r"^sysbench (\S{1,100})", re.MULTILINE)
_THREADS = re.compile(rf"^Number of threads: ({INT})[ \t]*$", re.MULTILINE)
_INTERVAL = re.compile(
    rf"\[ ({DECIMAL})s \] thds: ({INT}) tps: ({DECIMAL}) qps: ({DECIMAL}) "
    rf"\(r/w/o: ({DECIMAL})/({DECIMAL})/({DECIMAL})\) lat \(ms,({DECIMAL})%\): "
    rf"({DECIMAL}) err/s:? ({DECIMAL}) reconn/s: ({DECIMAL})[ \t]*"
)
_QUEUE = re.compile(rf"\[ {DECIMAL}s \] queue length: {INT}, concurrency: {INT}[ \t]*")
_HISTOGRAM_TITLE = "Latency histogram (values are in milliseconds)"
_HISTOGRAM_HEADER = re.compile(r" *value +-+ distribution -+ count[ \t]*")
_BUCKET = re.compile(rf" *({DECIMAL}) \|\*{{0,40}} +({INT})[ \t]*")
_SQL_TITLE = "SQL statistics:"
_GENERAL_TITLE = "General statistics:"
_LATENCY_TITLE = "Latency (ms):"
_FAIRNESS_TITLE = "Threads fairness:"


def _count_line(label: str) -> re.Pattern[str]:
    """``<label>: <count>`` alone on its line (``read:``, ``total number of events:``)."""
    return re.compile(rf"^[ \t]+{re.escape(label)}:[ \t]+({INT})[ \t]*$", re.MULTILINE)


def _rate_line(label: str) -> re.Pattern[str]:
    """``<label>: <count> (<rate> per sec.)`` (``transactions:``, ``queries:``)."""
    return re.compile(
        rf"^[ \t]+{re.escape(label)}:[ \t]+({INT})[ \t]+\(({DECIMAL}) per sec\.\)[ \t]*$",
        re.MULTILINE,
    )


def _ms_line(label: str) -> re.Pattern[str]:
    """``<label>: <ms>`` of the ``Latency (ms):`` block."""
    return re.compile(rf"^[ \t]+{re.escape(label)}:[ \t]+({DECIMAL})[ \t]*$", re.MULTILINE)


_READ = _count_line("read")
_WRITE = _count_line("write")
_OTHER = _count_line("other")
_TOTAL = _count_line("total")
_TRANSACTIONS = _rate_line("transactions")
_QUERIES = _rate_line("queries")
_IGNORED = _rate_line("ignored errors")
_RECONNECTS = _rate_line("reconnects")
_TOTAL_TIME = re.compile(rf"^[ \t]+total time:[ \t]+({DECIMAL})s[ \t]*$", re.MULTILINE)
_EVENTS = _count_line("total number of events")
_MIN = _ms_line("min")
_AVG = _ms_line("avg")
_MAX = _ms_line("max")
_SUM = _ms_line("sum")
#: the last line sysbench prints; its line end tells the output was not cut short
_FAIRNESS = re.compile(
    rf"^[ \t]+execution time \(avg/stddev\):[ \t]+{DECIMAL}/{DECIMAL}[ \t]*\n", re.MULTILINE)
_PERCENTILE = re.compile(rf"^[ \t]+({INT})th percentile:[ \t]+({DECIMAL})[ \t]*$", re.MULTILINE)


class _SqlStatistics(NamedTuple):
    reads: int
    writes: int
    other: int
    queries: int
    transactions: int
    tps: float
    qps: float
    ignored_errors: int
    reconnects: int


class _Latency(NamedTuple):
    min_ms: float
    avg_ms: float
    max_ms: float
    pct: float
    pct_ms: float
    sum_ms: float


def parse_sysbench(text: str) -> SysbenchRun:
    """Parse the output of ``sysbench oltp_* ... --histogram=on --percentile=N run``.

    Raises :class:`DbOutputError` when sysbench reported an error (``FATAL:``), when a
    part is missing (truncated output, ``--histogram`` off, ``--percentile=0``), garbled,
    or there for more than one run, and when the counts disagree with each other.
    """
    _check_errors(text)
    sql = _sql_statistics(_block(text, _SQL_TITLE))
    general = _block(text, _GENERAL_TITLE)
    total_time_s = decimal(search(_TOTAL_TIME, general, TOOL, "'total time:'"), 1, TOOL)
    events = integer(search(_EVENTS, general, TOOL, "'total number of events:'"), 1, TOOL)
    latency = _latency(_block(text, _LATENCY_TITLE))
    search(_FAIRNESS, _block(text, _FAIRNESS_TITLE), TOOL, "complete 'execution time' line")
    histogram = _histogram(text)
    _check_counts(sql, events, histogram)
    return SysbenchRun(
        version=search(_BANNER, text, TOOL, "'sysbench <version>' banner").group(1),
        threads=integer(search(_THREADS, text, TOOL, "'Number of threads:'"), 1, TOOL),
        intervals=_intervals(text),
        reads=sql.reads,
        writes=sql.writes,
        other=sql.other,
        queries=sql.queries,
        transactions=sql.transactions,
        tps=sql.tps,
        qps=sql.qps,
        ignored_errors=sql.ignored_errors,
        reconnects=sql.reconnects,
        total_time_s=total_time_s,
        events=events,
        latency_min_ms=latency.min_ms,
        latency_avg_ms=latency.avg_ms,
        latency_max_ms=latency.max_ms,
        latency_pct=latency.pct,
        latency_pct_ms=latency.pct_ms,
        latency_sum_ms=latency.sum_ms,
        histogram=histogram,
    )


def _check_errors(text: str) -> None:
    match = _ERROR.search(text)
    if match is not None:
        raise DbOutputError(f"sysbench failed: {clip(match.group(0))}")


def _block(text: str, title: str) -> str:
    """The text after the one line ``title`` (the rest of the output)."""
    starts = [m.end() for m in re.finditer(rf"^{re.escape(title)}[ \t]*$", text, re.MULTILINE)]
    if not starts:
        raise output_error(TOOL, f"no {title!r} block (is the output complete?)")
    if len(starts) > 1:
        raise output_error(TOOL, f"{len(starts)} {title!r} blocks: the output of one run only")
    return text[starts[0]:]


def _sql_statistics(block: str) -> _SqlStatistics:
    transactions = search(_TRANSACTIONS, block, TOOL, "'transactions:'")
    queries = search(_QUERIES, block, TOOL, "'queries:'")
    return _SqlStatistics(
        reads=integer(search(_READ, block, TOOL, "'read:' query count"), 1, TOOL),
        writes=integer(search(_WRITE, block, TOOL, "'write:' query count"), 1, TOOL),
        other=integer(search(_OTHER, block, TOOL, "'other:' query count"), 1, TOOL),
        queries=integer(search(_TOTAL, block, TOOL, "'total:' query count"), 1, TOOL),
        transactions=integer(transactions, 1, TOOL),
        tps=decimal(transactions, 2, TOOL),
        qps=decimal(queries, 2, TOOL),
        ignored_errors=integer(search(_IGNORED, block, TOOL, "'ignored errors:'"), 1, TOOL),
        reconnects=integer(search(_RECONNECTS, block, TOOL, "'reconnects:'"), 1, TOOL),
    )


def _latency(block: str) -> _Latency:
    pct = search(_PERCENTILE, block, TOOL, "'Nth percentile:' (run with --percentile=N)")
    return _Latency(
        min_ms=decimal(search(_MIN, block, TOOL, "latency 'min:'"), 1, TOOL),
        avg_ms=decimal(search(_AVG, block, TOOL, "latency 'avg:'"), 1, TOOL),
        max_ms=decimal(search(_MAX, block, TOOL, "latency 'max:'"), 1, TOOL),
        pct=float(integer(pct, 1, TOOL)),
        pct_ms=decimal(pct, 2, TOOL),
        sum_ms=decimal(search(_SUM, block, TOOL, "latency 'sum:'"), 1, TOOL),
    )


def _intervals(text: str) -> list[SysbenchInterval]:
    intervals: list[SysbenchInterval] = []
    for line in text.splitlines():
        if not line.startswith("[ ") or _QUEUE.fullmatch(line):
            continue
        match = _INTERVAL.fullmatch(line)
        if match is None:
            raise output_error(TOOL, f"a report line is not an OLTP interval: {quote(line)}")
        intervals.append(_interval(match))
    return intervals


def _interval(match: re.Match[str]) -> SysbenchInterval:
    numbers = [decimal(match, group, TOOL) for group in range(1, 12)]
    return SysbenchInterval(
        t_s=numbers[0],
        threads=integer(match, 2, TOOL),
        tps=numbers[2],
        qps=numbers[3],
        reads_per_s=numbers[4],
        writes_per_s=numbers[5],
        other_per_s=numbers[6],
        latency_pct=numbers[7],
        latency_ms=numbers[8],
        errors_per_s=numbers[9],
        reconnects_per_s=numbers[10],
    )


def _histogram(text: str) -> list[tuple[float, int]]:
    """The buckets printed under ``Latency histogram``, in the order printed."""
    lines = _block(text, _HISTOGRAM_TITLE).splitlines()[1:]
    if not lines or _HISTOGRAM_HEADER.fullmatch(lines[0]) is None:
        raise output_error(TOOL, "the latency histogram has no 'value ... count' header")
    buckets: list[tuple[float, int]] = []
    for line in lines[1:]:
        match = _BUCKET.fullmatch(line)
        if match is None:
            break
        buckets.append((decimal(match, 1, TOOL), integer(match, 2, TOOL)))
    if not buckets:
        raise output_error(TOOL, "the latency histogram has no buckets")
    if any(a[0] > b[0] for a, b in pairwise(buckets)):
        raise output_error(TOOL, "the latency histogram's values are not in ascending order")
    return buckets


def _check_counts(sql: _SqlStatistics, events: int, histogram: list[tuple[float, int]]) -> None:
    if sql.queries != sql.reads + sql.writes + sql.other:
        raise output_error(
            TOOL, f"{sql.queries} queries in total, but {sql.reads} reads, "
            f"{sql.writes} writes and {sql.other} other")
    if sql.transactions != events:
        raise output_error(TOOL, f"{sql.transactions} transactions but {events} events")
    in_histogram = sum(count for _, count in histogram)
    if in_histogram != events:
        raise output_error(
            TOOL, f"the latency histogram holds {in_histogram} events, not {events}")
