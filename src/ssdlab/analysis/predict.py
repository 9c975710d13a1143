"""Early prediction of a run's steady state (issue 19): NOT a SNIA steady state.

An SSD settling under a constant workload moves from its fresh-out-of-box level towards a
plateau roughly exponentially in written data, so in rounds ``y(t) = P + A * exp(-k * t)``
(t = round number). Each tracking variable's rounds so far are fitted with it by least
squares: for each rate ``k`` the best ``P`` and ``A`` are a linear fit, so the fit is a
one-dimensional search over ``k`` (a log-spaced grid, then golden-section refinement). A
series that has not moved beyond its noise (``A`` not distinguishable from zero) is fitted
as a constant (its mean) instead.

What is predicted is not the asymptote ``P`` but **the window the SNIA rule would pass**:
the measured rounds, followed by the fitted curve extended round by round up to the run's
``max_rounds``, are judged by the run's rule (:func:`ssdlab.analysis.steady.evaluate`),
and the prediction is that window's average for each variable. A slowly settling curve
passes the SNIA rule while it is still above its asymptote, and the full run reports that
window's average, so this is the figure the full run would report. Its 95 % interval
propagates the fit's covariance ``s^2 (J'J)^-1`` (``J``: the model's derivatives,
``s^2``: the residual variance on ``n - 3`` degrees of freedom; ``n - 1`` for a constant)
to the window average, plus the noise of the window's rounds that are not measured yet
(``m`` future rounds of a ``N``-round window add ``m s^2 / N^2``), with Student's t.

Every variable's prediction is **known** when all of these hold:

* at least :data:`MIN_ROUNDS` rounds;
* the fitted curve passes the rule by ``max_rounds`` (else the full run would not be
  steady either, and there is no plateau to claim);
* the interval's half-width is at most ``tolerance`` (5 %) of the predicted average;
* the fit is good: its residuals' RMS is at most :data:`MAX_RMS_REL` of the predicted
  average, and no trend is left in the last rounds (their residuals' mean is within two
  standard errors of zero);
* the predicted average lies within the data's reach: no further from the last round's
  value than the series has already moved (or than the interval).

A series that never flattens fits with a small ``k`` whose curve passes the rule late or
never, with a wide interval: no claim. The functions are pure; what a run does with them
is the suite's business.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ssdlab.analysis.steady import SteadyRule, evaluate

__all__ = [
    "LABEL",
    "MIN_ROUNDS",
    "TOLERANCE",
    "CurveFit",
    "Prediction",
    "RunPrediction",
    "describe_prediction",
    "fit_curve",
    "fit_tail",
    "predict_run",
    "t975",
]

#: how every output names a prediction: it is never a SNIA steady state
LABEL = "predicted steady state (not a SNIA steady state)"

#: fewest rounds before a plateau may be claimed
MIN_ROUNDS = 5
#: the fit's residual RMS, at most this fraction of the predicted average
MAX_RMS_REL = 0.05
#: default: the 95 % interval's half-width, at most this fraction of the predicted average
TOLERANCE = 0.05
#: runs simulated from the fit per prediction (a fixed seed: the same rounds, the same answer)
SIMULATIONS = 200
_SEED = 19
#: at least this share of the simulated runs must pass the rule by the last round
_MIN_PASSING = 0.975
_Z975 = 1.959964
_K_MIN, _K_MAX, _K_GRID = 1e-3, 5.0, 60
_GOLDEN = (math.sqrt(5) - 1) / 2
#: Student's t, two-sided 95 %, for 1..30 degrees of freedom
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
         2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
         2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    """Student's t quantile for a two-sided 95 % interval on ``df`` degrees of freedom."""
    if df < 1:
        return math.inf
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def _linear(ts: Sequence[float], ys: Sequence[float], k: float
            ) -> tuple[float, float, float] | None:
    """Least-squares P, A for rate ``k``, and the sum of squared residuals."""
    xs = [math.exp(-k * t) for t in ts]
    n = len(ys)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 1e-15 * n:
        return None
    a = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    p = my - a * mx
    sse = sum((y - p - a * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return p, a, sse


def _fit_rate(ts: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float, float]:
    """The best (k, P, A, SSE) over the rate."""
    ratio = (_K_MAX / _K_MIN) ** (1 / (_K_GRID - 1))
    grid = [_K_MIN * ratio**i for i in range(_K_GRID)]
    scored = [(fit[2], k) for k in grid if (fit := _linear(ts, ys, k)) is not None]
    if not scored:
        raise ValueError("no rate fits")
    best = min(range(len(scored)), key=lambda i: scored[i][0])
    lo = math.log(scored[max(best - 1, 0)][1])
    hi = math.log(scored[min(best + 1, len(scored) - 1)][1])

    def sse(log_k: float) -> float:
        fit = _linear(ts, ys, math.exp(log_k))
        return math.inf if fit is None else fit[2]

    a, b = lo, hi
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    for _ in range(40):
        if sse(c) < sse(d):
            b = d
        else:
            a = c
        c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    k = math.exp((a + b) / 2)
    fit = _linear(ts, ys, k)
    assert fit is not None
    return k, fit[0], fit[1], fit[2]


def _inverse3(m: list[list[float]]) -> list[list[float]] | None:
    """The inverse of a 3 x 3 matrix (None if singular)."""
    (a, b, c), (d, e, f), (g, h, i) = m
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    if abs(det) < 1e-300:
        return None
    return [[(e * i - f * h) / det, (c * h - b * i) / det, (b * f - c * e) / det],
            [(f * g - d * i) / det, (a * i - c * g) / det, (c * d - a * f) / det],
            [(d * h - e * g) / det, (b * g - a * h) / det, (a * e - b * d) / det]]



def _covariance(ts: Sequence[float], k: float, a: float, s2: float
                ) -> tuple[tuple[float, ...], ...] | None:
    """The covariance of (P, A, k), ``s^2 (J'J)^-1`` at the fit; None if not determined."""
    rows = [(1.0, math.exp(-k * t), -a * t * math.exp(-k * t)) for t in ts]
    jtj = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    inv = _inverse3(jtj)
    if inv is None or any(not inv[i][i] >= 0 for i in range(3)):
        return None
    return tuple(tuple(s2 * x for x in row) for row in inv)


@dataclass(frozen=True)
class CurveFit:
    """A series fitted: ``y(t) = plateau + amplitude * exp(-rate * t)``, or a constant."""

    model: str  # "exponential" | "constant"
    plateau: float
    amplitude: float
    rate: float
    #: of (plateau, amplitude, rate); a constant's: ((variance of the mean,),)
    covariance: tuple[tuple[float, ...], ...]
    s2: float  # residual variance
    dof: int
    residuals: tuple[float, ...]
    first_round: int = 1  # the round of the first value fitted

    def value(self, t: float) -> float:
        return self.plateau + self.amplitude * math.exp(-self.rate * t)


def fit_curve(values: Sequence[float], first_round: int = 1) -> CurveFit:
    """The least-squares fit of ``values``, rounds ``first_round`` on (at least 4 finite
    values; see the module)."""
    ys = [float(v) for v in values]
    n = len(ys)
    if n < 4 or not all(math.isfinite(y) for y in ys):
        raise ValueError(f"a fit needs at least 4 finite values, got {ys!r}")
    ts = [float(t) for t in range(first_round, first_round + n)]
    mean = sum(ys) / n
    s2_const = sum((y - mean) ** 2 for y in ys) / (n - 1)
    k, p, a, sse = _fit_rate(ts, ys)
    s2 = sse / (n - 3)
    cov = _covariance(ts, k, a, s2)
    moved = abs(a) * (math.exp(-k * ts[0]) - math.exp(-k * ts[-1]))
    if cov is None or moved <= 2 * math.sqrt(s2_const):  # not beyond its noise: a constant
        return CurveFit("constant", mean, 0.0, 0.0, ((s2_const / n,),), s2_const, n - 1,
                        tuple(y - mean for y in ys), first_round)
    residuals = tuple(y - p - a * math.exp(-k * t) for t, y in zip(ts, ys, strict=True))
    return CurveFit("exponential", p, a, k, cov, s2, n - 3, residuals, first_round)


def _good(fit: CurveFit, scale: float) -> bool:
    """Residuals small (RMS at most :data:`MAX_RMS_REL` of ``scale``, the last round's
    value: the level the prediction is about), no trend left."""
    rms = math.sqrt(sum(r * r for r in fit.residuals) / len(fit.residuals))
    return rms <= MAX_RMS_REL * abs(scale) and not _trend_left(fit.residuals, fit.s2, scale)


def fit_tail(values: Sequence[float]) -> CurveFit:
    """The fit of the longest tail of ``values`` (at least :data:`MIN_ROUNDS` rounds) that
    the model describes well (:func:`_good`): a drive's first rounds (its fresh-out-of-box
    burst, an SLC cache running out) are another regime than the settling that follows.
    When no tail fits well, the fit of the last :data:`MIN_ROUNDS` rounds."""
    ys = [float(v) for v in values]
    last = len(ys) - MIN_ROUNDS + 1
    for first in range(1, last + 1):
        fit = fit_curve(ys[first - 1:], first)
        if first == last or _good(fit, ys[-1]):
            return fit
    raise ValueError(f"a fit needs at least {MIN_ROUNDS} values, got {len(ys)}")


def _trend_left(residuals: Sequence[float], s2: float, scale: float) -> bool:
    """The residuals of the last third average further from zero than two standard
    errors (and than rounding, 1e-9 of ``scale``): the model has not caught up."""
    tail = residuals[-max(2, len(residuals) // 3):]
    mean = sum(tail) / len(tail)
    return abs(mean) > 2 * math.sqrt(s2 / len(tail)) + 1e-9 * abs(scale)


@dataclass(frozen=True)
class Prediction:
    """One tracking variable's predicted window average, and whether it is known."""

    variable: str
    model: str  # "exponential" | "constant" | "none"
    value: float | None  # the predicted window's average
    half_width: float | None  # of its 95 % interval
    plateau: float | None  # the fitted asymptote (for information)
    rate: float | None  # k, per round (exponential only)
    rms_rel: float | None  # the residuals' RMS over the predicted average
    known: bool
    why: str  # what decided it, in words

    @property
    def half_width_pct(self) -> float | None:
        if self.value is None or self.half_width is None or self.value == 0:
            return None
        return 100 * self.half_width / abs(self.value)


@dataclass(frozen=True)
class RunPrediction:
    """Every tracking variable's prediction after ``rounds_seen`` rounds."""

    rule: str
    rounds_seen: int
    window_rounds: tuple[int, int] | None  # the window the fitted curve passes
    predictions: tuple[Prediction, ...]
    message: str

    @property
    def known(self) -> bool:
        return bool(self.predictions) and all(p.known for p in self.predictions)


def _cholesky(cov: Sequence[Sequence[float]]) -> list[list[float]]:
    """The lower triangle ``L`` with ``L L' = cov`` (a pivot that rounding made negative
    counts as 0: that direction is not drawn)."""
    size = len(cov)
    low = [[0.0] * size for _ in range(size)]
    for i in range(size):
        for j in range(i + 1):
            rest = cov[i][j] - sum(low[i][m] * low[j][m] for m in range(j))
            if i == j:
                low[i][j] = math.sqrt(max(rest, 0.0))
            elif low[j][j] > 0:
                low[i][j] = rest / low[j][j]
    return low


def _draw(fit: CurveFit, low: Sequence[Sequence[float]], scale: float, rng: random.Random
          ) -> CurveFit:
    """A curve with parameters drawn from the fit's uncertainty (normal, its covariance
    scaled by ``scale**2``)."""
    z = [scale * rng.gauss(0.0, 1.0) for _ in low]
    d = [sum(low[i][m] * z[m] for m in range(i + 1)) for i in range(len(low))]
    if fit.model == "constant":
        return dataclasses.replace(fit, plateau=fit.plateau + d[0])
    return dataclasses.replace(fit, plateau=fit.plateau + d[0], amplitude=fit.amplitude + d[1],
                               rate=min(max(fit.rate + d[2], -1.0), 2 * _K_MAX))


def _simulate(measured: Mapping[str, Sequence[float]], fits: Mapping[str, CurveFit],
              rule: SteadyRule, horizon: int, noisy: bool
              ) -> list[tuple[tuple[int, int], dict[str, float]]]:
    """Runs continued :data:`SIMULATIONS` times from the measured rounds: curves drawn
    from the fits, each future round with the fit's noise (``noisy``; else the rule judges
    the drawn curve itself and the noise is added to the window's average), judged by
    ``rule``. Each that passes by ``horizon``: its window and each variable's average."""
    n = min(len(v) for v in measured.values())
    start = max(n - rule.window + 2, 1)  # the first window with a round still to come
    rng = random.Random(_SEED)
    lows = {name: _cholesky(fit.covariance) for name, fit in fits.items()}
    out = []
    for _ in range(SIMULATIONS):
        series, noise = {}, {}
        for name, fit in fits.items():
            # the noise level itself drawn from its own uncertainty (s^2 dof / chi^2_dof):
            # parameters and noise together follow Student's t, not the normal
            scale = math.sqrt(fit.dof / rng.gammavariate(fit.dof / 2, 2.0))
            curve, noise[name] = _draw(fit, lows[name], scale, rng), scale * math.sqrt(fit.s2)
            series[name] = [*measured[name][start - 1:],
                            *(curve.value(t) + (rng.gauss(0.0, noise[name]) if noisy else 0.0)
                              for t in range(n + 1, horizon + 1))]
        verdict = evaluate(series, rule)
        if verdict.attained and verdict.window_rounds is not None:
            first, last = verdict.window_rounds
            future = max(0, last + start - 1 - n)
            out.append(((first + start - 1, last + start - 1),
                        {c.variable: c.average + (0.0 if noisy else rng.gauss(
                            0.0, noise[c.variable] * math.sqrt(future) / rule.window))
                         for c in verdict.checks}))
    return out


def _quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear between order statistics, numpy's default)."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _judge(variable: str, fit: CurveFit, measured: Sequence[float],
           averages: Sequence[float], tolerance: float) -> Prediction:
    """One variable's prediction from its simulated window averages: the median, and the
    larger distance from it to the 2.5 % and 97.5 % quantiles."""
    average = _quantile(averages, 0.5)
    half = max(average - _quantile(averages, 0.025), _quantile(averages, 0.975) - average)
    rate = fit.rate if fit.model == "exponential" else None
    if not (math.isfinite(average) and average != 0):
        return Prediction(variable, fit.model, average, half, fit.plateau, rate, None, False,
                          "not known: a predicted average of 0")
    rms_rel = math.sqrt(sum(r * r for r in fit.residuals) / len(fit.residuals)) / abs(average)
    reach = max(measured) - min(measured)
    checks = [
        (half <= tolerance * abs(average),
         f"95 % interval +-{100 * half / abs(average):.1f} % (at most +-{100 * tolerance:g} %)"),
        (rms_rel <= MAX_RMS_REL,
         f"residual RMS {100 * rms_rel:.1f} % (at most {100 * MAX_RMS_REL:g} %)"),
        (not _trend_left(fit.residuals, fit.s2, average), "no trend left in the last rounds"),
        (abs(average - measured[-1]) <= max(reach, half),
         "the prediction within the data's reach of the last round"),
    ]
    failed = [why for ok, why in checks if not ok]
    why = ("; ".join(why for _, why in checks[:2]) if not failed
           else "not known: " + "; ".join(failed))
    return Prediction(variable, fit.model, average, half, fit.plateau, rate, rms_rel,
                      not failed, why)


def _unknown(variable: str, why: str) -> Prediction:
    return Prediction(variable, "none", None, None, None, None, None, False, why)


def predict_run(series: Mapping[str, Sequence[float]], rule: SteadyRule, max_rounds: int,
                tolerance: float = TOLERANCE, *, noisy: bool = True) -> RunPrediction:
    """The window ``rule`` would pass if the run went on to ``max_rounds``, each variable's
    average over it with a 95 % interval, and whether all are known (see the module).
    ``noisy=False`` judges the drawn curves without their noise (the benchmark's
    comparison: bench/predict_accuracy.py)."""
    n = min((len(v) for v in series.values()), default=0)
    measured = {name: [float(y) for y in values[:n]] for name, values in series.items()}
    if n < MIN_ROUNDS or any(not math.isfinite(y) for v in measured.values() for y in v):
        why = (f"{n} round{'' if n == 1 else 's'}, fewer than the {MIN_ROUNDS} a prediction needs"
               if n < MIN_ROUNDS else "a round without a finite value")
        return _none(rule, n, None, series, why)
    fits = {name: fit_tail(values) for name, values in measured.items()}
    horizon = max(max_rounds, n)
    runs = _simulate(measured, fits, rule, horizon, noisy)
    if len(runs) < _MIN_PASSING * SIMULATIONS:
        return _none(rule, n, None, series,
                     f"not known: {100 * (1 - len(runs) / SIMULATIONS):.0f} % of the runs "
                     f"simulated from the fit do not pass the {rule.name} rule by round "
                     f"{horizon}")
    windows = [w for w, _ in runs]
    window = max(set(windows), key=lambda w: (windows.count(w), -w[0]))
    predictions = tuple(_judge(name, fit, measured[name][fit.first_round - 1:],
                               [a[name] for _, a in runs], tolerance)
                        for name, fit in fits.items())
    result = RunPrediction(rule.name, n, window, predictions, "")
    return dataclasses.replace(result, message=_message(result))


def _none(rule: SteadyRule, n: int, window: tuple[int, int] | None,
          series: Mapping[str, Sequence[float]], why: str) -> RunPrediction:
    result = RunPrediction(rule.name, n, window, tuple(_unknown(v, why) for v in series), "")
    return dataclasses.replace(result, message=_message(result))


def describe_prediction(p: Prediction) -> str:
    """``IOPS 4 KiB 0/100 3,912 +-2.1 %`` (or why it is not known)."""
    if p.value is None or p.half_width_pct is None:
        return f"{p.variable}: {p.why}"
    value = f"{p.value:,.0f}" if abs(p.value) >= 100 else f"{p.value:.3g}"
    return f"{p.variable} {value} +-{p.half_width_pct:.1f} %" + (
        "" if p.known else f" ({p.why})")


def _message(result: RunPrediction) -> str:
    parts = "; ".join(describe_prediction(p) for p in result.predictions)
    rounds = f"{result.rounds_seen} round{'' if result.rounds_seen == 1 else 's'}"
    if result.known and result.window_rounds is not None:
        first, last = result.window_rounds
        return (f"{LABEL} after {rounds}: the {result.rule} rule's "
                f"window predicted at rounds {first}-{last}; {parts}")
    return f"no prediction after {rounds}: {parts}"
