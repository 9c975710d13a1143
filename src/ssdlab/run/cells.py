"""One cell's measurement as a flat, JSON-ready dict, and window averages of cells.

Units are in the key names. Latency is fio's completion latency (clat). For a mixed
cell, percentiles come from the merged read+write histogram (fio json+ bins).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

from ssdlab.engine.model import DirectionStats, JobResult
from ssdlab.engine.parser import merged_percentile_ns
from ssdlab.plan.specs import CellSpec

Cell = dict[str, object]
PERCENTILES = {"lat_p50_us": 50.0, "lat_p99_us": 99.0, "lat_p99_9_us": 99.9, "lat_p99_99_us": 99.99}
IDENTITY_KEYS = ("cell", "block_bytes", "read_pct", "pattern", "threads", "iodepth")


def _dirs(job: JobResult) -> list[DirectionStats]:
    return [d for d in (job.read, job.write) if not d.empty]


def _mean_latency_us(dirs: list[DirectionStats]) -> float | None:
    ios = sum(d.total_ios for d in dirs)
    if ios == 0:
        return None
    return sum(d.clat_mean_ns * d.total_ios for d in dirs) / ios / 1000


def _percentile_us(dirs: list[DirectionStats], pct: float) -> float | None:
    bins = [d.clat_bins_ns for d in dirs if d.clat_bins_ns]
    if bins and len(bins) == len(dirs):
        value = merged_percentile_ns(bins, pct)
        return None if value is None else value / 1000
    reported = [d.clat_percentiles_ns[pct] for d in dirs if pct in d.clat_percentiles_ns]
    # without a histogram, the larger direction's percentile is the honest bound
    return max(reported) / 1000 if reported else None


def cell_from_job(spec: CellSpec, job: JobResult) -> Cell:
    dirs = _dirs(job)
    cell: Cell = {
        "cell": spec.name,
        "block_bytes": spec.block_bytes,
        "read_pct": spec.mix.read_pct,
        "pattern": str(spec.pattern),
        "threads": spec.threads,
        "iodepth": spec.iodepth,
        "iops": job.total_iops,
        "read_iops": job.read.iops,
        "write_iops": job.write.iops,
        "bw_bytes_per_s": job.total_bw_bytes_per_s,
        "read_bw_bytes_per_s": job.read.bw_bytes_per_s,
        "write_bw_bytes_per_s": job.write.bw_bytes_per_s,
        "lat_mean_us": _mean_latency_us(dirs),
        "lat_max_us": max((d.clat_max_ns for d in dirs), default=0.0) / 1000 if dirs else None,
        "read_lat_mean_us": job.read.clat_mean_ns / 1000 if not job.read.empty else None,
        "write_lat_mean_us": job.write.clat_mean_ns / 1000 if not job.write.empty else None,
        "usr_cpu_pct": job.usr_cpu_pct,
        "sys_cpu_pct": job.sys_cpu_pct,
        "runtime_ms": job.job_runtime_ms,
        "error": job.error,
    }
    lat_max = cell["lat_max_us"]
    for key, pct in PERCENTILES.items():
        value = _percentile_us(dirs, pct)
        # a histogram bin stands for a range: its value can exceed the exact maximum
        if value is not None and isinstance(lat_max, float) and lat_max > 0:
            value = min(value, lat_max)
        cell[key] = value
    return cell


def _combine(key: str, values: list[float]) -> float:
    if key == "lat_max_us":
        return max(values)
    if key == "error":
        return max(values)
    return sum(values) / len(values)


def _metric_keys(rounds: Sequence[Sequence[Cell]]) -> list[str]:
    """Every metric key that appears in any round, in first-seen order."""
    keys: dict[str, None] = {}
    for cells in rounds:
        for cell in cells:
            keys.update((k, None) for k in cell if k not in IDENTITY_KEYS)
    return list(keys)


def window_cells(rounds: Sequence[Sequence[Cell]]) -> list[Cell]:
    """Each cell averaged over the given rounds (maximum latency: the maximum).

    A metric that is None in some rounds (no I/O in that direction) is averaged over the
    rounds that have it, and is None when no round has it.
    """
    if not rounds:
        return []
    keys = _metric_keys(rounds)
    result: list[Cell] = []
    for first in rounds[0]:
        same = [c for r in rounds for c in r if c["cell"] == first["cell"]]
        cell: Cell = {k: first[k] for k in IDENTITY_KEYS}
        for key in keys:
            values = [float(v) for c in same if _is_number(v := c.get(key))]
            cell[key] = _combine(key, values) if values else None
        cell["rounds"] = len(same)
        result.append(cell)
    return result


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def metric(cell: Cell, key: str) -> float | None:
    """A cell's metric as a float; None when the cell has none (no I/O, fio gave none)."""
    value = cell.get(key)
    return float(value) if _is_number(value) else None


def tracking_value(cells: Sequence[Cell], cell_name: str, metric: str) -> float:
    for cell in cells:
        if cell["cell"] == cell_name:
            value = cell.get(metric)
            return float(value) if isinstance(value, int | float) else float("nan")
    return float("nan")
