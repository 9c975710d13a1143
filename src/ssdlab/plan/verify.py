"""The data-integrity check (``ssdlab run verify``) as data.

fio writes the active range with a checksum in every ``interval`` bytes (a header with
the offset, a sequence number and the checksum of the data), then reads it all back and
checks every interval: data that comes back different (silently corrupted, misplaced,
stale) is caught and located to the interval. ``continue_on_error=verify`` makes fio
report every failing interval instead of stopping at the first. ``--verify-only`` reads
and checks data a previous ``verify`` run with the same settings wrote (no writes).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject, Record, flat
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.results import ByteRange, StoredPlan, TestParams, Verdict
from ssdlab.plan.specs import ActiveRange, CellSpec, JobText, Mix, Pattern
from ssdlab.plan.suite import SuiteSpec, TargetKind, Unprofiled, opt
from ssdlab.units import format_bytes, parse_size

SUITE = TEST = "verify"
#: failures listed in the result and the report (all are counted; fio's output has all)
MAX_LISTED = 1000
CHECKSUMS = ("crc32c", "crc64", "md5", "sha256", "sha512", "xxhash")
PATTERNS = ("sequential", "random")


@dataclass(frozen=True)
class VerifyArgs:
    block_size: str = "128"  # KiB unless a unit is given
    pattern: str = "sequential"
    checksum: str = "crc32c"
    interval: str = "4"  # KiB
    iodepth: int = 16
    active_range_pct: float = 100.0
    verify_only: bool = False
    ioengine: str = "libaio"


@dataclass(frozen=True)
class VerifyOptions(Unprofiled, Record):
    """The validated options (stored as the plan's options and in the test's
    parameters)."""

    block_bytes: int
    pattern: str
    checksum: str
    interval_bytes: int
    iodepth: int
    active_range_pct: float
    verify_only: bool
    ioengine: str


def _kib(name: str, text: str) -> int:
    try:
        size = parse_size(text.strip(), default_unit="k")
    except ValueError as exc:
        raise UserError(f"{name} {text!r}: {exc}") from None
    if size < 512 or size % 512:
        raise UserError(f"{name} {text!r}: give a multiple of 512 bytes, e.g. 4 (KiB)")
    return size


def build_options(args: VerifyArgs, logical_sector: int) -> VerifyOptions:
    """Validate into :class:`VerifyOptions`; UserError (one line) otherwise."""
    block = _kib("--block-size", args.block_size)
    interval = _kib("--interval", args.interval)
    if args.pattern not in PATTERNS:
        raise UserError(f"--pattern {args.pattern!r} is not one of: {', '.join(PATTERNS)}")
    if args.checksum not in CHECKSUMS:
        raise UserError(f"--checksum {args.checksum!r} is not one of: {', '.join(CHECKSUMS)}")
    if block % interval:
        raise UserError(f"--interval {args.interval!r} must divide the block size "
                        f"({block} bytes)")
    if block % logical_sector:
        raise UserError(f"--block-size {args.block_size!r} is not a multiple of the device's "
                        f"{logical_sector}-byte logical sector")
    if not (isinstance(args.iodepth, int) and 1 <= args.iodepth <= 1024):
        raise UserError(f"--qd {args.iodepth!r}: give a whole number from 1 to 1024")
    pct = args.active_range_pct
    if not (math.isfinite(pct) and 0 < pct <= 100):
        raise UserError(f"--active-range {pct!r}: give 0 < PCT <= 100")
    return VerifyOptions(block, args.pattern, args.checksum, interval, args.iodepth, pct,
                         args.verify_only, args.ioengine)


def checked_bytes(opts: VerifyOptions, rng: ActiveRange) -> int:
    """The bytes written and checked: the range in whole blocks."""
    return rng.size_bytes - rng.size_bytes % opts.block_bytes


def verify_cell(opts: VerifyOptions, rng: ActiveRange) -> CellSpec:
    """One thread writes the range once (and fio then reads it all back)."""
    size = checked_bytes(opts, rng)
    return CellSpec(
        name="verify",
        pattern=Pattern.RANDOM if opts.pattern == "random" else Pattern.SEQUENTIAL,
        block_bytes=opts.block_bytes,
        mix=Mix(0),
        threads=1,
        iodepth=opts.iodepth,
        offset_bytes=rng.offset_bytes,
        size_bytes=size,
        io_bytes=size,
    )


def verify_options(opts: VerifyOptions) -> tuple[tuple[str, str], ...]:
    """fio options that make the write job check its data (global section, after the
    defaults: a random write must not use ``norandommap``, or blocks would overlap)."""
    extra = [
        ("verify", opts.checksum),
        ("verify_interval", str(opts.interval_bytes)),
        ("do_verify", "1"),
        ("verify_fatal", "0"),
        ("continue_on_error", "verify"),
        ("verify_dump", "0"),
        ("verify_state_save", "0"),  # else fio leaves *.state files in the working dir
        ("norandommap", "0"),
        ("randrepeat", "1"),  # --verify-only must replay the same block order
    ]
    if opts.verify_only:
        extra.append(("verify_only", "1"))
    return tuple(extra)


# -- the suite ----------------------------------------------------------------------------

_G = "verify"
OPTIONS = (
    *common.device_target(),
    opt("--block-size", group=_G, config=Kind.SIZE, default="128", metavar="SIZE",
        help="write and read block size, KiB unless a unit is given (default 128)"),
    opt("--pattern", group=_G, config=Kind.TEXT, default="sequential", choices=PATTERNS,
        help="order of the writes (default sequential)"),
    opt("--checksum", group=_G, config=Kind.TEXT, default="crc32c", choices=CHECKSUMS,
        help="checksum fio stores and checks (default crc32c)"),
    opt("--interval", group=_G, config=Kind.SIZE, default="4", metavar="SIZE",
        help="bytes covered by each checksum, KiB unless a unit is given; the resolution of "
        "a reported location (default 4)"),
    common.qd(_G, "queue depth (default 16)", default=16),
    common.active_range(_G, "checked"),
    opt("--verify-only", group=_G, config=Kind.BOOL, action="store_true",
        help="only read and check what an earlier verify run with the same options wrote "
        "(no writes)"),
    common.ioengine(_G, "fio ioengine"),
)


@dataclass(frozen=True)
class CorruptRange(Record):
    """Adjacent failing intervals merged: a byte range of the target."""

    offset: int
    length: int


@dataclass(frozen=True)
class FailureRecord(Record):
    """One interval fio reported (engine.verifylog.VerifyFailure)."""

    offset: int
    length: int
    what: str  # "verify: bad magic header ac35, wanted acca", "crc32c: verify failed"
    file: str


@dataclass(frozen=True)
class VerifyResult(Record):
    """What was written, read back and checked, and every failure found (the first
    :data:`MAX_LISTED` listed); ``message`` when fio ran through, ``error`` when not."""

    OMIT_NONE = frozenset({"error", "message"})

    failures: int = 0
    corrupt_ranges: list[CorruptRange] = field(default_factory=list)
    listed: list[FailureRecord] = field(default_factory=list)
    written_bytes: int = 0
    read_bytes: int = 0
    checked_bytes: int = 0
    error: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class VerifyPlan(StoredPlan):
    """The stored plan: the arguments as given, the options, the test, the active range."""

    args: JsonObject = field(default_factory=dict)
    options: VerifyOptions | None = None
    tests: tuple[str, ...] = (TEST,)
    active_range: ByteRange = field(default_factory=ByteRange)


@dataclass(frozen=True)
class VerifyParams(TestParams):
    """The test's parameters: the options, and the range written and checked."""

    options: VerifyOptions | None = flat(default=None)
    range: ByteRange = field(default_factory=ByteRange)


@dataclass(frozen=True)
class VerifyCell(Record):
    """The round's one cell: what was written and read back, how many intervals failed."""

    cell: str = TEST
    block_bytes: int = 0
    read_pct: int = 0
    pattern: str = ""
    written_bytes: int = 0
    read_bytes: int = 0
    failures: int = 0


SPEC = SuiteSpec(
    name=SUITE,
    help="data integrity: write, read back and check every interval (fio verify)",
    description="""fio writes the active range with a checksum in every interval, reads it
    all back and checks it; every interval that comes back wrong is reported with its byte
    offset (silent corruption, misplaced or stale data). Exit status 1 when any corruption
    was found. docs/verify.md.""",
    target=TargetKind.DEVICE,
    options=OPTIONS,
    args_type=VerifyArgs,
    results={TEST: VerifyResult},
    report_title="data integrity report",
    params={TEST: VerifyParams}, plan_type=VerifyPlan, cells=VerifyCell,
    verdicts={"primary": Verdict},
    remote=True,
)


# -- what the plan says: dry run, the job, the stored plan, the test's parameters ----------


def job(opts: VerifyOptions, rng: ActiveRange, job_text: JobText) -> str:
    """The one fio job: write and verify (or only verify)."""
    what = "verify only" if opts.verify_only else "write and verify"
    return job_text((verify_cell(opts, rng),), what, verify_options(opts))


def describe(opts: VerifyOptions, rng: ActiveRange, path: str, job_text: JobText) -> str:
    """``--dry-run``: what will be checked, and the job file."""
    what = "Read and check" if opts.verify_only else "Write, read back and check"
    return (
        f"DRY RUN: nothing will be written. {what} {format_bytes(rng.size_bytes)} of {path} "
        f"in {opts.pattern} {format_bytes(opts.block_bytes)} blocks, {opts.checksum} every "
        f"{format_bytes(opts.interval_bytes)}\n{job(opts, rng, job_text)}"
    )


def plan_record(opts: VerifyOptions, args: VerifyArgs, rng: ActiveRange) -> VerifyPlan:
    return VerifyPlan(SUITE, dataclasses.asdict(args), opts, (TEST,),
                      ByteRange.of(rng))


def test_params(opts: VerifyOptions, rng: ActiveRange) -> VerifyParams:
    return VerifyParams("Data integrity", opts, ByteRange.of(rng))
