"""What a level of the RAID matrix measured, for the comparison of levels
(run/matrix_run.py): each test's cells of its last round, compared by IOPS and MB/s or,
where the test tracks latency, by its latency."""

from __future__ import annotations

import statistics
from typing import Any

from ssdlab.plan.matrix import BY_LATENCY, LevelRow
from ssdlab.store.records import RunData, TestData


def level_rows(run: RunData) -> list[LevelRow]:
    """What a level's run measured, for the comparison: each test's cells of its last
    round (their mean where a cell ran several passes)."""
    rows = []
    for test in run.tests:
        if not test.rounds:
            continue
        last = max(test.rounds, key=lambda r: r.round_no)
        grouped: dict[str, list[dict[str, Any]]] = {}
        for cell in last.cells:
            grouped.setdefault(_cell_label(cell), []).append(cell)
        by = _compared_by(test)
        for label, cells in grouped.items():
            rows.append(LevelRow(
                test.name, label, statistics.fmean(float(c.get("iops") or 0) for c in cells),
                statistics.fmean(float(c.get("bw_bytes_per_s") or 0) for c in cells) / 1e6,
                _opt_float(cells[0].get("read_pct")), _opt_int(cells[0].get("block_bytes")),
                _mean_of(cells, "lat_mean_us"), _mean_of(cells, "lat_p99_us"), by))
    return rows


def _compared_by(test: TestData) -> str | None:
    """How the levels compare on ``test``: by latency (``BY_LATENCY``) where the test
    tracks latency (the PTS latency test tracks mean latency), else by IOPS and MB/s
    (None, as LevelRow.compared_by stores it)."""
    tracking = test.params.get("tracking")
    chosen = tracking.get(test.params.get("tracking_set")) if isinstance(tracking, dict) else None
    metrics = [str(v.get("metric")) for v in chosen or () if isinstance(v, dict)]
    return BY_LATENCY if metrics and all(m.startswith("lat_") for m in metrics) else None


def _mean_of(cells: list[dict[str, Any]], key: str) -> float | None:
    values = [float(c[key]) for c in cells if isinstance(c.get(key), int | float)]
    return statistics.fmean(values) if values else None


def _cell_label(cell: dict[str, Any]) -> str:
    if cell.get("group"):
        return f"{cell['group']} {cell.get('mode', '')}".strip()
    return str(cell.get("cell", "?"))


def _opt_float(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) else None


def _opt_int(v: object) -> int | None:
    return int(v) if isinstance(v, int | float) else None
