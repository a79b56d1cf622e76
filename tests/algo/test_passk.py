"""pass@k, avg@n and maj@k against hand-computed values and brute force over subsets."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from math import comb

import pytest

from vibethinker.algo.passk import (
    avg_at_n,
    clusters,
    maj_at_k,
    maj_at_k_first,
    majority_vote,
    pass_at_k,
)


def test_pass_at_k_hand_values():
    # n=5, c=2, k=1: 2/5
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # n=4, c=1, k=4: the one correct sample is always drawn
    assert pass_at_k(4, 1, 4) == 1.0
    # n=10, c=3, k=3: 1 - C(7,3)/C(10,3) = 1 - 35/120 = 0.708333...
    assert pass_at_k(10, 3, 3) == pytest.approx(1 - 35 / 120)
    assert pass_at_k(8, 0, 8) == 0.0
    assert pass_at_k(8, 8, 1) == 1.0


def test_pass_at_k_brute_force_and_stability():
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                subsets = list(itertools.combinations([1] * c + [0] * (n - c), k))
                brute = sum(any(s) for s in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12)
    # large n: the product form stays exact where huge binomials would overflow floats
    exact = 1 - comb(2000 - 5, 100) / comb(2000, 100)
    assert pass_at_k(2000, 5, 100) == pytest.approx(exact, rel=1e-10)


def test_pass_at_k_rejects_bad_input():
    with pytest.raises(ValueError, match="need 0 <= c <= n"):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError, match="need 1 <= k <= n"):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError, match="need 1 <= k <= n"):
        maj_at_k(["a", "b"], [1, 0], 3)
    with pytest.raises(ValueError, match="keys and correct differ in length"):
        maj_at_k(["a", "b"], [1], 1)


def test_maj_at_k_big_clusters_small_remainder():
    # found by mutation testing: clusters larger than the k - j samples left for them
    keys = ["a", "b", "d", "a", "c", "c", "c", "c", "a", "a", None, "c"]
    ok = [int(x == "a") for x in keys]
    assert maj_at_k(keys, ok, 6) == pytest.approx(brute_maj(keys, ok, 6), abs=1e-12)
    assert maj_at_k(keys, ok, 6) == pytest.approx(8 / 21)


def test_avg_at_n():
    assert avg_at_n([1, 0, 1, 1]) == 0.75
    assert avg_at_n([0.5, 1.0]) == 0.75
    assert avg_at_n([]) == 0.0


def brute_maj(keys, correct, k):
    """Expectation over all k-subsets; ties among the largest clusters split evenly."""
    total = 0.0
    subsets = list(itertools.combinations(range(len(keys)), k))
    for sub in subsets:
        counts = Counter(keys[i] for i in sub if keys[i] is not None)
        if not counts:
            continue
        top = max(counts.values())
        winners = [key for key, c in counts.items() if c == top]
        value = {key: v for key, v in zip(keys, correct)}  # consistent verifier in these tests
        total += sum(value[w] for w in winners) / len(winners)
    return total / len(subsets)


def test_maj_at_k_hand_values():
    keys = ["a", "a", "b"]  # "a" correct
    ok = [1, 1, 0]
    # k=1: 2/3. k=2: subsets {aa}: a wins; {ab} x2: tie -> 1/2 each: (1 + 0.5 + 0.5)/3 = 2/3
    assert maj_at_k(keys, ok, 1) == pytest.approx(2 / 3)
    assert maj_at_k(keys, ok, 2) == pytest.approx(2 / 3)
    assert maj_at_k(keys, ok, 3) == pytest.approx(1.0)
    # wrong majority: a x1 correct, b x2 wrong, k=3 -> 0
    assert maj_at_k(["a", "b", "b"], [1, 0, 0], 3) == 0.0
    # abstentions: None never wins; k=1 with one answer among 4 -> 1/4
    assert maj_at_k([None, "a", None, None], [0, 1, 0, 0], 1) == pytest.approx(0.25)


def test_maj_at_k_brute_force_random():
    rng = random.Random(0)
    for _ in range(150):
        n = rng.randint(1, 9)
        alphabet = ["a", "b", "c", "d", None][: rng.randint(1, 5)]
        keys = [rng.choice(alphabet) for _ in range(n)]
        good = rng.choice(["a", "b", "c"])
        ok = [int(key == good) for key in keys]
        for k in range(1, n + 1):
            assert maj_at_k(keys, ok, k) == pytest.approx(brute_maj(keys, ok, k), abs=1e-9), (
                keys,
                good,
                k,
            )


def test_maj_at_k_n64_bounded():
    # 24 samples agree on the right answer, 40 give 40 different wrong ones: one sample votes
    # for "a" with probability 24/64; with all 64 "a" always wins.
    keys = [f"x{i}" for i in range(40)] + ["a"] * 24
    ok = [0] * 40 + [1] * 24
    vals = [maj_at_k(keys, ok, k) for k in (1, 4, 16, 64)]
    assert vals[0] == pytest.approx(24 / 64) and vals[-1] == 1.0
    assert all(0 <= v <= 1 for v in vals)


def test_majority_vote_and_first_k():
    assert majority_vote(["b", "a", "a", None]) == "a"
    assert majority_vote(["b", "a"]) == "b"  # tie: first seen
    assert majority_vote([None, None]) is None
    assert majority_vote(["a", "b"], weights=[0.2, 0.9]) == "b"
    assert maj_at_k_first(["b", "a", "a", "b", "b"], [0, 1, 1, 0, 0], 3) == 1.0
    assert maj_at_k_first(["b", "a", "a", "b", "b"], [0, 1, 1, 0, 0], 5) == 0.0
    assert clusters(["a", None, "a", "b"], [1, 0, 0, 1]) == [(2, 0.5), (1, 1.0)]
    assert maj_at_k_first([None, None, "a"], [0, 0, 1], 2) == 0.0  # nobody answered: wrong
