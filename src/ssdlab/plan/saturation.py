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

from ssdlab.errors import UserError
from ssdlab.plan.pts import ActiveRange
from ssdlab.plan.specs import KIB, CellSpec, Mix, Pattern

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
        60.0, 360, 4.0, 6.0, 1000, 5.0, 360, 360, 1.0,
        "SNIA timing: 1-minute rounds, at most 360 rounds (6 h) or 4x the capacity "
        "written; HIR with 360 bursts of 5 s per wait state",
    ),
    "quick": SaturationProfile(
        1.0, 60, 4.0, 0.5, 100, 1.0, 4, 4, 0.2,
        "QUICK: 1-second rounds, at most 60; HIR with 4 bursts of 1 s per wait state and "
        "waits scaled to a fifth; for demos and tests, not a valid PTS result",
    ),
}


@dataclass(frozen=True)
class SaturationArgs:
    """Raw user input; None means "use the profile's default"."""

    profile: str = "default"
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
class SaturationOptions:
    profile: str
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
    def quick(self) -> bool:
        return self.profile == "quick"

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
