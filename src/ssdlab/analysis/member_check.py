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

Confirmed, not once: a host stall during one member's measurement (other processes
taking the CPU for a second) makes a healthy member look slow. So a member below
``ratio`` is a *suspect* (:func:`slow_metrics`), and the metrics it was slow on are
measured again, every member alike (``again``: each metric's second figure per member).
Only a suspect below ``ratio`` of its peers again, on a metric it was slow on, is
named; a suspect that is not slow the second time is *unconfirmed*: said in the verdict
as what was seen (slow once, not again), not named, and no cause is given: a host stall
and a drive slow only at times (garbage collection, throttling) look the same here.
Measured on four emulated members, one slowed 4x, beside a CPU hog and two busy guests
on 2 cores: a healthy member once read 0.70x its peers' 4 KiB IOPS in every pass of one
measurement.

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
from collections.abc import Mapping, Sequence
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
    #: slow in the first measurement, not when measured again: not named
    unconfirmed: tuple[str, ...] = ()


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
#: the metrics by their field of :class:`MemberResult`, in the order of the verdict
METRICS = tuple(m.field for m in _METRICS)

#: a second measurement: per metric (a field of :class:`MemberResult`), per member name
Again = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class _Comparison:
    """One metric of one member against its peers' median."""

    own: str  # "4 KiB random read 8,619 IOPS"
    against: str  # "0.70x its peers' 12,357", "" when the peers measured none
    below: bool  # below the ratio

    @property
    def text(self) -> str:
        return f"{self.own}, {self.against}" if self.against else (
            f"{self.own} (its peers measured none)")


def _compare(metric: _Metric, member: MemberResult, peers: Sequence[MemberResult],
             ratio: float) -> _Comparison:
    """``metric`` of ``member`` against its peers' median: its text, and whether it is
    below ``ratio`` of them."""
    return _compare_values(metric, metric.value(member), [metric.value(p) for p in peers],
                           ratio)


def _compare_values(metric: _Metric, own: float, peers: Sequence[float],
                    ratio: float) -> _Comparison:
    own_text = f"{metric.label} {metric.text(own)}"
    typical = statistics.median(peers) if peers else 0.0
    if typical <= 0:
        return _Comparison(own_text, "", False)
    share = own / typical
    against = f"{share:.2f}x its peers' {typical:,.{metric.places}f}"
    if share >= 1 / ratio:
        against += " (above its peers)"
    return _Comparison(own_text, against, share < ratio)


def _check(results: Sequence[MemberResult], ratio: float) -> None:
    if not 0 < ratio < 1:
        raise ValueError(f"ratio must be between 0 and 1, got {ratio!r}")
    names = [r.name for r in results]
    if len(set(names)) != len(names):
        raise ValueError(f"member names repeat: {names}")


def _peers(member: MemberResult, results: Sequence[MemberResult]) -> list[MemberResult]:
    return [p for p in results if p is not member and member.alike(p)]


def slow_metrics(results: Sequence[MemberResult],
                 ratio: float = OUTLIER_RATIO) -> dict[str, tuple[str, ...]]:
    """The suspects: each member below ``ratio`` of its peers' median on a metric, with
    those metrics (fields of :class:`MemberResult`), in the order given. What is measured
    again before a member is named (module docstring)."""
    _check(results, ratio)
    out: dict[str, tuple[str, ...]] = {}
    for member in results:
        peers = _peers(member, results)
        slow = tuple(m.field for m in _METRICS
                     if peers and _compare(m, member, peers, ratio).below)
        if slow:
            out[member.name] = slow
    return out


def outlier_verdict(results: Sequence[MemberResult], ratio: float = OUTLIER_RATIO,
                    again: Again | None = None) -> MemberCheckVerdict:
    """Judge each member against the median of its peers on both metrics (module
    docstring): the verdict names every member below ``ratio`` on either; with ``again``
    (the second measurement of the suspects' metrics, every member), only those below it
    again on a metric they were slow on, and says which were slow only once."""
    _check(results, ratio)
    if len(results) < 2:
        alone = tuple(_numbers(r) for r in results)
        count = "no members" if not results else "one member"
        return MemberCheckVerdict((), f"member check: {count}, nothing to compare", alone)
    lines: list[str] = []
    outliers: list[tuple[str, list[str]]] = []
    once: list[tuple[str, list[str]]] = []
    unlike: list[MemberResult] = []
    for member in results:
        peers = _peers(member, results)
        if not peers:
            unlike.append(member)
            lines.append(f"{_numbers(member)}; not judged: no peer holds data on a like "
                         "share of its space")
            continue
        compared = [_compare(m, member, peers, ratio) for m in _METRICS]
        slow = [(m, c) for m, c in zip(_METRICS, compared, strict=True) if c.below]
        confirmed, transient, seconds = _confirm(member, peers, slow, again, ratio)
        mark = " -- slow" if confirmed else " -- slow once, not again" if transient else ""
        lines.append(f"{member.name}: {'; '.join(c.text for c in compared)}"
                     f"{'; measured again: ' + '; '.join(seconds) if seconds else ''}{mark}")
        if confirmed:
            outliers.append((member.name, confirmed))
        elif transient:
            once.append((member.name, transient))
    n = len(results) - len(unlike)
    if n == 0:
        message = f"member check: cannot judge: {_unlike_text(unlike, results)}"
    elif not outliers:
        message = f"member check: no outlier among {n} members (none below {ratio:g}x its peers"
        message += " when measured again)" if once else ")"
    else:
        named = "; ".join(f"{name}: {' and '.join(why)}" for name, why in outliers)
        message = (f"member check: {len(outliers)} of {n} members below {ratio:g}x their "
                   f"peers{' twice' if again is not None else ''}: {named}")
    if once:
        message += ("; slow once, not when measured again: not named (a host stall or a "
                    "drive slow at times): " + "; ".join(f"{name}: {' and '.join(why)}"
                                           for name, why in once))
    if unlike and n:
        message += f"; not judged: {_unlike_text(unlike, results)}"
    return MemberCheckVerdict(tuple(name for name, _ in outliers), message, tuple(lines),
                              tuple(name for name, _ in once))


def _confirm(member: MemberResult, peers: Sequence[MemberResult],
             slow: Sequence[tuple[_Metric, _Comparison]], again: Again | None,
             ratio: float) -> tuple[list[str], list[str], list[str]]:
    """The metrics ``member`` was slow on, confirmed and not (their texts), and the texts
    of its second measurement. Without ``again`` (or a metric not measured again, or no
    peer measured again) the first measurement stands."""
    confirmed: list[str] = []
    transient: list[str] = []
    seconds: list[str] = []
    for metric, first in slow:
        values = again.get(metric.field, {}) if again is not None else {}
        peer_values = [values[p.name] for p in peers if p.name in values]
        if member.name not in values or not peer_values:
            confirmed.append(first.text)
            continue
        second = _compare_values(metric, values[member.name], peer_values, ratio)
        seconds.append(second.text)
        figure = metric.text(values[member.name])
        then = f"{figure}, {second.against}" if second.against else figure
        if second.below:
            confirmed.append(f"{first.text}, again {then}")
        else:
            transient.append(f"{first.text}, then {then}")
    return confirmed, transient, seconds


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
