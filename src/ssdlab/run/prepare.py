"""Everything checked about the target before the first byte is written: that it is a
block device that may be written or a file ssdlab made (or will make), fio, the host.
Each suite's run module checks its own options and plan on top (``prepare_X``)."""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ssdlab import __version__
from ssdlab.errors import TargetError, UserError
from ssdlab.plan.specs import ActiveRange, active_range
from ssdlab.run.array import array_of_target
from ssdlab.store.records import RunData
from ssdlab.targets.filetarget import SYSTEM_TREES_TEXT, is_ssdlab_file, system_place
from ssdlab.targets.identity import (
    TargetInfo,
    check_fio_version,
    fio_version,
    host_info,
    identify_block,
    identify_file,
)
from ssdlab.targets.nbd import (
    NBD_ENGINE,
    NBD_KIND,
    check_fio_engine,
    check_nbd_target,
    identify_nbd,
    is_nbd_target,
)
from ssdlab.targets.purge import check_nvme_purge, check_sd_erase
from ssdlab.targets.remote_spec import is_remote
from ssdlab.targets.safety import DestroyData, check_block_target
from ssdlab.targets.write_cache import write_cache_state
from ssdlab.units import format_bytes

if TYPE_CHECKING:
    from ssdlab.run.remote import RemoteSet

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
    dry_run: bool = False  # --dry-run: preparing touches nothing at all
    store: str | None = None  # --store as given (None: the default store)
    #: a block device the run makes before its suite runs (a matrix level's md array or
    #: zvol): a dry run plans on it as it will be, since it does not exist yet
    planned: TargetInfo | None = None

    def device(self) -> str:
        """``--target``, which a suite of devices and files requires."""
        if self.target is None:
            raise UserError("--target PATH is required")
        return self.target


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


def planned_device(path: str, size: int, details: dict[str, object]) -> TargetInfo:
    """What a block device ssdlab is about to build (an md array, a zvol) will look like,
    ``size`` an estimate: its identity is read once it exists."""
    return dataclasses.replace(
        planned_file(path, size), kind="block", device_class="virtual", rotational=False,
        details={"planned": True, **details})


def planned_target(request: TargetRequest) -> PreparedTarget | None:
    """The request's planned device (:attr:`TargetRequest.planned`) as prepared, for a
    dry run; None when the request names an existing target."""
    if request.planned is None:
        return None
    return PreparedTarget(request.planned, False, host_info(), checked_versions(request.fio))


def _check_free_space(path: str, size: int) -> None:
    parent = os.path.dirname(path) or "."
    stats = os.statvfs(parent)
    free = stats.f_bavail * stats.f_frsize
    if free < size:
        raise TargetError(
            f"not enough free space in {parent} for a {format_bytes(size)} "
            f"test file: {format_bytes(free)} free"
        )


def resolve_target(target: str, size_bytes: int | None, destroy_data: DestroyData,
                   read_only: bool = False) -> tuple[TargetInfo, bool]:
    """Identify the target without writing anything; (info, file must be created).

    Block devices go through every guardrail of :mod:`ssdlab.targets.safety`; a
    --read-only run writes nothing, so it needs no --destroy-data and may read a device
    that carries a filesystem (but not a mounted, system or busy one). An NBD export
    (``nbd://...``) is identified over the network and checked as a device is.
    """
    if is_nbd_target(target):
        return _resolve_nbd(target, size_bytes, destroy_data, read_only), False
    path = os.path.abspath(target)
    if _is_block(path):
        if size_bytes is not None:
            raise UserError(
                "--size applies to file targets; a block device is tested whole "
                "(use --active-range to test part of it)"
            )
        info = identify_block(path)
        check_block_target(info, destroy_data=destroy_data, writes=not read_only)
        # the drive's write cache, the kernel's view and the drive's own (NVMe feature 6,
        # ATA hdparm -W, the SCSI caching mode page), kept in the run's record
        info.details["write_cache"] = write_cache_state(info.path, info.name)
        return info, False
    refuse_system_place(target)
    if isinstance(destroy_data, str):
        raise UserError(
            f"--destroy-data={destroy_data} names a device, but the target {path} "
            "is not a block device; file targets need no --destroy-data"
        )
    if read_only and not os.path.exists(path):
        raise UserError(
            f"--read-only writes nothing, so it cannot create {path}; "
            "give an existing ssdlab test file or a block device"
        )
    info, create = _resolve_file(path, size_bytes)
    if create and read_only:
        raise UserError(
            f"--read-only writes nothing, so it cannot resize {path}; "
            "leave out --size"
        )
    return info, create


def _resolve_nbd(target: str, size_bytes: int | None, destroy_data: DestroyData,
                 read_only: bool) -> TargetInfo:
    """An NBD export (targets/nbd.py): identified reading only, refused for writing
    without --destroy-data."""
    if size_bytes is not None:
        raise UserError("--size applies to file targets; an NBD export is tested whole "
                        "(use --active-range to test part of it)")
    found = identify_nbd(target)
    check_nbd_target(found, destroy_data=destroy_data, writes=not read_only)
    return found.info


OptionsT = TypeVar("OptionsT")


def engine_for(info: TargetInfo, options: OptionsT) -> OptionsT:
    """``options`` with the ioengine fio will use on the target: on an NBD export, fio's
    nbd engine (the job files say ``ioengine=nbd`` and ``uri=``, engine/jobfile.py), which
    the stored plan then records too. Another ``--ioengine`` than the default is refused."""
    engine = getattr(options, "ioengine", None)
    if info.kind != NBD_KIND or engine is None or not dataclasses.is_dataclass(options):
        return options
    if engine not in ("libaio", NBD_ENGINE):
        raise UserError(f"--ioengine {engine}: an NBD export is reached through fio's nbd "
                        "engine only (leave --ioengine out)")
    changes: dict[str, object] = {"ioengine": NBD_ENGINE}
    settings = getattr(options, "settings", None)
    if isinstance(settings, dict) and "ioengine" in settings:
        changes["settings"] = {**settings, "ioengine": NBD_ENGINE}
    return dataclasses.replace(options, **changes)  # type: ignore[type-var]


def refuse_nbd(info: TargetInfo, suite: str, why: str) -> None:
    """A suite that cannot run on an NBD export says so in one line."""
    if info.kind == NBD_KIND:
        raise TargetError(f"ssdlab run {suite} cannot use the NBD export {info.path}: {why}")


def _kind(path: str) -> str:
    """What is at ``path``, in words, for a refusal."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a link to nothing" if os.path.islink(path) else "no such device"
    except OSError as err:
        return f"it cannot be looked at: {err.strerror}"
    for test, words in ((stat.S_ISCHR, "a character device"), (stat.S_ISREG, "a regular file"),
                        (stat.S_ISDIR, "a directory")):
        if test(mode):
            return words
    return "neither a device nor a file"


def refuse_system_place(target: str) -> None:
    """A target that is not a block device in a system tree (``/dev`` but ``/dev/shm``,
    ``/proc``, ``/sys``, ``/run``), refused (TargetError, exit 3): a mistyped device name
    is not made a file there (docs/safety.md)."""
    path = os.path.abspath(target)
    why = system_place(path)
    if why is not None:
        raise TargetError(
            f"target {target} is not a block device ({_kind(path)}); {why}, and ssdlab makes "
            f"no test file in {SYSTEM_TREES_TEXT}: check the device's name (lsblk), or give "
            "a file path elsewhere"
        )


def check_file_target(target: str) -> None:
    """A target that is not a block device, refused (TargetError, exit 3) before anything
    else is asked of it: in a system tree (:func:`refuse_system_place`), not a regular
    file, or a file ssdlab did not create (docs/safety.md)."""
    refuse_system_place(target)
    path = os.path.abspath(target)
    if os.path.exists(path):
        if not os.path.isfile(path):
            raise TargetError(f"target {path} is neither a block device nor a regular file")
        if not is_ssdlab_file(path):
            raise TargetError(
                f"refusing {path}: it exists and was not created by ssdlab; "
                "give a new file path or a block device"
            )


def _resolve_file(path: str, size_bytes: int | None) -> tuple[TargetInfo, bool]:
    """An existing file ssdlab created, or a new one (never a foreign file)."""
    check_file_target(path)
    if os.path.exists(path):
        if size_bytes is not None and size_bytes != os.path.getsize(path):
            return planned_file(path, size_bytes), True
        return identify_file(path), False
    if not os.path.isdir(os.path.dirname(path)):
        raise TargetError(
            f"target {path} does not exist and its directory "
            f"{os.path.dirname(path)} does not exist either"
        )
    if size_bytes is None:
        raise UserError(
            f"target {path} does not exist; give --size to let ssdlab create "
            "a test file of that size (e.g. --size 1GiB)"
        )
    _check_free_space(path, size_bytes)
    return planned_file(path, size_bytes), True


@dataclass(frozen=True)
class PreparedTarget:
    """What every suite checks first: fio, the target (refused or accepted), the host."""

    info: TargetInfo
    create_file: bool  # the file target does not exist yet and will be created by the run
    host: dict[str, object]
    versions: dict[str, str]
    #: targets on other hosts (run/remote.py): the hosts, checked by their own agents
    remote: RemoteSet | None = dataclasses.field(default=None, kw_only=True)

    @property
    def cpus(self) -> int:
        return int(str(self.host.get("cpu_count") or os.cpu_count() or 1))


def prepare_device(request: TargetRequest, *, read_only: bool = False,
                   min_bytes: int | None = None) -> PreparedTarget:
    """:func:`prepare_target` of a request's ``--target``; with ``min_bytes``, a target
    smaller than that is refused."""
    base = planned_target(request) or prepare_target(
        request.device(), request.size_bytes, request.destroy_data, request.fio,
        read_only=read_only)
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


def checked_range(info: TargetInfo, pct: float) -> ActiveRange:
    """The target's active range (its first ``pct`` %, whole MiB), refused (one line) when
    it is smaller than :data:`MIN_ACTIVE_RANGE`."""
    rng = active_range(info.capacity_bytes, pct)
    check_capacity(info, rng.size_bytes)
    return rng


def check_nbd_purge(info: TargetInfo, purge: str) -> None:
    """An NBD export is purged by trim (``auto``) or not at all: no device commands."""
    if info.kind == NBD_KIND and purge not in ("auto", "none"):
        raise UserError(f"--purge {purge} applies to local block devices; an NBD export is "
                        "purged by trim through fio's nbd engine (--purge auto) or not at "
                        "all (--purge none)")


def check_device_purge(info: TargetInfo, purge: str) -> None:
    """The purge method suits the device, refused (one line) before the run: an NBD
    export's (check_nbd_purge); an NVMe purge on an NVMe namespace only, and not one the
    controller cannot do or that would erase other namespaces; an ATA secure erase or a
    SCSI sanitize on a whole disk of that command set only, on a libata port for the ATA
    erase, with its tool installed (targets/purge.py)."""
    check_nbd_purge(info, purge)
    if info.kind == "block" and "hosts" not in info.details:  # each host's agent checks its own
        check_sd_erase(info, purge)
    if not purge.startswith("nvme") or info.kind == NBD_KIND:
        return
    if info.device_class != "nvme":
        raise UserError(f"--purge {purge} needs an NVMe device; {info.path} is "
                        f"{info.device_class}")
    check_nvme_purge(info, purge)


def check_file_purge(info: TargetInfo, purge: str, *, allow_none: bool = True) -> None:
    """A purge method other than recreating the file (or none) is for block devices; an
    NVMe purge for NVMe devices, an ATA or SCSI erase for such disks (check_device_purge)."""
    if info.kind == "file" and purge not in (("auto", "none") if allow_none else ("auto",)):
        alternative = " or not at all (--purge none)" if allow_none else ""
        raise UserError(f"--purge {purge} applies to block devices; a file target is "
                        f"purged by recreating it (--purge auto){alternative}")
    check_device_purge(info, purge)


def prepare_target(
    target: str,
    size_bytes: int | None,
    destroy_data: DestroyData,
    fio: str = "fio",
    *,
    read_only: bool = False,
) -> PreparedTarget:
    """fio version, target identity and safety: UserError (one line) before any I/O. A
    target on an array ssdlab built records the array (``details["array"]``)."""
    versions = checked_versions(fio)
    if is_remote(target.split(",")[0]):
        return _prepare_remote(target, size_bytes, destroy_data, versions, read_only)
    info, create = resolve_target(target, size_bytes, destroy_data, read_only)
    if info.kind == NBD_KIND:
        check_fio_engine(fio)
    return PreparedTarget(with_array(info), create, host_info(), versions)


def _prepare_remote(spec: str, size_bytes: int | None, destroy_data: DestroyData,
                    versions: dict[str, str], read_only: bool) -> PreparedTarget:
    """Targets on other hosts, each checked by its host's agent (run/remote.py)."""
    from ssdlab.run.remote import prepare_remote
    if size_bytes is not None:
        raise UserError("--size applies to a test file ssdlab makes here; a target on another "
                        "host must exist")
    info, hosts = prepare_remote(spec, destroy_data, read_only=read_only)
    hosts.local_fio = versions["fio"]
    first = hosts.hosts[0].hello.host
    host: dict[str, object] = dict(first) if first is not None else host_info()
    host["coordinator"] = host_info().get("hostname")
    return PreparedTarget(info, False, host, versions, remote=hosts)


def with_array(info: TargetInfo) -> TargetInfo:
    """``info`` with the provenance of the ssdlab array it is (or is on), if any."""
    try:
        state = array_of_target(info.path)
    except UserError:
        return info
    if state is None:
        return info
    return dataclasses.replace(info, details={**info.details, "array": state.provenance()})


def checked_versions(fio: str) -> dict[str, str]:
    """The versions a run records (ssdlab, fio); a UserError when fio is missing or too
    old."""
    version = fio_version(fio)
    check_fio_version(version)
    return {"ssdlab": __version__, "fio": version}


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


A = TypeVar("A")


def stored_args(run: RunData, args_type: Callable[..., A]) -> A:
    """The arguments a stopped run was started with (its stored plan's ``args``), for
    ``resume``; a one-line UserError when there are none or another ssdlab stored them."""
    stored = run.plan.get("args")
    if not isinstance(stored, dict):
        raise UserError(f"run {run.run_id} has no stored options to resume from")
    try:
        return args_type(**stored)
    except TypeError as exc:
        raise UserError(f"run {run.run_id} was made by another ssdlab version and cannot be "
                        f"resumed by this one ({exc})") from None


def prepare_stored(run: RunData, request: TargetRequest, args_type: Callable[..., A]
                   ) -> tuple[PreparedTarget, A]:
    """For ``ssdlab resume``: a stopped run's target prepared again (the same one; see
    :func:`prepare_resume_target`) and the arguments it was started with."""
    args = stored_args(run, args_type)
    return prepare_resume_target(run, request.destroy_data, request.fio), args
