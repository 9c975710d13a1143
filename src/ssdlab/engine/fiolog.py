"""fio's per-I/O and averaged logs (``write_lat_log``, ``write_bw_log``, ``write_iops_log``).

Each line is ``time_ms, value, direction, block_size[, offset[, priority]]`` (fio's
HOWTO, "Log File Formats"). Direction is 0 read, 1 write, 2 trim. With
``log_offset=1`` the offset is present; with ``log_avg_msec`` unset every I/O has a
line, stamped with its completion time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

DIRECTIONS = {0: "read", 1: "write", 2: "trim"}


class FioLogError(ValueError):
    """A line of a fio log that is not in fio's log format."""


@dataclass(frozen=True)
class LogEntry:
    time_ms: int
    value: int  # latency in ns, bandwidth in KiB/s or IOPS, by log kind
    direction: str
    block_size: int
    offset: int | None


def parse_log_lines(lines: Iterable[str], source: str = "fio log") -> list[LogEntry]:
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        try:
            if len(fields) < 4:
                raise ValueError
            direction = DIRECTIONS[int(fields[2])]
            offset = int(fields[4]) if len(fields) > 4 else None
            entries.append(
                LogEntry(int(fields[0]), int(fields[1]), direction, int(fields[3]), offset)
            )
        except (ValueError, KeyError):
            raise FioLogError(f"{source}, line {number}: not a fio log line: {line!r}") from None
    return entries


def read_log(path: str | Path) -> list[LogEntry]:
    with open(path, encoding="ascii", errors="replace") as handle:
        return parse_log_lines(handle, str(path))


def completions(entries: Iterable[LogEntry], direction: str) -> list[tuple[float, int]]:
    """(completion time in s, bytes) of every I/O of one direction, in time order."""
    picked = [(e.time_ms / 1000.0, e.block_size) for e in entries if e.direction == direction]
    picked.sort(key=lambda item: item[0])
    return picked
