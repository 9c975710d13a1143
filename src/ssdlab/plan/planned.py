"""How long a plan takes, said before it runs: the last line of every ``--dry-run``.

A plan's time is the time of its timed I/O and its pauses, a range where a rule decides
how much of it runs (steady state: from a test's window to its most rounds; a ladder's
stopping rule; the peak finder's search), and a list of what it leaves out: work whose
time is the drive's own (preconditioning, a purge, a size-based write of N bytes, a
database's loading). The live line's ETA while a run runs comes from the same figures
(run/progress.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ssdlab.units import format_bytes, format_duration

#: fio's own time around each invocation (start-up, job set-up, teardown), for estimates
FIO_RUN_OVERHEAD_S = 0.3


def span_text(low_s: float, high_s: float) -> str:
    """A time that is a range (``4:10-9:30``), or one value when both ends agree."""
    low, high = format_duration(low_s), format_duration(high_s)
    return low if low == high else f"{low}-{high}"


@dataclass(frozen=True)
class PlannedTime:
    """A plan's time: ``low_s`` to ``high_s`` (what ``decides`` between them); what is not
    in the figure: ``io_bytes`` of size-based I/O that takes as long as the drive needs
    (``io_what``: what it is) and ``plus`` (other steps, a few words each)."""

    low_s: float
    high_s: float
    decides: str = ""
    io_bytes: int = 0
    io_what: tuple[str, ...] = ()
    plus: tuple[str, ...] = ()

    @classmethod
    def fixed(cls, seconds: float) -> PlannedTime:
        return cls(seconds, seconds)

    @classmethod
    def io(cls, n_bytes: int, what: str) -> PlannedTime:
        """Size-based I/O only: ``n_bytes`` of ``what`` at the drive's speed."""
        return cls(0.0, 0.0, io_bytes=n_bytes, io_what=(what,))

    @classmethod
    def step(cls, what: str) -> PlannedTime:
        """A step whose time is not known before it runs."""
        return cls(0.0, 0.0, plus=(what,))

    def __add__(self, other: PlannedTime) -> PlannedTime:
        decides = "; ".join(dict.fromkeys(part for d in (self.decides, other.decides) if d
                                          for part in d.split("; ")))
        return PlannedTime(self.low_s + other.low_s, self.high_s + other.high_s, decides,
                           self.io_bytes + other.io_bytes,
                           tuple(dict.fromkeys((*self.io_what, *other.io_what))),
                           tuple(dict.fromkeys((*self.plus, *other.plus))))

    def times(self, n: int) -> PlannedTime:
        """``n`` of this plan one after another."""
        return PlannedTime(self.low_s * n, self.high_s * n, self.decides, self.io_bytes * n,
                           self.io_what, self.plus)

    def text(self) -> str:
        """``planned time: 4:10-9:30 (steady state decides), plus 1.5 GiB of I/O at the
        drive's speed (preconditioning), plus a purge before each test``."""
        ranged = format_duration(self.low_s) != format_duration(self.high_s)
        out = f"planned time: {span_text(self.low_s, self.high_s)}"
        out += f" ({self.decides} decides)" if self.decides and ranged else ""
        if self.io_bytes:
            out += (f", plus {format_bytes(self.io_bytes)} of I/O at the drive's speed "
                    f"({', '.join(self.io_what)})")
        out += "".join(f", plus {what}" for what in self.plus)
        return out


def total(parts: Iterable[PlannedTime]) -> PlannedTime:
    """The plans one after another."""
    out = PlannedTime(0.0, 0.0)
    for part in parts:
        out = out + part
    return out


def longest(parts: Iterable[PlannedTime]) -> PlannedTime:
    """Plans run at once (a set's runs, docs/sets.md): as long as the longest of them."""
    items = list(parts)
    if not items:
        return PlannedTime(0.0, 0.0)
    out = total(items)
    return PlannedTime(max(p.low_s for p in items), max(p.high_s for p in items), out.decides,
                       max(p.io_bytes for p in items), out.io_what, out.plus)
