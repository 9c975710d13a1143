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
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: a member below this share of its peers' median, on either metric, is an outlier
OUTLIER_RATIO = 0.8


@dataclass(frozen=True)
class MemberResult:
    """One member's check: its sequential read rate (MB/s, 10^6 bytes) and its 4 KiB
    random read IOPS."""

    name: str
    seq_read_mb_s: float
    rand_read_iops: float

    def __post_init__(self) -> None:
        for value in (self.seq_read_mb_s, self.rand_read_iops):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{self.name}: a rate must be finite and >= 0, got {value!r}")


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
        alone = tuple(f"{r.name}: sequential read {_METRICS[0].text(r.seq_read_mb_s)}, "
                      f"4 KiB random read {_METRICS[1].text(r.rand_read_iops)}"
                      for r in results)
        count = "no members" if not results else "one member"
        return MemberCheckVerdict((), f"member check: {count}, nothing to compare", alone)
    lines: list[str] = []
    outliers: list[tuple[str, list[str]]] = []
    for member in results:
        peers = [p for p in results if p is not member]
        compared = [_compare(m, member, peers, ratio) for m in _METRICS]
        slow = [text for text, below in compared if below]
        mark = " -- slow" if slow else ""
        lines.append(f"{member.name}: {'; '.join(text for text, _ in compared)}{mark}")
        if slow:
            outliers.append((member.name, slow))
    n = len(results)
    if not outliers:
        message = f"member check: no outlier among {n} members (none below {ratio:g}x its peers)"
    else:
        named = "; ".join(f"{name}: {' and '.join(why)}" for name, why in outliers)
        message = (f"member check: {len(outliers)} of {n} members below {ratio:g}x their "
                   f"peers: {named}")
    return MemberCheckVerdict(tuple(name for name, _ in outliers), message, tuple(lines))
