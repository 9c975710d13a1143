"""Cliff detection over throughput-against-bytes-written, and fio log parsing."""

from __future__ import annotations

import random

import pytest

from ssdlab.analysis.cliff import RatePoint, find_cliffs, rate_by_bytes
from ssdlab.engine.fiolog import FioLogError, completions, parse_log_lines

MIB = 1 << 20


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


def test_two_cliffs_and_a_step_up_that_is_not_a_cliff() -> None:
    ios = _sequential_write(
        [(40 * MIB, 200e6), (40 * MIB, 80e6), (40 * MIB, 200e6), (60 * MIB, 30e6)]
    )
    cliffs = find_cliffs(rate_by_bytes(ios, 2 * MIB))
    assert [round(c.at_bytes / MIB / 10) * 10 for c in cliffs] == [40, 120]


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
