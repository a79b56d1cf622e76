"""Offline text measures for the IFEval rules: words, sentences, capital words, language.

IFEval's reference code leans on nltk (`punkt` sentence data, a download; the Treebank word
tokenizer) and on `langdetect`. None of that may be fetched at run time, so these are our own
approximations, written to agree with the reference on ordinary prose:

- `count_words` is exact: the reference uses `RegexpTokenizer(r"\\w+")`, i.e. `re.findall`.
- `count_sentences` approximates punkt: a sentence ends at `.`, `!`, `?` (runs of them, then any
  closing quotes/brackets) followed by whitespace; a period after a known abbreviation, a single
  letter (an initial) or a dotted acronym does not end one, nor does an ellipsis followed by a
  lower-case word. Newlines alone never split (as with punkt). Rare punkt decisions learned from
  its corpus statistics can differ.
- `word_tokens` approximates nltk's `word_tokenize` for counting all-capital words: whitespace
  tokens, punctuation split off, contractions split as the Treebank tokenizer does
  ("DON'T" -> "DO", "N'T"), hyphenated words kept whole.
- `detect_language` is a light heuristic, not langdetect: Unicode script first (Arabic vs
  Persian vs Urdu by their own letters, Devanagari by stopwords, kana for Japanese, Hangul,
  Cyrillic by letters + stopwords, ...), then for Latin script the language whose stopwords
  cover most of the words (with diacritics as tie-breakers). It returns None when it cannot
  tell (no letters), which the rules treat as IFEval treats a langdetect exception: followed.
  Limitation: short or mixed-language texts, and languages outside IFEval's 30 codes, may be
  misjudged; a response in an unlisted Latin-script language is reported as the nearest listed.
"""

from __future__ import annotations

import re
from collections import Counter

_WORD_RE = re.compile(r"\w+")


def count_words(text: str) -> int:
    """Number of `\\w+` runs (exactly IFEval's word count)."""
    return sum(1 for _ in _WORD_RE.finditer(text))


# ---------------------------------------------------------------------------------------------
# Sentences
# ---------------------------------------------------------------------------------------------
# Lower-cased tokens (without their final period) after which a period is not a sentence end.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e cf al inc ltd co corp approx dept est ed eds "
    "gen gov lt col capt sgt mt ft jan feb aug sep sept oct nov dec ph.d a.m p.m".split()
)
# Abbreviations only before a number ("No. 5", "Fig. 2"); elsewhere "no." ends a sentence.
_NUMBER_ABBREVIATIONS = frozenset("no nos fig figs eq eqs vol vols sec ch pp p".split())
# A candidate boundary: terminal punctuation, optional closers, whitespace, then the next char.
# (No lookahead for that char: it would make the regex quadratic on long whitespace runs.)
_BOUNDARY_RE = re.compile(r"([.!?]+|…)([\"'”’)\]]*)\s+")


def _token_before(text: str, end: int) -> str:
    """The whitespace-delimited token that ends at `end` (exclusive), opening brackets stripped."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end].lstrip("\"'“‘([{")


def _is_boundary(text: str, m: re.Match[str]) -> bool:
    if m.end() >= len(text):  # only whitespace follows: the end of the text, not a boundary
        return False
    punct, nxt = m.group(1), text[m.end()]
    if "!" in punct or "?" in punct:
        return True
    if punct in ("...", "…") or len(punct) > 3:
        # An ellipsis ends a sentence only when a capitalised word (or a digit) follows.
        return nxt.isupper() or nxt.isdigit()
    if len(punct) > 1:
        return True
    word = _token_before(text, m.start(1)).lower()
    if not word:
        return True
    if word in _ABBREVIATIONS or (word in _NUMBER_ABBREVIATIONS and nxt.isdigit()):
        return False
    if len(word) == 1 and word.isalpha():  # an initial: "J. Smith"
        return False
    if re.fullmatch(r"(?:[a-z]\.)+[a-z]", word):  # a dotted acronym: "U.S.A." (as punkt)
        return False
    return True


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences (see the module docstring for the rules)."""
    sentences: list[str] = []
    start = 0
    for m in _BOUNDARY_RE.finditer(text):
        if _is_boundary(text, m):
            piece = text[start : m.end(2)].strip()
            if piece:
                sentences.append(piece)
            start = m.end(2)
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def count_sentences(text: str) -> int:
    return len(split_sentences(text))


# ---------------------------------------------------------------------------------------------
# Word tokens (for all-capital word counts)
# ---------------------------------------------------------------------------------------------
_SPLIT_PUNCT_RE = re.compile(r"([,;:!?()\[\]{}<>\"“”‘`]|\.{2,}|…)")
_CONTRACTIONS = ("n't", "'s", "'m", "'d", "'ll", "'re", "'ve")


def _split_contraction(tok: str) -> list[str]:
    low = tok.lower()
    for suffix in _CONTRACTIONS:
        if low.endswith(suffix) and len(tok) > len(suffix) and tok[: -len(suffix)] != "'":
            return [tok[: -len(suffix)], tok[-len(suffix) :]]
    return [tok] if tok else []


def word_tokens(text: str) -> list[str]:
    """Treebank-like tokens: punctuation and contraction suffixes become their own tokens."""
    tokens: list[str] = []
    for chunk in text.replace("’", "'").split():
        for piece in _SPLIT_PUNCT_RE.split(chunk):
            if not piece:
                continue
            # A final period is split off (Treebank does so at the end of each sentence).
            if len(piece) > 1 and piece.endswith("."):
                tokens_here = [piece[:-1], "."]
            else:
                tokens_here = [piece]
            for tok in tokens_here:
                tok = tok.strip("'") if tok.startswith("'") and tok.endswith("'") else tok
                tokens.extend(_split_contraction(tok))
    return tokens


def count_capital_words(text: str) -> int:
    """Tokens that are all capitals (`str.isupper`: cased letters, all upper)."""
    return sum(1 for tok in word_tokens(text) if tok.isupper())


# ---------------------------------------------------------------------------------------------
# Language
# ---------------------------------------------------------------------------------------------
# (code, regex of the script's letters) checked in order; the script with most letters wins.
_SCRIPTS: dict[str, str] = {
    "latin": r"[A-Za-z\u00C0-\u024F\u1E00-\u1EFF]",
    "cyrillic": r"[\u0400-\u04FF]",
    "greek": r"[\u0370-\u03FF]",
    "arabic": r"[\u0600-\u06FF\u0750-\u077F\uFB50-\uFDFF\uFE70-\uFEFF]",
    "hebrew": r"[\u0590-\u05FF]",
    "devanagari": r"[\u0900-\u097F]",
    "bn": r"[\u0980-\u09FF]",
    "pa": r"[\u0A00-\u0A7F]",
    "gu": r"[\u0A80-\u0AFF]",
    "ta": r"[\u0B80-\u0BFF]",
    "te": r"[\u0C00-\u0C7F]",
    "kn": r"[\u0C80-\u0CFF]",
    "ml": r"[\u0D00-\u0D7F]",
    "th": r"[\u0E00-\u0E7F]",
    "ko": r"[\uAC00-\uD7AF\u1100-\u11FF\u3130-\u318F]",
    "kana": r"[\u3040-\u30FF]",
    "han": r"[\u4E00-\u9FFF\u3400-\u4DBF]",
}
_SCRIPT_RES = {k: re.compile(v) for k, v in _SCRIPTS.items()}

_STOPWORDS: dict[str, frozenset[str]] = {
    k: frozenset(v.split())
    for k, v in {
        "en": "the and of to a in is it that this for you with are was be on as not have but "
        "or by at from they we an which can will your their there what all would one if has "
        "more about been these when so some other than then its also into only do how",
        "es": "el la de que y en los las del se por un una con no para es al lo como más pero "
        "sus le ya o este sí porque esta entre cuando muy sin sobre también me hasta hay donde",
        "pt": "o a de que e do da em um para é com não uma os no se na por mais as dos como mas "
        "ao ele das à seu sua ou quando muito nos já eu também só pelo pela até isso ela entre",
        "fr": "le la les de des et en un une du est que qui dans pour pas sur au il elle ne se "
        "ce avec plus par sont nous vous ou mais comme on leur cette aux été être fait je tout",
        "de": "der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als "
        "auch es an werden aus er hat dass sie nach wird bei einer um am sind noch wie einem",
        "it": "il di che e la in un per è una non sono con del le si da al lo gli dei della ma "
        "come anche più nel questo alla se delle ha nella o essere ci mi sua suo tra quando",
        "pl": "i w na z że do nie się to jest o jak a po ale co tak za od przez dla jego już "
        "oraz są być może tylko czy przy jej ich bardzo tym gdy które który która było",
        "vi": "và của là có các được trong cho một những không với người này đã để khi từ "
        "đến như thì cũng nhiều sẽ làm ra nên vì tôi đó hơn theo",
        "sw": "na ya wa kwa ni za katika la kuwa hii ambao hiyo kama yake huo hilo wao sana "
        "pia lakini au bila kila kwenye alisema watu mimi wewe yeye sisi nini",
        "fi": "ja on ei se että oli ovat hän tai kun mutta myös jos niin kuin sen ole mikä "
        "joka ovat olla voi tämä sekä vain nyt kanssa minä sinä me te he mitä",
    }.items()
}
_CYRILLIC_STOPWORDS = {
    "ru": frozenset("и в не на что я с он как это по но из у за от то все был так его же".split()),
    "uk": frozenset("і в не на що я з він як це по але та у за від до все був так його ж".split()),
    "bg": frozenset("и в не на че аз с той как това по но от за да се са е ще към във".split()),
}
_DEVANAGARI_STOPWORDS = {
    "hi": frozenset("है और के की में का को से हैं यह पर भी एक नहीं कि लिए था हो".split()),
    "mr": frozenset("आहे आणि हे या व की ते त्या मी आहेत होते करून तर पण नाही".split()),
    "ne": frozenset("छ र को मा हो यो पनि छन गर्न भएको लागि गरेको थियो हुन्छ".split()),
}
# Letters particular to one language among those sharing a script (weighted hints).
_LATIN_HINTS = {
    "vi": "ơưăđạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ",
    "pl": "ąęłśźżńć",
    "de": "äöüß",
    "fr": "çœèêëîïûù",
    "es": "ñ¿¡",
    "pt": "ãõç",
    "fi": "äö",
    "it": "ìò",
}
_WORDS_RE = re.compile(r"[^\W\d_]+")


def _pick_by_stopwords(words: list[str], table: dict[str, frozenset[str]]) -> str:
    scores = {lang: sum(w in sw for w in words) for lang, sw in table.items()}
    return max(scores, key=lambda k: scores[k])


def _latin_language(text: str) -> str:
    low = text.lower()
    words = _WORDS_RE.findall(low)
    scores = Counter({lang: sum(w in sw for w in words) for lang, sw in _STOPWORDS.items()})
    chars = Counter(low)
    for lang, letters in _LATIN_HINTS.items():
        # Diacritics count half a stopword each, enough to break ties without dominating.
        scores[lang] += 0.5 * sum(chars[c] for c in letters)
    best, best_score = max(scores.items(), key=lambda kv: kv[1])
    return best if best_score > 0 else "en"


def detect_language(text: str) -> str | None:
    """ISO 639-1 code of the dominant language of `text`, or None when there are no letters."""
    counts = {name: len(rx.findall(text)) for name, rx in _SCRIPT_RES.items()}
    if counts["kana"]:
        # Japanese mixes kana with kanji; any real amount of kana means Japanese.
        counts["kana"] += counts["han"]
    script, n = max(counts.items(), key=lambda kv: kv[1])
    if n == 0:
        return None
    if script == "latin":
        return _latin_language(text)
    if script == "cyrillic":
        if re.search(r"[іїєґ]", text, re.IGNORECASE):
            return "uk"
        if re.search(r"[ыэё]", text, re.IGNORECASE):
            return "ru"
        return _pick_by_stopwords(_WORDS_RE.findall(text.lower()), _CYRILLIC_STOPWORDS)
    if script == "arabic":
        if re.search(r"[ٹڈڑںےۓھ]", text):
            return "ur"
        if re.search(r"[پچژگکی]", text):
            return "fa"
        return "ar"
    if script == "devanagari":
        return _pick_by_stopwords(text.split(), _DEVANAGARI_STOPWORDS)
    return {"greek": "el", "hebrew": "he", "kana": "ja", "han": "zh"}.get(script, script)
