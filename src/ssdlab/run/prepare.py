"""Everything checked before the first byte is written: target, options, fio, plan."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from ssdlab import __version__
from ssdlab.errors import TargetError, UserError
from ssdlab.plan.options import PtsArgs, build_options
from ssdlab.plan.pts import PtsOptions, PtsTest, active_range, build_pts_tests
from ssdlab.plan.specs import Pattern
from ssdlab.plan.units import format_bytes
from ssdlab.store.records import RunData
from ssdlab.targets.filetarget import is_ssdlab_file
from ssdlab.targets.identity import (
    TargetInfo,
    check_fio_version,
    fio_version,
    host_info,
    identify_block,
    identify_file,
)
from ssdlab.targets.safety import DestroyData, check_block_target

MIN_ACTIVE_RANGE = 64 * 1024 * 1024


@dataclass(frozen=True)
class TargetRequest:
    """The target options of ``ssdlab run SUITE`` as given: what every suite's preparation
    starts from (``dir`` only for suites that take ``--dir``)."""

    target: str | None
    dir: str | None = None
    size_bytes: int | None = None
    destroy_data: DestroyData = False  # False, True (the bare flag) or SERIAL|PATH
    fio: str = "fio"

    def device(self) -> str:
        """``--target``, which a suite of devices and files requires."""
        if self.target is None:
            raise UserError("--target PATH is required")
        return self.target


@dataclass(frozen=True)
class RunRequest:
    target: str
    size_bytes: int | None
    destroy_data: DestroyData  # False, True (the bare flag) or --destroy-data=SERIAL|PATH
    args: PtsArgs
    fio: str = "fio"


@dataclass(frozen=True)
class Prepared:
    request: RunRequest
    info: TargetInfo
    options: PtsOptions
    tests: tuple[PtsTest, ...]
    host: dict[str, object]
    versions: dict[str, str]
    #: the file target does not exist yet and will be created by the run
    create_file: bool


def _is_block(path: str) -> bool:
    return os.path.exists(path) and stat.S_ISBLK(os.stat(path).st_mode)


def planned_file(path: str, size: int) -> TargetInfo:
    """What a file target ssdlab is about to create will look like."""
    return TargetInfo(
        path=path,
        kind="file",
        name=os.path.basename(path),
        device_class="file",
        model=None,
        serial=None,
        firmware=None,
        capacity_bytes=size,
        logical_sector_bytes=512,
        physical_sector_bytes=512,
        rotational=None,
        numa_node=None,
        scheduler=None,
        discard_max_bytes=None,
        details={"planned": True},
    )


def _check_free_space(path: str, size: int) -> None:
    parent = os.path.dirname(path) or "."
    stats = os.statvfs(parent)
    free = stats.f_bavail * stats.f_frsize
    if free < size:
        raise TargetError(
            f"not enough free space in {parent} for a {format_bytes(size)} "
            f"test file: {format_bytes(free)} free"
        )


def resolve_target(request: RunRequest) -> tuple[TargetInfo, bool]:
    """Identify the target without writing anything; (info, file must be created).

    Block devices go through every guardrail of :mod:`ssdlab.targets.safety`; a
    --read-only run writes nothing, so it needs no --destroy-data and may read a device
    that carries a filesystem (but not a mounted, system or busy one).
    """
    path = os.path.abspath(request.target)
    read_only = request.args.read_only
    if _is_block(path):
        if request.size_bytes is not None:
            raise UserError(
                "--size applies to file targets; a block device is tested whole "
                "(use --active-range to test part of it)"
            )
        info = identify_block(path)
        check_block_target(info, destroy_data=request.destroy_data, writes=not read_only)
        return info, False
    if isinstance(request.destroy_data, str):
        raise UserError(
            f"--destroy-data={request.destroy_data} names a device, but the target {path} "
            "is not a block device; file targets need no --destroy-data"
        )
    if read_only and not os.path.exists(path):
        raise UserError(
            f"--read-only writes nothing, so it cannot create {path}; "
            "give an existing ssdlab test file or a block device"
        )
    info, create = _resolve_file(path, request)
    if create and read_only:
        raise UserError(
            f"--read-only writes nothing, so it cannot resize {path}; "
            "leave out --size"
        )
    return info, create


def _resolve_file(path: str, request: RunRequest) -> tuple[TargetInfo, bool]:
    """An existing file ssdlab created, or a new one (never a foreign file)."""
    if os.path.exists(path):
        if not os.path.isfile(path):
            raise TargetError(f"target {path} is neither a block device nor a regular file")
        if not is_ssdlab_file(path):
            raise TargetError(
                f"refusing {path}: it exists and was not created by ssdlab; "
                "give a new file path or a block device"
            )
        if request.size_bytes is not None and request.size_bytes != os.path.getsize(path):
            return planned_file(path, request.size_bytes), True
        return identify_file(path), False
    if not os.path.isdir(os.path.dirname(path)):
        raise TargetError(
            f"target {path} does not exist and its directory "
            f"{os.path.dirname(path)} does not exist either"
        )
    if request.size_bytes is None:
        raise UserError(
            f"target {path} does not exist; give --size to let ssdlab create "
            "a test file of that size (e.g. --size 1GiB)"
        )
    _check_free_space(path, request.size_bytes)
    return planned_file(path, request.size_bytes), True


def _check_size(info: TargetInfo, options: PtsOptions) -> None:
    rng = active_range(info.capacity_bytes, options.active_range_pct)
    if rng.size_bytes < MIN_ACTIVE_RANGE:
        raise TargetError(
            f"target {info.path} is too small: its active range is {format_bytes(rng.size_bytes)}"
            f", ssdlab needs at least {format_bytes(MIN_ACTIVE_RANGE)}"
        )


def _check_slices(tests: tuple[PtsTest, ...]) -> None:
    """Sequential threads each get their own slice; each slice must hold a block."""
    for test in tests:
        for cell in test.round_cells:
            if (
                cell.pattern is Pattern.SEQUENTIAL
                and cell.size_bytes // cell.threads < cell.block_bytes
            ):
                raise UserError(
                    f"--threads {cell.threads} is too many for {test.name}: each thread needs "
                    f"its own {format_bytes(cell.block_bytes)} slice of the "
                    f"{format_bytes(cell.size_bytes)} active range"
                )


def _check_purge(info: TargetInfo, options: PtsOptions) -> None:
    if info.kind == "file" and options.purge not in ("auto", "none"):
        raise UserError(
            f"--purge {options.purge} applies to block devices; a file target is "
            "purged by recreating it (--purge auto) or not at all (--purge none)"
        )
    if options.purge.startswith("nvme") and info.device_class != "nvme":
        raise UserError(
            f"--purge {options.purge} needs an NVMe device; {info.path} is {info.device_class}"
        )


@dataclass(frozen=True)
class PreparedTarget:
    """What every suite checks first: fio, the target (refused or accepted), the host."""

    info: TargetInfo
    create_file: bool  # the file target does not exist yet and will be created by the run
    host: dict[str, object]
    versions: dict[str, str]

    @property
    def cpus(self) -> int:
        return int(str(self.host.get("cpu_count") or os.cpu_count() or 1))


def prepare_device(request: TargetRequest, *, read_only: bool = False,
                   min_bytes: int | None = None) -> PreparedTarget:
    """:func:`prepare_target` of a request's ``--target``; with ``min_bytes``, a target
    smaller than that is refused."""
    base = prepare_target(request.device(), request.size_bytes, request.destroy_data,
                          request.fio, read_only=read_only)
    if min_bytes is not None:
        check_capacity(base.info, base.info.capacity_bytes, min_bytes)
    return base


def check_capacity(info: TargetInfo, region_bytes: int, min_bytes: int = MIN_ACTIVE_RANGE,
                   what: str = "its active range is ") -> None:
    """A region of the target smaller than ``min_bytes`` is refused (one line)."""
    if region_bytes < min_bytes:
        raise TargetError(f"target {info.path} is too small: {what}"
                          f"{format_bytes(region_bytes)}, ssdlab needs at least "
                          f"{format_bytes(min_bytes)}")


def check_file_purge(info: TargetInfo, purge: str, *, allow_none: bool = True) -> None:
    """A purge method other than recreating the file (or none) is for block devices; an
    NVMe purge for NVMe devices."""
    if info.kind == "file" and purge not in (("auto", "none") if allow_none else ("auto",)):
        alternative = " or not at all (--purge none)" if allow_none else ""
        raise UserError(f"--purge {purge} applies to block devices; a file target is "
                        f"purged by recreating it (--purge auto){alternative}")
    if purge.startswith("nvme") and info.device_class != "nvme":
        raise UserError(f"--purge {purge} needs an NVMe device; {info.path} is "
                        f"{info.device_class}")


def prepare_target(
    target: str,
    size_bytes: int | None,
    destroy_data: DestroyData,
    fio: str = "fio",
    *,
    read_only: bool = False,
) -> PreparedTarget:
    """fio version, target identity and safety: UserError (one line) before any I/O."""
    versions = checked_versions(fio)
    request = RunRequest(target, size_bytes, destroy_data, PtsArgs(read_only=read_only), fio)
    info, create = resolve_target(request)
    return PreparedTarget(info, create, host_info(), versions)


def checked_versions(fio: str) -> dict[str, str]:
    """The versions a run records (ssdlab, fio); a UserError when fio is missing or too
    old."""
    version = fio_version(fio)
    check_fio_version(version)
    return {"ssdlab": __version__, "fio": version}


def prepare(request: RunRequest) -> Prepared:
    """Validate the whole run. Raises UserError (one line) before any I/O to the target."""
    base = prepare_target(request.target, request.size_bytes, request.destroy_data, request.fio,
                          read_only=request.args.read_only)
    info, create, host = base.info, base.create_file, base.host
    cpus = base.cpus
    options = build_options(request.args, info.device_class, cpus)
    _check_purge(info, options)
    _check_size(info, options)
    tests = build_pts_tests(options, info.capacity_bytes, info.logical_sector_bytes)
    _check_slices(tests)
    return Prepared(request, info, options, tests, host, base.versions, create)


def check_same_target(run: RunData, now: PreparedTarget) -> None:
    """``resume`` refuses a target whose identity changed since the run (serial, size)."""
    then, info = run.target, now.info
    for key, current in (("serial", info.serial), ("model", info.model),
                         ("capacity_bytes", info.capacity_bytes), ("kind", info.kind)):
        if then.get(key) != current:
            raise TargetError(
                f"refusing to resume run {run.run_id}: {info.path} is not the same target "
                f"({key} was {then.get(key)!r}, is {current!r})"
            )


def _options_from(stored: dict[str, object]) -> PtsOptions:
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()
              if k != "quick"}
    return PtsOptions(**values)  # type: ignore[arg-type]


def prepare_resume_target(
    run: RunData, destroy_data: DestroyData, fio: str = "fio", *, read_only: bool = False
) -> PreparedTarget:
    """The stored run's target as it is now, checked to be the same one. A test file
    ssdlab made that is missing (a crash while a purge was recreating it) is made again
    at its recorded size."""
    path = str(run.target.get("path"))
    capacity = run.target.get("capacity_bytes")
    size = None
    if (run.target.get("kind") == "file" and not os.path.lexists(path)
            and isinstance(capacity, int)):
        size = capacity
    base = prepare_target(path, size, destroy_data, fio, read_only=read_only)
    check_same_target(run, base)
    return base


def prepare_resume(run: RunData, destroy_data: DestroyData, fio: str = "fio") -> Prepared:
    """A stored PTS run's plan, re-validated against the target as it is now."""
    stored = run.plan.get("options")
    if not isinstance(stored, dict):
        raise UserError(f"run {run.run_id} has no stored PTS options to resume from")
    base = prepare_resume_target(run, destroy_data, fio,
                                 read_only=stored.get("read_only_target") is True)
    try:
        options = _options_from(stored)
    except TypeError as exc:
        raise UserError(f"run {run.run_id} was made by another ssdlab version and cannot be "
                        f"resumed by this one ({exc})") from None
    tests = build_pts_tests(options, base.info.capacity_bytes, base.info.logical_sector_bytes)
    request = RunRequest(base.info.path, None, destroy_data,
                         PtsArgs(read_only=options.read_only_target), fio)
    return Prepared(request, base.info, options, tests, base.host, base.versions,
                    base.create_file)
