"""Measured against claimed: which measured figure meets which spec-sheet figure, in what unit."""

from __future__ import annotations

import pytest

from ssdlab.reference.specs import VendorSpec
from ssdlab.report.claims import claim_rows
from ssdlab.report.figures import BW, IOPS, LAT_MEAN, MIB, Figure, FigureKey

KIB = 1024

SPEC = VendorSpec(
    vendor="Acme", model="X1", series="X", form_factor="U.2", interface="NVMe",
    capacity_gb=3840, dwpd="1", seq_read_mb_s=7000, seq_write_mb_s=4000,
    rand_read_4k_iops=1_000_000, rand_write_4k_iops=200_000, mixed_70_30_iops=None,
    latency_read_us=80.0, latency_write_us=None, endurance_tbw=None, warranty_years=5,
    source="test",
)


def fig(kind: str, block_kib: int, read: int, metric_key: str, value: float,
        steady: bool | None = True) -> Figure:
    metric = {"iops": IOPS, "bw_bytes_per_s": BW, "lat_mean_us": LAT_MEAN}[metric_key]
    key = FigureKey(kind, block_kib * KIB, read, metric_key)
    return Figure(key, metric, value, (value,), steady)


def rows(*figs: Figure) -> dict[str, tuple[float | None, float | None, float | None, str]]:
    return {r.figure: (r.claimed, r.measured, r.ratio, r.how)
            for r in claim_rows({f.key: f for f in figs}, SPEC)}


def test_each_claim_meets_its_figure_in_the_spec_sheets_units() -> None:
    # throughput figures hold MiB/s; spec sheets say MB/s (10^6 bytes)
    table = rows(
        fig("throughput", 128, 100, "bw_bytes_per_s", 5000.0),
        fig("throughput", 1024, 100, "bw_bytes_per_s", 6000.0),  # 128 KiB is preferred
        fig("throughput", 1024, 0, "bw_bytes_per_s", 2000.0, steady=False),
        fig("iops", 4, 100, "iops", 750_000.0),
        fig("iops", 4, 0, "iops", 50_000.0),
        fig("iops", 4, 65, "iops", 120_000.0),
        fig("latency", 4, 100, "lat_mean_us", 100.0),
    )
    claimed, measured, ratio, how = table["sequential read"]
    assert claimed == 7000 and measured == pytest.approx(5000 * MIB / 1e6)
    assert ratio == pytest.approx(5000 * MIB / 1e6 / 7000)
    assert how == "128 KiB sequential read, steady state"
    assert table["sequential write"][1] == pytest.approx(2000 * MIB / 1e6)
    assert table["sequential write"][3] == "1024 KiB sequential write, NOT steady"
    assert table["random read 4 KiB"][:3] == (1_000_000, 750_000.0, 0.75)
    assert table["random write 4 KiB"][2] == pytest.approx(0.25)
    # the PTS has 65/35, not 70/30: the nearest mix, said so; no claim, no ratio
    claimed, measured, ratio, how = table["mixed 70/30 4 KiB"]
    assert (claimed, measured, ratio) == (None, 120_000.0, None)
    assert "nearest mix measured" in how
    assert table["read latency"][:3] == (80.0, 100.0, 1.25)
    assert table["write latency"][1] is None and "not measured" in table["write latency"][3]


def test_nothing_measured_says_which_test_was_not_run() -> None:
    table = rows()
    assert all(measured is None and ratio is None for _, measured, ratio, _ in table.values())
    assert table["sequential read"][3] == "not measured (throughput test not run)"
    assert table["random read 4 KiB"][3] == "not measured (IOPS test not run)"
    assert table["read latency"][3] == "not measured (latency test not run)"


def test_published_figures_say_so() -> None:
    table = rows(fig("iops", 4, 100, "iops", 500_000.0, steady=None))
    assert table["random read 4 KiB"][3] == "4 KiB random read, published figure"
