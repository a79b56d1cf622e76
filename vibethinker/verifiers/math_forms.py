"""Answer forms a careful grader reads through, before any parser: pure string functions.

The grading policy they implement (decided here, tested in tests/verifiers/test_math.py):

- **Names.** `AB = 5`, `|AB| = 12`, `P(A) = \\frac12`, `f(x) = x^2`, `(x, y) = (2, 3)`: when the
  gold is not itself an equation, a left side that only names the quantity is dropped. A left
  side that computes something (`3x - y + 13 = 0`, `0 = 0`, `x^2 = 4`) is not a name.
- **Listings.** When the gold lists several values, `2 \\text{ and } 3`, `x = 2 \\text{ or }
  x = 3` and `\\pm 2` (for `-2, 2`) list them too. For a single-valued gold, "or", "and" and
  `\\pm` remain hedges.
- **Containers.** Brackets decide the kind: `(a, b)` is ordered (a point, a pair), `\\{a, b\\}`
  is a set, a bare `a, b` takes the gold's kind (ordered for a pair gold, any order for a set or
  a bare list). A set never matches a pair and a pair never matches a set.
- **Units.** A unit on one side only is ignored (`3 \\text{ cm}` for 3); units on both sides
  must agree when both are known units (`5 m` vs `5 km`, `5 cents` vs `\\$5` are wrong;
  `5 \\text{ meters}` vs `5 m` is fine). Unknown words are left to the parser.
- **Percent** (`\\%`, `\\text{ percent}`) is a fraction of one when the other side is a number strictly between -1 and 1
  (`50\\%` is `\\frac12`; `\\frac12\\%` is not), a label otherwise (`25\\%` is 25, not 0.25).
- **Restated quantities**: `f(-2)+f(-1)+f(0) = \\frac{14}{3}`, `AF^2+BF^2+CF^2 = 3R^2`,
  `21 + 49 = 70`: a box that ends in the value is the value when every left side only names or
  computes the asked quantity (`is_quantity`) and a numeric left side is true arithmetic. A left
  side in free lowercase variables (`3x - y + 13 = 0`) is an equation, not a restatement.
- **Membership** `n \\in \\{-2, 1\\}` names the values like `n = ...` does.
- **Column vectors** `\\begin{pmatrix} a \\\\ b \\end{pmatrix}` and `\\langle a, b \\rangle` are the
  tuple `(a, b)`.
- **Text answers** (`\\text{ellipse}`) match the same words, case and articles aside
  (`\\text{an ellipse}`); a choice label `(C)` matches `C`, `(C)` and `(C) Plane`, and no other
  label. A number in `\\text{}` (`\\text{6}`) is the number; a number word (`\\text{two}`) is not
  read (left to the LLM judge).
- **Degrees**: `30°`, `30^\\circ`, `30^{\\circ}` and `30 \\text{ degrees}` are all 30 degrees.
- **Repeating decimals** `0.\\overline{3}`, `0.1\\overline{6}` are the exact fractions 1/3, 1/6.
- **Thousands**: a number grouped by commas in threes (`32,000`) is one number, not a list;
  MATH-500's `10,\\!080` and `{,}` separators are unambiguous and read anywhere (`\\frac{1{,}000}{3}`).
- **Named values on both sides** (`a = 2, b = 3`): the names must match, then the values.
"""

from __future__ import annotations

import re
from fractions import Fraction

# ---- top-level structure ----------------------------------------------------------------------
_OPEN = "([{"
_CLOSE = ")]}"


def split_top(s: str, seps: tuple[str, ...]) -> list[str]:
    """Split `s` at any of `seps` that is outside all brackets (escaped braces count as brackets)."""
    parts, depth, start, i, n = [], 0, 0, 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n and s[i + 1] in "{}":
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif depth == 0:
            for sep in seps:
                if s.startswith(sep, i):
                    parts.append(s[start:i])
                    i += len(sep)
                    start = i
                    break
            else:
                i += 1
            continue
        i += 1
    parts.append(s[start:])
    return parts


def _encloses(s: str, open_: str, close: str) -> bool:
    """Whether `s` is `open_ ... close` with the first opener matched by the last closer."""
    if not (s.startswith(open_) and s.endswith(close)) or len(s) < len(open_) + len(close):
        return False
    inner = s[len(open_) : len(s) - len(close)]
    depth = 0
    for part in re.split(r"(\\[{}]|[()\[\]{}])", inner):
        if part in ("(", "[", "{", "\\{"):
            depth += 1
        elif part in (")", "]", "}", "\\}"):
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def strip_group(s: str) -> str:
    """`{{5}}` -> `5`; `\\boxed{\\boxed{5}}` -> `5`: grouping braces and nested boxes carry nothing."""
    while True:
        t = s.strip()
        m = re.match(r"\\(?:boxed|fbox)\s*(?=\{)", t)
        if m and _encloses(t[m.end() :], "{", "}"):
            t = t[m.end() + 1 : -1]
        elif _encloses(t, "{", "}"):
            t = t[1:-1]
        if t == s:
            return t
        s = t


# ---- simple rewrites --------------------------------------------------------------------------
_REPEATING_RE = re.compile(r"(-?)(\d*)\.(\d*)\\overline\s*\{?\s*(\d+)\s*\}?")


def _repeating_to_frac(m: re.Match[str]) -> str:
    sign, whole, fixed, rep = m.group(1), m.group(2) or "0", m.group(3), m.group(4)
    # x = whole.fixed(rep)(rep)... = whole + (fixed.rep - fixed) / (10^len(fixed) (10^len(rep)-1))
    num = int(fixed + rep) - int(fixed or "0")
    den = (10 ** len(rep) - 1) * 10 ** len(fixed)
    x = int(whole) + Fraction(num, den)
    return f"{sign}\\frac{{{x.numerator}}}{{{x.denominator}}}"


_THOUSANDS_RE = re.compile(r"^(\\\$)?\s*([-+]?\d{1,3}(?:(?:,|\{,\})\d{3})+(?:\.\d+)?)$")
# separators only ever written between digit groups: `{,}`, `,\!` (MATH-500), `\,` and `\ `
_GROUP_SEP = r"(?:\{,\}|,\s*\\!\s*|\\[, ]\s*)"
_GROUPED_RE = re.compile(r"(?<![\d.])\d{1,3}(?:" + _GROUP_SEP + r"\d{3})+(?!\d)")
_SEP_RE = re.compile(_GROUP_SEP)
_WRAP_RE = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox)\s*\{([^{}]*)\}")
_ANGLE_VEC_RE = re.compile(r"\\left\s*\\langle(.*)\\right\s*\\rangle|\\langle(.*)\\rangle", re.S)
_MATRIX_RE = re.compile(r"^\\begin\{([pbBvV]?matrix)\}(.*)\\end\{\1\}$", re.S)


def column_vector(s: str) -> str | None:
    """`\\begin{pmatrix} a \\\\ b \\end{pmatrix}` -> `(a, b)`; None for anything else (a matrix
    with columns, a single entry)."""
    m = _MATRIX_RE.match(s.strip())
    if not m or "&" in m.group(2):
        return None
    rows = [r.strip() for r in m.group(2).split("\\\\") if r.strip()]
    return "(" + ", ".join(rows) + ")" if len(rows) > 1 else None


def rewrite(s: str) -> str:
    """Degree sign, repeating decimals, thousands separators (`32,000`, `\\$1{,}000`,
    `10,\\!080`), a number in `\\text{}` and column vectors into forms the parser and fast path
    read."""
    s = _GROUPED_RE.sub(lambda m: _SEP_RE.sub("", m.group(0)), s)
    w = _WRAP_RE.fullmatch(s.strip())
    if w and not re.search(r"[A-Za-z]", w.group(1)) and re.search(r"\d", w.group(1)):
        s = w.group(1)
    vec = column_vector(s)
    if vec is not None:
        s = vec
    angle = _ANGLE_VEC_RE.fullmatch(s.strip())
    inner = (angle.group(1) or angle.group(2) or "") if angle else ""
    if "," in inner and "\\langle" not in inner and "\\rangle" not in inner:
        s = "(" + inner + ")"  # `\\langle a, b \\rangle`: a vector, as a tuple
    m = _THOUSANDS_RE.match(s.strip())
    if m:
        s = (m.group(1) or "") + m.group(2).replace("{,}", "").replace(",", "")
    if "°" in s:
        s = s.replace("°", "^\\circ")
    if "\\overline" in s:
        s = _REPEATING_RE.sub(_repeating_to_frac, s)
    return s


# ---- units and percent ------------------------------------------------------------------------
_UNIT_WORDS = {
    "mm": "mm millimeter millimeters millimetre millimetres",
    "cm": "cm centimeter centimeters centimetre centimetres",
    "m": "m meter meters metre metres",
    "km": "km kilometer kilometers kilometre kilometres",
    "in": "in inch inches",
    "ft": "ft foot feet",
    "yd": "yd yard yards",
    "mi": "mi mile miles",
    "s": "s sec secs second seconds",
    "min": "min mins minute minutes",
    "h": "h hr hrs hour hours",
    "day": "day days",
    "week": "week weeks",
    "year": "year years yr yrs",
    "g": "g gram grams",
    "kg": "kg kilogram kilograms",
    "lb": "lb lbs pound pounds",
    "usd": "dollar dollars \\$ $",
    "cent": "cent cents ¢ \\cent",
    "%": "percent",
    "deg": "deg degree degrees ^\\circ",
    "rad": "rad radian radians",
    "l": "l liter liters litre litres",
    "ml": "ml milliliter milliliters",
    "mph": "mph",
}
UNITS = {w: unit for unit, words in _UNIT_WORDS.items() for w in words.split()}
_TEXT_RE = re.compile(r"\\(?:text|mathrm|textrm|mbox|textnormal|operatorname)\s*\{([^{}]*)\}")
_SQUARE = {"square": "2", "sq": "2", "cubic": "3"}
_NUMBERISH = re.compile(r"^[-+]?(?:\d[\d,]*\.?\d*|\.\d+|\\[dt]?frac\{[^{}]*\}\{[^{}]*\})$")


def _unit_of_words(words: str) -> str | None:
    """`cm`, `square meters`, `cm^2` -> a canonical unit; None when a word is not a unit."""
    toks = words.replace("^", " ^").split()
    power, names = "", []
    for t in toks:
        t = t.lower().strip(".")
        if t in _SQUARE:
            power = _SQUARE[t]
        elif re.fullmatch(r"\^\{?\d\}?", t):
            power = re.sub(r"\D", "", t)
        elif t in ("per", "/"):
            names.append("/")
        elif t in UNITS:
            names.append(UNITS[t])
        else:
            return None
    if not names:
        return None
    return "".join(names) + (f"^{power}" if power and power != "1" else "")


def split_unit(s: str) -> tuple[str, str | None]:
    """(the answer without its unit, the canonical unit or None). Only known units are split off;
    `\\%` and degree marks are units too."""
    t = s.strip()
    unit = None
    if t.startswith("\\$") and len(t) > 2:
        t, unit = t[2:].strip(), "usd"
    if t.endswith("\\%") or t.endswith("%"):
        return t.rstrip("%").rstrip("\\").strip(), "%"
    m = re.search(r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|\\circ|\\degree)$", t)
    if m:
        return t[: m.start()].strip(), "deg"
    # trailing \text{...} groups (with optional ^2) that spell a unit
    m = re.search(r"(?:\\[,;!: ]|\s)*((?:" + _TEXT_RE.pattern + r"\s*(?:\^\s*\{?\d\}?)?\s*)+)$", t)
    if m:
        words = " ".join(g.group(1) for g in _TEXT_RE.finditer(m.group(1)))
        power = re.search(r"\}\s*\^\s*\{?(\d)\}?\s*$", m.group(1))
        u = _unit_of_words(words + (f" ^{power.group(1)}" if power else ""))
        if u is not None:
            return t[: m.start()].strip(), u
        return t, unit
    # bare `5 km`, `12cm^2` after a plain number
    m = re.match(r"^(.*?\d)\s*([A-Za-z¢]+(?:\^\{?\d\}?)?)$", t)
    if m and _NUMBERISH.match(m.group(1).strip()):
        u = _unit_of_words(m.group(2))
        if u is not None:
            return m.group(1).strip(), u
    return t, unit


# ---- names: `AB = 5` --------------------------------------------------------------------------
_OPERATOR_RE = re.compile(
    r"[-+*/<>]|\\(?:cdot|times|div|frac|dfrac|tfrac|sqrt|pm|mp|le|ge|neq)\b|\^"
)
_RELATION_RE = re.compile(r"=|\\le|\\ge|<|>|\\neq|\\approx")


def is_name(lhs: str) -> bool:
    """Whether `lhs` only names a quantity: `AB`, `|AB|`, `P(A)`, `\\angle A`, `f(x)`, `(x, y)`,
    `a_{10}`, `m\\angle ABC`; not `3x - y`, `0`, `x^2` or `2AB`."""
    t = lhs.strip()
    if not t or not re.search(r"[A-Za-z]", t) or re.match(r"^[-+]?\d", t):
        return False
    body = re.sub(r"_\s*(\{[^{}]*\}|\w)", "", t)  # subscripts may hold anything
    return not _OPERATOR_RE.search(body)


_IN_RE = re.compile(r"\\in(?![A-Za-z])")


def drop_name(pred: str) -> str | None:
    """The value of `name = value` (chains `AB = CD = 5` too) or `name \\in values`; None when
    `pred` is no such form."""
    if len(_IN_RE.findall(pred)) == 1 and "=" not in pred:
        pred = _IN_RE.sub("=", pred)
    parts = split_top(pred, ("=",))
    if len(parts) < 2 or any(p.strip() == "" for p in parts):
        return None
    if not all(is_name(p) for p in parts[:-1]):
        return None
    value = parts[-1].strip()
    names = {p.strip() for p in parts[:-1]}
    if value in names or re.fullmatch(r"[A-Za-z]", value or "-"):
        return None  # `x = x`, `x = y`: says nothing
    single = [n for n in names if re.fullmatch(r"[A-Za-z]", n)]
    if any(re.search(r"(?<![A-Za-z\\])" + n + r"(?![A-Za-z])", value) for n in single):
        return None  # `x = 2x - 5`: an equation in x, not a value of x
    return value


# ---- listings and containers ------------------------------------------------------------------
_LIST_SEPS = (
    ",",
    ";",
    "\\text{ and }",
    "\\text{ or }",
    "\\text{and}",
    "\\text{or}",
    "\\quad",
    "\\qquad",
    " and ",
    " or ",
    "\\text{, }",
)


def container(s: str) -> tuple[str, list[str]] | None:
    """("tuple" | "set" | "list", items) for a top-level collection of 2+ items, else None.
    Intervals (`[a, b)`, `(a, b]`) and vectors (`[a, b]`) are not containers here."""
    t = s.strip()
    t = re.sub(r"^\\left\s*", "", t)
    t = re.sub(r"\\right\s*(?=[)\]}]$|\\\}$)", "", t)
    for kind, o, c in (("tuple", "(", ")"), ("set", "\\{", "\\}")):
        if _encloses(t, o, c):
            items = split_top(t[len(o) : len(t) - len(c)], (",", ";"))
            return (kind, [i.strip() for i in items]) if len(items) > 1 else None
    if t[:1] in "([" and t[-1:] in ")]":
        return None  # an interval or a vector: the parser's business
    items = [i.strip() for i in split_top(t, _LIST_SEPS)]
    if len(items) > 1 and all(items):
        return "list", items
    return None


def expand_pm(s: str) -> list[str] | None:
    """`\\pm 2` -> [`2`, `-2`]; `1 \\pm \\sqrt{2}` -> [`1+\\sqrt{2}`, `1-\\sqrt{2}`]. One top-level
    `\\pm` only; None otherwise."""
    parts = split_top(s, ("\\pm",))
    if len(parts) != 2:
        return None
    a, b = parts[0].strip(), parts[1].strip()
    if not b:
        return None
    if not a:
        return [b, f"-{b}" if not b.startswith("-") else b[1:]]
    return [f"{a}+{b}", f"{a}-({b})"]


_LEADING_CONJ_RE = re.compile(r"^(?:\\text\s*\{\s*(?:and|or)\s*\}|(?:and|or)\s)")


def pred_items(pred: str) -> list[str]:
    """The values a prediction lists: items of a container or listing, `\\pm` expanded (`x = \\pm 2`
    -> `2`, `-2`). Names stay (`x = 2`): the item comparison reads them against the gold's."""
    c = container(pred)
    raw = c[1] if c else [pred]
    items: list[str] = []
    for it in raw:
        it = _LEADING_CONJ_RE.sub("", it.strip()).strip()  # `1, 2, and 3`
        value = drop_name(it)
        pm = expand_pm(value if value is not None else it)
        items.extend(pm if pm else [it])
    return items


def decimal_places(s: str) -> int | None:
    """Most digits after a decimal point in any number written in `s`; None when none is."""
    found = re.findall(r"\d\.(\d+)|(?<!\d)\.(\d+)", s)
    if not found:
        return None
    return max(len(a or b) for a, b in found)


def significant_digits(s: str) -> int:
    """Significant digits of the longest decimal number written in `s`."""
    best = 0
    for m in re.finditer(r"\d*\.\d+|\d+\.\d*", s):
        digits = m.group(0).replace(".", "").lstrip("0")
        best = max(best, len(digits))
    return best


# ---- restated quantities: `f(-2)+f(-1)+f(0) = \\frac{14}{3}` ---------------------------------------
_SUBSCRIPTED_RE = re.compile(r"[A-Za-z]\s*_\s*(?:\{[^{}]*\}|\w)")
_FUNC_VALUE_RE = re.compile(r"(?<![A-Za-z\\])[fghpqFGHPQ]\s*\([^()]*\)")
_QUANTITY_CMDS_RE = re.compile(
    r"\\(?:angle|measuredangle|triangle|overline|sin|cos|tan|cot|sec|csc|log|ln|frac|dfrac|tfrac"
    r"|sqrt|cdot|times|left|right|pi|binom|lfloor|rfloor|lceil|rceil|vert|mid|circ)(?![A-Za-z])"
)


def is_quantity(lhs: str) -> bool:
    """Whether a left side of `lhs = value` only names or computes a quantity: points and segments
    (`AF^2 + BF^2`), function values (`f(-2) + f(0)`), sequence terms (`a_1 + a_2`), numbers
    (`21 + 49`). A free lowercase variable (`3x - y + 13`, `x - x`) makes it an equation, and a
    multiple of a quantity (`2AB`) is another quantity."""
    t = _SUBSCRIPTED_RE.sub("S", lhs.strip())
    if re.search(r"\d\s*(?:\\cdot|\\times)?\s*[A-Za-z]", t):
        return False
    t = _FUNC_VALUE_RE.sub("F", t)
    t = _QUANTITY_CMDS_RE.sub(" ", t)
    if not t.strip() or re.search(r"\\[A-Za-z]", t):
        return False  # empty, or a command whose meaning we do not know
    return not re.search(r"[a-z]", t)


def has_letters(s: str) -> bool:
    """Whether `s` names anything (a letter outside LaTeX number commands such as `\\frac`)."""
    return bool(re.search(r"[A-Za-z]", _QUANTITY_CMDS_RE.sub(" ", s)))


# ---- text answers: `\\text{ellipse}`, `\\text{(C)}` -------------------------------------------------
_TEXT_RE_ANY = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox|textit)\s*\{([^{}]*)\}")
_TEXT_ONLY_RE = re.compile(r"^(?:\s*\\(?:text|textbf|textrm|mathrm|mbox|textit)\s*\{[^{}]*\}\s*)+$")
_ARTICLES = {"a", "an", "the"}
_LABEL_RE = re.compile(r"^\(?([A-Ea-e])\)?(?=$|[\s.:,)])")
_ANY_LABEL_RE = re.compile(r"\([A-Ea-e]\)")


def text_words(s: str) -> list[str] | None:
    """The words of an answer written only in `\\text{}` groups, lowercased, articles and end
    punctuation dropped; None when `s` is not text only."""
    t = s.strip()
    if not _TEXT_ONLY_RE.match(t):
        return None
    words = " ".join(_TEXT_RE_ANY.findall(t)).lower().replace(",", " ").split()
    return [w.strip(".") for w in words if w.strip(".") not in _ARTICLES and w.strip(".")]


def text_match(gold: str, pred: str) -> bool | None:
    """Text gold against a prediction: True/False when the rule decides, None when `gold` is not a
    text answer (or `pred` is neither text nor a bare label), left to the parser."""
    g = text_words(gold)
    if g is None and re.fullmatch(r"\([A-E]\)", gold.strip()):
        g = [gold.strip().lower()]  # a bare choice label `(C)` reads as `\\text{(C)}`
    if g is None:
        return None
    p = text_words(pred)
    raw = p if p is not None else pred.strip().split()
    label = _LABEL_RE.match(" ".join(g))
    if label and len(g) == 1:  # a choice: `(C)` matches `C`, `(C)`, `(C) Plane`
        first = _LABEL_RE.match(" ".join(raw))
        if first is None:
            return False if p is not None else None
        rest = " ".join(raw)[first.end() :]
        return first.group(1).lower() == label.group(1).lower() and not _ANY_LABEL_RE.search(rest)
    if p is None:
        return None
    return p == g


# ---- normalization and the problem's own quantities ---------------------------------------------
# `\\mathrm{e}` is parsed by latex2sympy as an upright text symbol that then drops out of products
# (`2\\mathrm{e}` -> 2); rewriting the roman constants to their italic forms keeps them.
ROMAN_CONST_RE = re.compile(r"\\(?:mathrm|operatorname|text|rm)\s*\{\s*([ei])\s*\}")
NOISE_RE = re.compile(r"\s+|\$|\\[,!;: ]|\\left|\\right|\\displaystyle")
MAX_PROMPT_CHARS = 20000  # prompt text searched for asked quantities
_SPAN_RE = re.compile(r"\$([^$]{1,200})\$|\\\((.{1,200}?)\\\)")


def normalize(s: str) -> str:
    """`s` without spacing, `$`, `\\left`/`\\right` and roman constants' wrappers: the text key
    two answers are compared by before any parsing."""
    s = NOISE_RE.sub("", s)
    s = ROMAN_CONST_RE.sub(r"\1", s)
    return s.rstrip(".")


def asked_quantities(prompt: str) -> frozenset[str]:
    """The problem's inline math spans (`$a+b$`, `\\(f(3)\\)`), normalized: the quantities a
    restating box may name on its left side."""
    spans = _SPAN_RE.findall(prompt[:MAX_PROMPT_CHARS])
    return frozenset(normalize(a or b).rstrip("?.,") for a, b in spans if len(a or b) <= 200)


def asked_value(pred: str, asked: frozenset[str]) -> str:
    """The value of `asked = ... = value` when every left side is one of the problem's own spans
    (never parsed: `1^{(2^{235423523})} = 1` is the value 1); `pred` itself otherwise."""
    if "=" not in pred:
        return pred
    parts = [normalize(p) for p in split_top(pred, ("=",))]
    if len(parts) < 2 or not parts[-1] or parts[-1] in parts[:-1]:
        return pred
    if all(p in asked and len(p) > 1 for p in parts[:-1]):  # one letter: a name (drop_name)
        return split_top(pred, ("=",))[-1].strip()
    return pred
