"""Cliff detection over throughput-against-bytes-written, and fio log parsing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ssdlab.analysis.cliff import Levels, RatePoint, find_cliffs, find_levels, rate_by_bytes
from ssdlab.engine.fiolog import FioLogError, completions, parse_log_lines, read_log

MIB = 1 << 20
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slc_probe"


def _sequential_write(
    levels: list[tuple[int, float]], io: int = 128 * 1024
) -> list[tuple[float, int]]:
    """Completions of a sequential write that runs ``bytes`` at ``bytes/s`` per level."""
    t, out = 0.0, []
    for size, rate in levels:
        for _ in range(size // io):
            t += io / rate
            out.append((round(t, 3), io))  # fio stamps whole milliseconds
    return out


def test_one_cliff_is_found_where_the_rate_steps_down() -> None:
    ios = _sequential_write([(64 * MIB, 180e6), (100 * MIB, 36e6)])
    points = rate_by_bytes(ios, 2 * MIB)
    (cliff,) = find_cliffs(points)
    assert abs(cliff.at_bytes - 64 * MIB) <= 2 * MIB
    assert cliff.rate_before == pytest.approx(180e6, rel=0.05)
    assert cliff.rate_after == pytest.approx(36e6, rel=0.05)
    assert cliff.ratio == pytest.approx(0.2, rel=0.1)


def test_a_drop_the_rate_comes_back_from_is_a_dip_the_real_edge_is_the_cliff() -> None:
    # a host stall at 38 MiB (the rate fell to a fifth for 12 MiB, then came back), the
    # cache edge at 62 MiB: the first step down was the stall (cliffs at 38 and 62 MiB
    # before dips were told apart), the estimate is the edge, the stall is a dip
    ios = _sequential_write(
        [(38 * MIB, 180e6), (12 * MIB, 35e6), (12 * MIB, 180e6), (90 * MIB, 36e6)]
    )
    points = rate_by_bytes(ios, 2 * MIB)
    levels = find_levels(points)
    (cliff,) = levels.cliffs
    assert cliff.at_bytes == 62 * MIB
    # the level before the edge is the cache's rate: the dip is not part of it
    assert cliff.rate_before == pytest.approx(180e6, rel=0.02)
    assert cliff.rate_after == pytest.approx(36e6, rel=0.02)
    (dip,) = levels.dips
    assert (dip.at_bytes, dip.length_bytes) == (38 * MIB, 12 * MIB)
    assert dip.rate_during == pytest.approx(35e6, rel=0.05) and not dip.is_burst
    assert dip.rate_level == pytest.approx(180e6, rel=0.02)
    assert dip.rate_back == pytest.approx(180e6, rel=0.02)
    assert find_cliffs(points) == [cliff]


def test_a_dip_alone_is_no_cliff() -> None:
    ios = _sequential_write([(40 * MIB, 180e6), (12 * MIB, 40e6), (12 * MIB, 180e6)])
    levels = find_levels(rate_by_bytes(ios, 2 * MIB))
    assert levels.cliffs == ()
    assert [(d.at_bytes / MIB, d.length_bytes / MIB) for d in levels.dips] == [(40, 12)]
    # a short dip amid a long level is not even a segment: neither a cliff nor a dip
    ios = _sequential_write([(40 * MIB, 180e6), (6 * MIB, 40e6), (100 * MIB, 180e6)])
    assert find_levels(rate_by_bytes(ios, 2 * MIB)) == Levels((), ())


def test_a_long_drop_that_comes_back_is_a_dip_too() -> None:
    # within one write the rate does not come back from the cache edge (a step up within
    # one pass would need the cache to refill while the host wrote)
    ios = _sequential_write(
        [(40 * MIB, 200e6), (40 * MIB, 80e6), (40 * MIB, 200e6), (60 * MIB, 30e6)]
    )
    levels = find_levels(rate_by_bytes(ios, 2 * MIB))
    assert [c.at_bytes / MIB for c in levels.cliffs] == [120]
    assert [(d.at_bytes / MIB, d.length_bytes / MIB) for d in levels.dips] == [(40, 40)]


def test_slc_then_tlc_then_folding_are_two_cliffs_and_a_dip_within_a_level_is_not() -> None:
    slc_tlc_fold = [(60 * MIB, 300e6), (40 * MIB, 100e6), (100 * MIB, 20e6)]
    levels = find_levels(rate_by_bytes(_sequential_write(slc_tlc_fold), 2 * MIB))
    assert [c.at_bytes / MIB for c in levels.cliffs] == [60, 100] and levels.dips == ()
    assert [round(c.ratio, 2) for c in levels.cliffs] == [0.33, 0.2]
    # the same with a stall in the TLC phase: a dip below the TLC level, both steps kept
    stalled = [(60 * MIB, 300e6), (20 * MIB, 100e6), (12 * MIB, 20e6), (8 * MIB, 100e6),
               (100 * MIB, 20e6)]
    levels = find_levels(rate_by_bytes(_sequential_write(stalled), 2 * MIB))
    assert [c.at_bytes / MIB for c in levels.cliffs] == [60, 100]  # before: 60, 80 and 100
    assert [(d.at_bytes / MIB, d.length_bytes / MIB) for d in levels.dips] == [(80, 12)]
    assert levels.cliffs[1].rate_before == pytest.approx(100e6, rel=0.02)


def _late_reaps(ios: list[tuple[float, int]], stalls: list[tuple[float, float]]
                ) -> list[tuple[float, int]]:
    """fio off the CPU from ``start`` for ``seconds`` (each stall): the drive goes on, the
    completions it made meanwhile are stamped when fio is back, at once."""
    out = []
    for t, size in ios:
        for start, seconds in stalls:
            if start <= t < start + seconds:
                t = round(start + seconds, 3)
        out.append((t, size))
    return out


def test_the_slow_then_fast_windows_of_late_reaps_are_no_cliff() -> None:
    # a window's rate runs from the previous window's close: completions reaped late make
    # one window slow and the next fast (pairs 0.76/1.48 of the level seen); four late
    # reaps of 20-30 ms in the cache phase, the edge at 64 MiB (before dips were told
    # apart: cliffs at 22.5, 38.75, 56.75 and 62.75 MiB)
    ios = _sequential_write([(64 * MIB, 180e6), (64 * MIB, 36e6)])
    late = _late_reaps(ios, [(0.03, 0.02), (0.1, 0.03), (0.2, 0.025), (0.3, 0.03)])
    points = rate_by_bytes(late, 2 * MIB)
    rates = [p.rate / 180e6 for p in points[:30]]
    assert min(rates) < 0.3 and max(rates) > 3  # the pairs: far slower, then far faster
    levels = find_levels(points)
    (cliff,) = levels.cliffs
    assert cliff.at_bytes == pytest.approx(64 * MIB, abs=2 * MIB)  # within a window
    assert cliff.rate_before == pytest.approx(180e6, rel=0.05)
    assert levels.dips and all(d.is_burst and d.end_bytes < 64 * MIB for d in levels.dips)


@pytest.mark.parametrize("name", ["loaded-1", "loaded-2"])
def test_a_recorded_write_with_host_stalls_finds_the_edge_not_the_stalls(name: str) -> None:
    # fio's write_lat_log of a 1 MiB QD8 sequential write on the emulated client-slc
    # drive (512 MiB, SLC 61.4 MiB: the emulator's counters, 15,728 SLC programs of
    # 4 KiB, nothing folded) under stress-ng --cpu 2 (tests/fixtures/slc_probe/README.md).
    # Before dips were told from cliffs these gave first cliffs at 23 and 26 MiB.
    entries = sorted((e for e in read_log(FIXTURES / f"{name}_lat.log")
                      if e.direction == "write"), key=lambda e: e.time_ms)
    points = rate_by_bytes(completions(entries, "write"), 2 * MIB)
    levels = find_levels(points)
    edge = 15_728 * 4096
    assert levels.cliffs[0].at_bytes == pytest.approx(edge, abs=2 * MIB)
    assert levels.cliffs[0].ratio < 0.35
    assert levels.dips and all(d.end_bytes <= edge for d in levels.dips)


def test_noise_alone_makes_no_cliff() -> None:
    rng = random.Random(7)
    points = [RatePoint(i * MIB, 100e6 * (1 + rng.uniform(-0.1, 0.1))) for i in range(200)]
    assert find_cliffs(points) == []


def test_windows_absorb_completions_in_the_same_millisecond() -> None:
    ios = [(0.001, 4096)] * 10 + [(0.002, 4096)] * 10 + [(0.003, 4096)] * 10
    points = rate_by_bytes(ios, 8192)
    # one window per millisecond tick: the first closes at once, the others take the rest
    assert [p.bytes_done for p in points] == [8192, 11 * 4096, 21 * 4096]
    assert [p.rate for p in points] == pytest.approx([8192e3, 9 * 4096e3, 10 * 4096e3])
    with pytest.raises(ValueError):
        rate_by_bytes(ios, 0)


def test_fio_log_lines() -> None:
    entries = parse_log_lines(["12, 340000, 1, 131072, 262144, 0", "5, 2000, 0, 4096", ""])
    assert entries[0].direction == "write" and entries[0].offset == 262144
    assert entries[1].offset is None
    assert completions(entries, "write") == [(0.012, 131072)]
    with pytest.raises(FioLogError, match="line 1"):
        parse_log_lines(["12, x, 1, 4096"], "lat.log")
    with pytest.raises(FioLogError):
        parse_log_lines(["12, 3, 7, 4096"])
