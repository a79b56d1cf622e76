"""evaluate/stats.py: intervals against hand-computed values and textbook t quantiles."""

import math

import pytest

from vibethinker.evaluate.stats import (
    beyond_noise,
    bootstrap_ci,
    mean_ci,
    paired_diff_ci,
    t_cdf,
    t_quantile,
)


@pytest.mark.parametrize(
    "p, df, want",
    [  # two-sided 95% / 90% / 99% critical values from any t table
        (0.975, 1, 12.7062),
        (0.975, 2, 4.3027),
        (0.975, 4, 2.7764),
        (0.975, 9, 2.2622),
        (0.975, 30, 2.0423),
        (0.95, 10, 1.8125),
        (0.995, 5, 4.0321),
        (0.975, 10_000, 1.9602),  # -> the normal 1.95996
    ],
)
def test_t_quantile_matches_table(p, df, want):
    assert t_quantile(p, df) == pytest.approx(want, abs=5e-4)
    assert t_quantile(1 - p, df) == pytest.approx(-want, abs=5e-4)


def test_t_cdf_symmetry_and_cauchy():
    # df = 1 is the Cauchy distribution: P(T <= 1) = 1/2 + atan(1)/pi = 0.75
    assert t_cdf(1.0, 1) == pytest.approx(0.75, abs=1e-9)
    assert t_cdf(0.0, 7) == pytest.approx(0.5)
    assert t_cdf(-2.0, 3) == pytest.approx(1 - t_cdf(2.0, 3))


def test_mean_ci_by_hand():
    # [1..5]: mean 3, s = sqrt(2.5) = 1.58114, se = s / sqrt(5) = 0.70711,
    # t_{0.975, 4} = 2.77645 -> half-width 1.96324
    m, lo, hi = mean_ci([1, 2, 3, 4, 5])
    assert m == 3
    assert lo == pytest.approx(3 - 1.96324, abs=1e-4)
    assert hi == pytest.approx(3 + 1.96324, abs=1e-4)
    # 90%: t_{0.95, 4} = 2.13185 -> half-width 1.50745
    _, lo90, hi90 = mean_ci([1, 2, 3, 4, 5], conf=0.90)
    assert (lo90, hi90) == pytest.approx((3 - 1.50745, 3 + 1.50745), abs=1e-4)


def test_one_value_has_no_width():
    assert mean_ci([0.4]) == (0.4, 0.4, 0.4)
    assert bootstrap_ci([0.4]) == (0.4, 0.4, 0.4)
    assert paired_diff_ci([0.1], [0.4])[1:] == pytest.approx((0.3, 0.3))


def test_bootstrap_constant_and_binary():
    assert bootstrap_ci([0.25] * 30) == (0.25, 0.25, 0.25)
    # 50 ones and 50 zeros: a resampled mean is Binomial(100, 1/2) / 100, whose 2.5% and 97.5%
    # quantiles are 0.40 and 0.60 (normal approx. 0.5 -+ 1.96 * 0.05 = 0.402, 0.598)
    m, lo, hi = bootstrap_ci([1.0] * 50 + [0.0] * 50)
    assert m == 0.5
    assert lo == pytest.approx(0.40, abs=0.011)
    assert hi == pytest.approx(0.60, abs=0.011)
    assert bootstrap_ci([1.0] * 50 + [0.0] * 50, seed=0) == (m, lo, hi)  # seeded: reproducible


def test_paired_removes_item_difficulty():
    # problems of very different difficulty, b better by 0.1 on every one except one (+0.05)
    a = [0.0, 0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.6, 0.4, 0.5] * 2
    b = [x + 0.1 for x in a]
    b[0] = 0.05
    d, lo, hi = paired_diff_ci(a, b)
    assert d == pytest.approx((0.1 * 19 + 0.05) / 20)
    assert 0.08 < lo <= d <= hi <= 0.1 + 1e-12
    assert beyond_noise(lo, hi)
    # unpaired, the two means' intervals overlap: only the pairing resolves the difference
    _, _, hi_a = bootstrap_ci(a)
    _, lo_b, _ = bootstrap_ci(b)
    assert lo_b < hi_a


def test_paired_identical_is_zero_and_mismatch_raises():
    assert paired_diff_ci([0.1, 0.5, 0.9], [0.1, 0.5, 0.9]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="pairs must match"):
        paired_diff_ci([0.1, 0.2], [0.3])
    with pytest.raises(ValueError, match="no values"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="non-finite"):
        mean_ci([1.0, math.nan])


@pytest.mark.parametrize(
    "lo, hi, want",
    [
        (0.01, 0.2, True),
        (-0.3, -0.01, True),
        (-0.1, 0.2, False),
        (0.0, 0.1, False),
        (9.25e-19, 0.09, False),
        (-0.2, -1e-17, False),
    ],  # float rounding of an exact 0
)
def test_beyond_noise(lo, hi, want):
    assert beyond_noise(lo, hi) is want
