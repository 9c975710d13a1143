"""Validate what the user asked for into a frozen :class:`PtsOptions`, before any I/O.

Every failure is a one-line :class:`UserError` naming the bad value and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ssdlab.analysis.steady import RULES
from ssdlab.errors import UserError
from ssdlab.plan.pts import (
    IOPS_BLOCKS,
    IOPS_MIXES,
    LATENCY_BLOCKS,
    LATENCY_MIXES,
    TEST_NAMES,
    TRACKING_SETS,
    PtsOptions,
)
from ssdlab.plan.specs import KIB, Mix
from ssdlab.plan.units import parse_size


@dataclass(frozen=True)
class Profile:
    name: str
    cell_seconds: float
    max_rounds: int
    description: str


PROFILES = {
    "default": Profile("default", 60.0, 25, "SNIA PTS timing: 1-minute cells, at most 25 rounds"),
    "quick": Profile(
        "quick",
        0.5,
        8,
        "QUICK: 0.5-second cells, at most 8 rounds; for demos and tests, not a valid PTS result",
    ),
}
VARIANTS = ("snia", "reviews")
#: fio's time resolution is 1 ms; shorter cells than this measure only start-up
MIN_ROUND_SECONDS = 0.1
PURGE_METHODS = ("auto", "blkdiscard", "nvme-format", "nvme-sanitize", "none")
IOENGINES = ("libaio", "io_uring", "psync", "sync")

#: (threads, outstanding I/O per thread) per device class; threads are capped at the CPUs
DEFAULT_LOADS = {
    "nvme": (16, 8),  # the CD5/CM5-R review's 16 threads x QD 8
    "sata_ssd": (16, 8),  # the reviews' SATA/SAS setting
    "sas_ssd": (16, 8),
    "hdd": (1, 16),
    "virtual": (4, 16),
    "file": (4, 16),
}


@dataclass(frozen=True)
class PtsArgs:
    """Raw user input for a PTS run; None means "use the default"."""

    profile: str = "default"
    variant: str = "snia"
    tests: str | None = None
    rule: str | None = None
    tracking: str | None = None
    round_seconds: float | None = None
    max_rounds: int | None = None
    threads: int | None = None
    iodepth: int | None = None
    active_range_pct: float = 100.0
    block_sizes: str | None = None
    mixes: str | None = None
    latency_block_sizes: str | None = None
    latency_mixes: str | None = None
    purge: str = "auto"
    precondition: bool = True
    ioengine: str = "libaio"
    read_only: bool = False  # --read-only: only the 100/0 cells (see read_only_options)


def _choice(option: str, value: str, allowed: tuple[str, ...] | list[str]) -> str:
    if value not in allowed:
        raise UserError(f"{option} {value!r} is not one of: {', '.join(allowed)}")
    return value


def parse_tests(text: str | None) -> tuple[str, ...]:
    if text is None:
        return TEST_NAMES
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise UserError(f"--tests is empty; choose from: {', '.join(TEST_NAMES)}")
    for name in names:
        _choice("--tests entry", name, TEST_NAMES)
    if len(set(names)) != len(names):
        raise UserError(f"--tests {text!r} lists a test twice")
    return tuple(n for n in TEST_NAMES if n in names)


def parse_block_sizes(option: str, text: str) -> tuple[int, ...]:
    """``1024,128,4,0.5`` (KiB, as the SNIA tables) or with units: ``4k,512b``."""
    if not text.strip():
        raise UserError(f"{option} is empty; give block sizes in KiB, e.g. 4,64 or 4k,512b")
    sizes: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            size = parse_size(part, default_unit="kib")
        except ValueError as exc:
            raise UserError(f"{option}: {exc}") from None
        if size <= 0 or size % 512:
            raise UserError(f"{option}: {part!r} must be a positive multiple of 512 bytes")
        if size > 64 * 1024 * KIB:
            raise UserError(f"{option}: {part!r} is larger than 64 MiB")
        sizes.append(size)
    if len(set(sizes)) != len(sizes):
        raise UserError(f"{option}: {text!r} lists a block size twice")
    return tuple(sizes)


def parse_mixes(option: str, text: str) -> tuple[int, ...]:
    if not text.strip():
        raise UserError(f"{option} is empty; give read/write mixes, e.g. 100/0,65/35,0/100")
    mixes: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            mixes.append(Mix.parse(part).read_pct)
        except ValueError as exc:
            raise UserError(f"{option}: {exc}") from None
    if len(set(mixes)) != len(mixes):
        raise UserError(f"{option}: {text!r} lists a mix twice")
    return tuple(mixes)


def default_load(device_class: str, cpu_count: int) -> tuple[int, int]:
    """(threads, iodepth) for a device class, keeping the outstanding I/O when capping threads."""
    threads, depth = DEFAULT_LOADS.get(device_class, (4, 16))
    capped = max(1, min(threads, cpu_count))
    return capped, max(1, threads * depth // capped) if capped < threads else depth


def _positive(option: str, value: float | None, upper: float) -> None:
    if value is not None and not 0 < value <= upper:
        raise UserError(f"{option} {value:g} must be greater than 0 and at most {upper:g}")


def _check_numbers(args: PtsArgs) -> None:
    _positive("--round-seconds", args.round_seconds, 3600)
    _positive("--max-rounds", args.max_rounds, 1000)
    _positive("--threads", args.threads, 256)
    _positive("--qd", args.iodepth, 4096)
    _positive("--active-range", args.active_range_pct, 100)
    seconds = args.round_seconds
    if seconds is not None and (
        seconds < MIN_ROUND_SECONDS or abs(seconds * 1000 - round(seconds * 1000)) > 1e-6
    ):
        raise UserError(
            f"--round-seconds {seconds:g} must be at least {MIN_ROUND_SECONDS:g} and "
            "a whole number of milliseconds"
        )
    if args.max_rounds is not None and args.max_rounds != int(args.max_rounds):
        raise UserError(f"--max-rounds {args.max_rounds} must be a whole number")


def build_options(args: PtsArgs, device_class: str, cpu_count: int) -> PtsOptions:
    """Validate ``args`` for a target of ``device_class``; UserError on the first bad value."""
    profile = PROFILES[_choice("--profile", args.profile, list(PROFILES))]
    variant = _choice("--variant", args.variant, VARIANTS)
    rule = _choice(
        "--rule", args.rule or ("review" if variant == "reviews" else "snia"), list(RULES)
    )
    tracking = _choice("--tracking", args.tracking or "v2.0", TRACKING_SETS)
    _choice("--purge", args.purge, PURGE_METHODS)
    _choice("--ioengine", args.ioengine, IOENGINES)
    _check_numbers(args)
    max_rounds = args.max_rounds or profile.max_rounds
    window = RULES[rule].window
    if max_rounds < window:
        raise UserError(
            f"--max-rounds {max_rounds} is smaller than the {rule} rule's "
            f"{window}-round window; steady state could never be judged"
        )
    threads, iodepth = default_load(device_class, cpu_count)
    drop_half_k = variant == "reviews"
    iops_blocks = IOPS_BLOCKS[:-1] if drop_half_k else IOPS_BLOCKS
    lat_blocks = LATENCY_BLOCKS[:-1] if drop_half_k else LATENCY_BLOCKS
    options = PtsOptions(
        tests=parse_tests(args.tests),
        profile=profile.name,
        variant=variant,
        rule=rule,
        tracking=tracking,
        cell_seconds=args.round_seconds or profile.cell_seconds,
        max_rounds=int(max_rounds),
        threads=int(args.threads or threads),
        iodepth=int(args.iodepth or iodepth),
        active_range_pct=args.active_range_pct,
        iops_block_bytes=parse_block_sizes("--block-sizes", args.block_sizes)
        if args.block_sizes is not None
        else iops_blocks,
        iops_mixes=parse_mixes("--mixes", args.mixes) if args.mixes is not None else IOPS_MIXES,
        latency_block_bytes=parse_block_sizes("--latency-block-sizes", args.latency_block_sizes)
        if args.latency_block_sizes is not None
        else lat_blocks,
        latency_mixes=parse_mixes("--latency-mixes", args.latency_mixes)
        if args.latency_mixes is not None
        else LATENCY_MIXES[variant],
        purge=args.purge,
        precondition=args.precondition,
        ioengine=args.ioengine,
    )
    return read_only_options(args, options) if args.read_only else options


def read_only_options(args: PtsArgs, options: PtsOptions) -> PtsOptions:
    """--read-only: the 100/0 cells only, no purge, no preconditioning (docs/safety.md)."""
    if args.purge not in ("auto", "none"):
        raise UserError(f"--purge {args.purge} writes to the device; --read-only never purges")
    for option, given, mixes in (
        ("--mixes", args.mixes, options.iops_mixes),
        ("--latency-mixes", args.latency_mixes, options.latency_mixes),
    ):
        if given is not None and any(read_pct != 100 for read_pct in mixes):
            raise UserError(f"{option} {given} includes writes; --read-only runs only 100/0")
    return replace(options, iops_mixes=(100,), latency_mixes=(100,), purge="none",
                   precondition=False, read_only_target=True)
