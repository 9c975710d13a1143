"""Find write cliffs: where throughput, plotted against bytes written, steps down.

An SSD with an SLC cache writes at SLC speed until the cache is full, then at the
native (TLC/QLC) speed, and possibly slower again when it must fold the cache while
writing. Plotted against the bytes written since purge the throughput is piecewise
constant; the cliffs are the steps. We find them by binary segmentation: split the
series where two constant segments fit it best (least squares), keep the split if the
two levels differ by at least ``min_change`` of the higher one, and repeat on each side.

Not every step is a cliff. The host can stall the write for a moment (another process on
the CPU, a late reply): the rate drops, then comes back to the level it had. And a
window's rate is measured from the previous window's close, so the completions fio reaps
late make one window slow and the next fast, which segments as a burst above the level.
A drive's cache edge is a step the rate does not come back from within the write. So
the segments are read as levels (:func:`find_levels`): a segment that leaves the level
(down or up by ``min_change``) is an excursion when a later segment comes back within
``min_change`` of it; excursions (:class:`Dip`) are reported but are neither cliffs nor
part of the levels; only a step down that the rate never comes back from is a cliff.

Input is what fio's per-I/O log gives: completion time and size of every I/O, in
completion order. :func:`rate_by_bytes` turns it into (bytes written, MB/s) points over
windows of equal bytes, so the cliff position is resolved to a window, not to a second.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

MIN_POINTS_PER_SEGMENT = 3


@dataclass(frozen=True)
class RatePoint:
    bytes_done: float  # bytes written at the end of the window
    rate: float  # bytes per second over the window


@dataclass(frozen=True)
class Cliff:
    at_bytes: float  # bytes written when the rate changed
    rate_before: float  # bytes/s, the level before: its windows' mean, dips left out
    rate_after: float  # bytes/s, the level after

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


@dataclass(frozen=True)
class Dip:
    """The rate left its level and came back: a host stall (down), or the completions of
    one reaped late (up, a burst), not a level of the drive."""

    at_bytes: float  # bytes written when the rate left the level
    end_bytes: float  # bytes written when it was back
    rate_level: float  # bytes/s, the level it left (its windows' mean, dips left out)
    rate_during: float  # bytes/s, its bytes over its time
    rate_back: float  # bytes/s, the segment it came back with (its windows' mean)

    @property
    def length_bytes(self) -> float:
        return self.end_bytes - self.at_bytes

    @property
    def is_burst(self) -> bool:
        return self.rate_during > self.rate_level


@dataclass(frozen=True)
class Levels:
    cliffs: tuple[Cliff, ...]
    dips: tuple[Dip, ...]


def _segments(rates: Sequence[float], min_change: float) -> list[int]:
    """Binary segmentation: the split indices, in order."""
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
    return sorted(splits)


@dataclass
class _Walk:
    """The segments read as levels (see :func:`find_levels`)."""

    levels: list[list[int]]  # each level: its segments
    steps: list[int]  # the segment that started each level after the first
    dips: list[tuple[int, int]]  # (first segment of the excursion, the one that came back)


def _walk(count: int, mean: Callable[[Sequence[int]], float], min_change: float) -> _Walk:
    def near(value: float, level: float) -> bool:
        return abs(value - level) < min_change * max(value, level)

    walk = _Walk([[0]], [], [])
    s = 1
    while s < count:
        level = mean(walk.levels[-1])
        if near(mean([s]), level):
            walk.levels[-1].append(s)
            s += 1
            continue
        back = next((b for b in range(s + 1, count) if near(mean([b]), level)), None)
        if back is None:
            walk.levels.append([s])
            walk.steps.append(s)
            s += 1
        else:
            walk.dips.append((s, back))
            walk.levels[-1].append(back)
            s = back + 1
    return walk


def find_levels(points: Sequence[RatePoint], min_change: float = 0.3) -> Levels:
    """The cliffs (steps down the rate never comes back from) and the dips (excursions
    from a level that came back to it), in order of bytes written.

    The segments are walked in order, holding the current level (its segments, the
    excursions left out). A segment within ``min_change`` of the level (of the higher of
    the two; means of the windows' rates, as the segmentation compares them) joins it.
    One that is not leaves it: if a later segment comes back within ``min_change`` of the
    level, the segments in between are a :class:`Dip` and the level goes on with the one
    that came back; if none does, a new level starts there, and when it is lower, the
    step is a :class:`Cliff`. Steps up (a cache that refilled while idle) are not cliffs.

    A level's rate (a cliff's before and after, the level a dip left) is the mean of its
    windows' rates, its dips left out: without dips, what the segmentation found. A dip's
    own rate is its bytes over its time (a burst of completions reaped late took almost
    no time: a mean of the windows' rates would make it far faster than it was).
    """
    if not 0 < min_change < 1:
        raise ValueError("min_change must be between 0 and 1")
    rates = [p.rate for p in points]
    bounds = [0, *_segments(rates, min_change), len(rates)]
    segments = list(pairwise(bounds))
    sizes = [b - a for a, b in pairwise([0.0, *(p.bytes_done for p in points)])]

    def mean(parts: Sequence[int]) -> float:  # of the windows' rates, as segmented
        values = [r for s in parts for r in rates[segments[s][0]:segments[s][1]]]
        return sum(values) / len(values)

    def rate(parts: Sequence[int]) -> float:  # a dip's rate: its bytes over its time
        windows = [i for s in parts for i in range(*segments[s])]
        seconds = sum(sizes[i] / rates[i] for i in windows if rates[i] > 0)
        return sum(sizes[i] for i in windows) / seconds if seconds > 0 else mean(parts)

    def start(s: int) -> float:  # bytes written when segment s began
        return points[segments[s][0] - 1].bytes_done

    walk = _walk(len(segments), mean, min_change)
    levels = walk.levels
    cliffs = tuple(Cliff(start(s), mean(levels[i]), mean(levels[i + 1]))
                   for i, s in enumerate(walk.steps) if mean(levels[i + 1]) < mean(levels[i]))
    level_of = {s: mean(parts) for parts in levels for s in parts}
    return Levels(cliffs, tuple(
        Dip(start(first), start(back), level_of[back], rate(range(first, back)), mean([back]))
        for first, back in walk.dips))


def find_cliffs(points: Sequence[RatePoint], min_change: float = 0.3) -> list[Cliff]:
    """Every step down in rate of at least ``min_change`` (a fraction of the rate before)
    that the rate does not come back from (:func:`find_levels`)."""
    return list(find_levels(points, min_change).cliffs)
