"""What a target's members did over one measured round, judged: from the two readings of
their ``/sys/block/NAME/stat`` taken right before and after the round's fio run and the
host I/Os fio reported, the write penalty beside the level's textbook value, the imbalance
and the slow-member verdict. Pure: :mod:`ssdlab.analysis.members` does the arithmetic of
one member; the readings come from :mod:`ssdlab.targets.members`, the stored record of a
round is :class:`ssdlab.plan.member_rounds.MemberRound`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ssdlab.analysis.members import (
    TEXTBOOK_WRITE_PENALTY,
    MemberPeriod,
    imbalance,
    member_period,
    parse_stat,
    slow_member,
    write_penalty,
)

#: levels that spread reads and writes evenly over their members (striping, parity):
#: there a member with a markedly small share is slow. RAID 1 and 10 mirror every write,
#: but their reads may all go to one member of each mirror (btrfs picks the mirror by
#: process: a 4 KiB random-read fio job on a btrfs RAID 10 of four read from two of them
#: only); an unknown level (partitions, a plain disk, an array ssdlab did not build) is
#: not judged by share either.
EVEN_SPREAD_LEVELS = frozenset({"raid0", "raid5", "raid6"})
#: where the level does not spread I/O evenly and the members' loads differ more than
#: this (most I/Os on a member over fewest), their waits per I/O are not compared:
#: queueing alone makes the busier one wait longer (the mirror that serves the reads)
COMPARABLE_LOAD = 1.5
#: parity levels whose textbook read-modify-write the backend does not do: ZFS raidz
#: writes whole (variable-width) stripes, so no small-write penalty applies
NO_TEXTBOOK = frozenset({("zfs", "raid5"), ("zfs", "raid6")})


def even_spread(level: str | None) -> bool:
    """Whether the level spreads reads and writes evenly (see :data:`EVEN_SPREAD_LEVELS`)."""
    return level in EVEN_SPREAD_LEVELS


#: backends whose RAID 1 mirrors every write to every member (an n-way mirror: md and a
#: ZFS mirror vdev of n); btrfs raid1 keeps two copies however many devices it has
N_WAY_MIRRORS = frozenset({"md", "zfs"})


def textbook_penalty(level: str | None, backend: str | None = None,
                     members: int | None = None) -> float | None:
    """Member I/Os per small random host write that the level costs by the book (None: an
    unknown level, or ZFS raidz, which has no such value). RAID 1 of ``members`` on md or
    ZFS is an n-way mirror: every write goes to each of them, so its value is ``members``
    (4 on four drives), not the 2 of a two-way mirror."""
    if (backend or "", level or "") in NO_TEXTBOOK:
        return None
    if level == "raid1" and backend in N_WAY_MIRRORS and members is not None and members >= 2:
        return float(members)
    return TEXTBOOK_WRITE_PENALTY.get(level or "")


#: the write methods of md's RAID 5 and 6 (drivers/md/raid5.c, handle_stripe_dirtying)
WRITE_METHODS = {"rmw": "read-modify-write", "rcw": "reconstruct-write"}
#: md's rmw_level (/sys/block/mdX/md/rmw_level): 0 never read-modify-write, 1 where it
#: reads fewer blocks than reconstruct-write (the kernel's default where the level can),
#: 2 also where both read as many
RMW_DISABLED, RMW_ENABLED, RMW_PREFERRED = 0, 1, 2


@dataclass(frozen=True)
class SmallWrite:
    """What one small random host write (one page of one chunk) costs an md array of
    ``members``: member reads and writes, and for RAID 5/6 the write method md takes.
    ``rmw``/``rcw``: the cost of each method (parity levels only)."""

    level: str
    members: int
    method: str | None
    reads: float
    writes: float
    rmw: float | None = None
    rcw: float | None = None
    why: str = ""

    @property
    def penalty(self) -> float:
        return self.reads + self.writes

    def to_dict(self) -> dict[str, object]:
        return {"method": self.method, "method_name": WRITE_METHODS.get(self.method or ""),
                "member_reads": self.reads, "member_writes": self.writes,
                "penalty": self.penalty, "rmw_penalty": self.rmw, "rcw_penalty": self.rcw,
                "why": self.why}


def md_small_write(level: str, members: int, rmw_level: int | None = None
                   ) -> SmallWrite | None:
    """md's cost of a small random write on ``members`` drives (None: not an md level).

    RAID 0 writes one member, RAID 1 every member (an n-way mirror), RAID 10 (md's default
    near-2 layout) two. RAID 5 and 6 update one data page and the parity: read-modify-write
    reads the old data and parity (2 reads on RAID 5, 3 with RAID 6's second syndrome),
    reconstruct-write reads the stripe's other data pages (members - 2, members - 3). md
    takes read-modify-write only where it reads fewer blocks (``rmw_level`` 1, the
    default; 2 also at a tie, 0 never): on four drives RAID 5's methods tie at 2 reads and
    RAID 6's reconstruct-write reads 1 against 3, so md reconstructs, and RAID 6 costs 4
    member I/Os, not the textbook 6."""
    if level == "raid0":
        return SmallWrite(level, members, None, 0.0, 1.0)
    if level == "raid1":
        return SmallWrite(level, members, None, 0.0, float(members))
    if level == "raid10":
        return SmallWrite(level, members, None, 0.0, 2.0)
    if level not in ("raid5", "raid6"):
        return None
    parity = 1 if level == "raid5" else 2
    writes = 1.0 + parity
    rmw_reads, rcw_reads = 1.0 + parity, float(members - parity - 1)
    rule = RMW_ENABLED if rmw_level is None else rmw_level
    take_rmw = rule != RMW_DISABLED and (
        rmw_reads < rcw_reads or (rmw_reads == rcw_reads and rule == RMW_PREFERRED))
    tie = " (as many reads as read-modify-write)" if rmw_reads == rcw_reads else ""
    why = (f"rmw_level {rule}: read-modify-write reads {rmw_reads:g}, reconstruct-write "
           f"{rcw_reads:g} per write on {members} members; md takes "
           + ("read-modify-write" if take_rmw else f"reconstruct-write{tie}"))
    return SmallWrite(level, members, "rmw" if take_rmw else "rcw",
                      rmw_reads if take_rmw else rcw_reads, writes,
                      rmw_reads + writes, rcw_reads + writes, why)


#: ZFS's layouts: vdevs of whole copies (stripe 1, mirror every member, striped mirrors
#: pairs) and raidz's parity columns
ZFS_COPIES = {"raid0": 1, "raid10": 2}
ZFS_PARITY = {"raid5": 1, "raid6": 2}


def raidz_alloc_bytes(block_bytes: int, members: int, parity: int, ashift: int = 12) -> int:
    """What raidz allocates for one block (``vdev_raidz_asize``): its sectors, a parity
    sector per row of ``members - parity`` data sectors, rounded up to a multiple of
    ``parity + 1`` sectors (the padding that keeps free gaps usable)."""
    sector = 1 << ashift
    sectors = -(-block_bytes // sector)
    sectors += parity * -(-sectors // (members - parity))
    return -(-sectors // (parity + 1)) * (parity + 1) * sector


@dataclass(frozen=True)
class ZfsSmallWrite:
    """What the docs say ZFS writes for one small random host write of ``host_bytes`` to a
    zvol of ``block_bytes`` (its volblocksize) on ``members`` drives: ZFS is copy-on-write,
    so the write rewrites every volblock it touches, whole; each copy of it (one on a
    stripe, every member of a mirror, two in striped mirrors) or its raidz allocation
    (its sectors, a parity sector per row of data sectors, padded to a multiple of
    parity + 1 sectors: raidz writes whole, variable-width stripes, never a
    read-modify-write of parity). Not counted: metadata (indirect blocks, two copies
    each), the intent log, and transaction groups that write a volblock once for several
    host writes to it: the measured figure is above this by the metadata, below it where
    host writes share volblocks."""

    level: str
    members: int
    block_bytes: int
    host_bytes: int
    write_bytes: int  # member bytes written per host write
    write_ios: int  # member writes per host write, if ZFS merged none of them
    read_bytes: int  # member bytes read per host write when the old volblock is not cached
    why: str

    @property
    def bytes_per_host_byte(self) -> float:
        return self.write_bytes / self.host_bytes

    def to_dict(self) -> dict[str, object]:
        return {"level": self.level, "members": self.members, "block_bytes": self.block_bytes,
                "host_bytes": self.host_bytes, "member_write_bytes": self.write_bytes,
                "member_writes": self.write_ios, "member_read_bytes_uncached": self.read_bytes,
                "bytes_per_host_byte": self.bytes_per_host_byte, "why": self.why}


def zfs_small_write(level: str, members: int, block_bytes: int, ashift: int = 12,
                    host_bytes: int = 4096) -> ZfsSmallWrite:
    """The docs' cost of a small random host write to a zvol (:class:`ZfsSmallWrite`)."""
    sector = 1 << ashift
    blocks = -(-host_bytes // block_bytes)
    data = blocks * block_bytes
    sectors = -(-block_bytes // sector)
    if level in ZFS_PARITY:
        p = ZFS_PARITY[level]
        parity = p * -(-sectors // (members - p))
        allocated = raidz_alloc_bytes(block_bytes, members, p, ashift) // sector
        columns = min(members, sectors + p)
        written = blocks * allocated * sector
        why = (f"each {host_bytes // 1024} KiB write rewrites a {block_bytes // 1024} KiB "
               f"volblock: {sectors} data and {parity} parity sectors of "
               f"{sector // 1024} KiB over {columns} members, {allocated - sectors - parity} "
               f"of padding: {written // 1024} KiB written")
        return ZfsSmallWrite(level, members, block_bytes, host_bytes, written,
                             blocks * columns, data, why)
    copies = members if level == "raid1" else ZFS_COPIES.get(level, 1)
    written = data * copies
    what = {1: "once"}.get(copies, f"{copies} times")
    why = (f"each {host_bytes // 1024} KiB write rewrites a {block_bytes // 1024} KiB "
           f"volblock, written {what}: {written // 1024} KiB")
    return ZfsSmallWrite(level, members, block_bytes, host_bytes, written, blocks * copies,
                         data, why)


def method_from_reads(expected: SmallWrite, reads_per_write: float | None
                      ) -> tuple[str | None, str]:
    """The write method the measured member reads per host write show (the one whose
    reads are nearer), and how it was told: where both methods read as many blocks the
    counters cannot tell them apart, and md's rule (``expected``) names it."""
    if expected.method is None or expected.rmw is None or expected.rcw is None:
        return None, ""
    rmw_reads, rcw_reads = expected.rmw - expected.writes, expected.rcw - expected.writes
    if reads_per_write is None:
        return expected.method, f"{expected.method} by md's rule ({expected.why}); not measured"
    if rmw_reads == rcw_reads:
        return expected.method, (
            f"{expected.method} by md's rule: {reads_per_write:.2f} member reads per host "
            f"write, as both methods read ({rcw_reads:g}), so the counters cannot tell them "
            f"apart; {expected.why}")
    found = "rmw" if abs(reads_per_write - rmw_reads) < abs(reads_per_write - rcw_reads) \
        else "rcw"
    agree = "as md's rule says" if found == expected.method else \
        f"not the {expected.method} md's rule says"
    return found, (f"{found}: {reads_per_write:.2f} member reads per host write "
                   f"(read-modify-write reads {rmw_reads:g}, reconstruct-write "
                   f"{rcw_reads:g}), {agree}")


def periods_between(before: Mapping[str, str], after: Mapping[str, str],
                    seconds: float) -> list[MemberPeriod]:
    """Each member's period between two readings of its stat line (``before``/``after``:
    member name -> stat line), in the order of ``before``. ValueError when a line is not a
    stat line, a member is missing from ``after`` or its counters went backwards."""
    missing = [name for name in before if name not in after]
    if missing:
        raise ValueError(f"no second reading of {', '.join(missing)}")
    return [member_period(name, parse_stat(before[name]), parse_stat(after[name]), seconds)
            for name in before]


@dataclass(frozen=True)
class RoundJudgement:
    """What the members say together over one round."""

    write_penalty: float | None  # member I/Os (less one per host read) per host write
    textbook: float | None  # the level's value for small random writes
    imbalance: float | None  # most I/Os on a member over fewest
    slow_member: str | None
    verdict: str  # the slow-member verdict, one line


def judge_round(periods: list[MemberPeriod], host_reads: int, host_writes: int,
                level: str | None, textbook: float | None, *, host_scale: float | None = 1.0,
                clear_ratio: float | None = None) -> RoundJudgement:
    """The round's write penalty (:func:`ssdlab.analysis.members.write_penalty`), imbalance
    and slow-member verdict (:func:`ssdlab.analysis.members.slow_member`: by share only
    where :func:`even_spread`, and elsewhere by wait only under comparable loads,
    :data:`COMPARABLE_LOAD`). ``host_scale``: the members' period over the one fio
    measured (its host I/Os are scaled to the members'); None: the two periods cannot be
    matched (a warm-up that could not be told apart), so no write penalty;
    ``clear_ratio``: a slow member must stand that far clear of the next (a whole
    level's verdict)."""
    penalty = None if host_scale is None else write_penalty(
        periods, host_writes * host_scale, None, host_reads * host_scale).measured
    spread = imbalance(periods)
    if not even_spread(level) and spread is not None and spread > COMPARABLE_LOAD:
        return RoundJudgement(penalty, textbook, spread, None,
                              f"no slow member judged: loads differ {spread:.2f}x, so their "
                              "waits per I/O do not compare")
    slow = slow_member(periods, even_spread=even_spread(level), clear_ratio=clear_ratio)
    return RoundJudgement(penalty, textbook, spread, slow.member,
                          slow.message)


@dataclass(frozen=True)
class LevelSlow:
    """A level's slow member (None: none is named for it), how many of its rounds named
    that member (where none is named, how many named the member the rounds named most),
    and the outliers: the other members some rounds named, by how many rounds (host
    noise slows a member of an emulated drive now and then; it is said, not named)."""

    member: str | None
    rounds: int
    outliers: dict[str, int]


def level_slow(named: Mapping[str, int], rounds: int, *, over_level: bool = False,
               verdict: object = None) -> LevelSlow:
    """The slow member of a level from the members its rounds named (``named``: by member,
    how many of the ``rounds``). By rounds (md, btrfs): the member named in more than half
    of them, so a member slow in one or two of five rounds is an outlier, never the
    level's. ``over_level`` (ZFS): ``verdict``, the member judged over the whole level
    (its rounds may hold too few I/Os to judge; that verdict needs its member to stand
    clear of the next, :data:`ssdlab.analysis.members.SLOW_CLEAR_RATIO`)."""
    if over_level:
        member = verdict if isinstance(verdict, str) else None
    else:
        top = max(named, key=lambda m: named[m]) if named else None
        member = top if top is not None and 2 * named[top] > rounds else None
    count = named.get(member, 0) if member else max(named.values(), default=0)
    return LevelSlow(member, count, {m: n for m, n in named.items() if m != member})


def expectation_text(textbook: float, level: str | None, method: str | None) -> str:
    """``textbook 2 for raid10``, or for a parity level whose write method is known
    ``4 for raid6 by reconstruct-write``."""
    if method in WRITE_METHODS:
        return f"{textbook:g} for {level} by {WRITE_METHODS[method]}"
    return f"textbook {textbook:g} for {level}"


def round_message(label: str, members: int, judged: RoundJudgement, level: str | None,
                  unmatched: str | None = None, method: str | None = None) -> str:
    """``members over round 3: 4 members, write penalty 2.01 (textbook 2 for raid10),
    imbalance 1.03, no slow member among 4``; ``unmatched``: why the members' period and
    fio's could not be matched (no write penalty)."""
    parts = [f"{members} member{'s' if members != 1 else ''}"]
    if unmatched is not None:
        parts.append(f"write penalty not measured: {unmatched}")
    elif judged.write_penalty is not None:
        book = (f" ({expectation_text(judged.textbook, level, method)})"
                if judged.textbook is not None
                else f" ({level}: no textbook value)" if level else "")
        parts.append(f"write penalty {judged.write_penalty:.2f}{book}")
    else:
        parts.append("no host writes")
    if judged.imbalance is not None:
        parts.append(f"imbalance {judged.imbalance:.2f}")
    if members > 1:
        parts.append(judged.verdict)
    return f"members over {label}: {', '.join(parts)}"


#: host writes of at most this mean size are the "small writes" a textbook write penalty
#: is about (larger ones are split into several member I/Os of the block layer's size,
#: which inflates member I/Os per host write; their cost shows in bytes instead)
SMALL_WRITE_BYTES = 64 * 1024


def byte_penalty(periods: list[MemberPeriod], host_read_bytes: float,
                 host_write_bytes: float) -> float | None:
    """Member bytes moved per host byte written: every member's reads and writes, less the
    host's reads, over the host's writes (None without host writes). For small random
    writes it equals the I/O penalty; for large ones it is the cost that I/O counts
    blur (a mirror 2, a full-stripe RAID 5 write of n members n/(n-1)). The host's bytes
    are over the members' period (scaled to it, as :func:`judge_round`'s)."""
    if host_write_bytes <= 0:
        return None
    moved = sum(m.read_bytes + m.write_bytes for m in periods)
    return (moved - host_read_bytes) / host_write_bytes
