"""Write Saturation and Host Idle Recovery (methodology 1.7 and 1.8) as data.

**Write Saturation (WSAT).** From purge, 4 KiB random writes in back-to-back rounds
(default 1 minute, one fio run each) until a round limit, an amount written (a multiple
of the active range) or a time limit, whichever comes first. Each round's IOPS and
latency percentiles are computed within it, from that round's latency histogram; fio's
averaged IOPS log gives the fine series the transition is found on.

**Host Idle Recovery (HIR).** Right after saturation, for each wait state W (default
5, 10, 15, 25 and 50 s): a group of bursts, each 5 s of the same random writes followed
by W s of idle, then continuous writes "back to the baseline" (rounds of 5 s with no idle
between them: unlike CloudHarmony's script, which slept in the baseline too). The
first burst of a group follows continuous writing, not idle time, so the verdict counts
the bursts after it. SNIA runs
360 bursts per wait state and 360 baseline rounds; that is the default here as well.
The quick profile shortens everything and is marked QUICK wherever it shows.

Pure: nothing here touches a device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Self

from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject, Record, StoredDataError, flat
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.results import (
    ArgsPlan,
    ByteRange,
    CellData,
    FioCell,
    TestParams,
    plan_head,
)
from ssdlab.plan.specs import KIB, ActiveRange, CellSpec, JobText, Mix, Pattern
from ssdlab.plan.suite import ProfiledArgs, ProfiledOptions, SuiteSpec, TargetKind, opt
from ssdlab.units import format_bytes, format_duration

SUITE = "saturation"
WSAT, HIR = "wsat", "hir"
WSAT_CELL = "wsat_rnd4k_write"
DEFAULT_WAITS_S = (5.0, 10.0, 15.0, 25.0, 50.0)


@dataclass(frozen=True)
class SaturationProfile:
    round_seconds: float
    max_rounds: int
    max_written: float  # multiples of the active range
    max_hours: float
    log_msec: int  # IOPS log resolution (the transition is found on it)
    burst_seconds: float
    bursts: int  # per wait state
    baseline_rounds: int
    wait_scale: float  # quick: waits scaled down
    description: str


PROFILES = {
    "default": SaturationProfile(
        round_seconds=60.0, max_rounds=360, max_written=4.0, max_hours=6.0, log_msec=1000,
        burst_seconds=5.0, bursts=360, baseline_rounds=360, wait_scale=1.0,
        description="SNIA timing: 1-minute rounds, at most 360 rounds (6 h) or 4x the "
        "capacity written; HIR with 360 bursts of 5 s per wait state",
    ),
    "quick": SaturationProfile(
        round_seconds=1.0, max_rounds=60, max_written=4.0, max_hours=0.5, log_msec=100,
        burst_seconds=1.0, bursts=4, baseline_rounds=4, wait_scale=0.2,
        description="QUICK: 1-second rounds, at most 60; HIR with 4 bursts of 1 s per wait "
        "state and waits scaled to a fifth; for demos and tests, not a valid PTS result",
    ),
}


@dataclass(frozen=True)
class SaturationArgs(ProfiledArgs):
    """Raw user input; None means "use the profile's default"."""

    round_seconds: float | None = None
    max_rounds: int | None = None
    max_written: float | None = None
    max_hours: float | None = None
    threads: int | None = None
    iodepth: int | None = None
    active_range_pct: float = 100.0
    purge: str = "auto"
    hir: bool = True
    waits: str | None = None  # "5,10,15,25,50"
    burst_seconds: float | None = None
    bursts: int | None = None
    baseline_rounds: int | None = None
    recovery_ratio: float = 1.2
    ioengine: str = "libaio"


@dataclass(frozen=True)
class SaturationOptions(ProfiledOptions):
    round_seconds: float
    max_rounds: int
    max_written: float
    max_hours: float
    log_msec: int
    threads: int
    iodepth: int
    active_range_pct: float
    purge: str
    hir: bool
    waits_s: tuple[float, ...]
    burst_seconds: float
    bursts: int
    baseline_rounds: int
    recovery_ratio: float
    ioengine: str
    block_bytes: int = 4 * KIB
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def max_seconds(self) -> float:
        """The WSAT run's length: the round limit or the time limit, whichever is less."""
        return min(self.max_rounds * self.round_seconds, self.max_hours * 3600)


#: upper bounds: far beyond any sensible run, low enough to catch a slipped finger
MAX_SECONDS = 3600.0  # a round or a burst
MAX_WAIT_S = 86_400.0
MAX_COUNT = 100_000  # rounds, bursts, baseline rounds
MAX_WRITTEN = 1000.0
MAX_HOURS = 1000.0
MAX_RATIO = 100.0


def _positive(name: str, value: float | None, upper: float, *, integer: bool = False) -> None:
    if value is None:
        return
    if (not math.isfinite(value) or not 0 < value <= upper
            or (integer and value != int(value))):
        kind = "a positive whole number" if integer else "a positive number"
        raise UserError(f"{name} {value!r}: give {kind} up to {upper:g}")


def _seconds(name: str, value: float | None) -> None:
    """Round and burst lengths: fio's resolution is 1 ms, and shorter runs measure start-up."""
    if value is None:
        return
    if value < 0.1 or abs(value * 1000 - round(value * 1000)) > 1e-6:
        raise UserError(f"{name} {value!r}: give at least 0.1 s and a whole number of "
                        "milliseconds")


def parse_waits(text: str) -> tuple[float, ...]:
    try:
        waits = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        waits = ()
    if not waits or any(not math.isfinite(w) or not 0 < w <= MAX_WAIT_S for w in waits):
        raise UserError(f"--waits {text!r}: give idle seconds up to {MAX_WAIT_S:g} as a comma "
                        "list, e.g. 5,10,15,25,50")
    if len({wait_label(w) for w in waits}) != len(waits):
        raise UserError(f"--waits {text!r} lists a wait state twice")
    return waits


def build_options(
    args: SaturationArgs, default_load: tuple[int, int], cpus: int
) -> SaturationOptions:
    """Validate into a frozen :class:`SaturationOptions`; UserError (one line) otherwise."""
    if args.profile not in PROFILES:
        raise UserError(f"--profile {args.profile!r} is not one of: {', '.join(PROFILES)}")
    prof = PROFILES[args.profile]
    for name, value, upper, integer in (
        ("--round-seconds", args.round_seconds, MAX_SECONDS, False),
        ("--max-rounds", args.max_rounds, MAX_COUNT, True),
        ("--max-written", args.max_written, MAX_WRITTEN, False),
        ("--max-hours", args.max_hours, MAX_HOURS, False),
        ("--threads", args.threads, 256, True), ("--qd", args.iodepth, 4096, True),
        ("--burst-seconds", args.burst_seconds, MAX_SECONDS, False),
        ("--bursts", args.bursts, MAX_COUNT, True),
        ("--baseline-rounds", args.baseline_rounds, MAX_COUNT, True),
        ("--recovery-ratio", args.recovery_ratio, MAX_RATIO, False),
    ):
        _positive(name, value, upper, integer=integer)
    _seconds("--round-seconds", args.round_seconds)
    _seconds("--burst-seconds", args.burst_seconds)
    if not 0 < args.active_range_pct <= 100:
        raise UserError(f"--active-range {args.active_range_pct!r}: give 0 < PCT <= 100")
    if args.recovery_ratio <= 1:
        raise UserError(f"--recovery-ratio {args.recovery_ratio!r}: give a ratio above 1, "
                        "e.g. 1.2 (20 % above the baseline)")
    threads, iodepth = default_load
    waits = parse_waits(args.waits) if args.waits is not None else tuple(
        w * prof.wait_scale for w in DEFAULT_WAITS_S)
    round_s = args.round_seconds or prof.round_seconds
    return SaturationOptions(
        profile=args.profile,
        round_seconds=round_s,
        max_rounds=args.max_rounds or prof.max_rounds,
        max_written=args.max_written or prof.max_written,
        max_hours=args.max_hours or prof.max_hours,
        log_msec=max(50, min(prof.log_msec, int(round_s * 1000 / 4))),
        threads=args.threads or min(threads, max(cpus, 1)),
        iodepth=args.iodepth or iodepth,
        active_range_pct=args.active_range_pct,
        purge=args.purge,
        hir=args.hir,
        waits_s=waits,
        burst_seconds=args.burst_seconds or prof.burst_seconds,
        bursts=args.bursts or prof.bursts,
        baseline_rounds=args.baseline_rounds or prof.baseline_rounds,
        recovery_ratio=args.recovery_ratio,
        ioengine=args.ioengine,
    )


def burst_cell(opts: SaturationOptions, rng: ActiveRange, name: str, seconds: float) -> CellSpec:
    return CellSpec(
        name=name,
        pattern=Pattern.RANDOM,
        block_bytes=opts.block_bytes,
        mix=Mix(0),
        threads=opts.threads,
        iodepth=opts.iodepth,
        offset_bytes=rng.offset_bytes,
        size_bytes=rng.size_bytes,
        runtime_s=seconds,
    )


def wait_label(wait_s: float) -> str:
    return f"{wait_s:g} s"


# -- the suite -------------------------------------------------------------------------------

_G, _H = "saturation", "host idle recovery"
OPTIONS = (
    *common.device_target(),
    common.profile(_G, tuple(PROFILES), "default: 60 s rounds, <= 360 rounds or 4x written, "
                   "HIR per SNIA; quick: 1 s rounds and a short HIR (marked QUICK everywhere)"),
    common.number("--round-seconds", _G, "round length in seconds (default: profile; 60)",
                  metavar="S"),
    common.whole("--max-rounds", _G, "stop after N rounds (default: profile; 360)"),
    common.number("--max-written", _G, "stop after writing X times the active range "
                  "(default 4)", metavar="X"),
    common.number("--max-hours", _G, "stop after H hours of writing (default: profile; 6)",
                  metavar="H"),
    common.threads(_G),
    common.qd(_G, "queue depth per job (default per device class)"),
    common.active_range(_G, "written"),
    common.purge(_G, common.PURGE_AUTO_HELP),
    common.ioengine(_G, "fio ioengine"),
    opt("--no-hir", group=_H, config=Kind.BOOL, dest="hir", action="store_false",
        help="skip Host Idle Recovery after the saturation"),
    opt("--waits", group=_H, config=Kind.LIST, metavar="LIST",
        help="idle seconds per wait state (default 5,10,15,25,50; quick: a fifth)"),
    common.number("--burst-seconds", _H, "length of each write burst (default: profile; 5)",
                  metavar="S"),
    common.whole("--bursts", _H, "bursts per wait state (default: profile; 360)"),
    common.whole("--baseline-rounds", _H, "continuous rounds back to the baseline after each "
                 "wait state (default: profile; 360)"),
    common.number("--recovery-ratio", _H, "bursts at least X times the baseline IOPS (and "
                  "significantly so) count as recovered (default 1.2)", metavar="X",
                  default=1.2),
)


# -- results ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class IopsDipRecord(Record):
    """The IOPS fell and came back to FOB (analysis.saturation.IopsDip): not the
    transition."""

    start_s: float
    start_bytes: float
    end_s: float
    end_bytes: float
    fob_iops: float
    iops_during: float
    iops_back: float


@dataclass(frozen=True)
class TransitionRecord(Record):
    """Where IOPS fell from fresh-out-of-box to saturated for good (analysis.saturation);
    ``dips`` only when they fell and came back (not in runs stored before)."""

    OMIT_NONE = frozenset({"dips"})

    fob_iops: float = 0.0
    saturated_iops: float = 0.0
    found: bool = False
    start_s: float | None = None
    start_bytes: float | None = None
    end_s: float | None = None
    end_bytes: float | None = None
    message: str = ""
    dips: list[IopsDipRecord] | None = None


@dataclass(frozen=True)
class SaturatedWindow(Record):
    """Steady state (SNIA's rule) of the last window of rounds."""

    rule: str = "snia"
    attained: bool = False
    window_rounds: list[int] | None = None


@dataclass(frozen=True)
class SaturatedVerdict(SaturatedWindow):
    """WSAT's verdict: steady state of the last window of rounds, in a sentence."""

    message: str = ""


@dataclass(frozen=True)
class SaturationVerdict(Record):
    """A test's verdict as stored: WSAT's has its window's steady state before the
    message (:class:`SaturatedVerdict`), Host Idle Recovery's only the message."""

    window: SaturatedWindow | None = flat(default=None)
    message: str = ""


@dataclass(frozen=True)
class WsatResult(Record):
    """Write Saturation: FOB and saturated IOPS, the transition, why it stopped; ``cells``
    is the last round's cell with the window's saturated IOPS."""

    OMIT_NONE = frozenset({"error"})

    steady: bool = False
    rounds_run: int | None = None  # None: not yet known (the test is running or stopped)
    window_rounds: list[int] | None = None
    fob_iops: float | None = None
    saturated_iops: float | None = None
    written_bytes: float = 0.0
    written_x: float = 0.0
    elapsed_s: float = 0.0
    stop_reason: str = ""
    transition: TransitionRecord = field(default_factory=TransitionRecord)
    verdict: SaturatedVerdict = field(default_factory=SaturatedVerdict)
    cells: list[CellData] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class WaitStateRecord(Record):
    """One wait state of Host Idle Recovery: its bursts against the baseline before them."""

    wait_s: float = 0.0
    bursts_iops: list[float] = field(default_factory=list)
    baseline_iops: list[float] = field(default_factory=list)
    mean_iops: float = 0.0
    baseline_mean: float = 0.0
    ratio: float | None = None
    p_value: float | None = None
    recovered: bool = False
    note: str = ""


@dataclass(frozen=True)
class HirResult(Record):
    """Host Idle Recovery: whether idle time recovers performance, per wait state."""

    recovered: bool = False
    message: str = ""
    wait_states: list[WaitStateRecord] = field(default_factory=list)
    baseline_iops: float = 0.0


@dataclass(frozen=True)
class SaturationPlan(ArgsPlan):
    tests: tuple[str, ...] = ()
    active_range: ByteRange = field(default_factory=ByteRange)
    latency: str = ""


@dataclass(frozen=True)
class WsatParams(TestParams):
    round_seconds: float = 0.0
    max_rounds: int = 0
    max_written: float = 0.0
    max_hours: float = 0.0
    threads: int = 0
    iodepth: int = 0
    block_bytes: int = 0
    active_range: ByteRange = field(default_factory=ByteRange)
    purge: str = ""
    log_msec: int = 0
    quick: bool = False
    cells: list[JsonObject] = field(default_factory=list)


@dataclass(frozen=True)
class HirParams(TestParams):
    waits_s: list[float] = field(default_factory=list)
    burst_seconds: float = 0.0
    bursts: int = 0
    baseline_rounds: int = 0
    recovery_ratio: float = 0.0
    threads: int = 0
    iodepth: int = 0
    block_bytes: int = 0
    quick: bool = False


@dataclass(frozen=True)
class HirStep(Record):
    """The fio run back to the baseline after a wait state (an ``fio`` step)."""

    ok: bool = False
    error: str | None = None
    baseline_after_wait_s: float = 0.0


@dataclass(frozen=True)
class SaturationCell(Record):
    """A round's cell: WSAT's (:class:`WsatCell`), a Host Idle Recovery burst's
    (:class:`HirBurstCell`) or a point of its way back to the baseline
    (:class:`HirBaselineCell`); reading one gives the record of its shape."""

    @classmethod
    def from_json(cls, data: object, where: str = "") -> Self:
        if cls is not SaturationCell:
            return super().from_json(data, where)
        if not isinstance(data, dict):
            raise StoredDataError(f"{where or cls.__name__}: expected a JSON object")
        shape: type[SaturationCell] = WsatCell if "series" in data else (
            HirBaselineCell if data.get("kind") == "baseline" else HirBurstCell)
        return shape.from_json(data, where)  # type: ignore[return-value]


@dataclass(frozen=True)
class WsatCell(FioCell, SaturationCell):
    """A WSAT round's cell: fio's, then where the run was after it and the round's
    (seconds, bytes written, IOPS) points."""

    elapsed_s: float = 0.0
    written_bytes: float = 0.0
    gap_s: float = 0.0
    resumed: bool = False
    series: list[list[float]] = field(default_factory=list)


@dataclass(frozen=True)
class HirPoint(Record):
    """Which Host Idle Recovery point a cell is: its wait state, burst or baseline, index."""

    group: int = 0
    kind: str = ""  # "burst" | "baseline"
    index: int = 0
    wait_s: float = 0.0


@dataclass(frozen=True)
class HirBurstCell(FioCell, SaturationCell):
    point: HirPoint = flat(default_factory=HirPoint)


@dataclass(frozen=True)
class HirBaselineCell(SaturationCell):
    """A point of the way back to the baseline, from fio's IOPS log."""

    cell: str = ""
    point: HirPoint = flat(default_factory=HirPoint)
    iops: float = 0.0
    lat_mean_us: float = 0.0
    block_bytes: int = 0
    read_pct: int = 0
    pattern: str = ""
    threads: int = 0
    iodepth: int = 0


SPEC = SuiteSpec(
    name=SUITE,
    quick_text=("1-second rounds and a short Host Idle Recovery, "
                "for demos and tests; not a valid PTS result"),
    help="Write Saturation and Host Idle Recovery (methodology 1.7-1.8)",
    description="""From purge, 4 KiB random writes run continuously until a round limit, an
    amount written or a time limit (Write Saturation: FOB IOPS, saturated IOPS, where the
    transition happened; per-round latency percentiles from fio's histogram log). Then Host
    Idle Recovery: for each wait state, bursts of writes separated by idle time, and
    continuous writes back to the baseline; does idle time recover performance? A killed run
    continues with `ssdlab resume RUN`. docs/saturation.md.""",
    target=TargetKind.DEVICE,
    options=OPTIONS,
    args_type=SaturationArgs,
    results={WSAT: WsatResult, HIR: HirResult},
    report_title="write saturation report",
    resumable=True,
    params={WSAT: WsatParams, HIR: HirParams}, plan_type=SaturationPlan, cells=SaturationCell,
    verdicts={"primary": SaturationVerdict}, details={"fio": HirStep},
    remote=True,
)


# -- what the plan says: dry run, the stored plan, the tests' parameters ---------------------


def wsat_job(o: SaturationOptions, rng: ActiveRange, number: int | str, prefix: str,
             job_text: JobText) -> str:
    """The job file of WSAT round ``number``, its averaged IOPS log written to ``prefix``."""
    return job_text((burst_cell(o, rng, WSAT_CELL, o.round_seconds),), f"wsat round {number}",
                    (("write_iops_log", prefix), ("log_avg_msec", str(o.log_msec))))


def describe(o: SaturationOptions, rng: ActiveRange, job_text: JobText) -> list[str]:
    """``--dry-run``: what the run will do, with the job files of a round and a burst."""
    lines = [
        f"profile {o.profile}{' (QUICK)' if o.quick else ''}; {o.threads} threads x QD "
        f"{o.iodepth}, 4 KiB random writes on {format_bytes(rng.size_bytes)}",
        f"== {WSAT}: purge {o.purge}; rounds of {o.round_seconds:g} s until {o.max_rounds} "
        f"rounds, {o.max_written:g}x the range written "
        f"({format_bytes(o.max_written * rng.size_bytes)}) or {o.max_hours:g} h, "
        f"whichever first (at most {format_duration(o.max_seconds)})",
        "-- each round's job file:",
        wsat_job(o, rng, "N", "LOGDIR/wsat", job_text).rstrip(),
    ]
    if o.hir:
        waits = ", ".join(wait_label(w) for w in o.waits_s)
        lines += [
            f"== {HIR}: wait states {waits}: each {o.bursts} bursts of {o.burst_seconds:g} s "
            f"with the wait between, then {o.baseline_rounds} continuous rounds of "
            f"{o.burst_seconds:g} s back to the baseline",
            job_text((burst_cell(o, rng, "hir_burst", o.burst_seconds),), "hir burst",
                     ()).rstrip(),
        ]
    return lines


def plan_record(o: SaturationOptions, args: SaturationArgs, rng: ActiveRange
                ) -> SaturationPlan:
    return SaturationPlan(
        SUITE, *plan_head(args, o), (WSAT, HIR) if o.hir else (WSAT,), ByteRange.of(rng),
        "fio completion latency (clat), per round from that round's json+ histogram")


def wsat_params(o: SaturationOptions, rng: ActiveRange) -> WsatParams:
    return WsatParams(
        "Write Saturation", o.round_seconds, o.max_rounds, o.max_written, o.max_hours,
        o.threads, o.iodepth, o.block_bytes, ByteRange.of(rng), o.purge, o.log_msec,
        o.quick, [{"name": WSAT_CELL, "threads": o.threads, "iodepth": o.iodepth,
                   "block_bytes": o.block_bytes, "read_pct": 0, "pattern": "random"}])


def hir_params(o: SaturationOptions) -> HirParams:
    return HirParams(
        "Host Idle Recovery", list(o.waits_s), o.burst_seconds, o.bursts, o.baseline_rounds,
        o.recovery_ratio, o.threads, o.iodepth, o.block_bytes, o.quick)
