"""vdbench-style curve workloads (``ssdlab run curves``) as data and frozen options.

A workload (``presets/data/curves.toml``) is an access pattern, a block-size split (fio
``bssplit``), a read share, a hot-spot distribution (fio ``random_distribution``) and the
outstanding I/O count vdbench calls threads. A curve first runs the workload unthrottled
to find its maximum rate, then at fixed fractions of it (fio ``rate_iops``, split over the
jobs and between reads and writes; for a block-size split ``rate`` in bytes, see
:meth:`Point.rate_line`), optionally once more unthrottled (vdbench's 120 %).
Pure: no I/O happens here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ssdlab import presets
from ssdlab.engine.jobfile import fio_time, global_section
from ssdlab.errors import UserError
from ssdlab.plan.specs import CellSpec, FioJob, Mix, Pattern
from ssdlab.plan.units import check_fio_seconds, parse_size

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
class CurvesOptions:
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
    def quick(self) -> bool:
        return self.profile == "quick"

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

    def rate_line(self) -> str | None:
        """The job's rate limit. fio turns ``rate_iops`` into bytes/s with the SMALLEST
        block size of a ``bssplit`` (measured: a split whose mean block is 4x its smallest
        delivered 24.6 % of its rate_iops), so a split workload is limited in bytes:
        ``rate=`` the IOPS times the split's mean block size, per direction."""
        rates = self.rates()
        if rates is None:
            return None
        if len(self.workload.bssplit) == 1:
            return f"rate_iops={rate_option(*rates)}"
        mean = self.workload.mean_block_bytes
        return f"rate={rate_option(*(round(r * mean) for r in rates))}"

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


def point_section(p: Point) -> list[str]:
    w = p.workload
    spec = p.cell_spec()
    lines = [f"[{p.name}]", f"rw={spec.fio_rw}"]
    if 0 < w.read_pct < 100:
        lines.append(f"rwmixread={w.read_pct}")
    if len(w.bssplit) == 1:
        lines.append(f"bs={w.bssplit[0][0]}")
    else:
        lines.append(f"bssplit={w.bssplit_text()}")
    if w.pattern is Pattern.RANDOM and w.distribution != "random":
        lines.append(f"random_distribution={w.distribution}")
    lines += [f"iodepth={p.load.iodepth}", f"numjobs={p.load.jobs}"]
    if w.pattern is Pattern.SEQUENTIAL and p.load.jobs > 1:
        chunk = p.size_bytes // p.load.jobs
        chunk -= chunk % w.largest_block
        lines += [f"offset={p.offset_bytes}", f"size={chunk}", f"offset_increment={chunk}"]
    else:
        lines += [f"offset={p.offset_bytes}", f"size={p.size_bytes}"]
    lines += ["time_based=1", f"runtime={fio_time(p.measure_s)}"]
    if p.ramp_s > 0:
        lines.append(f"ramp_time={fio_time(p.ramp_s)}")
    rate = p.rate_line()
    if rate is not None:
        lines.append(rate)
    return lines


def point_job_text(p: Point, target: str, ioengine: str, header: str) -> str:
    job = FioJob(target, (), ioengine, json_plus=True)
    lines = [f"; {line}" for line in header.splitlines()]
    lines += global_section(job)
    lines += ["", *point_section(p)]
    return "\n".join(lines) + "\n"


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
