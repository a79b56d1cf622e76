"""Multiple-choice (STEM) verifier: the letter of the final answer statement in the answer part.

The committed-answer rule (docs/VERIFY_CHOICE.md has it with reasons, the case table and the
comparison with simple-evals and lm-eval; the paper does not say how such answers are read):

1. Only the answer part counts (after `</think>`; none when cut off while thinking).
2. It is read after NFKC (full-width `Ｂ`, `：`) with the markup that wraps a letter removed:
   `$`, `*`, backticks, `\\(`/`\\)`, `\\text{}`, `\\textbf{}`, `\\mathrm{}`, `\\mathbf{}`, `\\emph{}`.
3. An answer statement is `\\boxed{..}`, `Answer: ..` ("Final answer:", "answer is: .."), "the
   answer/option/choice is ..", "the correct option: ..", "(option) X is (the) correct" or
   "X is the answer". What follows is a letter token (`B`, `(B)`, `[B]`, `option B`, `b`) or an
   option's text (`Answer: 2 m/s` is B when option B reads "2 m/s").
4. A letter that starts a word is no letter (`D-mannose`, `C3`, `Because`, `i.e.`); for `A`, `I`
   and lower-case letters neither is one followed by an ordinary word (`A number of ...`), save a
   word that continues a commitment (`A because`, `A is correct`). A word that is itself an
   option's text counts as that option.
5. The LAST statement counts; earlier ones are drafts (a revision, a named distractor). "The answer
   is X" framed as a guess in its own clause ("one might think", "tempting", "at first glance")
   or followed by a condition ("would be A if") is no statement.
6. A hedge is two different answers in the final statement (`A or B`, `A, C`, `B (or possibly
   C)`), or two statements separated only by space or a connector (`\\boxed{A} or \\boxed{B}`).
   It scores 0; the same letter twice is no hedge.
7. With no statement, a last line that is an option line (`(C)`, `C.`, `C) 3 m/s` with that
   option's text) counts, unless the line before is one too (a restated list).
8. A letter beyond the number of choices is invalid.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from vibethinker.types import Problem, Score
from vibethinker.verifiers.extract import answer_part

# Words that continue a commitment after "A"/"I"/a lower-case letter ("Answer: A because ..."),
# as opposed to the article in "Answer: A number of ...".
_COMMIT_WORDS = (
    "is|was|because|since|as|which|seems|appears|would|should|must|fits|matches|holds|gives|"
    "remains|here|then|too|again|indeed|or|and|correct|right|best"
)
_TOKEN = r"[\(\[]?\s*([A-Za-z])\s*[\)\]]?"
_NOT_WORD = r"(?!\w)(?!-\w)(?!['’]\w)(?!\.\w)"
_ARTICLE = re.compile(r"\s+(?!(?:" + _COMMIT_WORDS + r")\b)[a-z]|\s*[=<>^_+]")
# "the answer is definitely C": an adverb between the statement and its letter
_ADVERB = (
    r"(?:(?i:definitely|clearly|certainly|indeed|likely|probably|most\s+likely|therefore|thus|"
    r"hence|then)\s+)?"
)
_LETTER = re.compile(r"\s*" + _ADVERB + r"(?:(?i:option|choice)\s*)?" + _TOKEN + _NOT_WORD)
# what offers a further answer in the same statement: "A or B", "A, C", "B (or possibly C)"
_CONNECT = re.compile(
    r"\s*\(?\s*(?:[,/&]|\bor\b|\band\b|\bpossibly\b|\bperhaps\b|\bmaybe\b)"
    r"(?:\s*\b(?:or|possibly|perhaps|maybe|also|even|else)\b)*"
)
_WORDY = re.compile(r"[/&]|\b(?:or|and|possibly|perhaps|maybe)\b")
_STATEMENTS = [
    # "Answer: B", "Final Answer: (B)", "answer is: B", "The correct option: C"
    re.compile(r"answer\s*(?:is\s*)?:|(?:correct|right|best|final)\s+(?:option|choice)\s*:", re.I),
    # "the answer is (B)", "the correct option is B", "the answer would/should be C"
    re.compile(
        r"\b(?:answer|option|choice)\s+(?:(?:would|should|must|will)\s+be|is|=)(?=\s)", re.I
    ),
]
# letter first: "Option B is correct", "(C) is the correct answer", "C is the answer"
_LETTER_FIRST = re.compile(
    r"(?<![\w-])(?:(?i:option|choice)\s+)?[\(\[]?([A-Z])[\)\]]?\s+is\s+(?:the\s+)?"
    r"(?i:correct|right|best|answer)\b"
)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{([^{}]{0,200})\}")
_MARKUP = re.compile(r"\\(?:text(?:bf|rm|it)?|math(?:rm|bf|it)?|emph)\s*\{([^{}]*)\}")
_STRIP = re.compile(r"[$*`]|\\[()]")
# someone else's or a first-guess answer: "one might think the answer is A", "at first"
_FRAME_BEFORE = re.compile(
    r"\b(?:might|may|could|would)\s+(?:think|guess|say|expect|conclude|assume|pick|choose|be\s+"
    r"tempted)|\btempt\w*|\bnaive\w*|\bat\s+first\b|\binitially\b|\bfirst\s+glance\b|"
    r"\bmistake\w*|\bmistaken\w*|\bwrongly\b|\bdistractor\b|\btrap\b",
    re.I,
)
_CLAUSE = re.compile(r"[.;!?\n]|\b(?:but|however|yet|instead)\b", re.I)
_FRAME_AFTER = re.compile(r"\s*,?\s*(?:only\s+)?(?:if|unless)\b", re.I)
_JOIN = re.compile(r"\s*(?:[,/&;]|\bor\b|\band\b)?\s*", re.I)
_OPTION_LINE = re.compile(r"[\(\[]?([A-Z])\s*(?:[\)\]]|\.|:|$)\s*(.*)$")


@dataclass(frozen=True)
class _Statement:
    """One answer statement: where it starts and ends, and the letters it offers."""

    start: int  # index of the statement in the cleaned text
    end: int  # index just past the last letter or option text read
    letters: tuple[str, ...]  # upper-case, in order, no duplicates
    framed: bool = False  # "the answer is X" as someone else's guess or a condition


def _clean(text: str) -> str:
    """NFKC plus the markup that wraps a letter removed (`$D$`, `**B**`, `\\textbf{C}`)."""
    s = unicodedata.normalize("NFKC", text)
    for _ in range(3):  # nested \text{\textbf{B}}: at most three levels
        s2 = _MARKUP.sub(r"\1", s)
        if s2 == s:
            break
        s = s2
    return _STRIP.sub("", s)


def _norm(s: str) -> str:
    return " ".join(s.lower().split()).strip(" .;:,!")


def _options(choices: Sequence[str] | None) -> list[str]:
    """Option texts as compared with the response: cleaned, lower-case, spaces collapsed."""
    return [_norm(_clean(c)) for c in (choices or [])[:26]]  # letters stop at Z


def _option_text_at(text: str, pos: int, opts: list[str]) -> tuple[str, int] | None:
    """The option whose text starts at `pos` (longest one, ending at a word boundary)."""
    best: tuple[str, int] | None = None
    head = text[pos : pos + 64 + max(map(len, opts))].lower()
    lead = len(head) - len(head.lstrip())
    for i, c in enumerate(opts):
        if not c or not head.startswith(c, lead):
            continue
        stop = lead + len(c)
        if stop < len(head) and (head[stop].isalnum() or head[stop] in "-_"):
            continue
        if best is None or pos + stop > best[1]:
            best = (string.ascii_uppercase[i], pos + stop)
    return best


def _letter_at(text: str, pos: int) -> tuple[str, int] | None:
    """The letter token at `pos` under rule 4, with where it ends."""
    m = _LETTER.match(text, pos)
    if m is None:
        return None
    c = m.group(1)
    bracketed = m.group(0).rstrip().endswith((")", "]"))
    if (c in "AI" or c.islower()) and not bracketed and _ARTICLE.match(text, m.end()):
        return None
    return c.upper(), m.end()


def _one_at(text: str, pos: int, opts: list[str]) -> tuple[str, int] | None:
    """One answer at `pos`: an option's text (rule 4's exception) or a letter token."""
    hit = _option_text_at(text, pos, opts) if opts else None
    return hit if hit is not None else _letter_at(text, pos)


def _read_body(text: str, pos: int, opts: list[str]) -> tuple[list[str], int]:
    """Answers offered from `pos` on: one, then any alternatives (rule 6). After a bare comma
    only a letter is an alternative: "B, 2 m/s" restates B's text, it offers nothing new."""
    hit = _one_at(text, pos, opts)
    if hit is None:
        return [], pos
    letters, end = [hit[0]], hit[1]
    while conn := _CONNECT.match(text, end):
        more = _one_at(text, conn.end(), opts if _WORDY.search(conn.group(0)) else [])
        if more is None:
            break
        letters.append(more[0])
        end = more[1]
    return letters, end


def _framed(text: str, start: int, end: int) -> bool:
    """Rule 5: the sentence before the statement frames it as a guess, or a condition follows."""
    lo = max(start - 120, 0)  # bounded: a statement costs O(1) however long the text
    for m in _CLAUSE.finditer(text, lo, start):
        lo = m.end()  # the frame must be in the statement's own clause
    return bool(_FRAME_BEFORE.search(text, lo, start) or _FRAME_AFTER.match(text, end))


def _statements(text: str, opts: list[str]) -> list[_Statement]:
    """Every answer statement that offers at least one letter, in order of position."""
    out: list[_Statement] = []
    for i, pat in enumerate(_STATEMENTS):
        for m in pat.finditer(text):
            letters, end = _read_body(text, m.end(), opts)
            if letters:
                framed = i == 1 and _framed(text, m.start(), end)
                out.append(_Statement(m.start(), end, tuple(dict.fromkeys(letters)), framed))
    for m in _LETTER_FIRST.finditer(text):
        out.append(_Statement(m.start(), m.end(), (m.group(1),), _framed(text, m.start(), m.end())))
    for m in _BOX.finditer(text):
        letters, end = _read_body(m.group(1), 0, opts)
        read, rest = m.group(1)[:end].rstrip(), m.group(1)[end:].strip()
        if letters and (not rest or rest[0] in ".:)-,;" or read.endswith((")", "]"))):
            out.append(_Statement(m.start(), m.end(), tuple(dict.fromkeys(letters))))
    return sorted(out, key=lambda s: (s.start, -s.end))


def _final_statement(stmts: list[_Statement], text: str) -> tuple[str, ...]:
    """Rules 5-6: the last unframed statement, joined with the one before it when only a
    connector separates them."""
    live = [s for s in stmts if not s.framed]
    if not live:
        return ()
    last = live[-1]
    groups = [last.letters]  # collected backwards, reversed at the end
    for prev in reversed(live[:-1]):
        if prev.end > last.start:  # overlaps ("Final answer: A is correct" read twice)
            groups.append(prev.letters)
            continue
        if not _JOIN.fullmatch(text, prev.end, last.start):
            break
        groups.append(prev.letters)
        last = prev
    return tuple(dict.fromkeys(c for g in reversed(groups) for c in g))


def _option_line(text: str, opts: list[str]) -> tuple[str, ...]:
    """Rule 7: the last non-empty line as an option line, unless it closes a restated list."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]

    def read(line: str) -> str | None:
        m = _OPTION_LINE.fullmatch(line)
        if m is None:
            return None
        c, rest = m.group(1), _norm(m.group(2))
        if not rest:
            return c
        i = ord(c) - ord("A")
        if i < len(opts) and rest == opts[i]:
            return c
        return None

    if not lines or (c := read(lines[-1])) is None:
        return ()
    if len(lines) > 1 and read(lines[-2]) is not None:
        return ()
    return (c,)


def committed_letters(text: str, choices: Sequence[str] | None = None) -> list[str]:
    """The letters the final answer statement of `text` offers (upper-case, in order, no
    duplicates): one letter is an answer, several a hedge, none no answer. `choices` (option
    texts) lets an option's text stand for its letter."""
    s, opts = _clean(text), _options(choices)
    letters = _final_statement(_statements(s, opts), s)
    return list(letters or _option_line(s, opts))


def _gold_letter(answer: str | None) -> str | None:
    if not answer:
        return None
    s = answer.strip().strip("()").strip()
    return s.upper() if len(s) == 1 and s.isalpha() else None


def verify_choice(problem: Problem, response: str) -> Score:
    """Score a multiple-choice response against the gold letter `problem.answer` (binary)."""
    gold = _gold_letter(problem.answer)
    if gold is None:
        return Score(0.0, False, "bad_problem:no_answer")
    part = answer_part(response)
    if part is None:
        return Score(0.0, False, "no_answer")
    n = len(problem.choices) if problem.choices else 26
    letters = committed_letters(part, problem.choices)
    if not letters:
        return Score(0.0, False, "no_answer")
    if len(letters) > 1:
        return Score(0.0, False, "hedged_answer")
    if letters[0] not in string.ascii_uppercase[:n]:
        return Score(0.0, False, "invalid_choice")
    if letters[0] == gold:
        return Score(1.0, True, "ok")
    return Score(0.0, False, "wrong_answer")
