"""The block-level review presets as suites: CrystalDiskMark-like (``cdm``), ATTO-like
(``atto``) and IOmeter-like (``iometer``).

The three are three suites (:data:`CDM`, :data:`ATTO`, :data:`IOMETER`: their options,
their arguments, their result record :class:`PresetResult`) that share one plan (its
definitions read and validated into a frozen plan: plan/preset_defs.py), one runner
(``run/block_preset_run.py``) and one pages module (``report/block_preset_pages.py``).
Here too: the records of what a run stores and what the plan says (its dry run, its
stored plan, the test's parameters). docs/presets-block.md describes the presets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar, cast

from ssdlab.analysis.block_presets import Entry
from ssdlab.jsonrecord import JsonObject, Record, flat, key
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.preset_defs import (
    PROFILES,
    AttoArgs,
    CdmArgs,
    IometerArgs,
    Measurement,
    PresetIdentity,
    PresetPlan,
)
from ssdlab.plan.results import FioCell, PreconditionStep, StoredPlan, TestParams, Verdict
from ssdlab.plan.specs import CellSpec
from ssdlab.plan.suite import Opt, SuiteSpec, TargetKind, opt
from ssdlab.units import format_bytes, format_duration

_A = TypeVar("_A", CdmArgs, AttoArgs, IometerArgs)


# --------------------------------------------------------------------------- the suites


def _set(group: str, help: str) -> Opt:
    return opt("--set", group=group, config=Kind.TEXT, help=help)


def _measure_seconds(group: str, help: str) -> Opt:
    return common.number("--measure-seconds", group, help, metavar="S", field="measure_s")


def _spec(name: str, help: str, description: str, size_help: str, args_type: type[_A],
          own: tuple[Opt, ...], *, report_title: str, local_only: str = ""
          ) -> SuiteSpec[_A]:
    """A preset's suite: the target, --profile and --ioengine, then its own options (its
    config keys, as ``--print-config`` lists them, end with --ioengine)."""
    options = (
        *common.preset_target(size_help),
        common.profile(name, PROFILES, "quick: a 16 MiB file, sub-second measurements, one "
                       "pass (marked QUICK everywhere); default: the preset's definition"),
        common.ioengine(name),
        *own,
    )
    return SuiteSpec(name=name, help=help, description=description,
                     target=TargetKind.DEVICE_OR_DIR, options=options, args_type=args_type,
                     results={name: PresetResult}, report_title=report_title,
                     params={name: PresetParams}, plan_type=PresetStoredPlan,
                     cells=PresetCell, verdicts={"primary": Verdict},
                     remote=not local_only, local_only=local_only,
                     details={"prefill": PrefillStep, "drop-caches": CachesDropped,
                              "cleanup": CleanupEvent},
                     config_first=("size", "store", "fio", "dir", "profile",
                                   *(o.key for o in own)),
                     quick_text="a 16 MiB file and short measurements, for demos and tests; "
                     "not the preset's definition")


@dataclass(frozen=True)
class FiguresRecord(Record):
    """The mean figures of a table entry over its passes (MB/s = 10^6 bytes/s)."""

    mb_per_s: float | None = None
    iops: float | None = None
    lat_mean_us: float | None = None


@dataclass(frozen=True)
class BestRecord(FiguresRecord):
    """The figures of a table entry's best pass (the highest MB/s), and which pass."""

    pass_no: int | None = key("pass", default=None)


@dataclass(frozen=True)
class RowRecord(Record):
    """One table entry: a CrystalDiskMark test and mode, an ATTO transfer size and
    direction, an IOmeter access spec."""

    group: str = ""
    mode: str = ""
    passes: int = 0
    best: BestRecord = field(default_factory=BestRecord)
    mean: FiguresRecord = field(default_factory=FiguresRecord)
    per_pass_mb_per_s: list[float | None] = field(default_factory=list)

    @classmethod
    def of(cls, e: Entry) -> RowRecord:
        best, mean = e.best, e.mean
        return cls(e.group, e.mode, e.passes,
                   BestRecord(best.mb_per_s, best.iops, best.lat_mean_us, e.best_pass),
                   FiguresRecord(mean.mb_per_s, mean.iops, mean.lat_mean_us),
                   list(e.per_pass_mb_per_s))


@dataclass(frozen=True)
class PresetResult(Record):
    """A preset's result: a row per table entry, the one-line message and the bytes
    written before measuring; a failed test has only its error (a running one nothing)."""

    OMIT_NONE = frozenset({"rows", "message", "prefilled_bytes", "error"})

    rows: list[RowRecord] | None = None
    message: str | None = None
    prefilled_bytes: int | None = None
    error: str | None = None



# --------------------------------------------------------------------------- what a run stores


@dataclass(frozen=True)
class PresetStoredPlan(StoredPlan):
    """A preset run's stored plan: the preset, the resolved options, its definitions
    (CrystalDiskMark's tests, IOmeter's access specs), the prefill and the --dir target's
    description (None on --target)."""

    identity: PresetIdentity = flat(default_factory=PresetIdentity)
    profile: str = ""
    options: JsonObject = field(default_factory=dict)
    definitions: JsonObject = field(default_factory=dict)
    tests: tuple[str, ...] = ()
    prefill: str = ""
    data_pattern: str = ""
    directory: JsonObject | None = None


@dataclass(frozen=True)
class PresetParams(TestParams):
    """The test's stored parameters: the preset, its resolved settings, the test file."""

    identity: PresetIdentity = flat(default_factory=PresetIdentity)
    profile: str = ""
    quick: bool = False
    settings: JsonObject = field(default_factory=dict)
    direct: bool = True
    ioengine: str = ""
    test_file: str = ""
    target_kind: str = ""
    size_bytes: int = 0
    measurements: int = 0


@dataclass(frozen=True)
class PresetCell(FioCell):
    """One measurement as fio measured it, and where it belongs in the preset's table;
    a buffered read says whether the caches were dropped before it, IOmeter's spec its
    IOPS timeline ([seconds, IOPS] points)."""

    OMIT_NONE = frozenset({"caches_dropped", "timeline"})

    group: str = ""
    mode: str = ""
    pass_no: int = key("pass", default=1)
    direct: bool = True
    caches_dropped: bool | None = None
    timeline: list[tuple[float, float]] | None = None


@dataclass(frozen=True)
class PrefillStep(PreconditionStep):
    """The test file written with data before measuring (a ``prefill`` step)."""

    direct: bool


@dataclass(frozen=True)
class CachesDropped(Record):
    """Sync and drop caches before a buffered read (targets/workdir.py ``drop_caches``):
    a ``drop-caches`` event."""

    OMIT_NONE = frozenset({"why"})

    synced: bool = False
    dropped: bool = False
    why: str | None = None


@dataclass(frozen=True)
class CleanupEvent(Record):
    """The --dir work directory removed after the run (a ``cleanup`` event)."""

    path: str = ""
    removed: bool = False


CDM = _spec(
    "cdm",
    help="CrystalDiskMark-like: SEQ1M Q8T1/Q1T1, RND4K Q32T1/Q1T1 read, write, mix; "
    "best and mean of the passes",
    description="""CrystalDiskMark's tests through fio: the test file is written with data
    first, then every test runs --passes times per mode (read, write, mix) with
    --interval-seconds idle between runs; MB/s (10^6 bytes), IOPS and mean latency; the best
    pass (as CrystalDiskMark shows it) and the mean. Direct I/O. docs/presets-block.md.""",
    size_help="test file size, 16 MiB to 64 GiB (default 1GiB; quick 16MiB); on a device, "
    "its first SIZE bytes",
    args_type=CdmArgs,
    report_title="CrystalDiskMark-like report",
    own=(
        _set("cdm", "the tests: default (SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1) "
             "or nvme (SEQ1M Q8T1, SEQ128K Q32T1, RND4K Q32T16, RND4K Q1T1); default: "
             "default"),
        opt("--modes", group="cdm", config=Kind.LIST, metavar="LIST",
            help="comma-separated: read, write, mix (default all three)"),
        common.whole("--mix-read-pct", "cdm", "read share of the mix mode in percent "
                     "(default 70)", metavar="PCT"),
        common.whole("--passes", "cdm", "passes per test and mode, 1 to 9 (default 3; quick 1)"),
        _measure_seconds("cdm", "seconds each pass measures (default 5; quick 0.5)"),
        common.number("--interval-seconds", "cdm", "idle seconds before each run, as "
                      "CrystalDiskMark's interval (default 5; quick 0)", metavar="S",
                      field="interval_s"),
    ),
)

ATTO = _spec(
    "atto",
    help="ATTO-like: sequential write and read MB/s and IOPS per transfer size, "
    "512 B to 64 MiB",
    description="""ATTO Disk Benchmark's sweep through fio: the test file is written with
    data first, then at every transfer size from --min-size to --max-size (x --factor) a
    sequential write and a sequential read at queue depth --qd. Direct I/O unless
    --no-direct (then buffered writes end with fsync, and caches are synced and dropped
    before each read, recorded). docs/presets-block.md.""",
    size_help="test file size, at least 16 MiB and the largest transfer (default 256MiB; "
    "quick 16MiB); on a device, its first SIZE bytes",
    args_type=AttoArgs,
    report_title="ATTO-like report",
    own=(
        opt("--min-size", group="atto", config=Kind.SIZE, metavar="SIZE",
            help="smallest transfer size, bytes unless a unit is given (default 512; "
            "quick 4KiB)"),
        opt("--max-size", group="atto", config=Kind.SIZE, metavar="SIZE",
            help="largest transfer size, bytes unless a unit is given (default 64MiB; "
            "quick 1MiB)"),
        common.whole("--factor", "atto",
                     "each transfer size is N times the previous (default 2; quick 4)"),
        common.qd("atto", "queue depth (default 4, ATTO's; the NAS review used 256)",
                  field="qd", auto=True,
                  auto_what="the jobs x QD of the 128 KiB sequential peak that"),
        _measure_seconds("atto", "seconds per transfer size and direction (default 2; "
                         "quick 0.5)"),
        opt("--no-direct", group="atto", config=Kind.BOOL, action="store_true",
            help="buffered I/O (through the page cache) instead of direct I/O"),
    ),
)

IOMETER = _spec(
    "iometer",
    help="IOmeter-like access specs: 1 worker, 32 outstanding I/O, IOPS per second",
    description="""IOmeter's access specifications through fio: the test region is written
    with data first, then each spec runs --seconds with one worker at --qd outstanding I/O,
    its IOPS logged every --log-interval ms (the per-second timeline). Sets: default (4, 8,
    64 KiB x random, sequential x read, write) and controller (256 KiB sequential, 4 KiB
    random x read, write, 50/50; meant for a raw volume). Direct I/O.
    docs/presets-block.md.""",
    size_help="test file (or device region) size, at least 16 MiB (default 1GiB; quick "
    "16MiB)",
    args_type=IometerArgs,
    report_title="IOmeter-like report",
    own=(
        _set("iometer", "access specs: default or controller (default: default)"),
        opt("--block-sizes", group="iometer", config=Kind.LIST, metavar="LIST",
            help="run only the specs of these transfer sizes, KiB unless a unit is given, "
            "e.g. 4,64 (default: every spec of the set)"),
        common.number("--seconds", "iometer", "seconds per access spec (default 30; quick 1)",
                      metavar="S"),
        common.qd("iometer", "outstanding I/O of the worker (default 32)", field="qd",
                  auto=True, auto_what="the jobs x QD of the 4 KiB random peak that"),
        common.whole("--log-interval", "iometer", "timeline resolution in ms (default 1000: "
                     "IOmeter's per-second results; quick 250)", metavar="MS",
                     field="log_interval_ms"),
    ),
)


# --------------------------------------------------------------------------- what the plan says

LOG_PLACEHOLDER = "LOGDIR/iops"
#: settings that are the preset's definitions (lists of tables), not options
DEFINITIONS = ("tests", "specs")

#: (cell, what it measures, the IOPS log's prefix or None, whether it writes) -> the
#: text of its fio job file
JobText = Callable[[CellSpec, str, str | None, bool], str]


def measure_job(plan: PresetPlan, m: Measurement, log_prefix: str | None,
                job: JobText) -> str:
    """The job file of one measurement (its IOPS logged to ``log_prefix`` if it logs)."""
    what = f"{m.group} {m.mode}" + (f" pass {m.pass_no}" if m.pass_no > 1 or
                                    plan.settings.get("passes", 1) != 1 else "")
    return job(m.cell, what, log_prefix if m.log_iops else None, m.cell.mix.read_pct < 100)


def describe(plan: PresetPlan, path: str, job: JobText) -> list[str]:
    """``--dry-run`` of the test file at ``path``: the settings, the prefill and every
    measurement with its job file."""
    io = "direct I/O" if plan.direct else "buffered I/O (sync and drop caches before reads)"
    lines = [
        f"test file {format_bytes(plan.size_bytes)} at {path}, {io}, ioengine {plan.ioengine}",
        "settings: " + ", ".join(f"{k} {v}" for k, v in plan.settings.items()
                                 if not isinstance(v, list)),
        f"{len(plan.measurements)} measurements, about "
        f"{format_duration(plan.measured_seconds)} of I/O and idle time",
        f"-- prefill: the test file is written once with data "
        f"({format_bytes(plan.prefill_block_bytes)} sequential writes):",
        job(plan.prefill_cell(), "prefill", None, True).rstrip(),
    ]
    for n, m in enumerate(plan.measurements, 1):
        extra = []
        if m.idle_before_s:
            extra.append(f"after {m.idle_before_s:g} s idle")
        if m.drop_caches_before:
            extra.append("after sync and drop_caches")
        lines.append(f"-- measurement {n}: {m.group} {m.mode}"
                     f"{' pass ' + str(m.pass_no) if m.pass_no > 1 else ''}"
                     f"{' (' + ', '.join(extra) + ')' if extra else ''}:")
        lines.append(measure_job(plan, m, LOG_PLACEHOLDER, job).rstrip())
    return lines


def plan_record(plan: PresetPlan, directory: Mapping[str, object] | None
                ) -> PresetStoredPlan:
    """The run's stored plan (``directory``: the --dir target's description, facts)."""
    return PresetStoredPlan(
        plan.preset, plan.identity, plan.profile,
        {**{k: v for k, v in plan.settings.items() if k not in DEFINITIONS},
         "direct": plan.direct, "ioengine": plan.ioengine, "quick": plan.quick},
        {k: v for k, v in plan.settings.items() if k in DEFINITIONS},
        (plan.preset,),
        f"{format_bytes(plan.size_bytes)} written sequentially in "
        f"{format_bytes(plan.prefill_block_bytes)} blocks before measuring",
        "fio default (random buffers)",
        None if directory is None else cast(JsonObject, dict(directory)))


def test_params(plan: PresetPlan, file_path: str, target_kind: str) -> PresetParams:
    """The test's stored parameters."""
    return PresetParams(plan.title, plan.identity, plan.profile, plan.quick, plan.settings,
                        plan.direct, plan.ioengine, file_path, target_kind, plan.size_bytes,
                        len(plan.measurements))
