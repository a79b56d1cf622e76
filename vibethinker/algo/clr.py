"""Claim-Level Reliability (CLR), the paper's test-time scaling (docs/PAPER.md, "Test time: CLR").

Pure functions over strings and numbers, no model, no I/O; the `clr` stage (stages/clr.py)
composes them with a Sampler. The method, per problem:
1. K sampled trajectories; 2. the model lists M decision-relevant claims of each
(`parse_claims`); 3. the model judges each claim, verdict v in {0, 1} (`parse_verdict`);
4. `r_k = (mean_m v_km)^M` (`reliability`); 5. final answers clustered by an equivalence
(`cluster_answers`), `Score(cluster) = sum of r_k` and the answer is the argmax (`clr_select`).

Rules where the paper is silent (docs/CLR.md gives the reasons):
- replies cut inside an unclosed `<think>` have no answer part: no claims, no verdict.
- claim lists: numbered (`1.`, `1)`, `(1)`), bulleted (`-`, `*`, `•`) or `Claim 1:` lines are
  the claims; the `Final answer:` line (or a `\\boxed{}`) is the answer, never a claim; other text
  is ignored. No list line at all (a malformed list) -> boxes are removed, the text is split
  on newlines and `;` and every non-empty piece that is not the answer line is a claim. Empty
  items are dropped; more than M -> the first M are kept. Every case is counted in `ClaimList`.
- fewer than M claims (`short_claims`): by default the paper's formula, the mean over M with
  the absent claims unverified (1 validated claim of 1 -> (1/5)^5), so a short claim list does
  not outrank a full one; `present` takes the mean over the claims there are (1 of 1 -> 1; the
  exponent stays M). Zero claims -> r = 0 either way.
- verdicts: in the reply after `</think>` (the whole reply without one): the last `\\boxed{}`
  holding a verdict (1/true/valid/correct/yes -> 1, 0/false/invalid/incorrect/no -> 0), else the
  last `Verdict: <word>`, else the last verdict word in prose (true/false/valid/invalid/
  correct/incorrect/wrong, flipped by a `not` before it; not digits or yes/no, too common in
  reasoning); nothing readable -> 0
  (a claim the model did not validate is not validated) and counted.
- ties of Score: the larger cluster wins (with no claim signal CLR is majority vote), then the
  cluster seen first in sample order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

SCORE_EPS = 1e-12  # scores closer than this are a tie (sums of floats in another order)

_ITEM = re.compile(
    r"^\s*(?:\(?\d{1,3}[.):]|[-*\u2022]|claim\s*\d{0,3}\s*[:.)-])\s*(.*)$", re.IGNORECASE
)
_ANSWER_LINE = re.compile(r"^\s*(?:[-*\u2022]\s*)?\**final\s+answer\**\s*[:=-]?\s*(.*)$", re.I)
_BOX = re.compile(r"\\boxed\s*\{")
_BOXED_SIMPLE = re.compile(r"\\boxed\s*\{(?:[^{}]|\{[^{}]*\})*\}")  # a box, one nesting level
_WORDS = {
    "1": 1, "true": 1, "valid": 1, "correct": 1, "yes": 1, "validated": 1,
    "0": 0, "false": 0, "invalid": 0, "incorrect": 0, "no": 0, "falsified": 0, "wrong": 0,
}  # fmt: skip
_WORD_RE = re.compile(  # prose fallback: no digits, no yes/no (too common in reasoning)
    r"\b(not\s+)?(validated|falsified|incorrect|invalid|correct|valid|false|true|wrong)\b",
    re.IGNORECASE,
)
_VERDICT_RE = re.compile(r"\bverdict\s*(?:is)?\s*[:=]?\s*\**\s*([A-Za-z]+|[01])\b", re.IGNORECASE)


@dataclass
class ClaimList:
    """One parsed claim-extraction reply."""

    claims: list[str]  # [<= M] claim texts, in the reply's order
    answer: str | None  # the final answer the model stated, None if it stated none
    malformed: bool = False  # no list line: the fallback split was used
    unfinished: bool = False  # cut inside an unclosed <think>: no claims, no answer
    dropped_extra: int = 0  # claims beyond M that were dropped
    dropped_empty: int = 0  # empty items dropped


def after_think(text: str) -> str | None:
    """The part after the last `</think>`; the whole text without think tags; None when a
    `<think>` is never closed (the reply was cut inside its reasoning: it has no answer part)."""
    at = text.rfind("</think>")
    if at >= 0:
        return text[at + len("</think>") :]
    return None if "<think>" in text else text


def last_box(text: str) -> str | None:
    """Content of the last `\\boxed{...}` with balanced braces; None when there is none."""
    starts = [m.end() for m in _BOX.finditer(text)]
    for start in reversed(starts):
        depth, i = 1, start
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            return text[start : i - 1]
    return None


def parse_claims(text: str, m: int) -> ClaimList:
    """A claim-extraction reply -> at most `m` claims and the stated final answer (rules above)."""
    body = after_think(text or "")
    if body is None:
        return ClaimList([], None, unfinished=True)
    answer, claims, saw_item, empty = None, [], False, 0
    lines = body.splitlines()
    for line in lines:
        a = _ANSWER_LINE.match(line)
        if a:
            answer = (last_box(a.group(1)) or a.group(1)).strip() or answer
            continue
        item = _ITEM.match(line)
        if item:
            saw_item = True
            claim = item.group(1).strip()
            if claim:
                claims.append(claim)
            else:
                empty += 1
    malformed = not saw_item
    if malformed:  # fallback: every non-empty piece that is not the answer
        for piece in re.split(r"[\n;]", _BOXED_SIMPLE.sub("", body)):
            piece = piece.strip()
            if not piece or _ANSWER_LINE.match(piece) or _BOX.search(piece):
                continue
            claims.append(piece)
    if answer is None:
        answer = last_box(body)
        answer = answer.strip() if answer is not None else None
    extra = max(0, len(claims) - m)
    return ClaimList(claims[:m], answer, malformed, dropped_extra=extra, dropped_empty=empty)


def parse_verdict(text: str) -> int | None:
    """A verification reply -> 1 (validated), 0 (falsified) or None (unreadable)."""
    body = after_think(text or "")
    if body is None:
        return None
    box = last_box(body)
    if box is not None:
        word = re.sub(r"\\text\{([^{}]*)\}", r"\1", box).strip().strip(".").lower()
        if word in _WORDS:
            return _WORDS[word]
    said = [w.lower() for w in _VERDICT_RE.findall(body) if w.lower() in _WORDS]
    if said:
        return _WORDS[said[-1]]
    words = _WORD_RE.findall(body)
    if not words:
        return None
    negated, word = words[-1]
    return 1 - _WORDS[word.lower()] if negated else _WORDS[word.lower()]


def verdict_or_zero(verdict: int | None) -> int:
    """The documented rule for an unreadable verdict: 0 (not validated)."""
    return 0 if verdict is None else int(verdict)


SHORT_CLAIMS = ("unverified", "present")


def reliability(verdicts: Sequence[int], m: int, short_claims: str = "unverified") -> float:
    """`r = (mean_m v_m)^M`; fewer than M verdicts: the absent ones count as 0 (`unverified`,
    the paper's mean over M) or the mean runs over those there are (`present`); none -> 0.

    >>> round(reliability([1, 1, 1, 1, 0], 5), 5)  # one failed claim of 5: 0.8^5
    0.32768
    >>> round(reliability([1], 5), 5), reliability([1], 5, "present"), reliability([], 5)
    (0.00032, 1.0, 0.0)
    """
    if short_claims not in SHORT_CLAIMS:
        raise ValueError(f"short_claims must be one of {SHORT_CLAIMS}, got {short_claims!r}")
    if not verdicts:
        return 0.0
    count = len(verdicts) if short_claims == "present" else max(m, len(verdicts))
    return (sum(verdicts) / count) ** m


def cluster_answers(
    answers: Sequence[str | None], equivalent: Callable[[str, str], bool]
) -> list[int | None]:
    """Cluster ids (0, 1, ... in order of first appearance); None for a missing answer.

    Each answer joins the first cluster whose representative (its first member) it is
    `equivalent` to; identical strings never call `equivalent`."""
    reps: list[str] = []
    out: list[int | None] = []
    for a in answers:
        if a is None:
            out.append(None)
            continue
        idx = next((i for i, r in enumerate(reps) if r == a), None)
        if idx is None:
            idx = next((i for i, r in enumerate(reps) if equivalent(r, a)), None)
        if idx is None:
            reps.append(a)
            idx = len(reps) - 1
        out.append(idx)
    return out


@dataclass
class Selection:
    """The result of CLR on one problem's K trajectories."""

    winner: int | None  # chosen cluster id; None when no trajectory gave an answer (abstain)
    index: int | None  # index of the winner's first member (its answer is the selected one)
    scores: dict[int, float] = field(default_factory=dict)  # cluster id -> sum of r_k
    sizes: dict[int, int] = field(default_factory=dict)  # cluster id -> members
    tie_broken: bool = False  # the top Score was shared and the tie rule decided


def clr_select(clusters: Sequence[int | None], reliabilities: Sequence[float]) -> Selection:
    """Argmax of `Score(c) = sum of r_k over members`; ties: larger cluster, then first seen."""
    if len(clusters) != len(reliabilities):
        raise ValueError(f"{len(clusters)} cluster ids but {len(reliabilities)} reliabilities")
    scores: dict[int, float] = {}
    sizes: dict[int, int] = {}
    first: dict[int, int] = {}
    for i, (c, r) in enumerate(zip(clusters, reliabilities)):
        if c is None:
            continue
        scores[c] = scores.get(c, 0.0) + r
        sizes[c] = sizes.get(c, 0) + 1
        first.setdefault(c, i)
    if not scores:
        return Selection(None, None)
    top = max(scores.values())
    tied = [c for c in scores if scores[c] >= top - SCORE_EPS]
    winner = min(tied, key=lambda c: (-sizes[c], first[c]))
    return Selection(winner, first[winner], scores, sizes, len(tied) > 1)


def majority_select(clusters: Sequence[int | None]) -> Selection:
    """Majority vote with the same tie rule (every r_k = 1): the maj@K baseline."""
    return clr_select(clusters, [1.0] * len(clusters))
