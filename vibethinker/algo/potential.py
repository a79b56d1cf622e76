"""Learning-potential selection (docs/PAPER.md, stage 4): pure functions over numbers and lists.

- `s_lp(logprobs)`: S_LP(q, y) = -(1/|y|) sum_t log pi_student(y_t | q, y_<t), the mean negative
  log-likelihood of a verified response under the student (high = the student has much to learn).
  The log-probabilities come teacher-forced from the student (stages/distill.py scores them).
- `quantile(xs, q)`: linear interpolation between order statistics (numpy's default "linear").
- `length_edges(lengths, n)`: the n-1 interior bucket edges at the k/n quantiles of the lengths;
  `assign_buckets` puts a length in the bucket numbered by how many edges are <= it.
- `select_lp(...)`: per domain, drop traces shorter than `min_tokens`; bucket the rest by length;
  drop S_LP above the domain's `outlier_pct` percentile; within each bucket keep S_LP in the
  [band_lo_pct, band_hi_pct] percentile band of that bucket ("prefer middle-to-high scores");
  optionally cap the domain at a quota (taken from the buckets in proportion, highest S_LP first).
- `select_random(...)`: the baseline: the same number per bucket, drawn at random among the
  bucket's traces that pass the length filter, without looking at S_LP.
- `domain_quotas(...)`: how many traces each domain contributes, from shares or counts.

The paper publishes none of the numbers (bucket edges, percentiles, mixing): they are arguments
here and config fields of the `distill` stage, whose docstrings say what we chose and why.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


def s_lp(logprobs: Sequence[float]) -> float:
    """-(1/|y|) sum_t log pi(y_t | q, y_<t) over the response tokens' log-probabilities."""
    if not logprobs:
        raise ValueError("s_lp: a response of 0 tokens has no learning potential")
    return -math.fsum(logprobs) / len(logprobs)


def quantile(xs: Sequence[float], q: float) -> float:
    """The q-quantile (q in [0, 1]) by linear interpolation between order statistics, as numpy's
    default: position q * (n - 1) in the sorted values."""
    if not xs:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile: q must be in [0, 1], got {q}")
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def length_edges(lengths: Sequence[float], n_buckets: int) -> list[float]:
    """The n_buckets - 1 interior edges at the 1/n, 2/n, ... quantiles of `lengths`."""
    if n_buckets < 1:
        raise ValueError(f"n_buckets must be >= 1, got {n_buckets}")
    if not lengths:
        return []
    return [quantile(lengths, k / n_buckets) for k in range(1, n_buckets)]


def assign_buckets(lengths: Sequence[float], edges: Sequence[float]) -> list[int]:
    """Bucket index of each length: the number of edges <= it (a length equal to an edge goes to
    the upper bucket), so bucket b holds edges[b-1] <= L < edges[b]."""
    return [bisect.bisect_right(edges, x) for x in lengths]


@dataclass
class Selection:
    """What `select_lp` / `select_random` decided for one domain's candidate traces."""

    kept: list[int]  # indices into the candidates, ascending
    bucket: list[int]  # [N] bucket of each candidate (-1: dropped as too short)
    edges: list[float]  # n_buckets - 1 interior length edges
    outlier_cut: float  # S_LP above this was dropped (inf: none)
    bands: list[tuple[float, float]]  # per bucket: the kept S_LP range [lo, hi] (nan: empty)
    counts: dict[str, int] = field(default_factory=dict)  # funnel: see FUNNEL


FUNNEL = ("candidates", "dropped_short", "dropped_outlier", "out_of_band", "over_quota", "kept")


def _cap(groups: list[list[int]], scores: Sequence[float], quota: int) -> list[list[int]]:
    """Cut the groups (buckets) to `quota` items in all, each in proportion to its size (largest
    remainder, ties to the lower bucket), keeping the highest scores of each group."""
    total = sum(len(g) for g in groups)
    if quota >= total:
        return groups
    exact = [len(g) * quota / total for g in groups]
    take = [math.floor(e) for e in exact]
    by_rest = sorted(range(len(groups)), key=lambda b: (-(exact[b] - take[b]), b))
    for b in by_rest[: quota - sum(take)]:
        take[b] += 1
    return [sorted(g, key=lambda i: (-scores[i], i))[:k] for g, k in zip(groups, take)]


def select_lp(
    lengths: Sequence[int],
    scores: Sequence[float],
    n_buckets: int,
    min_tokens: int,
    outlier_pct: float,
    band_lo_pct: float,
    band_hi_pct: float,
    quota: int | None = None,
) -> Selection:
    """Learning-potential selection within one domain (percentiles in [0, 100]).

    1. drop traces with fewer than `min_tokens` tokens;
    2. bucket edges at the length quantiles of the remaining traces (`n_buckets` buckets);
    3. drop S_LP above the `outlier_pct` percentile of the remaining traces (100: none);
    4. per bucket, keep S_LP within [band_lo_pct, band_hi_pct] percentiles of that bucket's
       remaining scores;
    5. with a `quota`, cut to it: buckets in proportion, highest S_LP kept first.
    """
    if len(lengths) != len(scores):
        raise ValueError("select_lp: lengths and scores differ in length")
    if not 0 <= band_lo_pct <= band_hi_pct <= 100 or not 0 <= outlier_pct <= 100:
        raise ValueError(
            "select_lp: need 0 <= band_lo_pct <= band_hi_pct <= 100, outlier in 0..100"
        )
    n = len(lengths)
    long_enough = [i for i in range(n) if lengths[i] >= min_tokens]
    edges = length_edges([lengths[i] for i in long_enough], n_buckets)
    bucket = [-1] * n
    for i, b in zip(long_enough, assign_buckets([lengths[i] for i in long_enough], edges)):
        bucket[i] = b
    cut = math.inf
    if long_enough and outlier_pct < 100:
        cut = quantile([scores[i] for i in long_enough], outlier_pct / 100)
    inliers = [i for i in long_enough if scores[i] <= cut]
    groups: list[list[int]] = []
    bands: list[tuple[float, float]] = []
    for b in range(n_buckets):
        members = [i for i in inliers if bucket[i] == b]
        if not members:
            groups.append([])
            bands.append((math.nan, math.nan))
            continue
        vals = [scores[i] for i in members]
        lo, hi = quantile(vals, band_lo_pct / 100), quantile(vals, band_hi_pct / 100)
        groups.append([i for i in members if lo <= scores[i] <= hi])
        bands.append((lo, hi))
    in_band = sum(len(g) for g in groups)
    if quota is not None:
        groups = _cap(groups, scores, quota)
    kept = sorted(i for g in groups for i in g)
    counts = {
        "candidates": n,
        "dropped_short": n - len(long_enough),
        "dropped_outlier": len(long_enough) - len(inliers),
        "out_of_band": len(inliers) - in_band,
        "over_quota": in_band - len(kept),
        "kept": len(kept),
    }
    return Selection(kept, bucket, edges, cut, bands, counts)


def select_random(reference: Selection, n_buckets: int, rng: random.Random) -> Selection:
    """The random baseline for `reference` (an LP selection of the same candidates): in each
    bucket, as many traces as LP kept there, drawn uniformly among the bucket's traces that pass
    the length filter (outliers included: S_LP is not looked at). Length filter and buckets are
    the same, so the two differ only in how S_LP chose within a bucket."""
    per_bucket = [0] * n_buckets
    for i in reference.kept:
        per_bucket[reference.bucket[i]] += 1
    kept: list[int] = []
    for b in range(n_buckets):
        pool = [i for i, x in enumerate(reference.bucket) if x == b]
        kept += rng.sample(pool, per_bucket[b])
    counts = dict(reference.counts)
    counts.update(dropped_outlier=0, out_of_band=0)
    counts["over_quota"] = counts["candidates"] - counts["dropped_short"] - len(kept)
    return Selection(
        sorted(kept),
        list(reference.bucket),
        list(reference.edges),
        math.inf,
        [(math.nan, math.nan)] * n_buckets,
        counts,
    )


def domain_quotas(
    available: Mapping[str, int],
    shares: Mapping[str, float] | None = None,
    counts: Mapping[str, int] | None = None,
) -> dict[str, int | None]:
    """Traces per domain (None: all that the band keeps).

    `counts`: at most counts[d] for each domain d named (others: all). `shares`: the largest mix
    with exactly these proportions that the available traces allow: total = min over named
    domains of available[d] / share[d], quota[d] = floor(total * share[d]); domains not named get
    0. Neither: None everywhere. Both: an error.
    """
    if shares and counts:
        raise ValueError("domain_quotas: give shares or counts, not both")
    if counts:
        if any(v < 0 for v in counts.values()):
            raise ValueError(f"domain_quotas: negative count in {dict(counts)}")
        return {d: (min(counts[d], n) if d in counts else None) for d, n in available.items()}
    if shares:
        if any(v < 0 for v in shares.values()) or not sum(shares.values()) > 0:
            raise ValueError(f"domain_quotas: shares must be >= 0 with a positive sum: {shares}")
        w = {d: shares.get(d, 0.0) / sum(shares.values()) for d in available}
        named = [d for d in available if w[d] > 0]
        total = min((available[d] / w[d] for d in named), default=0.0)
        return {d: math.floor(total * w[d] + 1e-9) for d in available}
    return {d: None for d in available}
