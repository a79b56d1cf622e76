"""Confidence intervals for the report's headline and the ablation runner: pure functions.

- `mean_ci`: mean and Student-t interval over INDEPENDENT values (e.g. one figure per seed);
- `bootstrap_ci`: mean and percentile-bootstrap interval over items (e.g. per-problem avg@n);
- `paired_diff_ci`: mean of b - a and its paired bootstrap interval, a[i] and b[i] measured on
  the same item (two models on the same problems), so problem difficulty cancels out;
- `beyond_noise`: an interval that excludes 0.

Every function returns `(mean, lo, hi)`; one value gives lo = hi = mean (no spread to measure).
The t quantile is computed here (regularised incomplete beta + bisection) so scipy is not needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta (modified Lentz, Numerical Recipes 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
    front = math.exp(ln + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t (bisection on `t_cdf`; t_quantile(0.975, 4) = 2.776)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


def _check(values: Sequence[float], conf: float, what: str) -> np.ndarray:
    if not 0.0 < conf < 1.0:
        raise ValueError(f"{what}: conf must be in (0, 1), got {conf}")
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        raise ValueError(f"{what}: no values")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what}: non-finite value in {x.tolist()}")
    return x


def mean_ci(values: Sequence[float], conf: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval mean +- t_{(1+conf)/2, n-1} * s / sqrt(n) over independent
    values (seeds); s is the sample standard deviation (n - 1 denominator)."""
    x = _check(values, conf, "mean_ci")
    m = float(x.mean())
    if x.size == 1:
        return m, m, m
    half = t_quantile(0.5 + conf / 2.0, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return m, m - half, m + half


def _percentile_boot(x: np.ndarray, conf: float, n_boot: int, seed: int) -> tuple[float, ...]:
    m = float(x.mean())
    if x.size == 1:
        return m, m, m
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    alpha = (1.0 - conf) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    # the percentile interval of a resampled mean always holds the mean up to float rounding;
    # clamp so that a constant sample gives exactly lo = hi = mean
    return m, min(float(lo), m), max(float(hi), m)


def bootstrap_ci(
    values: Sequence[float], conf: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap interval: resample the items with replacement n_boot
    times (numpy generator seeded by `seed`), take the (1 -+ conf) / 2 quantiles of the means."""
    x = _check(values, conf, "bootstrap_ci")
    return _percentile_boot(x, conf, n_boot, seed)  # type: ignore[return-value]


def paired_diff_ci(
    a: Sequence[float],
    b: Sequence[float],
    conf: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean of b - a and its paired bootstrap interval: a[i] and b[i] are the same item (the
    same problem) under two conditions, and items are resampled as pairs."""
    if len(a) != len(b):
        raise ValueError(f"paired_diff_ci: {len(a)} vs {len(b)} values; pairs must match")
    xa = _check(a, conf, "paired_diff_ci")
    xb = _check(b, conf, "paired_diff_ci")
    return _percentile_boot(xb - xa, conf, n_boot, seed)  # type: ignore[return-value]


def beyond_noise(lo: float, hi: float, tol: float = 1e-12) -> bool:
    """True when the interval [lo, hi] excludes 0 (a difference the data resolve). An endpoint
    within `tol` of 0 counts as 0: a bootstrap mean of exact zeros can come out as 1e-18."""
    return lo > tol or hi < -tol


__all__ = ["beyond_noise", "bootstrap_ci", "mean_ci", "paired_diff_ci", "t_cdf", "t_quantile"]
