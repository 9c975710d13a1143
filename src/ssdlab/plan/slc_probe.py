"""The SLC-cache probe (methodology 1.4) as data.

From purge (the whole device), ONE sequential write from offset 0, one thread (so the
write is truly sequential), without preconditioning, with fio's bandwidth logged; the
throughput plotted against the bytes written steps down where the cache is full.

How the bandwidth is logged (``--log``):

* ``io``: fio's bandwidth log per I/O (``write_bw_log`` without ``log_avg_msec``): every
  completion with its size, so the bytes are exact and the cliff is resolved to a slice
  of bytes. One line (~30 bytes) per I/O: fine for up to :data:`PER_IO_LOG_MAX_IOS` I/Os
  (61 GiB of 128 KiB writes), millions of lines on a real drive.
* ``bw``: fio's bandwidth log averaged over ``--log-interval`` ms (``log_avg_msec``,
  default 100): one line per interval whatever the drive's size (a 4 TB drive written at
  1 GB/s: 40,000 lines). Resolution: rate x interval, e.g. 300 MB at 3 GB/s, 1 % of a
  30 GB cache.
* ``auto`` (default): ``io`` when the write is at most :data:`PER_IO_LOG_MAX_IOS` I/Os,
  else ``bw``.

Pure: nothing here touches a device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject, Record, key
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.results import StoredPlan, TestParams, Verdict, plan_head
from ssdlab.plan.specs import KIB, MIB, CellSpec, JobText, Mix, Pattern
from ssdlab.plan.suite import ProfiledArgs, ProfiledOptions, SuiteSpec, TargetKind, opt
from ssdlab.plan.values import choice, parse_block_sizes, purge_and_engine
from ssdlab.units import format_bytes

SUITE = TEST = "slc-probe"
CELL = "slc-probe"
TRACKING = "write bandwidth"
LOG_PLACEHOLDER = "LOGDIR/slc"
BLOCK_BYTES = 128 * KIB
#: 32 x 128 KiB = 4 MiB in flight keeps every die of an NVMe drive busy (the same load
#: as ssdlab's preconditioning); a single thread keeps the write sequential
IODEPTH = 32
PER_IO_LOG_MAX_IOS = 500_000
BW_LOG_MS = 100
MIN_SLICE_BYTES = MIB
TARGET_SLICES = 1000
MIN_DROP_PCT = 30.0
MAX_WRITE_FACTOR = 4
MIN_WRITE_BYTES = 16 * MIB
LOG_KINDS = ("auto", "io", "bw")


@dataclass(frozen=True)
class SlcProfile:
    write_fraction: float  # of the capacity, when --write-size is not given
    settle_s: float
    description: str


PROFILES = {
    "default": SlcProfile(1.0, 10.0, "the whole capacity once, 10 s idle after the purge"),
    "quick": SlcProfile(
        0.5, 2.0, "QUICK: half the capacity, 2 s idle after the purge; a cache larger "
        "than the write shows as no cliff"),
}


@dataclass(frozen=True)
class SlcProbeArgs(ProfiledArgs):
    """Raw user input; None means "the profile's default"."""

    write_bytes: int | None = None
    block_size: str | None = None  # "128" (KiB) or "128k"
    iodepth: int | None = None
    log: str = "auto"
    log_interval_ms: int | None = None
    slice_bytes: int | None = None
    min_drop_pct: float = MIN_DROP_PCT
    settle_s: float | None = None
    repeat_after_s: float | None = None
    purge: str = "auto"
    ioengine: str = "libaio"


@dataclass(frozen=True)
class SlcProbeOptions(ProfiledOptions):
    """A validated SLC probe on a target of ``capacity_bytes``."""

    capacity_bytes: int  # the region written: the capacity, whole blocks
    write_bytes: int
    block_bytes: int
    iodepth: int
    log: str  # "io" | "bw"
    log_interval_ms: int  # 0 for the per-I/O log
    slice_bytes: int
    min_drop_pct: float
    settle_s: float
    repeat_after_s: float  # 0: no repeat pass
    purge: str
    ioengine: str

    @property
    def passes(self) -> int:
        return 2 if self.repeat_after_s > 0 else 1

    @property
    def min_change(self) -> float:
        return self.min_drop_pct / 100

    def cell(self, pass_no: int) -> CellSpec:
        return CellSpec(
            name=f"slc_probe_pass{pass_no}",
            pattern=Pattern.SEQUENTIAL,
            block_bytes=self.block_bytes,
            mix=Mix(0),
            threads=1,
            iodepth=self.iodepth,
            offset_bytes=0,
            size_bytes=self.capacity_bytes,
            io_bytes=self.write_bytes,
        )

    def log_options(self, prefix: str) -> tuple[tuple[str, str], ...]:
        """fio global options that write the bandwidth log to ``prefix``_bw.1.log."""
        if self.log == "io":
            return (("write_bw_log", prefix),)
        return (("write_bw_log", prefix), ("log_avg_msec", str(self.log_interval_ms)))

    @staticmethod
    def log_file(prefix: str) -> str:
        """The log fio writes for the one job of the write."""
        return f"{prefix}_bw.1.log"

    def describe_log(self) -> str:
        if self.log == "io":
            return "per-I/O bandwidth log (every completion, exact bytes)"
        return f"bandwidth log averaged over {self.log_interval_ms} ms"


def _number(option: str, value: float | None, low: float, high: float, *,
            integer: bool = False, low_inclusive: bool = True) -> None:
    if value is None:
        return
    bad = not math.isfinite(value) or value > high or (
        value < low if low_inclusive else value <= low) or (integer and value != int(value))
    if bad:
        kind = "a whole number" if integer else "a number"
        lower = f"at least {low:g}" if low_inclusive else f"above {low:g}"
        raise UserError(f"{option} {value:g}: give {kind} {lower} and at most {high:g}")


def _block(text: str | None) -> int:
    if text is None:
        return BLOCK_BYTES
    sizes = parse_block_sizes("--block-size", text)
    if len(sizes) != 1:
        raise UserError(f"--block-size {text!r}: give one block size, e.g. 128 (KiB) or 1m")
    return sizes[0]


def _check_choices(args: SlcProbeArgs, file_target: bool) -> None:
    choice("--profile", args.profile, tuple(PROFILES))
    choice("--log", args.log, LOG_KINDS)
    purge_and_engine(args.purge, args.ioengine)
    if file_target and args.purge not in ("auto", "none"):
        raise UserError(f"--purge {args.purge} applies to block devices; a file target is "
                        "purged by recreating it (--purge auto) or not at all (--purge none)")


def _write_bytes(args: SlcProbeArgs, region: int, block: int) -> int:
    if args.write_bytes is None:
        wanted = int(region * PROFILES[args.profile].write_fraction)
    else:
        wanted = args.write_bytes
        if not MIN_WRITE_BYTES <= wanted <= MAX_WRITE_FACTOR * region:
            raise UserError(
                f"--write-size {format_bytes(wanted)}: give at least "
                f"{format_bytes(MIN_WRITE_BYTES)} and at most {MAX_WRITE_FACTOR}x the "
                f"capacity ({format_bytes(MAX_WRITE_FACTOR * region)})")
    return wanted - wanted % block


def _log(args: SlcProbeArgs, write: int, block: int) -> tuple[str, int]:
    _number("--log-interval", args.log_interval_ms, 1, 60_000, integer=True)
    kind = args.log
    if kind == "io" and args.log_interval_ms is not None:
        raise UserError("--log-interval applies to the averaged log (--log bw or auto); "
                        "--log io records every I/O")
    if kind == "auto":
        per_io = write // block <= PER_IO_LOG_MAX_IOS and args.log_interval_ms is None
        kind = "io" if per_io else "bw"
    interval = 0 if kind == "io" else int(args.log_interval_ms or BW_LOG_MS)
    return kind, interval


def _slice(args: SlcProbeArgs, write: int, block: int, iodepth: int) -> int:
    if args.slice_bytes is None:
        # at least the bytes in flight: fio stamps a completion when it reaps it, so after
        # fio was off the CPU for a moment a queue's worth of completions carries one time;
        # smaller slices made of them read as a burst far above the drive's rate (a 3 MiB
        # "cache" of 437 MB/s once, beside another process on a 2-CPU host)
        per = math.ceil(max(write / TARGET_SLICES, iodepth * block) / MIB) * MIB
        most = max(MIN_SLICE_BYTES, write // 8 // MIB * MIB)  # still 8 slices or more
        return max(MIN_SLICE_BYTES, min(per, most))
    size = args.slice_bytes
    if size < block or write // size < 8:
        raise UserError(
            f"--slice {format_bytes(size)}: give at least the block size "
            f"({format_bytes(block)}) and at most an eighth of the write "
            f"({format_bytes(write // 8)}), so a cliff has slices on both sides")
    return size


def build_slc_options(
    args: SlcProbeArgs, capacity_bytes: int, logical_sector: int, *, file_target: bool = False
) -> SlcProbeOptions:
    """Validate ``args`` for a target; UserError (one line) on the first bad value."""
    _check_choices(args, file_target)
    block = _block(args.block_size)
    if block % logical_sector:
        raise UserError(f"--block-size {format_bytes(block)} is not a multiple of the "
                        f"device's {logical_sector}-byte logical sector")
    _number("--qd", args.iodepth, 1, 1024, integer=True)
    _number("--min-drop", args.min_drop_pct, 0, 100, low_inclusive=False)
    if args.min_drop_pct >= 100:
        raise UserError(f"--min-drop {args.min_drop_pct:g}: give a percentage below 100")
    _number("--settle", args.settle_s, 0, 3600)
    _number("--repeat-after", args.repeat_after_s, 0, 86_400)
    region = capacity_bytes - capacity_bytes % block
    write = _write_bytes(args, region, block)
    kind, interval = _log(args, write, block)
    iodepth = int(args.iodepth or IODEPTH)
    return SlcProbeOptions(
        profile=args.profile,
        capacity_bytes=region,
        write_bytes=write,
        block_bytes=block,
        iodepth=iodepth,
        log=kind,
        log_interval_ms=interval,
        slice_bytes=_slice(args, write, block, iodepth),
        min_drop_pct=args.min_drop_pct,
        settle_s=PROFILES[args.profile].settle_s if args.settle_s is None else args.settle_s,
        repeat_after_s=args.repeat_after_s or 0.0,
        purge=args.purge,
        ioengine=args.ioengine,
    )


# -- the suite ----------------------------------------------------------------------------

_G = "slc probe"
OPTIONS = (
    *common.device_target(),
    common.profile(_G, tuple(PROFILES), "default: write the whole capacity once, 10 s idle "
                   "after the purge; quick: half the capacity, 2 s idle (marked QUICK "
                   "everywhere)"),
    opt("--write-size", group=_G, config=Kind.SIZE, field="write_bytes", type=common.size_arg,
        metavar="SIZE", help="bytes to write, e.g. 200GiB; at least 16 MiB, at most 4x the "
        "capacity (default: the capacity; quick: half of it)"),
    opt("--block-size", group=_G, config=Kind.SIZE, metavar="SIZE",
        help="write block size, KiB unless a unit is given (default 128)"),
    common.qd(_G, f"queue depth of the one writing thread (default {IODEPTH})"),
    opt("--log", group=_G, config=Kind.TEXT, default="auto", choices=LOG_KINDS,
        help="io: fio's bandwidth log per I/O (exact bytes); bw: averaged over "
        f"--log-interval; auto (default): io up to {PER_IO_LOG_MAX_IOS:,} I/Os, else bw"),
    common.whole("--log-interval", _G, f"averaging interval of the bw log in ms (default "
                 f"{BW_LOG_MS})", metavar="MS", field="log_interval_ms"),
    opt("--slice", group=_G, config=Kind.SIZE, field="slice_bytes", type=common.size_arg,
        metavar="SIZE", help="bytes per point of the curve (one stored round each; default: "
        f"the write / {TARGET_SLICES}, at least the bytes in flight and 1 MiB, at most the "
        "write / 8)"),
    common.number("--min-drop", _G, "a cliff is a drop of at least PCT %% of the rate before "
                  f"it (default {MIN_DROP_PCT:g})", metavar="PCT", field="min_drop_pct",
                  default=MIN_DROP_PCT),
    common.number("--settle", _G, "seconds of idle between the purge and the write (default: "
                  "profile; 10, quick 2)", metavar="S", field="settle_s"),
    common.number("--repeat-after", _G, "after the write, idle S seconds and write again to "
                  "see how much cache came back (default: no repeat)", metavar="S",
                  field="repeat_after_s"),
    common.purge(_G, f"how the whole target is purged first; {common.PURGE_AUTO_HELP}"),
    common.ioengine(_G),
)


@dataclass(frozen=True)
class CliffRecord(Record):
    at_bytes: float
    rate_before_bytes_per_s: float
    rate_after_bytes_per_s: float
    ratio: float


@dataclass(frozen=True)
class DipRecord(Record):
    """The rate left its level and came back (analysis.cliff.Dip): not a cliff."""

    at_bytes: float
    length_bytes: float
    rate_level_bytes_per_s: float  # the level it left
    rate_during_bytes_per_s: float  # the mean over the dip (above the level: a burst)
    rate_back_bytes_per_s: float  # the segment it came back with


@dataclass(frozen=True)
class PassRecord(Record):
    """One sequential write: what it wrote, its cliffs and its cache estimate; ``dips``
    only when the rate left its level and came back (not in runs stored before)."""

    OMIT_NONE = frozenset({"dips"})

    pass_no: int = key("pass")
    idle_before_s: float = 0.0
    written_bytes: float = 0
    mean_rate_bytes_per_s: float = 0.0
    estimate_bytes: float | None = None
    cliffs: list[CliffRecord] = field(default_factory=list)
    message: str = ""
    dips: list[DipRecord] | None = None


#: on several hosts (docs/hosts.md): each host's own write of a pass, analysed alone (the
#: run's pass is the hosts' writes together: the set's cliff)
HOST_PASS_KIND = "host-pass"


@dataclass(frozen=True)
class HostPassEvent(Record):
    """Each host's own write of one pass, its cliffs and its cache estimate."""

    pass_no: int = key("pass")
    hosts: dict[str, PassRecord] = field(default_factory=dict)


@dataclass(frozen=True)
class SlcTruth(Record):
    """On the emulated SSD: its configured cache, and how far the estimate is from it."""

    slc_bytes: int
    estimate_error_pct: float | None
    profile: str | None
    fold_rate_bytes_per_s: int | None


@dataclass(frozen=True)
class SlcProbeResult(Record):
    """The probe's result: the first pass's cache estimate, every pass, the recovery."""

    OMIT_NONE = frozenset({"error"})

    estimate_bytes: float | None = None
    cliff_found: bool = False
    message: str = ""
    passes: list[PassRecord] = field(default_factory=list)
    recovery: str | None = None
    slice_bytes: int = 0
    log: str = ""
    ground_truth: SlcTruth | None = None
    error: str | None = None


@dataclass(frozen=True)
class SlcProbePlan(StoredPlan):
    """The stored plan: the arguments as given, the options, the test, the engine."""

    args: JsonObject = field(default_factory=dict)
    options: JsonObject = field(default_factory=dict)
    tests: tuple[str, ...] = (TEST,)
    ioengine: str = ""
    direct: bool = True
    data_pattern: str = "fio default (random, scrambled per I/O)"


@dataclass(frozen=True)
class WriteSpec(Record):
    """The one write's cell as the test's parameters list it."""

    cell: str = ""
    block_bytes: int = 0
    read_pct: int = 0
    pattern: str = ""
    threads: int = 1
    iodepth: int = 0
    io_bytes: int | None = None
    offset_bytes: int = 0
    size_bytes: int = 0


@dataclass(frozen=True)
class SlcProbeParams(TestParams):
    """The test's parameters: no steady state (one write from purge), the write, how its
    bandwidth is logged and sliced, and what counts as a cliff."""

    rule: str = "none (one write from purge; no steady state)"
    window: str = "-"
    tracking_set: str = TRACKING
    cells: tuple[WriteSpec, ...] = ()
    purge: str = ""
    settle_s: float = 0.0
    repeat_after_s: float = 0.0
    write_bytes: int = 0
    block_bytes: int = 0
    iodepth: int = 0
    log: str = ""
    log_interval_ms: int = 0
    slice_bytes: int = 0
    min_drop_pct: float = 0.0
    quick: bool = False


@dataclass(frozen=True)
class SliceCell(Record):
    """A round's one cell: a slice of the write, the bytes written at its end, its rate."""

    cell: str = CELL
    pass_no: int = key("pass", default=1)
    bytes_written: float = 0.0
    slice_bytes: float = 0.0
    bw_bytes_per_s: float = 0.0
    write_bw_bytes_per_s: float = 0.0
    seconds: float = 0.0


@dataclass(frozen=True)
class WriteStep(Record):
    """A pass's sequential write (a ``write`` step)."""

    pass_no: int = key("pass", default=1)
    io_bytes: int | None = None
    block_bytes: int = 0
    iodepth: int = 0
    log: str = ""
    ok: bool = False
    error: str | None = None
    seconds: float = 0.0


SPEC = SuiteSpec(
    name=SUITE,
    quick_text=("half the capacity written, 2 s idle, for "
                "demos and tests; a larger cache shows no cliff"),
    help="SLC-cache probe: sequential write from purge, throughput against bytes "
    "written, the cache size (methodology 1.4)",
    description="""Purge the whole target, then ONE sequential write from offset 0 (one
    thread, no preconditioning) with fio's bandwidth logged; throughput against bytes
    written shows where the SLC cache fills: the first cliff is the cache size estimate.
    docs/slc-probe.md.""",
    target=TargetKind.DEVICE,
    options=OPTIONS,
    args_type=SlcProbeArgs,
    results={TEST: SlcProbeResult},
    report_title="SLC cache probe report",
    params={TEST: SlcProbeParams}, plan_type=SlcProbePlan, cells=SliceCell,
    verdicts={"primary": Verdict}, details={"write": WriteStep, HOST_PASS_KIND: HostPassEvent},
    remote=True,
)


# -- what the plan says: dry run, the stored plan, the test's parameters --------------------


def describe(o: SlcProbeOptions, file_target: bool, job_text: JobText) -> list[str]:
    """``--dry-run``: what the probe will do, with the job file of its write."""
    purge = "recreate the file" if file_target and o.purge != "none" else o.purge
    lines = [
        f"== {TEST}: purge ({purge}) over the whole target, then {o.settle_s:g} s idle",
        f"one sequential write of {format_bytes(o.write_bytes)} from offset 0 "
        f"({o.write_bytes / o.capacity_bytes * 100:.0f} % of the capacity), "
        f"{format_bytes(o.block_bytes)} blocks, 1 thread x QD {o.iodepth}, no preconditioning",
        f"logged: {o.describe_log()}; cut into slices of {format_bytes(o.slice_bytes)} "
        f"(about {o.write_bytes // o.slice_bytes} points); cliffs: drops of at least "
        f"{o.min_drop_pct:g} %; the first is the cache size estimate",
    ]
    if o.passes == 2:
        lines.append(f"then {o.repeat_after_s:g} s idle and the same write again, to see how "
                     "much cache came back")
    return [*lines, f"-- job file of the write ({LOG_PLACEHOLDER.split('/')[0]} is a "
            "temporary directory made at run time):",
            write_job(o, 1, LOG_PLACEHOLDER, job_text).rstrip()]


def write_job(o: SlcProbeOptions, pass_no: int, prefix: str, job_text: JobText) -> str:
    return job_text((o.cell(pass_no),), f"{TEST} sequential write, pass {pass_no}",
                    o.log_options(prefix))


def plan_record(o: SlcProbeOptions, args: SlcProbeArgs) -> SlcProbePlan:
    return SlcProbePlan(SUITE, *plan_head(args, o), (TEST,), o.ioengine)


def test_params(o: SlcProbeOptions) -> SlcProbeParams:
    cell = o.cell(1)
    spec = WriteSpec(cell.name, cell.block_bytes, 0, str(cell.pattern), 1, cell.iodepth,
                     cell.io_bytes, 0, cell.size_bytes)
    return SlcProbeParams(
        "SLC cache probe", cells=(spec,), purge=o.purge, settle_s=o.settle_s,
        repeat_after_s=o.repeat_after_s, write_bytes=o.write_bytes,
        block_bytes=o.block_bytes, iodepth=o.iodepth, log=o.log,
        log_interval_ms=o.log_interval_ms, slice_bytes=o.slice_bytes,
        min_drop_pct=o.min_drop_pct, quick=o.quick)
