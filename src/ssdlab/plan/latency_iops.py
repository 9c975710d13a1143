"""Latency versus IOPS (methodology 1.6) as data: options, validation, the ladders.

For every block size and read/write mix, one curve per thread count: the queue depth
per thread climbs a ladder (1, 2, 4, 8, 16, 32, extended by doubling up to 128) and each
step is one fio run of ``warmup_s`` + ``measure_s`` (fio's ramp_time and runtime). A
curve stops when the mean latency reaches the target or IOPS stops rising
(:mod:`ssdlab.analysis.ladder`); when the largest thread count ran out of queue depths
below the target, thread counts double up to ``max_threads``.

Defaults are the reviews' (this test is their extension of the SNIA latency test):
block sizes 8 and 4 KiB (SNIA's latency test adds 0.5 KiB, which the reviews drop), mixes
100/0, 70/30 and 0/100 (SNIA's latency test uses 65/35: ``--mixes 100/0,65/35,0/100``),
threads 1, 2, 4, rounds of 5 s warm-up + 30 s measured. Validation fails with a
one-line :class:`UserError` before any I/O. Pure: nothing here touches a device.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ssdlab.analysis.hostbound import HostBoundRule, HostBoundVerdict
from ssdlab.analysis.numa import NumaCheck
from ssdlab.errors import UserError
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.latency_records import (
    LatencyCell,
    LatencyIopsParams,
    LatencyIopsResult,
    LatencyIopsStoredPlan,
)
from ssdlab.plan.results import (
    ByteRange,
    SkippedCell,
    plan_head,
)
from ssdlab.plan.rounds import wipc_cell
from ssdlab.plan.specs import (
    KIB,
    ActiveRange,
    CellSpec,
    JobText,
    Mix,
    Pattern,
    active_range,
    block_label,
    cell_dict,
    cell_label,
    sector_blocks,
)
from ssdlab.plan.suite import ProfiledArgs, ProfiledOptions, SuiteSpec, TargetKind, opt
from ssdlab.plan.values import choice, parse_block_sizes, parse_mixes, purge_and_engine
from ssdlab.units import format_bytes, format_duration

TEST = "latency-iops"
DEFAULT_BLOCKS = (8 * KIB, 4 * KIB)
DEFAULT_MIXES = (100, 70, 0)
DEFAULT_THREADS = (1, 2, 4)
DEFAULT_QDS = (1, 2, 4, 8, 16, 32)
DEFAULT_MAX_QD = 128
DEFAULT_TARGET_US = 500.0
DEFAULT_MIN_RISE_PCT = 3.0
DEFAULT_HOST_CPU_PCT = 90.0
DEFAULT_HOST_RISE_PCT = 5.0
#: more threads than this are never added by default (nor more than the CPUs)
DEFAULT_THREADS_CAP = 16
MAX_THREADS = 256
MAX_QD = 4096
#: fio's pause between invocations (start-up, job set-up, teardown), for estimates
POINT_OVERHEAD_S = 0.3


@dataclass(frozen=True)
class LatencyIopsProfile:
    name: str
    warmup_s: float
    measure_s: float
    description: str


PROFILES = {
    "default": LatencyIopsProfile(
        "default", 5.0, 30.0, "the reviews' rounds: 5 s warm-up + 30 s measured per point"
    ),
    "quick": LatencyIopsProfile(
        "quick", 0.5, 2.0,
        "QUICK: 0.5 s warm-up + 2 s measured per point; for demos and tests, not a valid result",
    ),
}


@dataclass(frozen=True)
class LatencyIopsArgs(ProfiledArgs):
    """Raw user input; None means "use the default"."""

    block_sizes: str | None = None
    mixes: str | None = None
    threads: str | None = None
    qds: str | None = None
    max_qd: int | None = None
    max_threads: int | None = None
    target_latency_us: float = DEFAULT_TARGET_US
    min_iops_rise_pct: float = DEFAULT_MIN_RISE_PCT
    full_ladder: bool = False
    warmup_s: float | None = None
    measure_s: float | None = None
    host_bound_cpu_pct: float = DEFAULT_HOST_CPU_PCT
    host_bound_rise_pct: float = DEFAULT_HOST_RISE_PCT
    active_range_pct: float = 100.0
    purge: str = "auto"
    precondition: bool = True
    ioengine: str = "libaio"


@dataclass(frozen=True)
class LatencyIopsOptions(ProfiledOptions):
    """Everything a latency-vs-IOPS run was asked for, validated."""

    block_bytes: tuple[int, ...]
    mixes: tuple[int, ...]
    threads: tuple[int, ...]
    qds: tuple[int, ...]  # the base ladder
    max_qd: int
    max_threads: int
    target_latency_us: float
    min_iops_rise_pct: float
    full_ladder: bool
    warmup_s: float
    measure_s: float
    host_bound_cpu_pct: float
    host_bound_rise_pct: float
    active_range_pct: float
    purge: str
    precondition: bool
    ioengine: str

    @property
    def qd_ladder(self) -> tuple[int, ...]:
        """The base ladder, then doubling from its last step up to ``max_qd``."""
        ladder = list(self.qds)
        while ladder[-1] * 2 <= self.max_qd:
            ladder.append(ladder[-1] * 2)
        if ladder[-1] < self.max_qd:
            ladder.append(self.max_qd)
        return tuple(ladder)

    @property
    def extra_threads(self) -> tuple[int, ...]:
        """Thread counts added, in order, while the largest one stays below the target."""
        extra = []
        count = self.threads[-1] * 2
        while count <= self.max_threads:
            extra.append(count)
            count *= 2
        return tuple(extra)

    @property
    def point_seconds(self) -> float:
        return self.warmup_s + self.measure_s


def parse_counts(option: str, text: str, upper: int) -> tuple[int, ...]:
    """``1,2,4`` -> (1, 2, 4): whole numbers 1..upper, each once, ascending."""
    if not text.strip():
        raise UserError(f"{option} is empty; give a comma list of whole numbers from 1 to "
                        f"{upper}, e.g. 1,2,4")
    values: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        digits = part.isascii() and part.isdigit() and len(part) <= 9
        if not digits or not 1 <= int(part) <= upper:
            raise UserError(f"{option}: {part!r} is not a whole number from 1 to {upper}")
        values.append(int(part))
    if len(set(values)) != len(values):
        raise UserError(f"{option}: {text!r} lists a value twice")
    if values != sorted(values):
        raise UserError(f"{option}: {text!r} must be in ascending order")
    return tuple(values)


def _range(option: str, value: float, low: float, high: float, *, low_open: bool = True) -> None:
    ok = math.isfinite(value) and (low < value if low_open else low <= value) and value <= high
    if not ok:
        bound = "greater than" if low_open else "at least"
        raise UserError(f"{option} {value:g} must be {bound} {low:g} and at most {high:g}")


def _seconds(option: str, value: float, minimum: float) -> None:
    _range(option, value, minimum, 3600, low_open=False)
    millis = round(value * 1000)
    if abs(value * 1000 - millis) > 1e-6 or (value > 0 and millis == 0):
        raise UserError(f"{option} {value:g} must be a whole number of milliseconds")


def _check_numbers(args: LatencyIopsArgs) -> None:
    _range("--target-latency-us", args.target_latency_us, 0, 10_000_000)
    _range("--min-iops-rise", args.min_iops_rise_pct, 0, 100, low_open=False)
    _range("--host-bound-cpu", args.host_bound_cpu_pct, 0, 100)
    _range("--host-bound-rise", args.host_bound_rise_pct, 0, 100, low_open=False)
    _range("--active-range", args.active_range_pct, 0, 100)
    if args.warmup_s is not None:
        _seconds("--warmup-seconds", args.warmup_s, 0.0)
    if args.measure_s is not None:
        _seconds("--measure-seconds", args.measure_s, 0.1)


def default_max_threads(threads: tuple[int, ...], cpus: int) -> int:
    """More threads only where the CPUs can run them: at most 16, at least the given ones."""
    return max(threads[-1], min(DEFAULT_THREADS_CAP, cpus))


def build_options(args: LatencyIopsArgs, cpus: int) -> LatencyIopsOptions:
    """Validate ``args``; a one-line UserError on the first bad value."""
    profile = PROFILES[choice("--profile", args.profile, tuple(PROFILES))]
    purge_and_engine(args.purge, args.ioengine)
    _check_numbers(args)
    blocks = (parse_block_sizes("--block-sizes", args.block_sizes)
              if args.block_sizes is not None else DEFAULT_BLOCKS)
    mixes = parse_mixes("--mixes", args.mixes) if args.mixes is not None else DEFAULT_MIXES
    threads = (parse_counts("--threads", args.threads, MAX_THREADS)
               if args.threads is not None else DEFAULT_THREADS)
    qds = parse_counts("--qd", args.qds, MAX_QD) if args.qds is not None else DEFAULT_QDS
    max_qd = DEFAULT_MAX_QD if args.max_qd is None else args.max_qd
    if args.max_qd is None:
        max_qd = max(max_qd, qds[-1])
    elif not qds[-1] <= args.max_qd <= MAX_QD:
        raise UserError(f"--max-qd {args.max_qd} must be at least the ladder's last queue "
                        f"depth ({qds[-1]}) and at most {MAX_QD}")
    max_threads = default_max_threads(threads, cpus) if args.max_threads is None else (
        args.max_threads)
    if not threads[-1] <= max_threads <= MAX_THREADS:
        raise UserError(f"--max-threads {max_threads} must be at least the largest of "
                        f"--threads ({threads[-1]}) and at most {MAX_THREADS}")
    return LatencyIopsOptions(
        profile=profile.name, block_bytes=blocks, mixes=mixes, threads=threads, qds=qds,
        max_qd=max_qd, max_threads=max_threads, target_latency_us=args.target_latency_us,
        min_iops_rise_pct=args.min_iops_rise_pct, full_ladder=args.full_ladder,
        warmup_s=profile.warmup_s if args.warmup_s is None else args.warmup_s,
        measure_s=profile.measure_s if args.measure_s is None else args.measure_s,
        host_bound_cpu_pct=args.host_bound_cpu_pct,
        host_bound_rise_pct=args.host_bound_rise_pct,
        active_range_pct=args.active_range_pct, purge=args.purge,
        precondition=args.precondition, ioengine=args.ioengine,
    )


@dataclass(frozen=True)
class CurveKey:
    """One curve: a block size and mix at one thread count."""

    block_bytes: int
    read_pct: int
    threads: int

    @property
    def workload(self) -> str:
        return cell_label(self.block_bytes, self.read_pct)

    @property
    def label(self) -> str:
        return f"{self.workload}, {self.threads} thread{'s' if self.threads > 1 else ''}"


@dataclass(frozen=True)
class LatencyIopsPlan:
    options: LatencyIopsOptions
    range: ActiveRange
    block_bytes: tuple[int, ...]  # those the device's sector allows
    skipped: tuple[tuple[str, str], ...]  # (workload label, reason)
    wipc: CellSpec | None

    @property
    def workloads(self) -> tuple[tuple[int, int], ...]:
        """(block size, read %) in run order: block sizes as given, reads before writes."""
        return tuple((b, m) for b in self.block_bytes for m in self.options.mixes)

    def point(self, key: CurveKey, iodepth: int) -> CellSpec:
        """The fio cell of one point: warm-up as ramp_time, the measured time as runtime."""
        opts = self.options
        return CellSpec(
            name=point_name(key, iodepth),
            pattern=Pattern.RANDOM,
            block_bytes=key.block_bytes,
            mix=Mix(key.read_pct),
            threads=key.threads,
            iodepth=iodepth,
            offset_bytes=self.range.offset_bytes,
            size_bytes=self.range.size_bytes,
            runtime_s=opts.measure_s,
            ramp_s=opts.warmup_s,
        )

    def max_points(self) -> int:
        per_workload = (len(self.options.threads) + len(self.options.extra_threads)) * len(
            self.options.qd_ladder)
        return per_workload * len(self.workloads)

    def min_points(self) -> int:
        return len(self.options.threads) * len(self.workloads)


def point_name(key: CurveKey, iodepth: int) -> str:
    return f"latiops_bs{key.block_bytes}_r{key.read_pct}_t{key.threads}_qd{iodepth}"


def build_plan(
    options: LatencyIopsOptions, capacity_bytes: int, logical_sector: int
) -> LatencyIopsPlan:
    rng = active_range(capacity_bytes, options.active_range_pct)
    kept, skipped = sector_blocks(options.block_bytes, options.mixes, logical_sector)
    if not kept:
        raise UserError(
            f"--block-sizes: none of {', '.join(block_label(b) for b in options.block_bytes)} "
            f"fits the device's {logical_sector}-byte logical sector"
        )
    return LatencyIopsPlan(options, rng, kept, skipped,
                           wipc_cell(rng) if options.precondition else None)


# -- the suite -------------------------------------------------------------------------------


def _list(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


_G = "latency vs IOPS"
OPTIONS = (
    *common.device_target(),
    common.profile(_G, tuple(PROFILES), "default: 5 s warm-up + 30 s measured per point (the "
                   "reviews'); quick: 0.5 s + 2 s (marked QUICK everywhere, not a valid "
                   "result)"),
    opt("--block-sizes", group=_G, config=Kind.LIST, metavar="LIST",
        help="block sizes in KiB, e.g. 8,4,0.5 (default: "
        f"{','.join(str(b // 1024) for b in DEFAULT_BLOCKS)}, the reviews'; SNIA adds 0.5)"),
    opt("--mixes", group=_G, config=Kind.LIST, metavar="LIST",
        help="read/write mixes (default: 100/0,70/30,0/100, the reviews'; SNIA's latency "
        "test uses 65/35)"),
    opt("--threads", group=_G, config=Kind.LIST, metavar="LIST",
        help=f"thread counts, one curve each, ascending (default: {_list(DEFAULT_THREADS)})"),
    opt("--qd", group=_G, config=Kind.LIST, field="qds", metavar="LIST",
        help=f"queue depths per thread, ascending (default: {_list(DEFAULT_QDS)}); the "
        "ladder then doubles up to --max-qd"),
    common.whole("--max-qd", _G, f"largest queue depth per thread (default: {DEFAULT_MAX_QD})"),
    common.whole("--max-threads", _G, "thread counts double up to this while the largest "
                 "curve ends at --max-qd below the target (default: the CPU count, at most "
                 f"{DEFAULT_THREADS_CAP}, at least the largest of --threads)"),
    common.number("--target-latency-us", _G, "a curve stops once its mean latency reaches "
                  f"this, in microseconds (default: {DEFAULT_TARGET_US:g})", metavar="US",
                  default=DEFAULT_TARGET_US),
    common.number("--min-iops-rise", _G, "a curve stops when IOPS rose less than this many "
                  "percent over the previous queue depth (default: "
                  f"{DEFAULT_MIN_RISE_PCT:g}; 0: only when IOPS falls)", metavar="PCT",
                  default=DEFAULT_MIN_RISE_PCT, field="min_iops_rise_pct"),
    opt("--full-ladder", group=_G, config=Kind.BOOL, action="store_true",
        help="always run every queue depth of --qd; the stopping rules apply only beyond it"),
    common.number("--warmup-seconds", _G, "warm-up per point, not measured (fio ramp_time; "
                  "default: profile, 5 or 0.5)", metavar="S", field="warmup_s"),
    common.number("--measure-seconds", _G, "measured time per point (fio runtime; default: "
                  "profile, 30 or 2)", metavar="S", field="measure_s"),
    common.number("--host-bound-cpu", _G, "host-bound rule: host CPU at least this many "
                  "percent busy, with IOPS rising less than --host-bound-rise over the "
                  f"previous QD (default: {DEFAULT_HOST_CPU_PCT:g})", metavar="PCT",
                  default=DEFAULT_HOST_CPU_PCT, field="host_bound_cpu_pct"),
    common.number("--host-bound-rise", _G, "host-bound rule: IOPS rise, in percent over the "
                  "previous queue depth, below which a point at --host-bound-cpu is "
                  f"host-bound (default: {DEFAULT_HOST_RISE_PCT:g})", metavar="PCT",
                  default=DEFAULT_HOST_RISE_PCT, field="host_bound_rise_pct"),
    common.active_range(_G),
    common.purge(_G, common.PURGE_AUTO_HELP),
    common.no_precondition(_G),
    common.ioengine(_G, "fio ioengine (default: libaio)"),
)


SPEC = SuiteSpec(
    name=TEST,
    quick_text=("0.5 s warm-up and 2 s measured per "
                "point, for demos and tests; not a valid result"),
    help="latency against IOPS: threads x queue-depth ladders (methodology 1.6, 1.9)",
    description="""For every block size and read/write mix, one curve per thread count: the
    queue depth climbs until mean latency reaches the target or IOPS stops rising; mean, p99
    and p99.9 latency per point, host CPU per point with host-bound detection, and the NUMA
    placement of fio against the device (docs/latency-iops.md). Starts from purge and
    2x-capacity preconditioning.""",
    target=TargetKind.DEVICE,
    options=OPTIONS,
    args_type=LatencyIopsArgs,
    results={TEST: LatencyIopsResult},
    report_title="latency against IOPS report",
    resumable=True,
    # --print-config lists the settings in this order (as before the suite contract)
    config_first=("size", "store", "fio", "profile", "block-sizes", "mixes", "threads", "qd",
                  "max-qd", "max-threads", "target-latency-us", "min-iops-rise",
                  "full-ladder", "warmup-seconds", "measure-seconds", "host-bound-cpu",
                  "host-bound-rise", "active-range", "purge", "ioengine"),
    params={TEST: LatencyIopsParams}, plan_type=LatencyIopsStoredPlan, cells=LatencyCell,
    verdicts={"host_bound": HostBoundVerdict, "numa": NumaCheck},
    remote=True,
)


# -- what the plan says: dry run, the stored plan, the test's parameters --------------------


def describe_ladders(opts: LatencyIopsOptions, plan: LatencyIopsPlan) -> list[str]:
    """``--dry-run``: the ladders, their stopping rules, how long they may take."""
    per_point = opts.point_seconds + POINT_OVERHEAD_S
    extra = (f" (then {', '.join(map(str, opts.extra_threads))} while the largest stays "
             "below the target at the largest QD)" if opts.extra_threads else "")
    rule = (f"stop a curve when mean latency >= {opts.target_latency_us:g} us or IOPS rose "
            f"< {opts.min_iops_rise_pct:g} % over the previous QD")
    if opts.full_ladder:
        rule += f" (checked from QD {opts.qds[-1]} on: --full-ladder)"
    return [
        f"{TEST}: profile {opts.profile}{' (QUICK)' if opts.quick else ''}, "
        f"{opts.warmup_s:g} s warm-up + {opts.measure_s:g} s measured per point",
        f"workloads: {', '.join(cell_label(b, m) for b, m in plan.workloads)}",
        f"threads: {', '.join(map(str, opts.threads))}{extra}",
        f"queue depth per thread: {', '.join(map(str, opts.qd_ladder))}; {rule}",
        f"host-bound: host CPU >= {opts.host_bound_cpu_pct:g} % and IOPS rise "
        f"< {opts.host_bound_rise_pct:g} %",
        f"points: at least {plan.min_points()}, at most {plan.max_points()}; about "
        f"{format_duration(plan.min_points() * per_point)}-"
        f"{format_duration(plan.max_points() * per_point)} (+ purge and preconditioning)",
        f"active range: {format_bytes(plan.range.size_bytes)} from offset "
        f"{plan.range.offset_bytes}",
    ]


def describe_jobs(opts: LatencyIopsOptions, plan: LatencyIopsPlan, file_target: bool,
                  job_text: JobText) -> list[str]:
    """``--dry-run``: the purge, the skipped workloads and the job files."""
    purge = "recreate the file" if file_target and opts.purge != "none" else opts.purge
    out = [f"purge: {purge}"]
    out += [f"skipped {label}: {reason}" for label, reason in plan.skipped]
    if plan.wipc is not None:
        out += ["-- preconditioning job file:",
                job_text((plan.wipc,), f"{TEST} workload-independent "
                         "preconditioning").rstrip()]
    out.append("-- job file of each curve's first point (later points differ only in "
               "iodepth= and numjobs=):")
    for block, mix in plan.workloads:
        key = CurveKey(block, mix, opts.threads[0])
        out += ["", point_job(plan, key, opts.qd_ladder[0], None, job_text).rstrip()]
    return out


def point_job(plan: LatencyIopsPlan, key: CurveKey, iodepth: int, round_no: int | None,
              job_text: JobText) -> str:
    """The job file of one point (``round_no`` None: as the dry run shows it)."""
    what = f"{TEST}: " if round_no is None else f"{TEST} point {round_no}: "
    return job_text((plan.point(key, iodepth),), f"{what}{key.label}, QD {iodepth}")


def _skipped(plan: LatencyIopsPlan) -> list[SkippedCell]:
    return [SkippedCell(c, r) for c, r in plan.skipped]


def plan_record(opts: LatencyIopsOptions, plan: LatencyIopsPlan, args: LatencyIopsArgs
                ) -> LatencyIopsStoredPlan:
    # args: what ``ssdlab resume`` validates again (thread extension as resolved here)
    return LatencyIopsStoredPlan(
        TEST, *plan_head(dataclasses.replace(args, max_threads=opts.max_threads), opts),
        list(opts.qd_ladder), list(opts.extra_threads),
        [cell_label(b, m) for b, m in plan.workloads], _skipped(plan), opts.ioengine, True,
        "fio default (random, scrambled per I/O)",
        "fio completion latency (clat); mixed-point percentiles from merged json+ histograms",
        "/proc/stat busy share of all CPUs over each point's measured period")


def test_params(opts: LatencyIopsOptions, plan: LatencyIopsPlan) -> LatencyIopsParams:
    return LatencyIopsParams(
        "Latency vs IOPS", opts.target_latency_us, opts.min_iops_rise_pct, opts.full_ladder,
        list(opts.threads), list(opts.extra_threads), list(opts.qd_ladder), list(opts.qds),
        opts.warmup_s, opts.measure_s, opts.point_seconds,
        HostBoundRule(opts.host_bound_cpu_pct, opts.host_bound_rise_pct),
        ByteRange.of(plan.range), opts.purge,
        None if plan.wipc is None else cell_dict(plan.wipc), _skipped(plan), opts.quick)
