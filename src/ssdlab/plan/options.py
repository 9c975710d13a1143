"""Validate what the user asked for into a frozen :class:`PtsOptions`, before any I/O.

Every failure is a one-line :class:`UserError` naming the bad value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ssdlab.analysis.steady import RULES
from ssdlab.errors import UserError
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.pts import (
    IOPS_BLOCKS,
    IOPS_MIXES,
    LATENCY_BLOCKS,
    LATENCY_MIXES,
    TEST_NAMES,
    TRACKING_SETS,
    PtsOptions,
    PtsResult,
)
from ssdlab.plan.specs import IOENGINES as IOENGINES  # re-exported: older imports
from ssdlab.plan.specs import KIB, Mix
from ssdlab.plan.specs import PURGE_METHODS as PURGE_METHODS
from ssdlab.plan.suite import SuiteSpec, TargetKind, opt
from ssdlab.units import parse_size


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
    threads: int | str | None = None  # "auto": resolved by the run (run/peak_load.py)
    iodepth: int | str | None = None
    active_range_pct: float = 100.0
    block_sizes: str | None = None
    mixes: str | None = None
    latency_block_sizes: str | None = None
    latency_mixes: str | None = None
    purge: str = "auto"
    precondition: bool = True
    ioengine: str = "libaio"
    read_only: bool = False  # --read-only: only the 100/0 cells (see read_only_options)
    predict: bool = False  # --predict: stop at a predicted steady state (docs/pts.md)


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
    def block_size(part: str) -> int:
        size = parse_size(part, default_unit="kib")
        if size <= 0 or size % 512:
            raise UserError(f"{option}: {part!r} must be a positive multiple of 512 bytes")
        if size > 64 * 1024 * KIB:
            raise UserError(f"{option}: {part!r} is larger than 64 MiB")
        return size
    return _parse_list(option, text, block_size, "block size",
                       "block sizes in KiB, e.g. 4,64 or 4k,512b")


def parse_mixes(option: str, text: str) -> tuple[int, ...]:
    return _parse_list(option, text, lambda part: Mix.parse(part).read_pct, "mix",
                       "read/write mixes, e.g. 100/0,65/35,0/100")


def _parse_list(option: str, text: str, parse: Callable[[str], int], item: str,
                example: str) -> tuple[int, ...]:
    """A comma list, each entry read by ``parse`` (its ValueError names ``option``), no
    ``item`` twice; an empty one asks for ``example``."""
    if not text.strip():
        raise UserError(f"{option} is empty; give {example}")
    values: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            values.append(parse(part))
        except ValueError as exc:
            raise UserError(f"{option}: {exc}") from None
    if len(set(values)) != len(values):
        raise UserError(f"{option}: {text!r} lists a {item} twice")
    return tuple(values)


def default_load(device_class: str, cpu_count: int) -> tuple[int, int]:
    """(threads, iodepth) for a device class, keeping the outstanding I/O when capping threads."""
    threads, depth = DEFAULT_LOADS.get(device_class, (4, 16))
    capped = max(1, min(threads, cpu_count))
    return capped, max(1, threads * depth // capped) if capped < threads else depth


def _positive(option: str, value: float | None, upper: float) -> None:
    if value is not None and not 0 < value <= upper:
        raise UserError(f"{option} {value:g} must be greater than 0 and at most {upper:g}")


def _load_number(option: str, value: int | str | None) -> int | None:
    """--threads/--qd once ``auto`` was resolved (run/peak_load.py) or as given."""
    if isinstance(value, str):
        raise UserError(f"{option} {value}: give a whole number (auto is resolved from a "
                        "peak run when a run is prepared)")
    return value


def _check_numbers(args: PtsArgs) -> None:
    _positive("--round-seconds", args.round_seconds, 3600)
    _positive("--max-rounds", args.max_rounds, 1000)
    _positive("--threads", _load_number("--threads", args.threads), 256)
    _positive("--qd", _load_number("--qd", args.iodepth), 4096)
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
        predict=args.predict,
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


# -- the suite ----------------------------------------------------------------------------

_G = "tests"
OPTIONS = (
    *common.device_target(),
    common.profile(_G, tuple(PROFILES), "default: 60 s per cell, at most 25 rounds; quick: "
                   "0.5 s per cell, at most 8 rounds (marked QUICK everywhere)"),
    opt("--variant", group=_G, config=Kind.TEXT, default="snia", choices=VARIANTS,
        help="snia (default) or reviews: the reviews' 4-round 90-110%% rule, no 0.5 KiB "
        "cells, 70/30 instead of 65/35 in the latency test"),
    opt("--tests", group=_G, config=Kind.LIST, metavar="LIST",
        help=f"comma list of {', '.join(TEST_NAMES)} (default: all)"),
    opt("--rule", group=_G, config=Kind.TEXT, choices=["snia", "review"],
        help="steady-state rule (default: snia; reviews variant: review)"),
    opt("--tracking", group=_G, config=Kind.TEXT, choices=TRACKING_SETS,
        help="IOPS stopping variables: v1.1 = 4 KiB 0/100; v2.0 (default) = 4 KiB 0/100, "
        "64 KiB 65/35 and 1024 KiB 100/0; both verdicts are recorded"),
    opt("--predict", group=_G, config=Kind.BOOL, action="store_true",
        help="stop a test early once every tracking variable's steady state is predicted "
        "within +-5 %% at 95 %% confidence (a fitted settling curve): labelled a predicted "
        "steady state, not a SNIA steady state; `ssdlab resume` continues it to the SNIA "
        "rule (docs/pts.md)"),
    common.number("--round-seconds", _G, "seconds each cell runs per round (default: profile)",
                  metavar="S"),
    common.whole("--max-rounds", _G, "rounds before giving up on steady state (default: "
                 "profile)"),
    common.threads(_G, "fio jobs per cell for IOPS and throughput (default per device "
                   "class, capped at the CPU count)", auto=True),
    common.qd(_G, "queue depth per thread", auto=True),
    common.active_range(_G),
    opt("--block-sizes", group=_G, config=Kind.LIST, metavar="LIST",
        help="IOPS block sizes in KiB, e.g. 1024,128,4,0.5 (default: the 8 SNIA sizes)"),
    opt("--mixes", group=_G, config=Kind.LIST, metavar="LIST",
        help="IOPS read/write mixes, e.g. 100/0,65/35,0/100 (default: the 7 SNIA mixes)"),
    opt("--latency-block-sizes", group=_G, config=Kind.LIST, metavar="LIST",
        help="latency block sizes in KiB"),
    opt("--latency-mixes", group=_G, config=Kind.LIST, metavar="LIST", help="latency mixes"),
    common.purge(_G, common.PURGE_AUTO_HELP),
    common.no_precondition(_G),
    common.ioengine(_G, "fio ioengine"),
    opt("--read-only", group=_G, action="store_true",
        help="run only the read cells (IOPS and latency at 100/0, sequential read "
        "throughput) with fio --readonly: no purge, no preconditioning, no --destroy-data "
        "needed; the device may carry a filesystem but must not be mounted (docs/safety.md)"),
)

SPEC = SuiteSpec(
    name="pts",
    quick_text="shortened rounds, for demos and tests; not a valid PTS result",
    help="SNIA PTS IOPS, throughput and latency tests (methodology 1.1-1.5)",
    description="""The SNIA PTS IOPS (7 mixes x 8 block sizes), throughput (128 KiB and 1024
    KiB sequential) and latency (QD 1) tests, each from purge and 2x-capacity
    preconditioning, in rounds until steady state (docs/pts.md).""",
    target=TargetKind.DEVICE,
    options=OPTIONS,
    args_type=PtsArgs,
    results={name: PtsResult for name in TEST_NAMES},
    resumable=True,
    # --print-config lists the settings in this order (as before the suite contract)
    config_first=("size", "store", "fio", "profile", "variant", "tests", "rule", "tracking",
                  "round-seconds", "max-rounds", "threads", "qd", "active-range",
                  "block-sizes", "mixes", "latency-block-sizes", "latency-mixes", "purge",
                  "ioengine"),
)
