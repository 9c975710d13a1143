"""A test of rounds judged for steady state (the SNIA PTS tests, the OP sweep's): its
round of cells, its workload-independent preconditioning and its tracking variables.
Pure data: nothing here touches a device.
"""

from __future__ import annotations

from dataclasses import dataclass

from ssdlab.plan.specs import KIB, ActiveRange, CellSpec, Mix, Pattern

WIPC_BLOCK = 128 * KIB
WIPC_FACTOR = 2


@dataclass(frozen=True)
class TrackingVar:
    """A steady-state tracking variable: one metric of one cell of the round."""

    name: str
    cell: str
    metric: str  # a key of the cell dict: "iops", "bw_bytes_per_s", "lat_mean_us"


@dataclass(frozen=True)
class RoundTest:
    """One test of rounds: its round, its preconditioning and its tracking variables."""

    name: str
    title: str
    round_cells: tuple[CellSpec, ...]
    tracking_sets: tuple[tuple[str, tuple[TrackingVar, ...]], ...]
    primary_set: str
    wipc: CellSpec | None
    purge: bool
    skipped: tuple[tuple[str, str], ...]  # (cell label, reason)

    @property
    def round_seconds(self) -> float:
        return sum(cell.planned_seconds or 0.0 for cell in self.round_cells)

    def tracking(self, set_name: str | None = None) -> tuple[TrackingVar, ...]:
        wanted = set_name or self.primary_set
        return dict(self.tracking_sets)[wanted]


def wipc_cell(rng: ActiveRange) -> CellSpec:
    """Workload-independent preconditioning: 2x the active range in 128 KiB writes."""
    return CellSpec(
        name="wipc_seq128k_write",
        pattern=Pattern.SEQUENTIAL,
        block_bytes=WIPC_BLOCK,
        mix=Mix(0),
        threads=1,
        iodepth=32,
        offset_bytes=rng.offset_bytes,
        size_bytes=rng.size_bytes,
        io_bytes=WIPC_FACTOR * rng.size_bytes,
    )
