"""The file-system presets as plans: AJA-like video frames, DiskFill-like passes, small
files (dd-like) and copy sets (docs/presets-files.md).

Each preset's definition is data (``presets/data/<name>.toml``); the functions here check
the user's options against it and turn them into a :class:`FilePlan`: frozen, validated,
a list of phases run in order in a work directory. Pure: no I/O but reading the preset.

The four are four suites (one :class:`~ssdlab.plan.suite.SuiteSpec` each: :data:`AJA`,
:data:`DISKFILL`, :data:`SMALLFILES`, :data:`COPY`) that share everything else: one test
named as the preset, its result a ``FilePresetResult`` (plan/file_results.py), and what
the plan says (:func:`describe`, :func:`plan_record`, :func:`test_params`). Their frame
formats and copy sets are in plan/copysets.py.

Page cache: a phase that does not use O_DIRECT reads only after ``sync`` and dropping the
kernel's caches (``drop_before``); every write phase ends with fsync inside the timed job.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ssdlab import presets
from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.copysets import (
    ALIGN,
    bulk_block,
    frame_format,
    scaled_sets,
)
from ssdlab.plan.file_results import (
    CopyPhaseRecord,
    FilePresetParams,
    FilePresetPlan,
    FilePresetResult,
    FioPhaseRecord,
    PhaseCell,
    PhaseRecord,
    PrepareStep,
    WaitStep,
)
from ssdlab.plan.filejobs import DIRECTIONS, FileJob
from ssdlab.plan.suite import Opt, Profiled, ProfiledArgs, SuiteSpec, TargetKind, opt
from ssdlab.units import format_bytes, parse_size

PROFILES = ("default", "quick")
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
MAX_BYTES = 1 << 50  # 1 PiB: no preset wants more
MAX_FILES = 10_000_000
#: file-system overhead allowed for in the free-space check: per file, and overall
PER_FILE_SLACK = 8 * KIB
SLACK_FRACTION = 0.02
SLACK_BYTES = 16 * MIB
#: the blocks of a bulk write or read (DiskFill, the copy sources)
PAGE_CACHE_POLICY = (
    "O_DIRECT phases bypass the page cache; buffered reads and copies start after sync and "
    "dropping the kernel's caches (recorded per phase); write phases end with fsync inside "
    "the timed job (fio fsync_on_close and end_fsync; a copy with sync -f)")


@dataclass(frozen=True)
class FioPhase:
    """A timed (``measured``) or preparatory fio run of one job."""

    key: str
    label: str
    group: str  # what the report groups by: a file size, a pass, a set
    job: FileJob
    drop_before: bool  # sync and drop the caches first (a buffered read)
    frames: int = 0
    measured: bool = True


@dataclass(frozen=True)
class WaitPhase:
    key: str
    label: str
    seconds: float


@dataclass(frozen=True)
class CopyPhase:
    """``cp`` of ``source`` to ``dest`` (work-directory relative), then sync; timed."""

    key: str
    label: str
    group: str
    repetition: int
    source: str
    dest: str
    files: int
    io_bytes: int


@dataclass(frozen=True)
class RemovePhase:
    """Remove work-directory paths (untimed) to free space for what follows."""

    key: str
    label: str
    paths: tuple[str, ...]


Phase = FioPhase | WaitPhase | CopyPhase | RemovePhase


@dataclass(frozen=True)
class FilePlan(Profiled):
    preset: str
    identity: dict[str, Any]
    profile: str
    options: dict[str, Any]
    phases: tuple[Phase, ...]
    needed_bytes: int
    summary: str
    copy_command: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def direct(self) -> bool:
        return any(isinstance(p, FioPhase) and p.job.direct for p in self.phases)

    @property
    def ioengine(self) -> str:
        """The engine the preset's fio phases use."""
        return str(self.options.get("ioengine", "psync"))

    @property
    def heading(self) -> str:
        """``TITLE (preset NAME vN), profile P[ (QUICK)]``."""
        ident = self.identity
        return (f"{ident['preset_title']} (preset {ident['preset']} "
                f"v{ident['preset_version']}), profile {self.profile}"
                f"{' (QUICK)' if self.quick else ''}")

    def buffered(self) -> FilePlan:
        """The same plan without O_DIRECT (where the file system refuses it): reads then
        drop the caches first."""
        phases = tuple(
            replace(p, job=replace(p.job, direct=False), drop_before=p.job.rw == "read")
            if isinstance(p, FioPhase) else p for p in self.phases)
        return replace(self, phases=phases)


# --------------------------------------------------------------------------- options


@dataclass(frozen=True)
class PresetArgs(ProfiledArgs):
    """What every file-system preset takes: the profile (the review's sizes or quick
    ones). Each preset's arguments add its own options after it, None for "the profile's
    value"."""


def _definition(name: str, profile: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The preset's data and its definition with the profile's values over it."""
    if profile not in PROFILES:
        raise UserError(f"--profile {profile!r} is not one of: {', '.join(PROFILES)}")
    data = presets.load(name)
    definition = dict(data["definition"])
    if profile != "default":
        definition.update(data.get("profiles", {}).get(profile, {}))
    return data, definition


def _size(option: str, value: object, *, minimum: int = ALIGN, align: int = ALIGN) -> int:
    """A size given as text (``4KiB``, KiB by default when bare) or a byte count."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        try:
            size = parse_size(str(value).strip(), default_unit="b")
        except ValueError as exc:
            raise UserError(f"{option} {value!r}: {exc}") from None
    if not minimum <= size <= MAX_BYTES:
        raise UserError(f"{option} {value!r}: give {format_bytes(minimum)} to "
                        f"{format_bytes(MAX_BYTES)}")
    if size % align:
        raise UserError(f"{option} {value!r}: give a multiple of {format_bytes(align)}")
    return size


def _whole(option: str, value: object, lo: int, hi: int) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi):
        raise UserError(f"{option} {value!r}: give a whole number from {lo} to {hi}")
    return value


def _slack(data_bytes: int, files: int) -> int:
    return int(data_bytes * SLACK_FRACTION) + files * PER_FILE_SLACK + SLACK_BYTES


def _label(size: int) -> str:
    return format_bytes(size).replace(" ", "")


def _file_label(size: int) -> str:
    """A name for a file size that no other size shares (MiB/GiB, MB/GB, or bytes)."""
    if size % MIB == 0:
        return _label(size)
    for unit, factor in (("GB", 10**9), ("MB", 10**6)):
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


def _pick(given: object, default: object) -> object:
    return default if given is None else given


# --------------------------------------------------------------------------- AJA

def _size_list(option: str, text: object) -> list[int]:
    items = text if isinstance(text, list) else str(text).split(",")
    sizes = [_size(option, item, align=1) for item in items if str(item).strip()]
    if not sizes or len(sizes) > 32:
        raise UserError(f"--size {text!r}: give one to 32 file sizes, e.g. 1GiB,4GiB")
    if len(set(sizes)) != len(sizes):
        raise UserError(f"--size {text!r}: a file size is given twice")
    return sizes


@dataclass(frozen=True)
class AjaArgs(PresetArgs):
    size: str | None = None  # file sizes, a comma list
    resolution: str | None = None
    pixel_format: str | None = None


def aja_plan(args: AjaArgs) -> FilePlan:
    data, d = _definition("aja", args.profile)
    frame = frame_format(data, str(_pick(args.resolution, d["resolution"])),
                         str(_pick(args.pixel_format, d["pixel_format"])))
    sizes = _size_list("--size", _pick(args.size, d["file_sizes"]))
    direct = bool(d["direct"])
    phases: list[Phase] = []
    for size in sizes:
        frames, label = size // frame.frame_bytes, _file_label(size)
        if frames < 1:
            raise UserError(f"--size {label} holds no {format_bytes(frame.frame_bytes)} "
                            f"frame of {frame.label}: give a larger file size")
        for rw in DIRECTIONS:
            job = FileJob(f"aja-{rw}-{label}", "", f"video-{label}", rw, frame.frame_bytes,
                          frames * frame.frame_bytes, 1, direct, str(d["ioengine"]))
            phases.append(FioPhase(f"{rw}-{label}", f"{rw} {label} file", label, job,
                                   drop_before=rw == "read" and not direct, frames=frames))
        phases.append(RemovePhase(f"remove-{label}", f"remove the {label} file",
                                  (f"video-{label}.0",)))
    options = {"resolution": f"{frame.width}x{frame.height}", "pixel_format": frame.pixel_format,
               "pixel_format_label": frame.pixel_label, "frame_raw_bytes": frame.raw_bytes,
               "frame_bytes": frame.frame_bytes, "file_sizes_bytes": sizes, "direct": direct,
               "ioengine": d["ioengine"], "iodepth": d["iodepth"]}
    summary = (f"{frame.label} frames of {format_bytes(frame.frame_bytes)} "
               f"({frame.frame_bytes / 1e6:.3f} MB), one per I/O, "
               f"{'O_DIRECT' if direct else 'buffered'}; write then read a file of "
               + ", ".join(_file_label(s) for s in sizes))
    needed = max(sizes) + _slack(max(sizes), 1)
    return FilePlan("aja", presets.identity(data), args.profile, options, tuple(phases),
                    needed, summary)


# --------------------------------------------------------------------------- DiskFill


@dataclass(frozen=True)
class DiskFillArgs(PresetArgs):
    size: int | None = None  # each pass's file
    passes: int | None = None
    block_size: str | None = None


def diskfill_plan(args: DiskFillArgs) -> FilePlan:
    data, d = _definition("diskfill", args.profile)
    block = _size("--block-size", _pick(args.block_size, d["block_size"]))
    size = _size("--size", _pick(args.size, d["file_size"]), minimum=block, align=block)
    passes = _whole("--passes", _pick(args.passes, d["passes"]), 1, 1000)
    direct = bool(d["direct"])
    phases: list[Phase] = []
    for rw in DIRECTIONS:
        for n in range(1, passes + 1):
            job = FileJob(f"diskfill-{rw}-{n}", "", f"fill-{n:04d}", rw, block, size, 1,
                          direct, str(d["ioengine"]))
            phases.append(FioPhase(f"{rw}-{n}", f"{rw} pass {n}", f"pass {n}", job,
                                   drop_before=rw == "read" and not direct))
    options = {"file_size_bytes": size, "passes": passes, "block_bytes": block,
               "direct": direct, "ioengine": d["ioengine"]}
    summary = (f"{passes} passes each write a {_label(size)} file in {_label(block)} "
               f"transfers, then each file is read back "
               f"({'O_DIRECT' if direct else 'buffered, caches dropped before each read'})")
    needed = passes * size + _slack(passes * size, passes)
    return FilePlan("diskfill", presets.identity(data), args.profile, options, tuple(phases),
                    needed, summary)


# --------------------------------------------------------------------------- small files


@dataclass(frozen=True)
class SmallFilesArgs(PresetArgs):
    size: int | None = None  # in total
    file_size: str | None = None
    wait_seconds: float | None = None


def smallfiles_plan(args: SmallFilesArgs) -> FilePlan:
    data, d = _definition("smallfiles", args.profile)
    file_size = _size("--file-size", _pick(args.file_size, d["file_size"]))
    total = _size("--size", _pick(args.size, d["total_size"]), minimum=file_size,
                  align=file_size)
    files = total // file_size
    if files > MAX_FILES:
        raise UserError(f"--size {_label(total)}: {files:,} files is more than "
                        f"{MAX_FILES:,}; give a larger --file-size")
    wait = _pick(args.wait_seconds, d["wait_seconds"])
    if not (isinstance(wait, int | float) and not isinstance(wait, bool)
            and math.isfinite(wait) and 0 <= wait <= 86400):
        raise UserError(f"--wait-seconds {wait!r}: give 0 to 86400 seconds")
    direct = bool(d["direct"])
    ioengine = str(d["ioengine"])
    write = FileJob("smallfiles-write", "files", "small", "write", file_size, file_size, files,
                    direct, ioengine)
    phases: tuple[Phase, ...] = (
        FioPhase("write", f"write {files:,} files", "write", write, drop_before=False),
        WaitPhase("wait", f"wait {float(wait):g} s", float(wait)),
        FioPhase("read", f"read {files:,} files", "read",
                 replace(write, name="smallfiles-read", rw="read"), drop_before=not direct),
    )
    options = {"total_bytes": total, "file_size_bytes": file_size, "files": files,
               "wait_seconds": float(wait), "direct": direct, "ioengine": ioengine}
    summary = (f"write {_label(total)} as {files:,} files of {_label(file_size)} (one I/O "
               f"per file, each fsynced on close), wait {float(wait):g} s, drop the caches, "
               "read them all back")
    return FilePlan("smallfiles", presets.identity(data), args.profile, options, phases,
                    total + _slack(total, files), summary)


# --------------------------------------------------------------------------- copy sets


@dataclass(frozen=True)
class CopyArgs(PresetArgs):
    size: int | None = None  # each set's total
    sets: str | None = None
    repetitions: int | None = None


def copy_plan(args: CopyArgs) -> FilePlan:
    data, d = _definition("copy", args.profile)
    set_size = _size("--size", _pick(args.size, d["set_size"]))
    repetitions = _whole("--repetitions", _pick(args.repetitions, d["repetitions"]), 1, 100)
    every = scaled_sets(data["sets"], set_size)
    names = [n for n, _ in every]
    chosen = names
    if args.sets is not None:
        chosen = [t.strip() for t in str(args.sets).split(",") if t.strip()]
        unknown = [t for t in chosen if t not in names]
        if unknown or not chosen or len(set(chosen)) != len(chosen):
            raise UserError(f"--sets {args.sets!r}: give set names without repeats from: "
                            f"{', '.join(names)}")
    sets = [s for n, s in every if n in chosen]
    too_many = next((s for s in sets if s.files > MAX_FILES), None)
    if too_many is not None:
        raise UserError(f"--size {_label(set_size)}: set {too_many.name} would have "
                        f"{too_many.files:,} files, more than {MAX_FILES:,}")
    phases: list[Phase] = []
    for s in sets:
        src = f"src-{s.name}"
        make = FileJob(f"copy-source-{s.name}", src, "f", "write", bulk_block(s.file_bytes),
                       s.file_bytes, s.files, False, "psync")
        phases.append(FioPhase(f"source-{s.name}", f"create the {s.name} source", s.name, make,
                               drop_before=False, measured=False))
        for rep in range(1, repetitions + 1):
            dest = f"copy-{s.name}"
            phases.append(CopyPhase(f"copy-{s.name}-{rep}", f"copy {s.name} #{rep}", s.name,
                                    rep, src, dest, s.files, s.total_bytes))
            phases.append(RemovePhase(f"remove-copy-{s.name}-{rep}",
                                      f"remove copy #{rep} of {s.name}", (dest,)))
        phases.append(RemovePhase(f"remove-source-{s.name}", f"remove the {s.name} source",
                                  (src,)))
    biggest = max(sets, key=lambda s: s.total_bytes)
    needed = max(2 * (s.total_bytes + _slack(s.total_bytes, s.files)) for s in sets)
    command = tuple(str(c) for c in d["copy_command"])
    options = {"set_size_bytes": set_size, "repetitions": repetitions,
               "sets": [{"name": s.name, "files": s.files, "file_bytes": s.file_bytes,
                         "total_bytes": s.total_bytes} for s in sets],
               "copy_command": list(command)}
    summary = (f"{len(sets)} file set(s) of {_label(set_size)} each: "
               + ", ".join(f"{s.files:,} x {_label(s.file_bytes)}" for s in sets)
               + f"; each created by fio, then copied {repetitions} times with "
               f"`{' '.join(command)}` + `sync -f` (caches dropped before each copy); "
               f"largest set {_label(biggest.total_bytes)}")
    return FilePlan("copy", presets.identity(data), args.profile, options, tuple(phases),
                    needed, summary, copy_command=command)


#: the arguments of any of the four (:func:`plan_of` validates them into its plan)
FilePresetArgs = AjaArgs | DiskFillArgs | SmallFilesArgs | CopyArgs


def plan_of(args: FilePresetArgs) -> FilePlan:
    """The plan of a preset's arguments, validated (UserError, one line, on a bad value)."""
    match args:
        case AjaArgs():
            return aja_plan(args)
        case DiskFillArgs():
            return diskfill_plan(args)
        case SmallFilesArgs():
            return smallfiles_plan(args)
        case CopyArgs():
            return copy_plan(args)


# --------------------------------------------------------------------------- the suites

_DOC = " docs/presets-files.md."
_AJA = presets.load("aja")
_COPY = presets.load("copy")


#: what each preset's report is (its title)
_TITLES = {"aja": "AJA System Test-like report", "diskfill": "DiskFill-like report",
           "smallfiles": "small files report", "copy": "file copy report"}


def _spec(name: str, help: str, description: str, args_type: type[Any], size_help: str,
          *own: Opt, sized: bool = True) -> SuiteSpec[Any]:
    """A file-system preset as a suite: the directory options, then its own."""
    return SuiteSpec(
        name=name, help=help, description=description + _DOC, target=TargetKind.DIR,
        options=(*common.dir_target(size_help, PROFILES, sized=sized), *own),
        args_type=args_type, results={name: FilePresetResult}, report_title=_TITLES[name],
        plan_type=FilePresetPlan, params={name: FilePresetParams}, cells=PhaseCell,
        details={"prepare": PrepareStep, "wait": WaitStep, "warning": None},
        quick_text="tiny sizes, for a try-out; not the preset's definition",
        local_only="its files are made, timed and removed by ssdlab itself in a --dir of "
        "this host (its phases are not all fio jobs)")


def _aja_options() -> tuple[Opt, ...]:
    g = "aja"
    return (
        opt("--resolution", group=g, config=Kind.TEXT, default=None, metavar="WxH",
            help="frame size, WIDTHxHEIGHT or one of "
            f"{', '.join(_AJA['resolutions'])} (default 5120x2700, the review's 5K RED; "
            "quick: 1920x1080)"),
        opt("--pixel-format", group=g, config=Kind.TEXT, default=None,
            choices=list(_AJA["pixel_formats"]),
            help="pixel format (default yuv10: 10-bit YUV 4:2:2)"),
    )


def _diskfill_options() -> tuple[Opt, ...]:
    g = "diskfill"
    return (
        common.whole("--passes", g, "files written and read (default 10; quick: 3)",
                     default=None),
        opt("--block-size", group=g, config=Kind.SIZE, default=None, metavar="SIZE",
            help="transfer size, bytes unless a unit is given (default 1MiB)"),
    )


def _smallfiles_options() -> tuple[Opt, ...]:
    g = "smallfiles"
    return (
        opt("--file-size", group=g, config=Kind.SIZE, default=None, metavar="SIZE",
            help="size of each file, bytes unless a unit is given (default 256KiB)"),
        common.number("--wait-seconds", g, "wait between writing and reading (default 300; "
                      "quick: 1)", metavar="S", default=None),
    )


def _copy_options() -> tuple[Opt, ...]:
    g = "copy"
    return (
        opt("--sets", group=g, config=Kind.LIST, default=None, metavar="LIST",
            help=f"sets to run (default all: {','.join(s['name'] for s in _COPY['sets'])})"),
        common.whole("--repetitions", g, "copies of each set (default 3; quick: 2)",
                     default=None),
    )


AJA = _spec(
    "aja", "AJA System Test-like video: frame-sized writes then reads per file size",
    "Writes, then reads, one video file per file size, one frame per I/O with O_DIRECT (as "
    "AJA System Test by default); MB/s and frames per second.", AjaArgs,
    "file size(s), a comma list (default: the review's 256MiB,512MiB,1GiB,4GiB,16GiB,64GiB; "
    "quick: 16MiB,32MiB)", *_aja_options(), sized=False)
DISKFILL = _spec(
    "diskfill", "DiskFill-like: write a 1 GiB file ten times, then read each back",
    "Each pass writes a new file (buffered, fsync inside the timed job), then every file is "
    "read back after dropping the caches; MB/s per pass.", DiskFillArgs,
    "each pass's file size (default 1GiB; quick: 16MiB)", *_diskfill_options())
SMALLFILES = _spec(
    "smallfiles", "dd-like small files: 1 GiB as 256 KiB files, wait, read back",
    "Writes the files one I/O each (each fsynced on close), waits, drops the caches and "
    "reads them all back; MB/s per phase.", SmallFilesArgs,
    "data in total (default 1GiB; quick: 16MiB)", *_smallfiles_options())
COPY = _spec(
    "copy", "copy-like file sets: 100x1GiB, 10x10GiB, 1x100GiB, 102400x1MiB",
    "Each set is created by fio, then copied within the directory with cp (plus sync) "
    "several times, the caches dropped before each copy; time and MB/s of each copy and "
    "their averages.", CopyArgs,
    "each set's size in total (default 100GiB; quick: 16MiB): the large-file sets keep "
    "their file counts, the 1 MiB set its file size", *_copy_options())


# -- what the plan says: dry run, the stored plan, the test's parameters ----------------

#: (a phase's job, what it does) -> its job file's text
FileJobText = Callable[[FileJob, str], str]


def describe(plan: FilePlan, base: str, job_text: FileJobText) -> list[str]:
    """``--dry-run`` after the directory: the plan, the page cache, and every phase with
    its job file (``base``: the work directory, as it will be named)."""
    out = [f"plan: {plan.summary}", f"page cache: {PAGE_CACHE_POLICY}"]
    for phase in plan.phases:
        out += _describe_phase(plan, phase, base, job_text)
    return out


def _describe_phase(plan: FilePlan, phase: Phase, base: str, job_text: FileJobText
                    ) -> list[str]:
    if isinstance(phase, FioPhase):
        drop = "sync and drop caches, then " if phase.drop_before else ""
        return ["", f"== {phase.label}: {drop}fio, {format_bytes(phase.job.io_bytes)}",
                job_text(phase.job, phase.label).rstrip()]
    if isinstance(phase, CopyPhase):
        return [f"== {phase.label}: sync and drop caches, then {' '.join(plan.copy_command)} "
                f"{base}/{phase.source} {base}/{phase.dest} && sync -f {base}/{phase.dest}"]
    if isinstance(phase, WaitPhase):
        return [f"== {phase.label}"]
    return [f"== {phase.label} (untimed)"]


def phase_of(cell: dict[str, Any], where: str = "phase") -> PhaseRecord:
    """A stored round's cell read as its phase record."""
    record: type[PhaseRecord] = (CopyPhaseRecord if cell.get("direction") == "copy"
                                 else FioPhaseRecord)
    return record.from_json(cell, where)


def plan_record(plan: FilePlan, args: FilePresetArgs) -> FilePresetPlan:
    """The run's plan as stored."""
    ident = plan.identity
    return FilePresetPlan(plan.preset, str(ident["preset"]), int(ident["preset_version"]),
                          str(ident["preset_title"]), plan.profile, dataclasses.asdict(args),
                          plan.options, plan.summary, (plan.preset,), PAGE_CACHE_POLICY)


def test_params(plan: FilePlan, directory: JsonObject) -> FilePresetParams:
    """The parameters stored with the test (``directory``: where it ran)."""
    ident = plan.identity
    return FilePresetParams(str(ident["preset_title"]), str(ident["preset"]),
                            int(ident["preset_version"]), str(ident["preset_title"]),
                            plan.profile, plan.options, plan.summary, directory,
                            PAGE_CACHE_POLICY)
