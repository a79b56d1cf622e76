"""Benchmark decontamination: drop any training sample sharing a word 10-gram with an eval set.

PAPER.md stage 0: normalise (lowercase, strip punctuation and symbols; `ngram.words`), then drop
any sample sharing a 10-gram with any evaluation set. `EvalIndex` holds the eval sets' n-grams;
`hits(texts)` answers a whole batch at once and names the eval items each text overlaps.

How it is fast (benchmarks/decontam.py compares it with a Python set of all eval 10-grams and
with datatrove's NGramsDecontFilter): words become integer ids from the eval vocabulary (a word
the eval sets never use cannot be in a shared n-gram: id -1); the ids of the whole batch are one
numpy array, every window's 64-bit polynomial hash is computed with n vectorised multiply-adds,
windows holding a -1 are masked, and the hashes are looked up in the sorted eval hashes with one
`searchsorted`. A hash hit is confirmed by comparing the id tuples, so the result is exact.

Templates: an n-gram found in many eval items ("let s think step by step and output the final
answer within boxed") is the benchmark's prompt template, not its content, and would flag every
training sample that uses the same template. n-grams in more than `template_share` of the eval
items (and in at least `template_min` items) are left out of the index; the paper is silent on
this, so it is a config value (1.0 keeps every n-gram; `max_df`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import repeat

import numpy as np

from vibethinker.construct.ngram import words

_P = np.uint64(1099511628211)  # FNV prime: an odd 64-bit multiplier for the polynomial hash


def window_hashes(ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(hash of every length-n window of `ids`, whether the window holds no id < 0)."""
    m = len(ids) - n + 1
    if m <= 0:
        return np.zeros(0, np.uint64), np.zeros(0, bool)
    u = (ids + 1).astype(np.uint64)
    h = np.zeros(m, np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            h = h * _P + u[k : k + m]
    bad = np.concatenate(([0], np.cumsum(ids < 0)))
    return h, (bad[n : n + m] - bad[:m]) == 0


def max_df(n_items: int, template_share: float, template_min: int) -> int:
    """The most eval items an n-gram may appear in and still be content (see module doc)."""
    if template_share >= 1.0:
        return n_items
    return max(template_min - 1, int(template_share * n_items))


class EvalIndex:
    """The n-grams of eval items {item_id: text}, for exact batch overlap queries."""

    def __init__(
        self,
        items: Iterable[tuple[str, str]],
        n: int = 10,
        template_share: float = 0.05,
        template_min: int = 3,
    ):
        self.n = n
        self.vocab: dict[str, int] = {}
        per_item: list[tuple[str, set[tuple[int, ...]]]] = []
        df: Counter = Counter()
        for item_id, text in items:
            ids = [self.vocab.setdefault(w, len(self.vocab)) for w in words(text)]
            grams = {tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)}
            per_item.append((item_id, grams))
            df.update(grams)
        self.n_items = len(per_item)
        limit = max_df(self.n_items, template_share, template_min)
        self.template_grams = sum(1 for c in df.values() if c > limit)
        self.grams: dict[int, dict[tuple[int, ...], list[str]]] = {}
        for item_id, grams in per_item:
            for g in grams:
                if df[g] > limit:
                    continue
                h = int(window_hashes(np.array(g, np.int64), n)[0][0])
                self.grams.setdefault(h, {}).setdefault(g, []).append(item_id)
        self.hashes = np.array(sorted(self.grams), np.uint64)

    def __len__(self) -> int:
        return sum(len(v) for v in self.grams.values())

    def hits(self, texts: list[str]) -> list[list[str]]:
        """For each text, the sorted ids of the eval items it shares an n-gram with ([] = clean)."""
        get = self.vocab.get
        flat: list[int] = []
        starts = []
        for t in texts:
            starts.append(len(flat))
            flat.extend(map(get, words(t), repeat(-1)))
            flat.append(-1)  # texts never share a window
        out: list[list[str]] = [[] for _ in texts]
        if not len(self.hashes) or not flat:
            return out
        ids = np.array(flat, np.int64)
        h, ok = window_hashes(ids, self.n)
        pos = np.searchsorted(self.hashes, h)
        pos[pos >= len(self.hashes)] = 0
        cand = np.nonzero(ok & (self.hashes[pos] == h))[0]
        if not len(cand):
            return out
        which = np.searchsorted(np.array(starts), cand, side="right") - 1
        found: dict[int, set[str]] = {}
        for p, t in zip(cand.tolist(), which.tolist()):
            items = self.grams[int(h[p])].get(tuple(flat[p : p + self.n]))
            if items:  # else a 64-bit hash collision: not a shared n-gram
                found.setdefault(t, set()).update(items)
        for t, s in found.items():
            out[t] = sorted(s)
        return out
