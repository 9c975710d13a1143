"""Guardrails: refuse block targets that must not be written.

Each danger has one small check function ``(SafetyContext) -> message | None``;
:data:`BLOCK_CHECKS` lists them in the order they are run and :func:`check_block_target`
raises :class:`TargetError` with the first message. New checks are added to that tuple.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

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

__all__ = [
    "BLOCK_CHECKS",
    "ExclusiveHold",
    "SafetyContext",
    "check_block_target",
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


def _device_of_mount(entry: MountEntry, *, sysfs: Path) -> str | None:
    """The block device behind a mount (major:minor, else the /dev source for btrfs & co)."""
    name = name_for_devnum(entry.major, entry.minor, sysfs=sysfs) if entry.major else None
    if name is None and entry.source.startswith("/dev/"):
        name = _device_of_path(entry.source, sysfs=sysfs)
    return name


def _device_of_file(path: str, mounts: list[MountEntry], *, sysfs: Path) -> str | None:
    """The block device of the filesystem a file (loop backing file, swap file) lives on."""
    entry = mount_containing(path.removesuffix(" (deleted)"), mounts)
    return _device_of_mount(entry, sysfs=sysfs) if entry else None


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


def root_disks(*, sysfs: Path = SYSFS, proc: Path = PROC) -> frozenset[str]:
    """Kernel names of the whole disks holding /, /boot (and below) and swap."""
    mounts = read_mountinfo(proc=proc)
    starts = [
        _device_of_mount(entry, sysfs=sysfs)
        for entry in mounts
        if entry.mount_point in SYSTEM_MOUNT_POINTS or entry.mount_point.startswith("/boot/")
    ]
    starts.extend(_swaps(proc=proc, sysfs=sysfs, mounts=mounts))
    stacked: set[str] = set()
    for start in filter(None, starts):
        stacked |= _stack_below(start, sysfs=sysfs, mounts=mounts)
    return frozenset(name for name in stacked if not is_partition(name, sysfs=sysfs))


def _mounted(*, sysfs: Path, proc: Path) -> dict[str, str]:
    """Kernel name -> first mount point (or 'swap') of every mounted or swap block device."""
    mounts = read_mountinfo(proc=proc)
    used: dict[str, str] = {}
    for entry in mounts:
        name = _device_of_mount(entry, sysfs=sysfs)
        if name:
            used.setdefault(name, entry.mount_point)
    for name in _swaps(proc=proc, sysfs=sysfs, mounts=mounts):
        used.setdefault(name, SWAP)
    return used


def mounted_block_devices(*, sysfs: Path = SYSFS, proc: Path = PROC) -> frozenset[str]:
    """Kernel names of the block devices (partitions included) mounted or used as swap."""
    return frozenset(_mounted(sysfs=sysfs, proc=proc))


# --------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class SafetyContext:
    """What a check may look at."""

    info: TargetInfo
    destroy_data: bool
    writes: bool
    sysfs: Path = SYSFS
    proc: Path = PROC


Check = Callable[[SafetyContext], "str | None"]


def check_root_disk(ctx: SafetyContext) -> str | None:
    """The target is, is a partition of, or is built on a disk holding the running system."""
    below = _stack_below(ctx.info.name, sysfs=ctx.sysfs, mounts=None)
    if below & root_disks(sysfs=ctx.sysfs, proc=ctx.proc):
        return f"refusing {ctx.info.path}: it holds the running system (/)"
    return None


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


def check_destroy_data(ctx: SafetyContext) -> str | None:
    """Writing needs the explicit --destroy-data consent."""
    if ctx.writes and not ctx.destroy_data:
        return (
            f"refusing to write to {ctx.info.path} without --destroy-data: "
            "every byte on it will be overwritten"
        )
    return None


BLOCK_CHECKS: tuple[Check, ...] = (
    check_root_disk,
    check_mounted,
    check_holders,
    check_destroy_data,
)


def check_block_target(
    info: TargetInfo,
    *,
    destroy_data: bool,
    writes: bool,
    sysfs: Path = SYSFS,
    proc: Path = PROC,
) -> None:
    """Run :data:`BLOCK_CHECKS` in order; raise :class:`TargetError` with the first refusal."""
    if info.kind != "block":
        raise ValueError(f"check_block_target needs a block target, got a {info.kind}")
    ctx = SafetyContext(info, destroy_data, writes, sysfs, proc)
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
