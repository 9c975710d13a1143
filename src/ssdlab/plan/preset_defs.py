"""The block-level review presets' definitions read and validated into plans:
CrystalDiskMark-like (``cdm``), ATTO-like (``atto``) and IOmeter-like (``iometer``).

Each preset's definition is data (``presets/data/<name>.toml``); this module reads it,
merges the user's options (command line > quick profile > preset defaults), validates
everything into a frozen :class:`PresetPlan` and lays out its measurements: one fio
invocation each, in the order they run. It also says which preset a run ran
(:class:`PresetIdentity`, stored with the plans and parameters of the presets and the
curves). Pure: no I/O besides reading the package data. The three suites, their records
and what a plan says are plan/block_presets.py; docs/presets-block.md describes them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from ssdlab import presets
from ssdlab.errors import UserError
from ssdlab.jsonrecord import Record
from ssdlab.plan.specs import CellSpec, Mix, Pattern
from ssdlab.plan.suite import Profiled, ProfiledArgs
from ssdlab.units import format_bytes, parse_size

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
    def identity(self) -> PresetIdentity:
        return PresetIdentity(self.preset, self.version, self.title)

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
class CdmArgs(ProfiledArgs):
    set: str | None = None
    modes: str | None = None  # "read,write,mix"
    mix_read_pct: int | None = None
    passes: int | None = None
    measure_s: float | None = None
    interval_s: float | None = None
    size_bytes: int | None = None
    ioengine: str = "libaio"


@dataclass(frozen=True)
class AttoArgs(ProfiledArgs):
    min_size: str | None = None
    max_size: str | None = None
    factor: int | None = None
    qd: int | str | None = None  # "auto": resolved by the run (run/peak_load.py)
    measure_s: float | None = None
    no_direct: bool = False
    size_bytes: int | None = None
    ioengine: str = "libaio"


@dataclass(frozen=True)
class IometerArgs(ProfiledArgs):
    set: str | None = None
    block_sizes: str | None = None  # keep only the specs of these transfer sizes (KiB)
    seconds: float | None = None
    qd: int | str | None = None  # "auto": resolved by the run (run/peak_load.py)
    log_interval_ms: int | None = None
    size_bytes: int | None = None
    ioengine: str = "libaio"


#: the arguments of any of the three (:func:`plan_of` validates them into its plan)
PresetArgs = CdmArgs | AttoArgs | IometerArgs


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


#: a table of a preset's definition (as ``presets.load`` read it from its TOML file)
Table: TypeAlias = Mapping[str, object]


def _table(data: Table, key: str) -> Table:
    """The table ``key`` of a preset's definition (empty when it has none)."""
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise UserError(f"preset {data.get('name')} is malformed ({key} is not a table)")
    return value


def _count(value: object, what: str) -> int:
    """A whole number of a preset's definition."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"preset {what} {value!r} is not a whole number")
    return value


class _Defaults:
    """A preset's value for a setting: the quick profile's, else the preset default."""

    def __init__(self, data: Table, profile: str) -> None:
        if profile not in PROFILES:
            raise UserError(f"--profile {profile!r} is not one of: {', '.join(PROFILES)}")
        self.defaults = _table(data, "defaults")
        self.quick = _table(data, "quick") if profile == "quick" else {}
        self.limits = _table(data, "limits")

    def __call__(self, key: str, given: object = None) -> object:
        if given is not None:
            return given
        return self.quick.get(key, self.defaults.get(key))


def size_of(text: object, what: str = "size") -> int:
    """A preset file's size (text like "1MiB" or a number of bytes)."""
    try:
        return parse_size(str(text))
    except ValueError as exc:
        raise UserError(f"{what} {text!r}: {exc}") from None


def _seconds(option: str, value: object, minimum: float = 0.1) -> float:
    seconds = float(value) if isinstance(value, int | float) and not isinstance(
        value, bool) else math.nan
    if not (math.isfinite(seconds) and minimum <= seconds <= MAX_SECONDS):
        shown = seconds if math.isfinite(seconds) else value
        raise UserError(f"{option} {shown!r}: give {minimum:g} to {MAX_SECONDS:g} seconds")
    return seconds


def _whole(option: str, value: object, low: int, high: int) -> int:
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


def _pick_set(data: Table, name: str) -> list[Table]:
    """The set ``name`` of a preset's definition: its tests (or access specs)."""
    sets = data.get("sets")
    if not isinstance(sets, dict) or not sets:
        raise UserError(f"preset {data.get('name')} is malformed (no sets)")
    if name not in sets:
        raise UserError(f"--set {name!r} is not one of: {', '.join(sets)}")
    chosen = sets[name]
    if not isinstance(chosen, list) or not all(isinstance(t, dict) for t in chosen):
        raise UserError(f"preset {data.get('name')} is malformed (set {name})")
    return chosen


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
    modes = parse_modes(modes_value if isinstance(modes_value, str) else ",".join(
        str(m) for m in modes_value) if isinstance(modes_value, list) else str(modes_value))
    mix_pct = _whole("--mix-read-pct", d("mix_read_pct", args.mix_read_pct), 1, 99)
    passes = _whole("--passes", d("passes", args.passes), 1,
                    _count(d.limits["max_passes"], "cdm max_passes"))
    measure = _seconds("--measure-seconds", d("measure_seconds", args.measure_s))
    interval = _seconds("--interval-seconds", d("interval_seconds", args.interval_s),
                        0.0)
    size = _check_size(args.size_bytes or size_of(d("size")), size_of(d.limits["min_size"]),
                       size_of(d.limits["max_size"]))
    measurements: list[Measurement] = []
    for mode in modes:
        read_pct = {"read": 100, "write": 0, "mix": mix_pct}[mode]
        for test in tests:
            label = str(test["label"])
            block = size_of(test["block"], f"preset cdm test {label} block")
            threads = _count(test["threads"], f"cdm test {label} threads")
            qd = _count(test["qd"], f"cdm test {label} qd")
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


def _transfer(option: str, text: object, lo: int, hi: int) -> int:
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
    qd = _whole("--qd", d("qd", args.qd), 1, _count(d.limits["max_qd"], "atto max_qd"))
    measure = _seconds("--measure-seconds", d("measure_seconds", args.measure_s))
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
    seconds = _seconds("--seconds", d("seconds", args.seconds), 0.5)
    interval = _whole("--log-interval", d("log_interval_ms", args.log_interval_ms), 100,
                      60_000)
    if interval > seconds * 1000:
        raise UserError(f"--log-interval {interval} ms is longer than the {seconds:g} s "
                        "of each access spec; the timeline would have no point")
    size = _check_size(args.size_bytes or size_of(d("size")), size_of(d.limits["min_size"]),
                       None)
    workers = _count(d("workers"), "iometer workers")
    measurements = []
    for spec in specs:
        name = str(spec["name"])
        block = size_of(spec["block"], f"preset iometer spec {name} block")
        read_pct = _count(spec["read_pct"], f"iometer spec {name} read_pct")
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


@dataclass(frozen=True)
class PresetIdentity(Record):
    """Which preset, in which version of its definition, by its title (a preset's
    ``name``, ``version`` and ``title``)."""

    preset: str = ""
    preset_version: int = 0
    preset_title: str = ""

    @classmethod
    def of(cls, data: Table) -> PresetIdentity:
        """The identity of a loaded preset definition (``presets.load``)."""
        return cls(str(data["name"]), _count(data["version"], "version"), str(data["title"]))
