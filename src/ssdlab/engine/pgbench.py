"""Parse pgbench (PostgreSQL 15) output and its per-transaction logs.

The command is ``pgbench -c C -j J -T S -P 1 -l --log-prefix=PREFIX DB``.

stderr holds ``starting vacuum...end.``, the errors (``pgbench: error: ...``; pgbench
14 and older said ``pgbench: fatal: ...``) and one progress line per ``-P`` interval::

    progress: 1.0 s, 4135.7 tps, lat 0.956 ms stddev 0.404, 0 failed

after which pgbench 15 adds ``, lag 0.089 ms`` under ``--rate``, then ``, 3 skipped``
under ``--rate`` with ``--latency-limit``, and ``, 12 retried, 14 retries`` when
``--max-tries`` is not 1. pgbench 14 and older print no ``failed`` field, and can print
``nan`` (``-nan``) for the latency of an interval without transactions; all are read.
The time is seconds since the start (``%.1f``), or the Unix time with
``--progress-timestamp``. The last interval's line can be missing: with ``-T 2 -P 1``
pgbench may stop before its report at 2.0 s.

stdout holds the summary: the banner ``pgbench (15.18 (Debian 15.18-0+deb12u1))``, the
test's parameters (``transaction type:``, ``scaling factor:`` ... ``duration: 3 s``),
``number of transactions actually processed:`` (the successful ones), ``number of
failed transactions:`` (serialization and deadlock errors, which pgbench 15 counts
instead of aborting), ``latency average = ... ms``, ``latency stddev = ... ms`` (only
with ``-P``, ``--rate`` or ``--latency-limit``), ``initial connection time = ... ms``
and ``tps = ... (without initial connection time)``. Any other SQL error aborts the
client: pgbench then prints ``pgbench: error: client 0 script 0 aborted in command ...``
and, at the end, ``pgbench: error: Run was aborted; the above results are
incomplete.``; :func:`parse_pgbench` raises :class:`DbOutputError` with the first error.
One kind of error is not one: before a run without ``-n`` pgbench vacuums its tables,
and with a custom script (``-f``) on a database without them it prints
``starting vacuum...pgbench: error: ERROR:  relation "pgbench_branches" does not exist``
then ``pgbench: detail: (ignoring this error and continuing anyway)``, and runs: an
error followed by that line is passed over. The ``tps =`` line must end with its line
end, and so must every progress line: a cut in the middle of a number could not be told
otherwise.

The per-transaction log (``-l``) is one file per thread, ``PREFIX.PID`` for thread 0 and
``PREFIX.PID.N`` for thread N, with one line per transaction::

    client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]

``time`` is the transaction's latency in integer microseconds (``%.0f``), measured from
its scheduled start, so under ``--rate`` it includes the schedule lag; ``time_epoch``
and ``time_us`` are when it ended. A transaction that did not succeed has a word
instead of its latency: ``skipped`` (``--latency-limit``: it started too late and was
not run), ``failed``, or with ``--failures-detailed`` ``serialization`` or ``deadlock``.
``schedule_lag`` (microseconds) is there under ``--rate``, ``retries`` when
``--max-tries`` is not 1; a line with 7 fields is therefore one or the other, which the
line does not tell. Neither is needed for the latency counts, so both are checked to be
integers and left out. ``--sampling-rate`` logs a random sample of the transactions in
the same format. :func:`read_transaction_logs` streams the files (gzipped ones too)
into :class:`LatencyCounts`.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import IO, NamedTuple

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
    "FAILURE_WORDS",
    "DbOutputError",
    "LatencyCounts",
    "PgbenchInterval",
    "PgbenchRun",
    "parse_pgbench",
    "read_transaction_logs",
]

TOOL = "pgbench"

#: the words of a per-transaction log line's ``time`` field that count as failed
FAILURE_WORDS = frozenset({"failed", "serialization", "deadlock", "other"})


@dataclass(frozen=True)
class PgbenchInterval:
    """One ``-P`` progress line: the transactions that ended since the previous one."""

    t_s: float  # seconds since the start (the Unix time with --progress-timestamp)
    tps: float
    latency_avg_ms: float  # nan for an interval without transactions (pgbench <= 14)
    latency_stddev_ms: float
    failed: int  # 0 where pgbench does not print it (pgbench <= 14)
    lag_ms: float | None = None  # average schedule lag, under --rate
    skipped: int | None = None  # under --rate with --latency-limit
    retried: int | None = None  # transactions retried, when --max-tries is not 1
    retries: int | None = None  # retries in all


@dataclass(frozen=True)
class PgbenchRun:
    """A pgbench run: its parameters, summary and progress intervals."""

    version: str  # as in the banner: "15.18 (Debian 15.18-0+deb12u1)"
    transaction_type: str  # "<builtin: TPC-B (sort of)>", or a script's file name
    scale: int
    query_mode: str  # simple, extended or prepared
    clients: int
    threads: int
    duration_s: float
    transactions: int  # processed successfully
    failed: int  # serialization and deadlock failures
    latency_avg_ms: float
    latency_stddev_ms: float | None  # printed only with -P, --rate or --latency-limit
    initial_connection_ms: float | None  # None under -C (a connection per transaction)
    tps: float
    intervals: list[PgbenchInterval]
    skipped: int = 0  # --rate with --latency-limit: started too late, not run
    retried: int = 0  # transactions retried (--max-tries other than 1)
    lag_avg_ms: float | None = None  # average schedule lag, under --rate

    @property
    def measured_s(self) -> float:
        """The time pgbench measured its transactions over: it prints no elapsed time,
        and its ``tps`` is the transactions it processed (the skipped ones are not among
        them) over that time, without the initial connection time; on a loaded host that
        time differs from ``duration: 3 s`` by tenths of a second (``duration_s`` when no
        transaction ran)."""
        if self.transactions > 0 and self.tps > 0:
            return self.transactions / self.tps
        return self.duration_s


# --------------------------------------------------------------------------- output

_NUMBER = rf"(?:-?nan|-?inf|{DECIMAL})"
#: an error; "pgbench: error:" can follow "starting vacuum..." on its line
_ERROR = re.compile(
    r"(?:pgbench: (?:error|fatal): |^client \d{1,9} aborted|^Run was aborted).*$",
    re.MULTILINE,
)
#: what follows an error pgbench goes on after (its vacuum of tables a script lacks)
_IGNORED = re.compile(r"pgbench: (?:detail: )?\(ignoring this error and continuing anyway\)\s*")
_NEXT_TOOL_LINE = re.compile(r"^(?:pgbench:|progress:).*$", re.MULTILINE)
_PROGRESS = re.compile(
    rf"progress: ({DECIMAL}) s, ({_NUMBER}) tps, lat ({_NUMBER}) ms stddev ({_NUMBER})"
    rf"(?:, ({INT}) failed)?(?:, lag ({_NUMBER}) ms)?(?:, ({INT}) skipped)?"
    rf"(?:, ({INT}) retried, ({INT}) retries)?[ \t]*"
)
_BANNER = re.compile(r"^pgbench \((.{1,200}?)(?:, server .{1,200})?\)[ \t]*$", re.MULTILINE)


def _line(label: str, value: str) -> re.Pattern[str]:
    """``<label><value>`` alone on its line; ``value`` holds the groups."""
    return re.compile(rf"^{re.escape(label)}{value}[ \t]*$", re.MULTILINE)


_TYPE = _line("transaction type: ", r"(.{1,500})")
_SCALE = _line("scaling factor: ", f"({INT})")
_QUERY_MODE = _line("query mode: ", r"(\w{1,20})")
_CLIENTS = _line("number of clients: ", f"({INT})")
_THREADS = _line("number of threads: ", f"({INT})")
_DURATION = _line("duration: ", f"({INT}) s")
_PROCESSED = _line("number of transactions actually processed: ", f"({INT})(?:/{INT})?")
_FAILED = _line("number of failed transactions: ", rf"({INT}) \({_NUMBER}%\)")
_SKIPPED = _line("number of transactions skipped: ", rf"({INT}) \({_NUMBER}%\)")
_RETRIED = _line("number of transactions retried: ", rf"({INT}) \({_NUMBER}%\)")
_LATENCY_AVG = _line("latency average = ", rf"({DECIMAL}) ms(?: \(including failures\))?")
_LATENCY_STDDEV = _line("latency stddev = ", rf"({DECIMAL}) ms")
_LAG = _line("rate limit schedule lag: avg ", rf"({DECIMAL}) \(max {DECIMAL}\) ms")
_CONNECTION = _line("initial connection time = ", rf"({DECIMAL}) ms")
#: with its line end: a cut in the middle of the number could not be told otherwise
_TPS = re.compile(
    rf"^tps = ({DECIMAL}) \((?:without initial connection|including reconnection) times?\)"
    r"[ \t]*\n", re.MULTILINE)


class _Parameters(NamedTuple):
    version: str
    transaction_type: str
    scale: int
    query_mode: str
    clients: int
    threads: int
    duration_s: float


def parse_pgbench(stdout: str, stderr: str) -> PgbenchRun:
    """Parse a ``pgbench -T S -P 1 ...`` run from its stdout (summary) and stderr.

    Raises :class:`DbOutputError` when pgbench reported an error (a failed connection,
    an aborted client), and when a part of the summary is missing (a truncated output, a
    run with ``-t`` instead of ``-T``) or garbled, or a progress line is garbled.
    """
    _check_errors(stderr, stdout)
    parameters = _parameters(stdout)
    return PgbenchRun(
        version=parameters.version,
        transaction_type=parameters.transaction_type,
        scale=parameters.scale,
        query_mode=parameters.query_mode,
        clients=parameters.clients,
        threads=parameters.threads,
        duration_s=parameters.duration_s,
        transactions=_count(_PROCESSED, stdout, "'number of transactions actually processed:'"),
        failed=_count(_FAILED, stdout, "'number of failed transactions:'"),
        latency_avg_ms=_ms(_LATENCY_AVG, stdout, "'latency average ='"),
        latency_stddev_ms=_optional_ms(_LATENCY_STDDEV, stdout),
        initial_connection_ms=_optional_ms(_CONNECTION, stdout),
        tps=decimal(search(_TPS, stdout, TOOL, "complete 'tps =' line"), 1, TOOL),
        intervals=_intervals(stderr),
        skipped=_optional_count(_SKIPPED, stdout),
        retried=_optional_count(_RETRIED, stdout),
        lag_avg_ms=_optional_ms(_LAG, stdout),
    )


def _check_errors(*texts: str) -> None:
    for text in texts:
        line = _first_error(text)
        if line is not None:
            prefix = "" if line.startswith("pgbench:") else "pgbench: "
            raise DbOutputError(f"{prefix}{clip(line)}")


def _first_error(text: str) -> str | None:
    """The first error line of ``text`` that pgbench did not say it ignores."""
    for match in _ERROR.finditer(text):
        following = _NEXT_TOOL_LINE.search(text, match.end())
        if following is None or _IGNORED.fullmatch(following.group(0)) is None:
            return match.group(0)
    return None


def _parameters(stdout: str) -> _Parameters:
    return _Parameters(
        version=search(_BANNER, stdout, TOOL, "'pgbench (<version>)' banner").group(1),
        transaction_type=search(_TYPE, stdout, TOOL, "'transaction type:'").group(1).strip(),
        scale=_count(_SCALE, stdout, "'scaling factor:'"),
        query_mode=search(_QUERY_MODE, stdout, TOOL, "'query mode:'").group(1),
        clients=_count(_CLIENTS, stdout, "'number of clients:'"),
        threads=_count(_THREADS, stdout, "'number of threads:'"),
        duration_s=float(_count(_DURATION, stdout, "'duration:' (run pgbench with -T)")),
    )


def _count(pattern: re.Pattern[str], text: str, what: str) -> int:
    return integer(search(pattern, text, TOOL, what), 1, TOOL)


def _ms(pattern: re.Pattern[str], text: str, what: str) -> float:
    return decimal(search(pattern, text, TOOL, what), 1, TOOL)


def _optional_count(pattern: re.Pattern[str], text: str) -> int:
    match = pattern.search(text)
    return 0 if match is None else integer(match, 1, TOOL)


def _optional_ms(pattern: re.Pattern[str], text: str) -> float | None:
    match = pattern.search(text)
    return None if match is None else decimal(match, 1, TOOL)


def _intervals(stderr: str) -> list[PgbenchInterval]:
    intervals: list[PgbenchInterval] = []
    for line in stderr.splitlines(keepends=True):
        if not line.startswith("progress:"):
            continue
        match = _PROGRESS.fullmatch(line.rstrip("\r\n"))
        if match is None or not line.endswith("\n"):
            raise output_error(TOOL, f"a progress line is garbled or cut: {quote(line)}")
        intervals.append(_interval(match))
    return intervals


def _interval(match: re.Match[str]) -> PgbenchInterval:
    lag, skipped, retried, retries = match.group(6, 7, 8, 9)
    return PgbenchInterval(
        t_s=decimal(match, 1, TOOL),
        tps=float(match.group(2)),
        latency_avg_ms=float(match.group(3)),
        latency_stddev_ms=float(match.group(4)),
        failed=0 if match.group(5) is None else integer(match, 5, TOOL),
        lag_ms=None if lag is None else float(lag),
        skipped=None if skipped is None else int(skipped),
        retried=None if retried is None else int(retried),
        retries=None if retries is None else int(retries),
    )


# --------------------------------------------------------------------------- logs


@dataclass(frozen=True)
class LatencyCounts:
    """Exact latency counts of the successful transactions in pgbench's per-transaction logs.

    ``counts_us`` maps a latency in whole microseconds to how many transactions took it:
    the memory it takes grows with the number of distinct latencies, not of transactions.
    ``completions_per_s`` maps a Unix second to the successful transactions that ended in
    it. Failed and skipped transactions have no latency and are only counted.
    """

    counts_us: Mapping[int, int]
    completions_per_s: Mapping[int, int]
    failed: int = 0  # all failures, whatever their kind
    skipped: int = 0
    failures_by_kind: Mapping[str, int] = field(default_factory=dict)  # "serialization": 3

    @cached_property
    def _sorted_us(self) -> list[int]:
        return sorted(v for v, n in self.counts_us.items() if n > 0)

    @cached_property
    def count(self) -> int:
        """Successful transactions."""
        return sum(self.counts_us.values())

    @property
    def mean_us(self) -> float:
        """The average latency (us); :class:`ValueError` without transactions."""
        self._require_some()
        return sum(v * n for v, n in self.counts_us.items()) / self.count

    @property
    def min_us(self) -> int:
        """The smallest latency (us); :class:`ValueError` without transactions."""
        self._require_some()
        return self._sorted_us[0]

    @property
    def max_us(self) -> int:
        """The largest latency (us); :class:`ValueError` without transactions."""
        self._require_some()
        return self._sorted_us[-1]

    def percentile_us(self, pct: float) -> int:
        """The ``pct`` percentile by nearest rank: exact, never interpolated.

        The smallest latency ``v`` such that at least ``pct`` % of the transactions took
        ``v`` or less. ``pct`` is taken as the decimal it reads as (99.9 is 999/1000, not
        the binary float just above it), so p99.9 of 1000 transactions is the 999th.
        Raises :class:`ValueError` for a ``pct`` outside [0, 100] or no transactions.
        """
        if not 0.0 <= pct <= 100.0:
            raise ValueError(f"percentile must be within [0, 100], not {pct!r}")
        self._require_some()
        rank = math.ceil(Fraction(repr(float(pct))) * self.count / 100)
        cumulative = 0
        for value in self._sorted_us:
            cumulative += self.counts_us[value]
            if cumulative >= rank:
                return value
        raise AssertionError("unreachable: needed <= count")

    def per_second(self, start_epoch_s: int | None = None) -> list[int]:
        """Successful transactions per second: item i counts those that ended within
        [start + i, start + i + 1) in Unix seconds, up to the last second with one.

        ``start_epoch_s`` defaults to the first second with a transaction; those that
        ended before it are not counted.
        """
        seconds = [s for s, n in self.completions_per_s.items() if n > 0]
        if not seconds:
            return []
        start = min(seconds) if start_epoch_s is None else start_epoch_s
        out = [0] * max(0, max(seconds) - start + 1)
        for second, n in self.completions_per_s.items():
            if second >= start:
                out[second - start] += n
        return out

    def _require_some(self) -> None:
        if self.count == 0:
            raise ValueError("no successful transaction in the logs")


#: one line of a per-transaction log: latency (or what happened), end time, 0-2 extras
_LOG_LINE = re.compile(
    rf"{INT} {INT} ({INT}|skipped|failed|serialization|deadlock|other) {INT} ({INT}) "
    rf"(\d{{1,6}})(?: {INT}){{0,2}}",
    re.ASCII,
)


class _Tally:
    """Counts while reading, keyed by the text of the numbers (converted at the end)."""

    def __init__(self) -> None:
        self.latencies: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self.others: Counter[str] = Counter()

    def add(self, match: re.Match[str]) -> None:
        what = match.group(1)
        if what[0].isdigit():
            self.latencies[what] += 1
            self.seconds[match.group(2)] += 1
        else:
            self.others[what] += 1

    def result(self) -> LatencyCounts:
        failures = {k: n for k, n in self.others.items() if k in FAILURE_WORDS}
        return LatencyCounts(
            counts_us=_int_keys(self.latencies),
            completions_per_s=_int_keys(self.seconds),
            failed=sum(failures.values()),
            skipped=self.others["skipped"],
            failures_by_kind=failures,
        )


def _int_keys(counts: Counter[str]) -> dict[int, int]:
    out: dict[int, int] = {}
    for text, n in counts.items():
        key = int(text)
        out[key] = out.get(key, 0) + n
    return out


def read_transaction_logs(paths: Iterable[Path]) -> LatencyCounts:
    """Count the transactions of pgbench per-transaction log files (``-l``) together.

    Files ending in ``.gz`` are read through gzip. Memory stays bounded by the number of
    distinct latencies (an hour at 10,000 tps is 36 million lines but far fewer distinct
    values). Raises :class:`DbOutputError` naming the file and line of anything that is
    not a log line (a truncated last line among them), or for a file that cannot be read.
    """
    tally = _Tally()
    for path in paths:
        for number, line in _lines(path):
            match = _LOG_LINE.fullmatch(line.rstrip("\n"))
            if match is None:
                raise output_error(
                    TOOL, f"{path}:{number} is not a per-transaction log line: {quote(line)}")
            tally.add(match)
    return tally.result()


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with _open(path) as handle:
            yield from enumerate(handle, start=1)
    except (OSError, EOFError, zlib.error) as exc:
        raise output_error(TOOL, f"cannot read transaction log {path}: {exc}") from None


@contextmanager
def _open(path: Path) -> Iterator[IO[str]]:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="ascii", errors="replace", newline="\n") as handle:
            yield handle
    else:
        with path.open(encoding="ascii", errors="replace", newline="\n") as handle:
            yield handle

