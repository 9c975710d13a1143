"""The latency-iops suite's stored documents as records (docs/results-format.md): its
plan, its test's parameters, a point's cell and the result (the curves, their points,
the host-bound and NUMA verdicts)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ssdlab.analysis.hostbound import HostBoundRule, HostBoundVerdict
from ssdlab.analysis.numa import NumaCheck
from ssdlab.jsonrecord import JsonObject, Record, flat, key
from ssdlab.plan.results import (
    ArgsPlan,
    ByteRange,
    FioCell,
    HostCpuUse,
    HostCpuWindow,
    SkippedCell,
    TestParams,
)

# -- the plan, the test's parameters, a point's cell ---------------------------------------


@dataclass(frozen=True)
class LatencyIopsStoredPlan(ArgsPlan):
    """The run's stored plan: the ladders and workloads, then how it measures."""

    qd_ladder: list[int] = field(default_factory=list)
    extra_threads: list[int] = field(default_factory=list)
    workloads: list[str] = field(default_factory=list)
    skipped: list[SkippedCell] = field(default_factory=list)
    ioengine: str = ""
    direct: bool = True
    data_pattern: str = ""
    latency: str = ""
    host_cpu: str = ""


@dataclass(frozen=True)
class LatencyIopsParams(TestParams):
    target_latency_us: float = 0.0
    min_iops_rise_pct: float = 0.0
    full_ladder: bool = False
    threads: list[int] = field(default_factory=list)
    extra_threads: list[int] = field(default_factory=list)
    qd_ladder: list[int] = field(default_factory=list)
    base_qds: list[int] = field(default_factory=list)
    warmup_s: float = 0.0
    measure_s: float = 0.0
    cell_seconds: float = 0.0
    host_bound_rule: HostBoundRule | None = None
    active_range: ByteRange = field(default_factory=ByteRange)
    purge: str = ""
    precondition: JsonObject | None = None
    skipped: list[SkippedCell] = field(default_factory=list)
    quick: bool = False


@dataclass(frozen=True)
class LatencyCell(FioCell):
    """A point's cell: fio's, then its outstanding I/Os, the host's CPU and how much IOPS
    rose over the curve's previous point (None at its first)."""

    outstanding: int = 0
    host: HostCpuWindow = flat(default_factory=HostCpuWindow)
    iops_rise_pct: float | None = None


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LadderStop(Record):
    """Why a curve stopped (analysis.ladder's decision, or "interrupted"/"failed")."""

    kind: str = ""
    reason: str = ""


@dataclass(frozen=True)
class PointRecord(Record):
    """One point of a curve: one queue depth, its round, what fio and the host measured,
    and whether it was host-bound."""

    round_no: int = key("round", default=0)
    iodepth: int = 0
    outstanding: int = 0
    iops: float = 0.0
    lat_mean_us: float | None = None
    lat_p99_us: float | None = None
    lat_p99_9_us: float | None = None
    lat_p99_99_us: float | None = None
    lat_max_us: float | None = None
    read_lat_mean_us: float | None = None
    write_lat_mean_us: float | None = None
    bw_bytes_per_s: float = 0.0
    usr_cpu_pct: float = 0.0
    sys_cpu_pct: float = 0.0
    host: HostCpuUse = flat(default_factory=HostCpuUse)
    host_cpu_busiest_pct: float | None = None
    iops_rise_pct: float | None = None
    host_bound: bool = False
    host_bound_reason: str | None = None


@dataclass(frozen=True)
class CurveRecord(Record):
    """One curve (a block size and mix at one thread count): its points, why it stopped,
    and its peak."""

    label: str = ""
    workload: str = ""
    block_bytes: int = 0
    read_pct: int = 0
    threads: int = 0
    points: list[PointRecord] = field(default_factory=list)
    stop: LadderStop | None = None
    max_iops: float | None = None
    max_iops_qd: int | None = None
    max_iops_lat_mean_us: float | None = None


@dataclass(frozen=True)
class PcieLink(Record):
    """The PCI function a block device hangs off, and its link."""

    address: str = ""
    link_speed: str | None = None
    link_width: str | None = None
    max_link_speed: str | None = None
    max_link_width: str | None = None


@dataclass(frozen=True)
class LatencyIopsResult(Record):
    """The test's result, stored again after every point: the curves so far, the
    host-bound verdict, where fio ran."""

    OMIT_NONE = frozenset({"error"})

    curves: list[CurveRecord] = field(default_factory=list)
    points_run: int = 0
    target_latency_us: float = 0.0
    host_bound: HostBoundVerdict | None = None
    numa: NumaCheck | None = None
    pcie: PcieLink | None = None
    fio_cpus: str = ""
    skipped: list[SkippedCell] = field(default_factory=list)
    error: str | None = None
