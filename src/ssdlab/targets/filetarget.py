"""ssdlab's own test files: created fully allocated, marked, recreated as a purge, removed.

A file is ssdlab's when it carries the mark: the ``user.ssdlab.target`` extended attribute
or, on filesystems without user xattrs, a sidecar ``FILE.ssdlab`` naming its device and inode.
ssdlab never reuses, recreates or removes a file without the mark.

Where: never in the trees of the kernel and the running system, ``/dev``, ``/proc``,
``/sys`` and ``/run``, nor on a file system of theirs mounted elsewhere (devtmpfs, proc,
sysfs ...), judged where the path really leads (its symlinks resolved). A mistyped device
name (``/dev/nvme9n9``) is thus refused, not made a file in the RAM-backed ``/dev``.
``/dev/shm`` (and ``/run/shm``, a link to it) is the one exception: it is the system's
place for files in RAM, and the demo's test file lives there.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from datetime import UTC, datetime

from ssdlab.errors import TargetError, UserError
from ssdlab.targets.identity import (
    MountEntry,
    TargetInfo,
    identify_file,
    mount_containing,
    read_mountinfo,
)
from ssdlab.targets.purge import PurgeOutcome

MARK_XATTR = "user.ssdlab.target"
SIDECAR_SUFFIX = ".ssdlab"
PART_SUFFIX = ".ssdlab-part"
CREATED_BY = "ssdlab"
#: the trees of the kernel and the running system: no test file is ever made in them
SYSTEM_TREES = ("/dev", "/proc", "/sys", "/run")
#: ... but for RAM's place for files (a tmpfs; /run/shm links to it)
FILE_TREES_ALLOWED = ("/dev/shm",)
#: the file systems of those trees, wherever they are mounted
SYSTEM_FS = frozenset({"devtmpfs", "proc", "sysfs", "devpts", "cgroup", "cgroup2", "securityfs",
                       "debugfs", "tracefs", "configfs", "pstore", "bpf", "efivarfs",
                       "mqueue", "fusectl", "binfmt_misc"})
SYSTEM_TREES_TEXT = "/dev, /proc, /sys or /run (/dev/shm excepted)"


def _inside(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree + "/")


def system_place(path: str, mounts: list[MountEntry] | None = None) -> str | None:
    """Why ``path`` is no place for a test file or a work directory (its system tree, or
    the system file system it is on), judged where it really leads; None when it is one."""
    real = os.path.realpath(path)
    if any(_inside(real, tree) for tree in FILE_TREES_ALLOWED):
        return None
    for tree in SYSTEM_TREES:
        if _inside(real, tree):
            linked = real != os.path.abspath(path)
            return f"it leads to {real}, under {tree}" if linked else f"it is under {tree}"
    entry = mount_containing(real, read_mountinfo() if mounts is None else mounts)
    if entry is not None and entry.fs_type in SYSTEM_FS:
        return f"it is on the system's {entry.fs_type} file system at {entry.mount_point}"
    return None


def check_file_place(path: str) -> None:
    """Refuse (TargetError, exit 3) a test file at ``path`` in a system tree."""
    why = system_place(path)
    if why is not None:
        raise TargetError(f"refusing {path}: {why}, and ssdlab makes no test file in "
                          f"{SYSTEM_TREES_TEXT}; give a path elsewhere")


def create_file_target(path: str, size_bytes: int) -> TargetInfo:
    """Create (or reuse) ssdlab's test file ``path`` of ``size_bytes``, fully allocated."""
    if size_bytes <= 0:
        raise UserError(f"the size of file target {path} must be positive, got {size_bytes}")
    target = os.path.abspath(path)
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise TargetError(f"refusing {target}: its directory {parent} does not exist")
    check_file_place(target)
    reclaimable = 0
    if os.path.lexists(target):
        if not is_ssdlab_file(target):
            raise TargetError(f"refusing {target}: it exists and was not created by ssdlab")
        st = os.stat(target)
        if st.st_size == size_bytes:
            return identify_file(target)
        reclaimable = st.st_blocks * 512
    _check_free_space(parent, size_bytes, reclaimable)
    if reclaimable:
        remove_file_target(target)
    # Built under a temporary name and linked into place only when allocated and marked,
    # so that a crash at any moment never leaves an unmarked file at ``path`` (which the
    # next run would refuse as not ssdlab's).
    part = os.path.join(parent, f".{os.path.basename(target)}{PART_SUFFIX}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(part)  # left by a crash while creating: only ever ssdlab's
    _allocate(part, size_bytes)
    _mark(part, size_bytes, final=target)
    try:
        os.link(part, target)
    except FileExistsError:
        _discard(part)
        raise TargetError(f"refusing {target}: it exists and was not created by ssdlab"
                          ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
    _fsync_directory(parent)
    return identify_file(target)


def is_ssdlab_file(path: str) -> bool:
    """True when ``path`` is a regular file carrying ssdlab's mark."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    return _xattr_mark(path) is not None or _sidecar_mark(path, st) is not None


def recreate_file_target(path: str, size_bytes: int) -> PurgeOutcome:
    """The purge of a file target: unlink it and create it again, fully allocated."""
    target = os.path.abspath(path)
    if os.path.lexists(target) and not is_ssdlab_file(target):
        raise TargetError(f"refusing {target}: it exists and was not created by ssdlab")
    started = time.monotonic()
    try:
        remove_file_target(target)
        # btrfs (and others) return the file's space only when the transaction commits:
        # without it, statfs still counts the removed file and the new one "does not fit"
        os.sync()
        create_file_target(target, size_bytes)
    except (UserError, OSError) as err:
        return PurgeOutcome("file-recreate", False, time.monotonic() - started, None, str(err))
    detail = f"recreated {target} ({_human(size_bytes)}, fully allocated)"
    return PurgeOutcome("file-recreate", True, time.monotonic() - started, None, detail)


def remove_file_target(path: str) -> None:
    """Remove ssdlab's test file and its sidecar; refuse a file without the mark."""
    target = os.path.abspath(path)
    sidecar = target + SIDECAR_SUFFIX
    if os.path.lexists(target):
        if not is_ssdlab_file(target):
            raise TargetError(f"refusing to remove {target}: it was not created by ssdlab")
        os.unlink(target)
    if _read_sidecar(sidecar) is not None:  # ours (or left over from a file already gone)
        os.unlink(sidecar)


def supports_direct_io(path: str) -> bool:
    """True when ``path`` can be opened with O_DIRECT (tmpfs before 6.6, some FUSE: no)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    return True


# --------------------------------------------------------------------------- the mark


def _mark_payload(size_bytes: int) -> dict[str, object]:
    created_at = datetime.now(UTC).isoformat(timespec="seconds")
    return {"created_by": CREATED_BY, "size": size_bytes, "created_at": created_at}


def _mark(target: str, size_bytes: int, final: str | None = None) -> None:
    """Set the xattr mark, or write the sidecar (beside ``final``, the name the file will
    have) when the filesystem has no user xattrs."""
    payload = _mark_payload(size_bytes)
    try:
        os.setxattr(target, MARK_XATTR, json.dumps(payload).encode())
        return
    except OSError as err:
        if err.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM, errno.EACCES):
            _discard(target)
            raise TargetError(f"cannot mark {target} as ssdlab's: {err.strerror}") from None
    st = os.stat(target)
    payload.update(st_dev=st.st_dev, st_ino=st.st_ino)
    try:
        with open((final or target) + SIDECAR_SUFFIX, "w", encoding="utf-8") as handle:
            json.dump(payload, handle)
    except OSError as err:
        _discard(target)
        raise TargetError(f"cannot write {final or target}{SIDECAR_SUFFIX}: {err.strerror}"
                          ) from None


def _xattr_mark(path: str) -> dict[str, object] | None:
    try:
        raw = os.getxattr(path, MARK_XATTR, follow_symlinks=False)
    except OSError:
        return None
    return _ours(_loads(raw.decode(errors="replace")))


def _sidecar_mark(path: str, st: os.stat_result) -> dict[str, object] | None:
    mark = _read_sidecar(path + SIDECAR_SUFFIX)
    if mark is None or mark.get("st_dev") != st.st_dev or mark.get("st_ino") != st.st_ino:
        return None
    return mark


def _read_sidecar(path: str) -> dict[str, object] | None:
    """ssdlab's mark read from a sidecar file, or None."""
    try:
        with open(path, encoding="utf-8") as handle:
            return _ours(_loads(handle.read(65536)))
    except OSError:
        return None


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _ours(data: object) -> dict[str, object] | None:
    if isinstance(data, dict) and data.get("created_by") == CREATED_BY:
        return data
    return None


# --------------------------------------------------------------------------- allocation


def _check_free_space(directory: str, size_bytes: int, reclaimable: int) -> None:
    vfs = os.statvfs(directory)
    available = vfs.f_bavail * vfs.f_frsize + reclaimable
    if available < size_bytes:
        mount = mount_containing(os.path.realpath(directory), read_mountinfo())
        where = mount.mount_point if mount else directory
        raise TargetError(
            f"not enough free space on {where}: need {_human(size_bytes)}, have {_human(available)}"
        )


def _allocate(target: str, size_bytes: int) -> None:
    """Create the file exclusively and allocate every block of it."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        raise TargetError(f"refusing {target}: it exists and was not created by ssdlab") from None
    except OSError as err:
        raise TargetError(f"cannot create {target}: {err.strerror}") from None
    try:
        os.posix_fallocate(fd, 0, size_bytes)
        os.fsync(fd)
    except OSError as err:
        os.close(fd)
        _discard(target)
        raise TargetError(
            f"cannot allocate {_human(size_bytes)} for {target}: {err.strerror}"
        ) from None
    os.close(fd)
    _fsync_directory(os.path.dirname(target))


def _fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the data is synced already
    finally:
        os.close(fd)


def _discard(target: str) -> None:
    """Remove a file ssdlab just created and could not finish."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(target)


def _human(size_bytes: int) -> str:
    if size_bytes < 1024:
        return f"{size_bytes} B"
    value = size_bytes / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
