"""Is a difference between two runs larger than the run-to-run noise? (Welch's t-test)

Each compared figure comes with the per-round values of its measurement window (the
rounds the published average is taken over). Two runs differ significantly when Welch's
two-sided t-test on those values gives p < ``alpha`` (default 0.05) -- the same idea as
pyperf's ``is_significant`` and asv's ``is_different``. With fewer than two rounds on
either side (a published reference figure), the noise is unknown and nothing is claimed.

The Student-t tail probability is computed exactly from the regularised incomplete beta
function (continued fraction, as in Numerical Recipes' ``betacf``); tests check it
against independent values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_ALPHA = 0.05


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError("x must be in [0, 1]")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
        + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError("degrees of freedom must be positive")
    if math.isinf(t):
        return 0.0
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


@dataclass(frozen=True)
class Comparison:
    """One figure of one run against the baseline's."""

    ratio: float | None  # run / baseline
    p_value: float | None  # None: the noise is unknown (fewer than 2 rounds a side)
    significant: bool | None
    note: str


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    return mean, sum((v - mean) ** 2 for v in values) / (n - 1)


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Welch's t statistic and its Welch-Satterthwaite degrees of freedom."""
    (ma, va), (mb, vb) = _mean_var(a), _mean_var(b)
    sa, sb = va / len(a), vb / len(b)
    if sa + sb == 0:
        return (0.0 if ma == mb else math.copysign(math.inf, ma - mb)), float(len(a) + len(b) - 2)
    t = (ma - mb) / math.sqrt(sa + sb)
    df = (sa + sb) ** 2 / (
        (sa**2 / (len(a) - 1) if sa else 0.0) + (sb**2 / (len(b) - 1) if sb else 0.0)
    )
    return t, df


def compare(
    value: float, window: Sequence[float], base_value: float, base_window: Sequence[float],
    alpha: float = DEFAULT_ALPHA,
) -> Comparison:
    """``value`` (with its window rounds) against the baseline's."""
    ratio = value / base_value if base_value else None
    if len(window) < 2 or len(base_window) < 2:
        return Comparison(ratio, None, None, "noise unknown (no round data on one side)")
    t, df = welch(window, base_window)
    p = t_two_sided_p(t, df)
    significant = p < alpha
    verdict = "larger than the noise" if significant else "within the noise"
    return Comparison(ratio, p, significant, f"{verdict} (Welch p = {p:.3g})")
