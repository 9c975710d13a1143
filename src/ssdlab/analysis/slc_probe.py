"""The SLC-cache probe's analysis: throughput against bytes written, its cliffs, the estimate.

Pure functions on what fio logged during one sequential write from purge:

* a per-I/O bandwidth log gives every completion (time, bytes): exact bytes;
* an averaged bandwidth log (``log_avg_msec``) gives one rate per interval; each sample
  stands for ``rate x interval`` bytes, and the tail fio does not log (the last partial
  interval) is added so the bytes add up to what fio reports having written.

Both become (time, bytes) transfers, cut into slices of equal bytes by
:func:`ssdlab.analysis.cliff.rate_by_bytes`; :func:`ssdlab.analysis.cliff.find_levels`
finds the steps down the rate does not come back from. The cache size estimate is the
first cliff: the bytes written when the rate first dropped by at least ``min_change`` for
good. A drop the rate recovered from (a host stall) is a dip: reported, never the estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ssdlab.analysis.cliff import Cliff, Dip, RatePoint, find_levels

MB = 1_000_000
MIB = 1 << 20
#: fewer slices than this cannot hold two segments of find_cliffs' minimum length
MIN_POINTS = 6


def transfers_from_bw_samples(
    samples: Sequence[tuple[int, int]], total_bytes: int, runtime_ms: int
) -> list[tuple[float, int]]:
    """Averaged bandwidth samples ``(time ms, KiB/s)`` -> ``(time s, bytes)`` transfers.

    Each sample covers the time since the previous one (the first: since the job started).
    What fio wrote after its last sample (it does not log the last partial interval) is
    one more transfer at ``runtime_ms``, so the bytes add up to ``total_bytes``.
    """
    out: list[tuple[float, int]] = []
    previous_ms = 0
    done = 0
    for time_ms, kib_per_s in samples:
        span_ms = time_ms - previous_ms
        if span_ms <= 0:
            continue
        amount = round(kib_per_s * 1024 * span_ms / 1000)
        out.append((time_ms / 1000.0, amount))
        done += amount
        previous_ms = time_ms
    rest = total_bytes - done
    if rest > 0 and runtime_ms > previous_ms:
        out.append((runtime_ms / 1000.0, rest))
    return out


@dataclass(frozen=True)
class TimedPoint:
    """One slice of the write: bytes written at its end, its rate, when it ended."""

    bytes_done: float
    rate: float  # bytes/s
    seconds: float  # since the write started, at the end of the slice


def with_times(points: Sequence[RatePoint]) -> list[TimedPoint]:
    """Each slice's end time, from its bytes and rate."""
    out: list[TimedPoint] = []
    t = 0.0
    previous = 0.0
    for p in points:
        if p.rate > 0:
            t += (p.bytes_done - previous) / p.rate
        out.append(TimedPoint(p.bytes_done, p.rate, t))
        previous = p.bytes_done
    return out


@dataclass(frozen=True)
class PassVerdict:
    """One sequential write pass: its cliffs and the cache estimate, or why there is none."""

    cliffs: tuple[Cliff, ...]
    estimate_bytes: float | None  # the first cliff; None when no cliff was found
    written_bytes: float
    mean_rate: float  # bytes/s over the whole pass
    message: str
    dips: tuple[Dip, ...] = ()  # the rate left its level and came back: not cliffs


def _mb(rate: float) -> str:
    return f"{rate / MB:,.0f} MB/s"


def _size(count: float) -> str:
    if count >= 1 << 30:
        return f"{count / (1 << 30):,.2f} GiB"
    return f"{count / MIB:,.1f} MiB"


def cliff_text(cliff: Cliff) -> str:
    return (
        f"at {_size(cliff.at_bytes)} written: {_mb(cliff.rate_before)} -> "
        f"{_mb(cliff.rate_after)} (x{cliff.ratio:.2f})"
    )


def dip_text(dip: Dip) -> str:
    """E.g. "a 2.0 MiB dip at 38.0 MiB written (183 -> 35 MB/s), the rate recovered (180
    MB/s): not the cache edge"."""
    what = "burst" if dip.is_burst else "dip"
    return (f"a {_size(dip.length_bytes)} {what} at {_size(dip.at_bytes)} written "
            f"({_mb(dip.rate_level)} -> {_mb(dip.rate_during)}), the rate came back "
            f"({_mb(dip.rate_back)}): not the cache edge")


def dips_text(dips: Sequence[Dip]) -> str:
    """The sentence the verdict ends with when the rate left its level and came back."""
    if not dips:
        return ""
    return ("; the rate left its level and came back (a host stall, or late completions "
            "reaped at once): " + "; ".join(dip_text(d) for d in dips))


def analyse_pass(
    points: Sequence[RatePoint], min_change: float, written_bytes: float | None = None
) -> PassVerdict:
    """Find the cliffs of one pass; the first is the cache size estimate. Dips (the rate
    came back) are said in the message, after the verdict.

    ``written_bytes`` is what fio reports having written (default: the last point's bytes;
    the slices leave out the last partial one).
    """
    if not points:
        return PassVerdict((), None, 0.0, 0.0, "no throughput points: fio logged no writes")
    seconds = with_times(points)[-1].seconds
    mean = points[-1].bytes_done / seconds if seconds > 0 else 0.0
    written = points[-1].bytes_done if written_bytes is None else written_bytes
    if len(points) < MIN_POINTS:
        return PassVerdict((), None, written, mean, (
            f"too few slices ({len(points)}) to look for a cliff; at least {MIN_POINTS} "
            "are needed (write more or use smaller slices)"))
    levels = find_levels(points, min_change)
    cliffs, dips = levels.cliffs, levels.dips
    if not cliffs:
        for_good = " for good" if dips else ""
        return PassVerdict((), None, written, mean, (
            f"no cliff found: throughput never dropped by {min_change * 100:g} % or more"
            f"{for_good} over {_size(written)} written (mean {_mb(mean)}); either there is no "
            "SLC cache, it is larger than the amount written, or it was full when the write "
            f"began{dips_text(dips)}"), dips)
    first = cliffs[0]
    more = "" if len(cliffs) == 1 else "; further cliffs " + "; ".join(
        cliff_text(c) for c in cliffs[1:])
    return PassVerdict(cliffs, first.at_bytes, written, mean, (
        f"SLC cache estimate {_size(first.at_bytes)} (first cliff {cliff_text(first)}){more}"
        f"{dips_text(dips)}"), dips)


def recovery_text(first: PassVerdict, again: PassVerdict, idle_s: float, min_change: float
                  ) -> str:
    """What the repeat pass after ``idle_s`` of idle says about the cache coming back."""
    if first.estimate_bytes is None:
        return f"after {idle_s:g} s idle: {again.message} (the first pass had no cliff)"
    if again.estimate_bytes is not None:
        share = again.estimate_bytes / first.estimate_bytes * 100
        return (f"after {idle_s:g} s idle {_size(again.estimate_bytes)} of cache came back "
                f"({share:.0f} % of the first pass's {_size(first.estimate_bytes)})")
    fast = first.cliffs[0].rate_before
    if again.mean_rate <= (1 - min_change) * fast:
        return (f"after {idle_s:g} s idle no cache came back: the repeat pass ran at "
                f"{_mb(again.mean_rate)} throughout, below the cache rate {_mb(fast)}")
    return (f"after {idle_s:g} s idle the repeat pass ran at the cache rate throughout "
            f"({_mb(again.mean_rate)}): at least {_size(again.written_bytes)} came back")
