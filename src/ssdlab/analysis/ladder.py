"""When to stop raising the queue depth of one latency-vs-IOPS curve (methodology 1.6).

A curve is one thread count's ladder of queue depths (1, 2, 4 ... 32, extended to 64,
128). After each point the ladder stops when the point's mean latency has reached the
target (the reviews push "until average latency reaches at least 400-500 us"), when
IOPS rose less than a threshold over the previous point (the device, or the host, is
saturated: more queue only adds latency), or when there is no larger queue depth left.

Pure functions; the decision says why, in words, with the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ssdlab.jsonrecord import Record

#: a StopDecision's kind
CONTINUE = "continue"
TARGET = "target-latency"
SATURATED = "iops-flat"
MAX_QD = "max-qd"


@dataclass(frozen=True)
class LadderPoint:
    """One measured point of a curve: its queue depth (per thread) and what it gave."""

    iodepth: int
    iops: float
    lat_mean_us: float


@dataclass(frozen=True)
class LadderRule:
    target_latency_us: float
    min_iops_rise_pct: float
    #: the rules apply from this queue depth on (``--full-ladder``: the base ladder's last)
    enforce_from_qd: int = 1


@dataclass(frozen=True)
class StopDecision(Record):
    kind: str  # CONTINUE, TARGET, SATURATED or MAX_QD
    reason: str

    @property
    def stop(self) -> bool:
        return self.kind != CONTINUE


def rise_pct(previous_iops: float, iops: float) -> float | None:
    """How much IOPS rose over the previous point, in percent (negative: it fell)."""
    if previous_iops <= 0:
        return None
    return (iops - previous_iops) / previous_iops * 100


def decide(points: Sequence[LadderPoint], rule: LadderRule, next_qd: int | None) -> StopDecision:
    """After the last of ``points`` (in ladder order): go on to ``next_qd``, or stop and why."""
    if not points:
        raise ValueError("decide needs at least one measured point")
    last = points[-1]
    rise = rise_pct(points[-2].iops, last.iops) if len(points) > 1 else None
    flat = rise is not None and rise < rule.min_iops_rise_pct
    if last.iodepth >= rule.enforce_from_qd:
        if last.lat_mean_us >= rule.target_latency_us:
            reason = (
                f"mean latency {last.lat_mean_us:,.1f} us at QD {last.iodepth} reached the "
                f"{rule.target_latency_us:g} us target"
            )
            if flat and rise is not None:
                reason += f"; IOPS also {_rise_text(rise)} over QD {points[-2].iodepth}"
            return StopDecision(TARGET, reason)
        if flat and rise is not None:
            return StopDecision(SATURATED, (
                f"IOPS {_rise_text(rise)} from QD {points[-2].iodepth} to QD {last.iodepth} "
                f"(less than {rule.min_iops_rise_pct:g} %): saturated at "
                f"{last.lat_mean_us:,.1f} us mean, below the {rule.target_latency_us:g} us target"
            ))
    if next_qd is None:
        return StopDecision(MAX_QD, (
            f"largest queue depth, QD {last.iodepth}, reached at {last.lat_mean_us:,.1f} us "
            f"mean, below the {rule.target_latency_us:g} us target, with IOPS still rising"
        ))
    return StopDecision(CONTINUE, f"QD {last.iodepth}: going on to QD {next_qd}")


def _rise_text(rise: float) -> str:
    return f"rose only {rise:.1f} %" if rise >= 0 else f"fell {-rise:.1f} %"
