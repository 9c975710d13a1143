"""The peak finder's search (docs/peak.md): which load and engine give the most IOPS within
a latency ceiling, found adaptively instead of by a full grid.

The search calls ``measure(probe)`` for each point it wants and decides from what came
back; it is deterministic, so a stopped run replays its stored points through the same
code (``measure`` answers them from the store) and goes on where it stopped.

1. **Grow** with the first engine: from 1 job x QD 1, double the queue depth while a step
   gains at least ``min_gain_pct`` (2 %) and stays within the ceiling; then double the jobs
   the same way; then the queue depth again from there, and so on until neither gains.
2. **Engines**: at that load, each other engine (and io_uring's fast paths); psync, which
   has only QD 1, grows its own jobs. An engine replaces the current one only when it gains
   at least ``min_gain_pct`` ("only if it helps"). Then **reach**: each queued engine (by
   name, its first variant) once at the deepest load allowed (``max_threads`` x
   ``max_qd``), since growing stops at the first flat step and a device can rise again
   past a plateau; it too must gain ``min_gain_pct`` (and keep to the ceiling) to be kept.
3. **Refine** around the best: its neighbours (QD x1.5, x0.75, /2; jobs +1, -1), moving to
   the best neighbour while it gains at least ``min_gain_pct``; then CPU pinning (fio's
   ``cpus_allowed_policy=split``: each job on a CPU of its own), kept only if it helps.
4. **Confirm**: one probe decided every step, so a lucky one can win. When other points
   came within ``CONFIRM_WITHIN_PCT`` of the best, the best and up to ``confirm - 1`` of
   them (the highest) are measured once more. Of the points whose mean of two probes is
   within ``min_gain_pct`` of the highest mean, the peak is the one with the fewest
   outstanding I/Os (as much, within the rule's 2 %, for less latency); a point over the
   ceiling the second time is out. The peak's figures are its second probe's, not the
   luckiest of many.

A point over the latency ceiling is never the peak, and growing stops at it: a deeper
queue than the device takes only adds latency. Under a ceiling, a peak is named only where
its second probe kept to it: the best point is always measured again (even without a
rival), one probe of ``max_probes`` is kept for that, and when every point measured again
broke the ceiling the search steps down: the best point lighter than the lightest that
broke it is measured again, up to ``confirm`` times, until one keeps to it. None that
does: no peak, and the outcome says why. Pure: nothing here runs fio.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ssdlab.analysis.hostbound import CpuPoint, HostBoundVerdict, host_bound

DEFAULT_MIN_GAIN_PCT = 2.0
#: points whose IOPS came within this of the best are measured again before the peak is named
CONFIRM_WITHIN_PCT = 5.0
#: latency metrics a ceiling may name, as ``--max-latency`` spells them
LATENCY_METRICS = ("mean", "p50", "p99", "p99.9", "p99.99", "max")


@dataclass(frozen=True, order=True)
class Engine:
    """An ioengine with its fast paths (fio options of io_uring)."""

    name: str
    fixedbufs: bool = False
    registerfiles: bool = False
    sqthread_poll: bool = False
    hipri: bool = False

    @property
    def fast_paths(self) -> tuple[str, ...]:
        return tuple(n for n in ("fixedbufs", "registerfiles", "sqthread_poll", "hipri")
                     if getattr(self, n))

    @property
    def label(self) -> str:
        return "+".join((self.name, *self.fast_paths))

    @property
    def max_qd(self) -> int | None:
        """psync and sync issue one I/O at a time per job: QD 1 only."""
        return 1 if self.name in ("psync", "sync") else None

    @classmethod
    def parse(cls, label: str) -> Engine:
        """``io_uring+fixedbufs+registerfiles`` -> Engine; ValueError on an unknown part."""
        name, *paths = label.split("+")
        known = {"fixedbufs", "registerfiles", "sqthread_poll", "hipri"}
        if not name or any(p not in known for p in paths):
            raise ValueError(f"{label!r}: an engine and its fast paths, e.g. "
                             "io_uring+fixedbufs+registerfiles")
        if paths and name != "io_uring":
            raise ValueError(f"{label!r}: fast paths are io_uring's")
        return cls(name, **{p: True for p in paths})


@dataclass(frozen=True, order=True)
class Probe:
    """One point of the search: an engine at a load, pinned or not."""

    engine: Engine
    threads: int
    iodepth: int
    split: bool = False  # cpus_allowed_policy=split: each job on a CPU of its own
    trial: int = 0  # 1: the same point measured again by the confirmation

    @property
    def first(self) -> Probe:
        """The point itself, whichever measurement of it this is."""
        return replace(self, trial=0)

    @property
    def outstanding(self) -> int:
        return self.threads * self.iodepth

    @property
    def label(self) -> str:
        pin = ", split" if self.split else ""
        again = ", again" if self.trial else ""
        return f"{self.engine.label} {self.threads} x QD {self.iodepth}{pin}{again}"


@dataclass(frozen=True)
class Measured:
    """What one probe measured (``ok`` False: fio failed; the point is never the peak)."""

    probe: Probe
    ok: bool
    iops: float = 0.0
    bw_bytes_per_s: float = 0.0
    latency_us: dict[str, float | None] = field(default_factory=dict)  # LATENCY_METRICS
    host_cpu_pct: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class LatencyLimit:
    """A latency ceiling: ``metric`` (one of LATENCY_METRICS) at most ``limit_us``."""

    metric: str
    limit_us: float

    @property
    def text(self) -> str:
        return f"{self.metric} <= {duration_text(self.limit_us)}"


def duration_text(us: float) -> str:
    """750 -> '750 us', 1500 -> '1.5 ms', 2e6 -> '2 s'."""
    if us >= 1e6:
        return f"{us / 1e6:g} s"
    return f"{us / 1e3:g} ms" if us >= 1e3 else f"{us:g} us"


@dataclass(frozen=True)
class SearchRules:
    engines: tuple[Engine, ...]  # the first one grows the load
    max_threads: int
    max_qd: int
    limits: tuple[LatencyLimit, ...] = ()
    min_gain_pct: float = DEFAULT_MIN_GAIN_PCT
    max_probes: int = 60
    try_split: bool = True
    confirm: int = 3  # points measured again at the end, the best among them; 0 or 1: none
    # (under a latency ceiling the best is measured again all the same)


@dataclass(frozen=True)
class Step:
    """One probe in the order the search made it, with why it was made and what it did."""

    measured: Measured
    phase: str  # grow-qd, grow-jobs, engine, reach, refine, pinning, confirm
    outcome: str


def over_limit(m: Measured, limits: Sequence[LatencyLimit]) -> str | None:
    """Why ``m`` breaks the ceiling (one line), or None when it keeps to it."""
    for lim in limits:
        value = m.latency_us.get(lim.metric)
        if value is None:
            return f"{lim.metric} latency not measured"
        if value > lim.limit_us:
            return f"{lim.metric} {value:,.0f} us > {duration_text(lim.limit_us)}"
    return None


def gain_pct(new: float, old: float) -> float:
    return (new - old) / old * 100 if old > 0 else float("inf")


class SearchBudget(Exception):
    """The search made ``max_probes`` probes: it stops with the best so far."""


@dataclass(frozen=True)
class Broken:
    """A point whose second probe broke the latency ceiling: never the peak."""

    first: Measured
    again: Measured
    why: str  # over_limit() of the second probe

    @property
    def text(self) -> str:
        return (f"{self.first.probe.first.label} is not the peak: {self.first.iops:,.0f} IOPS "
                f"on its first probe, but measured again {self.why}")


class _Search:
    def __init__(self, rules: SearchRules, measure: Callable[[Probe], Measured]) -> None:
        self.rules = rules
        self._measure = measure
        self.steps: list[Step] = []
        self.seen: dict[Probe, Measured] = {}
        #: points measured again over the ceiling, in the order measured
        self.broken: list[Broken] = []
        #: under a ceiling, one probe of the budget is kept to confirm the peak
        self.reserve = 1 if rules.limits and rules.max_probes > 1 else 0

    def eligible(self, m: Measured) -> bool:
        return m.ok and m.iops > 0 and over_limit(m, self.rules.limits) is None

    def probe(self, p: Probe, phase: str) -> Measured:
        if p in self.seen:
            return self.seen[p]
        budget = self.rules.max_probes - (0 if phase == "confirm" else self.reserve)
        if len(self.seen) >= budget:
            raise SearchBudget()
        m = self._measure(p)
        self.seen[p] = m
        self.steps.append(Step(m, phase, ""))
        return m

    def judge(self, m: Measured, best: Measured | None) -> tuple[bool, str]:
        """Whether ``m`` beats ``best`` by the minimum gain; the step's outcome."""
        if not m.ok:
            return False, f"failed: {m.error or 'no I/O'}"
        over = over_limit(m, self.rules.limits)
        if over is not None:
            return False, f"over the latency ceiling ({over})"
        if best is None:
            return True, "first point"
        gain = gain_pct(m.iops, best.iops)
        better = gain >= self.rules.min_gain_pct
        return better, f"{gain:+.1f} % IOPS ({'kept' if better else 'under'} " \
                       f"{self.rules.min_gain_pct:g} %)"

    def note(self, m: Measured, outcome: str) -> None:
        for i, s in enumerate(self.steps):
            if s.measured is m and not s.outcome:
                self.steps[i] = replace(s, outcome=outcome)

    def step_to(self, p: Probe, phase: str, best: Measured | None) -> tuple[bool, Measured]:
        m = self.probe(p, phase)
        better, outcome = self.judge(m, best)
        self.note(m, outcome)
        return better, m

    def grow(self, best: Measured, phase: str, nxt: Callable[[Probe], Probe | None]
             ) -> Measured:
        while (p := nxt(best.probe)) is not None:
            better, m = self.step_to(p, phase, best)
            if not better:
                break
            best = m
        return best

    def deeper(self, p: Probe) -> Probe | None:
        cap = min(self.rules.max_qd, p.engine.max_qd or self.rules.max_qd)
        return replace(p, iodepth=p.iodepth * 2) if p.iodepth * 2 <= cap else None

    def more_jobs(self, p: Probe) -> Probe | None:
        t = p.threads * 2
        return replace(p, threads=t) if t <= self.rules.max_threads else None

    def neighbours(self, p: Probe) -> list[Probe]:
        cap = min(self.rules.max_qd, p.engine.max_qd or self.rules.max_qd)
        qds = [round(p.iodepth * 1.5), round(p.iodepth * 0.75), p.iodepth // 2]
        out = [replace(p, iodepth=q) for q in qds if 1 <= q <= cap and q != p.iodepth]
        out += [replace(p, threads=t) for t in (p.threads + 1, p.threads - 1)
                if 1 <= t <= self.rules.max_threads]
        return list(dict.fromkeys(out))

    def run(self) -> Measured | None:
        first = self.rules.engines[0]
        start = Probe(first, 1, 1)
        ok, best = self.step_to(start, "grow-qd", None)
        if not ok:
            return None
        while True:  # deeper queues, then more jobs, again from there, until neither gains
            grown = self.grow(self.grow(best, "grow-qd", self.deeper), "grow-jobs",
                              self.more_jobs)
            if grown is best:
                break
            best = grown
        best = self.engines(best)
        best = self.refine(best)
        if self.rules.try_split and best.probe.threads > 1:
            better, m = self.step_to(replace(best.probe, split=True), "pinning", best)
            if better:
                best = self.refine(m)
        return self.confirm(best)

    def confirm(self, best: Measured) -> Measured | None:
        """Step 4 of the module docstring; the budget running out ends it with what it has.
        Under a ceiling the best is measured again even without a rival, and None (no
        peak) when no point measured again kept to it."""
        ceiling = bool(self.rules.limits)
        floor = best.iops * (1 - CONFIRM_WITHIN_PCT / 100)
        rivals = sorted((m for m in self.seen.values() if m.probe.trial == 0 and m is not best
                         and self.eligible(m) and m.iops >= floor),
                        key=lambda m: (-m.iops, m.probe))[:max(self.rules.confirm - 1, 0)]
        if not rivals and not ceiling:
            return best
        means: dict[Probe, tuple[float, Measured]] = {}
        try:
            for first in (best, *rivals):
                self._again(first, means)
            if ceiling and not means:
                self._step_down(means)
        except SearchBudget:
            pass
        if not means:  # the best over the ceiling the second time, and no rival measured
            return None if ceiling else best
        top = max(mean for mean, _ in means.values())
        equal = [p for p, (mean, _) in means.items()
                 if gain_pct(top, mean) < self.rules.min_gain_pct]
        winner = min(equal, key=lambda p: (p.outstanding, p != best.probe, -means[p][0]))
        self._confirmed(means, winner)
        return means[winner][1]

    def _again(self, first: Measured, means: dict[Probe, tuple[float, Measured]]) -> bool:
        """Measure ``first``'s point again; True when it kept to the ceiling (``means``
        then has its mean of two probes and its second probe)."""
        again = self.probe(replace(first.probe, trial=1), "confirm")
        if not self.eligible(again):
            self.note(again, self.judge(again, None)[1] + ": not the peak")
            over = over_limit(again, self.rules.limits) if again.ok else None
            if over is not None:
                self.broken.append(Broken(first, again, over))
            return False
        means[first.probe] = ((first.iops + again.iops) / 2, again)
        return True

    def _step_down(self, means: dict[Probe, tuple[float, Measured]]) -> None:
        """Every point measured again broke the ceiling: measure again the best point
        lighter than the lightest that broke it, up to ``confirm`` times, until one keeps
        to it."""
        for _ in range(max(self.rules.confirm, 1)):
            tried = {p.first for p in self.seen if p.trial}
            lightest = min((b.first.probe.outstanding for b in self.broken), default=None)
            lighter = [m for m in self.seen.values()
                       if m.probe.trial == 0 and m.probe not in tried and self.eligible(m)
                       and (lightest is None or m.probe.outstanding < lightest)]
            if not lighter:
                return
            if self._again(max(lighter, key=lambda m: (m.iops, -m.probe.outstanding,
                                                       m.probe)), means):
                return

    def _confirmed(self, means: dict[Probe, tuple[float, Measured]], winner: Probe) -> None:
        for p, (mean, again) in means.items():
            self.note(again, f"mean of two probes {mean:,.0f} IOPS"
                      + (": the peak" if p == winner else ""))

    def engines(self, best: Measured) -> Measured:
        at = best.probe
        winner = best
        for engine in self.rules.engines[1:]:
            if engine.max_qd == 1:
                start = Probe(engine, min(max(at.threads, 1), self.rules.max_threads), 1)
                m = self.probe(start, "engine")
                if self.eligible(m):
                    self.note(m, "psync: grows its own jobs")
                    m = self.grow(m, "engine", self.more_jobs)
            else:
                m = self.probe(replace(at, engine=engine), "engine")
            better, outcome = self.judge(m, winner)
            self.note(m, outcome)
            if better:
                winner = m
        return self.reach(winner)

    def reach(self, winner: Measured) -> Measured:
        """Each queued engine once at the deepest load allowed: growing stops on the first
        step under the minimum gain, and a device can rise again past a plateau. One probe
        per engine (its first variant listed): fast paths change what an I/O costs the
        host, not how deep a queue the device takes."""
        firsts: dict[str, Engine] = {}
        for e in self.rules.engines:
            if e.max_qd is None:
                firsts.setdefault(e.name, e)
        for engine in firsts.values():
            deepest = Probe(engine, self.rules.max_threads, self.rules.max_qd)
            if deepest in self.seen:
                continue
            better, m = self.step_to(deepest, "reach", winner)
            if better:
                winner = m
        return winner

    def refine(self, best: Measured) -> Measured:
        while True:
            candidates = [self.probe(p, "refine") for p in self.neighbours(best.probe)]
            for m in candidates:
                self.note(m, self.judge(m, best)[1])
            good = [m for m in candidates if self.judge(m, best)[0]]
            if not good:
                return best
            best = max(good, key=lambda m: m.iops)


@dataclass(frozen=True)
class Knee:
    """Where latency starts rising faster than IOPS along the winner's loads."""

    point: Measured
    found: bool  # False: latency never rose faster than IOPS over the loads tried
    message: str


@dataclass(frozen=True)
class SearchOutcome:
    peak: Measured | None  # None: no point kept to the ceiling (or none succeeded)
    steps: tuple[Step, ...]
    stopped: str  # why the search ended
    knee: Knee | None
    host: HostBoundVerdict
    limited_by: str  # "host", "drive" or "unknown"
    message: str
    #: the points better than the peak whose second probe broke the ceiling, and why
    #: ("" none did)
    unconfirmed: str = ""


def curve_of(steps: Sequence[Step], peak: Probe) -> list[Measured]:
    """The peak's engine and pinning at every load tried, in order of outstanding I/O (the
    best point of each load), for the knee and the host check."""
    by_load: dict[int, Measured] = {}
    for s in steps:
        m = s.measured
        p = m.probe
        if not m.ok or p.engine != peak.engine or p.split != peak.split:
            continue
        if p.outstanding not in by_load or m.iops > by_load[p.outstanding].iops:
            by_load[p.outstanding] = m
    return [by_load[k] for k in sorted(by_load)]


def _lat(m: Measured) -> float | None:
    return m.latency_us.get("mean")


def find_knee(curve: Sequence[Measured]) -> Knee | None:
    """The last load before the first step where the mean latency grew by a larger factor
    than IOPS did (by Little's law that is where adding load buys less throughput than it
    costs in latency)."""
    if not curve:
        return None
    for prev, m in itertools.pairwise(curve):
        lp, lm = _lat(prev), _lat(m)
        if lp is None or lm is None or lp <= 0 or prev.iops <= 0:
            continue
        lat_x, iops_x = lm / lp, m.iops / prev.iops
        if lat_x > iops_x:
            return Knee(prev, True, f"knee at {prev.probe.first.label}: from there to "
                        f"{m.probe.outstanding} outstanding I/Os latency x{lat_x:.2f} against "
                        f"IOPS x{iops_x:.2f}")
    return Knee(curve[-1], False, "no knee: latency never rose faster than IOPS over the "
                f"loads tried (up to {curve[-1].probe.outstanding} outstanding I/Os)")


def search(rules: SearchRules, measure: Callable[[Probe], Measured]) -> SearchOutcome:
    """Run the search (module docstring); ``measure`` runs (or recalls) one probe."""
    s = _Search(rules, measure)
    try:
        peak = s.run()
        stopped = f"the last step gained under {rules.min_gain_pct:g} %"
    except SearchBudget:
        eligible = [m for m in s.seen.values() if s.eligible(m)]
        peak = max(eligible, key=lambda m: m.iops) if eligible else None
        if peak is not None and rules.limits:
            peak = s.confirm(peak)  # with the probe kept for it
        stopped = f"the probe budget ({rules.max_probes}) ran out"
    steps = tuple(s.steps)
    unconfirmed = "; ".join(b.text for b in s.broken
                            if peak is None or b.first.iops > peak.iops)
    if peak is None:
        return _no_peak(rules, steps, s.broken)
    curve = curve_of(steps, peak.probe)
    verdict = host_bound({peak.probe.engine.label: [
        CpuPoint(m.probe.threads, m.probe.iodepth, m.iops, m.host_cpu_pct) for m in curve]})
    limited = "unknown" if verdict.peak is None else "host" if verdict.host_bound else "drive"
    who = {"host": "the host (CPU) limited it", "drive": "the drive limited it (the host "
           "had CPU to spare)", "unknown": "host CPU not measured"}[limited]
    message = (f"peak {peak.iops:,.0f} IOPS ({peak.bw_bytes_per_s / 1e6:,.1f} MB/s) at "
               f"{peak.probe.first.label} after {len(steps)} probes; {who}"
               + (f"; {unconfirmed}" if unconfirmed else ""))
    return SearchOutcome(peak, steps, stopped, find_knee(curve), verdict, limited, message,
                         unconfirmed)


def _no_peak(rules: SearchRules, steps: tuple[Step, ...], broken: Sequence[Broken]
             ) -> SearchOutcome:
    ceiling = ", ".join(lim.text for lim in rules.limits)
    ok = [s for s in steps if s.measured.ok]
    unconfirmed = "; ".join(b.text for b in broken)
    if broken:
        message = (f"no peak: no load kept to the latency ceiling ({ceiling}) when measured "
                   f"again: {unconfirmed}")
    elif ceiling and any(m.ok and m.iops > 0 and over_limit(m, rules.limits) is None
                         for m in (s.measured for s in ok)):
        why = ("fio failed when it was measured again" if any(s.phase == "confirm"
                                                               for s in steps)
               else f"the probe budget ({rules.max_probes}) left none to measure again")
        message = f"no peak: no load was confirmed within the latency ceiling ({ceiling}): {why}"
    elif ok and ceiling:
        message = (f"no load kept to the latency ceiling ({ceiling}): even "
                   f"{steps[0].measured.probe.label} was over it")
    else:
        message = "no probe measured any I/O"
    verdict = host_bound({})
    return SearchOutcome(None, steps, message, None, verdict, "unknown", message, unconfirmed)
