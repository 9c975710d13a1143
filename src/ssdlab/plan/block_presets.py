"""The block-level review presets as plans: CrystalDiskMark-like (``cdm``), ATTO-like
(``atto``) and IOmeter-like (``iometer``).

Each preset's definition is data (``presets/data/<name>.toml``); this module reads it,
merges the user's options (command line > quick profile > preset defaults), validates
everything into a frozen :class:`PresetPlan` and lays out its measurements: one fio
invocation each, in the order they run. Pure: no I/O besides reading the package data.
docs/presets-block.md describes the presets.

The three are three suites (:data:`CDM`, :data:`ATTO`, :data:`IOMETER`: their options,
their arguments, their result record :class:`PresetResult`) that share this plan, one
runner (``run/block_preset_run.py``) and one pages module
(``report/block_preset_pages.py``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ssdlab import presets
from ssdlab.analysis.block_presets import Entry
from ssdlab.errors import UserError
from ssdlab.jsonrecord import Record, key
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.specs import CellSpec, Mix, Pattern
from ssdlab.plan.suite import Opt, Profiled, SuiteSpec, TargetKind, opt
from ssdlab.units import format_bytes, format_duration, parse_size

PROFILES = ("default", "quick")
CDM_MODES = ("read", "write", "mix")
MAX_THREADS = 64
MAX_QD = 1024
MAX_SECONDS = 3600.0


@dataclass(frozen=True)
class Measurement:
    """One measured fio run: a cell plus where it belongs in the preset's table."""

    group: str  # CDM test label, ATTO transfer size, IOmeter access spec
    mode: str  # read | write | mix
    pass_no: int
    cell: CellSpec
    idle_before_s: float = 0.0  # CrystalDiskMark's interval: idle before this run
    drop_caches_before: bool = False  # buffered I/O: sync and drop caches before a read
    log_iops: bool = False  # IOmeter: per-interval IOPS log


@dataclass(frozen=True)
class PresetPlan(Profiled):
    """Everything one preset run will do, validated."""

    preset: str
    version: int
    title: str
    profile: str
    size_bytes: int  # the test file (or the region of the device from offset 0)
    direct: bool
    ioengine: str
    prefill_block_bytes: int
    measurements: tuple[Measurement, ...]
    settings: dict[str, Any] = field(default_factory=dict)  # the resolved options, stored
    log_interval_ms: int | None = None

    @property
    def label(self) -> str:
        """``CrystalDiskMark-like preset cdm v1``."""
        return f"{self.title} preset {self.preset} v{self.version}"

    @property
    def file_name(self) -> str:
        """The test file's name in a --dir work directory."""
        return f"{self.preset}-test.dat"

    @property
    def identity(self) -> dict[str, Any]:
        return {"preset": self.preset, "preset_version": self.version,
                "preset_title": self.title}

    @property
    def measured_seconds(self) -> float:
        return sum((m.cell.runtime_s or 0.0) + m.idle_before_s for m in self.measurements)

    def prefill_cell(self) -> CellSpec:
        """CrystalDiskMark writes its test file with data before it reads: so do all three
        presets, one sequential pass over the whole file (or region)."""
        return CellSpec(name="prefill", pattern=Pattern.SEQUENTIAL,
                        block_bytes=self.prefill_block_bytes, mix=Mix(0), threads=1,
                        iodepth=8, offset_bytes=0, size_bytes=self.size_bytes,
                        io_bytes=self.size_bytes)


@dataclass(frozen=True)
class CdmArgs:
    profile: str = "default"
    set: str | None = None
    modes: str | None = None  # "read,write,mix"
    mix_read_pct: int | None = None
    passes: int | None = None
    measure_s: float | None = None
    interval_s: float | None = None
    size_bytes: int | None = None
    ioengine: str = "libaio"


@dataclass(frozen=True)
class AttoArgs:
    profile: str = "default"
    min_size: str | None = None
    max_size: str | None = None
    factor: int | None = None
    qd: int | str | None = None  # "auto": resolved by the run (run/peak_load.py)
    measure_s: float | None = None
    no_direct: bool = False
    size_bytes: int | None = None
    ioengine: str = "libaio"


@dataclass(frozen=True)
class IometerArgs:
    profile: str = "default"
    set: str | None = None
    block_sizes: str | None = None  # keep only the specs of these transfer sizes (KiB)
    seconds: float | None = None
    qd: int | str | None = None  # "auto": resolved by the run (run/peak_load.py)
    log_interval_ms: int | None = None
    size_bytes: int | None = None
    ioengine: str = "libaio"


#: the arguments of any of the three (:func:`plan_of` validates them into its plan)
PresetArgs = CdmArgs | AttoArgs | IometerArgs
_A = TypeVar("_A", CdmArgs, AttoArgs, IometerArgs)


def plan_of(args: PresetArgs, logical_sector: int = 512, existing_size: int | None = None
            ) -> PresetPlan:
    """The plan of a preset's arguments on a target of ``logical_sector``-byte sectors
    (ATTO's direct transfers are whole sectors), where the size of an existing test file is
    the test size unless --size is given; validated (UserError, one line, on a bad value)."""
    sized = replace(args, size_bytes=args.size_bytes or existing_size)
    match sized:
        case CdmArgs():
            return build_cdm(sized)
        case AttoArgs():
            return build_atto(sized, logical_sector)
        case IometerArgs():
            return build_iometer(sized)


# --------------------------------------------------------------------------- helpers


class _Defaults:
    """A preset's value for a setting: the quick profile's, else the preset default."""

    def __init__(self, data: dict[str, Any], profile: str) -> None:
        if profile not in PROFILES:
            raise UserError(f"--profile {profile!r} is not one of: {', '.join(PROFILES)}")
        self.defaults: dict[str, Any] = data.get("defaults", {})
        self.quick: dict[str, Any] = data.get("quick", {}) if profile == "quick" else {}
        self.limits: dict[str, Any] = data.get("limits", {})

    def __call__(self, key: str, given: Any = None) -> Any:
        if given is not None:
            return given
        return self.quick.get(key, self.defaults.get(key))


def size_of(text: object, what: str = "size") -> int:
    """A preset file's size (text like "1MiB" or a number of bytes)."""
    try:
        return parse_size(str(text))
    except ValueError as exc:
        raise UserError(f"{what} {text!r}: {exc}") from None


def _seconds(option: str, value: float, minimum: float = 0.1) -> float:
    if not (math.isfinite(value) and minimum <= value <= MAX_SECONDS):
        raise UserError(f"{option} {value!r}: give {minimum:g} to {MAX_SECONDS:g} seconds")
    return float(value)


def _whole(option: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UserError(f"{option} {value!r}: give a whole number from {low} to {high}")
    return value


class SizeRefused(UserError):
    """A test size out of the preset's range; ``need`` says the range."""

    def __init__(self, option: str, size: int, need: str) -> None:
        super().__init__(f"{option} {format_bytes(size)}: {need}")
        self.need = need


def _check_size(size: int, low: int, high: int | None, option: str = "--size") -> int:
    if size < low or (high is not None and size > high):
        top = f" to {format_bytes(high)}" if high is not None else " or more"
        raise SizeRefused(option, size, f"the test file must be {format_bytes(low)}{top}")
    if size % 4096:
        raise UserError(f"{option} {size}: give a multiple of 4 KiB")
    return size


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _sets(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    sets = data.get("sets")
    if not isinstance(sets, dict) or not sets:
        raise UserError(f"preset {data.get('name')} is malformed (no sets)")
    return sets


def _pick_set(data: dict[str, Any], name: str) -> list[dict[str, Any]]:
    sets = _sets(data)
    if name not in sets:
        raise UserError(f"--set {name!r} is not one of: {', '.join(sets)}")
    return sets[name]


def _pattern(text: object) -> Pattern:
    try:
        return Pattern(str(text))
    except ValueError:
        raise UserError(f"preset pattern {text!r} is not random or sequential") from None


def _cell(name: str, pattern: Pattern, block: int, read_pct: int, threads: int, qd: int,
          size: int, seconds: float) -> CellSpec:
    return CellSpec(name=name, pattern=pattern, block_bytes=block, mix=Mix(read_pct),
                    threads=threads, iodepth=qd, offset_bytes=0, size_bytes=size,
                    runtime_s=seconds)


# --------------------------------------------------------------------------- CrystalDiskMark


def parse_modes(text: str) -> tuple[str, ...]:
    modes = tuple(m.strip().lower() for m in text.split(",") if m.strip())
    bad = [m for m in modes if m not in CDM_MODES]
    if not modes or bad or len(set(modes)) != len(modes):
        raise UserError(f"--modes {text!r}: give some of {', '.join(CDM_MODES)}, "
                        "comma-separated, each once")
    return tuple(m for m in CDM_MODES if m in modes)  # CrystalDiskMark's order


def build_cdm(args: CdmArgs) -> PresetPlan:
    data = presets.load("cdm")
    d = _Defaults(data, args.profile)
    set_name = str(d("set", args.set))
    tests = _pick_set(data, set_name)
    modes_value = d("modes", args.modes)
    modes = parse_modes(modes_value if isinstance(modes_value, str) else ",".join(modes_value))
    mix_pct = _whole("--mix-read-pct", d("mix_read_pct", args.mix_read_pct), 1, 99)
    passes = _whole("--passes", d("passes", args.passes), 1, int(d.limits["max_passes"]))
    measure = _seconds("--measure-seconds", float(d("measure_seconds", args.measure_s)))
    interval = _seconds("--interval-seconds", float(d("interval_seconds", args.interval_s)),
                        0.0)
    size = _check_size(args.size_bytes or size_of(d("size")), size_of(d.limits["min_size"]),
                       size_of(d.limits["max_size"]))
    measurements: list[Measurement] = []
    for mode in modes:
        read_pct = {"read": 100, "write": 0, "mix": mix_pct}[mode]
        for test in tests:
            label = str(test["label"])
            block = size_of(test["block"], f"preset cdm test {label} block")
            threads, qd = int(test["threads"]), int(test["qd"])
            if block * threads > size:
                raise UserError(f"--size {format_bytes(size)} is too small for {label}")
            for pass_no in range(1, passes + 1):
                name = f"{_slug(label)}-{mode}-p{pass_no}"
                cell = _cell(name, _pattern(test["pattern"]), block, read_pct, threads, qd,
                             size, measure)
                measurements.append(Measurement(label, mode, pass_no, cell,
                                                idle_before_s=interval if measurements else 0))
    settings = {"set": set_name, "modes": list(modes), "mix_read_pct": mix_pct,
                "passes": passes, "measure_seconds": measure, "interval_seconds": interval,
                "size_bytes": size, "tests": [dict(t) for t in tests]}
    return PresetPlan("cdm", int(data["version"]), str(data["title"]), args.profile, size,
                      True, args.ioengine, size_of(d("prefill_block")), tuple(measurements),
                      settings)


# --------------------------------------------------------------------------- ATTO


def transfer_sizes(low: int, high: int, factor: int) -> tuple[int, ...]:
    sizes = []
    size = low
    while size <= high:
        sizes.append(size)
        size *= factor
    return tuple(sizes)


def size_label(size: int) -> str:
    """ATTO's labels: 512 B, 4 KB ... 64 MB (binary units, as ATTO means them)."""
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def _transfer(option: str, text: str, lo: int, hi: int) -> int:
    try:
        size = parse_size(str(text).strip())
    except ValueError as exc:
        raise UserError(f"{option} {text!r}: {exc}") from None
    if not lo <= size <= hi or size % 512:
        raise UserError(f"{option} {text!r}: give a multiple of 512 bytes from "
                        f"{format_bytes(lo)} to {format_bytes(hi)}")
    return size


def build_atto(args: AttoArgs, logical_sector: int = 512) -> PresetPlan:
    data = presets.load("atto")
    d = _Defaults(data, args.profile)
    lo_lim, hi_lim = size_of(d.limits["min_transfer"]), size_of(d.limits["max_transfer"])
    low = _transfer("--min-size", d("min_size", args.min_size), lo_lim, hi_lim)
    high = _transfer("--max-size", d("max_size", args.max_size), lo_lim, hi_lim)
    factor = _whole("--factor", d("factor", args.factor), 2, 16)
    qd = _whole("--qd", d("qd", args.qd), 1, int(d.limits["max_qd"]))
    measure = _seconds("--measure-seconds", float(d("measure_seconds", args.measure_s)))
    direct = not args.no_direct
    if low > high:
        raise UserError(f"--min-size {format_bytes(low)} is larger than --max-size "
                        f"{format_bytes(high)}")
    if direct and low % logical_sector:
        raise UserError(f"--min-size {format_bytes(low)}: direct I/O needs transfers in "
                        f"whole {logical_sector}-byte sectors of the target")
    size = _check_size(args.size_bytes or size_of(d("size")), size_of(d.limits["min_file"]),
                       None)
    sizes = transfer_sizes(low, high, factor)
    if sizes[-1] > size:
        raise UserError(f"--max-size {format_bytes(sizes[-1])} is larger than the "
                        f"{format_bytes(size)} test file (--size)")
    measurements = []
    for block in sizes:
        label = size_label(block)
        for mode, read_pct in (("write", 0), ("read", 100)):
            cell = _cell(f"{block}-{mode}", Pattern.SEQUENTIAL, block, read_pct, 1, qd, size,
                         measure)
            measurements.append(Measurement(label, mode, 1, cell,
                                            drop_caches_before=not direct and mode == "read"))
    settings = {"min_size_bytes": low, "max_size_bytes": high, "factor": factor, "qd": qd,
                "measure_seconds": measure, "direct": direct, "size_bytes": size,
                "transfer_sizes": list(sizes)}
    return PresetPlan("atto", int(data["version"]), str(data["title"]), args.profile, size,
                      direct, args.ioengine, size_of(d("prefill_block")), tuple(measurements),
                      settings)


# --------------------------------------------------------------------------- IOmeter


def parse_block_filter(text: str) -> tuple[int, ...]:
    sizes = []
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            sizes.append(parse_size(part.strip(), default_unit="k"))
        except ValueError as exc:
            raise UserError(f"--block-sizes {text!r}: {exc}") from None
    if not sizes:
        raise UserError(f"--block-sizes {text!r}: give transfer sizes, e.g. 4,64 (KiB)")
    return tuple(sizes)


def build_iometer(args: IometerArgs) -> PresetPlan:
    data = presets.load("iometer")
    d = _Defaults(data, args.profile)
    set_name = str(d("set", args.set))
    specs = _pick_set(data, set_name)
    if args.block_sizes is not None:
        keep = parse_block_filter(args.block_sizes)
        specs = [s for s in specs if size_of(s["block"]) in keep]
        if not specs:
            raise UserError(f"--block-sizes {args.block_sizes!r}: no access spec of the "
                            f"{set_name} set has these transfer sizes")
    qd = _whole("--qd", d("qd", args.qd), 1, MAX_QD)
    seconds = _seconds("--seconds", float(d("seconds", args.seconds)), 0.5)
    interval = _whole("--log-interval", d("log_interval_ms", args.log_interval_ms), 100,
                      60_000)
    if interval > seconds * 1000:
        raise UserError(f"--log-interval {interval} ms is longer than the {seconds:g} s "
                        "of each access spec; the timeline would have no point")
    size = _check_size(args.size_bytes or size_of(d("size")), size_of(d.limits["min_size"]),
                       None)
    workers = int(d("workers"))
    measurements = []
    for spec in specs:
        name = str(spec["name"])
        block = size_of(spec["block"], f"preset iometer spec {name} block")
        read_pct = int(spec["read_pct"])
        mode = {100: "read", 0: "write"}.get(read_pct, "mix")
        cell = _cell(_slug(name), _pattern(spec["pattern"]), block, read_pct, workers, qd,
                     size, seconds)
        measurements.append(Measurement(name, mode, 1, cell, log_iops=True))
    settings = {"set": set_name, "qd": qd, "workers": workers, "seconds": seconds,
                "log_interval_ms": interval, "size_bytes": size,
                "specs": [dict(s) for s in specs]}
    return PresetPlan("iometer", int(data["version"]), str(data["title"]), args.profile, size,
                      True, args.ioengine, size_of(d("prefill_block")), tuple(measurements),
                      settings, log_interval_ms=interval)


# --------------------------------------------------------------------------- the suites


def _set(group: str, help: str) -> Opt:
    return opt("--set", group=group, config=Kind.TEXT, help=help)


def _measure_seconds(group: str, help: str) -> Opt:
    return common.number("--measure-seconds", group, help, metavar="S", field="measure_s")


def _spec(name: str, help: str, description: str, size_help: str, args_type: type[_A],
          own: tuple[Opt, ...]) -> SuiteSpec[_A]:
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
                     results={name: PresetResult},
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


def plan_dict(plan: PresetPlan, directory: dict[str, object] | None) -> dict[str, Any]:
    """The run's stored plan (``directory``: the --dir target's description)."""
    return {
        "suite": plan.preset,
        **plan.identity,
        "profile": plan.profile,
        "options": {**{k: v for k, v in plan.settings.items() if k not in DEFINITIONS},
                    "direct": plan.direct, "ioengine": plan.ioengine, "quick": plan.quick},
        "definitions": {k: v for k, v in plan.settings.items() if k in DEFINITIONS},
        "tests": [plan.preset],
        "prefill": f"{format_bytes(plan.size_bytes)} written sequentially in "
                   f"{format_bytes(plan.prefill_block_bytes)} blocks before measuring",
        "data_pattern": "fio default (random buffers)",
        "directory": directory,
    }


def test_params(plan: PresetPlan, file_path: str, target_kind: str) -> dict[str, Any]:
    """The test's stored parameters."""
    return {
        "title": plan.title,
        **plan.identity,
        "profile": plan.profile,
        "quick": plan.quick,
        "settings": plan.settings,
        "direct": plan.direct,
        "ioengine": plan.ioengine,
        "test_file": file_path,
        "target_kind": target_kind,
        "size_bytes": plan.size_bytes,
        "measurements": len(plan.measurements),
    }
