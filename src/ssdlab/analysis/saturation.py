"""Write Saturation and Host Idle Recovery verdicts: pure functions over measured series.

**Transition.** Over the fine IOPS series of a saturation run (fio's averaged IOPS log,
e.g. every second, against elapsed time and bytes written), smoothed by a centred running
median of ``smooth`` points so that single slow or fast intervals do not decide:

* fresh-out-of-box (FOB) IOPS: the median over the FOB plateau (the first stretch of the
  run within 80 % of its smoothed peak);
* saturated IOPS: given by the caller (the average of the last rounds, the SNIA window);
* the transition is **detected** where the smoothed IOPS fall below ``FOB - detect x
  (FOB - saturated)`` (default a quarter of the way down, or three times the plateau's
  noise if that is more) and stay there for ``smooth`` intervals; it **starts** where
  that fall began (walked back to the last interval still at the FOB level, or at the
  lower level the IOPS held right before it), and **ends**
  at the first interval within ``drop`` (default 10 %) of the way to saturated. A quarter,
  not less: a host hiccup can dip a fast drive's FOB IOPS by a tenth of the way down for
  a second (measured on the emulated SSD with a CPU hog beside it), a real transition
  goes all the way.
* the transition is a fall that **lasts**: a fall the rate comes back from (the smoothed
  IOPS at or above that threshold again for ``smooth`` intervals in a row) is a **dip**
  (:class:`IopsDip`: on the emulated SSD under load, a host stall; on a real drive it may
  as well be the drive's own fall and recovery: the verdict names no cause), stored and
  named in the verdict, never the transition; the search goes on after it.
  Measured on the emulated SSD at a load of 10-12 on 2 cores: FOB dips to a tenth for a
  second, and to three quarters for seconds, before GC started (read as the transition
  at 16, 51 and 118 MiB instead of 136 MiB before dips were told apart). As with the SLC
  probe's cliffs (:mod:`ssdlab.analysis.cliff`), a step is what the rate does not come
  back from; the level here is FOB and the step a quarter of the way down, not a share
  of a segment's mean, so the smoothed series is read directly rather than segmented.
  A fall still under way when the run ends is the transition (it did not come back).

Both are reported in seconds and in bytes written. A drive whose FOB IOPS is within 10 %
of its saturated IOPS has no transition to find, and the verdict says so.

**Idle recovery.** For each wait state, the bursts' IOPS against the baseline right
before that group (the saturated rounds for the first, the return-to-baseline rounds for
the others): their ratio, and whether the difference is larger than the noise (Welch's
t-test, :mod:`ssdlab.analysis.significance`). Idle time recovers performance when the
bursts are at least ``ratio`` (default 1.2) times the baseline and significantly so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ssdlab.analysis.significance import compare

#: a drive whose FOB IOPS are within this factor of saturated has no FOB burst to find
MIN_FOB_GAIN = 1.1
#: within this share of the FOB level (or 2 sigma of its noise) a drive is still at FOB
FOB_BAND = 0.02
#: the level a fall began from: the intervals right before it, this many smoothing widths
LOCAL = 4


@dataclass(frozen=True)
class IopsPoint:
    elapsed_s: float  # at the end of the interval
    written_bytes: float  # in total, at the end of the interval
    iops: float


@dataclass(frozen=True)
class IopsDip:
    """The IOPS fell below the transition's threshold and came back above it (a quarter of
    the way from FOB to saturated) for 5 intervals: a fall that did not last, so not the
    transition. Its cause is not measured: a host stall and a drive's own fall and
    recovery (garbage collection) look the same here."""

    start_s: float  # where it left the FOB level (the end of the last interval at it)
    start_bytes: float
    end_s: float  # where it was back (the end of the interval before the comeback)
    end_bytes: float
    fob_iops: float  # the level it left
    iops_during: float  # its I/Os over its time (the mean of its intervals' IOPS)
    iops_back: float  # the median of the intervals it came back with

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Transition:
    fob_iops: float
    saturated_iops: float
    found: bool
    start_s: float | None
    start_bytes: float | None
    end_s: float | None
    end_bytes: float | None
    message: str
    dips: tuple[IopsDip, ...] = ()  # falls the rate came back from: not the transition


def running_median(values: Sequence[float], width: int) -> list[float]:
    """Centred running median; the window shrinks at both ends."""
    half = max(width, 1) // 2
    return [
        statistics.median(values[max(0, i - half) : i + half + 1]) for i in range(len(values))
    ]


def _fmt_bytes(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _plateau(smoothed: Sequence[float], peak: int, share: float = 0.8) -> range:
    """The first stretch of the run around its peak that stays within ``share`` of it."""
    level = smoothed[peak] * share
    start = peak
    while start > 0 and smoothed[start - 1] >= level:
        start -= 1
    end = peak
    while end + 1 < len(smoothed) and smoothed[end + 1] >= level:
        end += 1
    return range(start, end + 1)


def find_transition(
    points: Sequence[IopsPoint], saturated_iops: float, *, smooth: int = 5, drop: float = 0.1,
    detect: float = 0.25,
) -> Transition:
    """Where a saturation run leaves its fresh-out-of-box level for good (see the module
    doc).

    FOB IOPS is the median of the raw IOPS over the plateau (the first stretch within 80 %
    of the smoothed peak). A fall is detected at the first interval after the plateau's
    start from which the smoothed IOPS stay below ``FOB - max(detect x (FOB - saturated),
    3 sigma)`` for ``smooth`` intervals in a row (sigma: the noise of the smoothed series
    on the plateau, from the median absolute deviation, so that noisy drives are not
    caught by their own noise). When the smoothed IOPS are back at or above that threshold
    for ``smooth`` intervals in a row later, the fall is a dip and the search goes on
    from where it came back; the first fall that does not come back is the transition.
    A fall starts where it began: walked back to the last interval still within ``max(2
    sigma, 2 %)`` of FOB, or of the level the IOPS held over the ``4 x smooth`` intervals
    before it if that is lower (a loaded host keeps FOB lower for seconds), never into
    an earlier dip. The transition ends at the first interval within ``drop`` of the way
    down.
    """
    if not points:
        return Transition(0.0, saturated_iops, False, None, None, None, None,
                          "no IOPS samples: nothing to find")
    raw = [p.iops for p in points]
    smoothed = running_median(raw, smooth)
    head = max(len(points) // 2, 1)
    peak = max(range(head), key=lambda i: smoothed[i])
    plateau = _plateau(smoothed, peak)
    fob = statistics.median(raw[i] for i in plateau)
    if fob < saturated_iops * MIN_FOB_GAIN:
        return Transition(
            fob, saturated_iops, False, None, None, None, None,
            f"no fresh-out-of-box burst: IOPS started at {fob:,.0f}, within "
            f"{(MIN_FOB_GAIN - 1) * 100:.0f} % of the saturated {saturated_iops:,.0f}",
        )
    mad = statistics.median(abs(raw[i] - fob) for i in plateau)
    sigma = 1.4826 * mad / math.sqrt(max(smooth, 1))
    span = fob - saturated_iops
    threshold = fob - max(detect * span, 3 * sigma)
    band = max(2 * sigma, FOB_BAND * fob)
    walk = _Walk(points, smoothed, [v < threshold for v in smoothed], smooth, fob - band, band)
    dips, start, floor = walk.falls(plateau.start)
    said = _dips_text(dips)
    if start is None:
        return Transition(fob, saturated_iops, False, None, None, None, None,
                          f"IOPS stayed near FOB ({fob:,.0f}) to the end{said}", tuple(dips))
    crossing = start
    start = walk.began(start, floor)
    end = next((i for i in range(crossing, len(points))
                if smoothed[i] <= saturated_iops + drop * span), None)
    first = walk.before(start)
    message = (f"FOB {fob:,.0f} IOPS -> saturated {saturated_iops:,.0f} IOPS; transition from "
               f"{first.elapsed_s:,.0f} s ({_fmt_bytes(first.written_bytes)} written)")
    end_point = points[end] if end is not None else None
    if end_point is not None:
        message += (f" to {end_point.elapsed_s:,.0f} s "
                    f"({_fmt_bytes(end_point.written_bytes)} written)")
    else:
        message += ", not yet at the saturated level when the run ended"
    return Transition(
        fob, saturated_iops, True, first.elapsed_s, first.written_bytes,
        end_point.elapsed_s if end_point else None,
        end_point.written_bytes if end_point else None, message + said, tuple(dips),
    )


@dataclass
class _Walk:
    """The smoothed series read in order: its falls below the threshold (``below``), each
    a dip when the IOPS came back, until the first that does not."""

    points: Sequence[IopsPoint]
    smoothed: Sequence[float]
    below: Sequence[bool]
    smooth: int
    level: float  # at FOB: within the band of it
    band: float

    def run_of(self, value: bool, start: int) -> int | None:
        """The first interval from ``start`` that begins ``smooth`` intervals in a row
        below the threshold (``value`` True) or not."""
        n = self.smooth
        return next((i for i in range(start, len(self.below) - n + 1)
                     if all(f is value for f in self.below[i : i + n])), None)

    def began(self, at: int, floor: int) -> int:
        """Back from ``at`` to where the fall began: the last interval at the FOB level,
        or at the level the IOPS held right before, if that is lower (a loaded host)."""
        held = [self.smoothed[i] for i in range(max(floor, at - LOCAL * self.smooth), at)
                if not self.below[i]]
        bar = min(self.level, statistics.median(held) - self.band) if held else self.level
        while at > floor and self.smoothed[at - 1] < bar:
            at -= 1
        return at

    def before(self, i: int) -> IopsPoint:
        """The end of the interval before ``i``: where ``i`` began."""
        return self.points[i - 1] if i > 0 else IopsPoint(0.0, 0.0, 0.0)

    def falls(self, floor: int) -> tuple[list[IopsDip], int | None, int]:
        """The dips from ``floor`` on, the fall the IOPS did not come back from (None: no
        such fall) and where its walk back stops (after the last dip)."""
        dips: list[IopsDip] = []
        start = self.run_of(True, floor)
        if start is None and self.below[-1] and len(self.below) < self.smooth:
            start = self.below.index(True)
        while start is not None:
            back = self.run_of(False, start + self.smooth)
            if back is None:
                break
            began = self.began(start, floor)
            first, last = self.before(began), self.before(back)
            raw = [p.iops for p in self.points]
            dips.append(IopsDip(first.elapsed_s, first.written_bytes, last.elapsed_s,
                                last.written_bytes, self.level + self.band,
                                statistics.fmean(raw[began:back]),
                                statistics.median(raw[back : back + self.smooth])))
            floor = back
            start = self.run_of(True, back)
        return dips, start, floor


def dip_text(dip: IopsDip) -> str:
    """E.g. "at 2.2 s (0.04 GiB written) for 1.4 s: 4,971 -> 1,637 IOPS, back at 4,600"."""
    return (f"at {dip.start_s:,.1f} s ({_fmt_bytes(dip.start_bytes)} written) for "
            f"{dip.seconds:,.1f} s: {dip.fob_iops:,.0f} -> {dip.iops_during:,.0f} IOPS, back "
            f"at {dip.iops_back:,.0f}")


def _dips_text(dips: Sequence[IopsDip]) -> str:
    """What the verdict ends with when the IOPS fell and came back."""
    if not dips:
        return ""
    count = "a fall" if len(dips) == 1 else f"{len(dips)} falls"
    return (f"; {count} the IOPS came back from (not the transition): "
            + "; ".join(dip_text(d) for d in dips))


@dataclass(frozen=True)
class WaitState:
    wait_s: float
    bursts_iops: tuple[float, ...]
    baseline_iops: tuple[float, ...]  # the continuous rounds right before this group
    mean_iops: float
    baseline_mean: float
    ratio: float | None
    p_value: float | None
    recovered: bool
    note: str


def wait_state(
    wait_s: float, bursts: Sequence[float], baseline: Sequence[float], ratio: float
) -> WaitState:
    mean = statistics.fmean(bursts) if bursts else 0.0
    base = statistics.fmean(baseline) if baseline else 0.0
    result = compare(mean, bursts, base, baseline)
    recovered = bool(result.ratio is not None and result.ratio >= ratio and result.significant)
    return WaitState(wait_s, tuple(bursts), tuple(baseline), mean, base, result.ratio,
                     result.p_value, recovered, result.note)


def recovery_verdict(states: Sequence[WaitState], ratio: float) -> tuple[bool, str]:
    """(idle time recovers performance?, one line saying how much and after what idle)."""
    if not states:
        return False, "no wait states were run"
    best = max(states, key=lambda s: s.ratio or 0.0)
    if any(s.recovered for s in states):
        first = min((s for s in states if s.recovered), key=lambda s: s.wait_s)
        return True, (
            f"idle time recovers performance: bursts after {first.wait_s:g} s idle reach "
            f"{first.ratio:.2f}x the baseline, up to {best.ratio:.2f}x after "
            f"{best.wait_s:g} s (threshold {ratio:g}x, Welch p < 0.05)"
        )
    return False, (
        f"no recovery from idle time: the best wait state ({best.wait_s:g} s) reached "
        f"{(best.ratio or 0):.2f}x the baseline (threshold {ratio:g}x)"
    )
