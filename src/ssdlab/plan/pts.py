"""The SNIA PTS suite (device-level tests, methodology 1.1-1.5): its spec, the options
validated into a frozen :class:`PtsOptions` before any I/O (every failure a one-line
:class:`UserError` naming the bad value and what is allowed), and the tests as data.

``build_pts_tests`` turns validated :class:`PtsOptions` and the target's size into
the cells of one round of each test, the workload-independent preconditioning and
the steady-state tracking variables. Pure: nothing here touches a device.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ssdlab.analysis.steady import RULES, rule_by_name
from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.results import (
    CellData,
    FioCell,
    RoundParams,
    SkippedCell,
    SteadyVerdict,
    StoredPlan,
    TrackedVariable,
    options_json,
)
from ssdlab.plan.rounds import RoundTest, TrackingVar, wipc_cell
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
    cell_name,
    sector_blocks,
)
from ssdlab.plan.suite import Profiled, ProfiledArgs, SuiteSpec, TargetKind, opt
from ssdlab.plan.values import choice, parse_block_sizes, parse_mixes, purge_and_engine
from ssdlab.units import format_duration

IOPS_BLOCKS = (1024 * KIB, 128 * KIB, 64 * KIB, 32 * KIB, 16 * KIB, 8 * KIB, 4 * KIB, 512)
IOPS_MIXES = (100, 95, 65, 50, 35, 5, 0)
THROUGHPUT_BLOCKS = (1024 * KIB, 128 * KIB)
LATENCY_BLOCKS = (8 * KIB, 4 * KIB, 512)
LATENCY_MIXES = {"snia": (100, 65, 0), "reviews": (100, 70, 0)}
TEST_NAMES = ("iops", "throughput", "latency")
TRACKING_SETS = ("v1.1", "v2.0")


@dataclass(frozen=True)
class PtsOptions(Profiled):
    """Everything a PTS run was asked for, validated (``build_options``)."""

    tests: tuple[str, ...]
    profile: str
    variant: str  # "snia" | "reviews"
    rule: str  # steady-state rule name: "snia" | "review"
    tracking: str  # IOPS test stopping set: "v1.1" | "v2.0"
    cell_seconds: float
    max_rounds: int
    threads: int
    iodepth: int
    active_range_pct: float
    iops_block_bytes: tuple[int, ...]
    iops_mixes: tuple[int, ...]
    latency_block_bytes: tuple[int, ...]
    latency_mixes: tuple[int, ...]
    purge: str
    precondition: bool
    ioengine: str
    #: --read-only: 100/0 cells only, no purge or preconditioning, fio --readonly
    read_only_target: bool = False
    #: --predict: stop once the steady state is predicted (analysis/predict.py)
    predict: bool = False
    #: --threads/--qd auto: the throughput tests' own load (None: ``threads``/``iodepth``)
    throughput_threads: int | None = None
    throughput_iodepth: int | None = None
    #: --threads/--qd auto: which peak run the load came from ("": given or the default)
    load_source: str = ""


def _cell(
    test: str,
    pattern: Pattern,
    block: int,
    read_pct: int,
    threads: int,
    iodepth: int,
    rng: ActiveRange,
    seconds: float,
) -> CellSpec:
    return CellSpec(
        name=cell_name(test, block, read_pct),
        pattern=pattern,
        block_bytes=block,
        mix=Mix(read_pct),
        threads=threads,
        iodepth=iodepth,
        offset_bytes=rng.offset_bytes,
        size_bytes=rng.size_bytes,
        runtime_s=seconds,
    )


def _iops_tracking(cells: tuple[CellSpec, ...]) -> tuple[tuple[str, tuple[TrackingVar, ...]], ...]:
    names = {c.name for c in cells}
    wanted = {
        "v1.1": ((4 * KIB, 0),),
        "v2.0": ((4 * KIB, 0), (64 * KIB, 65), (1024 * KIB, 100)),
    }
    sets = []
    for set_name, keys in wanted.items():
        chosen = tuple(
            TrackingVar(f"IOPS {cell_label(b, m)}", cell_name("iops", b, m), "iops")
            for b, m in keys
            if cell_name("iops", b, m) in names
        )
        if not chosen:  # the standard cells were not selected: every cell must settle
            chosen = tuple(
                TrackingVar(f"IOPS {cell_label(c.block_bytes, c.mix.read_pct)}", c.name, "iops")
                for c in cells
            )
        sets.append((set_name, chosen))
    return tuple(sets)


def iops_test(opts: PtsOptions, rng: ActiveRange, logical_sector: int) -> RoundTest:
    blocks, skipped = sector_blocks(opts.iops_block_bytes, opts.iops_mixes, logical_sector)
    cells = tuple(
        _cell("iops", Pattern.RANDOM, b, m, opts.threads, opts.iodepth, rng, opts.cell_seconds)
        for m in opts.iops_mixes
        for b in blocks
    )
    return RoundTest(
        "iops",
        "IOPS",
        cells,
        _iops_tracking(cells),
        opts.tracking,
        wipc_cell(rng) if opts.precondition else None,
        True,
        skipped,
    )


def throughput_test(opts: PtsOptions, rng: ActiveRange, block: int) -> RoundTest:
    name = f"throughput-{block // KIB}k"
    cells = tuple(
        _cell(
            name, Pattern.SEQUENTIAL, block, m, opts.throughput_threads or opts.threads,
            opts.throughput_iodepth or opts.iodepth, rng, opts.cell_seconds
        )
        for m in ((100,) if opts.read_only_target else (100, 0))
    )
    read = TrackingVar(f"read bandwidth {block_label(block)}", cells[0].name, "bw_bytes_per_s")
    sets: tuple[tuple[str, tuple[TrackingVar, ...]], ...] = (("v1.1", (read,)), ("v2.0", (read,)))
    if not opts.read_only_target:
        write = TrackingVar(
            f"write bandwidth {block_label(block)}", cells[1].name, "bw_bytes_per_s"
        )
        sets = (("v1.1", (write,)), ("v2.0", (write, read)))
    return RoundTest(
        name,
        f"Throughput {block_label(block)}",
        cells,
        sets,
        opts.tracking,
        wipc_cell(rng) if opts.precondition else None,
        True,
        (),
    )


def latency_test(opts: PtsOptions, rng: ActiveRange, logical_sector: int) -> RoundTest:
    blocks, skipped = sector_blocks(opts.latency_block_bytes, opts.latency_mixes,
                                    logical_sector)
    cells = tuple(
        _cell("latency", Pattern.RANDOM, b, m, 1, 1, rng, opts.cell_seconds)
        for m in opts.latency_mixes
        for b in blocks
    )
    names = {c.name for c in cells}
    standard = cell_name("latency", 4 * KIB, 0)
    track_cells = [c for c in cells if c.name == standard] or list(cells)
    tracking = tuple(
        TrackingVar(
            f"mean latency {cell_label(c.block_bytes, c.mix.read_pct)}", c.name, "lat_mean_us"
        )
        for c in track_cells
    )
    assert all(t.cell in names for t in tracking)
    sets = (("v1.1", tracking), ("v2.0", tracking))
    return RoundTest(
        "latency",
        "Latency",
        cells,
        sets,
        opts.tracking,
        wipc_cell(rng) if opts.precondition else None,
        True,
        skipped,
    )


def build_pts_tests(
    opts: PtsOptions, capacity_bytes: int, logical_sector: int
) -> tuple[RoundTest, ...]:
    """The tests of a PTS run in order: IOPS, throughput (1024 then 128 KiB), latency."""
    rng = active_range(capacity_bytes, opts.active_range_pct)
    tests: list[RoundTest] = []
    if "iops" in opts.tests:
        tests.append(iops_test(opts, rng, logical_sector))
    if "throughput" in opts.tests:
        tests += [throughput_test(opts, rng, block) for block in THROUGHPUT_BLOCKS]
    if "latency" in opts.tests:
        tests.append(latency_test(opts, rng, logical_sector))
    return tuple(tests)


# -- results --------------------------------------------------------------------------------

@dataclass(frozen=True)
class PredictedVariable(Record):
    """One tracking variable's prediction (``--predict``; analysis/predict.py)."""

    variable: str = ""
    model: str = ""  # "exponential" | "constant" | "none"
    value: float | None = None  # the predicted SNIA window's average, the variable's unit
    half_width: float | None = None  # of its 95 % interval, the variable's unit
    half_width_pct: float | None = None
    plateau: float | None = None  # the fitted asymptote, for information
    rate: float | None = None  # per round
    known: bool = False
    why: str = ""


@dataclass(frozen=True)
class PtsPrediction(Record):
    """What ``--predict`` stopped on: NOT a SNIA steady state (``label`` says so)."""

    label: str = ""
    rule: str = ""
    rounds_seen: int = 0
    window_rounds: list[int] = field(default_factory=list)  # the window predicted to pass
    message: str = ""
    variables: list[PredictedVariable] = field(default_factory=list)


@dataclass(frozen=True)
class PtsResult(Record):
    """A PTS test's result: the measurement window's cells and how steady state went."""

    OMIT_NONE = frozenset({"error", "prediction"})

    steady: bool = False
    window_rounds: list[int] = field(default_factory=list)
    rounds_run: int = 0
    tracking_set: str = ""
    cells: list[CellData] = field(default_factory=list)
    skipped: list[SkippedCell] = field(default_factory=list)
    error: str | None = None
    #: --predict stopped the test (status "predicted"); ``steady`` stays the SNIA verdict
    prediction: PtsPrediction | None = None


def skipped_records(test: RoundTest) -> list[SkippedCell]:
    return [SkippedCell(c, r) for c, r in test.skipped]


# -- what the plan says: dry run, the stored plan, a test's parameters ---------------------


def describe_settings(opts: PtsOptions) -> str:
    return (f"profile {opts.profile}{' (QUICK)' if opts.quick else ''}, variant {opts.variant}, "
            f"rule {opts.rule}, tracking {opts.tracking}, at most {opts.max_rounds} rounds, "
            f"{opts.threads} threads x QD {opts.iodepth}" + (
                f" (throughput tests {opts.throughput_threads or opts.threads} threads x QD "
                f"{opts.throughput_iodepth or opts.iodepth})"
                if opts.throughput_threads or opts.throughput_iodepth else "")
            + (f"; {opts.load_source}" if opts.load_source else "")
            + (", --predict: stops at a predicted steady state (not a SNIA steady state)"
               if opts.predict else ""))


def describe_tests(opts: PtsOptions, tests: tuple[RoundTest, ...], file_target: bool,
                   job_text: JobText) -> list[str]:
    """``--dry-run``: every test, its purge, and its job files."""
    out: list[str] = []
    for test in tests:
        out += ["", f"== {test.name}: {len(test.round_cells)} cells, "
                f"{format_duration(test.round_seconds)} per round"]
        purge = opts.purge if test.purge else "none"
        if file_target and purge != "none":
            purge = "recreate the file"
        out.append(f"purge: {purge}")
        out += [f"skipped {label}: {reason}" for label, reason in test.skipped]
        if test.wipc is not None:
            out += ["-- preconditioning job file:",
                    job_text((test.wipc,), f"{test.name} workload-independent "
                             "preconditioning").rstrip()]
        out += ["-- job file of every round:",
                job_text(test.round_cells, f"{test.name} round N").rstrip()]
    return out


@dataclass(frozen=True)
class PtsParams(RoundParams):
    """A PTS test's parameters as stored: the round tests' shared keys, then its own."""

    skipped: list[SkippedCell] = field(default_factory=list)
    quick: bool = False


@dataclass(frozen=True)
class PtsPlan(StoredPlan):
    """A PTS run's stored plan (it has no ``args``: resume rebuilds them from options)."""

    options: JsonObject = field(default_factory=dict)
    tests: tuple[str, ...] = ()
    ioengine: str = ""
    direct: bool = True
    data_pattern: str = ""
    latency: str = ""


def test_params(test: RoundTest, opts: PtsOptions) -> PtsParams:
    return PtsParams(
        test.title, opts.rule, rule_by_name(opts.rule).window, opts.max_rounds,
        test.primary_set,
        {name: [TrackedVariable(v.name, v.cell, v.metric) for v in vs]
         for name, vs in test.tracking_sets},
        opts.cell_seconds, test.round_seconds, [cell_dict(c) for c in test.round_cells],
        None if test.wipc is None else cell_dict(test.wipc),
        opts.purge if test.purge else "none", skipped_records(test), opts.quick)


def plan_record(opts: PtsOptions, tests: tuple[RoundTest, ...]) -> PtsPlan:
    return PtsPlan("pts", options_json(opts), tuple(t.name for t in tests), opts.ioengine, True,
                   "fio default (random, scrambled per I/O)",
                   "fio completion latency (clat); mixed-cell percentiles from merged "
                   "json+ histograms")


# -- the options as given, validated ----------------------------------------------------


@dataclass(frozen=True)
class Profile:
    """A timing profile: seconds per cell, the most rounds, and what it is for."""

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


@dataclass(frozen=True)
class PtsArgs(ProfiledArgs):
    """Raw user input for a PTS run; None means "use the default"."""

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


def parse_tests(text: str | None) -> tuple[str, ...]:
    if text is None:
        return TEST_NAMES
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise UserError(f"--tests is empty; choose from: {', '.join(TEST_NAMES)}")
    for name in names:
        choice("--tests entry", name, TEST_NAMES)
    if len(set(names)) != len(names):
        raise UserError(f"--tests {text!r} lists a test twice")
    return tuple(n for n in TEST_NAMES if n in names)


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
    profile = PROFILES[choice("--profile", args.profile, list(PROFILES))]
    variant = choice("--variant", args.variant, VARIANTS)
    rule = choice(
        "--rule", args.rule or ("review" if variant == "reviews" else "snia"), list(RULES)
    )
    tracking = choice("--tracking", args.tracking or "v2.0", TRACKING_SETS)
    purge_and_engine(args.purge, args.ioengine)
    _check_numbers(args)
    max_rounds = args.max_rounds or profile.max_rounds
    window = RULES[rule].window
    if max_rounds < window:
        raise UserError(
            f"--max-rounds {max_rounds} is smaller than the {rule} rule's "
            f"{window}-round window; steady state could never be judged"
        )
    threads, iodepth = common.default_load(device_class, cpu_count)
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
    report_title="SNIA PTS report",
    remote=True,
    demo_args=PtsArgs(profile="quick"),
    resumable=True,
    # --print-config lists the settings in this order (as before the suite contract)
    config_first=("size", "store", "fio", "profile", "variant", "tests", "rule", "tracking",
                  "round-seconds", "max-rounds", "threads", "qd", "active-range",
                  "block-sizes", "mixes", "latency-block-sizes", "latency-mixes", "purge",
                  "ioengine"),
    params={"*": PtsParams}, plan_type=PtsPlan, cells=FioCell, verdicts={"*": SteadyVerdict},
)
