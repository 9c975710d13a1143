"""The data-integrity check (``ssdlab run verify``) as data.

fio writes the active range with a checksum in every ``interval`` bytes (a header with
the offset, a sequence number and the checksum of the data), then reads it all back and
checks every interval: data that comes back different (silently corrupted, misplaced,
stale) is caught and located to the interval. ``continue_on_error=verify`` makes fio
report every failing interval instead of stopping at the first. ``--verify-only`` reads
and checks data a previous ``verify`` run with the same settings wrote (no writes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ssdlab.errors import UserError
from ssdlab.plan.pts import ActiveRange
from ssdlab.plan.specs import CellSpec, Mix, Pattern
from ssdlab.plan.units import parse_size

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
class VerifyOptions:
    block_bytes: int
    pattern: str
    checksum: str
    interval_bytes: int
    iodepth: int
    active_range_pct: float
    verify_only: bool
    ioengine: str

    @property
    def quick(self) -> bool:
        return False


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


def verify_cell(opts: VerifyOptions, rng: ActiveRange) -> CellSpec:
    """One thread writes the range once (and fio then reads it all back)."""
    size = rng.size_bytes - rng.size_bytes % opts.block_bytes
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

