"""Multi-path selection: keep up to m correct traces per query that differ in solution path.

docs/PAPER.md keeps "several distinct correct full traces per query". Distinct by path, not wording:
two traces count as the same path when their word n-gram sets overlap (Jaccard) at or above
`max_overlap`; a reworded copy of one derivation shares most n-grams, another method does not.
Greedy in the given order (the teacher's sample order), so the result is deterministic.
"""

from __future__ import annotations

from vibethinker.construct.ngram import jaccard, ngram_set


def select_paths(traces: list[str], m: int, max_overlap: float, n: int = 3) -> list[str]:
    """Up to `m` traces, each with n-gram Jaccard < `max_overlap` against every one kept before
    it. Exact duplicates are always dropped."""
    kept: list[str] = []
    sets: list[set] = []
    for t in traces:
        if len(kept) >= m:
            break
        s = ngram_set(t, n)
        if t in kept or any(jaccard(s, k) >= max_overlap for k in sets):
            continue
        kept.append(t)
        sets.append(s)
    return kept
