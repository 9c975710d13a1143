"""fio job files for the file-system presets: files of a given size in a directory.

A :class:`FileJob` writes or reads ``files`` files of ``file_bytes`` each, one after the
other (``file_service_type=sequential``, one open at a time), sequentially in
``block_bytes`` transfers, one I/O in flight. Writes create each file as it is opened
(``create_on_open``, no preallocation), as an application writing a new file does, and
sync it: ``fsync_on_close`` syncs every file as it is closed and ``end_fsync`` at the end,
both inside the job, so a write phase's time includes getting the data to the device.
Pure functions: same job, same text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Direction = Literal["write", "read"]
DIRECTIONS: tuple[Direction, ...] = ("write", "read")


@dataclass(frozen=True)
class FileJob:
    """One fio job over ``files`` files named ``<prefix>.<n>`` in ``subdir`` of the work
    directory (n from 0)."""

    name: str
    subdir: str
    prefix: str
    rw: Direction
    block_bytes: int
    file_bytes: int
    files: int
    direct: bool
    ioengine: str = "psync"

    def __post_init__(self) -> None:
        if self.rw not in DIRECTIONS:
            raise ValueError(f"rw must be one of {DIRECTIONS}, got {self.rw!r}")
        if min(self.block_bytes, self.file_bytes, self.files) <= 0:
            raise ValueError("block size, file size and file count must be positive")
        if self.file_bytes % self.block_bytes:
            raise ValueError(f"file size {self.file_bytes} is not a multiple of the "
                             f"{self.block_bytes}-byte transfer")

    @property
    def io_bytes(self) -> int:
        return self.file_bytes * self.files

    def paths(self, base: str) -> list[str]:
        folder = f"{base}/{self.subdir}" if self.subdir else base
        return [f"{folder}/{self.prefix}.{n}" for n in range(self.files)]


def job_lines(job: FileJob, base: str) -> list[str]:
    """The job's section; ``base`` is the work directory."""
    directory = f"{base}/{job.subdir}" if job.subdir else base
    lines = [
        f"[{job.name}]",
        f"ioengine={job.ioengine}",
        f"direct={int(job.direct)}",
        "iodepth=1",
        f"directory={directory}",
        f"filename_format={job.prefix}.$filenum",
        f"nrfiles={job.files}",
        f"filesize={job.file_bytes}",
        f"bs={job.block_bytes}",
        "openfiles=1",
        "file_service_type=sequential",
        f"rw={job.rw}",
    ]
    if job.rw == "write":
        lines += ["create_on_open=1", "fallocate=none", "fsync_on_close=1", "end_fsync=1"]
    return lines


def render_file_job(job: FileJob, base: str, header: str = "") -> str:
    """The complete job file. ``header`` becomes leading ``;`` comment lines."""
    lines = [f"; {line}" for line in header.splitlines()]
    lines += job_lines(job, base)
    return "\n".join(lines) + "\n"
