"""n-gram text layer: normalisation and the repetition filter (quality control, layer 1).

`words(text)` is the one normalisation every n-gram step uses (docs/PAPER.md stage 0: lowercase,
strip punctuation and symbols): lowercased runs of letters and digits; everything else splits.

The repetition statistics are Gopher's (Rae et al. 2021, table A1) as implemented by datatrove's
`GopherRepetitionFilter` helpers, which we call directly: the fraction of characters in the most
frequent 2/3/4-gram, and in duplicated 5..10-grams. Gopher's thresholds (0.20..0.10) are tuned on
web pages; reasoning traces repeat legitimately (each step reuses the last result), so our
thresholds are config values, calibrated in docs/CONSTRUCT.md.
"""

from __future__ import annotations

import re

from datatrove.pipeline.filters.gopher_repetition_filter import (
    find_all_duplicate,
    find_duplicates,
    find_top_duplicate,
    get_n_grams,
)

WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Lowercase word tokens with punctuation and symbols stripped: "3*4=12." -> [3, 4, 12]."""
    return WORD.findall(text.lower())


def repetition_stats(text: str) -> dict[str, float]:
    """Gopher repetition fractions of `text` (0 for a text too short for an n-gram size):
    dup_line (share of duplicated non-empty lines), top_2..top_4 (characters in the most
    frequent n-gram / all word characters), dup_5..dup_10 (characters in duplicated n-grams)."""
    lines = [x for x in text.splitlines() if x.strip()]
    out = {"dup_line": find_duplicates(lines)[0] / len(lines) if lines else 0.0}
    ws = words(text)
    chars = sum(len(w) for w in ws)
    for n in (2, 3, 4):
        grams = get_n_grams(ws, n)
        out[f"top_{n}"] = find_top_duplicate(grams) / chars if grams and chars else 0.0
    for n in range(5, 11):
        out[f"dup_{n}"] = find_all_duplicate(ws, n) / chars if len(ws) >= n and chars else 0.0
    return out


def repetition_reason(
    text: str, min_words: int, max_dup_line: float, max_top: float, max_dup: float
) -> str | None:
    """Why `text` is degenerate ("rep_dup_line", "rep_top_3", "rep_dup_7", ...), or None.
    Texts under `min_words` words are not judged (the fractions are noise there)."""
    if len(words(text)) < min_words:
        return None
    s = repetition_stats(text)
    if s["dup_line"] > max_dup_line:
        return "rep_dup_line"
    for n in (2, 3, 4):
        if s[f"top_{n}"] > max_top:
            return f"rep_top_{n}"
    for n in range(5, 11):
        if s[f"dup_{n}"] > max_dup:
            return f"rep_dup_{n}"
    return None


def ngram_set(text: str, n: int) -> set[tuple[str, ...]]:
    """The set of word n-grams of `text` (the whole text as one gram when it is shorter)."""
    ws = words(text)
    if len(ws) < n:
        return {tuple(ws)} if ws else set()
    return {tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)}


def jaccard(a: set, b: set) -> float:
    """|a & b| / |a | b| (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0
