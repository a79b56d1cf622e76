"""Compound answer forms, read before the comparison (math.py's `check_answer` calls these).

- **A scalar factored out of a vector or matrix** (`\\frac{1}{3}\\begin{pmatrix} -1 \\\\ 2
  \\end{pmatrix}`, `-\\begin{pmatrix}...\\end{pmatrix}`): the matrix with the scalar multiplied
  into each entry (exactly for rational entries, as `c \\cdot (e)` otherwise). Value-preserving,
  so it is applied to both sides.
- **Named matrices** (`\\mathbf{I}`, `-\\mathbf{I}`, `3I`, `I_2`, `\\mathbf{0}`): the identity
  or zero matrix with the dimension of the gold, only when the gold is a square matrix (a
  subscript must agree with it). Against anything else the name stays a name (wrong).
- **Labelled components** (`\\lambda = 2\\sqrt{2},\\ A = (\\pm 1, 0)`, `A(\\pm 1, 0)`,
  `2\\sqrt{2}, (\\pm 1, 0)`): answers of several top-level comma-separated parts, at least one
  of them labelled (`name = value`, or a point `A(x, y)`): the same number of parts, compared in
  order, and where both sides label a part the labels must agree.
- **A text answer inside a sentence** (`\\text{Evelyn has the greatest average speed}` for
  `\\text{Evelyn}`, `\\text{the function is even}` for `\\text{even}`, `\\text{Evelyn (the
  fastest)}`): a sentence whose subject is the gold name (the gold capitalised as written, the
  sentence opening with it) or that ends "is/are <gold>" (a gold name also as its possessive:
  "The greatest average speed is Evelyn's"), with no negation, alternative or comparison word
  anywhere in it; a trailing parenthetical is dropped when the gold has none.
"""

from __future__ import annotations

import re
from fractions import Fraction

from vibethinker.verifiers.math_forms import is_name, normalize, split_top, text_words

_MATRIX_RE = re.compile(r"\\begin\{([pbBvV]?matrix)\}(.*?)\\end\{\1\}", re.S)
# a scalar before a matrix: a sign, a number, a fraction, a root or a parenthesised group
_SCALAR = (
    r"[-+]?\s*(?:\\[dt]?frac\s*(?:\{[^{}]*\}|\d)\s*(?:\{[^{}]*\}|\d)|\\sqrt\s*\{[^{}]*\}"
    r"|\d+(?:\.\d+)?(?:/\d+)?|\([^()]*\))?(?:\s*\\sqrt\s*\{[^{}]*\})?"
)
_FACTORED_RE = re.compile(
    r"^(" + _SCALAR + r")\s*(?:\\cdot|\\times)?\s*(\\begin\{([pbBvV]?matrix)\}.*\\end\{\3\})$", re.S
)
_NAMED_RE = re.compile(
    r"^("
    + _SCALAR
    + r")\s*(?:\\mathbf\s*\{\s*([IO0])\s*\}|\\mathbf\s+([IO0])|\\mathbb\s*\{\s*(I)\s*\}"
    r"|\\mathrm\s*\{\s*(I)\s*\}|(I))\s*(?:_\s*\{?\s*(\d+)\s*\}?)?$"
)
_FRAC_RE = re.compile(r"^([+-]?)\\[dt]?frac\s*(?:\{([+-]?\d+)\}|(\d))\s*(?:\{([+-]?\d+)\}|(\d))$")
_POINT_RE = re.compile(r"^([A-Z])(?:_\s*\{?\w+\}?)?\s*(\(.*\))$", re.S)
_SPACE_RE = re.compile(r"^(?:\\[ ,;:!]|\\quad|\\qquad|\s)+|(?:\\[ ,;:!]|\\quad|\\qquad|\s)+$")
# words that make a sentence more than "the answer is <gold>"
_BLOCK_WORDS = set(
    "not no never neither nor isn't doesn't don't cannot can't and or but except than tie tied "
    "ties same equal both either unless if only".split()
)
_PAREN_TAIL_RE = re.compile(r"\s*\([^()]*\)\s*$")


def rational(s: str) -> Fraction | None:
    """An exact rational written plainly (`-3`, `2.5`, `1/3`, `\\frac{1}{3}`, `\\frac13`)."""
    t = re.sub(r"\s+", "", s).strip("{}")
    if re.fullmatch(r"[+-]?\d+(?:\.\d+)?", t):
        return Fraction(t)
    if re.fullmatch(r"[+-]?\d+/\d+", t) and not t.endswith("/0"):
        return Fraction(t)
    m = _FRAC_RE.match(t)
    if m and (m.group(4) or m.group(5)) not in ("0",):
        num, den = int(m.group(2) or m.group(3)), int(m.group(4) or m.group(5))
        return Fraction(num, den) * (-1 if m.group(1) == "-" else 1) if den else None
    return None


def _latex(x: Fraction) -> str:
    if x.denominator == 1:
        return str(x.numerator)
    sign = "-" if x < 0 else ""
    return f"{sign}\\frac{{{abs(x.numerator)}}}{{{x.denominator}}}"


def _scalar_value(s: str) -> str | None:
    """The scalar before a matrix as an expression (`-` -> `-1`, `` -> `1`), None if empty."""
    t = s.strip()
    if t in ("", "+"):
        return "1"
    if t == "-":
        return "-1"
    return t


def _entries(body: str) -> list[list[str]]:
    return [[c.strip() for c in row.split("&")] for row in body.split("\\\\") if row.strip()]


def _matrix(env: str, rows: list[list[str]]) -> str:
    inner = " \\\\ ".join(" & ".join(r) for r in rows)
    return f"\\begin{{{env}}} {inner} \\end{{{env}}}"


def distribute_scalar(s: str) -> str | None:
    """`c \\begin{pmatrix} a \\\\ b \\end{pmatrix}` -> the matrix of `c*a`, `c*b`; None when `s`
    is no scalar times one matrix (a bare matrix included: nothing to do)."""
    m = _FACTORED_RE.match(s.strip())
    if not m or not m.group(1).strip():
        return None
    inner = _MATRIX_RE.fullmatch(m.group(2))
    if inner is None or "\\begin" in inner.group(2):
        return None
    c = _scalar_value(m.group(1))
    c_exact = rational(c)
    rows = []
    for row in _entries(inner.group(2)):
        out = []
        for e in row:
            e_exact = rational(e)
            if c_exact is not None and e_exact is not None:
                out.append(_latex(c_exact * e_exact))
            else:
                out.append(f"{c} \\cdot ({e})")
        rows.append(out)
    return _matrix(inner.group(1), rows)


def named_matrix(gold: str, pred: str) -> str | None:
    """`pred` as the identity or zero matrix (times a scalar) of the gold's dimension, when the
    gold is a square matrix and `pred` names one; None otherwise."""
    m = _NAMED_RE.match(pred.strip())
    g = _MATRIX_RE.fullmatch(gold.strip())
    if not m or not g:
        return None
    rows = _entries(g.group(2))
    n = len(rows)
    if n < 2 or any(len(r) != n for r in rows):
        return None  # a column vector or a non-square matrix: no named matrix is that
    if m.group(7) and int(m.group(7)) != n:
        return None  # `I_3` for a 2x2 gold
    name = next(x for x in m.group(2, 3, 4, 5, 6) if x)
    c = _scalar_value(m.group(1))
    diag = "0" if name in "O0" else c
    out = [[diag if i == j else "0" for j in range(n)] for i in range(n)]
    return distribute_scalar(_matrix(g.group(1), out)) or _matrix(g.group(1), out)


def matrix_forms(gold: str, pred: str) -> tuple[str, str]:
    """`gold` and `pred` with a named matrix (in the gold's dimension) and a scalar factored
    out of a matrix read as the matrix itself."""
    pred = named_matrix(gold, pred) or pred
    return distribute_scalar(gold) or gold, distribute_scalar(pred) or pred


def _label(part: str) -> tuple[str | None, str]:
    """(label or None, value) of one component: `x = 3`, `A(1, 2)`, or a bare value."""
    t = _SPACE_RE.sub("", part)
    eq = split_top(t, ("=",))
    if len(eq) == 2 and is_name(eq[0].strip()):
        return normalize(eq[0]), eq[1].strip()
    pt = _POINT_RE.match(t)
    if pt:
        return pt.group(1), pt.group(2)
    return None, t


def labelled_components(gold: str, pred: str) -> list[tuple[str, str]] | None:
    """(gold value, pred value) pairs to compare, when the gold is several top-level
    comma-separated components with a label among them, or an unlabelled tuple `(a, b)` that
    `pred` gives as labelled components (`x = a, y = b`); [] when the labels or the counts
    disagree (wrong); None when the form does not apply. In order, or by label when every part
    of both sides is labelled (`y = 2, x = 1` for `x = 1, y = 2`)."""
    gold, pred = gold.strip().strip("$"), pred.strip().strip("$")  # CNMO writes `$...$`
    g_parts, p_parts = split_top(gold, (",",)), split_top(pred, (",",))
    g, p = [_label(x) for x in g_parts], [_label(x) for x in p_parts]
    if len(g) < 2 or not any(lab for lab, _ in g):
        tup = gold.strip()
        if not (tup.startswith("(") and tup.endswith(")")) or len(p) < 2:
            return None
        if not all(lab for lab, _ in p) or split_top(tup[1:-1], (",",)) == [tup[1:-1]]:
            return None
        g = [(None, x.strip()) for x in split_top(tup[1:-1], (",",))]
    if len(g) != len(p):
        return []
    g_labels, p_labels = [lab for lab, _ in g], [lab for lab, _ in p]
    if all(g_labels) and all(p_labels) and len(set(g_labels)) == len(g):
        by_label = dict(p)
        if set(by_label) != set(g_labels):
            return []
        return [(gv, by_label[gl]) for gl, gv in g]
    for gl, pl in zip(g_labels, p_labels):
        if gl and pl and gl != pl:
            return []
    return [(gv, pv) for (_, gv), (_, pv) in zip(g, p)]


def _own(word: str) -> str:
    """`word` without a possessive `'s`."""
    return word[:-2] if word.endswith(("'s", "’s")) else word


def sentence_match(gold: str, pred: str) -> bool | None:
    """A text gold against a sentence that gives it (module docstring); None when `gold` is not
    a text answer or `pred` is no longer sentence (left to the other text rules)."""
    g = text_words(gold)
    if g is None or not g:
        return None
    if _PAREN_TAIL_RE.search(gold) is None:
        pred = _PAREN_TAIL_RE.sub("", pred)
        inner = re.fullmatch(r"\s*(\\\w+\s*\{)(.*)\}\s*", pred, re.S)
        if inner:
            pred = inner.group(1) + _PAREN_TAIL_RE.sub("", inner.group(2)) + "}"
    p = text_words(pred)
    if p is None:
        return None
    if p == g:
        return True
    if re.search(r"[,;/]", pred):
        return False  # `Evelyn, Briana`: a listing, or a clause we do not read
    if len(p) <= len(g) or _BLOCK_WORDS & set(p) - set(g):
        return None if len(p) <= len(g) else False
    raw = " ".join(re.findall(r"\{([^{}]*)\}", gold)).strip()
    subject = raw[:1].isupper() and p[: len(g)] == g
    if raw[:1].isupper():  # "The greatest speed is Evelyn's" (speed): at the end only, where
        p = [*p[:-1], _own(p[-1])]  # "Evelyn's brother is fastest" names someone else
    predicate = p[-len(g) :] == g and p[-len(g) - 1] in ("is", "are")
    return subject or predicate
