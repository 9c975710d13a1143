"""build_pts_tests: the SNIA PTS device-level tests as cells, tracking sets and WIPC."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssdlab.plan.pts import PtsArgs, PtsOptions, build_options, build_pts_tests
from ssdlab.plan.rounds import RoundTest
from ssdlab.plan.specs import Pattern, active_range

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# The SNIA PTS tables, written out independently of ssdlab.plan.pts
SNIA_MIXES = (100, 95, 65, 50, 35, 5, 0)
SNIA_BLOCKS = (1024 * KIB, 128 * KIB, 64 * KIB, 32 * KIB, 16 * KIB, 8 * KIB, 4 * KIB, 512)
SNIA_LATENCY_BLOCKS = (8 * KIB, 4 * KIB, 512)
SNIA_LATENCY_MIXES = (100, 65, 0)


def make_options(**overrides: object) -> PtsOptions:
    values: dict[str, object] = {
        "tests": ("iops", "throughput", "latency"),
        "profile": "default",
        "variant": "snia",
        "rule": "snia",
        "tracking": "v2.0",
        "cell_seconds": 60.0,
        "max_rounds": 25,
        "threads": 4,
        "iodepth": 16,
        "active_range_pct": 100.0,
        "iops_block_bytes": SNIA_BLOCKS,
        "iops_mixes": SNIA_MIXES,
        "latency_block_bytes": SNIA_LATENCY_BLOCKS,
        "latency_mixes": SNIA_LATENCY_MIXES,
        "purge": "auto",
        "precondition": True,
        "ioengine": "libaio",
    }
    values.update(overrides)
    return PtsOptions(**values)  # type: ignore[arg-type]


def plan_by_name(opts: PtsOptions, capacity: int = GIB, sector: int = 512) -> dict[str, RoundTest]:
    return {t.name: t for t in build_pts_tests(opts, capacity, sector)}


def shape(test: RoundTest) -> list[tuple[int, int]]:
    return [(c.block_bytes, c.mix.read_pct) for c in test.round_cells]


def tracked(test: RoundTest, set_name: str) -> list[tuple[str, str, str]]:
    return [(v.name, v.cell, v.metric) for v in test.tracking(set_name)]


# --------------------------------------------------------------------------- order


def test_tests_come_in_pts_order() -> None:
    tests = build_pts_tests(make_options(), GIB, 512)
    assert [t.name for t in tests] == ["iops", "throughput-1024k", "throughput-128k", "latency"]
    assert [t.title for t in tests] == [
        "IOPS",
        "Throughput 1024 KiB",
        "Throughput 128 KiB",
        "Latency",
    ]


@pytest.mark.parametrize(
    ("selected", "expected"),
    [
        (("latency",), ["latency"]),
        (("throughput",), ["throughput-1024k", "throughput-128k"]),
        (("iops", "latency"), ["iops", "latency"]),
    ],
)
def test_only_selected_tests_are_built(selected: tuple[str, ...], expected: list[str]) -> None:
    tests = build_pts_tests(make_options(tests=selected), GIB, 512)
    assert [t.name for t in tests] == expected


# --------------------------------------------------------------------------- IOPS


def test_iops_has_56_cells_in_snia_order() -> None:
    iops = plan_by_name(make_options())["iops"]
    expected = [(b, m) for m in SNIA_MIXES for b in SNIA_BLOCKS]
    assert len(expected) == 56
    assert shape(iops) == expected
    assert shape(iops)[:8] == [
        (1024 * KIB, 100),
        (128 * KIB, 100),
        (64 * KIB, 100),
        (32 * KIB, 100),
        (16 * KIB, 100),
        (8 * KIB, 100),
        (4 * KIB, 100),
        (512, 100),
    ]
    assert shape(iops)[-1] == (512, 0)
    assert iops.skipped == ()


def test_iops_cells_are_random_time_based_at_the_chosen_load() -> None:
    iops = plan_by_name(make_options(threads=7, iodepth=3, cell_seconds=2.5))["iops"]
    names = [c.name for c in iops.round_cells]
    assert len(set(names)) == len(names)
    for cell in iops.round_cells:
        assert cell.pattern is Pattern.RANDOM
        assert (cell.threads, cell.iodepth) == (7, 3)
        assert cell.runtime_s == 2.5
        assert cell.io_bytes is None
        assert (cell.offset_bytes, cell.size_bytes) == (0, GIB)
        assert cell.name == f"iops_bs{cell.block_bytes}_r{cell.mix.read_pct}"
    assert iops.round_seconds == pytest.approx(56 * 2.5)


def test_half_k_cells_are_skipped_with_a_reason_on_a_4k_sector_device() -> None:
    tests = plan_by_name(make_options(), sector=4096)
    iops, latency = tests["iops"], tests["latency"]
    assert shape(iops) == [(b, m) for m in SNIA_MIXES for b in SNIA_BLOCKS if b != 512]
    assert [label for label, _ in iops.skipped] == [
        "0.5 KiB 100/0",
        "0.5 KiB 95/5",
        "0.5 KiB 65/35",
        "0.5 KiB 50/50",
        "0.5 KiB 35/65",
        "0.5 KiB 5/95",
        "0.5 KiB 0/100",
    ]
    for _, reason in iops.skipped + latency.skipped:
        assert "0.5 KiB" in reason
        assert "4096" in reason
    assert shape(latency) == [(b, m) for m in SNIA_LATENCY_MIXES for b in (8 * KIB, 4 * KIB)]
    assert [label for label, _ in latency.skipped] == [
        "0.5 KiB 100/0",
        "0.5 KiB 65/35",
        "0.5 KiB 0/100",
    ]
    assert tests["throughput-1024k"].skipped == ()


def test_nothing_is_skipped_on_a_512_byte_sector_device() -> None:
    tests = plan_by_name(make_options(), sector=512)
    assert all(t.skipped == () for t in tests.values())
    assert sum(len(t.round_cells) for t in tests.values()) == 56 + 2 + 2 + 9


# --------------------------------------------------------------------------- variants


def test_reviews_variant_drops_half_k_and_uses_70_30_latency() -> None:
    opts = build_options(PtsArgs(variant="reviews"), "file", 8)
    tests = plan_by_name(opts)
    assert shape(tests["iops"]) == [(b, m) for m in SNIA_MIXES for b in SNIA_BLOCKS if b != 512]
    assert shape(tests["latency"]) == [(b, m) for m in (100, 70, 0) for b in (8 * KIB, 4 * KIB)]
    assert all(c.block_bytes != 512 for t in tests.values() for c in t.round_cells)
    assert opts.rule == "review"


def test_snia_variant_keeps_half_k_and_65_35_latency() -> None:
    opts = build_options(PtsArgs(variant="snia"), "file", 8)
    tests = plan_by_name(opts)
    assert len(tests["iops"].round_cells) == 56
    assert shape(tests["latency"]) == [
        (b, m) for m in SNIA_LATENCY_MIXES for b in SNIA_LATENCY_BLOCKS
    ]


# --------------------------------------------------------------------------- throughput


@pytest.mark.parametrize(
    ("name", "block"), [("throughput-1024k", MIB), ("throughput-128k", 128 * KIB)]
)
def test_throughput_tests_are_sequential_read_then_write(name: str, block: int) -> None:
    test = plan_by_name(make_options(threads=4, iodepth=16))[name]
    assert shape(test) == [(block, 100), (block, 0)]
    assert [c.fio_rw for c in test.round_cells] == ["read", "write"]
    for cell in test.round_cells:
        assert cell.pattern is Pattern.SEQUENTIAL
        assert (cell.threads, cell.iodepth) == (4, 16)
    read, write = test.round_cells
    label = "1024 KiB" if block == MIB else "128 KiB"
    assert tracked(test, "v1.1") == [(f"write bandwidth {label}", write.name, "bw_bytes_per_s")]
    assert tracked(test, "v2.0") == [
        (f"write bandwidth {label}", write.name, "bw_bytes_per_s"),
        (f"read bandwidth {label}", read.name, "bw_bytes_per_s"),
    ]


# --------------------------------------------------------------------------- latency


def test_latency_cells_are_one_thread_qd1_whatever_the_load() -> None:
    latency = plan_by_name(make_options(threads=16, iodepth=8))["latency"]
    assert shape(latency) == [(b, m) for m in SNIA_LATENCY_MIXES for b in SNIA_LATENCY_BLOCKS]
    for cell in latency.round_cells:
        assert (cell.threads, cell.iodepth) == (1, 1)
        assert cell.pattern is Pattern.RANDOM
    standard = ("mean latency 4 KiB 0/100", "latency_bs4096_r0", "lat_mean_us")
    assert tracked(latency, "v1.1") == [standard]
    assert tracked(latency, "v2.0") == [standard]


def test_latency_tracks_every_cell_without_the_standard_cell() -> None:
    opts = make_options(latency_block_bytes=(8 * KIB,), latency_mixes=(100, 0))
    latency = plan_by_name(opts)["latency"]
    expected = [
        ("mean latency 8 KiB 100/0", "latency_bs8192_r100", "lat_mean_us"),
        ("mean latency 8 KiB 0/100", "latency_bs8192_r0", "lat_mean_us"),
    ]
    assert tracked(latency, "v1.1") == expected
    assert tracked(latency, "v2.0") == expected


# --------------------------------------------------------------------------- tracking


def test_iops_tracking_sets_v11_and_v20() -> None:
    iops = plan_by_name(make_options())["iops"]
    assert [name for name, _ in iops.tracking_sets] == ["v1.1", "v2.0"]
    assert tracked(iops, "v1.1") == [("IOPS 4 KiB 0/100", "iops_bs4096_r0", "iops")]
    assert tracked(iops, "v2.0") == [
        ("IOPS 4 KiB 0/100", "iops_bs4096_r0", "iops"),
        ("IOPS 64 KiB 65/35", "iops_bs65536_r65", "iops"),
        ("IOPS 1024 KiB 100/0", "iops_bs1048576_r100", "iops"),
    ]
    cell_names = {c.name for c in iops.round_cells}
    assert all(v.cell in cell_names for _, vs in iops.tracking_sets for v in vs)


@pytest.mark.parametrize("primary", ["v1.1", "v2.0"])
def test_primary_tracking_set_is_the_chosen_one(primary: str) -> None:
    for test in build_pts_tests(make_options(tracking=primary), GIB, 512):
        assert test.primary_set == primary
        assert test.tracking() == test.tracking(primary)


def test_all_selected_cells_are_tracked_without_the_standard_cells() -> None:
    opts = make_options(iops_block_bytes=(16 * KIB, 8 * KIB), iops_mixes=(100, 50))
    iops = plan_by_name(opts)["iops"]
    every = [
        ("IOPS 16 KiB 100/0", "iops_bs16384_r100", "iops"),
        ("IOPS 8 KiB 100/0", "iops_bs8192_r100", "iops"),
        ("IOPS 16 KiB 50/50", "iops_bs16384_r50", "iops"),
        ("IOPS 8 KiB 50/50", "iops_bs8192_r50", "iops"),
    ]
    assert tracked(iops, "v1.1") == every
    assert tracked(iops, "v2.0") == every


def test_partly_selected_standard_cells_track_those_that_exist() -> None:
    opts = make_options(iops_block_bytes=(64 * KIB, 4 * KIB), iops_mixes=(0,))
    iops = plan_by_name(opts)["iops"]
    assert tracked(iops, "v1.1") == [("IOPS 4 KiB 0/100", "iops_bs4096_r0", "iops")]
    assert tracked(iops, "v2.0") == [("IOPS 4 KiB 0/100", "iops_bs4096_r0", "iops")]


def test_on_a_4k_device_the_standard_cells_are_still_tracked() -> None:
    iops = plan_by_name(make_options(), sector=4096)["iops"]
    assert len(tracked(iops, "v2.0")) == 3


# --------------------------------------------------------------------------- active range


@pytest.mark.parametrize(
    ("capacity", "pct", "size"),
    [
        (GIB, 100.0, GIB),
        (GIB + 123_456, 100.0, GIB),  # rounded down to whole MiB
        (10 * GIB, 50.0, 5 * GIB),
        (1001 * MIB, 10.0, 100 * MIB),  # 100.1 MiB -> 100 MiB
        (1000 * MIB + 5, 25.0, 250 * MIB),
        (3 * GIB, 33.3, 1022 * MIB),  # 1022.97... MiB
        (MIB - 1, 100.0, 0),
    ],
)
def test_active_range_rounds_down_to_whole_mib(capacity: int, pct: float, size: int) -> None:
    rng = active_range(capacity, pct)
    assert (rng.offset_bytes, rng.size_bytes) == (0, size)


@given(
    capacity=st.integers(min_value=0, max_value=2**50),
    pct=st.floats(min_value=0.01, max_value=100.0, allow_nan=False),
)
def test_active_range_is_the_share_floored_to_mib(capacity: int, pct: float) -> None:
    rng = active_range(capacity, pct)
    exact = capacity * Fraction(pct) / 100
    assert rng.offset_bytes == 0
    assert rng.size_bytes % MIB == 0
    assert 0 <= rng.size_bytes <= capacity
    # the float arithmetic may land a hair off the exact share, never a whole MiB
    assert exact - MIB - 1 < rng.size_bytes <= exact + 1


def test_every_cell_uses_the_active_range() -> None:
    opts = make_options(active_range_pct=50.0)
    for test in build_pts_tests(opts, 8 * GIB + 7, 512):
        cells = [*test.round_cells, *([test.wipc] if test.wipc else [])]
        assert all((c.offset_bytes, c.size_bytes) == (0, 4 * GIB) for c in cells)


# --------------------------------------------------------------------------- WIPC


def test_wipc_writes_twice_the_active_range_in_128k_sequential_writes() -> None:
    opts = make_options(active_range_pct=25.0)
    tests = build_pts_tests(opts, 4 * GIB, 512)
    assert len(tests) == 4
    for test in tests:
        wipc = test.wipc
        assert wipc is not None
        assert wipc.pattern is Pattern.SEQUENTIAL
        assert wipc.block_bytes == 128 * KIB
        assert wipc.mix.read_pct == 0
        assert wipc.fio_rw == "write"
        assert (wipc.offset_bytes, wipc.size_bytes) == (0, GIB)
        assert wipc.io_bytes == 2 * GIB
        assert wipc.runtime_s is None
        assert wipc.planned_seconds is None
        assert test.purge is True


def test_no_wipc_without_preconditioning() -> None:
    tests = build_pts_tests(make_options(precondition=False), GIB, 512)
    assert [t.wipc for t in tests] == [None, None, None, None]


def test_options_are_not_changed_by_planning() -> None:
    opts = make_options()
    before = dataclasses.asdict(opts)
    build_pts_tests(opts, GIB, 4096)
    assert dataclasses.asdict(opts) == before
