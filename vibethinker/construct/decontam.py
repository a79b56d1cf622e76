"""Benchmark decontamination: drop any training sample sharing a word 10-gram with an eval set.

docs/PAPER.md stage 0: normalise (lowercase, strip punctuation and symbols; `ngram.words`), then drop
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

from vibethinker.construct.ngram import WORD, words

SENTINEL = "qzxsentinelvibethinkerqzx"  # separates the texts of a batch (see `hits`)
_P = np.uint64(1099511628211)
_BLOOM_MASK = np.uint64((1 << 22) - 1)  # low hash bits of the eval n-grams: a 4 MB pre-check
# ASCII bytes: letters and digits stay (lowercase by then), everything else becomes a space
_ASCII_SPLIT = bytes(
    c if 48 <= c <= 57 or 97 <= c <= 122 else 32 for c in range(256)
)  # FNV prime: an odd 64-bit multiplier for the polynomial hash


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
            keep = [g for g in grams if df[g] <= limit]
            if not keep:
                continue
            flat = np.array([x for g in keep for x in (*g, -1)], np.int64)
            hs = window_hashes(flat, n)[0][:: n + 1].tolist()  # one window per gram
            for g, h in zip(keep, hs):
                self.grams.setdefault(h, {}).setdefault(g, []).append(item_id)
        self.hashes = np.array(sorted(self.grams), np.uint64)
        if SENTINEL in self.vocab:  # an eval set that uses our sentinel word: cannot happen
            raise ValueError(f"eval text contains the reserved word {SENTINEL!r}")
        self._lookup = {**self.vocab, SENTINEL: -2}
        self._lookup_bytes = {w.encode(): i for w, i in self._lookup.items() if w.isascii()}
        self._bloom = np.zeros(_BLOOM_MASK + 1, bool)
        self._bloom[self.hashes & _BLOOM_MASK] = True

    def __len__(self) -> int:
        return sum(len(v) for v in self.grams.values())

    def hits(self, texts: list[str]) -> list[list[str]]:
        """For each text, the sorted ids of the eval items it shares an n-gram with ([] = clean)."""
        if not texts:
            return []
        # One regex pass and one dict pass over the whole batch: texts joined by a sentinel word
        # that is in no eval set (id -2; every id < 0 breaks a window, so no window spans texts).
        joined = f" {SENTINEL} ".join(texts).lower()
        if joined.isascii():  # the same words as WORD, by a C translate + split (~5x faster)
            ws = joined.encode().translate(_ASCII_SPLIT).split()
            lookup = self._lookup_bytes
        else:
            ws, lookup = WORD.findall(joined), self._lookup
        ids = np.fromiter(map(lookup.get, ws, repeat(-1)), np.int64, len(ws))
        out: list[list[str]] = [[] for _ in texts]
        if not len(self.hashes):
            return out
        h, ok = window_hashes(ids, self.n)
        maybe = np.nonzero(ok & self._bloom[h & _BLOOM_MASK])[0]  # cheap pre-check, no misses
        pos = np.searchsorted(self.hashes, h[maybe])
        pos[pos >= len(self.hashes)] = 0
        cand = maybe[self.hashes[pos] == h[maybe]]
        if not len(cand):
            return out
        which = np.searchsorted(np.nonzero(ids == -2)[0], cand)  # sentinels before = text index
        found: dict[int, set[str]] = {}
        for p, t in zip(cand.tolist(), which.tolist()):
            items = self.grams[int(h[p])].get(tuple(ids[p : p + self.n].tolist()))
            if items:  # else a 64-bit hash collision: not a shared n-gram
                found.setdefault(t, set()).update(items)
        for t, s in found.items():
            out[t] = sorted(s)
        return out


def record_texts(problem) -> list[str]:
    """The texts of a training record that must not overlap an eval set: its prompt, traces and
    wrong traces (a Problem; duck-typed to keep this module free of the record types)."""
    return [problem.prompt, *(problem.traces or []), *(problem.wrong_traces or [])]


def split_clean(records: list, index: EvalIndex | None) -> tuple[list, dict[int, list[str]]]:
    """(records none of whose texts shares an n-gram with an eval item, {position of each
    dropped record: the eval items it overlaps}); no index keeps everything."""
    if index is None or not records:
        return list(records), {}
    texts, owner = [], []
    for k, p in enumerate(records):
        for t in record_texts(p):
            texts.append(t)
            owner.append(k)
    bad: dict[int, set[str]] = {}
    for k, h in zip(owner, index.hits(texts)):
        if h:
            bad.setdefault(k, set()).update(h)
    return [p for k, p in enumerate(records) if k not in bad], {
        k: sorted(v) for k, v in bad.items()
    }
