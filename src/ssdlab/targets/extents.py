"""How much of a file no write has reached: its holes and its allocated but unwritten
extents (``posix_fallocate`` on ext4, XFS and btrfs), which read as zeros without reading
the device. Read with the ``FS_IOC_FIEMAP`` ioctl, without syncing the file (nothing is
written). docs/consistency.md: reads of such space are not the drive's."""

from __future__ import annotations

import fcntl
import os
import struct

#: _IOWR('f', 11, struct fiemap)
FS_IOC_FIEMAP = 0xC020660B
FIEMAP_EXTENT_LAST = 0x1
FIEMAP_EXTENT_UNWRITTEN = 0x800
_HEAD = struct.Struct("=QQIIII")  # fm_start, fm_length, fm_flags, mapped, count, reserved
_EXTENT = struct.Struct("=QQQQQIIII")  # logical, physical, length, 2 reserved, flags, 3 reserved
#: extents asked for per call
BATCH = 256
#: a file of more extents than this is not told (reading them would take seconds)
MAX_EXTENTS = 200_000


def _extents(fd: int, size: int) -> list[tuple[int, int, int]]:
    """Every extent of the open file up to ``size``: (logical offset, length, flags)."""
    found: list[tuple[int, int, int]] = []
    start = 0
    while start < size:
        request = bytearray(_HEAD.pack(start, size - start, 0, 0, BATCH, 0)
                            + bytes(_EXTENT.size * BATCH))
        fcntl.ioctl(fd, FS_IOC_FIEMAP, request)
        mapped = _HEAD.unpack_from(request)[3]
        if mapped == 0:
            break
        last = False
        for n in range(mapped):
            logical, _, length, _, _, flags, _, _, _ = _EXTENT.unpack_from(
                request, _HEAD.size + n * _EXTENT.size)
            found.append((logical, length, flags))
            start = logical + length
            last = last or bool(flags & FIEMAP_EXTENT_LAST)
        if last:
            break
        if len(found) > MAX_EXTENTS:
            raise OSError("too many extents to tell")
    return found


def never_written_share(path: str) -> float | None:
    """The share of the regular file ``path`` that no write has reached (holes and
    unwritten extents), 0 to 1; None when it cannot be told (not a regular file, no
    FIEMAP on its file system)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size <= 0:
            return None
        extents = _extents(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)
    written = sum(max(0, min(logical + length, size) - logical)
                  for logical, length, flags in extents
                  if not flags & FIEMAP_EXTENT_UNWRITTEN and logical < size)
    return max(0.0, min(1.0, 1 - written / size))
