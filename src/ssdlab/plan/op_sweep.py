"""The over-provisioning sweep (methodology 4) as data.

**OP here is the share of the capacity left unused** (the NAS review's meaning): at
``OP 20 %`` ssdlab writes only the first 80 % of the target (the active range) and never
touches the rest, which the purge has trimmed, so the drive can use it as spare. This is
*extra* OP on top of whatever the drive keeps for itself, and it is a share of the
capacity, not of the used part: 20 % unused is 25 % spare per byte used
(``op / (100 - op)``), the convention vendors use for "28 % OP".

For each setting: purge the WHOLE target (discard), precondition the active range only
(2x its size in 128 KiB sequential writes), then 4 KiB random writes on the active range
in rounds until steady state (SNIA rule by default). Pure: nothing here touches a device.

NVMe namespaces: a smaller namespace is the cleanest way to give a drive extra OP, but
creating one deletes every namespace's data and changes the drive's layout beyond the
test; ssdlab does not manage namespaces. It detects whether the drive could (``nvme
id-ctrl``: OACS bit 3, namespace management) and says so in the plan, and uses the active
range, which gives the same spare to the drive once the rest is trimmed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from ssdlab.analysis.steady import RULES, rule_by_name
from ssdlab.errors import UserError
from ssdlab.jsonrecord import Record
from ssdlab.plan import optionsets as common
from ssdlab.plan import specs
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.results import (
    ArgsPlan,
    FioCell,
    RoundParams,
    SteadyVerdict,
    TrackedVariable,
    Verdict,
    plan_head,
)
from ssdlab.plan.rounds import RoundTest, TrackingVar, wipc_cell
from ssdlab.plan.specs import KIB, CellSpec, JobText, Mix, Pattern
from ssdlab.plan.specs import PURGE_METHODS as ALL_PURGE_METHODS
from ssdlab.plan.suite import ProfiledArgs, ProfiledOptions, SuiteSpec, TargetKind, opt
from ssdlab.plan.values import choice, purge_and_engine
from ssdlab.units import format_bytes, format_duration

SUITE = TEST = "op-sweep"
BLOCK_BYTES = 4 * KIB
DEFAULT_OPS = (0.0, 7.0, 14.0, 20.0, 28.0, 40.0, 50.0, 60.0)
QUICK_OPS = (0.0, 20.0, 40.0)
MAX_OP = 90.0
#: the recommendation's threshold: % more IOPS per percentage point of capacity given up
MIN_GAIN_PCT = 1.0
#: whole-target purges only: the unused part must be trimmed to become spare
PURGE_METHODS = tuple(method for method in ALL_PURGE_METHODS if method != "none")
TRACKING_NAME = "IOPS 4 KiB random write"
#: NVMe Identify Controller, Optional Admin Command Support bit 3: namespace management
OACS_NS_MANAGEMENT = 1 << 3
DEFINITION = ("OP = share of the capacity left unused: the active range is the first "
              "(100 - OP) % of the target; the rest is trimmed by the purge and never written")


@dataclass(frozen=True)
class OpProfile:
    round_seconds: float
    max_rounds: int
    ops: tuple[float, ...]
    description: str


PROFILES = {
    "default": OpProfile(60.0, 25, DEFAULT_OPS,
                         "SNIA timing: 1-minute rounds, at most 25 per setting; OP 0, 7, 14, "
                         "20, 28, 40, 50, 60 %"),
    "quick": OpProfile(1.0, 10, QUICK_OPS,
                       "QUICK: 1-second rounds, at most 10 per setting; OP 0, 20, 40 %; for "
                       "demos and tests, not a valid PTS result"),
}


@dataclass(frozen=True)
class OpSweepArgs(ProfiledArgs):
    """Raw user input; None means "the profile's default"."""

    ops: str | None = None  # "0,20,40"
    round_seconds: float | None = None
    max_rounds: int | None = None
    rule: str = "snia"
    threads: int | None = None
    iodepth: int | None = None
    min_gain_pct: float = MIN_GAIN_PCT
    purge: str = "auto"
    ioengine: str = "libaio"


@dataclass(frozen=True)
class OpSetting:
    """One OP setting: the share left unused and the active range that is written."""

    op_pct: float
    range: specs.ActiveRange
    capacity_bytes: int

    @property
    def usable_fraction(self) -> float:
        return self.range.size_bytes / self.capacity_bytes

    @property
    def actual_op_pct(self) -> float:
        """The share actually left unused (the range is aligned down to 1 MiB)."""
        return (1 - self.usable_fraction) * 100

    @property
    def label(self) -> str:
        return f"OP {self.op_pct:g} %"

    @property
    def key(self) -> str:
        return f"op{self.op_pct:g}".replace(".", "_")


@dataclass(frozen=True)
class OpSweepOptions(ProfiledOptions):
    ops: tuple[float, ...]
    round_seconds: float
    max_rounds: int
    rule: str
    threads: int
    iodepth: int
    min_gain_pct: float
    purge: str
    ioengine: str
    block_bytes: int = BLOCK_BYTES


@dataclass(frozen=True)
class OpSweepPlan:
    options: OpSweepOptions
    capacity_bytes: int
    settings: tuple[OpSetting, ...]
    namespace_note: str

    def round_cell(self, setting: OpSetting) -> CellSpec:
        o = self.options
        return CellSpec(
            name=f"op_sweep_{setting.key}_rnd4k_write",
            pattern=Pattern.RANDOM,
            block_bytes=o.block_bytes,
            mix=Mix(0),
            threads=o.threads,
            iodepth=o.iodepth,
            offset_bytes=setting.range.offset_bytes,
            size_bytes=setting.range.size_bytes,
            runtime_s=o.round_seconds,
        )

    @staticmethod
    def precondition_cell(setting: OpSetting) -> CellSpec:
        return wipc_cell(setting.range)

    def tracking(self, setting: OpSetting) -> TrackingVar:
        return TrackingVar(TRACKING_NAME, self.round_cell(setting).name, "iops")


def parse_ops(text: str) -> tuple[float, ...]:
    """``"0,20,40"`` -> (0.0, 20.0, 40.0), sorted; UserError naming what is allowed."""
    values: list[float] = []
    for part in (p.strip().rstrip("%").strip() for p in text.split(",")):
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not 0 <= value <= MAX_OP:
            raise UserError(f"--op {text!r}: {part!r} is not a percentage from 0 to {MAX_OP:g} "
                            "(give a comma list, e.g. 0,20,40)")
        values.append(value)
    if len(set(values)) != len(values):
        raise UserError(f"--op {text!r} lists a setting twice")
    return tuple(sorted(values))


def _positive(option: str, value: float | None, upper: float, integer: bool = False) -> None:
    if value is None:
        return
    if not (math.isfinite(value) and 0 < value <= upper) or (integer and value != int(value)):
        kind = "a whole number" if integer else "a number"
        raise UserError(f"{option} {value:g}: give {kind} greater than 0 and at most {upper:g}")


def build_options(args: OpSweepArgs, default_load: tuple[int, int]) -> OpSweepOptions:
    """Validate ``args``; UserError (one line) on the first bad value. ``default_load`` is
    (threads, QD) for the device class (:func:`ssdlab.plan.optionsets.default_load`)."""
    choice("--profile", args.profile, tuple(PROFILES))
    choice("--rule", args.rule, tuple(RULES))
    purge_and_engine(args.purge, args.ioengine, PURGE_METHODS)
    prof = PROFILES[args.profile]
    _positive("--round-seconds", args.round_seconds, 3600)
    _positive("--max-rounds", args.max_rounds, 1000, integer=True)
    _positive("--threads", args.threads, 256, integer=True)
    _positive("--qd", args.iodepth, 4096, integer=True)
    _positive("--min-gain", args.min_gain_pct, 100)
    if args.round_seconds is not None and (
        args.round_seconds < 0.1 or abs(args.round_seconds * 1000 - round(args.round_seconds
                                                                          * 1000)) > 1e-6):
        raise UserError(f"--round-seconds {args.round_seconds:g}: give at least 0.1 and a "
                        "whole number of milliseconds")
    max_rounds = int(args.max_rounds or prof.max_rounds)
    window = RULES[args.rule].window
    if max_rounds < window:
        raise UserError(f"--max-rounds {max_rounds} is smaller than the {args.rule} rule's "
                        f"{window}-round window; steady state could never be judged")
    threads, iodepth = default_load
    return OpSweepOptions(
        profile=args.profile,
        ops=parse_ops(args.ops) if args.ops is not None else prof.ops,
        round_seconds=args.round_seconds or prof.round_seconds,
        max_rounds=max_rounds,
        rule=args.rule,
        threads=int(args.threads or threads),
        iodepth=int(args.iodepth or iodepth),
        min_gain_pct=args.min_gain_pct,
        purge=args.purge,
        ioengine=args.ioengine,
    )


def namespace_note(device_class: str, details: dict[str, object]) -> str:
    """What the plan says about NVMe namespaces (ssdlab never creates them)."""
    if device_class != "nvme":
        return (f"not an NVMe drive ({device_class}): OP is given by the active range; the rest "
                "of the target is trimmed by the purge and never written")
    ident = details.get("nvme_id_ctrl")
    oacs = ident.get("oacs") if isinstance(ident, dict) else None
    if not isinstance(oacs, int):
        return ("NVMe drive; whether it supports namespace management is unknown (no nvme "
                "id-ctrl data); ssdlab uses the active range")
    if oacs & OACS_NS_MANAGEMENT:
        return ("the drive supports namespace management (OACS bit 3): a smaller namespace "
                "would also give it extra OP, but ssdlab does not manage namespaces (creating "
                "one deletes every namespace's data); it uses the active range, with the rest "
                "trimmed by the purge")
    return ("the drive does not support namespace management (OACS bit 3 clear); ssdlab uses "
            "the active range, with the rest trimmed by the purge")


def build_plan(
    options: OpSweepOptions, capacity_bytes: int, min_range_bytes: int, note: str
) -> OpSweepPlan:
    """The settings in increasing OP; UserError when a range is too small to test."""
    settings = []
    for op in options.ops:
        rng = specs.active_range(capacity_bytes, 100.0 - op)
        if rng.size_bytes < min_range_bytes:
            largest = math.floor((1 - min_range_bytes / capacity_bytes) * 100)
            raise UserError(
                f"--op {op:g}: the active range would be {format_bytes(rng.size_bytes)}; "
                f"ssdlab needs at least {format_bytes(min_range_bytes)} (on this "
                f"{format_bytes(capacity_bytes)} target: at most {max(largest, 0)} % OP)")
        settings.append(OpSetting(op, rng, capacity_bytes))
    return OpSweepPlan(options, capacity_bytes, tuple(settings), note)


# -- the suite ----------------------------------------------------------------------------

_G = "op sweep"
OPTIONS = (
    *common.device_target(),
    common.profile(_G, tuple(PROFILES), "default: 60 s rounds, at most 25 per setting, OP "
                   "0,7,14,20,28,40,50,60 %%; quick: 1 s rounds, at most 10, OP 0,20,40 %% "
                   "(marked QUICK everywhere)"),
    opt("--op", group=_G, config=Kind.LIST, field="ops", metavar="LIST",
        help="OP settings in %% of the capacity left unused, comma list, 0 to "
        f"{MAX_OP:g}, e.g. 0,20,40 or one value (default: profile)"),
    common.number("--round-seconds", _G, "seconds per round (default: profile; 60, quick 1)",
                  metavar="S"),
    common.whole("--max-rounds", _G, "rounds per setting before giving up on steady state "
                 "(default: profile; 25, quick 10)"),
    opt("--rule", group=_G, config=Kind.TEXT, default="snia", choices=sorted(RULES),
        help="steady-state rule: snia (default; 5 rounds, excursion <= 20 %%, slope <= 10 "
        "%%) or review (4 rounds, line within 90-110 %%)"),
    common.threads(_G),
    common.qd(_G, "queue depth per job (default per device class)"),
    common.number("--min-gain", _G, "recommend a higher OP only if its IOPS gain at least "
                  "PCT %% per percentage point of capacity given up (default "
                  f"{MIN_GAIN_PCT:g})", metavar="PCT", field="min_gain_pct",
                  default=MIN_GAIN_PCT),
    common.purge(_G, "how the WHOLE target is purged before each setting (it must trim the "
                 f"unused part); {common.PURGE_AUTO_HELP}", choices=PURGE_METHODS),
    common.ioengine(_G),
)


# -- results ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PurgeRecord(Record):
    """How the whole target was purged before a setting (plan/results.py ``PurgeStep``)."""

    method: str = ""
    ok: bool = False
    seconds: float = 0.0
    command: list[str] | None = None
    detail: str = ""


@dataclass(frozen=True)
class SettingFailed(Record):
    """A setting that failed (the detail of its ``warning`` event): which."""

    op_pct: float


@dataclass(frozen=True)
class _Setting(Record):
    """What every setting's result starts with: which setting, and how it ended."""

    op_pct: float = 0.0
    label: str = ""
    usable_bytes: int = 0
    usable_fraction: float = 0.0
    actual_op_pct: float = 0.0
    status: str = ""  # steady | not_steady | failed
    steady: bool = False


@dataclass(frozen=True)
class MeasuredSetting(_Setting):
    """A setting that ran to steady state or to its last round: the averages over its
    measurement window (the last window when not steady)."""

    rounds: list[int] = field(default_factory=list)  # the run's rounds of this setting
    rounds_run: int = 0
    window_rounds: list[int] = field(default_factory=list)  # rounds of the setting
    iops: float | None = None
    iops_per_raw: float | None = None  # IOPS x usable share
    lat_mean_us: float | None = None
    lat_p99_us: float | None = None
    lat_p99_9_us: float | None = None
    lat_max_us: float | None = None
    bw_bytes_per_s: float | None = None
    verdict: SteadyVerdict | None = None  # the setting's steady-state verdict
    message: str = ""
    emulator_wa: float | None = None  # over the window, on the emulated SSD
    purge: PurgeRecord | None = None


@dataclass(frozen=True)
class FailedSetting(_Setting):
    """A setting in which fio failed: no IOPS."""

    status: Literal["failed"] = "failed"
    iops: float | None = None
    iops_per_raw: float | None = None
    error: str = ""
    emulator_wa: float | None = None


#: a failed setting is read as FailedSetting (its status says so), any other as measured
SettingRecord = FailedSetting | MeasuredSetting


@dataclass(frozen=True)
class StepRecord(Record):
    """One step of the recommendation rule (analysis.op_sweep.Step)."""

    from_op: float
    to_op: float
    gain_pct: float
    per_point_pct: float
    accepted: bool


@dataclass(frozen=True)
class RecommendationRecord(Record):
    op_pct: float | None = None
    iops: float | None = None
    min_gain_pct: float = MIN_GAIN_PCT
    best_iops_per_raw_op_pct: float | None = None
    message: str = ""
    steps: list[StepRecord] = field(default_factory=list)


@dataclass(frozen=True)
class SettingsSoFar(Record):
    """The sweep's result while it runs: the settings done so far."""

    settings: list[SettingRecord] = field(default_factory=list)


@dataclass(frozen=True)
class OpSweepResult(Record):
    """The sweep's result: every setting, the recommendation, the ground-truth check.
    While the sweep runs it holds only the settings done so far (:class:`SettingsSoFar`)."""

    settings: list[SettingRecord] = field(default_factory=list)
    recommendation: RecommendationRecord | None = None
    definition: str = ""
    ground_truth_order_agrees: bool | None = None
    steady: bool = False
    error: str | None = None  # "every OP setting failed"; stored as null otherwise


@dataclass(frozen=True)
class OpSettingRecord(Record):
    """An OP setting as planned: in the stored plan, and the detail of its ``op-setting``
    event when it starts."""

    op_pct: float = 0.0
    usable_bytes: int = 0
    actual_op_pct: float = 0.0


@dataclass(frozen=True)
class OpSweepStoredPlan(ArgsPlan):
    """The sweep's stored plan: what OP means here and the settings it runs."""

    tests: tuple[str, ...] = ()
    definition: str = ""
    op_method: str = ""
    namespaces: str = ""
    settings: list[OpSettingRecord] = field(default_factory=list)
    ioengine: str = ""
    direct: bool = True


@dataclass(frozen=True)
class OpSweepParams(RoundParams):
    """The sweep's parameters: the round tests' shared keys, then its own."""

    ops: list[float] = field(default_factory=list)
    min_gain_pct: float = 0.0
    definition: str = ""
    capacity_bytes: int = 0
    quick: bool = False


@dataclass(frozen=True)
class OpSweepCell(FioCell):
    """A round's cell: fio's, then its setting, its round in the setting and the emulated
    SSD's write counters after it (None off the emulator)."""

    op_pct: float = 0.0
    setting_round: int = 0
    emu_host_write_bytes: int | None = None
    emu_nand_write_bytes: int | None = None


SPEC = SuiteSpec(
    name=SUITE,
    quick_text=("1-second rounds at OP 0, 20 and 40 % "
                "only, for demos and tests; not a valid PTS result"),
    help="over-provisioning sweep: steady 4 KiB random-write IOPS at 0-60 %% OP and a "
    "recommendation (methodology 4)",
    description="""For each OP setting (the share of the capacity left unused): purge the
    whole target, precondition the active range (the rest stays trimmed), then 4 KiB random
    writes on it in rounds until steady state. Reports IOPS and IOPS x usable share per
    setting and recommends the OP with the best IOPS for the capacity given up. A single
    --op value runs one setting. docs/op-sweep.md.""",
    target=TargetKind.DEVICE,
    options=OPTIONS,
    args_type=OpSweepArgs,
    results={TEST: OpSweepResult}, report_title="over-provisioning sweep report",
    params={TEST: OpSweepParams}, plan_type=OpSweepStoredPlan, cells=OpSweepCell,
    verdicts={"primary": Verdict}, details={"op-setting": OpSettingRecord},
    remote=True,
)


# -- what the plan says: dry run, progress, the stored plan, the test's parameters ----------


def progress_tests(plan: OpSweepPlan) -> tuple[RoundTest, ...]:
    """The settings as the progress display counts them (one "test" each)."""
    return tuple(
        RoundTest(
            name=f"{TEST} {s.label}",
            title=f"Over-provisioning sweep, {s.label}",
            round_cells=(plan.round_cell(s),),
            tracking_sets=(("op", (plan.tracking(s),)),),
            primary_set="op",
            wipc=plan.precondition_cell(s),
            purge=True,
            skipped=(),
        )
        for s in plan.settings
    )


def describe_sweep(plan: OpSweepPlan, file_target: bool, round_s: float) -> list[str]:
    """``--dry-run``: what the sweep does with every setting (``round_s``: the expected
    wall time of one round)."""
    o = plan.options
    purge = "recreate the file" if file_target else o.purge
    rule = rule_by_name(o.rule)
    return [
        f"profile {o.profile}{' (QUICK)' if o.quick else ''}; {DEFINITION}",
        f"namespaces: {plan.namespace_note}",
        f"per setting: purge {purge} over the WHOLE target, precondition the active range "
        f"(2x, 128 KiB sequential), then rounds of {o.round_seconds:g} s of 4 KiB random "
        f"writes ({o.threads} threads x QD {o.iodepth}) on the active range until steady "
        f"state ({o.rule} rule, {rule.window}-round window, at most {o.max_rounds} rounds); "
        f"at least {format_duration(rule.window * round_s)} per setting plus preconditioning",
        f"recommendation: the largest OP whose steady IOPS gain at least {o.min_gain_pct:g} % "
        "per point of capacity given up over the previous choice (docs/op-sweep.md)",
    ]


def describe_settings(plan: OpSweepPlan, job_text: JobText) -> list[str]:
    """``--dry-run``: each setting's active range and job files."""
    lines: list[str] = []
    for s in plan.settings:
        lines += [
            "",
            f"== {s.label}: active range {format_bytes(s.range.size_bytes)} "
            f"({s.usable_fraction * 100:.1f} % usable, {s.actual_op_pct:.1f} % unused)",
            "-- preconditioning job file:",
            job_text((plan.precondition_cell(s),),
                     f"{TEST} {s.label} workload-independent preconditioning").rstrip(),
            "-- job file of every round:",
            job_text((plan.round_cell(s),), f"{TEST} {s.label} round N").rstrip(),
        ]
    return lines


def plan_record(plan: OpSweepPlan, args: OpSweepArgs) -> OpSweepStoredPlan:
    return OpSweepStoredPlan(
        SUITE, *plan_head(args, plan.options), (TEST,), DEFINITION, "active range",
        plan.namespace_note, [setting_record(s) for s in plan.settings],
        plan.options.ioengine, True)


def setting_record(s: OpSetting) -> OpSettingRecord:
    return OpSettingRecord(s.op_pct, s.range.size_bytes, s.actual_op_pct)


def test_params(plan: OpSweepPlan) -> OpSweepParams:
    o = plan.options
    first = plan.round_cell(plan.settings[0])
    return OpSweepParams(
        "Over-provisioning sweep", o.rule, rule_by_name(o.rule).window, o.max_rounds,
        TRACKING_NAME, {TRACKING_NAME: [TrackedVariable(TRACKING_NAME, "op_sweep_*", "iops")]},
        o.round_seconds, o.round_seconds,
        [{"cell": first.name, "block_bytes": first.block_bytes, "read_pct": 0,
          "pattern": str(first.pattern), "threads": first.threads, "iodepth": first.iodepth}],
        {"block_bytes": 128 * 1024, "factor": 2}, o.purge, list(o.ops), o.min_gain_pct,
        DEFINITION, plan.capacity_bytes, o.quick)
