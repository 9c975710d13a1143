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


def textbook_penalty(level: str | None, backend: str | None = None) -> float | None:
    """Member I/Os per small random host write that the level costs by the book (None: an
    unknown level, or ZFS raidz, which has no such value)."""
    if (backend or "", level or "") in NO_TEXTBOOK:
        return None
    return TEXTBOOK_WRITE_PENALTY.get(level or "")


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
                level: str | None, textbook: float | None, *, host_scale: float | None = 1.0
                ) -> RoundJudgement:
    """The round's write penalty (:func:`ssdlab.analysis.members.write_penalty`), imbalance
    and slow-member verdict (:func:`ssdlab.analysis.members.slow_member`: by share only
    where :func:`even_spread`, and elsewhere by wait only under comparable loads,
    :data:`COMPARABLE_LOAD`). ``host_scale``: the members' period over the one fio
    measured (its host I/Os are scaled to the members'); None: the two periods cannot be
    matched (a warm-up that could not be told apart), so no write penalty."""
    penalty = None if host_scale is None else write_penalty(
        periods, host_writes * host_scale, None, host_reads * host_scale).measured
    spread = imbalance(periods)
    if not even_spread(level) and spread is not None and spread > COMPARABLE_LOAD:
        return RoundJudgement(penalty, textbook, spread, None,
                              f"no slow member judged: loads differ {spread:.2f}x, so their "
                              "waits per I/O do not compare")
    slow = slow_member(periods, even_spread=even_spread(level))
    return RoundJudgement(penalty, textbook, spread, slow.member,
                          slow.message)


def round_message(label: str, members: int, judged: RoundJudgement, level: str | None,
                  unmatched: str | None = None) -> str:
    """``members over round 3: 4 members, write penalty 2.01 (textbook 2 for raid10),
    imbalance 1.03, no slow member among 4``; ``unmatched``: why the members' period and
    fio's could not be matched (no write penalty)."""
    parts = [f"{members} member{'s' if members != 1 else ''}"]
    if unmatched is not None:
        parts.append(f"write penalty not measured: {unmatched}")
    elif judged.write_penalty is not None:
        book = (f" (textbook {judged.textbook:g} for {level})" if judged.textbook is not None
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
