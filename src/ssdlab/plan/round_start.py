"""When each host's cells of a round started, on several hosts (a ``host-round`` event's
``start``): the skew between the hosts and the host that started late.

The coordinator picks an instant for each position of the round (engine/startat.py);
each host's jobs wait for it in that host's clock and say when they began waiting and
when they woke. Here those times are read back in the coordinator's clock (the host's
minus its clock offset, measured over the agent's connection to within
``clock_uncertainty_s``): the skew of a position is the latest host's wake minus the
earliest's; a host that woke more than :data:`SKEW_LIMIT_S` after the earliest one is
late, and is named with why (its job got to the start after the instant: it could not
wait; or it woke late).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ssdlab.jsonrecord import Record

#: hosts whose cells start further apart than this are named (docs/hosts.md)
SKEW_LIMIT_S = 0.05


@dataclass(frozen=True)
class HostStart(Record):
    """A host's start of each position of a round: when its (latest) job reached the
    waiter and when it woke, in seconds after the round's instant in the coordinator's
    clock (None: no job of the position said so), and the clock offset used."""

    clock_offset_s: float
    clock_uncertainty_s: float
    began_s: list[float | None] = field(default_factory=list)
    woke_s: list[float | None] = field(default_factory=list)


@dataclass(frozen=True)
class RoundStart(Record):
    """How the hosts' cells of a round started together: the round's skew (its first
    position's), each position's, each position's planned start after the instant (None:
    its jobs did not wait), how far ahead of fio's start the instant was, the late hosts
    (and why) and each host's times."""

    skew_s: float | None
    cell_skew_s: list[float | None] = field(default_factory=list)
    planned_s: list[float | None] = field(default_factory=list)
    lead_s: float = 0.0
    late: dict[str, str] = field(default_factory=dict)
    hosts: dict[str, HostStart] = field(default_factory=dict)


@dataclass(frozen=True)
class HostMarks:
    """What one host said of a round, in its own clock: each position's latest job's
    begin and wake (seconds since the epoch; None: no line), and its clock offset."""

    offset_s: float
    uncertainty_s: float
    began: Sequence[float | None]
    woke: Sequence[float | None]


def _spread(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) - min(known) if len(known) >= 2 else None


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def round_start(instant: float, planned: Sequence[float | None], lead_s: float,
                hosts: Mapping[str, HostMarks]) -> RoundStart:
    """The round's start on every host: ``instant`` (the coordinator's clock, seconds
    since the epoch) and each position's ``planned`` start after it."""
    starts: dict[str, HostStart] = {}
    for name, marks in hosts.items():
        def rel(values: Sequence[float | None], m: HostMarks = marks) -> list[float | None]:
            return [_r(None if v is None else v - m.offset_s - instant) for v in values]
        starts[name] = HostStart(round(marks.offset_s, 6), round(marks.uncertainty_s, 6),
                                 rel(marks.began), rel(marks.woke))
    skews = [_r(_spread([h.woke_s[p] if p < len(h.woke_s) else None
                         for h in starts.values()])) for p in range(len(planned))]
    late = _late(planned, starts)
    return RoundStart(skews[0] if skews else None, skews, [_r(p) for p in planned],
                      round(lead_s, 3), late, starts)


def _late(planned: Sequence[float | None], starts: Mapping[str, HostStart]
          ) -> dict[str, str]:
    """Each host that woke more than :data:`SKEW_LIMIT_S` after the earliest host at a
    position whose jobs waited, with why (its first such position)."""
    late: dict[str, str] = {}
    for position, at in enumerate(planned):
        if at is None:
            continue
        woke = {name: h.woke_s[position] for name, h in starts.items()
                if position < len(h.woke_s) and h.woke_s[position] is not None}
        if len(woke) < 2:
            continue
        first = min(v for v in woke.values() if v is not None)
        for name, value in woke.items():
            if value is None or name in late or value - first <= SKEW_LIMIT_S:
                continue
            began = starts[name].began_s[position]
            cell = "its first cell" if position == 0 else f"cell {position + 1}"
            why = (f"{cell} started {value - first:.3f} s after the first host's: ")
            if began is not None and began > at:
                why += (f"its job got to the start {began - at:.3f} s after the common "
                        "instant")
            else:
                why += "it woke late (its clock or its scheduler)"
            late[name] = why
    return late


@dataclass(frozen=True)
class SkewSummary:
    """A test's round start skews: how many rounds said one, their median and largest,
    and the rounds each late host was late in."""

    rounds: int
    median_s: float | None
    max_s: float | None
    late: dict[str, list[int]]

    def line(self) -> str:
        """One line for ``ssdlab show`` and the report's Hosts page."""
        if self.median_s is None or self.max_s is None:
            return "round start skew: not measured"
        text = (f"round start skew: median {self.median_s * 1000:.1f} ms, largest "
                f"{self.max_s * 1000:.1f} ms over {self.rounds} rounds (limit "
                f"{SKEW_LIMIT_S * 1000:.0f} ms)")
        for host, rounds in sorted(self.late.items()):
            text += f"; host {host} late in round{'s' if len(rounds) > 1 else ''} " + \
                ", ".join(map(str, rounds))
        return text


def summary(starts: Sequence[tuple[int, RoundStart]]) -> SkewSummary:
    """The skews of a test's rounds (round number, its start)."""
    skews = [s.skew_s for _, s in starts if s.skew_s is not None]
    late: dict[str, list[int]] = {}
    for number, start in starts:
        for host in start.late:
            late.setdefault(host, []).append(number)
    return SkewSummary(len(skews), statistics.median(skews) if skews else None,
                       max(skews) if skews else None, late)
