"""Equivalence of two answers once their forms are read: the decimal rule and the sympy path.

- `repeating` / `decimal_match`: exact values are compared exactly; a decimal is read at its
  stated precision (math.py's fast path and its percent rule use them too);
- `equivalent`: math-verify's parse and verify (its signal timeouts off) plus our checks
  against its known false positives. Unguarded: math.py calls it through pool.guarded_call, and
  pool's workers call `warm_up` before their first deadline.

Below both math.py and pool.py (it imports neither), so the worker can warm math-verify up
without pool importing the verifier that uses it.
"""

from __future__ import annotations

import functools
from fractions import Fraction

from vibethinker.types import Score
from vibethinker.verifiers.math_forms import ROMAN_CONST_RE, decimal_places, significant_digits

MIN_SIG_DIGITS = 6  # a decimal standing for an exact irrational/repeating value: 1/3 = 0.333333
EVAL_DIGITS = 120  # exact-looking non-rational values are compared at this precision...
EXACT_REL_DIGITS = 100  # ...and agree to this many digits (evaluation noise only)


def repeating(x: Fraction) -> bool:
    """Whether x has no finite decimal expansion (1/3 does not; 1/8 does)."""
    d = x.denominator
    for f in (2, 5):
        while d % f == 0:
            d //= f
    return d != 1


def decimal_match(diff, gold_inexact: bool, gold: str, pred: str) -> bool:
    """Unequal values that still match because a side is written as a decimal.

    Exact answers are compared exactly; a decimal is read at its stated precision:
    - neither side a decimal: no tolerance (`1/(2^100+1)` is not `1/2^100`);
    - both decimals: their values must be equal (`2.50` is `2.5`; `0.53` is not `0.5`);
    - a decimal gold (`0.33`, `3.14`): an exact prediction that rounds to it (`1/3`, `\\pi`);
    - a decimal prediction of an exact gold: only a gold with no finite decimal form (1/3,
      `\\pi`), given to at least MIN_SIG_DIGITS significant digits and correct to the last
      digit written (rounded or truncated): `0.333333` for 1/3, never `0.33`; `0.13` is not 1/8.
    `diff` is |gold - pred| (a Fraction or a sympy number)."""
    g_dec, p_dec = decimal_places(gold), decimal_places(pred)
    if (g_dec is None) == (p_dec is None):
        return False
    if g_dec is not None:
        return bool(diff * 2 * 10**g_dec <= 1)
    if not gold_inexact or significant_digits(pred) < MIN_SIG_DIGITS:
        return False
    return bool(diff * 10**p_dec <= 1)


# ---- the sympy path (runs inside a guarded worker process) ----


@functools.lru_cache(maxsize=4096)
def _parse(latex: str) -> tuple:
    """math-verify parse of one boxed content, signal timeouts off (we guard from outside)."""
    from math_verify import LatexExtractionConfig, parse

    text = "$\\boxed{" + ROMAN_CONST_RE.sub(r"\1", latex) + "}$"
    cfg = [LatexExtractionConfig(boxed_match_priority=0)]
    return tuple(
        parse(text, extraction_config=cfg, parsing_timeout=0)
    )  # 0: no alarm (0.7 and 0.9 alike; None breaks 0.7)


def equivalent(gold: str, pred: str) -> Score:
    """math-verify equivalence plus our false-positive checks. Unguarded: call it in a worker."""
    from math_verify import verify

    g, p = _parse(gold), _parse(pred)
    if not g:
        return Score(0.0, False, "bad_problem:unparseable_answer")
    if not p:
        return Score(0.0, False, "unparseable_answer")
    gx, px = g[0], p[0]
    if not verify(list(g), list(p), timeout_seconds=0):
        # math-verify rounds; a decimal gold read at its precision (`3.14` for `\\pi`) is ours
        if _kind(gx) == _kind(px) == "scalar" and _numeric_verdict(gx, px, gold, pred):
            return Score(1.0, True, "ok")
        return Score(0.0, False, "wrong_answer")
    if isinstance(gx, str) or isinstance(px, str):
        return Score(1.0, True, "ok")  # a string-level match (e.g. text answers)
    reason = _false_positive(gx, px, gold, pred)
    if reason:
        return Score(0.0, False, reason)
    return Score(1.0, True, "ok")


def warm_up() -> None:
    """Run math-verify once so its lazy imports and grammar load before the first deadline."""
    equivalent(r"\frac{1}{2}", "x=0.5")
    equivalent(r"\{1, 2\}", r"\sqrt{2}")


def _kind(x) -> str:
    from sympy import And, MatrixBase, Or, Set, Tuple
    from sympy.core.relational import Relational

    if isinstance(x, MatrixBase):
        return "matrix"
    if isinstance(x, (Set, Tuple)):
        return "collection"
    if isinstance(x, (Relational, And, Or)):
        return "relation"
    return "scalar"


def _false_positive(gx, px, gold: str, pred: str) -> str | None:
    """Why math-verify's True is not a real match here (None if it is)."""
    from sympy import Eq, Symbol

    gk, pk = _kind(gx), _kind(px)
    if pk == "relation" and gk != "relation":
        # math-verify compares the right side of `lhs = rhs` with the gold: fine for `x = 5`,
        # wrong for `3x - y + 13 = 0` or `0 = 0` when the gold is 0. Only `symbol = value`.
        if not isinstance(px, Eq) or not isinstance(px.lhs, Symbol):
            return "trivial_equation"
        if px.lhs in px.rhs.free_symbols:
            return "trivial_equation"
        px, pk = px.rhs, _kind(px.rhs)
    if gk == "scalar" and pk != "scalar":
        return "shape_mismatch"  # e.g. {5} or [5, 5] for the number 5
    if gk == "scalar" and pk == "scalar":
        return _numeric_mismatch(gx, px, gold, pred)
    return None


def _numeric_mismatch(gx, px, gold: str, pred: str) -> str | None:
    """Why two numbers math-verify calls equal are not (None when they are, or cannot tell)."""
    return "numeric_mismatch" if _numeric_verdict(gx, px, gold, pred) is False else None


def _numeric_verdict(gx, px, gold: str, pred: str) -> bool | None:
    """Exact equality for exact answers, stated precision for decimals (`decimal_match`); None
    when the values are not both numbers. math-verify rounds to a few decimals, which lets
    1/2^99 match 1/2^98, 1000000.4 match 1000000 and `\\pi + 10^{-20}` match `\\pi`."""
    try:
        if isinstance(gx, str) or isinstance(px, str) or not (gx.is_number and px.is_number):
            return None
        gx, px = gx.doit(), px.doit()  # latex2sympy leaves `1 - 1/2^{2018}` unevaluated
        if not (gx.is_finite and px.is_finite):  # 9/0 is zoo: never equal to a number
            return None
        diff = gx - px
        if diff == 0:
            return True
        gx_inexact = not gx.is_Rational or repeating(Fraction(int(gx.p), int(gx.q)))
        if diff.is_Rational:  # both rational (big ones too): exact
            return decimal_match(abs(diff), gx_inexact, gold, pred)
        # Irrational: compare at EVAL_DIGITS digits (arbitrary exponent range: 1/2004! is fine).
        from sympy import Abs, Rational

        d = Abs(diff).evalf(EVAL_DIGITS)
        scale = max(Abs(gx).evalf(EVAL_DIGITS), Abs(px).evalf(EVAL_DIGITS))
        if d == 0 or bool(d <= Rational(1, 10**EXACT_REL_DIGITS) * scale):
            return True  # equal up to evaluation noise
        return decimal_match(d, gx_inexact, gold, pred)
    except Exception:  # not numerically comparable: keep math-verify's symbolic verdict
        return None
