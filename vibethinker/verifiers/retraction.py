"""Read a retraction in prose after the answer: "Actually, the answer is 5", "Wait, that's wrong."

Reasoning models very often check their work after the box ("Wait, let me verify: 3 + 4 = 7",
"Let me double-check: 7 - 4 = 3. Yes."), so a number after the box is not a second answer.
Only an explicit retraction is: a cue ("Actually", "Wait", "On second thought", "Correction",
"Oops", "Scratch that", "Hold on", or a negation or admission: "that's wrong", "I made a
mistake", "I miscounted") followed by a statement of another value ("the sum is $6$",
"x = 6", "it should be 6", "Correction: 6"). The text is read sentence by sentence:

- a sentence that checks or confirms (verify, check, confirm, sanity, plug in, substitute,
  make sure, yes, indeed, correct, right, consistent, works, holds, matches) counts for
  nothing, and the sentences after it (the rest of the check) count for nothing until the
  next cue: so do questions ("Wait, is it 6?");
- a cue sentence counts its own statements; after a negation, an admission, a rethink ("let me
  recompute") or a bare cue ("Wait."), the following sentences count as well, until a check;
- a value counts only in the place of a statement: after "is", "are", "be", "equals", "gives",
  "get", "to", ":" or right after the cue, or as `name = value`; an arithmetic equation
  (`3 + 4 = 7`, `$7 - 4 = 3$`, "3 plus 4 is 7"), a negated value ("6, not 5") or a number that
  opens a sentence without a cue ("4 doesn't work") is not a statement.

Pure string functions, linear in a window of at most a few thousand characters.
"""

from __future__ import annotations

import re

_CUE_RE = re.compile(
    r"\b(?:actually|wait|on second thought|correction|oops|scratch that|hold on)\b", re.I
)
# a negation of the answer or an admission of an error: the answer is taken back
_NEGATION = (
    r"\b(?:that|this|it|my answer|the answer(?: above)?|my (?:box|result))(?:'s|\s+is|\s+was)\s+"
    r"(?:wrong|incorrect|not\s+(?:right|correct))"
    r"|\bI (?:made|have made|'ve made) an? (?:\w+ )?(?:mistake|error)"
    r"|\bI (?:miscounted|miscalculated|misread|misunderstood|overcounted|undercounted)"
)
NEGATION_RE = re.compile(_NEGATION, re.I)
_HYPOTHETICAL_RE = re.compile(r"\b(?:if|whether)\b[^.]*$", re.I)
# a rethink keeps the retraction open to the next sentences, without taking the answer back
_RETHINK_RE = re.compile(
    r"\b(?:re-?(?:compute|calculate|count|do|think|consider|examine|evaluate|read)\w*"
    r"|mistake|error|misread|miscount\w*|overlooked|forgot|instead"
    r"|(?:does|did|would|will|can|could)(?:n['’]t| not) (?:work|be)|cannot be"
    r"|is(?:n['’]t| not) (?:valid|allowed|possible)|is (?:invalid|impossible))\b",
    re.I,
)
# a check or a confirmation: its numbers are arithmetic, not answers ("the correct answer is"
# and "the right answer is" are statements, not confirmations)
_CHECK_RE = re.compile(
    r"verif|check|confirm|\bsanity\b|\bplug|substitut|make sure|\bensure|\byes\b|\bindeed\b"
    r"|(?<!the )(?<!a )\b(?:correct|right)\b(?! (?:answer|value|result|count|number|total))"
    r"|consisten|\bworks\b|\bholds\b|\bmatch(?:es)?\b|\bagrees?\b|as expected|✓",
    re.I,
)
_SENTENCE_RE = re.compile(r"[^\n]*?(?:[.!?]+(?=\s|$)|\n|$)")
VALUE_RE = re.compile(
    r"\$\$?([^$]{1,300}?)\$\$?|\\\((.{1,300}?)\\\)|\*\*([^*]{1,300})\*\*"
    r"|(?<![\w.^{\\])([-+]?\d[\d,]*(?:\.\d+)?(?:/\d+)?)(?![\w^{\\]|\.\d)"
)
_NOT_BEFORE_RE = re.compile(r"(?:\bnot|\binstead of|\brather than|\bthan)\W*$", re.I)
# the place of a statement: "is 6", "should be 6", "comes to 6", "Correction: 6", "x = 6"
_STATEMENT_RE = re.compile(
    r"(?:(?:\b(?:is|are|was|were|be|equals?|becomes?|gives?|giving|leaving|get|got|yields?"
    r"|to|makes?)\b"
    r"|['’]s)(?:\s+(?:exactly|actually|just|only|really|then|now|also))?|:|(?<![\w)+\-*/^])"
    r"[A-Za-z]\w*\s*=)\s*$",
    re.I,
)
_AFTER_CUE_RE = re.compile(r"^\W*(?:\bno\b)?\W*$", re.I)  # "Correction: 6", "Actually, no, 6."
_ARITH = r"(?:[-+*/×÷]|\\times|\\cdot|\bplus\b|\bminus\b|\btimes\b|\bdivided by\b|\bover\b)"
_ARITH_BEFORE_RE = re.compile(
    r"\d\)?\s*\$?\s*" + _ARITH + r"\s*\$?\s*\(?-?\d[\d.,]*\)?\s*\$?\s*"
    r"(?:is|are|equals?|=|gives?|makes?|yields?)\s*$",
    re.I,
)
_WORD_RE = re.compile(r"\b(?!(?:no|nope|hmm+|um+|wait|actually)\b)\w", re.I)  # "Wait, no."
_NAME_EQ_RE = re.compile(r"\s*\\?[A-Za-z]\w*(?:_\{?\w+\}?)?\s*=[^=<>]+")


def arithmetic(value: str, after: str = "") -> bool:
    """Is `value` (the math of a formula, or a bare number followed by `after`) arithmetic rather
    than an answer: an equation whose left side is not a name (`3 + 4 = 7`, `x + 1 = 6`), or the
    first term of an expression (`3` in `3 + 4 = 7`)?"""
    if "=" in value and not _NAME_EQ_RE.fullmatch(value):
        return True
    return re.match(r"\s*(?:[-+*/×=^]|\\times|\\cdot)", after) is not None


def _value(match: re.Match[str], sentence: str, cue_end: int) -> str | None:
    """The value of a `VALUE_RE` match in `sentence` when it stands as a statement, else None."""
    raw = next(g for g in match.groups() if g is not None).strip().rstrip(".,;:")
    pre = sentence[max(cue_end, 0) : match.start()]
    if _NOT_BEFORE_RE.search(sentence[max(0, match.start() - 20) : match.start()]):
        return None  # "6, not 5": the 5 is denied
    if _ARITH_BEFORE_RE.search(sentence[max(0, match.start() - 60) : match.start()]):
        return None  # "3 + 4 = 7", "3 plus 4 is 7": arithmetic
    if arithmetic(raw, sentence[match.end() : match.end() + 8] if match.group(4) else ""):
        return None
    if not _STATEMENT_RE.search(pre[-80:]) and (cue_end < 0 or not _AFTER_CUE_RE.match(pre)):
        return None  # a number that opens a sentence without a cue is a subject, not a value
    return raw or None


def _sentences(window: str) -> list[tuple[int, str]]:
    """(start, text) of each sentence of `window`: split after `.`, `!`, `?` before a space, and
    at a line break."""
    out = []
    for m in _SENTENCE_RE.finditer(window):
        if m.group().strip():
            out.append((m.start(), m.group()))
    return out


def _negation(sentence: str) -> bool:
    """Does `sentence` take the answer back ("that's wrong", "I made a mistake"), not inside a
    check or a question, nor as a hypothesis ("let me see if that is wrong")?"""
    m = NEGATION_RE.search(sentence)
    if m is None or sentence.rstrip().endswith("?"):
        return False
    if re.search(r"verif|check|confirm|plug|substitut", sentence, re.I):
        return False
    return _HYPOTHETICAL_RE.search(sentence[: m.start()]) is None


def retraction(text: str, window: int = 2000) -> tuple[int, str | None] | None:
    """(where the cue of the retraction starts, its last value or None) in the first `window`
    characters of `text` (module docstring); None when there is no retraction, only a cue with
    neither a stated value nor a negation ("Actually, this is a classic problem."), or only
    checks and confirmations ("Wait, let me verify: 3 + 4 = 7")."""
    text = text[:window]
    open_at, negated_at, found = -1, -1, None
    for start, sentence in _sentences(text):
        cue = _CUE_RE.search(sentence)
        negation = _negation(sentence)
        if negation and negated_at < 0:
            negated_at = start + NEGATION_RE.search(sentence).start()
        if not negation and (_CHECK_RE.search(sentence) or sentence.rstrip().endswith("?")):
            # a check, a confirmation or a question: nothing here is a statement, and the check
            # runs on to the next cue; a questioning cue ("Wait, is it 6?") leaves room for one
            open_at = start + cue.start() if cue and sentence.rstrip().endswith("?") else -1
            continue
        if cue is None and not negation and open_at < 0:
            continue
        at = start + (cue.start() if cue else 0) if cue or negation else open_at
        cue_end = cue.end() if cue else -1
        for v in VALUE_RE.finditer(sentence):
            if v.start() >= cue_end and (value := _value(v, sentence, cue_end)) is not None:
                found = (at, value)
        bare = cue is not None and not _WORD_RE.search(sentence[cue.end() :])
        if negation or bare or _RETHINK_RE.search(sentence):
            open_at = at  # the next sentences may give the new value
        elif cue is not None:
            open_at = -1  # "Actually, this is a classic problem.": that sentence only
    if found is not None:
        return found
    return (negated_at, None) if negated_at >= 0 else None
