"""The stored record of what a target's members did over one measured round, and what a
test's rounds say together (issue 15: every member, every round).

While a suite runs on a target with member devices (an array, a partition, a loop device,
a file on a btrfs file system), the run reads every member's ``/sys/block/NAME/stat``
right before and after each measured fio run and stores one event of kind
:data:`EVENT_KIND` per round, its detail a :class:`MemberRound`. The report, ``ssdlab
show`` and a comparison of levels read them back with :func:`member_rounds` and
:func:`summarise`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ssdlab.analysis.member_rounds import (
    SMALL_WRITE_BYTES,
    RoundJudgement,
    byte_penalty,
    expectation_text,
    judge_round,
    round_message,
)
from ssdlab.analysis.members import MemberPeriod
from ssdlab.jsonrecord import Record, key

#: the kind of the events that hold a round's members
EVENT_KIND = "members"


@dataclass(frozen=True)
class MemberStat(Record):
    """One member over one round: the differences of its stat counters."""

    name: str
    seconds: float
    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    read_wait_ms: int
    write_wait_ms: int
    busy_ms: int

    @classmethod
    def of(cls, p: MemberPeriod) -> MemberStat:
        return cls(p.name, p.seconds, p.reads, p.writes, p.read_bytes, p.write_bytes,
                   p.read_wait_ms, p.write_wait_ms, p.busy_ms)

    def period(self) -> MemberPeriod:
        """As :mod:`ssdlab.analysis.members` computes with it (IOPS, MB/s, mean wait,
        utilisation are its properties)."""
        return MemberPeriod(self.name, self.seconds, self.reads, self.writes,
                            self.read_bytes, self.write_bytes, self.read_wait_ms,
                            self.write_wait_ms, self.busy_ms)


@dataclass(frozen=True)
class MemberRound(Record):
    """One measured round (one fio run) of a test, member by member, judged.

    ``round_no`` is the round's number (stored as ``round``); a fio run that a suite cuts
    into several rounds (Host Idle Recovery's return to baseline, the SLC probe's slices)
    has one record, from its first round to ``last_round``."""

    OMIT_NONE: ClassVar[frozenset[str]] = frozenset({"last_round", "host_seconds", "note",
                                                      "method", "array"})

    round_no: int = key("round")
    phase: str = ""
    seconds: float = 0.0
    level: str | None = None
    members: list[MemberStat] = field(default_factory=list)
    host_reads: int = 0  # read I/Os fio completed over the round (every job)
    host_writes: int = 0
    host_read_bytes: int = 0
    host_write_bytes: int = 0
    write_penalty: float | None = None  # member I/Os less host reads, per host write
    textbook: float | None = None
    imbalance: float | None = None
    slow_member: str | None = None
    verdict: str = ""  # the slow-member verdict
    last_round: int | None = None
    #: after a warm-up: the seconds fio measured (its host I/Os are over them), against the
    #: members' ``seconds`` from the first reading after the warm-up; None: one period
    host_seconds: float | None = None
    #: why the members' period and fio's could not be matched (no write penalty)
    note: str | None = None
    #: the write method ``textbook`` is the cost of (md RAID 5/6: rmw or rcw)
    method: str | None = None
    #: the array device's own counters over the members' period (its
    #: ``/sys/block/mdX/stat``): the host's I/Os as the array counted them; None where
    #: the target is no array device or a warm-up split the period
    array: MemberStat | None = None

    @classmethod
    def build(cls, round_no: int, phase: str, seconds: float, periods: list[MemberPeriod], *,
              host: tuple[int, int, int, int], level: str | None, textbook: float | None,
              last_round: int | None = None, host_seconds: float | None = None,
              note: str | None = None, method: str | None = None,
              array: MemberPeriod | None = None) -> MemberRound:
        """The record of a round from its members' periods and ``host``'s (read I/Os,
        write I/Os, read bytes, write bytes) over ``host_seconds`` (None: ``seconds``)."""
        reads, writes, read_bytes, write_bytes = host
        scale = _scale(seconds, host_seconds, note)
        judged = judge_round(periods, reads, writes, level, textbook, host_scale=scale)
        return cls(round_no, phase, seconds, level, [MemberStat.of(p) for p in periods],
                   reads, writes, read_bytes, write_bytes, judged.write_penalty,
                   judged.textbook, judged.imbalance, judged.slow_member, judged.verdict,
                   last_round, host_seconds, note, method,
                   MemberStat.of(array) if array is not None else None)

    @property
    def host_scale(self) -> float | None:
        """The host's I/Os are scaled by this to the members' period (None: not matched)."""
        return _scale(self.seconds, self.host_seconds, self.note)

    @property
    def label(self) -> str:
        return round_label(self.round_no, self.last_round)

    @property
    def message(self) -> str:
        """The event's one line (see :func:`ssdlab.analysis.member_rounds.round_message`)."""
        judged = RoundJudgement(self.write_penalty, self.textbook, self.imbalance,
                                self.slow_member, self.verdict)
        return round_message(self.label, len(self.members), judged, self.level, self.note,
                             self.method)

    def periods(self) -> list[MemberPeriod]:
        return [m.period() for m in self.members]

    @property
    def member_ios(self) -> int:
        return sum(m.reads + m.writes for m in self.members)

    @property
    def mean_host_write_bytes(self) -> float | None:
        return self.host_write_bytes / self.host_writes if self.host_writes else None

    @property
    def small_writes(self) -> bool:
        """Whether its host writes are the small writes a textbook penalty is about."""
        size = self.mean_host_write_bytes
        return size is not None and size <= SMALL_WRITE_BYTES

    @property
    def array_penalty(self) -> float | None:
        """Member I/Os, less one member read per array read, per write the array itself
        counted over the same period (None without the array's counters or writes): the
        write penalty without fio's counts or their scaling."""
        if self.array is None or not self.array.writes:
            return None
        return (self.member_ios - self.array.reads) / self.array.writes

    @property
    def reads_per_write(self) -> float | None:
        """Member reads per host write, where the host only wrote (None otherwise): the
        reads a parity level's write method makes."""
        scale = self.host_scale
        if scale is None or self.host_reads or not self.host_writes:
            return None
        return sum(m.reads for m in self.members) / (self.host_writes * scale)

    @property
    def byte_penalty(self) -> float | None:
        """Member bytes per host byte written (see
        :func:`ssdlab.analysis.member_rounds.byte_penalty`)."""
        scale = self.host_scale
        if scale is None:
            return None
        return byte_penalty(self.periods(), self.host_read_bytes * scale,
                            self.host_write_bytes * scale)


def round_label(round_no: int, last_round: int | None) -> str:
    """``round 3``, or ``rounds 3-40`` for a fio run cut into several."""
    if last_round is not None and last_round != round_no:
        return f"rounds {round_no}-{last_round}"
    return f"round {round_no}"


def _scale(seconds: float, host_seconds: float | None, note: str | None) -> float | None:
    """The members' period over fio's (1 when they are one; None when not matched)."""
    if note is not None:
        return None
    return seconds / host_seconds if host_seconds else 1.0


class _Event(Protocol):
    @property
    def test(self) -> str | None: ...

    @property
    def kind(self) -> str: ...

    @property
    def detail(self) -> Mapping[str, Any] | None: ...


def member_rounds(events: Iterable[_Event]) -> dict[str, list[MemberRound]]:
    """A run's member rounds by test (in the order the tests first have one), each test's
    in round order: ``member_rounds(run.events)``. StoredDataError when a stored one does
    not have the record's shape."""
    out: dict[str, list[MemberRound]] = {}
    for event in events:
        if event.kind != EVENT_KIND or event.detail is None:
            continue
        test = event.test or ""
        out.setdefault(test, []).append(
            MemberRound.from_json(event.detail, f"{test} members event"))
    for rounds in out.values():
        rounds.sort(key=lambda r: r.round_no)
    return out


@dataclass(frozen=True)
class MembersSummary:
    """What a test's member rounds say together."""

    members: list[str]  # every member seen, in the order first seen
    rounds: int
    level: str | None
    #: median write penalty over the rounds of small host writes (:attr:`MemberRound.
    #: small_writes`), or over every round with host writes when none was small
    write_penalty: float | None
    penalty_rounds: int  # how many rounds that median is of
    small_writes: bool  # whether those were rounds of small writes
    textbook: float | None
    max_imbalance: float | None
    slow: dict[str, int]  # member -> rounds it was named the slow member in
    #: rounds whose warm-up could not be told apart from the measured period
    unmatched: int = 0
    #: the write method ``textbook`` is the cost of (md RAID 5/6)
    method: str | None = None
    #: median member reads per host write over the rounds the penalty is of, where the
    #: host only wrote (None otherwise): what tells md's write methods apart
    reads_per_write: float | None = None

    @property
    def message(self) -> str:
        """``members loop0, loop1: write penalty 2.00 (median of 6 rounds of small writes;
        textbook 2 for raid1), imbalance at most 1.02, no slow member in 12 rounds``."""
        parts = []
        if self.write_penalty is not None:
            of = f"median of {self.penalty_rounds} round{'s' if self.penalty_rounds != 1 else ''}"
            of += " of small writes" if self.small_writes else " of large writes"
            book = (f"; {expectation_text(self.textbook, self.level, self.method)}"
                    if self.textbook is not None else "")
            parts.append(f"write penalty {self.write_penalty:.2f} ({of}{book})")
        elif self.unmatched:
            parts.append(f"write penalty not measured (the warm-up could not be told apart "
                         f"from the measured period in {self.unmatched} of {self.rounds} "
                         "rounds)")
        else:
            parts.append("no host writes")
        if self.max_imbalance is not None:
            parts.append(f"imbalance at most {self.max_imbalance:.2f}")
        if len(self.members) > 1:
            parts.append(_slow_text(self.slow, self.rounds))
        return f"members {', '.join(self.members)}: {', '.join(parts)}"


def _slow_text(slow: Mapping[str, int], rounds: int) -> str:
    if not slow:
        return f"no slow member in {rounds} round{'s' if rounds != 1 else ''}"
    named = sorted(slow.items(), key=lambda item: (-item[1], item[0]))
    return "slow member " + ", ".join(f"{name} in {n} of {rounds} rounds"
                                      for name, n in named)


def summarise(rounds: Sequence[MemberRound]) -> MembersSummary:
    """A test's member rounds together: the median write penalty (of the rounds of small
    writes where there are any), the largest imbalance, how often each member was slow."""
    members: list[str] = []
    for r in rounds:
        members += [m.name for m in r.members if m.name not in members]
    written = [r for r in rounds if r.write_penalty is not None]
    small = [r for r in written if r.small_writes]
    judged = small or written
    penalties = [r.write_penalty for r in judged if r.write_penalty is not None]
    imbalances = [r.imbalance for r in rounds if r.imbalance is not None]
    slow: dict[str, int] = {}
    for r in rounds:
        if r.slow_member is not None:
            slow[r.slow_member] = slow.get(r.slow_member, 0) + 1
    level = next((r.level for r in rounds if r.level), None)
    textbook = next((r.textbook for r in rounds if r.textbook is not None), None)
    reads = [r.reads_per_write for r in judged if r.reads_per_write is not None]
    return MembersSummary(members, len(rounds), level,
                          statistics.median(penalties) if penalties else None,
                          len(penalties), bool(small), textbook,
                          max(imbalances) if imbalances else None, slow,
                          sum(1 for r in rounds if r.note is not None and r.host_writes),
                          next((r.method for r in rounds if r.method), None),
                          statistics.median(reads) if reads else None)
