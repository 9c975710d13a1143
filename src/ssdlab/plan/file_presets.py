"""The file-system presets as plans: AJA-like video frames, DiskFill-like passes, small
files (dd-like) and copy sets (docs/presets-files.md).

Each preset's definition is data (``presets/data/<name>.toml``); the functions here check
the user's options against it and turn them into a :class:`FilePlan`: frozen, validated,
a list of phases run in order in a work directory. Pure: no I/O but reading the preset.

Page cache: a phase that does not use O_DIRECT reads only after ``sync`` and dropping the
kernel's caches (``drop_before``); every write phase ends with fsync inside the timed job.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from ssdlab import presets
from ssdlab.errors import UserError
from ssdlab.plan.filejobs import FileJob
from ssdlab.plan.units import format_bytes, parse_size

PROFILES = ("default", "quick")
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
ALIGN = 4096
MAX_BYTES = 1 << 50  # 1 PiB: no preset wants more
MAX_FILES = 10_000_000
#: file-system overhead allowed for in the free-space check: per file, and overall
PER_FILE_SLACK = 8 * KIB
SLACK_FRACTION = 0.02
SLACK_BYTES = 16 * MIB
#: the blocks of a bulk write or read (DiskFill, the copy sources)
BULK_BLOCK = MIB


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
class FilePlan:
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
    def quick(self) -> bool:
        return self.profile == "quick"

    @property
    def direct(self) -> bool:
        return any(isinstance(p, FioPhase) and p.job.direct for p in self.phases)

    def buffered(self) -> FilePlan:
        """The same plan without O_DIRECT (where the file system refuses it): reads then
        drop the caches first."""
        phases = tuple(
            replace(p, job=replace(p.job, direct=False), drop_before=p.job.rw == "read")
            if isinstance(p, FioPhase) else p for p in self.phases)
        return replace(self, phases=phases)


# --------------------------------------------------------------------------- options


@dataclass(frozen=True)
class AjaArgs:
    profile: str = "default"
    size: str | None = None  # file sizes, a comma list
    resolution: str | None = None
    pixel_format: str | None = None


@dataclass(frozen=True)
class DiskFillArgs:
    profile: str = "default"
    size: int | None = None  # each pass's file
    passes: int | None = None
    block_size: str | None = None


@dataclass(frozen=True)
class SmallFilesArgs:
    profile: str = "default"
    size: int | None = None  # in total
    file_size: str | None = None
    wait_seconds: float | None = None


@dataclass(frozen=True)
class CopyArgs:
    profile: str = "default"
    size: int | None = None  # each set's total
    sets: str | None = None
    repetitions: int | None = None


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

_RESOLUTION = re.compile(r"^\s*(\d{1,5})\s*[xX]\s*(\d{1,5})\s*$")


@dataclass(frozen=True)
class FrameFormat:
    width: int
    height: int
    pixel_format: str
    pixel_label: str
    bytes_per_pixel: Fraction
    align_bytes: int

    @property
    def raw_bytes(self) -> int:
        return math.ceil(self.width * self.height * self.bytes_per_pixel)

    @property
    def frame_bytes(self) -> int:
        """One frame as written: the raw frame rounded up to whole aligned blocks."""
        return -(-self.raw_bytes // self.align_bytes) * self.align_bytes

    @property
    def label(self) -> str:
        return f"{self.width}x{self.height} {self.pixel_label}"


def frame_format(data: dict[str, Any], resolution: str, pixel_format: str) -> FrameFormat:
    named = data.get("resolutions", {})
    text = named.get(resolution, named.get(resolution.upper(), resolution))
    match = _RESOLUTION.match(str(text))
    if match is None or not all(0 < int(v) <= 16384 for v in match.groups()):
        raise UserError(f"--resolution {resolution!r}: give WIDTHxHEIGHT (each 1 to 16384, "
                        f"e.g. 5120x2700) or one of: {', '.join(named)}")
    formats = data["pixel_formats"]
    if pixel_format not in formats:
        raise UserError(f"--pixel-format {pixel_format!r} is not one of: {', '.join(formats)}")
    fmt = formats[pixel_format]
    return FrameFormat(int(match.group(1)), int(match.group(2)), pixel_format, fmt["label"],
                       Fraction(fmt["bytes_per_pixel"]), int(data["definition"]["align_bytes"]))


def _size_list(option: str, text: object) -> list[int]:
    items = text if isinstance(text, list) else str(text).split(",")
    sizes = [_size(option, item, align=1) for item in items if str(item).strip()]
    if not sizes or len(sizes) > 32:
        raise UserError(f"--size {text!r}: give one to 32 file sizes, e.g. 1GiB,4GiB")
    if len(set(sizes)) != len(sizes):
        raise UserError(f"--size {text!r}: a file size is given twice")
    return sizes


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
        for rw in ("write", "read"):
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


def diskfill_plan(args: DiskFillArgs) -> FilePlan:
    data, d = _definition("diskfill", args.profile)
    block = _size("--block-size", _pick(args.block_size, d["block_size"]))
    size = _size("--size", _pick(args.size, d["file_size"]), minimum=block, align=block)
    passes = _whole("--passes", _pick(args.passes, d["passes"]), 1, 1000)
    direct = bool(d["direct"])
    phases: list[Phase] = []
    for rw in ("write", "read"):
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
class CopySet:
    name: str
    files: int
    file_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.files * self.file_bytes


def scaled_sets(sets: list[dict[str, Any]], set_size: int) -> list[tuple[str, CopySet]]:
    """Each set of the definition shrunk (or grown) to ``set_size`` in total: by file size
    (rounded to 4 KiB) or by file count, as the set says."""
    result = []
    for s in sets:
        files, file_bytes = int(s["files"]), parse_size(str(s["file_size"]))
        nominal = files * file_bytes
        if s.get("shrink") == "count":
            files = max(1, round(files * set_size / nominal))
        else:
            file_bytes = max(ALIGN, round(file_bytes * set_size / nominal / ALIGN) * ALIGN)
        result.append((str(s["name"]), CopySet(str(s["name"]), files, file_bytes)))
    return result


def _bulk_block(file_bytes: int) -> int:
    """The largest power-of-two transfer up to 1 MiB that divides the file size."""
    block = BULK_BLOCK
    while file_bytes % block:
        block //= 2
    return block


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
        make = FileJob(f"copy-source-{s.name}", src, "f", "write", _bulk_block(s.file_bytes),
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
