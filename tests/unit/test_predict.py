"""The steady-state predictor (``--predict``) checked against independent numpy
computations: the curve fit by brute force, its covariance from a numerical Jacobian, and
the SNIA rule applied to a known curve."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from ssdlab.analysis.predict import (
    LABEL,
    MIN_ROUNDS,
    fit_curve,
    predict_run,
    t975,
)
from ssdlab.analysis.steady import SNIA_RULE


def _noisy(shape: list[float], noise: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [y * (1 + rng.gauss(0, noise)) for y in shape]


def _exp(plateau: float, amplitude: float, rate: float, n: int) -> list[float]:
    return [plateau + amplitude * math.exp(-rate * t) for t in range(1, n + 1)]


def _numpy_fit(ys: list[float]) -> tuple[float, float, float, float]:
    """(k, P, A, SSE) by brute force over a dense grid of rates, P and A by lstsq."""
    t = np.arange(1, len(ys) + 1, dtype=float)
    y = np.asarray(ys)
    best = (math.inf, 0.0, 0.0, 0.0)
    for k in np.geomspace(1e-3, 5.0, 20_000):
        design = np.column_stack([np.ones_like(t), np.exp(-k * t)])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        sse = float(np.sum((y - design @ coef) ** 2))
        if sse < best[0]:
            best = (sse, float(k), float(coef[0]), float(coef[1]))
    sse, k, p, a = best
    return k, p, a, sse


@pytest.mark.parametrize(("shape", "noise", "seed"), [
    (_exp(1000, 2000, 0.3, 15), 0.02, 1),
    (_exp(200, -120, 0.2, 12), 0.01, 2),
    (_exp(5e5, 1.5e6, 0.8, 9), 0.03, 3),
])
def test_the_fit_matches_a_brute_force_numpy_fit(shape: list[float], noise: float,
                                                 seed: int) -> None:
    ys = _noisy(shape, noise, seed)
    fit = fit_curve(ys)
    assert fit.model == "exponential" and fit.dof == len(ys) - 3
    k, p, a, sse = _numpy_fit(ys)
    assert fit.rate == pytest.approx(k, rel=2e-3)
    assert fit.plateau == pytest.approx(p, rel=1e-3)
    assert fit.amplitude == pytest.approx(a, rel=2e-3)
    assert fit.s2 * fit.dof <= sse * (1 + 1e-6)  # at least as good as the grid's best
    # the covariance: s^2 (J'J)^-1 with J from numpy's own differences of the model
    t = np.arange(1, len(ys) + 1, dtype=float)
    theta = np.array([fit.plateau, fit.amplitude, fit.rate])

    def model(th: np.ndarray) -> np.ndarray:
        values: np.ndarray = th[0] + th[1] * np.exp(-th[2] * t)
        return values

    steps = np.abs(theta) * 1e-6 + 1e-9
    jac = np.column_stack([(model(theta + np.eye(3)[i] * steps[i])
                            - model(theta - np.eye(3)[i] * steps[i])) / (2 * steps[i])
                           for i in range(3)])
    expected = fit.s2 * np.linalg.inv(jac.T @ jac)
    assert np.allclose(np.array(fit.covariance), expected, rtol=1e-4, atol=0)
    residuals = np.asarray(ys) - model(theta)
    assert np.allclose(fit.residuals, residuals, rtol=0, atol=1e-9 * max(ys))


def test_a_series_that_does_not_move_is_fitted_as_a_constant() -> None:
    ys = _noisy([1000.0] * 10, 0.02, 4)
    fit = fit_curve(ys)
    assert fit.model == "constant" and fit.dof == 9
    assert fit.plateau == pytest.approx(float(np.mean(ys)), rel=1e-12)
    assert fit.covariance[0][0] == pytest.approx(float(np.var(ys, ddof=1)) / 10, rel=1e-9)


def test_student_t_quantiles() -> None:
    # from tables (scipy.stats.t.ppf(0.975, df)): 12.706, 2.228, 2.042, 2.021, 1.984
    assert t975(1) == pytest.approx(12.706, abs=1e-3)
    assert t975(10) == pytest.approx(2.228, abs=1e-3)
    assert t975(30) == pytest.approx(2.042, abs=1e-3)
    assert t975(40) == pytest.approx(2.021, abs=1e-3)
    assert t975(100) == pytest.approx(1.984, abs=1e-3)
    assert t975(0) == math.inf


def _numpy_snia(ys: list[float]) -> tuple[int, float] | None:
    """The first SNIA window (last round, average) of ``ys``, computed with numpy."""
    for last in range(5, len(ys) + 1):
        window = np.asarray(ys[last - 5:last])
        average = float(window.mean())
        slope = float(np.polyfit(np.arange(5.0), window, 1)[0])
        if (np.ptp(window) <= 0.2 * average * (1 + 1e-9)
                and abs(slope) * 4 <= 0.1 * average * (1 + 1e-9)):
            return last, average
    return None


@pytest.mark.parametrize("seen", [6, 8, 10])
def test_a_noise_free_curve_predicts_the_window_the_rule_passes_on_it(seen: int) -> None:
    """Without noise the prediction is the SNIA window of the curve itself, exactly,
    not its asymptote (which is lower: the rule passes while the curve still settles)."""
    curve = _exp(1000, 3000, 0.25, 30)
    found = predict_run({"iops": curve[:seen]}, SNIA_RULE, 30)
    expected = _numpy_snia(curve)
    assert expected is not None
    last, average = expected
    assert found.window_rounds == (last - 4, last)
    (p,) = found.predictions
    assert p.known and found.known
    assert p.value == pytest.approx(average, rel=1e-6)
    assert p.half_width is not None and p.half_width <= 1e-6 * average
    assert p.plateau == pytest.approx(1000, rel=1e-6) and average > 1.05 * 1000
    assert found.message.startswith(f"{LABEL} after {seen} rounds")


def test_fewer_rounds_than_a_fit_needs_claim_nothing() -> None:
    found = predict_run({"iops": [5.0, 4.0, 3.5, 3.2]}, SNIA_RULE, 25)
    assert not found.known and found.window_rounds is None
    assert found.predictions[0].why == f"4 rounds, fewer than the {MIN_ROUNDS} a prediction needs"
    assert found.message.startswith("no prediction after 4 rounds")


@pytest.mark.parametrize("shape", [
    [4000 - 100 * t for t in range(1, 21)],  # a steady decline
    [4000 - 80 * t - 2 * t * t for t in range(1, 21)],  # one that speeds up
    [2000 * (1 + 0.25 * (-1) ** t) for t in range(1, 21)],  # a see-saw
])
def test_a_series_that_never_flattens_claims_no_plateau(shape: list[float]) -> None:
    ys = _noisy(shape, 0.01, 5)
    for seen in range(MIN_ROUNDS, len(ys) + 1):
        found = predict_run({"iops": ys[:seen]}, SNIA_RULE, 25)
        assert not found.known, (seen, found.message)
        assert not found.message.startswith(LABEL)


def test_every_variable_must_be_known() -> None:
    settled = _noisy(_exp(1000, 3000, 0.6, 12), 0.003, 6)
    falling = _noisy([4000 - 100 * t for t in range(1, 13)], 0.003, 7)
    alone = predict_run({"a": settled}, SNIA_RULE, 25)
    both = predict_run({"a": settled, "b": falling}, SNIA_RULE, 25)
    assert alone.known
    assert not both.known and [p.variable for p in both.predictions] == ["a", "b"]
    assert both.message.startswith("no prediction after 12 rounds")


def test_the_prediction_is_the_same_for_the_same_rounds() -> None:
    ys = _noisy(_exp(1000, 3000, 0.3, 12), 0.01, 8)
    assert predict_run({"x": ys}, SNIA_RULE, 25) == predict_run({"x": ys}, SNIA_RULE, 25)
