"""The symbolic claim verifier of CLR (`claim_verifier=symbolic|both`; beyond the paper).

`symbolic_verdict(claim) -> 1 | 0 | None` decides a claim that is a checkable numeric statement
and returns None for everything else (the model judges those):
1. arithmetic relations with closed sides (`3*4=12`, `12-2=10`, `7 % 3 = 1`, `2^{10} > 1000`,
   `\\frac{3}{4} = 0.75`, chains `a = b = c`): both sides are evaluated exactly with rationals
   (a parser of numbers, + - * / % ^ and parentheses over Python's `ast`; no `eval`). A side
   that is a decimal literal with d places matches at that precision (`1/3 = 0.333` holds).
2. other equalities whose sides have no letters (`\\sqrt{8} = 2\\sqrt{2}`): the math verifier's
   answer equivalence (`verifiers.math.check_answer`: fast path, answer forms, then sympy under
   a hard timeout); decided only when it says ok / wrong_answer, not when it cannot parse.
A division by zero in closed arithmetic makes the claim false (0).
Claims with variables (`x = 3`), words, or no relation are not checkable on their own.
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction

from vibethinker.verifiers.math import check_answer

MAX_CLAIM_CHARS = 200  # longer claims are not a short numeric statement
MAX_EXPONENT = 64  # 2^64 is fine; 9^9^9 is a parser bomb, not a claim
MAX_MAGNITUDE = 10**60

_REL = re.compile(r"(<=|>=|!=|==|\\neq|\\ne\b|\\leq|\\geq|\\le\b|\\ge\b|\\lt\b|\\gt\b|[=<>≤≥≠])")
_REL_NAME = {
    "=": "eq", "==": "eq", "!=": "ne", "\\neq": "ne", "\\ne": "ne", "≠": "ne",
    "<": "lt", "\\lt": "lt", ">": "gt", "\\gt": "gt",
    "<=": "le", "\\leq": "le", "\\le": "le", "≤": "le",
    ">=": "ge", "\\geq": "ge", "\\ge": "ge", "≥": "ge",
}  # fmt: skip
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_DECIMAL = re.compile(r"^\s*[+-]?\d*\.(\d+)\s*$")


class NotArithmetic(ValueError):
    """The expression is not closed arithmetic over numbers."""


class Undefined(ArithmeticError):
    """Closed arithmetic without a value (a division by zero, 0 % 0): a claim about it is false."""


def _to_python(expr: str) -> str:
    """LaTeX-ish arithmetic -> Python syntax (`\\frac{a}{b}` -> ((a)/(b)), `^` -> `**`, ...)."""
    s = expr.replace("$", "").replace("\\left", "").replace("\\right", "")
    s = s.replace("\\cdot", "*").replace("\\times", "*").replace("×", "*").replace("·", "*")
    s = s.replace("\\div", "/").replace("÷", "/").replace("\\bmod", "%").replace("\\mod", "%")
    s = s.replace("−", "-").replace("\\,", "").replace("\\!", "")
    for _ in range(5):
        s = _FRAC.sub(r"((\1)/(\2))", s)
    s = s.replace("{", "(").replace("}", ")").replace("^", "**")
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)  # 1,000 -> 1000
    return s.strip().rstrip(".")


def _eval(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        v = _eval(node.operand)
        return v if isinstance(node.op, ast.UAdd) else -v
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Add):
            out = a + b
        elif isinstance(node.op, ast.Sub):
            out = a - b
        elif isinstance(node.op, ast.Mult):
            out = a * b
        elif isinstance(node.op, ast.Div):
            if b == 0:
                raise Undefined("division by zero")
            out = a / b
        elif isinstance(node.op, ast.Mod):
            if b == 0:
                raise Undefined("mod by zero")
            if a.denominator != 1 or b.denominator != 1:
                raise NotArithmetic("mod of non-integers")
            out = Fraction(int(a) % int(b))
        elif isinstance(node.op, ast.Pow):
            if b.denominator != 1 or abs(b) > MAX_EXPONENT or (a == 0 and b < 0):
                raise NotArithmetic("exponent")
            out = a ** int(b)
        else:
            raise NotArithmetic(type(node.op).__name__)
        if abs(out) > MAX_MAGNITUDE:
            raise NotArithmetic("too large")
        return out
    raise NotArithmetic(type(node).__name__)


def evaluate_arithmetic(expr: str) -> Fraction:
    """Exact value of closed arithmetic (`3*4`, `\\frac{1}{2}+1`); NotArithmetic otherwise."""
    py = _to_python(expr)
    if not py or len(py) > MAX_CLAIM_CHARS:
        raise NotArithmetic("empty or too long")
    try:
        tree = ast.parse(py, mode="eval")
    except (SyntaxError, ValueError) as e:
        raise NotArithmetic(str(e)) from e
    return _eval(tree)


def _holds(rel: str, a: Fraction, b: Fraction, a_text: str, b_text: str) -> bool:
    if rel in ("eq", "ne"):
        places = [len(m.group(1)) for m in (_DECIMAL.match(a_text), _DECIMAL.match(b_text)) if m]
        tol = Fraction(1, 2 * 10 ** min(places)) if places and a != b else Fraction(0)
        equal = abs(a - b) <= tol
        return equal if rel == "eq" else not equal
    return {"lt": a < b, "gt": a > b, "le": a <= b, "ge": a >= b}[rel]


def split_relation(claim: str) -> tuple[list[str], list[str]] | None:
    """`a = b < c` -> (["a", "b", "c"], ["eq", "lt"]); None without a relation."""
    parts = _REL.split(claim)
    if len(parts) < 3:
        return None
    sides = [p.strip() for p in parts[0::2]]
    rels = [_REL_NAME[r] for r in parts[1::2]]
    if any(not s for s in sides):
        return None
    return sides, rels


def symbolic_verdict(claim: str) -> int | None:
    """1 (the numeric statement holds), 0 (it does not), None (not checkable on its own)."""
    text = (claim or "").strip()
    if not text or len(text) > MAX_CLAIM_CHARS:
        return None
    split = split_relation(text)
    if split is None:
        return None
    sides, rels = split
    try:
        values = [evaluate_arithmetic(s) for s in sides]
    except Undefined:
        return 0  # `9/0 = 1`: the math verifier's sympy path would call this equal
    except (NotArithmetic, ZeroDivisionError, OverflowError, RecursionError):
        return _latex_equality(sides, rels)
    ok = all(
        _holds(r, values[i], values[i + 1], sides[i], sides[i + 1]) for i, r in enumerate(rels)
    )
    return int(ok)


def _latex_equality(sides: list[str], rels: list[str]) -> int | None:
    """Equalities of letter-free LaTeX, decided by the math verifier's answer equivalence."""
    if set(rels) != {"eq"} or any(
        re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", s)) for s in sides
    ):
        return None
    for a, b in zip(sides, sides[1:]):
        try:
            score = check_answer(a, b)
        except Exception:  # the verifier never should; a claim is no reason to stop a run
            return None
        if score.reason not in ("ok", "wrong_answer"):
            return None
        if not score.correct:
            return 0
    return 1
