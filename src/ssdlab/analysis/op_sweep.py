"""The over-provisioning sweep's analysis: the recommendation and the ground-truth check.

**The recommendation rule (marginal gain).** Walk the measured settings in increasing OP,
keeping a current choice (first: the smallest OP). A setting replaces the choice when its
steady-state IOPS beat the choice's by at least ``min_gain_pct`` percent *for every
percentage point of capacity* given up between the two:

    (IOPS_s / IOPS_c - 1) x 100  >=  min_gain_pct x (OP_s - OP_c)

The recommendation is the last setting accepted. With the default 1 % per point, the NAS
review's RAID 10 numbers (65K IOPS at 0 % OP, 86K at 30 %: +32.3 % for 30 points, 1.08 %
per point) recommend 30 %, as the review did. The plain "IOPS per raw capacity" (IOPS x
usable share) is reported too but does not decide: it would prefer 0 % there (65K against
86K x 0.7 = 60.2K), i.e. never pay capacity for speed unless the speed more than
compensates, which is not what the review recommends.

A setting that did not reach steady state takes part with its last window's average and
the recommendation says so; a failed setting (no IOPS) is left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SettingOutcome:
    op_pct: float
    usable_fraction: float
    iops: float | None  # None: the setting failed
    steady: bool

    @property
    def iops_per_raw(self) -> float | None:
        """IOPS x usable share: IOPS per unit of raw capacity bought."""
        return None if self.iops is None else self.iops * self.usable_fraction


@dataclass(frozen=True)
class Step:
    """One comparison of the walk: a setting against the current choice."""

    from_op: float
    to_op: float
    gain_pct: float  # IOPS gain over the current choice, percent
    per_point_pct: float  # that gain per percentage point of OP
    accepted: bool


@dataclass(frozen=True)
class Recommendation:
    op_pct: float | None
    iops: float | None
    min_gain_pct: float
    steps: tuple[Step, ...]
    best_per_raw_op: float | None  # the setting with the most IOPS x usable share
    message: str


def _fmt(x: float) -> str:
    return f"{x:,.0f}"


def recommend(outcomes: Sequence[SettingOutcome], min_gain_pct: float) -> Recommendation:
    """Apply the marginal-gain rule (module docstring) to the measured settings."""
    measured = sorted((o for o in outcomes if o.iops is not None and o.iops > 0),
                      key=lambda o: o.op_pct)
    if not measured:
        return Recommendation(None, None, min_gain_pct, (), None,
                              "no recommendation: no setting was measured")
    per_raw = max(measured, key=lambda o: o.iops_per_raw or 0.0)
    choice = measured[0]
    steps: list[Step] = []
    for cand in measured[1:]:
        assert choice.iops is not None and cand.iops is not None
        gain = (cand.iops / choice.iops - 1) * 100
        per_point = gain / (cand.op_pct - choice.op_pct)
        accepted = per_point >= min_gain_pct * (1 - 1e-9)
        steps.append(Step(choice.op_pct, cand.op_pct, gain, per_point, accepted))
        if accepted:
            choice = cand
    assert choice.iops is not None
    if len(measured) == 1:
        why = "only one setting was measured; nothing to compare"
    else:
        why = (f"each step up was accepted when it gained at least {min_gain_pct:g} % IOPS "
               "per point of capacity given up: " + "; ".join(
                   f"{s.from_op:g} -> {s.to_op:g} %: {s.gain_pct:+.1f} % "
                   f"({s.per_point_pct:+.2f} %/point, {'taken' if s.accepted else 'not taken'})"
                   for s in steps))
    unsteady = [o.op_pct for o in measured if not o.steady]
    caveat = "" if not unsteady else (
        "; NOT STEADY (last window used) at OP " + ", ".join(f"{op:g} %" for op in unsteady))
    message = (f"recommended OP {choice.op_pct:g} % ({_fmt(choice.iops)} IOPS): {why}{caveat}")
    return Recommendation(choice.op_pct, choice.iops, min_gain_pct, tuple(steps),
                          per_raw.op_pct, message)


def window_write_amplification(
    counters: Sequence[tuple[int, int] | None], first: int, last: int
) -> float | None:
    """WA over rounds ``first..last`` (1-based) from the device's cumulative counters.

    ``counters[0]`` is (host write bytes, NAND write bytes) before round 1 (after the
    preconditioning), ``counters[r]`` after round r. None when a count is missing or no
    host bytes were written.
    """
    if first < 1 or last >= len(counters) or first > last:
        return None
    start, end = counters[first - 1], counters[last]
    if start is None or end is None:
        return None
    host, nand = end[0] - start[0], end[1] - start[1]
    return nand / host if host > 0 else None


def order_agrees(iops: Sequence[float], wa: Sequence[float]) -> bool:
    """Does ranking by IOPS (high first) give the same order as ranking by WA (low first)?

    Ties in either are not an agreement unless they are ties in both.
    """
    if len(iops) != len(wa) or any(not math.isfinite(v) for v in (*iops, *wa)):
        return False
    pairs = range(len(iops))
    return all(
        (iops[i] > iops[j]) == (wa[i] < wa[j]) and (iops[i] == iops[j]) == (wa[i] == wa[j])
        for i in pairs for j in pairs if i != j
    )
