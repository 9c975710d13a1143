"""Summaries of the block presets' measurements: per table entry (a CrystalDiskMark test
and mode, an ATTO transfer size and direction, an IOmeter access spec), the best pass
(CrystalDiskMark reports the best of its passes) and the mean over the passes.

Pure functions over the stored cells (mappings with ``group``, ``mode``, ``pass`` and the
measured ``bw_bytes_per_s``, ``iops``, ``lat_mean_us``) returning typed entries (the run
stores them as the preset's result rows); MB/s are 10^6 bytes per second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Figures:
    """A measurement's figures, or their means: MB/s (10^6 bytes/s), IOPS, mean latency."""

    mb_per_s: float | None
    iops: float | None
    lat_mean_us: float | None


@dataclass(frozen=True)
class Entry:
    """One table entry: its best pass (highest MB/s) and the mean over its passes."""

    group: str
    mode: str
    passes: int
    best: Figures
    best_pass: int | None  # the best pass's number
    mean: Figures
    per_pass_mb_per_s: list[float | None]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _figures(cell: Mapping[str, Any]) -> Figures:
    bw = _number(cell.get("bw_bytes_per_s"))
    return Figures(None if bw is None else bw / 1e6, _number(cell.get("iops")),
                   _number(cell.get("lat_mean_us")))


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarise(cells: Sequence[Mapping[str, Any]]) -> list[Entry]:
    """One entry per (group, mode) in first-seen order: best pass (highest MB/s), mean."""
    order: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for cell in cells:
        order.setdefault((str(cell.get("group")), str(cell.get("mode"))), []).append(cell)
    out = []
    for (group, mode), same in order.items():
        figures = [_figures(c) for c in same]
        best_index = max(range(len(same)), key=lambda i: figures[i].mb_per_s or 0.0)
        best_pass = same[best_index].get("pass")
        mean = Figures(_mean([f.mb_per_s for f in figures]), _mean([f.iops for f in figures]),
                       _mean([f.lat_mean_us for f in figures]))
        out.append(Entry(group, mode, len(same), figures[best_index],
                         best_pass if isinstance(best_pass, int) else None, mean,
                         [f.mb_per_s for f in figures]))
    return out


def timeline_total(directions: Sequence[Sequence[tuple[float, float]]]) -> list[list[float]]:
    """Sum per-direction (end s, IOPS) series sampled on the same grid into one series."""
    total: dict[float, float] = {}
    for series in directions:
        for t, rate in series:
            key = round(t, 3)
            total[key] = total.get(key, 0.0) + rate
    return [[t, total[t]] for t in sorted(total)]
