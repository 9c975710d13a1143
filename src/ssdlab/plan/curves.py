"""vdbench-style curves (``ssdlab run curves``): frozen options, points, the suite.

A curve runs one workload (plan/curve_workloads.py: the catalogue ``presets/data/
curves.toml``, each workload's outstanding I/O as fio jobs) first unthrottled
to find its maximum rate, then at fixed fractions of it (fio ``rate_iops``, split over the
jobs and between reads and writes; for a block-size split ``rate`` in bytes, see
:meth:`Point.rate_limit`), optionally once more unthrottled (vdbench's 120 %).
The suite's spec (its options), its result records and what the plan says (dry run,
stored plan, test parameters) are here too. Pure: no I/O happens here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject, Record, flat
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.curve_workloads import (
    MAX_OUTSTANDING,
    UNTHROTTLED_PCT,
    Catalogue,
    Load,
    Point,
    Workload,
    WorkloadDef,
    catalogue,
    load_for,
    point_job,
)
from ssdlab.plan.preset_defs import PresetIdentity
from ssdlab.plan.results import ByteRange, FioCell, StoredPlan, TestParams, Verdict
from ssdlab.plan.specs import CellSpec, FioJob, JobText, Mix, Pattern
from ssdlab.plan.suite import ProfiledArgs, ProfiledOptions, SuiteSpec, TargetKind, opt
from ssdlab.units import (
    check_fio_seconds,
    format_bytes,
    format_duration,
)

TEST = "curves"
PROFILES = ("full", "quick")
#: (measure, ramp) seconds per point by profile
PROFILE_SECONDS = {"full": (30.0, 5.0), "quick": (1.0, 0.5)}
#: a point delivering less than this share of its target rate is flagged
DEFAULT_MIN_DELIVERED_PCT = 95.0
FILL_BLOCK = 128 * 1024
FILL_QD = 32
#: the test file the run makes on --dir, and its size there without --size (full, quick)
FILE_NAME = "ssdlab-curves.dat"
DIR_FILE_DEFAULT = 1 << 30
DIR_FILE_QUICK = 256 << 20
#: a --fill-region region is whole MiB
REGION_ALIGN = 1024 * 1024


# ------------------------------------------------------------------------ options


@dataclass(frozen=True)
class CurvesArgs(ProfiledArgs):
    """Options as given (command line or config file), before validation."""

    profile: str = "full"
    workloads: str | None = None
    fractions: str | None = None
    with_120: bool = False
    seconds: float | None = None
    ramp: float | None = None
    threads: int | None = None
    jobs: int | None = None
    fill_region: float | None = None
    min_delivered_pct: float = DEFAULT_MIN_DELIVERED_PCT
    purge: str = "none"
    ioengine: str = "libaio"


@dataclass(frozen=True)
class CurvesOptions(ProfiledOptions):
    workloads: tuple[Workload, ...]
    fractions_pct: tuple[int, ...]
    with_120: bool
    measure_s: float
    ramp_s: float
    threads: int | None  # outstanding I/Os for every workload (None: each workload's own)
    jobs: int | None  # fio jobs per point (None: min(CPUs, outstanding))
    fill_region_pct: float | None
    min_delivered_pct: float
    purge: str
    ioengine: str
    preset: PresetIdentity

    @property
    def points_per_workload(self) -> int:
        return 1 + len(self.fractions_pct) + int(self.with_120)

    @property
    def point_seconds(self) -> float:
        return self.measure_s + self.ramp_s


def parse_fractions(text: str) -> tuple[int, ...]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--fractions {text!r}: give whole percentages, e.g. 10,50,100") from None
    if not values or any(not 1 <= v <= 100 for v in values):
        raise UserError(f"--fractions {text!r}: each from 1 to 100 (120 % is --with-120)")
    if sorted(set(values)) != values:
        raise UserError(f"--fractions {text!r}: ascending, without repeats")
    return tuple(values)


def _select(text: str | None, quick: bool, data: Catalogue) -> tuple[Workload, ...]:
    known = data.workloads
    if text is None:
        names = list(data.quick_default if quick else data.default)
    elif text.strip() == "all":
        names = list(known)
    else:
        names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UserError(f"--workload {text!r}: unknown {', '.join(unknown) or 'empty list'}; "
                        f"known: all, {', '.join(known)}")
    if len(set(names)) != len(names):
        raise UserError(f"--workload {text!r} names a workload twice")
    return tuple(known[n] for n in names)


def build_options(args: CurvesArgs, purge_methods: tuple[str, ...],
                  ioengines: tuple[str, ...]) -> CurvesOptions:
    """Validate every option; a one-line UserError naming the value otherwise."""
    if args.profile not in PROFILES:
        raise UserError(f"--profile {args.profile!r}: choose {' or '.join(PROFILES)}")
    quick = args.profile == "quick"
    data = catalogue()
    workloads = _select(args.workloads, quick, data)
    fractions = parse_fractions(args.fractions) if args.fractions is not None else (
        data.quick_fractions_pct if quick else data.fractions_pct)
    measure_default, ramp_default = PROFILE_SECONDS[args.profile]
    measure = measure_default if args.seconds is None else check_fio_seconds(
        "--seconds", args.seconds, 0.1, 86400)
    ramp = ramp_default if args.ramp is None else 0.0 if args.ramp == 0 else check_fio_seconds(
        "--ramp", args.ramp, 0.001, 86400)
    if args.threads is not None and not 1 <= args.threads <= MAX_OUTSTANDING:
        raise UserError(f"--threads {args.threads!r}: give 1 to {MAX_OUTSTANDING}")
    if args.jobs is not None and not 1 <= args.jobs <= 256:
        raise UserError(f"--jobs {args.jobs!r}: give 1 to 256")
    fill = args.fill_region
    if fill is not None and not (math.isfinite(fill) and 0 < fill < 100):
        raise UserError(f"--fill-region {fill!r}: give a percentage 0 < PCT < 100 (the "
                        "reviews used 25)")
    low = args.min_delivered_pct
    if not (math.isfinite(low) and 0 < low <= 100):
        raise UserError(f"--min-delivered {low!r}: give a percentage 0 < PCT <= 100")
    if args.purge not in purge_methods:
        raise UserError(f"--purge {args.purge!r}: choose from {', '.join(purge_methods)}")
    if args.ioengine not in ioengines:
        raise UserError(f"--ioengine {args.ioengine!r}: choose from {', '.join(ioengines)}")
    return CurvesOptions(args.profile, workloads, fractions, args.with_120, measure, ramp,
                         args.threads, args.jobs, fill, low, args.purge, args.ioengine,
                         data.identity)


# ------------------------------------------------------------------------ on the target


def check_fits(opts: CurvesOptions, region_bytes: int, sector_bytes: int, cpus: int) -> None:
    """Every workload's blocks must fit the region and its sequential slices."""
    for w in opts.workloads:
        load = load_for(opts.threads or w.threads, opts.jobs, cpus)
        if any(b % sector_bytes for b, _ in w.bssplit):
            raise UserError(f"workload {w.name}: its block sizes are not multiples of the "
                            f"target's {sector_bytes}-byte sectors")
        slices = load.jobs if w.pattern is Pattern.SEQUENTIAL else 1
        if region_bytes // slices < w.largest_block:
            raise UserError(f"workload {w.name}: {slices} job(s) of {w.largest_block}-byte "
                            f"blocks do not fit the {region_bytes}-byte region")



@dataclass(frozen=True)
class Layout:
    """Where the curves run (the region of the target; the fill writes all of it) and on
    how many CPUs (a workload's outstanding I/O is spread over one fio job per CPU unless
    --jobs)."""

    capacity_bytes: int
    offset_bytes: int
    size_bytes: int
    cpus: int

    def load(self, o: CurvesOptions, w: Workload) -> Load:
        return load_for(o.threads or w.threads, o.jobs, self.cpus)

    def point(self, o: CurvesOptions, w: Workload, kind: str, fraction: int | None = None,
              target_iops: float | None = None) -> Point:
        return Point(w, kind, fraction, target_iops, self.load(o, w), self.offset_bytes,
                     self.size_bytes, o.measure_s, o.ramp_s)

    def region(self) -> ByteRange:
        return ByteRange(self.offset_bytes, self.size_bytes)


def layout_on(o: CurvesOptions, path: str, capacity_bytes: int, sector_bytes: int,
              cpus: int) -> Layout:
    """The curves on a target: the whole of it, or with --fill-region its first PCT
    percent (whole MiB); every workload must fit it (a one-line UserError)."""
    region = capacity_bytes
    if o.fill_region_pct is not None:
        region = int(capacity_bytes * o.fill_region_pct / 100)
        region -= region % REGION_ALIGN
    if region < REGION_ALIGN:
        raise UserError(f"the curve region of {path} would be {format_bytes(region)}; "
                        "give a larger target or --fill-region")
    check_fits(o, region, sector_bytes, cpus)
    return Layout(capacity_bytes, 0, region, cpus)


def fill_cell(capacity_bytes: int) -> CellSpec:
    """The partial-capacity variant's fill: one sequential pass over the whole target."""
    size = capacity_bytes - capacity_bytes % FILL_BLOCK
    return CellSpec("fill", Pattern.SEQUENTIAL, FILL_BLOCK, Mix(0), 1, FILL_QD, 0, size,
                    io_bytes=size)


# ------------------------------------------------------------------------ results


@dataclass(frozen=True)
class PointRecord(Record):
    """One point of a curve: what it asked for, what fio delivered (the cell's figures,
    :func:`ssdlab.run.cells.cell_from_job`) and the host's CPU use over its fio run."""

    round: int = 0
    kind: str = ""  # "max" | "fraction" | "unthrottled"
    fraction_pct: int | None = None
    target_iops: float | None = None
    delivered_pct: float | None = None
    short: bool = False  # delivered less than --min-delivered percent of its target
    fio_rate: str | None = None
    iops: float = 0.0
    read_iops: float = 0.0
    write_iops: float = 0.0
    bw_bytes_per_s: float = 0.0
    lat_mean_us: float | None = None
    lat_p50_us: float | None = None
    lat_p99_us: float | None = None
    lat_p99_9_us: float | None = None
    lat_max_us: float | None = None
    read_lat_mean_us: float | None = None
    write_lat_mean_us: float | None = None
    host_cpu_pct: float | None = None
    host_steal_pct: float | None = None


#: the figures of a point that come from its fio cell, in the order they are stored
CELL_FIGURES = ("iops", "read_iops", "write_iops", "bw_bytes_per_s", "lat_mean_us",
                "lat_p50_us", "lat_p99_us", "lat_p99_9_us", "lat_max_us",
                "read_lat_mean_us", "write_lat_mean_us")


@dataclass(frozen=True)
class WorkloadRecord(WorkloadDef):
    """One workload's curve: the workload, its points so far, its maximum rate and how its
    outstanding I/O was spread."""

    describe: str = ""
    points: list[PointRecord] = field(default_factory=list)
    max_iops: float | None = None  # None: the max-rate run has not ended
    jobs: int = 0
    iodepth: int = 0
    outstanding: int = 0

    def summary(self) -> str:
        """One line: the maximum rate and the mean latency at the lowest and highest
        fraction (the workload's verdict)."""
        fractions = [q for q in self.points if q.kind == "fraction"]
        short = sum(1 for q in self.points if q.short)
        if not fractions:
            return "no points"
        a, b = fractions[0], fractions[-1]
        text = (f"max {self.max_iops or 0:,.0f} IOPS; mean latency {a.lat_mean_us or 0:.0f} "
                f"us at {a.fraction_pct} % -> {b.lat_mean_us or 0:.0f} us at "
                f"{b.fraction_pct} %")
        return text + (f"; {short} point(s) short of their target rate" if short else "")


def workload_record(w: Workload, load: Load) -> WorkloadRecord:
    """A workload's curve before its first point."""
    return WorkloadRecord(w.name, w.title, str(w.pattern), w.bssplit_text(), w.read_pct,
                          w.distribution, w.threads, w.source, w.describe(), [], None,
                          load.jobs, load.iodepth, load.outstanding)


@dataclass(frozen=True)
class FillRecord(Record):
    """The partial-capacity variant's whole-target fill."""

    bytes: int = 0
    block_bytes: int = 0
    region_pct: float = 0.0


@dataclass(frozen=True)
class CurvesResult(Record):
    """The test's result: every workload's curve (stored again after every workload and
    when the run ends), the fill, the preset."""

    OMIT_NONE = frozenset({"error"})

    workloads: list[WorkloadRecord] = field(default_factory=list)
    fill: FillRecord | None = None
    preset: PresetIdentity = field(default_factory=PresetIdentity)
    points_run: int = 0
    short_points: int = 0
    error: str | None = None



# ------------------------------------------------------------------------ what a run stores


@dataclass(frozen=True)
class CurvesPlan(StoredPlan):
    """The stored plan: the arguments and options, the preset, its workloads, the region,
    the --dir (facts; None: --target), and how rates and latency are measured."""

    args: JsonObject = field(default_factory=dict)
    options: JsonObject = field(default_factory=dict)
    preset: PresetIdentity = field(default_factory=PresetIdentity)
    workloads: tuple[WorkloadDef, ...] = ()
    region: ByteRange = field(default_factory=ByteRange)
    dir: JsonObject | None = None
    ioengine: str = ""
    direct: bool = True
    rate: str = ("fio rate_iops per job: the point's target / jobs, split by read share; "
                 "for a block-size split fio rate= in bytes (IOPS x the mean block size)")
    latency: str = "fio completion latency (clat); mixed percentiles from merged json+"


@dataclass(frozen=True)
class CurvesParams(TestParams):
    """The test's parameters: the preset, the profile's settings, the region, the
    workloads."""

    identity: PresetIdentity = flat(default_factory=PresetIdentity)
    profile: str = ""
    quick: bool = False
    fractions_pct: tuple[int, ...] = ()
    with_120: bool = False
    measure_s: float = 0.0
    ramp_s: float = 0.0
    min_delivered_pct: float = DEFAULT_MIN_DELIVERED_PCT
    fill_region_pct: float | None = None
    region: ByteRange = field(default_factory=ByteRange)
    purge: str = ""
    workloads: tuple[WorkloadDef, ...] = ()


@dataclass(frozen=True)
class CurvesCell(FioCell):
    """A point's round cell: fio's figures, what the point asked for and delivered, how
    its load was spread, and the host's CPU use over it."""

    workload: str = ""
    kind: str = ""  # "max" | "fraction" | "unthrottled"
    fraction_pct: int | None = None
    target_iops: float | None = None
    delivered_pct: float | None = None
    short: bool = False
    fio_rate: str | None = None
    outstanding: int = 0
    bssplit: str = ""
    distribution: str = ""
    host_cpu_pct: float | None = None
    host_steal_pct: float | None = None


# ------------------------------------------------------------------------ the suite

_G = "curves"
OPTIONS = (
    *common.workload_target(FILE_NAME, "1GiB (256MiB with --profile quick)"),
    common.profile(_G, PROFILES, "full: 5 s ramp + 30 s measured per point; quick: 0.5 s + "
                   "1 s, fewer fractions and workloads (marked QUICK everywhere)",
                   default="full"),
    opt("--workload", group=_G, config=Kind.LIST, field="workloads", metavar="NAME[,NAME...]",
        help="workloads of the preset, or 'all' (default: the preset's default set; "
        "docs/curves.md lists them)"),
    opt("--fractions", group=_G, config=Kind.LIST, metavar="LIST",
        help="percentages of the maximum rate, ascending (default 10,50,70,80,90,100; quick "
        "10,50,80,100)"),
    opt("--with-120", group=_G, config=Kind.BOOL, action="store_true",
        help="add vdbench's 120 %% point: the workload once more unthrottled"),
    common.number("--seconds", _G, "measured seconds per point (default: profile, 30 or 1)",
                  metavar="S"),
    common.number("--ramp", _G, "ramp seconds per point, not measured (default: profile, 5 "
                  "or 0.5)", metavar="S"),
    common.threads(_G, "outstanding I/Os for every workload (default: each workload's "
                   "vdbench threads, e.g. 128 for 4K random)"),
    common.whole("--jobs", _G, "fio jobs sharing the outstanding I/O (default: one per CPU, "
                 "at most the outstanding I/O)"),
    common.number("--fill-region", _G, "partial-capacity variant: fill the whole target "
                  "sequentially, then run the curves on its first PCT percent (the reviews "
                  "used 25)", metavar="PCT"),
    common.number("--min-delivered", _G, "flag points delivering less than this percentage "
                  f"of their target rate (default {DEFAULT_MIN_DELIVERED_PCT:g})",
                  metavar="PCT", field="min_delivered_pct", default=DEFAULT_MIN_DELIVERED_PCT),
    common.purge(_G, f"purge before the run (default none; {common.PURGE_AUTO_TEXT})",
                 default="none"),
    common.ioengine(_G, "fio ioengine (default: libaio)"),
)

SPEC = SuiteSpec(
    name=TEST,
    quick_text=("short points, fewer fractions and workloads, for "
                "demos and tests; not a valid result"),
    help="vdbench-style curves: latency against delivered IOPS at fractions of the maximum "
    "rate (methodology 2)",
    description="""Per workload (preset 'curves': four corners, 70/30 mixes, database- and
    VDI-like profiles): an unthrottled run finds the maximum rate, then the workload runs at
    fixed fractions of it (fio rate_iops); mean and p99 latency are plotted against the
    delivered IOPS, points short of their target flagged (docs/curves.md).""",
    target=TargetKind.DEVICE_OR_DIR,
    options=OPTIONS,
    args_type=CurvesArgs,
    results={TEST: CurvesResult},
    report_title="latency curves report",
    params={TEST: CurvesParams}, plan_type=CurvesPlan, cells=CurvesCell,
    verdicts={"*": Verdict},
    local_only="its targets (a device or a test file in a work directory) are prepared "
    "on this host; it is not run through the agents yet",
)


# ------------------------------------------------------------------------ what the plan says

#: (a job, its header) -> the job file's text (:func:`ssdlab.engine.jobfile.render`)
Render = Callable[[FioJob, str], str]


def describe(o: CurvesOptions, layout: Layout, target: str, block: bool, job_text: JobText,
             render: Render) -> list[str]:
    """``--dry-run``: the plan, the fill's job file and each workload's max-rate job."""
    points = o.points_per_workload * len(o.workloads)
    fractions = ", ".join(f"{f} %" for f in o.fractions_pct)
    out = [
        f"{TEST}: preset {o.preset.preset} v{o.preset.preset_version}, profile "
        f"{o.profile}{' (QUICK)' if o.quick else ''}, {o.ramp_s:g} s ramp + "
        f"{o.measure_s:g} s measured per point",
        f"per workload: a max-rate run (unthrottled), then {fractions} of it"
        + (f", then {UNTHROTTLED_PCT} % (unthrottled)" if o.with_120 else ""),
        f"points: {points}, about {format_duration(points * (o.point_seconds + 1))}",
        f"region: {format_bytes(layout.size_bytes)} from offset {layout.offset_bytes}"
        + (f" ({o.fill_region_pct:g} % after a whole-target fill)"
           if o.fill_region_pct is not None else ""),
        f"purge: {o.purge if block or o.purge == 'none' else 'recreate the file'}",
        f"points short of their target rate by more than {100 - o.min_delivered_pct:g} % "
        "are flagged",
    ]
    if o.fill_region_pct is not None:
        fill = fill_cell(layout.capacity_bytes)
        out += ["-- fill job file:", job_text((fill,), "fill").rstrip()]
    for w in o.workloads:
        load = layout.load(o, w)
        job = point_job(layout.point(o, w, "max"), target, o.ioengine)
        out += ["", f"== {w.describe()}; fio: {load.jobs} job(s) x QD {load.iodepth}",
                f"   source: {w.source}", "-- max-rate job file:",
                render(job, f"{TEST}: {w.name}, max rate").rstrip(),
                "-- each fraction's job file adds rate_iops=READ,WRITE per job: the fraction "
                f"x the measured maximum / {load.jobs} job(s), split {Mix(w.read_pct).label}"
                + ("" if len(w.bssplit) == 1 else
                   f" (as rate= in bytes: x {w.mean_block_bytes:g} bytes, the split's mean "
                   "block size)")]
    return out


def plan_record(o: CurvesOptions, args: CurvesArgs, layout: Layout,
                directory: Mapping[str, object] | None) -> CurvesPlan:
    """The stored plan (``directory``: the --dir the test file was made in, facts)."""
    # the options as given to the dataclass's asdict, the preset as its document
    options = {k: o.preset.to_json() if k == "preset" else v
               for k, v in dataclasses.asdict(o).items() if k != "workloads"}
    return CurvesPlan(TEST, dataclasses.asdict(args), options, o.preset,
                      tuple(w.record() for w in o.workloads), layout.region(),
                      None if directory is None else cast(JsonObject, dict(directory)),
                      o.ioengine)


def test_params(o: CurvesOptions, layout: Layout) -> CurvesParams:
    return CurvesParams("Curves (vdbench style)", o.preset, o.profile,
                        o.quick, o.fractions_pct, o.with_120, o.measure_s, o.ramp_s,
                        o.min_delivered_pct, o.fill_region_pct, layout.region(), o.purge,
                        tuple(w.record() for w in o.workloads))
