"""What each member device of a target did over a measured period, from two readings of
its ``/sys/block/NAME/stat``, and what the members say together: the write penalty (member
I/Os per host write) beside the level's textbook value, the imbalance between members,
and a slow-member verdict. Pure functions: the readings come from
:mod:`ssdlab.targets.members`.

The stat file's fields (Documentation/block/stat.rst): reads completed, reads merged,
sectors read, milliseconds reading, writes completed, writes merged, sectors written,
milliseconds writing, I/Os in flight, milliseconds with I/O in flight ("io_ticks"),
weighted milliseconds; kernels since 4.18 add four discard fields, since 5.5 two flush
fields. Sectors are 512 bytes whatever the device's sector size.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

SECTOR_BYTES = 512

#: member I/Os per host I/O for small random writes, by RAID level (read-modify-write
#: of data and parity for 5 and 6); ZFS raidz writes full stripes and has no such value
TEXTBOOK_WRITE_PENALTY: dict[str, float] = {
    "raid0": 1.0, "raid1": 2.0, "raid10": 2.0, "raid5": 4.0, "raid6": 6.0,
}

#: a member is slow when its mean wait per I/O is at least this many times its peers'
SLOW_WAIT_RATIO = 1.5
#: ... or, where the level spreads I/O evenly, it completes at most this share of its
#: peers' I/Os
SLOW_SHARE_RATIO = 0.5
#: fewer I/Os than this on a member over the period: too few to judge its wait
MIN_IOS_TO_JUDGE = 200
#: where a verdict must stand clear (over a whole level, :func:`slow_member`'s
#: ``clear_ratio``): the slowest member's figure is at least this many times the next
#: slow one's, or none is named (host noise slows a member of an emulated drive now and
#: then: a truly slow one stands far above it)
SLOW_CLEAR_RATIO = 1.5
#: how a verdict that names none for want of a clear margin begins
UNCLEAR = "no slow member stands clear"


@dataclass(frozen=True)
class DiskStat:
    """One reading of a block device's stat counters (cumulative since boot)."""

    reads: int
    read_sectors: int
    read_ms: int
    writes: int
    write_sectors: int
    write_ms: int
    in_flight: int
    io_ms: int


def parse_stat(text: str) -> DiskStat:
    """A ``/sys/block/NAME/stat`` line; ValueError when it is not one."""
    fields = text.split()
    if len(fields) < 11 or not all(f.isdigit() for f in fields):
        raise ValueError(f"not a block device stat line: {text.strip()[:80]!r}")
    n = [int(f) for f in fields]
    return DiskStat(reads=n[0], read_sectors=n[2], read_ms=n[3], writes=n[4],
                    write_sectors=n[6], write_ms=n[7], in_flight=n[8], io_ms=n[9])


@dataclass(frozen=True)
class MemberPeriod:
    """One member over one measured period."""

    name: str
    seconds: float
    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    read_wait_ms: int
    write_wait_ms: int
    busy_ms: int

    @property
    def ios(self) -> int:
        return self.reads + self.writes

    @property
    def read_iops(self) -> float:
        return self.reads / self.seconds

    @property
    def write_iops(self) -> float:
        return self.writes / self.seconds

    @property
    def read_mb_s(self) -> float:
        return self.read_bytes / self.seconds / 1e6

    @property
    def write_mb_s(self) -> float:
        return self.write_bytes / self.seconds / 1e6

    @property
    def mean_wait_ms(self) -> float | None:
        """Mean time an I/O spent in the device's queue and service (None without I/O)."""
        return (self.read_wait_ms + self.write_wait_ms) / self.ios if self.ios else None

    @property
    def utilisation_pct(self) -> float:
        return min(100.0, 100.0 * self.busy_ms / (self.seconds * 1000.0))


def member_period(name: str, before: DiskStat, after: DiskStat,
                  seconds: float) -> MemberPeriod:
    """The difference of two readings of one member taken ``seconds`` apart."""
    if seconds <= 0:
        raise ValueError(f"a measured period must last some time, not {seconds} s")
    if after.reads < before.reads or after.writes < before.writes:
        raise ValueError(f"{name}: its counters went backwards (device re-created?)")
    return MemberPeriod(
        name=name, seconds=seconds, reads=after.reads - before.reads,
        writes=after.writes - before.writes,
        read_bytes=(after.read_sectors - before.read_sectors) * SECTOR_BYTES,
        write_bytes=(after.write_sectors - before.write_sectors) * SECTOR_BYTES,
        read_wait_ms=after.read_ms - before.read_ms,
        write_wait_ms=after.write_ms - before.write_ms,
        busy_ms=after.io_ms - before.io_ms,
    )


@dataclass(frozen=True)
class WritePenalty:
    """Member I/Os per host write, beside the level's textbook value; ``writes_only``:
    the period had host reads too, so only member writes were counted."""

    measured: float | None
    textbook: float | None
    message: str
    writes_only: bool = False


def write_penalty(members: list[MemberPeriod], host_writes: float, level: str | None = None,
                  host_reads: float = 0) -> WritePenalty:
    """Member I/Os per host write over the same period. Where the host only wrote, every
    member read and write counts (the reads of a parity level's read-modify-write count,
    as the textbook's do). Where it read as well, member reads cannot be told apart (a
    host read may cost one member read, several, or none: unwritten extents and caches
    answer some without the device), so only member writes are counted, and the message
    says so. The host's counts are over the members' period: where fio measured a
    different one, scaled to it (hence not whole numbers)."""
    textbook = TEXTBOOK_WRITE_PENALTY.get(level or "")
    if host_writes <= 0:
        return WritePenalty(None, textbook, "no host writes: no write penalty")
    book = f" (textbook {textbook:g} for {level})" if textbook is not None else ""
    if host_reads > 0:
        measured = sum(m.writes for m in members) / host_writes
        return WritePenalty(measured, textbook,
                            f"write penalty {measured:.2f} member writes per host write"
                            f"{book}; the host read too, so member reads are not counted",
                            writes_only=True)
    measured = sum(m.ios for m in members) / host_writes
    return WritePenalty(measured, textbook,
                        f"write penalty {measured:.2f} member I/Os per host write{book}")


def imbalance(members: list[MemberPeriod]) -> float | None:
    """Most I/Os on a member over fewest (1.0 is even; None without I/O on every one)."""
    counts = [m.ios for m in members]
    if len(counts) < 2 or min(counts) == 0:
        return None
    return max(counts) / min(counts)


@dataclass(frozen=True)
class SlowVerdict:
    """The slow member, if one does markedly less or waits markedly longer than its peers."""

    member: str | None
    message: str


def slow_member(members: list[MemberPeriod], *, even_spread: bool,
                clear_ratio: float | None = None) -> SlowVerdict:
    """Judge each member against the median of its peers: its mean wait per I/O (at least
    :data:`SLOW_WAIT_RATIO` times theirs) and, where the level spreads I/O evenly
    (``even_spread``: striping, parity, mirrored writes), its share of the I/Os (at most
    :data:`SLOW_SHARE_RATIO` of theirs). Names the member that stands out most, or none;
    with ``clear_ratio``, only where its figure is at least that many times the next
    slow member's (else none, and the verdict names both)."""
    if len(members) < 2:
        return SlowVerdict(None, "one member: nothing to compare")
    findings: list[tuple[float, str, str]] = []
    for m in members:
        peers = [p for p in members if p is not m]
        finding = _wait_finding(m, peers) or (_share_finding(m, peers) if even_spread
                                              else None)
        if finding is not None:
            findings.append((finding[0], m.name, finding[1]))
    if not findings:
        return SlowVerdict(None, f"no slow member among {len(members)}")
    findings.sort(reverse=True)
    (top, name, why), *others = findings
    if clear_ratio is not None and others and top < clear_ratio * others[0][0]:
        _, second, its = others[0]
        return SlowVerdict(None, f"{UNCLEAR}: {name} {why}; {second} {its}"
                           f" (under {clear_ratio:g}x apart)")
    return SlowVerdict(name, f"slow member {name}: {why}")


def _wait_finding(m: MemberPeriod, peers: list[MemberPeriod]) -> tuple[float, str] | None:
    waits = [w for p in peers if p.ios >= MIN_IOS_TO_JUDGE
             and (w := p.mean_wait_ms) is not None]
    own = m.mean_wait_ms if m.ios >= MIN_IOS_TO_JUDGE else None
    if own is None or not waits:
        return None
    typical = statistics.median(waits)
    if typical <= 0:
        return None  # its peers waited for nothing measurable: no ratio to judge
    ratio = own / typical
    if ratio < SLOW_WAIT_RATIO:
        return None
    return ratio, f"waits {own:.2f} ms per I/O, {ratio:.1f}x its peers' {typical:.2f} ms"


def _share_finding(m: MemberPeriod, peers: list[MemberPeriod]) -> tuple[float, str] | None:
    typical = statistics.median(p.ios for p in peers)
    if typical < MIN_IOS_TO_JUDGE or m.ios > SLOW_SHARE_RATIO * typical:
        return None
    share = m.ios / typical
    return 1 / share if share else float("inf"), (
        f"completed {m.ios} I/Os, {share:.2f} of its peers' {typical:g}")
