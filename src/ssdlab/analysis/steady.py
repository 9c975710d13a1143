"""Steady-state detection over measurement rounds, as pure functions returning verdicts.

A test runs in rounds; after each round one value per tracking variable is recorded.
The measurement window is the last ``N`` rounds. Two rules are supported:

* ``snia`` (SNIA PTS): N = 5; data excursion (max - min) <= 20 % of the window average
  and slope excursion (|least-squares slope| x (N - 1)) <= 10 % of the window average.
* ``review``: N = 4; the least-squares line stays within 90-110 % of the window average
  at every round of the window. No data-excursion criterion.

Steady state is reached at the first round ``r >= N`` whose window (rounds ``r-N+1..r``)
passes for every tracking variable. Comparisons use a relative tolerance of 1e-9 so that a
value exactly on a limit (e.g. 20 % data excursion) passes despite floating-point rounding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "REVIEW_RULE",
    "RULES",
    "SNIA_RULE",
    "SteadyRule",
    "Verdict",
    "WindowCheck",
    "check_window",
    "evaluate",
    "rule_by_name",
    "verdict_from_dict",
    "verdict_to_dict",
]

#: Relative tolerance on every "measured <= limit" comparison (limits are inclusive).
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class SteadyRule:
    """A steady-state rule: window size and the criteria, as fractions of the window average."""

    name: str
    window: int
    max_data_excursion: float | None
    max_slope_excursion: float | None
    line_band: float | None
    description: str

    def __post_init__(self) -> None:
        if self.window < 2:
            raise ValueError(f"steady-state window must be at least 2 rounds, got {self.window}")
        limits = (self.max_data_excursion, self.max_slope_excursion, self.line_band)
        if all(limit is None for limit in limits):
            raise ValueError(f"steady-state rule {self.name!r} has no criterion")
        if any(limit is not None and not limit > 0 for limit in limits):
            raise ValueError(f"steady-state rule {self.name!r} has a non-positive limit")


SNIA_RULE = SteadyRule(
    name="snia",
    window=5,
    max_data_excursion=0.20,
    max_slope_excursion=0.10,
    line_band=None,
    description=(
        "SNIA PTS steady state: over the last 5 rounds the data excursion is at most 20 % "
        "and the least-squares slope excursion at most 10 % of the window average."
    ),
)

REVIEW_RULE = SteadyRule(
    name="review",
    window=4,
    max_data_excursion=None,
    max_slope_excursion=None,
    line_band=0.10,
    description=(
        "Review steady state: over the last 4 rounds the least-squares line stays within "
        "90-110 % of the window average."
    ),
)

RULES: dict[str, SteadyRule] = {SNIA_RULE.name: SNIA_RULE, REVIEW_RULE.name: REVIEW_RULE}


def rule_by_name(name: str) -> SteadyRule:
    """The rule called ``name``; ValueError naming the allowed rules otherwise."""
    try:
        return RULES[name]
    except KeyError:
        allowed = ", ".join(sorted(RULES))
        raise ValueError(f"unknown steady-state rule {name!r} (allowed: {allowed})") from None


@dataclass(frozen=True)
class WindowCheck:
    """One tracking variable over one window: the statistics and the rule's judgement."""

    variable: str
    first_round: int
    last_round: int
    values: tuple[float, ...]
    average: float
    data_excursion: float
    data_excursion_pct: float
    slope: float
    intercept: float
    slope_excursion: float
    slope_excursion_pct: float
    line_min_pct: float
    line_max_pct: float
    passed: bool
    score: float
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    """The steady-state result of a whole run under one rule."""

    rule: SteadyRule
    variables: tuple[str, ...]
    attained: bool
    rounds_seen: int
    checks: tuple[WindowCheck, ...]
    message: str

    @property
    def window_rounds(self) -> tuple[int, int] | None:
        """Rounds of the reported window (the steady one, else the best one); None if none."""
        if not self.checks:
            return None
        return (self.checks[0].first_round, self.checks[0].last_round)


# --------------------------------------------------------------------------- statistics


def _fit(values: Sequence[float]) -> tuple[float, float, float]:
    """Average, least-squares slope per round and fitted value at the first round."""
    n = len(values)
    average = sum(values) / n
    x_mean = (n - 1) / 2
    sxx = sum((x - x_mean) ** 2 for x in range(n))
    sxy = sum((x - x_mean) * (y - average) for x, y in enumerate(values))
    slope = sxy / sxx
    return average, slope, average - slope * x_mean


def _pct(amount: float, average: float) -> float:
    """``amount`` as a percentage of ``average`` (nan when the average is unusable)."""
    if not (math.isfinite(average) and average > 0):
        return math.nan
    return amount / average * 100.0


def _ratio(measured_pct: float, limit: float) -> float:
    """Measured percentage over the limit (a fraction); inf when not a number."""
    ratio = measured_pct / (limit * 100.0)
    return ratio if math.isfinite(ratio) else math.inf


def _ok(ratio: float) -> bool:
    return ratio <= 1.0 + _TOLERANCE


def _unusable_reason(values: Sequence[float], average: float) -> str | None:
    if not all(math.isfinite(v) for v in values):
        return "non-finite value in the window, cannot be steady"
    if not math.isfinite(average):
        return "window average is not finite, cannot be steady"
    if average <= 0:
        return f"window average {average:g} <= 0, cannot be steady"
    return None


def _compare(measured_pct: float, limit: float) -> tuple[float, str]:
    """Ratio measured/limit and the text ``"6.1 % <= 20 %"``."""
    ratio = _ratio(measured_pct, limit)
    return ratio, f"{measured_pct:.1f} % {'<=' if _ok(ratio) else '>'} {limit * 100:g} %"


def _criteria(
    rule: SteadyRule, data_pct: float, slope_pct: float, line: tuple[float, float]
) -> list[tuple[float, str, str]]:
    """(ratio, long reason, short reason) for each criterion of the rule."""
    out: list[tuple[float, str, str]] = []
    if rule.max_data_excursion is not None:
        ratio, cmp = _compare(data_pct, rule.max_data_excursion)
        out.append((ratio, f"data excursion {cmp}", f"excursion {cmp}"))
    if rule.max_slope_excursion is not None:
        ratio, cmp = _compare(slope_pct, rule.max_slope_excursion)
        out.append((ratio, f"slope excursion {cmp}", f"slope {cmp}"))
    if rule.line_band is not None:
        low, high = line
        ratio = _ratio(max(100.0 - low, high - 100.0), rule.line_band)
        band = f"{(1 - rule.line_band) * 100:g}-{(1 + rule.line_band) * 100:g} %"
        verdict = "within" if _ok(ratio) else "outside"
        text = f"{low:.1f}-{high:.1f} % of average, {verdict} {band}"
        out.append((ratio, f"fitted line {text}", f"line {text}"))
    return out


def _short_reasons(check: WindowCheck, rule: SteadyRule) -> str:
    """The compact per-variable summary used in one-line messages."""
    if not math.isfinite(check.score):
        return check.reasons[0]
    crits = _criteria(
        rule,
        check.data_excursion_pct,
        check.slope_excursion_pct,
        (check.line_min_pct, check.line_max_pct),
    )
    return ", ".join(short for _, _, short in crits)


# --------------------------------------------------------------------------- public functions


def check_window(
    variable: str, values: Sequence[float], first_round: int, rule: SteadyRule
) -> WindowCheck:
    """Judge one window of ``rule.window`` values starting at 1-based round ``first_round``."""
    if len(values) != rule.window:
        raise ValueError(
            f"window for {variable!r} has {len(values)} values, rule {rule.name!r} "
            f"needs {rule.window}"
        )
    vals = tuple(float(v) for v in values)
    average, slope, intercept = _fit(vals)
    data_excursion = max(vals) - min(vals)
    slope_excursion = abs(slope) * (rule.window - 1)
    line_ends = (intercept, intercept + slope * (rule.window - 1))
    line = (_pct(min(line_ends), average), _pct(max(line_ends), average))
    data_pct = _pct(data_excursion, average)
    slope_pct = _pct(slope_excursion, average)
    unusable = _unusable_reason(vals, average)
    reasons: tuple[str, ...]
    if unusable is not None:
        score, reasons = math.inf, (unusable,)
    else:
        crits = _criteria(rule, data_pct, slope_pct, line)
        score = max(ratio for ratio, _, _ in crits)
        reasons = tuple(text for _, text, _ in crits)
    return WindowCheck(
        variable=variable,
        first_round=first_round,
        last_round=first_round + rule.window - 1,
        values=vals,
        average=average,
        data_excursion=data_excursion,
        data_excursion_pct=data_pct,
        slope=slope,
        intercept=intercept,
        slope_excursion=slope_excursion,
        slope_excursion_pct=slope_pct,
        line_min_pct=line[0],
        line_max_pct=line[1],
        passed=_ok(score),
        score=score,
        reasons=reasons,
    )


def _window_checks(
    series: Mapping[str, Sequence[float]], first_round: int, rule: SteadyRule
) -> tuple[WindowCheck, ...]:
    start = first_round - 1
    return tuple(
        check_window(name, values[start : start + rule.window], first_round, rule)
        for name, values in series.items()
    )


def _rounds_seen(series: Mapping[str, Sequence[float]]) -> int:
    if not series:
        raise ValueError("no tracking variables given")
    lengths = {name: len(values) for name, values in series.items()}
    if len(set(lengths.values())) != 1:
        detail = ", ".join(f"{name}: {n}" for name, n in lengths.items())
        raise ValueError(f"tracking variables have different numbers of rounds ({detail})")
    return next(iter(lengths.values()))


def _describe(checks: Sequence[WindowCheck], rule: SteadyRule) -> str:
    return "; ".join(f"{c.variable}: {_short_reasons(c, rule)}" for c in checks)


def _best_window(
    scored: Sequence[tuple[float, tuple[WindowCheck, ...]]]
) -> tuple[WindowCheck, ...]:
    """The earliest window whose worst score is the lowest. Scores within a relative
    tolerance of the lowest are tied: two windows holding the same values in another
    order score alike, up to the last bits of their averages."""
    lowest = min(score for score, _ in scored)
    return next(checks for score, checks in scored
                if score == lowest or score <= lowest * (1 + _TOLERANCE))


def evaluate(series: Mapping[str, Sequence[float]], rule: SteadyRule) -> Verdict:
    """Find the first round at which every variable's window passes ``rule``.

    ``series`` maps each tracking variable to its values for rounds 1..n (same n for all).
    If no window passes, the verdict carries the window with the lowest worst score
    (the earliest such window on ties, scores within a relative 1e-9 being tied).
    """
    n = _rounds_seen(series)
    variables = tuple(series)
    if n < rule.window:
        plural = "round" if n == 1 else "rounds"
        message = (
            f"NOT STEADY: {n} {plural}, fewer than the {rule.window}-round window ({rule.name})"
        )
        return Verdict(rule, variables, False, n, (), message)
    scored: list[tuple[float, tuple[WindowCheck, ...]]] = []
    for first in range(1, n - rule.window + 2):
        checks = _window_checks(series, first, rule)
        if all(check.passed for check in checks):
            first_last = f"rounds {first}-{first + rule.window - 1}"
            message = f"steady: {first_last} ({rule.name}), {_describe(checks, rule)}"
            return Verdict(rule, variables, True, n, checks, message)
        scored.append((max(check.score for check in checks), checks))
    best = _best_window(scored)
    first, last = best[0].first_round, best[0].last_round
    message = (
        f"NOT STEADY after {n} rounds ({rule.name}); best window rounds {first}-{last}: "
        f"{_describe(best, rule)}"
    )
    return Verdict(rule, variables, False, n, best, message)


# --------------------------------------------------------------------------- serialisation


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _check_to_dict(check: WindowCheck) -> dict[str, object]:
    return {
        "window_average": _finite(check.average),
        "data_excursion": _finite(check.data_excursion),
        "data_excursion_pct": _finite(check.data_excursion_pct),
        "slope": _finite(check.slope),
        "slope_excursion": _finite(check.slope_excursion),
        "slope_excursion_pct": _finite(check.slope_excursion_pct),
        "line_min_pct": _finite(check.line_min_pct),
        "line_max_pct": _finite(check.line_max_pct),
        "passed": check.passed,
        "score": _finite(check.score),
        "values": [_finite(v) for v in check.values],
        "reasons": list(check.reasons),
    }


def verdict_to_dict(verdict: Verdict) -> dict[str, object]:
    """A JSON-ready dict (non-finite floats become None)."""
    window = verdict.window_rounds
    return {
        "rule": verdict.rule.name,
        "window_size": verdict.rule.window,
        "attained": verdict.attained,
        "rounds_seen": verdict.rounds_seen,
        "window_rounds": list(window) if window is not None else None,
        "message": verdict.message,
        "tracked": list(verdict.variables),
        "variables": {check.variable: _check_to_dict(check) for check in verdict.checks},
    }


def _as_float(x: object) -> float:
    if x is None:
        return math.nan
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise ValueError(f"expected a number or null, got {x!r}")
    return float(x)


def verdict_from_dict(data: Mapping[str, object]) -> Verdict:
    """Rebuild a verdict from :func:`verdict_to_dict` output (window statistics recomputed).

    Values stored as null (non-finite) come back as nan. ValueError on malformed data.
    """
    try:
        rule = rule_by_name(str(data["rule"]))
        rounds_seen, attained = data["rounds_seen"], data["attained"]
        window, message, variables = data["window_rounds"], data["message"], data["variables"]
    except KeyError as exc:
        raise ValueError(f"steady-state verdict is missing {exc.args[0]!r}") from None
    if not (isinstance(rounds_seen, int) and isinstance(attained, bool)):
        raise ValueError("steady-state verdict has a malformed rounds_seen or attained")
    if not (isinstance(message, str) and isinstance(variables, Mapping)):
        raise ValueError("steady-state verdict has a malformed message or variables")
    checks: tuple[WindowCheck, ...] = ()
    if window is not None:
        if not (isinstance(window, list | tuple) and len(window) == 2):
            raise ValueError(f"steady-state verdict has malformed window_rounds {window!r}")
        first = int(window[0])
        checks = tuple(
            check_window(str(name), [_as_float(v) for v in _values_of(entry)], first, rule)
            for name, entry in variables.items()
        )
    tracked = data.get("tracked")
    names = tuple(str(n) for n in (tracked if isinstance(tracked, list) else variables))
    return Verdict(rule, names, attained, rounds_seen, checks, message)


def _values_of(entry: object) -> list[object]:
    values = entry.get("values") if isinstance(entry, Mapping) else None
    if not isinstance(values, list):
        raise ValueError("steady-state verdict variable has no values list")
    return values
