"""The member devices under a target, and their ``/sys/block/NAME/stat`` readings.

A target's members are the block devices at the bottom of its stack: the slaves of an md
or dm device (recursively), the disk of a partition, the devices of a btrfs file system
(``/sys/fs/btrfs/FSID/devices``) for a file or directory on one. A plain disk or loop
device is its own single member. :mod:`ssdlab.analysis.members` turns two readings into
per-member rates, the write penalty and the slow-member verdict.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ssdlab.errors import TargetError
from ssdlab.targets.identity import (
    PROC,
    SYSFS,
    block_dir,
    list_links,
    mount_containing,
    read_attr,
    read_mountinfo,
    whole_disk_of,
)
from ssdlab.targets.safety import device_of_mount


def members_of_device(name: str, *, sysfs: Path = SYSFS) -> list[str]:
    """Kernel names of the devices at the bottom of ``name``'s stack, sorted."""
    leaves: set[str] = set()
    pending, seen = [whole_disk_of(name, sysfs=sysfs)], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        below = list_links(block_dir(current, sysfs=sysfs) / "slaves")
        if below:
            pending.extend(whole_disk_of(b, sysfs=sysfs) for b in below)
        else:
            leaves.add(current)
    return sorted(leaves)


def _btrfs_of(device: str, *, sysfs: Path) -> Path | None:
    """``/sys/fs/btrfs/FSID`` of the btrfs file system ``device`` belongs to."""
    for fs in sorted((sysfs / "fs" / "btrfs").glob("*/devices")):
        if device in list_links(fs):
            return fs.parent
    return None


def btrfs_devices(device: str, *, sysfs: Path = SYSFS) -> list[str]:
    """The devices of the btrfs file system that ``device`` belongs to ([] if none)."""
    fs = _btrfs_of(device, sysfs=sysfs)
    return list_links(fs / "devices") if fs is not None else []


def btrfs_sector(path: str, *, sysfs: Path = SYSFS, proc: Path = PROC) -> int | None:
    """The sector size of the btrfs file system holding the file or directory ``path``
    (``/sys/fs/btrfs/FSID/sectorsize``: the unit its direct I/O must be aligned to, else
    it falls back to buffered I/O); None when ``path`` is not on btrfs or it is unknown."""
    entry = mount_containing(os.path.realpath(path), read_mountinfo(proc=proc))
    if entry is None or entry.fs_type != "btrfs":
        return None
    name = device_of_mount(entry, sysfs=sysfs)
    fs = _btrfs_of(name, sysfs=sysfs) if name is not None else None
    text = read_attr(fs / "sectorsize") if fs is not None else None
    return int(text) if text is not None and text.isdigit() and int(text) > 0 else None


def members_of_path(path: str, *, sysfs: Path = SYSFS, proc: Path = PROC) -> list[str]:
    """Members under a file or directory: those of its file system's device(s)."""
    real = os.path.realpath(path)
    entry = mount_containing(real, read_mountinfo(proc=proc))
    if entry is None:
        raise TargetError(f"{path}: no mounted file system holds it")
    name = device_of_mount(entry, sysfs=sysfs)
    if name is None:
        return []  # tmpfs, FUSE and the like: no block device below
    if entry.fs_type == "btrfs":
        devices = btrfs_devices(name, sysfs=sysfs)
        return sorted({m for d in devices or [name] for m in members_of_device(d, sysfs=sysfs)})
    return members_of_device(name, sysfs=sysfs)


def members_of_target(path: str, kind: str, name: str, *, sysfs: Path = SYSFS,
                      proc: Path = PROC) -> list[str]:
    """The members under a target: those of a block device (``kind`` "block", ``name`` its
    kernel name), else those of the file system holding the file or directory ``path``."""
    if kind == "block":
        return members_of_device(name, sysfs=sysfs)
    return members_of_path(path, sysfs=sysfs, proc=proc)


@dataclass(frozen=True)
class StatReading:
    """The stat lines of several devices and the monotonic time they were read at."""

    at: float
    lines: dict[str, str]


def read_stats(names: list[str], *, sysfs: Path = SYSFS,
               clock: Callable[[], float] = time.monotonic) -> StatReading:
    """Read every member's stat line at (as near as can be) one moment of ``clock``."""
    lines: dict[str, str] = {}
    at = clock()
    for name in names:
        text = read_attr(block_dir(name, sysfs=sysfs) / "stat")
        if text is None:
            raise TargetError(f"/dev/{name}: its I/O statistics cannot be read "
                              f"({block_dir(name, sysfs=sysfs) / 'stat'})")
        lines[name] = text
    return StatReading(at=at, lines=lines)


def data_share(device: str, *, sysfs: Path = SYSFS) -> float | None:
    """The share of a device's space that holds data, where it can be told without reading
    the device: a loop device's backing file, whose allocated blocks over its size leave
    out a sparse file's holes, trimmed ranges and the emulated SSD's unmapped pages (its
    ``st_blocks``). None elsewhere (a drive does not say)."""
    name = os.path.basename(os.path.realpath(device))
    backing = read_attr(block_dir(name, sysfs=sysfs) / "loop" / "backing_file")
    if not backing:
        return None
    try:
        info = os.stat(backing)
    except OSError:  # deleted, or another mount namespace's
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size <= 0:
        return None
    return min(1.0, info.st_blocks * 512 / info.st_size)
