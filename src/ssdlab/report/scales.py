"""Axis scales and number formatting for charts: linear and log, with readable ticks.

Pure functions; no SVG here. A :class:`Scale` maps data values to pixels; ticks are
"nice" numbers (1, 2, 5 x 10^k on linear axes, decades and their 2 and 5 multiples on
log axes) so that axis labels read like the tables.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Data spanning more than this ratio (max / min, all positive) is drawn on a log axis.
LOG_SPAN = 50.0


def wants_log(values: Iterable[float]) -> bool:
    """True when the data spans decades (and is all positive), so a log axis reads better."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite or min(finite) <= 0:
        return False
    return max(finite) / min(finite) > LOG_SPAN


def _nice_step(span: float, target_ticks: int) -> float:
    raw = span / max(target_ticks, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for factor in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10.0 * magnitude


@dataclass(frozen=True)
class Scale:
    """Data ``[lo, hi]`` -> pixels ``[p0, p1]``; ``log`` for a base-10 log axis."""

    lo: float
    hi: float
    p0: float
    p1: float
    log: bool = False

    def __call__(self, value: float) -> float:
        if self.log:
            a, b, v = math.log10(self.lo), math.log10(self.hi), math.log10(max(value, self.lo))
        else:
            a, b, v = self.lo, self.hi, value
        if b == a:
            return (self.p0 + self.p1) / 2
        return self.p0 + (v - a) / (b - a) * (self.p1 - self.p0)

    def ticks(self, target: int = 5) -> list[float]:
        if self.log:
            return _log_ticks(self.lo, self.hi)
        step = _nice_step(self.hi - self.lo, target) if self.hi > self.lo else 1.0
        first = math.ceil(self.lo / step - 1e-9) * step
        count = math.floor((self.hi - first) / step + 1e-9) + 1
        return [round(first + i * step, 12) for i in range(max(count, 0))]


def _log_ticks(lo: float, hi: float) -> list[float]:
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = [10.0**k for k in range(first, last + 1)]
    multiples = (1,) if last - first > 3 else (1, 2, 5) if last - first > 1 else (1, 2, 3, 5)
    ticks = sorted({d * m for d in decades for m in multiples})
    return [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]


def value_scale(
    values: Sequence[float], p0: float, p1: float, *, log: bool | None = None,
    include_zero: bool = True,
) -> Scale:
    """A scale that holds ``values``, widened to nice bounds; log when ``wants_log``."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return Scale(0.0, 1.0, p0, p1)
    use_log = wants_log(finite) if log is None else log and min(finite) > 0
    if use_log:
        lo = 10 ** math.floor(math.log10(min(finite)))
        hi = 10 ** math.ceil(math.log10(max(finite)))
        return Scale(lo, hi, p0, p1, log=True)
    lo, hi = min(finite), max(finite)
    if include_zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    step = _nice_step(hi - lo, 5)
    return Scale(math.floor(lo / step) * step, math.ceil(hi / step) * step, p0, p1)


def fmt_axis(value: float) -> str:
    """Short axis labels: 1500 -> 1.5K, 2000000 -> 2M, 0.5 -> 0.5."""
    magnitude = abs(value)
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if magnitude >= factor:
            return f"{value / factor:.3g}{suffix}"
    if magnitude == 0:
        return "0"
    return f"{value:.3g}"


def fmt_value(value: float | None, digits: int | None = None) -> str:
    """Full values for tables and tooltips: thousands separators, sensible decimals."""
    if value is None or not math.isfinite(value):
        return "-"
    if digits is None:
        magnitude = abs(value)
        digits = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2
    return f"{value:,.{digits}f}"
