"""Summaries of the block presets' measurements: per table entry (a CrystalDiskMark test
and mode, an ATTO transfer size and direction, an IOmeter access spec), the best pass
(CrystalDiskMark reports the best of its passes) and the mean over the passes.

Pure functions over the stored cells (dicts with ``group``, ``mode``, ``pass`` and the
measured ``bw_bytes_per_s``, ``iops``, ``lat_mean_us``); MB/s are 10^6 bytes per second.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

METRICS = ("mb_per_s", "iops", "lat_mean_us")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _figures(cell: dict[str, Any]) -> dict[str, float | None]:
    bw = _number(cell.get("bw_bytes_per_s"))
    return {"mb_per_s": None if bw is None else bw / 1e6,
            "iops": _number(cell.get("iops")),
            "lat_mean_us": _number(cell.get("lat_mean_us"))}


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarise(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (group, mode) in first-seen order: best pass (highest MB/s), mean."""
    order: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cell in cells:
        order.setdefault((str(cell.get("group")), str(cell.get("mode"))), []).append(cell)
    out = []
    for (group, mode), same in order.items():
        figures = [_figures(c) for c in same]
        best_index = max(range(len(same)), key=lambda i: figures[i]["mb_per_s"] or 0.0)
        mean = {key: _mean([f[key] for f in figures]) for key in METRICS}
        out.append({
            "group": group,
            "mode": mode,
            "passes": len(same),
            "best": {**figures[best_index], "pass": same[best_index].get("pass")},
            "mean": mean,
            "per_pass_mb_per_s": [f["mb_per_s"] for f in figures],
        })
    return out


def timeline_total(directions: Sequence[Sequence[tuple[float, float]]]) -> list[list[float]]:
    """Sum per-direction (end s, IOPS) series sampled on the same grid into one series."""
    total: dict[float, float] = {}
    for series in directions:
        for t, rate in series:
            key = round(t, 3)
            total[key] = total.get(key, 0.0) + rate
    return [[t, total[t]] for t in sorted(total)]
