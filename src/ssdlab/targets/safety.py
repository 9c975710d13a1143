"""Guardrails: refuse block targets that must not be written.

Each danger has one small check function ``(SafetyContext) -> message | None``;
:data:`BLOCK_CHECKS` lists them in the order they are run and :func:`check_block_target`
raises :class:`TargetError` with the first message. New checks are added to that tuple.

The first checks read only sysfs and procfs; the last ones look at the device itself
through :class:`DeviceAccess` (an exclusive open, closed at once, and the read-only
signature probe of :mod:`ssdlab.targets.signatures`). docs/safety.md lists them all.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Protocol

from ssdlab.errors import TargetError
from ssdlab.targets.identity import (
    PROC,
    SYSFS,
    MountEntry,
    TargetInfo,
    block_dir,
    is_partition,
    kernel_name_of,
    list_links,
    mount_containing,
    name_for_devnum,
    partitions_of,
    read_attr,
    read_mountinfo,
    whole_disk_of,
)
from ssdlab.targets.nvme import nvme_controller_of, nvme_namespaces_of
from ssdlab.targets.signature_probe import probe_device
from ssdlab.targets.signatures import DeviceProbe

__all__ = [
    "BLOCK_CHECKS",
    "DestroyData",
    "DeviceAccess",
    "ExclusiveHold",
    "RealDevices",
    "SafetyContext",
    "check_block_target",
    "device_access_for",
    "mounted_block_devices",
    "root_disks",
    "whole_disk_of",
]

#: Mount points whose devices count as "the running system".
SYSTEM_MOUNT_POINTS = ("/", "/boot")
SWAP = "swap"


# --------------------------------------------------------------------------- device resolution


def _device_of_path(path: str, *, sysfs: Path) -> str | None:
    """Kernel name of a /dev node; falls back to its basename when sysfs knows that name."""
    try:
        return kernel_name_of(path, sysfs=sysfs)
    except TargetError:
        name = os.path.basename(path)
        return name if block_dir(name, sysfs=sysfs).exists() else None


def device_of_mount(entry: MountEntry, *, sysfs: Path) -> str | None:
    """The block device behind a mount (major:minor, else the /dev source for btrfs & co)."""
    name = name_for_devnum(entry.major, entry.minor, sysfs=sysfs) if entry.major else None
    if name is None and entry.source.startswith("/dev/"):
        name = _device_of_path(entry.source, sysfs=sysfs)
    return name


def _device_of_file(path: str, mounts: list[MountEntry], *, sysfs: Path) -> str | None:
    """The block device of the filesystem a file (loop backing file, swap file) lives on."""
    entry = mount_containing(path.removesuffix(" (deleted)"), mounts)
    return device_of_mount(entry, sysfs=sysfs) if entry else None


def _swaps(*, proc: Path, sysfs: Path, mounts: list[MountEntry]) -> list[str]:
    """Kernel names of swap partitions, and of the devices holding swap files."""
    names = []
    for line in (read_attr(proc / "swaps") or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 2:
            continue
        path = fields[0].replace("\\040", " ")
        if fields[1] == "partition":
            name = _device_of_path(path, sysfs=sysfs)
        else:
            name = _device_of_file(path, mounts, sysfs=sysfs)
        if name:
            names.append(name)
    return names


def _stack_below(name: str, *, sysfs: Path, mounts: list[MountEntry] | None) -> set[str]:
    """``name`` and every device it is built on: whole disk, dm/md slaves recursively and,
    when ``mounts`` is given, the device holding a loop device's backing file."""
    seen: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        disk = whole_disk_of(current, sysfs=sysfs)
        pending.append(disk)
        pending.extend(list_links(block_dir(current, sysfs=sysfs) / "slaves"))
        pending.extend(list_links(block_dir(disk, sysfs=sysfs) / "slaves"))
        backing = read_attr(block_dir(disk, sysfs=sysfs) / "loop" / "backing_file")
        if mounts is not None and backing:
            below = _device_of_file(backing, mounts, sysfs=sysfs)
            pending.extend([below] if below else [])
    return seen


def system_disks(*, sysfs: Path = SYSFS, proc: Path = PROC) -> dict[str, str]:
    """Whole disk -> what of the running system it holds ('/', '/boot', 'swap on /dev/X'):
    the disks under /, /boot (and below) and swap, through partitions, dm/md and loop
    backing files."""
    mounts = read_mountinfo(proc=proc)
    starts = [
        (device_of_mount(entry, sysfs=sysfs), "/" if entry.mount_point == "/" else "/boot")
        for entry in mounts
        if entry.mount_point in SYSTEM_MOUNT_POINTS or entry.mount_point.startswith("/boot/")
    ]
    starts += [(name, f"swap on /dev/{name}") for name in _swaps(proc=proc, sysfs=sysfs,
                                                                 mounts=mounts)]
    held: dict[str, str] = {}
    for start, what in sorted(starts, key=lambda item: _use_rank(item[1])):
        for name in _stack_below(start, sysfs=sysfs, mounts=mounts) if start else ():
            if not is_partition(name, sysfs=sysfs):
                held.setdefault(name, what)
    return held


def _use_rank(what: str) -> int:
    """/ before /boot before swap: the most telling reason is the one reported."""
    return {"/": 0, "/boot": 1}.get(what, 2)


def root_disks(*, sysfs: Path = SYSFS, proc: Path = PROC) -> frozenset[str]:
    """Kernel names of the whole disks holding /, /boot (and below) and swap."""
    return frozenset(system_disks(sysfs=sysfs, proc=proc))


def _mounted(*, sysfs: Path, proc: Path) -> dict[str, str]:
    """Kernel name -> first mount point (or 'swap') of every mounted or swap block device."""
    mounts = read_mountinfo(proc=proc)
    used: dict[str, str] = {}
    for entry in mounts:
        name = device_of_mount(entry, sysfs=sysfs)
        if name:
            used.setdefault(name, entry.mount_point)
    for name in _swaps(proc=proc, sysfs=sysfs, mounts=mounts):
        used.setdefault(name, SWAP)
    return used


def mounted_block_devices(*, sysfs: Path = SYSFS, proc: Path = PROC) -> frozenset[str]:
    """Kernel names of the block devices (partitions included) mounted or used as swap."""
    return frozenset(_mounted(sysfs=sysfs, proc=proc))


# --------------------------------------------------------------------------- the device


#: --destroy-data as parsed: False (not given), True (the bare flag), or the text of
#: --destroy-data=SERIAL|PATH, a confirmation naming the device to overwrite
DestroyData = bool | str


class DeviceAccess(Protocol):
    """What the checks may learn from the device node itself; nothing here writes."""

    def exclusive_open_error(self, path: str) -> str | None:
        """Why ``O_EXCL`` cannot be had on ``path`` (it is released at once), or None."""

    def probe(self, path: str, partitions: tuple[str, ...]) -> DeviceProbe:
        """The read-only signature probe of ``path`` and of its partition nodes."""

    def same_device(self, path: str, other: str) -> bool | None:
        """Whether both paths are the same block device; None if ``other`` is not one."""


class RealDevices:
    """The device nodes in /dev, opened read-only."""

    def exclusive_open_error(self, path: str) -> str | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
        except OSError as err:
            return _open_failure(path, err)
        os.close(fd)
        return None

    def probe(self, path: str, partitions: tuple[str, ...]) -> DeviceProbe:
        return probe_device(path, [part for part in partitions if os.path.exists(part)])

    def same_device(self, path: str, other: str) -> bool | None:
        try:
            mine, theirs = os.stat(path), os.stat(other)
        except (OSError, ValueError):
            return None
        if not (stat.S_ISBLK(mine.st_mode) and stat.S_ISBLK(theirs.st_mode)):
            return None
        return mine.st_rdev == theirs.st_rdev


class SysfsOnly:
    """A fake sysfs tree (unit tests) has no device nodes: nothing to open or probe."""

    def exclusive_open_error(self, path: str) -> str | None:
        return None

    def probe(self, path: str, partitions: tuple[str, ...]) -> DeviceProbe:
        return DeviceProbe(path, ())

    def same_device(self, path: str, other: str) -> bool | None:
        return os.path.abspath(path) == os.path.abspath(other)


def device_access_for(sysfs: Path) -> DeviceAccess:
    """The real devices for the real /sys; none for a fake sysfs tree."""
    return RealDevices() if sysfs == SYSFS else SysfsOnly()


# --------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class SafetyContext:
    """What a check may look at."""

    info: TargetInfo
    destroy_data: DestroyData
    writes: bool
    sysfs: Path = SYSFS
    proc: Path = PROC
    device: DeviceAccess = field(default_factory=RealDevices)


Check = Callable[[SafetyContext], "str | None"]


def check_root_disk(ctx: SafetyContext) -> str | None:
    """The target is, is a partition of, or is built on a disk holding the running system."""
    below = _stack_below(ctx.info.name, sysfs=ctx.sysfs, mounts=None)
    held = system_disks(sysfs=ctx.sysfs, proc=ctx.proc)
    uses = sorted({held[name] for name in below if name in held}, key=_use_rank)
    if not uses:
        return None
    if uses[0].startswith("swap"):
        return f"refusing {ctx.info.path}: it holds the running system ({uses[0]}); " \
            "swapoff it first"
    return f"refusing {ctx.info.path}: it holds the running system ({uses[0]})"


def check_mounted(ctx: SafetyContext) -> str | None:
    """The target or one of its partitions is mounted or used as swap."""
    mounted = _mounted(sysfs=ctx.sysfs, proc=ctx.proc)
    for name in [ctx.info.name, *partitions_of(ctx.info.name, sysfs=ctx.sysfs)]:
        where = mounted.get(name)
        if where == SWAP:
            return f"refusing {ctx.info.path}: /dev/{name} is used as swap; swapoff it first"
        if where is not None:
            return f"refusing {ctx.info.path}: /dev/{name} is mounted on {where}; unmount it first"
    return None


def check_holders(ctx: SafetyContext) -> str | None:
    """Something (device-mapper, md, bcache) is built on the target or on a partition of it."""
    for name in [ctx.info.name, *partitions_of(ctx.info.name, sysfs=ctx.sysfs)]:
        holders = list_links(block_dir(name, sysfs=ctx.sysfs) / "holders")
        if holders:
            holder = _describe_holder(holders[0], sysfs=ctx.sysfs)
            return (
                f"refusing {ctx.info.path}: /dev/{name} is in use by {holder}; "
                "stop that device (dmsetup remove, mdadm --stop) first"
            )
    return None


def _describe_holder(name: str, *, sysfs: Path) -> str:
    dm_name = read_attr(block_dir(name, sysfs=sysfs) / "dm" / "name")
    return f"/dev/{name} ({dm_name})" if dm_name else f"/dev/{name}"


def _namespace_use(name: str, ctx: SafetyContext, mounted: dict[str, str],
                   system: dict[str, str]) -> str | None:
    """What of the system uses the namespace ``name`` (or a partition of it), or None."""
    if name in system:
        return f"holds the running system ({system[name]})"
    for part in [name, *partitions_of(name, sysfs=ctx.sysfs)]:
        if part in mounted:
            where = mounted[part]
            return "is used as swap" if where == SWAP else f"is mounted on {where}" + (
                f" (as /dev/{part})" if part != name else "")
        holders = list_links(block_dir(part, sysfs=ctx.sysfs) / "holders")
        if holders:
            return f"is in use by {_describe_holder(holders[0], sysfs=ctx.sysfs)}"
    if ctx.device.exclusive_open_error(f"/dev/{name}"):
        return "is in use by another program (exclusive open failed)"
    return None


def check_controller_siblings(ctx: SafetyContext) -> str | None:
    """Writing to an NVMe namespace whose controller has another namespace in use
    (mounted, swap, the running system, held by md/dm or open exclusively): the test's
    writes wear and load the same controller and flash, and an NVMe purge may erase
    beyond the target (a sanitize always does)."""
    disk = whole_disk_of(ctx.info.name, sysfs=ctx.sysfs)
    if not ctx.writes or not re.fullmatch(r"nvme\d+n\d+", disk):
        return None
    controller = nvme_controller_of(disk, sysfs=ctx.sysfs)
    siblings = [n for n in nvme_namespaces_of(controller, sysfs=ctx.sysfs) if n != disk] \
        if controller else []
    if not siblings:
        return None
    mounted = _mounted(sysfs=ctx.sysfs, proc=ctx.proc)
    system = system_disks(sysfs=ctx.sysfs, proc=ctx.proc)
    for sibling in siblings:
        use = _namespace_use(sibling, ctx, mounted, system)
        if use is not None:
            return (f"refusing {ctx.info.path}: it shares controller {controller} with "
                    f"/dev/{sibling}, which {use}; a test writes to the same controller "
                    "and flash; nothing was written")
    return None


def check_exclusive(ctx: SafetyContext) -> str | None:
    """Another program holds the target (or a partition) open exclusively: a mount in
    another namespace, mkfs, LVM, another ssdlab run. Tried with O_EXCL, released at once."""
    error = ctx.device.exclusive_open_error(ctx.info.path)
    return f"refusing {ctx.info.path}: {error}; nothing was written" if error else None


def _names_a_path(confirmation: str) -> bool:
    return confirmation.startswith((".", "~")) or "/" in confirmation


def check_confirmation(ctx: SafetyContext) -> str | None:
    """--destroy-data=SERIAL|PATH must name this very device (its serial, or a path to it)."""
    named, path = ctx.destroy_data, ctx.info.path
    if not isinstance(named, str):
        return None
    if _names_a_path(named):
        same = ctx.device.same_device(path, os.path.expanduser(named))
        if same is None:
            return (f"refusing {path}: the confirmation names {named}, which is not a block "
                    "device; nothing was written")
        if not same:
            return (f"refusing {path}: the confirmation names {named}, another device than "
                    f"{path}; nothing was written")
        return None
    serial = ctx.info.serial
    shared = _namespaces_sharing_serial(ctx.info, ctx.sysfs)
    if shared:
        return (f"refusing {path}: the confirmation names serial {named}, but that is its "
                f"controller's, shared by {', '.join(shared)}; nothing was written (confirm "
                f"with --destroy-data={path})")
    if serial is None:
        return (f"refusing {path}: the confirmation names serial {named}, but {path} has no "
                f"serial number; nothing was written (confirm with --destroy-data={path})")
    if named.strip() != serial:
        return (f"refusing {path}: the confirmation names {named}, but {path} has serial "
                f"{serial}; nothing was written")
    return None


def _namespaces_sharing_serial(info: TargetInfo, sysfs: Path) -> list[str]:
    """The namespaces of the target's NVMe controller where it has several (they share
    its serial number, which then names none of them); [] elsewhere."""
    disk = whole_disk_of(info.name, sysfs=sysfs)
    controller = nvme_controller_of(disk, sysfs=sysfs) if disk.startswith("nvme") else None
    namespaces = nvme_namespaces_of(controller, sysfs=sysfs) if controller else []
    return [f"/dev/{name}" for name in namespaces] if len(namespaces) > 1 else []


def _how_to_confirm(info: TargetInfo, sysfs: Path = SYSFS) -> str:
    shared = info.serial and _namespaces_sharing_serial(info, sysfs)
    serial = f" (or its serial {info.serial})" if info.serial and not shared else ""
    return f"--destroy-data={info.path}{serial}"


def check_destroy_data(ctx: SafetyContext) -> str | None:
    """Writing needs --destroy-data; a device carrying a signature (partition table,
    filesystem, RAID/LVM member, swap ...) needs the confirmation naming it."""
    if not ctx.writes:
        return None
    if isinstance(ctx.destroy_data, str):  # check_confirmation: it names this very device
        return None
    info = ctx.info
    partitions = tuple(f"/dev/{name}" for name in partitions_of(info.name, sysfs=ctx.sysfs))
    found = ctx.device.probe(info.path, partitions)
    if found.blank:
        if ctx.destroy_data:
            return None
        return (
            f"refusing to write to {info.path} without --destroy-data: "
            "every byte on it will be overwritten"
        )
    if found.signatures or any(sigs for _, sigs in found.partitions):
        what = f"{info.path} carries {found.describe()}"
    else:
        what = f"cannot tell what {info.path} carries ({'; '.join(found.errors)})"
    return (f"{what}; nothing was written. To destroy it, confirm with "
            f"{_how_to_confirm(info, ctx.sysfs)}")


BLOCK_CHECKS: tuple[Check, ...] = (
    check_root_disk,
    check_mounted,
    check_holders,
    check_controller_siblings,
    check_exclusive,
    check_confirmation,
    check_destroy_data,
)


def check_block_target(
    info: TargetInfo,
    *,
    destroy_data: DestroyData,
    writes: bool,
    sysfs: Path = SYSFS,
    proc: Path = PROC,
    device: DeviceAccess | None = None,
) -> None:
    """Run :data:`BLOCK_CHECKS` in order; raise :class:`TargetError` with the first refusal.

    ``device`` defaults to the real device nodes when ``sysfs`` is the real /sys, and to
    none (no exclusive open, no probe) for a fake sysfs tree.
    """
    if info.kind != "block":
        raise ValueError(f"check_block_target needs a block target, got a {info.kind}")
    access = device if device is not None else device_access_for(sysfs)
    ctx = SafetyContext(info, destroy_data, writes, sysfs, proc, access)
    for check in BLOCK_CHECKS:
        message = check(ctx)
        if message is not None:
            raise TargetError(message)


# --------------------------------------------------------------------------- exclusive open


class ExclusiveHold:
    """Hold ``O_EXCL`` on a block device for a whole run so nobody can mount it meanwhile.

    fio opens the device without ``O_EXCL`` and is not affected.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> ExclusiveHold:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
        except OSError as err:
            raise TargetError(_open_failure(self.path, err)) from None
        if not stat.S_ISBLK(os.fstat(fd).st_mode):
            os.close(fd)
            raise TargetError(f"target {self.path} is not a block device")
        self.fd = fd
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _open_failure(path: str, err: OSError) -> str:
    if err.errno == errno.EBUSY:
        return f"{path} is in use by another program (exclusive open failed)"
    if err.errno == errno.ENOENT:
        return f"target {path} does not exist"
    if err.errno in (errno.EACCES, errno.EPERM):
        return f"cannot open {path}: permission denied; run ssdlab as root"
    return f"cannot open {path}: {err.strerror}"
