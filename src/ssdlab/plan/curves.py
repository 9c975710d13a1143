"""vdbench-style curve workloads (``ssdlab run curves``) as data and frozen options.

A workload (``presets/data/curves.toml``) is an access pattern, a block-size split (fio
``bssplit``), a read share, a hot-spot distribution (fio ``random_distribution``) and the
outstanding I/O count vdbench calls threads. A curve first runs the workload unthrottled
to find its maximum rate, then at fixed fractions of it (fio ``rate_iops``, split over the
jobs and between reads and writes; for a block-size split ``rate`` in bytes, see
:meth:`Point.rate_limit`), optionally once more unthrottled (vdbench's 120 %).
The suite's spec (its options), its result records and what the plan says (dry run,
stored plan, test parameters) are here too. Pure: no I/O happens here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ssdlab import presets
from ssdlab.errors import UserError
from ssdlab.jsonrecord import Record
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.specs import CellSpec, FioJob, JobSection, JobText, Mix, Pattern
from ssdlab.plan.suite import Profiled, SuiteSpec, TargetKind, opt
from ssdlab.units import (
    check_fio_seconds,
    fio_time,
    format_bytes,
    format_duration,
    parse_size,
)

PRESET = "curves"
TEST = "curves"
PROFILES = ("full", "quick")
#: (measure, ramp) seconds per point by profile
PROFILE_SECONDS = {"full": (30.0, 5.0), "quick": (1.0, 0.5)}
#: a point delivering less than this share of its target rate is flagged
DEFAULT_MIN_DELIVERED_PCT = 95.0
#: vdbench's "120 %": the workload once more without a rate limit
UNTHROTTLED_PCT = 120
MAX_OUTSTANDING = 4096
FILL_BLOCK = 128 * 1024
FILL_QD = 32
#: the test file the run makes on --dir, and its size there without --size (full, quick)
FILE_NAME = "ssdlab-curves.dat"
DIR_FILE_DEFAULT = 1 << 30
DIR_FILE_QUICK = 256 << 20
#: a --fill-region region is whole MiB
REGION_ALIGN = 1024 * 1024


@dataclass(frozen=True)
class Workload:
    """One curve workload from the preset data."""

    name: str
    title: str
    pattern: Pattern
    bssplit: tuple[tuple[int, int], ...]  # (block bytes, percent)
    read_pct: int
    distribution: str  # fio random_distribution ("random" = uniform)
    threads: int  # outstanding I/Os (vdbench threads)
    source: str

    @property
    def main_block(self) -> int:
        """The block size with the largest share (what a cell's ``block_bytes`` names)."""
        return max(self.bssplit, key=lambda b: b[1])[0]

    @property
    def largest_block(self) -> int:
        return max(b for b, _ in self.bssplit)

    @property
    def mean_block_bytes(self) -> float:
        return sum(b * p for b, p in self.bssplit) / 100

    def bssplit_text(self) -> str:
        return ":".join(f"{b}/{p}" for b, p in self.bssplit)

    def describe(self) -> str:
        sizes = ", ".join(f"{_kib(b)} {p} %" for b, p in self.bssplit)
        skew = "" if self.distribution == "random" else f", hot spots {self.distribution}"
        return (f"{self.title}: {self.pattern}, {Mix(self.read_pct).label} read/write, "
                f"{sizes}{skew}, {self.threads} outstanding I/Os")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "pattern": str(self.pattern),
                "bssplit": self.bssplit_text(), "read_pct": self.read_pct,
                "distribution": self.distribution, "threads": self.threads,
                "source": self.source}


def _kib(block: int) -> str:
    return f"{block // 1024} KiB" if block % 1024 == 0 else f"{block} B"


def parse_bssplit(text: str, where: str) -> tuple[tuple[int, int], ...]:
    """``"8k/80:64k/20"`` -> ((8192, 80), (65536, 20)); the shares must add up to 100."""
    parts: list[tuple[int, int]] = []
    for item in text.split(":"):
        size, _, pct = item.partition("/")
        try:
            block = parse_size(size.strip())
            share = int(pct.strip())
        except ValueError:
            raise UserError(f"{where}: bssplit {text!r}: each part is SIZE/PERCENT, "
                            "e.g. 8k/80:64k/20") from None
        if block <= 0 or block % 512 or not 0 < share <= 100:
            raise UserError(f"{where}: bssplit {text!r}: sizes are multiples of 512 bytes, "
                            "shares 1..100")
        parts.append((block, share))
    if sum(p for _, p in parts) != 100:
        raise UserError(f"{where}: bssplit {text!r}: the shares add up to "
                        f"{sum(p for _, p in parts)}, not 100")
    return tuple(parts)


def _distribution(text: str, where: str) -> str:
    """``random`` or fio's ``zoned:PCT/PCT:...`` (I/O share / region share)."""
    if text == "random":
        return text
    kind, _, spec = text.partition(":")
    if kind != "zoned" or not spec:
        raise UserError(f"{where}: distribution {text!r}: give random or zoned:IO/REGION:...")
    try:
        pairs = [tuple(int(v) for v in part.split("/")) for part in spec.split(":")]
    except ValueError:
        raise UserError(f"{where}: distribution {text!r} is not zoned:IO/REGION:...") from None
    if any(len(p) != 2 for p in pairs) or sum(p[0] for p in pairs) != 100 or sum(
            p[1] for p in pairs) != 100:
        raise UserError(f"{where}: distribution {text!r}: the I/O shares and the region "
                        "shares must each add up to 100")
    return text


def workload_from(name: str, data: dict[str, Any]) -> Workload:
    where = f"preset {PRESET}, workload {name}"
    try:
        pattern = Pattern(str(data["pattern"]))
        read_pct = int(data["read_pct"])
        threads = int(data["threads"])
        title = str(data["title"])
        bssplit = parse_bssplit(str(data["bssplit"]), where)
    except (KeyError, ValueError) as exc:
        raise UserError(f"{where} is malformed ({exc})") from None
    if not 0 <= read_pct <= 100 or not 1 <= threads <= MAX_OUTSTANDING:
        raise UserError(f"{where}: read_pct 0..100 and threads 1..{MAX_OUTSTANDING}")
    distribution = _distribution(str(data.get("distribution", "random")), where)
    return Workload(name, title, pattern, bssplit, read_pct, distribution, threads,
                    str(data.get("source", "")))


def catalogue() -> tuple[dict[str, Any], dict[str, Workload]]:
    """The preset data and every workload in it, validated."""
    data = presets.load(PRESET)
    table = data.get("workloads")
    if not isinstance(table, dict):
        raise UserError(f"preset {PRESET} is malformed (no workloads)")
    return data, {name: workload_from(name, w) for name, w in table.items()}


# ------------------------------------------------------------------------ options


@dataclass(frozen=True)
class CurvesArgs:
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
class CurvesOptions(Profiled):
    profile: str
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
    preset: dict[str, Any]  # presets.identity

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


def _select(text: str | None, quick: bool, data: dict[str, Any],
            known: dict[str, Workload]) -> tuple[Workload, ...]:
    if text is None:
        names = [str(n) for n in data["quick_default" if quick else "default"]]
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
    data, known = catalogue()
    workloads = _select(args.workloads, quick, data, known)
    fractions = parse_fractions(args.fractions) if args.fractions is not None else tuple(
        int(v) for v in data["quick_fractions_pct" if quick else "fractions_pct"])
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
                         presets.identity(data))


# ------------------------------------------------------------------------ points


@dataclass(frozen=True)
class Load:
    """How a workload's outstanding I/O is spread: ``jobs`` fio jobs at ``iodepth`` each."""

    jobs: int
    iodepth: int

    @property
    def outstanding(self) -> int:
        return self.jobs * self.iodepth


def load_for(outstanding: int, jobs: int | None, cpus: int) -> Load:
    """vdbench's threads as fio jobs x iodepth: at most one job per CPU unless --jobs."""
    count = jobs if jobs is not None else max(1, min(cpus, outstanding))
    count = min(count, outstanding)
    return Load(count, max(1, math.ceil(outstanding / count)))


def split_rate(total_iops: float, jobs: int, read_pct: int) -> tuple[int, int]:
    """Per-job (read, write) ``rate_iops`` for a total rate: divided by the jobs, then by
    the read share. A direction with a share gets at least 1 I/O per second."""
    if total_iops <= 0 or jobs <= 0:
        raise ValueError("a rate needs a positive total and jobs")
    per_job = total_iops / jobs
    read = per_job * read_pct / 100
    write = per_job - read
    return (max(1, round(read)) if read_pct > 0 else 0,
            max(1, round(write)) if read_pct < 100 else 0)


def rate_option(read: int, write: int) -> str:
    """fio's ``rate_iops`` (or ``rate``) value: ``R``, ``,W`` or ``R,W``."""
    if write == 0:
        return str(read)
    if read == 0:
        return f",{write}"
    return f"{read},{write}"


@dataclass(frozen=True)
class Point:
    """One fio run of a curve: the max-rate run, a fraction, or the unthrottled 120 %."""

    workload: Workload
    kind: str  # "max" | "fraction" | "unthrottled"
    fraction_pct: int | None
    target_iops: float | None
    load: Load
    offset_bytes: int
    size_bytes: int
    measure_s: float
    ramp_s: float

    @property
    def name(self) -> str:
        if self.kind == "max":
            tag = "max"
        elif self.kind == "unthrottled":
            tag = f"p{UNTHROTTLED_PCT}"
        else:
            tag = f"p{self.fraction_pct or 0:03d}"
        return f"{self.workload.name}-{tag}"

    @property
    def label(self) -> str:
        if self.kind == "max":
            return "max-rate run (unthrottled)"
        if self.kind == "unthrottled":
            return f"{UNTHROTTLED_PCT} % (unthrottled)"
        return f"{self.fraction_pct} % of max"

    def rate_limit(self) -> tuple[str, str] | None:
        """The job's rate limit as a fio option (None: unthrottled). fio turns
        ``rate_iops`` into bytes/s with the SMALLEST block size of a ``bssplit`` (measured:
        a split whose mean block is 4x its smallest delivered 24.6 % of its rate_iops), so
        a split workload is limited in bytes: ``rate=`` the IOPS times the split's mean
        block size, per direction."""
        rates = self.rates()
        if rates is None:
            return None
        if len(self.workload.bssplit) == 1:
            return "rate_iops", rate_option(*rates)
        mean = self.workload.mean_block_bytes
        return "rate", rate_option(*(round(r * mean) for r in rates))

    def rate_line(self) -> str | None:
        """The rate limit as the job file has it: ``rate_iops=R,W`` or ``rate=R,W``."""
        limit = self.rate_limit()
        return None if limit is None else "=".join(limit)

    def rates(self) -> tuple[int, int] | None:
        if self.target_iops is None:
            return None
        return split_rate(self.target_iops, self.load.jobs, self.workload.read_pct)

    def cell_spec(self) -> CellSpec:
        """The cell identity for :func:`ssdlab.run.cells.cell_from_job`."""
        return CellSpec(self.name, self.workload.pattern, self.workload.main_block,
                        Mix(self.workload.read_pct), self.load.jobs, self.load.iodepth,
                        self.offset_bytes, self.size_bytes, runtime_s=self.measure_s,
                        ramp_s=self.ramp_s)


def point_section(p: Point) -> JobSection:
    """The point's job section as data (the engine renders it)."""
    w = p.workload
    options = [("rw", p.cell_spec().fio_rw)]
    if 0 < w.read_pct < 100:
        options.append(("rwmixread", str(w.read_pct)))
    if len(w.bssplit) == 1:
        options.append(("bs", str(w.bssplit[0][0])))
    else:
        options.append(("bssplit", w.bssplit_text()))
    if w.pattern is Pattern.RANDOM and w.distribution != "random":
        options.append(("random_distribution", w.distribution))
    options += [("iodepth", str(p.load.iodepth)), ("numjobs", str(p.load.jobs)),
                *_region_options(p), ("time_based", "1"), ("runtime", fio_time(p.measure_s))]
    if p.ramp_s > 0:
        options.append(("ramp_time", fio_time(p.ramp_s)))
    limit = p.rate_limit()
    if limit is not None:
        options.append(limit)
    return JobSection(p.name, tuple(options))


def _region_options(p: Point) -> list[tuple[str, str]]:
    """Random jobs share the region; sequential jobs each get a slice of it."""
    if p.workload.pattern is Pattern.SEQUENTIAL and p.load.jobs > 1:
        chunk = p.size_bytes // p.load.jobs
        chunk -= chunk % p.workload.largest_block
        return [("offset", str(p.offset_bytes)), ("size", str(chunk)),
                ("offset_increment", str(chunk))]
    return [("offset", str(p.offset_bytes)), ("size", str(p.size_bytes))]


def point_job(p: Point, target: str, ioengine: str) -> FioJob:
    """The point's fio job on ``target``: one section, no cells."""
    return FioJob(target, (), ioengine, json_plus=True, sections=(point_section(p),))


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


# ------------------------------------------------------------------------ on the target


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

    def region(self) -> dict[str, int]:
        return {"offset_bytes": self.offset_bytes, "size_bytes": self.size_bytes}


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
class WorkloadRecord(Record):
    """One workload's curve: the workload, its points so far, its maximum rate and how its
    outstanding I/O was spread."""

    name: str = ""
    title: str = ""
    pattern: str = ""
    bssplit: str = ""
    read_pct: int = 0
    distribution: str = ""
    threads: int = 0
    source: str = ""
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
    preset: dict[str, str | int] = field(default_factory=dict)  # presets.identity
    points_run: int = 0
    short_points: int = 0
    error: str | None = None


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
    common.purge(_G, "purge before the run (default none; auto: blkdiscard for devices, "
                 "recreate for files)", default="none"),
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
        f"{TEST}: preset {o.preset['preset']} v{o.preset['preset_version']}, profile "
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


def plan_dict(o: CurvesOptions, args: CurvesArgs, layout: Layout,
              directory: dict[str, object] | None) -> dict[str, Any]:
    """The stored plan (``directory``: the --dir the test file was made in)."""
    options = {k: v for k, v in dataclasses.asdict(o).items() if k != "workloads"}
    return {"suite": TEST, "args": dataclasses.asdict(args), "options": options,
            "preset": o.preset, "workloads": [w.to_dict() for w in o.workloads],
            "region": layout.region(), "dir": directory, "ioengine": o.ioengine,
            "direct": True,
            "rate": "fio rate_iops per job: the point's target / jobs, split by read share; "
                    "for a block-size split fio rate= in bytes (IOPS x the mean block size)",
            "latency": "fio completion latency (clat); mixed percentiles from merged json+"}


def test_params(o: CurvesOptions, layout: Layout) -> dict[str, Any]:
    return {"title": "Curves (vdbench style)", **o.preset, "profile": o.profile,
            "quick": o.quick, "fractions_pct": list(o.fractions_pct), "with_120": o.with_120,
            "measure_s": o.measure_s, "ramp_s": o.ramp_s,
            "min_delivered_pct": o.min_delivered_pct,
            "fill_region_pct": o.fill_region_pct, "region": layout.region(),
            "purge": o.purge, "workloads": [w.to_dict() for w in o.workloads]}
