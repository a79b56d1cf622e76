"""Learning-potential selection (algo/potential.py) against numbers computed by hand."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from vibethinker.algo import potential as P


def test_s_lp_is_mean_negative_logprob():
    # -(1/3) * (-1 - 2 - 3) = 2
    assert P.s_lp([-1.0, -2.0, -3.0]) == pytest.approx(2.0)
    # one token with p = 1/4: -log(1/4) = log 4 = 1.386294...
    assert P.s_lp([math.log(0.25)]) == pytest.approx(1.3862944, abs=1e-7)
    with pytest.raises(ValueError, match="0 tokens"):
        P.s_lp([])


def test_quantile_by_hand_and_against_numpy():
    # [1, 2, 3, 4] at q = 0.5: position 1.5 -> 2 + 0.5 * (3 - 2) = 2.5
    assert P.quantile([4, 1, 3, 2], 0.5) == 2.5
    # [10, 20, 30, 40, 50] at q = 0.1: position 0.4 -> 10 + 0.4 * 10 = 14
    assert P.quantile([10, 20, 30, 40, 50], 0.1) == pytest.approx(14.0)
    assert P.quantile([7], 0.3) == 7
    rng = random.Random(0)
    for _ in range(50):
        xs = [rng.uniform(-5, 5) for _ in range(rng.randint(1, 30))]
        q = rng.random()
        assert P.quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)), abs=1e-12)
    with pytest.raises(ValueError):
        P.quantile([], 0.5)


def test_length_edges_and_buckets():
    # lengths 1..8, 4 buckets: q = .25, .5, .75 at positions 1.75, 3.5, 5.25 -> 2.75, 4.5, 6.25
    edges = P.length_edges(list(range(1, 9)), 4)
    assert edges == pytest.approx([2.75, 4.5, 6.25])
    # an edge value goes to the upper bucket: 2.75 -> bucket 1
    assert P.assign_buckets([1, 2.75, 3, 8], edges) == [0, 1, 1, 3]
    assert P.length_edges([5, 9], 1) == []


# Nine candidates: one too short (index 0), two length groups, one high-S_LP outlier (index 8).
LENGTHS = [2, 10, 10, 10, 10, 20, 20, 20, 20]
SCORES = [9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0]


def test_select_lp_by_hand():
    # min_tokens 5 drops index 0. Edge: median of [10 x4, 20 x4] = 15 -> bucket 0 = idx 1-4,
    # bucket 1 = idx 5-8. Outlier cut: 90th pct of [1..7, 100] at position 6.3 = 7 + .3 * 93
    # = 34.9 -> idx 8 goes. Bucket 0 band [50th, 100th] of [1, 2, 3, 4] = [2.5, 4] -> idx 3, 4;
    # bucket 1 band of [5, 6, 7] = [6, 7] -> idx 6, 7.
    sel = P.select_lp(
        LENGTHS, SCORES, n_buckets=2, min_tokens=5, outlier_pct=90, band_lo_pct=50, band_hi_pct=100
    )
    assert sel.edges == [15.0]
    assert sel.bucket == [-1, 0, 0, 0, 0, 1, 1, 1, 1]
    assert sel.outlier_cut == pytest.approx(34.9)
    assert sel.bands == [(2.5, 4.0), (6.0, 7.0)]
    assert sel.kept == [3, 4, 6, 7]
    assert sel.counts == {
        "candidates": 9,
        "dropped_short": 1,
        "dropped_outlier": 1,
        "out_of_band": 3,
        "over_quota": 0,
        "kept": 4,
    }


def test_select_lp_quota_takes_buckets_in_proportion_highest_first():
    # In band: bucket 0 {3, 4}, bucket 1 {6, 7}; quota 3 -> exact shares 1.5 / 1.5, floors 1 / 1,
    # the tie goes to bucket 0 (2 traces: 3, 4); bucket 1 keeps its highest S_LP: idx 7.
    sel = P.select_lp(LENGTHS, SCORES, 2, 5, 90, 50, 100, quota=3)
    assert sel.kept == [3, 4, 7]
    assert sel.counts["over_quota"] == 1 and sel.counts["kept"] == 3
    assert P.select_lp(LENGTHS, SCORES, 2, 5, 90, 50, 100, quota=0).kept == []


def test_select_lp_keeps_everything_with_open_settings():
    sel = P.select_lp(LENGTHS, SCORES, 1, 0, 100, 0, 100)
    assert sel.kept == list(range(9)) and math.isinf(sel.outlier_cut)


def test_select_lp_empty_and_bad_arguments():
    sel = P.select_lp([], [], 3, 5, 95, 50, 100)
    assert sel.kept == [] and sel.counts["candidates"] == 0
    sel = P.select_lp([1, 2], [1.0, 2.0], 3, 5, 95, 50, 100)  # all too short
    assert sel.kept == [] and sel.counts["dropped_short"] == 2
    with pytest.raises(ValueError):
        P.select_lp([1], [1.0], 1, 0, 95, 60, 50)
    with pytest.raises(ValueError):
        P.select_lp([1, 2], [1.0], 1, 0, 95, 50, 100)


def test_select_random_same_count_per_bucket():
    ref = P.select_lp(LENGTHS, SCORES, 2, 5, 90, 50, 100)  # 2 kept in each bucket
    a = P.select_random(ref, 2, random.Random(1))
    b = P.select_random(ref, 2, random.Random(1))
    assert a.kept == b.kept  # seeded
    per = [sum(a.bucket[i] == k for i in a.kept) for k in (0, 1)]
    assert per == [2, 2]
    assert 0 not in a.kept  # the length filter still applies
    # over many draws the outlier (idx 8) and the low scores (idx 1, 2) get picked too
    seen = set()
    for s in range(40):
        seen |= set(P.select_random(ref, 2, random.Random(s)).kept)
    assert {1, 2, 5, 8} <= seen


def test_domain_quotas():
    avail = {"math": 100, "code": 30, "stem": 50}
    # shares .5/.25/.25: total = min(100/.5, 30/.25, 50/.25) = 120 -> 60, 30, 30
    assert P.domain_quotas(avail, shares={"math": 2, "code": 1, "stem": 1}) == {
        "math": 60,
        "code": 30,
        "stem": 30,
    }
    # a domain not named in shares gets none
    assert P.domain_quotas(avail, shares={"math": 1})["code"] == 0
    assert P.domain_quotas(avail, counts={"math": 10, "code": 500}) == {
        "math": 10,
        "code": 30,
        "stem": None,
    }
    assert P.domain_quotas(avail) == {"math": None, "code": None, "stem": None}
    with pytest.raises(ValueError):
        P.domain_quotas(avail, shares={"math": 1}, counts={"math": 1})
