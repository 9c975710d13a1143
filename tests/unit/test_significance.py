"""Welch's t-test against independent values, and the comparison verdicts."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from ssdlab.analysis.significance import compare, incomplete_beta, t_two_sided_p, welch


@pytest.mark.parametrize(
    ("t", "df", "p"),
    [
        (2.0, 10, 0.073388),  # tables of Student's t
        (2.228139, 10, 0.05),
        (12.706205, 1, 0.05),
        (1.0, 1, 0.5),
        (0.0, 5, 1.0),
        (2.776445, 4, 0.05),
        (4.604095, 4, 0.01),
    ],
)
def test_t_tail_matches_tables(t: float, df: float, p: float) -> None:
    assert t_two_sided_p(t, df) == pytest.approx(p, abs=2e-6)


def test_incomplete_beta_matches_closed_forms() -> None:
    for x in (0.1, 0.4, 0.77):
        assert incomplete_beta(1, 1, x) == pytest.approx(x)  # uniform
        # I_x(2, 3) = 6x^2 - 8x^3 + 3x^4
        assert incomplete_beta(2, 3, x) == pytest.approx(6 * x**2 - 8 * x**3 + 3 * x**4)
    with pytest.raises(ValueError):
        incomplete_beta(1, 1, 1.5)


def test_welch_against_numpy() -> None:
    rng = random.Random(3)
    for _ in range(50):
        a = [rng.gauss(100, 5) for _ in range(rng.randint(2, 9))]
        b = [rng.gauss(104, 9) for _ in range(rng.randint(2, 9))]
        t, df = welch(a, b)
        va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
        assert t == pytest.approx((np.mean(a) - np.mean(b)) / math.sqrt(va + vb))
        expect_df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
        assert df == pytest.approx(expect_df)


def test_differences_inside_and_outside_the_noise() -> None:
    base = [1000.0, 1020.0, 990.0, 1010.0, 1005.0]
    same = [1003.0, 995.0, 1015.0, 1001.0, 998.0]
    better = [1200.0, 1190.0, 1215.0, 1205.0, 1195.0]
    inside = compare(sum(same) / 5, same, sum(base) / 5, base)
    assert inside.significant is False and inside.ratio == pytest.approx(1.0, abs=0.01)
    outside = compare(sum(better) / 5, better, sum(base) / 5, base)
    assert outside.significant is True and outside.p_value is not None
    assert outside.p_value < 1e-6 and "larger than the noise" in outside.note
    unknown = compare(3000.0, (), 1000.0, base)
    assert unknown.significant is None and unknown.ratio == 3.0
    assert "unknown" in unknown.note


def test_zero_variance_windows() -> None:
    flat = [5.0] * 5
    assert compare(5.0, flat, 5.0, flat).significant is False
    assert compare(6.0, [6.0] * 5, 5.0, flat).significant is True
