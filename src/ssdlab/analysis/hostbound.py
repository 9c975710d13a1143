"""Is the host, not the drive, the bottleneck? (methodology 1.9, the CD5/CM5-R lesson)

The CM5-R review's 10-core host could not drive the drive's 750K IOPS: CPU use neared
100 % while IOPS stopped growing. A point of a latency-vs-IOPS curve is **host-bound**
when the host-wide CPU busy share during it was at least ``cpu_pct`` (default 90 %) and
its IOPS rose less than ``max_rise_pct`` (default 5 %) over the previous queue depth of
the same curve. Such a point measures the host; the drive may well do more.

Pure functions returning a verdict with its reasons.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ssdlab.jsonrecord import Record

DEFAULT_CPU_PCT = 90.0
DEFAULT_MAX_RISE_PCT = 5.0


@dataclass(frozen=True)
class CpuPoint:
    """One point of a curve, in queue-depth order: its load, IOPS and host CPU."""

    threads: int
    iodepth: int
    iops: float
    host_cpu_pct: float | None  # None: not measured


@dataclass(frozen=True)
class HostBoundRule(Record):
    cpu_pct: float = DEFAULT_CPU_PCT
    max_rise_pct: float = DEFAULT_MAX_RISE_PCT


@dataclass(frozen=True)
class HostCpuPoint(Record):
    """A point of a curve: its load and the host's CPU there (the busiest one seen is the
    verdict's ``peak``)."""

    curve: str = ""
    threads: int = 0
    iodepth: int = 0
    host_cpu_pct: float = 0.0


@dataclass(frozen=True)
class HostBoundFinding(HostCpuPoint):
    """A point that measured the host, not the drive: IOPS barely rose at a busy CPU."""

    iops_rise_pct: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class HostBoundVerdict(Record):
    """Whether the host, not the drive, limited the measurement; stored as a test's
    ``host_bound`` verdict (docs/results-format.md)."""

    host_bound: bool = False
    rule: HostBoundRule = field(default_factory=HostBoundRule)
    findings: tuple[HostBoundFinding, ...] = ()
    #: the busiest point seen (None: host CPU not measured)
    peak: HostCpuPoint | None = None
    message: str = ""
    curves_checked: tuple[str, ...] = ()


def curve_findings(
    curve: str, points: Sequence[CpuPoint], rule: HostBoundRule
) -> list[HostBoundFinding]:
    """The host-bound points of one curve (points in queue-depth order)."""
    found = []
    for prev, point in itertools.pairwise(points):
        cpu = point.host_cpu_pct
        if cpu is None or prev.iops <= 0 or cpu < rule.cpu_pct:
            continue
        rise = (point.iops - prev.iops) / prev.iops * 100
        if rise >= rule.max_rise_pct:
            continue
        found.append(HostBoundFinding(
            curve, point.threads, point.iodepth, cpu, rise,
            f"{curve}, {point.threads} x QD {point.iodepth}: host CPU {cpu:.1f} % >= "
            f"{rule.cpu_pct:g} % and IOPS {rise:+.1f} % over QD {prev.iodepth} "
            f"(< {rule.max_rise_pct:g} %)",
        ))
    return found


def _peak(curves: Mapping[str, Sequence[CpuPoint]]) -> HostCpuPoint | None:
    best: HostCpuPoint | None = None
    for name, points in curves.items():
        for p in points:
            if p.host_cpu_pct is not None and (best is None or p.host_cpu_pct > best.host_cpu_pct):
                best = HostCpuPoint(name, p.threads, p.iodepth, p.host_cpu_pct)
    return best


def host_bound(
    curves: Mapping[str, Sequence[CpuPoint]], rule: HostBoundRule = HostBoundRule()
) -> HostBoundVerdict:
    """Check every curve (name -> points in queue-depth order)."""
    findings = tuple(f for name, points in curves.items()
                     for f in curve_findings(name, points, rule))
    peak = _peak(curves)
    if findings:
        message = (
            f"HOST-BOUND: {len(findings)} point(s) measured the host, not the drive: "
            + "; ".join(f.reason for f in findings)
        )
    elif peak is None:
        message = "host CPU was not measured; host-bound points cannot be judged"
    else:
        message = (
            f"not host-bound: host CPU peaked at {peak.host_cpu_pct:.1f} % ({peak.curve}, "
            f"{peak.threads} x QD {peak.iodepth}); the rule needs >= {rule.cpu_pct:g} % with IOPS "
            f"rising < {rule.max_rise_pct:g} %"
        )
    return HostBoundVerdict(bool(findings), rule, findings, peak, message, tuple(curves))


# -- a set of targets run at once (docs/sets.md) -------------------------------------------


@dataclass(frozen=True)
class SharedRun:
    """One fio run a set's targets shared: how long it ran, the host's CPU use over it
    (``/proc/stat``) and the CPU time fio's jobs used (usr + sys, as fio reports them)."""

    wall_s: float
    host_busy_pct: float | None  # None: not measured
    fio_cpu_s: float


@dataclass(frozen=True)
class SetHostVerdict(Record):
    """Did the host, not the drives, limit a set? Its CPUs' busy share over all the set's
    shared fio runs (weighted by their time) against ``cpu_pct``."""

    host_bound: bool
    cpu_pct: float  # the rule's threshold
    busy_pct: float | None  # over every measured run (None: none measured)
    fio_pct: float | None  # fio's jobs' share of the host's CPU time over them
    peak_pct: float | None  # the busiest run
    runs: int
    saturated_runs: int  # runs at or above the threshold
    seconds: float
    cpus: int
    message: str


def set_host_bound(runs: Sequence[SharedRun], cpus: int,
                   rule: HostBoundRule = HostBoundRule()) -> SetHostVerdict:
    """The verdict on a set's shared fio runs, on a host of ``cpus`` CPUs fio may use."""
    measured = [r for r in runs if r.host_busy_pct is not None]
    if not measured:
        return SetHostVerdict(False, rule.cpu_pct, None, None, None, len(runs), 0, 0.0, cpus,
                              "host CPU was not measured: whether the host limited the set "
                              "cannot be judged")
    seconds = sum(r.wall_s for r in measured)
    weights = [r.wall_s if seconds > 0 else 1.0 for r in measured]
    busy = sum((r.host_busy_pct or 0.0) * w for r, w in zip(measured, weights, strict=True)
               ) / sum(weights)
    fio = sum(r.fio_cpu_s for r in measured) / (seconds * max(cpus, 1)) * 100 if seconds else 0.0
    peak = max(r.host_busy_pct or 0.0 for r in measured)
    saturated = sum(1 for r in measured if (r.host_busy_pct or 0.0) >= rule.cpu_pct)
    where = (f"the host's {cpus} CPUs were {busy:.1f} % busy over the set's "
             f"{len(measured)} fio runs ({seconds:,.1f} s), fio's own jobs {fio:.1f} % of "
             f"them; {saturated} of {len(measured)} runs at >= {rule.cpu_pct:g} %, the "
             f"busiest {peak:.1f} %")
    bound = busy >= rule.cpu_pct
    message = (f"HOST-BOUND: {where}: the host, not the drives, may have limited the set"
               if bound else f"not host-bound: {where} (the rule needs >= {rule.cpu_pct:g} "
               "% over the set's fio runs)")
    return SetHostVerdict(bound, rule.cpu_pct, busy, fio, peak, len(measured), saturated,
                          seconds, cpus, message)
