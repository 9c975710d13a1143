"""The member check before an array is built (methodology section 4): each member's short
read-only sequential read (MB/s) and 4 KiB random read (IOPS), and which members fall
behind their peers. Pure functions: the measurements come from
:mod:`ssdlab.run.member_check`.

The rule: a member is an *outlier* when its sequential MB/s or its random-read IOPS is
below ``ratio`` (default 0.8) of the median of its peers (every other member) on that
metric. The verdict names only such slow members. A member at ``1 / ratio`` of its peers
or more is marked "above its peers" in its line (a different model, a faster link) but is
not an outlier: a faster member does not hold an array back. With two members the peer is
the other member, so only the slower of a pair that differs can be named. Fewer than two
members: nothing to compare, no verdict. A metric whose peers measured nothing (median 0)
is not judged for that member.

Like with like: an SSD reads space that holds no data (trimmed or never written) faster
than data, so a member that holds data is not compared with peers that are empty. Where
the share of each member's space that holds data is known (``data_share``: a loop
device's backing file, the emulated SSD), a member's peers are only the members whose
share is within :data:`LIKE_SHARE` of its own; a member with no such peer is not judged,
and the verdict says why. Where it is not known, members compare as they are.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: a member below this share of its peers' median, on either metric, is an outlier
OUTLIER_RATIO = 0.8
#: members whose shares of space holding data differ by more than this do not compare
LIKE_SHARE = 0.25


@dataclass(frozen=True)
class MemberResult:
    """One member's check: its sequential read rate (MB/s, 10^6 bytes) and its 4 KiB
    random read IOPS."""

    name: str
    seq_read_mb_s: float
    rand_read_iops: float
    #: the share of its space that holds data, 0 to 1 (None: not known)
    data_share: float | None = None

    def __post_init__(self) -> None:
        for value in (self.seq_read_mb_s, self.rand_read_iops):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{self.name}: a rate must be finite and >= 0, got {value!r}")
        if self.data_share is not None and not 0 <= self.data_share <= 1:
            raise ValueError(f"{self.name}: a share must be 0 to 1, got {self.data_share!r}")

    def alike(self, other: MemberResult) -> bool:
        """Whether the two hold data on like shares of their space (or it is not known)."""
        if self.data_share is None or other.data_share is None:
            return True
        return abs(self.data_share - other.data_share) <= LIKE_SHARE


@dataclass(frozen=True)
class MemberCheckVerdict:
    """The outliers (names, in the order given), one sentence for them, and one line per
    member with its numbers against its peers'."""

    outliers: tuple[str, ...]
    message: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class _Metric:
    label: str  # as a sentence names it
    unit: str
    places: int
    field: str  # of MemberResult

    def value(self, r: MemberResult) -> float:
        return float(getattr(r, self.field))

    def text(self, value: float) -> str:
        return f"{value:,.{self.places}f} {self.unit}"


_METRICS = (_Metric("sequential read", "MB/s", 1, "seq_read_mb_s"),
            _Metric("4 KiB random read", "IOPS", 0, "rand_read_iops"))


def _compare(metric: _Metric, member: MemberResult, peers: Sequence[MemberResult],
             ratio: float) -> tuple[str, bool]:
    """``metric`` of ``member`` against its peers' median: its text, and whether it is
    below ``ratio`` of them."""
    own = metric.value(member)
    typical = statistics.median(metric.value(p) for p in peers)
    if typical <= 0:
        return f"{metric.label} {metric.text(own)} (its peers measured none)", False
    share = own / typical
    peers_text = f"{typical:,.{metric.places}f}"
    text = f"{metric.label} {metric.text(own)}, {share:.2f}x its peers' {peers_text}"
    if share >= 1 / ratio:
        text += " (above its peers)"
    return text, share < ratio


def outlier_verdict(results: Sequence[MemberResult],
                    ratio: float = OUTLIER_RATIO) -> MemberCheckVerdict:
    """Judge each member against the median of its peers on both metrics (module
    docstring): the verdict names every member below ``ratio`` on either."""
    if not 0 < ratio < 1:
        raise ValueError(f"ratio must be between 0 and 1, got {ratio!r}")
    names = [r.name for r in results]
    if len(set(names)) != len(names):
        raise ValueError(f"member names repeat: {names}")
    if len(results) < 2:
        alone = tuple(_numbers(r) for r in results)
        count = "no members" if not results else "one member"
        return MemberCheckVerdict((), f"member check: {count}, nothing to compare", alone)
    lines: list[str] = []
    outliers: list[tuple[str, list[str]]] = []
    unlike: list[MemberResult] = []
    for member in results:
        peers = [p for p in results if p is not member and member.alike(p)]
        if not peers:
            unlike.append(member)
            lines.append(f"{_numbers(member)}; not judged: no peer holds data on a like "
                         "share of its space")
            continue
        compared = [_compare(m, member, peers, ratio) for m in _METRICS]
        slow = [text for text, below in compared if below]
        mark = " -- slow" if slow else ""
        lines.append(f"{member.name}: {'; '.join(text for text, _ in compared)}{mark}")
        if slow:
            outliers.append((member.name, slow))
    n = len(results) - len(unlike)
    if n == 0:
        message = f"member check: cannot judge: {_unlike_text(unlike, results)}"
    elif not outliers:
        message = f"member check: no outlier among {n} members (none below {ratio:g}x its peers)"
    else:
        named = "; ".join(f"{name}: {' and '.join(why)}" for name, why in outliers)
        message = (f"member check: {len(outliers)} of {n} members below {ratio:g}x their "
                   f"peers: {named}")
    if unlike and n:
        message += f"; not judged: {_unlike_text(unlike, results)}"
    return MemberCheckVerdict(tuple(name for name, _ in outliers), message, tuple(lines))


def _numbers(r: MemberResult) -> str:
    return (f"{r.name}: sequential read {_METRICS[0].text(r.seq_read_mb_s)}, "
            f"4 KiB random read {_METRICS[1].text(r.rand_read_iops)}")


def _unlike_text(unlike: Sequence[MemberResult], results: Sequence[MemberResult]) -> str:
    """Why the ``unlike`` members were not judged, one clause."""
    def pct(share: float | None) -> str:
        return f"{share:.0%}".replace("%", " %")

    first = unlike[0]
    others = sorted({p.data_share or 0.0 for p in results if p is not first})
    held = (f"{first.name} holds data on {pct(first.data_share)} of its space, its peers on "
            f"{', '.join(pct(o) for o in others)}" if len(unlike) == 1 else
            "the members hold data on unlike shares of their space ("
            f"{', '.join(f'{r.name} {pct(r.data_share)}' for r in results)})")
    return (f"{held} (trimmed or never written): space without data reads faster than "
            "data on SSDs, so they do not compare (purge or fill the members alike first)")
