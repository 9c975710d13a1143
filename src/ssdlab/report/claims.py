"""Measured against claimed: a run's figures beside the vendor's spec-sheet numbers.

Vendors quote sequential MB/s (decimal), 4 KiB random IOPS, a 70/30 mix and typical
latency. Each is paired with the closest figure a PTS run measures, and the pairing
says how it was measured, because a vendor's figure is usually a fresh-drive, high
queue-depth number while the PTS figure is steady state: a ratio below 1 is expected.
"""

from __future__ import annotations

from dataclasses import dataclass

from ssdlab.reference.specs import VendorSpec
from ssdlab.report.figures import MIB, Figure, FigureKey

KIB = 1024


@dataclass(frozen=True)
class ClaimRow:
    figure: str
    unit: str
    claimed: float | None
    measured: float | None
    how: str  # what was measured, or why nothing was

    @property
    def ratio(self) -> float | None:
        if self.claimed and self.measured is not None:
            return self.measured / self.claimed
        return None


def _first(figs: dict[FigureKey, Figure], *keys: FigureKey) -> Figure | None:
    for key in keys:
        if key in figs:
            return figs[key]
    return None


def _bw_row(
    figs: dict[FigureKey, Figure], name: str, claimed: float | None, read: int
) -> ClaimRow:
    fig = _first(
        figs,
        FigureKey("throughput", 128 * KIB, read, "bw_bytes_per_s"),
        FigureKey("throughput", 1024 * KIB, read, "bw_bytes_per_s"),
    )
    if fig is None:
        return ClaimRow(name, "MB/s", claimed, None, "not measured (throughput test not run)")
    measured = fig.value * MIB / 1e6  # figures hold MiB/s; spec sheets say MB/s
    return ClaimRow(name, "MB/s", claimed, measured, f"{fig.key.label}, {_state(fig)}")


def _state(fig: Figure) -> str:
    return {"published": "published figure", "steady": "steady state"}.get(fig.state,
                                                                            fig.state)


def _iops_row(
    figs: dict[FigureKey, Figure], name: str, claimed: float | None, *reads: int
) -> ClaimRow:
    for n, read in enumerate(reads):
        fig = figs.get(FigureKey("iops", 4 * KIB, read, "iops"))
        if fig is not None:
            nearest = " (nearest mix measured)" if n else ""
            return ClaimRow(name, "IOPS", claimed, fig.value,
                            f"{fig.key.label}{nearest}, {_state(fig)}")
    return ClaimRow(name, "IOPS", claimed, None, "not measured (IOPS test not run)")


def _lat_row(
    figs: dict[FigureKey, Figure], name: str, claimed: float | None, read: int
) -> ClaimRow:
    fig = figs.get(FigureKey("latency", 4 * KIB, read, "lat_mean_us"))
    if fig is None:
        return ClaimRow(name, "us", claimed, None, "not measured (latency test not run)")
    return ClaimRow(name, "us", claimed, fig.value,
                    f"{fig.key.label} mean at QD 1, {_state(fig)}")


def claim_rows(figs: dict[FigureKey, Figure], spec: VendorSpec) -> list[ClaimRow]:
    return [
        _bw_row(figs, "sequential read", spec.seq_read_mb_s, 100),
        _bw_row(figs, "sequential write", spec.seq_write_mb_s, 0),
        _iops_row(figs, "random read 4 KiB", spec.rand_read_4k_iops, 100),
        _iops_row(figs, "random write 4 KiB", spec.rand_write_4k_iops, 0),
        _iops_row(figs, "mixed 70/30 4 KiB", spec.mixed_70_30_iops, 70, 65),
        _lat_row(figs, "read latency", spec.latency_read_us, 100),
        _lat_row(figs, "write latency", spec.latency_write_us, 0),
    ]
