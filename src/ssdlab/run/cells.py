"""One cell's measurement as a flat, JSON-ready dict, and window averages of cells.

Units are in the key names. Latency is fio's completion latency (clat), unless Little's
law says submission blocks (analysis/consistency.py): then the cell's latency figures
(mean, maximum, percentiles) are the total latency (fio's lat = slat + clat), and
``latency_basis`` says "total". Every cell keeps both means (``clat_mean_us``,
``lat_total_mean_us``), the mean in flight and fio's slots (``in_flight``, ``io_slots``)
and the verdict (``littles_law``). For a mixed cell, percentiles come from the merged
read+write histogram (fio json+ bins).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard, TypeVar

from ssdlab.analysis.consistency import (
    EXCEEDS,
    OPEN,
    TOTAL,
    Direction,
    LittleVerdict,
    closed_loop,
    is_sync,
    little,
    queue_depth,
)
from ssdlab.engine.model import DirectionStats, JobResult
from ssdlab.engine.parser import merged_percentile_ns
from ssdlab.jsonrecord import Record
from ssdlab.plan.results import FioCell
from ssdlab.plan.specs import CellSpec

Cell = dict[str, object]
R = TypeVar("R", bound=Record)
PERCENTILES = {"lat_p50_us": 50.0, "lat_p99_us": 99.0, "lat_p99_9_us": 99.9, "lat_p99_99_us": 99.99}
IDENTITY_KEYS = ("cell", "block_bytes", "read_pct", "pattern", "threads", "iodepth")


def _dirs(job: JobResult) -> list[DirectionStats]:
    return [d for d in (job.read, job.write) if not d.empty]


def _total_ns(d: DirectionStats) -> float:
    """A direction's mean total latency (fio's lat; never below its clat)."""
    return max(d.lat_mean_ns, d.clat_mean_ns)


def _mean_latency_us(dirs: list[DirectionStats], total: bool = False) -> float | None:
    ios = sum(d.total_ios for d in dirs)
    if ios == 0:
        return None
    return sum((_total_ns(d) if total else d.clat_mean_ns) * d.total_ios for d in dirs
               ) / ios / 1000


def _percentile_us(dirs: list[DirectionStats], pct: float, total: bool = False
                   ) -> float | None:
    bins = [d.lat_bins_ns if total else d.clat_bins_ns for d in dirs]
    if all(bins):
        value = merged_percentile_ns(bins, pct)
        return None if value is None else value / 1000
    tables = [d.lat_percentiles_ns if total else d.clat_percentiles_ns for d in dirs]
    reported = [t[pct] for t in tables if pct in t]
    # without a histogram, the larger direction's percentile is the honest bound
    return max(reported) / 1000 if reported else None


def littles_law(spec: CellSpec, job: JobResult) -> LittleVerdict | None:
    """Little's law on a measured cell (None: it did no I/O)."""
    directions = [Direction(d.iops, d.clat_mean_ns / 1000, _total_ns(d) / 1000,
                            d.runtime_ms) for d in _dirs(job)]
    return little(directions, spec.threads, queue_depth(job.options, spec.iodepth),
                  closed=closed_loop(job.options), sync=is_sync(job.options))


def _direction_mean(d: DirectionStats, total: bool) -> float | None:
    return None if d.empty else (_total_ns(d) if total else d.clat_mean_ns) / 1000


def cell_from_job(spec: CellSpec, job: JobResult) -> Cell:
    dirs = _dirs(job)
    verdict = littles_law(spec, job)
    total = verdict is not None and verdict.status == TOTAL
    lat_max = max((d.lat_max_ns if total else d.clat_max_ns for d in dirs), default=0.0)
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
        "lat_mean_us": _mean_latency_us(dirs, total),
        "lat_max_us": lat_max / 1000 if dirs else None,
        "read_lat_mean_us": _direction_mean(job.read, total),
        "write_lat_mean_us": _direction_mean(job.write, total),
        "usr_cpu_pct": job.usr_cpu_pct,
        "sys_cpu_pct": job.sys_cpu_pct,
        "runtime_ms": job.job_runtime_ms,
        "error": job.error,
    }
    shown_max = cell["lat_max_us"]
    for key, pct in PERCENTILES.items():
        value = _percentile_us(dirs, pct, total)
        # a histogram bin stands for a range: its value can exceed the exact maximum
        if value is not None and isinstance(shown_max, float) and shown_max > 0:
            value = min(value, shown_max)
        cell[key] = value
    cell.update(little_keys(verdict, dirs))
    return cell


def fio_cell(spec: CellSpec, job: JobResult) -> FioCell:
    """The cell of ``job`` (:func:`cell_from_job`) as its record."""
    return FioCell.from_json(cell_from_job(spec, job), f"cell {spec.name}")


def cell_records(record: type[R], cells: Sequence[Cell], where: str) -> list[R]:
    """Measured cells as the suite's cell record stores them (``SuiteSpec.cells``): their
    keys, in their order; one that does not fit is a StoredDataError naming ``where``."""
    return [record.from_json(c, f"{where} cell {c.get('cell')}") for c in cells]


def little_keys(verdict: LittleVerdict | None, dirs: list[DirectionStats]) -> Cell:
    """What a cell keeps of Little's law (docs/results-format.md)."""
    return {
        "clat_mean_us": _mean_latency_us(dirs),
        "lat_total_mean_us": _mean_latency_us(dirs, True),
        "in_flight": None if verdict is None else verdict.in_flight,
        "io_slots": None if verdict is None else verdict.slots,
        "latency_basis": "total" if verdict is not None and verdict.status == TOTAL
        else "completion",
        "littles_law": None if verdict is None else verdict.status,
    }


#: a window's Little's law: its most telling round's (a contradiction first)
_SEVERITY = {EXCEEDS: 3, TOTAL: 2, OPEN: 1}
#: the figures that are completion or total latency, by the cell's latency_basis
BASIS_KEYS = ("lat_mean_us", "lat_max_us", "read_lat_mean_us", "write_lat_mean_us",
              *PERCENTILES)


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
        bases = {c.get("latency_basis") for c in same}
        for key in keys:
            if key in ("latency_basis", "littles_law"):
                cell[key] = _text_of(key, same)
                continue
            # rounds that differ in basis: the window's latency is the total one
            chosen = [c for c in same if c.get("latency_basis") == "total"] if (
                len(bases) > 1 and key in BASIS_KEYS) else same
            if len(bases) > 1 and key == "lat_mean_us":
                chosen, key_of = same, "lat_total_mean_us"
            else:
                key_of = key
            values = [float(v) for c in chosen if _is_number(v := c.get(key_of))]
            cell[key] = _combine(key, values) if values else None
        cell["rounds"] = len(same)
        result.append(cell)
    return result


def _text_of(key: str, same: list[Cell]) -> str | None:
    """A window's latency basis ("total" when any round's is) or Little's law verdict
    (the most severe of its rounds')."""
    texts = [v for c in same if isinstance(v := c.get(key), str)]
    if not texts:
        return None
    if key == "latency_basis":
        return "total" if "total" in texts else texts[0]
    return max(texts, key=lambda t: _SEVERITY.get(t, 0))


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
