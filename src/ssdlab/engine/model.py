"""What one fio run measured, as typed data (the parser's output)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ssdlab.jsonrecord import JsonObject


@dataclass(frozen=True)
class DirectionStats:
    """One direction (read or write) of one reporting group. Units in the names."""

    io_bytes: int
    bw_bytes_per_s: float
    iops: float
    total_ios: int
    runtime_ms: int
    clat_mean_ns: float
    clat_min_ns: float
    clat_max_ns: float
    clat_stddev_ns: float
    lat_mean_ns: float
    lat_max_ns: float
    #: percentile (e.g. 99.9) -> completion latency in ns, as fio reported it
    clat_percentiles_ns: dict[float, float] = field(default_factory=dict)
    #: json+ histogram: latency bucket value in ns -> count (empty without json+)
    clat_bins_ns: dict[int, int] = field(default_factory=dict)
    #: the same for the total latency (submission + completion): fio reports them with
    #: ``lat_percentiles=1``, which ssdlab's job files set (empty in older output)
    lat_percentiles_ns: dict[float, float] = field(default_factory=dict)
    lat_bins_ns: dict[int, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.total_ios == 0


@dataclass(frozen=True)
class JobResult:
    """One entry of fio's ``jobs`` array (one reporting group with group_reporting)."""

    name: str
    error: int
    read: DirectionStats
    write: DirectionStats
    usr_cpu_pct: float
    sys_cpu_pct: float
    job_runtime_ms: int
    options: dict[str, str] = field(default_factory=dict)
    #: the fio server that ran the job (fio --client output's "hostname"), else ""
    host: str = ""

    @property
    def total_iops(self) -> float:
        return self.read.iops + self.write.iops

    @property
    def total_bw_bytes_per_s(self) -> float:
        return self.read.bw_bytes_per_s + self.write.bw_bytes_per_s


@dataclass(frozen=True)
class FioOutput:
    """Everything parsed from one fio invocation's stdout."""

    fio_version: str
    jobs: tuple[JobResult, ...]
    #: every JSON document found, verbatim (normally one)
    documents: tuple[JsonObject, ...]
    #: text outside the JSON documents (warnings fio printed to stdout)
    stray_text: str = ""

    def job(self, name: str) -> JobResult:
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(name)
