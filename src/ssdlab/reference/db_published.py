"""The Micron 9400 review's published database figures, and which of them a database test
of ``ssdlab run db`` is set beside.

The figures are package data, ``data/published-db.csv``, in the published-results format
(:data:`ssdlab.reference.published.COLUMNS`, docs/reference-data.md): ``ssdlab import
published`` accepts the file as it is. Here it is read with ``importlib.resources`` and
validated by :func:`ssdlab.reference.published.parse_rows`, then checked for what the
database pages need: one result per (source, device, benchmark), its TPS, and the
latencies in ms it has.

The review (``../shared/reference/003``) ran two database benchmarks on other hardware
than any ssdlab run: sysbench OLTP on Percona MySQL and a TPC-C-like load on SQL Server.
:func:`published_match` says which one a db test is shown with and whether it is the same
kind of test (set beside the run in bars) or context only (a different mix or benchmark).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ssdlab.errors import UserError
from ssdlab.plan.db import PGBENCH, SYSBENCH
from ssdlab.reference.published import PublishedRow, parse_rows

RESOURCE = "data/published-db.csv"
#: the file's ``test`` names: the review's two database benchmarks
SYSBENCH_OLTP = "sysbench_oltp"
SQLSERVER_TPCC = "sqlserver_tpcc"
BENCHMARKS = {
    SYSBENCH_OLTP: "sysbench OLTP on Percona MySQL 5.5 (8-vCPU VM)",
    SQLSERVER_TPCC: "TPC-C-like load on SQL Server 2014 (Benchmark Factory, 8-vCPU VM)",
}
#: the file's ``metric`` names and the field each fills
METRICS = {"tps": "tps", "latency_avg_ms": "latency_avg_ms",
           "latency_p99_ms": "latency_p99_ms"}


@dataclass(frozen=True)
class PublishedDb:
    """One published database result: a benchmark's figures for one device of a review."""

    source: str  # the review's file, e.g. 003_f015207b6d3e99c1.txt
    device: str
    capacity_gb: float  # as the file gives it; its notes say when the review did not
    benchmark: str  # a key of BENCHMARKS
    threads: int | None  # client threads as published (None: not stated as threads)
    tps: float
    latency_avg_ms: float | None
    latency_p99_ms: float | None
    setup: str  # the rows' notes: the server, the VM and host, the dataset, the phases

    @property
    def title(self) -> str:
        return BENCHMARKS[self.benchmark]

    @property
    def in_flight(self) -> float | None:
        """Transactions in flight by Little's law (TPS x average latency); None without
        an average latency."""
        if self.latency_avg_ms is None:
            return None
        return self.tps * self.latency_avg_ms / 1000


@dataclass(frozen=True)
class DbMatch:
    """The published result a db test is shown with, and how close a match it is."""

    published: PublishedDb
    same_kind: bool  # True: the same benchmark (bars beside the run); False: context only
    how: str  # a sentence for the page


def parse_db_published(text: str, name: str) -> tuple[PublishedDb, ...]:
    """The results of a published database figures file (the published-results format),
    in the order they first appear; UserError at the first problem."""
    groups: dict[tuple[str, str, str], list[PublishedRow]] = {}
    for row in parse_rows(text, name):
        if row.test not in BENCHMARKS:
            raise UserError(f"{name} line {row.line}: test {row.test!r} is not one of: "
                            f"{', '.join(BENCHMARKS)}")
        if row.metric not in METRICS:
            raise UserError(f"{name} line {row.line}: metric {row.metric!r} is not one of: "
                            f"{', '.join(METRICS)}")
        if row.value <= 0:
            raise UserError(f"{name} line {row.line}: {row.metric} {row.value:g} must be > 0")
        groups.setdefault((row.source, row.device, row.test), []).append(row)
    return tuple(_result(rows, name) for rows in groups.values())


def _result(rows: Sequence[PublishedRow], name: str) -> PublishedDb:
    values: dict[str, float] = {}
    for row in rows:
        if row.metric in values:
            raise UserError(f"{name} line {row.line}: {row.metric} of {row.test} for "
                            f"{row.device!r} is given twice")
        values[METRICS[row.metric]] = row.value
    first = rows[0]
    if "tps" not in values:
        raise UserError(f"{name}: {first.test} for {first.device!r} has no tps row")
    threads = {r.threads for r in rows}
    return PublishedDb(
        source=first.source, device=first.device, capacity_gb=first.capacity_gb,
        benchmark=first.test, threads=threads.pop() if len(threads) == 1 else None,
        tps=values["tps"], latency_avg_ms=values.get("latency_avg_ms"),
        latency_p99_ms=values.get("latency_p99_ms"),
        setup=" ".join(dict.fromkeys(r.notes for r in rows if r.notes)))


@cache
def load_db_published() -> tuple[PublishedDb, ...]:
    """The database figures shipped with ssdlab (``data/published-db.csv``)."""
    text = resources.files("ssdlab.reference").joinpath(RESOURCE).read_text(encoding="utf-8")
    return parse_db_published(text, "published-db.csv")


def published_match(workload: str, mode: str,
                    published: Sequence[PublishedDb] | None = None) -> DbMatch | None:
    """The published result a db test (its plan's workload and mode) is shown with, or
    None: sysbench tests with the review's sysbench OLTP (the same kind for
    ``oltp_read_write``, context for the other mixes), pgbench's TPC-B-like script with
    the review's TPC-C-like SQL Server load (context only: a different benchmark)."""
    found = {p.benchmark: p for p in (load_db_published() if published is None
                                      else published)}
    if workload == SYSBENCH and SYSBENCH_OLTP in found:
        p = found[SYSBENCH_OLTP]
        if mode == "oltp_read_write":
            return DbMatch(p, True, "The same kind of test: sysbench's OLTP read/write mix "
                           "(the review names only \"OLTP\", sysbench's read/write mix "
                           "unless made read-only), on another server (Percona 5.5), client "
                           "and drive.")
        return DbMatch(p, False, f"Context only: the review ran sysbench's OLTP read/write "
                       f"mix; this test is {mode}, a different mix, so its figures are not "
                       "comparable with the review's.")
    if workload == PGBENCH and mode == "tpcb-like" and SQLSERVER_TPCC in found:
        return DbMatch(found[SQLSERVER_TPCC], False, "Context only, a different benchmark: "
                       "the review's figure is a TPC-C-like load on SQL Server 2014 (five "
                       "transaction types over a warehouse schema, 15,000 virtual users); "
                       "pgbench's tpcb-like script is TPC-B-like (one short transaction of "
                       "three updates, a select and an insert, as fast as each client can) "
                       "on PostgreSQL. Neither TPS nor latency compares.")
    return None
