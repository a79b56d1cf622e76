"""Pass@k, avg@n and maj@k from n samples per problem: pure functions over counts and lists.

- `pass_at_k(n, c, k)`: the unbiased estimator of the Codex paper (Chen et al. 2021),
  1 - C(n-c, k) / C(n, k), computed as the stable product 1 - prod_{i=n-c+1}^{n} (1 - k/i)
  (no huge binomials, no cancellation for n in the thousands).
- `avg_at_n(values)`: the mean score over the n samples, i.e. the paper's "Pass@1 averaged over n".
- `maj_at_k(keys, correct, k)`: majority vote over k samples. We report its EXPECTATION over all
  C(n, k) subsets of the n samples (the same unbiased construction as pass@k; the paper does not
  say how it computes maj@k), with ties between the largest clusters broken uniformly at random
  and samples without an answer (key None) abstaining. With k = n it is the plain majority vote
  of all samples. `maj_at_k_first` is the simple "vote over the first k samples" variant.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from math import comb

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k samples drawn without replacement from n is correct), c correct."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def avg_at_n(values: Sequence[float]) -> float:
    """Mean score of the samples (avg@n = mean Pass@1); 0 for no samples."""
    return float(sum(values)) / len(values) if values else 0.0


def clusters(keys: Sequence[Hashable | None], correct: Sequence[float]) -> list[tuple[int, float]]:
    """(size, value) per answer cluster in first-seen order; value = the cluster's mean
    correctness (1 or 0 with a consistent verifier). Key None (no answer) forms no cluster."""
    sizes: dict[Hashable, int] = {}
    sums: dict[Hashable, float] = {}
    for key, ok in zip(keys, correct):
        if key is None:
            continue
        sizes[key] = sizes.get(key, 0) + 1
        sums[key] = sums.get(key, 0.0) + float(ok)
    return [(sizes[key], sums[key] / sizes[key]) for key in sizes]


def majority_vote(keys: Sequence[Hashable | None], weights: Sequence[float] | None = None):
    """The key with the largest total weight (count by default); ties go to the first seen.
    None keys abstain; returns None when no sample has an answer."""
    totals: dict[Hashable, float] = {}
    for i, key in enumerate(keys):
        if key is not None:
            totals[key] = totals.get(key, 0.0) + (1.0 if weights is None else weights[i])
    return max(totals, key=lambda key: totals[key]) if totals else None


def maj_at_k_first(keys: Sequence[Hashable | None], correct: Sequence[float], k: int) -> float:
    """Correctness of the majority vote over the first k samples (ties: first seen)."""
    winner = majority_vote(keys[:k])
    if winner is None:
        return 0.0
    hits = [float(ok) for key, ok in zip(keys[:k], correct[:k]) if key == winner]
    return sum(hits) / len(hits)


def maj_at_k(keys: Sequence[Hashable | None], correct: Sequence[float], k: int) -> float:
    """Expected correctness of the majority vote over a uniform random k-subset of the samples.

    For each cluster c and each count j it gets in the subset, a dynamic program over the other
    clusters counts the subsets where every other cluster gets at most j samples, tracking how
    many get exactly j (a t-way tie gives c the win with probability 1/(t+1)). Clusters smaller
    than j cannot tie and are pooled with the abstainers. Float binomials: fine for n <~ 1000.
    """
    n = len(keys)
    if len(correct) != n:
        raise ValueError("keys and correct differ in length")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    cl = clusters(keys, correct)
    total = 0.0
    memo: dict[tuple[int, int], float] = {}  # (size of c, j) -> tie-weighted count of the rest
    for size, value in cl:
        if value == 0:
            continue
        for j in range(1, min(size, k) + 1):
            if (size, j) not in memo:
                others = list(cl)
                others.remove(next(x for x in cl if x[0] == size))
                memo[(size, j)] = _rest_weight(n - size, [s for s, _ in others], j, k - j)
            total += value * comb(size, j) * memo[(size, j)]
    return total / comb(n, k)


def _rest_weight(n_rest: int, sizes: list[int], j: int, r: int) -> float:
    """Sum over ways to pick r of the n_rest other samples, every other cluster getting <= j,
    of 1/(1 + number of clusters getting exactly j)."""
    big = [s for s in sizes if s >= j]  # only these can reach j and tie
    free = n_rest - sum(big)  # abstainers and clusters too small to tie: unconstrained
    t_max = len(big)
    # f[q, t]: ways to pick q samples so far with t clusters at exactly j
    f = np.zeros((r + 1, t_max + 1))
    f[: min(free, r) + 1, 0] = [comb(free, q) for q in range(min(free, r) + 1)]
    for s in big:
        g = f.copy()  # x = 0 from this cluster
        for x in range(1, min(s, j, r) + 1):
            w = comb(s, x)
            if x < j:
                g[x:, :] += w * f[: r + 1 - x, :]
            else:
                g[x:, 1:] += w * f[: r + 1 - x, :-1]
        f = g
    return float(f[r] @ (1.0 / (1.0 + np.arange(t_max + 1))))
