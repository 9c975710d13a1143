"""Read the complete lines appended to a growing fio log file since the last read.

fio writes its log files (``write_iops_log``, ``write_bw_log``, ``write_lat_log``,
``write_hist_log``) as text, one record per line. A reader that polls a file while a
writer appends to it can find the last line half written; :class:`LogTail` keeps a byte
offset and returns only lines that end with a newline, leaving a partial last line for
the next read. :meth:`LogTail.read_rest` also takes a last line without its newline, for
when the writer is known to have finished.

Note: fio 3.33 keeps its log samples in memory and writes the files when the job ends
(also with ``log_compression``), so during a run the files do not exist yet. Reading
incrementally still costs nothing and works for a writer that does flush as it goes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ssdlab.errors import ExitCode, UserError

__all__ = ["FioLogError", "Line", "LogTail"]


class FioLogError(UserError, ValueError):
    """A fio log file, or a line of one, that is not in fio's log format."""

    exit_code = ExitCode.FAILURE


@dataclass(frozen=True)
class Line:
    number: int  # 1-based line number in the file
    text: str  # without the line end


class LogTail:
    """Complete lines appended to ``path`` since the previous read.

    A file that does not exist yet reads as no lines. A file that shrank or was
    replaced (another run wrote a new file under the same name) raises
    :class:`FioLogError` rather than mixing two runs.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.offset = 0  # bytes consumed: the start of the first unread line
        self.lines_read = 0
        self._inode: tuple[int, int] | None = None

    def read_new(self) -> list[Line]:
        """Every line completed (newline-terminated) since the previous call."""
        return self._read(final=False)

    def read_rest(self) -> list[Line]:
        """Like :meth:`read_new`, plus a last line that lacks its newline."""
        return self._read(final=True)

    def _read(self, final: bool) -> list[Line]:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            if self._inode is not None:
                raise FioLogError(f"{self.path}: the log file disappeared while read") from None
            return []
        with handle:
            info = os.fstat(handle.fileno())
            inode = (info.st_dev, info.st_ino)
            if self._inode is not None and inode != self._inode:
                raise FioLogError(f"{self.path}: the log file was replaced while read")
            if info.st_size < self.offset:
                raise FioLogError(
                    f"{self.path}: the log file shrank from {self.offset} to "
                    f"{info.st_size} bytes while read (rewritten by another run?)"
                )
            self._inode = inode
            handle.seek(self.offset)
            data = handle.read()
        end = len(data) if final else data.rfind(b"\n") + 1
        if end <= 0:
            return []
        chunk = data[:end]
        self.offset += end
        lines = []
        for raw in chunk.split(b"\n"):
            self.lines_read += 1
            try:
                text = raw.decode("ascii")
            except UnicodeDecodeError:
                raise FioLogError(
                    f"{self.path}, line {self.lines_read}: not text (a byte outside ASCII)"
                ) from None
            lines.append(Line(self.lines_read, text.rstrip("\r")))
        if chunk.endswith(b"\n"):
            # split() leaves an empty piece after the final newline: not a line
            lines.pop()
            self.lines_read -= 1
        return lines
