"""The peak finder (``ssdlab run peak``, docs/peak.md) as data: for 4 KiB random and
128 KiB sequential reads and writes, the jobs x queue depth x ioengine (with io_uring's
fast paths) that gives the most IOPS within a latency ceiling, searched adaptively
(analysis/peak.py). Each probe is one short fio run, stored as a round of its workload's
test. Pure: nothing here touches a device.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ssdlab.analysis.hostbound import HostBoundVerdict
from ssdlab.analysis.peak import (
    DEFAULT_MIN_GAIN_PCT,
    LATENCY_METRICS,
    Engine,
    LatencyLimit,
    Probe,
    SearchRules,
)
from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject, Record, flat
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.results import (
    ByteRange,
    FioCell,
    HostCpuWindow,
    StoredPlan,
    TestParams,
    Verdict,
    plan_head,
)
from ssdlab.plan.specs import KIB, ActiveRange, CellSpec, JobText, Mix, Pattern
from ssdlab.plan.suite import ProfiledArgs, ProfiledOptions, SuiteSpec, TargetKind, opt
from ssdlab.units import check_fio_seconds, format_bytes

SUITE = "peak"


@dataclass(frozen=True)
class Workload:
    name: str  # the test's name
    title: str
    pattern: Pattern
    block_bytes: int
    read_pct: int
    kind: str  # "iops" (small random) or "throughput" (large sequential)

    @property
    def writes(self) -> bool:
        return self.read_pct < 100


WORKLOADS = (
    Workload("rnd4k_read", "4 KiB random read", Pattern.RANDOM, 4 * KIB, 100, "iops"),
    Workload("rnd4k_write", "4 KiB random write", Pattern.RANDOM, 4 * KIB, 0, "iops"),
    Workload("seq128k_read", "128 KiB sequential read", Pattern.SEQUENTIAL, 128 * KIB, 100,
             "throughput"),
    Workload("seq128k_write", "128 KiB sequential write", Pattern.SEQUENTIAL, 128 * KIB, 0,
             "throughput"),
)
BY_NAME = {w.name: w for w in WORKLOADS}
#: the engines tried by default, the first grows the load; io_uring's hipri is added when
#: the device polls (its queue/io_poll is 1)
DEFAULT_ENGINES = ("io_uring", "libaio", "io_uring+fixedbufs+registerfiles",
                   "io_uring+fixedbufs+registerfiles+sqthread_poll", "psync")
HIPRI_ENGINE = "io_uring+fixedbufs+registerfiles+hipri"
MAX_THREADS, MAX_QD, MAX_PROBES = 256, 4096, 1000
PIN_CHOICES = ("auto", "none")


@dataclass(frozen=True)
class PeakProfile:
    probe_seconds: float
    ramp_seconds: float
    description: str


PROFILES = {
    "default": PeakProfile(8.0, 2.0, "probes of 8 s after a 2 s ramp"),
    "quick": PeakProfile(1.0, 0.5, "QUICK: probes of 1 s after a 0.5 s ramp; for demos "
                         "and tests"),
}


@dataclass(frozen=True)
class PeakArgs(ProfiledArgs):
    """The options as given; None: the default."""

    workloads: str | None = None
    max_latency: str | None = None
    engines: str | None = None
    max_threads: int | None = None
    max_qd: int = 256
    min_gain_pct: float = DEFAULT_MIN_GAIN_PCT
    max_probes: int = 40
    probe_seconds: float | None = None
    ramp_seconds: float | None = None
    active_range_pct: float = 100.0
    pin: str = "auto"


@dataclass(frozen=True)
class PeakOptions(ProfiledOptions):
    workloads: tuple[str, ...]
    limits: tuple[LatencyLimit, ...]
    engines: tuple[str, ...]
    max_threads: int
    max_qd: int
    min_gain_pct: float
    max_probes: int
    probe_seconds: float
    ramp_seconds: float
    active_range_pct: float
    pin: str
    #: the CPUs fio's jobs may run on (cpulist; "" none given: fio's own affinity)
    cpus_allowed: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ioengine(self) -> str:
        """The engine that grows the load (the run's engine as other suites say it)."""
        return Engine.parse(self.engines[0]).name

    @property
    def writes(self) -> bool:
        return any(BY_NAME[w].writes for w in self.workloads)

    def rules(self) -> SearchRules:
        return SearchRules(tuple(Engine.parse(e) for e in self.engines), self.max_threads,
                           self.max_qd, self.limits, self.min_gain_pct, self.max_probes,
                           try_split=self.pin != "none")


_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ns|us|ms|s)\s*$", re.IGNORECASE)
_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def parse_max_latency(text: str) -> tuple[LatencyLimit, ...]:
    """``p99=1ms`` or ``p99=1ms,mean=200us`` -> the ceilings; UserError otherwise."""
    example = "e.g. p99=1ms or p99.9=2ms,mean=300us"
    limits: list[LatencyLimit] = []
    for part in (p for p in text.split(",") if p.strip()):
        metric, sep, value = part.partition("=")
        metric = metric.strip().lower()
        match = _DURATION.match(value)
        if not sep or metric not in LATENCY_METRICS or match is None:
            raise UserError(f"--max-latency {text!r}: give METRIC=TIME with METRIC one of "
                            f"{', '.join(LATENCY_METRICS)} and TIME in ns, us, ms or s, "
                            f"{example}")
        us = float(match.group(1)) * _UNIT_US[match.group(2).lower()]
        if not math.isfinite(us) or us <= 0:
            raise UserError(f"--max-latency {text!r}: a ceiling must be above 0")
        limits.append(LatencyLimit(metric, us))
    if not limits:
        raise UserError(f"--max-latency is empty: {example}")
    if len({lim.metric for lim in limits}) != len(limits):
        raise UserError(f"--max-latency {text!r} names a metric twice")
    return tuple(limits)


def parse_workloads(text: str | None) -> tuple[str, ...]:
    if text is None:
        return tuple(BY_NAME)
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [n for n in names if n not in BY_NAME]
    if not names or unknown:
        raise UserError(f"--workloads {text!r}: give a comma list of {', '.join(BY_NAME)}")
    if len(set(names)) != len(names):
        raise UserError(f"--workloads {text!r} names a workload twice")
    return tuple(n for n in BY_NAME if n in names)


def parse_engines(text: str | None, polling: bool) -> tuple[str, ...]:
    if text is None:
        return (*DEFAULT_ENGINES[:-1], *((HIPRI_ENGINE,) if polling else ()),
                DEFAULT_ENGINES[-1])
    labels = tuple(p.strip() for p in text.split(",") if p.strip())
    for label in labels:
        try:
            engine = Engine.parse(label)
        except ValueError as exc:
            raise UserError(f"--engines: {exc}") from None
        if engine.name not in ("libaio", "io_uring", "psync", "sync"):
            raise UserError(f"--engines: {engine.name!r} is not one of libaio, io_uring, "
                            "psync, sync")
        if engine.hipri and not polling:
            raise UserError(f"--engines {label}: the target does not poll (its queue/io_poll "
                            "is not 1), so hipri cannot help")
    if not labels:
        raise UserError("--engines is empty: e.g. io_uring,libaio,psync")
    if len(set(labels)) != len(labels):
        raise UserError(f"--engines {text!r} names an engine twice")
    return labels


def _whole(option: str, value: int | None, upper: int) -> None:
    if value is not None and not 1 <= value <= upper:
        raise UserError(f"{option} {value}: give 1 to {upper}")


def build_options(args: PeakArgs, cpus: int, *, polling: bool = False,
                  cpus_allowed: str = "", notes: tuple[str, ...] = ()) -> PeakOptions:
    """Validate into frozen options; a one-line UserError otherwise, before any I/O."""
    if args.profile not in PROFILES:
        raise UserError(f"--profile {args.profile!r} is not one of: {', '.join(PROFILES)}")
    prof = PROFILES[args.profile]
    _whole("--max-threads", args.max_threads, MAX_THREADS)
    _whole("--max-qd", args.max_qd, MAX_QD)
    _whole("--max-probes", args.max_probes, MAX_PROBES)
    if not math.isfinite(args.min_gain_pct) or not 0 < args.min_gain_pct <= 100:
        raise UserError(f"--min-gain {args.min_gain_pct!r}: give a percentage above 0, at "
                        "most 100")
    if not 0 < args.active_range_pct <= 100:
        raise UserError(f"--active-range {args.active_range_pct!r}: give 0 < PCT <= 100")
    if args.pin not in PIN_CHOICES:
        raise UserError(f"--pin {args.pin!r} is not one of: {', '.join(PIN_CHOICES)}")
    probe_s = check_fio_seconds("--probe-seconds", args.probe_seconds or prof.probe_seconds,
                                0.1, 3600)
    ramp_s = prof.ramp_seconds if args.ramp_seconds is None else args.ramp_seconds
    if ramp_s:
        check_fio_seconds("--ramp-seconds", ramp_s, 0.1, 3600)
    return PeakOptions(
        profile=args.profile,
        workloads=parse_workloads(args.workloads),
        limits=parse_max_latency(args.max_latency) if args.max_latency else (),
        engines=parse_engines(args.engines, polling),
        max_threads=args.max_threads or min(MAX_THREADS, max(4, 4 * cpus)),
        max_qd=args.max_qd,
        min_gain_pct=args.min_gain_pct,
        max_probes=args.max_probes,
        probe_seconds=probe_s,
        ramp_seconds=ramp_s,
        active_range_pct=args.active_range_pct,
        pin=args.pin,
        cpus_allowed=cpus_allowed if args.pin != "none" else "",
        notes=notes,
    )


def probe_cell(o: PeakOptions, w: Workload, p: Probe, rng: ActiveRange) -> CellSpec:
    return CellSpec(name=w.name, pattern=w.pattern, block_bytes=w.block_bytes,
                    mix=Mix(w.read_pct), threads=p.threads, iodepth=p.iodepth,
                    offset_bytes=rng.offset_bytes, size_bytes=rng.size_bytes,
                    runtime_s=o.probe_seconds, ramp_s=o.ramp_seconds)


def probe_options(o: PeakOptions, p: Probe) -> tuple[tuple[str, str], ...]:
    """The probe's fio options beyond the cell: its engine's fast paths and the pinning."""
    out = [(name, "1") for name in p.engine.fast_paths]
    if o.cpus_allowed:
        out.append(("cpus_allowed", o.cpus_allowed))
        if p.split:
            out.append(("cpus_allowed_policy", "split"))
    return tuple(out)


def probe_job(o: PeakOptions, w: Workload, p: Probe, rng: ActiveRange, number: int | str,
              job_text: JobText) -> str:
    return job_text((probe_cell(o, w, p, rng),), f"{w.name} probe {number}: {p.label}",
                    probe_options(o, p))


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PointRecord(Record):
    """One probe: its configuration and what it measured."""

    round_no: int = 0
    engine: str = ""  # the engine's label: io_uring+fixedbufs+registerfiles
    ioengine: str = ""
    fast_paths: list[str] = field(default_factory=list)
    threads: int = 0
    iodepth: int = 0
    split: bool = False
    iops: float = 0.0
    bw_bytes_per_s: float = 0.0
    lat_mean_us: float | None = None
    lat_p99_us: float | None = None
    host_cpu_pct: float | None = None
    phase: str = ""
    outcome: str = ""


@dataclass(frozen=True)
class PeakResult(Record):
    """A workload's peak: where, how fast, its latency, its knee, who limited it."""

    OMIT_NONE = frozenset({"error", "unconfirmed"})

    workload: str = ""
    kind: str = ""  # iops or throughput (what ``--threads auto`` matches it with)
    found: bool = False
    peak: PointRecord | None = None
    knee: PointRecord | None = None
    knee_found: bool = False
    knee_message: str = ""
    limited_by: str = ""  # host, drive, unknown
    host_message: str = ""
    pinning: str = ""
    ceiling: str = ""
    probes: int = 0
    stopped: str = ""
    steps: list[PointRecord] = field(default_factory=list)
    message: str = ""
    error: str | None = None
    #: the points better than the peak whose second probe broke the latency ceiling, and
    #: why they are not the peak (None: none did)
    unconfirmed: str | None = None

    @property
    def verdict(self) -> str:
        """Without a peak, why, as every output says it: ``NO PEAK: no load kept to ...``."""
        text = self.error or self.message
        return "NO PEAK: " + text.removeprefix("no peak: ") if text else ""


# -- what a run stores -----------------------------------------------------------------------


@dataclass(frozen=True)
class PeakPlan(StoredPlan):
    """The stored plan: the arguments as given, the options, the workloads (the tests),
    the active range and which latency the ceiling judges."""

    args: JsonObject = field(default_factory=dict)
    options: JsonObject = field(default_factory=dict)
    tests: tuple[str, ...] = ()
    active_range: ByteRange = field(default_factory=ByteRange)
    latency: str = ("fio completion latency (clat), from each probe's json+ histogram; its "
                    "total latency (lat) where submission blocks (docs/consistency.md)")


@dataclass(frozen=True)
class Ceiling(Record):
    """A latency ceiling as stored (analysis/peak.py ``LatencyLimit``)."""

    metric: str = ""
    limit_us: float = 0.0


@dataclass(frozen=True)
class PeakParams(TestParams):
    """A workload's parameters: the workload, the engines tried, the ceiling, the probes'
    times."""

    workload: str = ""
    kind: str = ""
    block_bytes: int = 0
    read_pct: int = 0
    pattern: str = ""
    engines: tuple[str, ...] = ()
    ceiling: tuple[Ceiling, ...] = ()
    probe_seconds: float = 0.0
    ramp_seconds: float = 0.0
    min_gain_pct: float = DEFAULT_MIN_GAIN_PCT
    quick: bool = False


@dataclass(frozen=True)
class PeakCell(FioCell):
    """A probe's round cell: fio's figures (none where fio measured nothing), the host's
    CPU use, the probe's configuration, whether it measured, and why not."""

    OMIT_NONE = frozenset({"trial"})

    host: HostCpuWindow = flat(default_factory=HostCpuWindow)
    engine: str = ""  # the engine's label: io_uring+fixedbufs+registerfiles
    ioengine: str = ""
    fast_paths: list[str] = field(default_factory=list)
    split: bool = False
    trial: int | None = None  # 1: measured again by the confirmation (None: stored before)
    cpus_allowed: str = ""
    ok: bool = False
    probe_error: str | None = None


_G = "peak search"
OPTIONS = (
    *common.device_target(),
    common.profile(_G, tuple(PROFILES), "default: probes of 8 s after a 2 s ramp; quick: "
                   "1 s after 0.5 s (marked QUICK everywhere)"),
    opt("--workloads", group=_G, config=Kind.LIST, metavar="LIST",
        help=f"comma list of {', '.join(BY_NAME)} (default: all four)"),
    opt("--max-latency", group=_G, config=Kind.TEXT, metavar="METRIC=TIME",
        help="the service level: the peak is the best load whose latency (fio's completion "
        "latency, its total latency where submission blocks) keeps to it, measured "
        "twice, e.g. p99=1ms or p99.9=2ms,mean=300us (metrics "
        f"{', '.join(LATENCY_METRICS)}; default: no ceiling)"),
    opt("--engines", group=_G, config=Kind.LIST, metavar="LIST",
        help="engines to try, the first grows the load, with io_uring's fast paths joined "
        f"by +, e.g. io_uring+fixedbufs (default: {', '.join(DEFAULT_ENGINES)}, and "
        f"{HIPRI_ENGINE} when the device polls)"),
    common.whole("--max-threads", _G, "most fio jobs tried (default 4 x the CPUs, at least "
                 "4)"),
    common.whole("--max-qd", _G, "deepest queue per job tried (default 256)", default=256),
    common.number("--min-gain", _G, "a step that gains less IOPS than this (percent) stops "
                  "growing or refining (default 2)", metavar="PCT",
                  default=DEFAULT_MIN_GAIN_PCT, field="min_gain_pct"),
    common.whole("--max-probes", _G, "most probes per workload (default 40)", default=40),
    common.number("--probe-seconds", _G, "measured seconds per probe (default: profile; 8)",
                  metavar="S"),
    common.number("--ramp-seconds", _G, "warm-up seconds before each probe is measured "
                  "(default: profile; 2)", metavar="S"),
    common.active_range(_G),
    opt("--pin", group=_G, config=Kind.TEXT, default="auto", choices=list(PIN_CHOICES),
        help="auto (default): fio's jobs on the CPUs of the device's NUMA node (on a host "
        "of one node, every CPU ssdlab may use), and each job on a CPU of its own when that "
        "helps; none: no pinning"),
)

SPEC = SuiteSpec(
    name=SUITE,
    quick_text="probes of 1 s after a 0.5 s ramp, for demos and tests; not a valid peak",
    help="find the peak: jobs x QD x ioengine for the most IOPS within a latency ceiling",
    description="""For 4 KiB random and 128 KiB sequential reads and writes, search fio's
    jobs, queue depth and ioengine (libaio, io_uring and its fast paths, psync) adaptively:
    grow the load while IOPS rise, compare engines, try the deepest load once, refine around
    the best, stop when a step gains under 2 %, within --max-latency; the best points are
    measured again before the peak is named. Reports the peak, its configuration, latency at
    the peak and at the knee, and whether the host or the drive limited it; `--threads auto
    --qd auto` of other suites use what it found. docs/peak.md.""",
    target=TargetKind.DEVICE,
    options=OPTIONS,
    args_type=PeakArgs,
    results={w.name: PeakResult for w in WORKLOADS},
    report_title="peak IOPS report",
    params={"*": PeakParams}, plan_type=PeakPlan, cells=PeakCell,
    verdicts={"primary": Verdict, "host_bound": HostBoundVerdict},
    resumable=True,
    many_targets=False,
    remote=True,
)


def describe(o: PeakOptions, rng: ActiveRange, job_text: JobText) -> list[str]:
    ceiling = ", ".join(lim.text for lim in o.limits) or "none"
    lines = [
        f"profile {o.profile}{' (QUICK)' if o.quick else ''}: probes of {o.probe_seconds:g} s "
        f"after a {o.ramp_seconds:g} s ramp, on {format_bytes(rng.size_bytes)}",
        f"latency ceiling: {ceiling}; engines {', '.join(o.engines)}; up to "
        f"{o.max_threads} jobs x QD {o.max_qd}, {o.max_probes} probes per workload; a "
        f"step gaining under {o.min_gain_pct:g} % stops",
        f"pinning: {o.pin}" + (f", cpus_allowed={o.cpus_allowed}" if o.cpus_allowed else ""),
        *o.notes,
    ]
    for name in o.workloads:
        w = BY_NAME[name]
        first = Probe(Engine.parse(o.engines[0]), 1, 1)
        lines += [f"== {name}: {w.title}, from {first.label}, grown adaptively; the first "
                  "probe's job file:",
                  probe_job(o, w, first, rng, 1, job_text).rstrip()]
    return lines


def plan_record(o: PeakOptions, args: PeakArgs, rng: ActiveRange) -> PeakPlan:
    return PeakPlan(SUITE, *plan_head(args, o), o.workloads, ByteRange.of(rng))


def test_params(o: PeakOptions, w: Workload) -> PeakParams:
    return PeakParams(f"Peak: {w.title}", w.name, w.kind, w.block_bytes, w.read_pct,
                      str(w.pattern), o.engines,
                      tuple(Ceiling(x.metric, x.limit_us) for x in o.limits),
                      o.probe_seconds, o.ramp_seconds, o.min_gain_pct, o.quick)
