"""Multiple-choice (STEM) verifier: exactly one committed letter in the answer part.

A letter counts only where the response commits to it: `\\boxed{X}`, `Answer: X`, or "the
answer is (X)". Several different committed letters is a hedge and scores 0; a capital letter in
prose ("A good way to see this...") is not an answer; a letter beyond the number of choices is
invalid.
"""

from __future__ import annotations

import re
import string

from vibethinker.types import Problem, Score
from vibethinker.verifiers.extract import all_boxed, answer_part

_LETTER = r"\(?\**\s*([A-Z])\s*\**\)?"
# After the letter: not another letter (so "Answer: Because" is not "B"), and for the English
# words "A" and "I" not a following lowercase word ("Answer: A number of..." is prose), save a
# hedge's "or"/"and".
_END = r"(?![A-Za-z])(?!(?<=[AI])\s+(?!(?:or|and)\b)[a-z])"
_MORE = re.compile(r"\s*(?:,|/|&|\bor\b|\band\b)\s*\(?\**\s*([A-Z])\s*\**\)?" + _END)
_PATTERNS = [
    # "Answer: B", "**Final Answer:** (B)", "answer is: B"
    re.compile(
        r"answer\**\s*(?:is\s*)?[:：]\s*\**\s*(?:option\s+|choice\s+)?" + _LETTER + _END,
        re.IGNORECASE,
    ),
    # "the answer is (B)", "the correct answer is option B"
    re.compile(
        r"\banswer\s+(?:would\s+be|is)\s+(?:option\s+|choice\s+)?" + _LETTER + _END, re.IGNORECASE
    ),
]
_BOX_STRIP = re.compile(r"\\text(?:bf|rm)?\s*\{([^{}]*)\}|\\mathrm\s*\{([^{}]*)\}")


def committed_letters(text: str) -> list[str]:
    """Every letter the text commits to, in order of appearance (duplicates kept)."""
    found: list[tuple[int, str]] = []
    for pat in _PATTERNS:
        for m in pat.finditer(text):
            if not m.group(1).isupper():
                continue  # IGNORECASE lets the letter group match lowercase: not a choice
            found.append((m.start(1), m.group(1)))
            pos = m.end()
            while more := _MORE.match(text, pos):  # "A or B", "A, C": a listed hedge
                found.append((more.start(1), more.group(1)))
                pos = more.end()
    for content in all_boxed(text, limit=20, max_len=200):
        found.extend((0, c) for c in _boxed_letters(content))
    return [c for _, c in sorted(found, key=lambda t: t[0])]


def _boxed_letters(content: str) -> list[str]:
    """Letters in a boxed content that is only letters: 'B', '(B)', '\\text{B}', 'A, C'."""
    s = _BOX_STRIP.sub(lambda m: m.group(1) or m.group(2) or "", content).strip()
    s = re.sub(r"^\(?\s*([A-Z])\s*\)?\s*[.:)]\s+.*$", r"\1", s, flags=re.DOTALL)  # "B. 42 m/s"
    tokens = [t for t in re.split(r"\s*(?:,|/|&|\bor\b|\band\b)\s*", s) if t]
    letters = [t.strip("()*$ ") for t in tokens]
    if letters and all(len(t) == 1 and t.isupper() for t in letters):
        return letters
    return []


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
    valid = set(string.ascii_uppercase[:n])
    letters = committed_letters(part)
    in_range = {c for c in letters if c in valid}
    if not in_range:
        return Score(0.0, False, "invalid_choice" if letters else "no_answer")
    if len(in_range) > 1 or len(set(letters)) > 1:
        return Score(0.0, False, "hedged_answer")
    pred = in_range.pop()
    if pred == gold:
        return Score(1.0, True, "ok")
    return Score(0.0, False, "wrong_answer")
