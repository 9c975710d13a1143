"""Directory targets: the file-system presets work in a directory the user names (a
local volume or a network share), in a subdirectory of their own that they remove
afterwards; nothing else in the directory is ever touched.

Also the honest handling of the page cache: :func:`drop_caches` syncs and drops the
kernel's caches for real (root only) and says what it did, so results record it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ssdlab.errors import TargetError
from ssdlab.targets.filetarget import SYSTEM_TREES_TEXT, system_place
from ssdlab.targets.identity import TargetInfo, mount_containing, read_mountinfo
from ssdlab.targets.network import share_facts
from ssdlab.units import format_bytes

WORK_PREFIX = "ssdlab-work-"
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "glusterfs", "fuse.sshfs")


@dataclass(frozen=True)
class DirInfo:
    """Where the files go: the directory, its file system, and what kind of storage."""

    path: str
    fs_type: str
    source: str
    mount_point: str
    network: bool
    free_bytes: int
    #: on a network file system: transport, server, export, options, link (network.py)
    network_facts: dict[str, object] | None = field(default=None, compare=False)

    def as_target(self, capacity_bytes: int) -> TargetInfo:
        """The directory as a run's target: its test file's size, its facts."""
        return TargetInfo(
            path=self.path, kind="directory", name=os.path.basename(self.path) or self.path,
            device_class="network share" if self.network else "directory", model=None,
            serial=None, firmware=None, capacity_bytes=capacity_bytes,
            logical_sector_bytes=512, physical_sector_bytes=512, rotational=None,
            numa_node=None, scheduler=None, discard_max_bytes=None, details=self.to_dict())

    def to_dict(self) -> dict[str, object]:
        facts = {"network": self.network_facts} if self.network_facts is not None else {}
        return {"path": self.path, "kind": "directory", "fs_type": self.fs_type,
                "source": self.source, "mount_point": self.mount_point,
                "network_share": self.network, "free_bytes": self.free_bytes, **facts}


def describe_dir(path: str) -> DirInfo:
    """Identify a directory target; TargetError when it is not a usable directory."""
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise TargetError(f"--dir {path}: not a directory")
    mounts = read_mountinfo()
    why = system_place(path, mounts)
    if why is not None:
        raise TargetError(f"--dir {path}: {why}, and ssdlab makes no work directory in "
                          f"{SYSTEM_TREES_TEXT}; give a directory elsewhere")
    if not os.access(real, os.W_OK | os.X_OK):
        raise TargetError(f"--dir {path}: not writable")
    entry = mount_containing(real, mounts)
    st = os.statvfs(real)
    fs_type = entry.fs_type if entry else "unknown"
    facts = share_facts(entry) if entry else None
    return DirInfo(real, fs_type, entry.source if entry else "", entry.mount_point if entry
                   else "/", fs_type in NETWORK_FS or fs_type.startswith("nfs") or
                   facts is not None, st.f_bavail * st.f_frsize, facts)


class WorkDir:
    """``with WorkDir(info, needed_bytes) as work:`` -- files go in ``work.path``, which is
    removed with everything in it on exit (also on errors and Ctrl-C)."""

    def __init__(self, info: DirInfo, needed_bytes: int) -> None:
        if needed_bytes > info.free_bytes:
            raise TargetError(f"--dir {info.path}: {format_bytes(needed_bytes)} needed, "
                              f"{format_bytes(info.free_bytes)} free")
        self.info = info
        self.path = Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=info.path))

    def __enter__(self) -> WorkDir:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.remove()

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def leftovers(self) -> list[str]:
        return sorted(os.listdir(self.path)) if self.path.exists() else []


@dataclass(frozen=True)
class DroppedCaches:
    """What :func:`drop_caches` did: synced, the caches dropped, and why not (None when
    they were)."""

    synced: bool
    dropped: bool
    why: str | None = None


def drop_caches() -> DroppedCaches:
    """``sync`` and ``echo 3 > /proc/sys/vm/drop_caches``; what happened, for the result."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as fh:
            fh.write("3\n")
    except OSError as exc:
        return DroppedCaches(True, False, exc.strerror or str(exc))
    return DroppedCaches(True, True)
