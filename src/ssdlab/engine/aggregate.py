"""Several fio servers' results of one job taken together (fio ``--client`` runs).

fio's own "All clients" block is not used: its bandwidth was not the sum of the clients'
in fio 3.36 (fio issue 1918) and it had no latency before 3.39 (issue 1881). Here the
aggregate of a job is computed from each host's result: I/Os, bytes, IOPS and bandwidth
summed; the mean latency weighted by each host's I/Os; the standard deviation pooled;
the latency histograms (json+ bins) merged, and every percentile read from the merged
histogram (never an average of the hosts' percentiles). Without histograms a percentile
cannot be merged: the largest host's value is kept as the honest bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ssdlab.engine.model import DirectionStats, FioOutput, JobResult
from ssdlab.engine.parser import merged_percentile_ns

__all__ = ["aggregate_jobs", "by_host", "merge_directions", "merge_jobs"]


def by_host(jobs: Sequence[JobResult]) -> dict[str, tuple[JobResult, ...]]:
    """The job results of each host, in the order hosts first appear."""
    hosts: dict[str, list[JobResult]] = {}
    for job in jobs:
        hosts.setdefault(job.host, []).append(job)
    return {host: tuple(found) for host, found in hosts.items()}


def aggregate_jobs(output: FioOutput) -> FioOutput:
    """``output`` with each job name's results of every host merged into one (host "")."""
    names: dict[str, list[JobResult]] = {}
    for job in output.jobs:
        names.setdefault(job.name, []).append(job)
    merged = tuple(merge_jobs(found) for found in names.values())
    return FioOutput(output.fio_version, merged, output.documents, output.stray_text)


def merge_jobs(jobs: Sequence[JobResult]) -> JobResult:
    """One job's results on several hosts as one result."""
    first = jobs[0]
    return JobResult(
        name=first.name,
        error=max(job.error for job in jobs),
        read=merge_directions([job.read for job in jobs]),
        write=merge_directions([job.write for job in jobs]),
        usr_cpu_pct=sum(job.usr_cpu_pct for job in jobs) / len(jobs),
        sys_cpu_pct=sum(job.sys_cpu_pct for job in jobs) / len(jobs),
        job_runtime_ms=max(job.job_runtime_ms for job in jobs),
        options=dict(first.options),
        host="",
    )


def merge_directions(stats: Sequence[DirectionStats]) -> DirectionStats:
    """One direction of one job on several hosts, as one."""
    busy = [d for d in stats if not d.empty]
    ios = sum(d.total_ios for d in busy)
    bins = _merged_bins(busy)
    return DirectionStats(
        io_bytes=sum(d.io_bytes for d in stats),
        bw_bytes_per_s=sum(d.bw_bytes_per_s for d in stats),
        iops=sum(d.iops for d in stats),
        total_ios=sum(d.total_ios for d in stats),
        runtime_ms=max((d.runtime_ms for d in stats), default=0),
        clat_mean_ns=_weighted(busy, ios, "clat_mean_ns"),
        clat_min_ns=min((d.clat_min_ns for d in busy), default=0.0),
        clat_max_ns=max((d.clat_max_ns for d in busy), default=0.0),
        clat_stddev_ns=_pooled_stddev(busy, ios),
        lat_mean_ns=_weighted(busy, ios, "lat_mean_ns"),
        lat_max_ns=max((d.lat_max_ns for d in busy), default=0.0),
        clat_percentiles_ns=_percentiles(busy, bins),
        clat_bins_ns=bins,
    )


def _weighted(busy: Sequence[DirectionStats], ios: int, key: str) -> float:
    if ios == 0:
        return 0.0
    return sum(float(getattr(d, key)) * d.total_ios for d in busy) / ios


def _pooled_stddev(busy: Sequence[DirectionStats], ios: int) -> float:
    """The standard deviation of all hosts' samples together, from each host's count,
    mean and (population) standard deviation."""
    if ios == 0:
        return 0.0
    mean = _weighted(busy, ios, "clat_mean_ns")
    second = sum(d.total_ios * (d.clat_stddev_ns ** 2 + d.clat_mean_ns ** 2) for d in busy)
    return math.sqrt(max(0.0, second / ios - mean ** 2))


def _merged_bins(busy: Sequence[DirectionStats]) -> dict[int, int]:
    """The hosts' json+ histograms added bucket by bucket ({} unless every host has one)."""
    if not busy or any(not d.clat_bins_ns for d in busy):
        return {}
    merged: dict[int, int] = {}
    for d in busy:
        for value, count in d.clat_bins_ns.items():
            merged[value] = merged.get(value, 0) + count
    return merged


def _percentiles(busy: Sequence[DirectionStats], bins: dict[int, int]) -> dict[float, float]:
    keys = sorted({pct for d in busy for pct in d.clat_percentiles_ns})
    out: dict[float, float] = {}
    for pct in keys:
        if bins:
            value = merged_percentile_ns([bins], pct)
            if value is not None:
                out[pct] = value
            continue
        reported = [d.clat_percentiles_ns[pct] for d in busy if pct in d.clat_percentiles_ns]
        out[pct] = max(reported)
    return out
