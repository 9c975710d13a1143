"""Find write cliffs: where throughput, plotted against bytes written, steps down.

An SSD with an SLC cache writes at SLC speed until the cache is full, then at the
native (TLC/QLC) speed, and possibly slower again when it must fold the cache while
writing. Plotted against the bytes written since purge the throughput is piecewise
constant; the cliffs are the steps. We find them by binary segmentation: split the
series where two constant segments fit it best (least squares), keep the split if the
two levels differ by at least ``min_change`` of the higher one, and repeat on each side.

Input is what fio's per-I/O log gives: completion time and size of every I/O, in
completion order. :func:`rate_by_bytes` turns it into (bytes written, MB/s) points over
windows of equal bytes, so the cliff position is resolved to a window, not to a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MIN_POINTS_PER_SEGMENT = 3


@dataclass(frozen=True)
class RatePoint:
    bytes_done: float  # bytes written at the end of the window
    rate: float  # bytes per second over the window


@dataclass(frozen=True)
class Cliff:
    at_bytes: float  # bytes written when the rate changed
    rate_before: float  # bytes/s, mean of the segment before
    rate_after: float  # bytes/s, mean of the segment after

    @property
    def ratio(self) -> float:
        return self.rate_after / self.rate_before if self.rate_before else 0.0


def rate_by_bytes(
    completions: Sequence[tuple[float, int]], window_bytes: int
) -> list[RatePoint]:
    """(completion time in s, bytes) per I/O, in completion order -> rate per window.

    A window closes at the first completion that brings it to ``window_bytes``; its rate
    is its bytes over the time since the previous window closed. Windows whose duration
    is zero (several completions in one timer tick) are merged into the next one.
    """
    if window_bytes <= 0:
        raise ValueError("window_bytes must be positive")
    points: list[RatePoint] = []
    done = 0.0
    pending = 0
    t_open = 0.0
    for t, size in completions:
        done += size
        pending += size
        if pending >= window_bytes and t > t_open:
            points.append(RatePoint(done, pending / (t - t_open)))
            pending = 0
            t_open = t
    return points


def _sse(prefix: list[float], prefix_sq: list[float], lo: int, hi: int) -> float:
    n = hi - lo
    total = prefix[hi] - prefix[lo]
    return prefix_sq[hi] - prefix_sq[lo] - total * total / n


def _best_split(rates: Sequence[float], lo: int, hi: int) -> int | None:
    prefix = [0.0]
    prefix_sq = [0.0]
    for r in rates:
        prefix.append(prefix[-1] + r)
        prefix_sq.append(prefix_sq[-1] + r * r)
    best, best_cost = None, _sse(prefix, prefix_sq, lo, hi)
    for k in range(lo + MIN_POINTS_PER_SEGMENT, hi - MIN_POINTS_PER_SEGMENT + 1):
        cost = _sse(prefix, prefix_sq, lo, k) + _sse(prefix, prefix_sq, k, hi)
        if cost < best_cost:
            best, best_cost = k, cost
    return best


def find_cliffs(points: Sequence[RatePoint], min_change: float = 0.3) -> list[Cliff]:
    """Every step down in rate of at least ``min_change`` (a fraction of the rate before).

    Steps up (a cache that refilled while idle) are not cliffs and are not returned,
    but they still split the series so the levels around them are measured right.
    """
    if not 0 < min_change < 1:
        raise ValueError("min_change must be between 0 and 1")
    rates = [p.rate for p in points]
    splits: list[int] = []

    def mean(lo: int, hi: int) -> float:
        return sum(rates[lo:hi]) / (hi - lo)

    def segment(lo: int, hi: int) -> None:
        k = _best_split(rates, lo, hi)
        if k is None:
            return
        a, b = mean(lo, k), mean(k, hi)
        if abs(a - b) < min_change * max(a, b):
            return
        segment(lo, k)
        splits.append(k)
        segment(k, hi)

    segment(0, len(rates))
    splits.sort()
    bounds = [0, *splits, len(rates)]
    cliffs = []
    for i, k in enumerate(splits):
        before, after = mean(bounds[i], k), mean(k, bounds[i + 2])
        if after < before:
            cliffs.append(Cliff(points[k - 1].bytes_done, before, after))
    return cliffs
