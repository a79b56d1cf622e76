"""Math verifier: the last box of the answer part, compared as a careful grader compares answers.

Pipeline for one response (each step cheap before the expensive one):
1. extract: the last box (`\\boxed{}`, `\\fbox{}`, `\\boxed 5`: extract.py's one notion of a box)
   after `</think>` (nothing inside the reasoning counts); or, for outputs from other sources,
   the row's answer-location rule (`answer_format`: `# Answer` line, "The final answer is X",
   "Answer: X", the last line; extract.locate_answer);
2. screen: too long, too deeply nested, numeric exponent towers, huge factorials -> rejected
   before any parser sees them (parser bombs); a tower with a variable (`10^{2^n-n-1}`) is fine;
3. fast path: plain integers / decimals / integer fractions compared exactly (AIME's '025'
   equals 25; big integers as integers) -- most checks end here without sympy;
4. answer forms (math_forms.py): grouping braces, nested boxes, `30°`, `0.\\overline{3}`, units,
   percent, thousands separators, `name = value`, `n \\in \\{...\\}`, restated quantities
   (`f(-2)+f(-1)+f(0) = \\frac{14}{3}`, or a span of the problem's own text), text answers,
   column vectors, listings with "and"/"or"/`\\pm`, ordered pairs vs sets; then hedges
   (`\\pm`, "or", "and" for a single-valued gold) -> 0;
5. math-verify (math_equiv.py; its signal-based timeouts off) plus our checks against its known
   false positives: shape leniency the gold does not allow (a set or interval for a number),
   equations that collapse (`3x-y+13=0` accepted for gold 0: the right side is 0), numeric tolerance
   (`1/2^99` "equals" `1/2^98` at 6 decimals), `\\mathrm{e}` dropping out (`2\\mathrm{e}` -> 2).
   Step 5 runs in a worker process with a hard wall-clock limit (batch.py), so a stuck sympy call
   costs a timeout, never a hang.

Numbers: exact answers are compared exactly (rationals and big integers exactly, other exact
values to 100 digits); a tolerance exists only for decimals, at their stated precision
(math_equiv.py). Several boxes are compared by value: any box that is not the gold makes the
answer a hedge; a final answer stated in prose after the last box (or an explicit retraction's
value: "Actually, ... is 8"; a check after the box, "Wait, let me verify: 3 + 4 = 7", is no
answer, retraction.py) that is not the gold makes it `contradicted_answer` (the box alone does
not win), and a retraction with no value ("Wait, that's wrong.") makes it `retracted_answer`. The
answer forms of compound answers (a scalar factored out of a matrix, `-\\mathbf{I}`, labelled
components, a text answer inside a sentence) are math_compound.py's. An optional LLM judge can
give a second opinion (math_judge.py).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from decimal import Decimal
from fractions import Fraction

from vibethinker.types import Problem, Score
from vibethinker.verifiers import pool
from vibethinker.verifiers.extract import (
    ANSWER_FORMATS,
    all_boxed,
    answer_format,
    answer_part,
    locate_answer,
    retracted,
    stated_answer,
)
from vibethinker.verifiers.math_compound import (
    labelled_components,
    matrix_forms,
    sentence_match,
)
from vibethinker.verifiers.math_equiv import decimal_match, equivalent, repeating
from vibethinker.verifiers.math_forms import (
    asked_quantities,
    asked_value,
    container,
    drop_name,
    expand_pm,
    has_letters,
    is_name,
    is_quantity,
    pred_items,
    rewrite,
    split_top,
    split_unit,
    strip_group,
    text_match,
)
from vibethinker.verifiers.math_forms import normalize as _normalize

MAX_ANSWER_CHARS = 1000  # longer boxed content is not a final answer (and a parser-bomb risk)
MAX_BRACE_DEPTH = 10
MAX_EXPONENT_DIGITS = 4  # 10^{9999} is fine to evaluate; 10^{99999999} is not
MAX_FACTORIAL_ARG = 10000  # 10000! has 35,660 digits: cheap; 10^8! is not
CHECK_TIMEOUT_S = 10.0  # hard limit per sympy check (math-verify's own default is 5 s + 5 s)
MAX_ITEMS = 20  # values compared one by one in a listed answer

_log = logging.getLogger("vibethinker.verifiers.math")

_RELATION_RE = re.compile(r"=|\\le|\\ge|<|>|\\neq|\\approx|\\in\b")
_HEDGE_RE = re.compile(r"\\pm|\\mp|\\lor|\\vee|\\cup|\bor\b|\band\b|\beither\b", re.IGNORECASE)
_INT_RE = re.compile(r"^[+-]?\d+$")
_DEC_RE = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)$")
# `\\frac{1}{4}`, `\\frac14`, `\\frac9{19}` (one-digit arguments need no braces), `1/4`
_FRAC_RE = re.compile(
    r"^([+-]?)\\[dt]?frac(?:\{([+-]?\d+)\}|(\d))(?:\{([+-]?\d+)\}|(\d))$|^([+-]?\d+)/(\d+)$"
)
_BRACKET_RE = re.compile(r"[{}()\[\]]")
# a `^` inside an exponent or right after one: a tower candidate for `_numeric_tower` to judge
_TOWER_HINT_RE = re.compile(r"\^\s*\{[^{}]*[{^]|\^\s*[\w.]+\s*\^|\^\s*\{[^{}]*\}\s*\^")
# letters that make an exponent symbolic (variables, \\pi); \\cdot, \\left etc. do not count
_LETTER_RE = re.compile(r"(?<!\\)\b[A-Za-z]|\\(?!left|right|cdot|times)[A-Za-z]+")


def _numeric_tower(s: str) -> bool:
    """An exponent tower of numbers only: 10^{10^{10}}, 10^{(10^{10})}, 10^10^10, 10^{10}^{10}.
    A tower with a variable in its exponent (`10^{2^n-n-1}`, a MATH500 gold) stays symbolic and
    is cheap; a numeric one is evaluated by sympy as an integer with billions of digits."""
    i = s.find("^")
    while i >= 0:
        j = i + 1
        while j < len(s) and s[j] == " ":
            j += 1
        if j < len(s) and s[j] == "{":
            depth, k = 0, j
            while k < len(s):
                depth += (s[k] == "{") - (s[k] == "}")
                k += 1
                if depth == 0:
                    break
        else:
            k = j
            while k < len(s) and (s[k].isalnum() or s[k] in "._"):
                k += 1
        exponent = s[j:k]
        rest = s[k:].lstrip()
        if ("^" in exponent or rest.startswith("^")) and not _LETTER_RE.search(exponent):
            return True
        i = s.find("^", i + 1)
    return False


# latex2sympy reads `10^999999999` as one exponent (LaTeX would take one digit): cap both forms
_EXP_RE = re.compile(r"\^\s*\{?\s*[+-]?(\d+)")
_FACT_RE = re.compile(r"(\d+)\s*!")


def with_answer_format(problems: list[Problem], rule: str) -> list[Problem]:
    """The problems with every math row's answer-location rule set to `rule` (its
    `meta["answer_format"]`; the others unchanged). Raises ValueError on an unknown rule."""
    if rule not in ANSWER_FORMATS:
        raise ValueError(f"answer_format {rule!r}: not one of {', '.join(ANSWER_FORMATS)}")
    return [
        dataclasses.replace(p, meta={**p.meta, "answer_format": rule}) if p.domain == "math" else p
        for p in problems
    ]


def verify_math(problem: Problem, response: str) -> Score:
    """Score a math response against `problem.answer` (binary); the final answer is found by the
    row's answer-location rule (`answer_format`; extract.locate_answer)."""
    if not problem.answer:
        return Score(0.0, False, "bad_problem:no_answer")
    rule = answer_format(problem)
    missing = "no_boxed_answer" if rule == "boxed" else "no_answer"
    if rule not in ANSWER_FORMATS:
        return Score(0.0, False, "bad_problem:answer_format")
    part = answer_part(response)
    if part is None:
        return Score(0.0, False, missing)  # cut off inside <think>: no answer given
    located = locate_answer(part, rule)
    if located is None:
        return Score(0.0, False, missing)
    pred, end = located
    asked = asked_quantities(problem.prompt)
    score = check_answer(problem.answer, pred, asked)
    if not score.correct:
        return score
    # Several boxes: compared by value, not text (`\frac12` then `0.5` is one answer). Any box
    # that is not the gold makes the answer a hedge, a retraction before the last box included:
    # the answer part is the committed answer, and a box is a commitment.
    last = _normalize(strip_group(pred))
    seen = {last}
    for box in all_boxed(part, limit=20, max_len=MAX_ANSWER_CHARS):
        key = _normalize(strip_group(box))
        if key in seen:
            continue
        seen.add(key)
        if not check_answer(problem.answer, box, asked).correct:
            return Score(0.0, False, "hedged_answer")
    # A final answer stated in prose after the answer, or a retraction's value ("On second
    # thought, ... is 8"), is a second commitment: when it is not the gold the response gives two
    # answers, scored as a hedge is (the box alone does not win). A retraction with no value
    # takes the answer back.
    if retracted(part[end:]):
        return Score(0.0, False, "retracted_answer")  # "That's wrong." and no other answer
    stated = stated_answer(part[end:])
    if stated is not None and _normalize(strip_group(stated)) not in seen:
        if not check_answer(problem.answer, stated, asked).correct:
            return Score(0.0, False, "contradicted_answer")
    return score


def check_answer(gold: str, pred: str, asked: frozenset[str] = frozenset()) -> Score:
    """Is the boxed content `pred` the answer `gold`? Screens, answer forms (math_forms.py), fast
    path, then guarded sympy. `asked`: the problem's math spans (`asked_quantities`), which a
    restating box may repeat (`a + b = 4` when the problem asks for $a + b$)."""
    if asked and not _RELATION_RE.search(gold):
        pred = asked_value(pred, asked)
    reason = screen(pred)
    if reason:
        return Score(0.0, False, reason)
    fast = _fast_equal(gold, pred)  # plain numbers on both sides: no answer forms to read
    if fast is not None:
        return Score(float(fast), fast, "ok" if fast else "wrong_answer")
    gold, pred = matrix_forms(strip_group(gold), strip_group(pred))  # `-\\mathbf{I}`, `c\\begin..`
    gold, pred = rewrite(gold), rewrite(pred)
    if _normalize(gold) == _normalize(pred):
        return Score(1.0, True, "ok")
    text = text_match(gold, pred)
    if not text and sentence_match(gold, pred):  # `\\text{Evelyn has the ...}` for Evelyn
        text = True
    if text is not None:
        return Score(float(text), text, "ok" if text else "wrong_answer")
    pairs = labelled_components(gold, pred)
    if pairs is not None:  # `\\lambda = 2, A = (1, 0)` for `\\lambda=2, A(1, 0)`
        ok = bool(pairs) and all(check_answer(g, p).correct for g, p in pairs)
        return Score(float(ok), ok, "ok" if ok else "wrong_answer")
    gold, g_unit = split_unit(gold)
    pred, p_unit = split_unit(pred)
    if g_unit and p_unit and g_unit != p_unit:
        return Score(0.0, False, "unit_mismatch")
    if "%" in (g_unit, p_unit) and g_unit != p_unit:
        share = _percent_of_one(gold, pred) if p_unit == "%" else _percent_of_one(pred, gold)
        if share is not None:
            return Score(float(share), share, "ok" if share else "wrong_answer")
    g_eq, p_eq = split_top(gold, ("=",)), split_top(pred, ("=",))
    if len(g_eq) == len(p_eq) == 2 and is_name(g_eq[0]) and is_name(p_eq[0]):
        if _normalize(g_eq[0]) != _normalize(p_eq[0]):
            return Score(0.0, False, "wrong_answer")  # `b = 2` for `a = 2`
        return check_answer(g_eq[1], p_eq[1])
    if not _RELATION_RE.search(gold):
        named = drop_name(pred)
        if named is not None:
            pred = named
        else:
            restated = _check_restated(gold, pred, asked)
            if restated is not None:
                return restated
    g_items = container(gold)
    if g_items is not None or expand_pm(gold) is not None and container(pred) is not None:
        return _check_collection(gold, pred)
    if _hedged(gold, pred):
        return Score(0.0, False, "hedged_answer")
    fast = _fast_equal(gold, pred)
    if fast is not None:
        return Score(float(fast), fast, "ok" if fast else "wrong_answer")
    if screen(gold):  # a gold we cannot check safely is a data problem, not a model failure
        return Score(0.0, False, "bad_problem:unparseable_answer")
    if pool.in_guarded_worker():
        return equivalent(gold, pred)
    return pool.guarded_call(equivalent, (gold, pred), timeout=CHECK_TIMEOUT_S)


def _percent_of_one(number: str, percent: str) -> bool | None:
    """`percent` (its `%` split off) against a `number` written as a fraction strictly between -1
    and 1: read as a fraction of one (`50` for 1/2, so `\\frac12\\%` is 1/200). None otherwise:
    the percent is then a label (`25\\%` is 25; against the decimal 0.25 it stays a label, as
    the grading corpus decided before this rule)."""
    g_text = _normalize(number)
    g = _as_fraction(g_text) if _FRAC_RE.match(g_text) else None
    if g is None or not 0 < abs(g) < 1:
        return None
    p_text = _normalize(percent)
    p = _as_fraction(p_text)
    if p is None:
        return False  # a share of one written in a form we cannot read exactly
    shifted = str(Decimal(p_text) / 100) if _DEC_RE.match(p_text) else str(p / 100)
    return p / 100 == g or decimal_match(abs(g - p / 100), repeating(g), number, shifted)


def _check_restated(gold: str, pred: str, asked: frozenset[str]) -> Score | None:
    """`quantity = value` restating what was asked (math_forms: restated quantities): the value is
    the answer. A left side is the problem's own span (`asked`) or passes `is_quantity`; a numeric
    left side that is not the problem's must be true arithmetic. None when `pred` is no such form
    (left to the other checks)."""
    parts = [p.strip() for p in split_top(pred, ("=",))]
    if len(parts) < 2 or not all(parts):
        return None
    lefts, value = [(p, _normalize(p) in asked) for p in parts[:-1]], parts[-1]
    # a name may open the chain (`x = 21 + 49 = 70`) unless it is an equation in it (`x = 2x - 5`)
    named = [is_name(p) and drop_name(f"{p} = {value}") is not None for p, _ in lefts]
    if not all(a or is_quantity(p) or n for (p, a), n in zip(lefts, named)):
        return None
    if any(_normalize(p) == _normalize(value) for p, _ in lefts):
        return None  # `0 = 0` says nothing
    for left, from_prompt in lefts:
        if not from_prompt and not has_letters(left) and not check_answer(value, left).correct:
            return Score(0.0, False, "false_equation")  # `2 + 2 = 5`
    return check_answer(gold, value)


def _check_collection(gold: str, pred: str) -> Score:
    """Several values: brackets decide order (math_forms docstring); items compared one by one."""
    g, p = container(gold), container(pred)
    g_kind = g[0] if g else "list"
    p_kind = p[0] if p else "list"
    if {g_kind, p_kind} == {"tuple", "set"} or (g_kind == "list" and p_kind == "tuple"):
        return Score(0.0, False, "shape_mismatch")
    g_items, p_items = pred_items(gold), pred_items(pred)
    if len(g_items) > MAX_ITEMS or len(p_items) != len(g_items):
        return Score(0.0, False, "wrong_answer")
    if g_kind == "tuple":
        for gi, pi in zip(g_items, p_items):
            s = check_answer(gi, pi)
            if not s.correct:
                return Score(0.0, False, s.reason)
        return Score(1.0, True, "ok")
    unused = list(p_items)
    for gi in g_items:
        for k, pi in enumerate(unused):
            if check_answer(gi, pi).correct:
                del unused[k]
                break
        else:
            return Score(0.0, False, "wrong_answer")
    return Score(1.0, True, "ok")


def screen(s: str) -> str | None:
    """Why `s` must not reach a parser (a reason string), or None when it is safe to parse."""
    if len(s) > MAX_ANSWER_CHARS:
        return "answer_too_long"
    depth = deepest = 0
    for m in _BRACKET_RE.finditer(s):
        if m.group(0) in "{([":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    if deepest > MAX_BRACE_DEPTH:
        return "answer_too_complex"
    if "\\uparrow" in s or (_TOWER_HINT_RE.search(s) and _numeric_tower(s)):
        return "answer_too_complex"
    if any(len(m.group(1)) > MAX_EXPONENT_DIGITS for m in _EXP_RE.finditer(s)):
        return "answer_too_complex"
    if any(int(m.group(1)) > MAX_FACTORIAL_ARG for m in _FACT_RE.finditer(s[:MAX_ANSWER_CHARS])):
        return "answer_too_complex"
    if re.search(r"[)}!]\s*!", s):  # (n!)!, {x}!: factorials of computed values
        return "answer_too_complex"
    return None


def _hedged(gold: str, pred: str) -> bool:
    """`\\pm`, "or", "and": the prediction offers alternatives the gold does not have."""
    return bool(_HEDGE_RE.search(pred)) and not _HEDGE_RE.search(gold)


def _as_fraction(s: str) -> Fraction | None:
    if _DEC_RE.match(s):
        return Fraction(s)
    m = _FRAC_RE.match(s)
    if m:
        if m.group(6) is None:
            sign, num, den = m.group(1), m.group(2) or m.group(3), m.group(4) or m.group(5)
        else:
            sign, num, den = "", m.group(6), m.group(7)
        if int(den) != 0:
            return Fraction(int(num), int(den)) * (-1 if sign == "-" else 1)
    return None


def _fast_equal(gold: str, pred: str) -> bool | None:
    """Exact verdict for plain numbers without sympy; None when the forms need the parser."""
    g, p = _normalize(gold), _normalize(pred)
    if g == p:
        return True
    if _INT_RE.match(g) and _INT_RE.match(p):
        return int(g) == int(p)  # big integers as integers; AIME: '025' == 25
    fg, fp = _as_fraction(g), _as_fraction(p)
    if fg is not None and fp is not None:
        return fg == fp or decimal_match(abs(fg - fp), repeating(fg), g, p)
    return None
