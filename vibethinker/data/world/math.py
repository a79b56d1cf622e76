"""Math world: short integer problems in five subdomains, with a procedural teacher.

Every problem is solved by one or more *paths*: a list of arithmetic steps `a op b = r` whose
operands are literals or earlier results. A path renders as a compact trace,
`<think>3*4=12;12-2=10</think>\\boxed{10}`, the format a ~1M-parameter model learned in the
calibration run. Distinct paths are distinct solution methods (another order of
operations, the formula instead of iteration, guess-and-check, a verification step); commuted
operands are only a fallback when a problem has fewer than three. Difficulty = steps of the
canonical path (1-4). All values are non-negative integers, so answers are digits only.

Calibration: every number a path shows (operands, step results, the answer) is at
most MAX_VALUE. The ~1M demo model learns the few hundred one- and two-digit facts this leaves
in its SFT budget; with values up to ~100 it reached 0.14 held-out Pass@1 and copied operands
and single-digit sums wrongly. Paths of a problem that exceed the cap are dropped; a problem
whose canonical path exceeds it is redrawn.

Each trace's steps are also its claims for CLR ("12-2=10", true) plus one corrupted copy per step
("12-2=11", false). Wrong traces are arithmetic slips propagated through the later steps, so the
final answer is wrong while every other step is locally consistent (what a filter must catch).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vibethinker.types import Problem

SUBDOMAINS = ("arithmetic", "algebra", "sequence", "word", "modular")
SUFFIX = " Let's think step by step and output the final answer within \\boxed{}."
MAX_TRACES = 4
MAX_VALUE = 40  # largest number any kept path shows (see the module docstring)


@dataclass(frozen=True)
class R:
    """A reference to the result of step `i` of the same path."""

    i: int


Operand = int | R
Step = tuple[Operand, str, Operand]
Path = tuple[list[Step], Operand]  # (steps, what the answer is: usually R(last))


def _apply(a: int, op: str, b: int) -> int | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a // b if b and a % b == 0 else None
    raise ValueError(op)


def run_path(path: Path, slip: tuple[int, int] | None = None) -> tuple[list[tuple], int] | None:
    """Evaluate a path -> ([(a, op, b, shown_result)], answer), or None if a value goes negative
    or a division is inexact. `slip=(k, d)`: step k shows result+d and later steps use it."""
    steps, ans = path
    vals: list[int] = []
    rows = []
    for k, (a, op, b) in enumerate(steps):
        av = vals[a.i] if isinstance(a, R) else a
        bv = vals[b.i] if isinstance(b, R) else b
        r = _apply(av, op, bv)
        if r is None:
            return None
        if slip and slip[0] == k:
            r += slip[1]
        if r < 0:
            return None
        vals.append(r)
        rows.append((av, op, bv, r))
    return rows, (vals[ans.i] if isinstance(ans, R) else ans)


def render(rows: list[tuple], answer: int) -> str:
    body = ";".join(f"{a}{op}{b}={r}" for a, op, b, r in rows)
    return f"<think>{body}</think>\\boxed{{{answer}}}"


def claims_of(rows: list[tuple], rng: random.Random) -> list[dict]:
    """True claims of a trace, then one corrupted (false) copy of each step."""
    out = [{"text": f"{a}{op}{b}={r}", "true": True} for a, op, b, r in rows]
    for a, op, b, r in rows:
        bad = r + rng.choice([d for d in (-2, -1, 1, 2) if r + d >= 0])
        out.append({"text": f"{a}{op}{b}={bad}", "true": False})
    return out


def _commute(path: Path) -> Path:
    """Same steps with + and * operands swapped (a wording variant, used only as a fallback)."""
    steps, ans = path
    return ([(b, op, a) if op in "+*" else (a, op, b) for a, op, b in steps], ans)


def _check(path: Path) -> Path:
    """Append a verification step that undoes the last step (a different path: solve, then check)."""
    steps, ans = path
    a, op, b = steps[-1]
    last = R(len(steps) - 1)
    inverse = {"+": (last, "-", b), "-": (last, "+", b), "*": (last, "/", b), "/": (last, "*", b)}
    if op == "*" and b == 0:
        return path
    return (steps + [inverse[op]], ans)


# ---------------------------------------------------------------- subdomain generators
# Each returns (prompt without the suffix, [paths], canonical path first) or None to resample.


def _product(steps: list[Step], fs: list[int], right: bool) -> Operand:
    """Multiply a term's factors (left to right, or right to left), appending the steps."""
    cur: Operand = fs[-1] if right else fs[0]
    for f in reversed(fs[:-1]) if right else fs[1:]:
        steps.append((f, "*", cur) if right else (cur, "*", f))
        cur = R(len(steps) - 1)
    return cur


def _arith_path(terms: list[tuple[str, list[int]]], strategy: str) -> Path:
    """Strategies: "products" (all products first, then + and - left to right), "inline" (each
    term's product when reached), "right" (products right to left first), "plus_first" (sum the
    + terms, then take away the - terms)."""
    steps: list[Step] = []
    if strategy == "inline":
        cur = _product(steps, terms[0][1], False)
        for s, fs in terms[1:]:
            v = _product(steps, fs, False)
            steps.append((cur, s, v))
            cur = R(len(steps) - 1)
        return steps, cur
    order = range(len(terms)) if strategy != "right" else reversed(range(len(terms)))
    tv = {t: _product(steps, terms[t][1], strategy == "right") for t in order}
    signed = [(terms[t][0], tv[t]) for t in range(len(terms))]
    if strategy == "plus_first":
        signed = [x for x in signed if x[0] == "+"] + [x for x in signed if x[0] == "-"]
    cur = signed[0][1]
    for s, v in signed[1:]:
        steps.append((cur, s, v))
        cur = R(len(steps) - 1)
    return steps, cur


def _arithmetic(rng: random.Random, diff: int) -> tuple[str, list[Path]] | None:
    nums = [rng.randint(1, 9) for _ in range(diff + 1)]
    ops = [rng.choice("+-*") for _ in range(diff)]
    expr = "".join(f"{n}{o}" for n, o in zip(nums, ops)) + str(nums[-1])
    terms: list[tuple[str, list[int]]] = [("+", [nums[0]])]  # signed terms, each a product
    for n, o in zip(nums[1:], ops):
        if o == "*":
            terms[-1][1].append(n)
        else:
            terms.append((o, [n]))
    paths = [_arith_path(terms, s) for s in ("products", "inline", "right", "plus_first")]
    paths.append(_check(paths[0]))
    return f"Compute {expr}.", paths


def _algebra(rng: random.Random, diff: int) -> tuple[str, list[Path]] | None:
    x, a, b = rng.randint(0, 9), rng.randint(2, 9), rng.randint(1, 9)
    if diff == 1:
        if rng.random() < 0.5:
            c = x + b
            return f"Solve x+{b}={c}.", [([(c, "-", b)], R(0)), ([(x, "+", b)], x)]
        c = a * x
        return f"Solve {a}*x={c}.", [([(c, "/", a)], R(0)), ([(a, "*", x)], x)]
    if diff == 2:
        if rng.random() < 0.5:
            c = a * x + b
            return f"Solve {a}*x+{b}={c}.", [
                ([(c, "-", b), (R(0), "/", a)], R(1)),
                ([(a, "*", x), (R(0), "+", b)], x),  # guess and check
            ]
        c = a * (x + b)
        return f"Solve {a}*(x+{b})={c}.", [
            ([(c, "/", a), (R(0), "-", b)], R(1)),
            ([(a, "*", b), (c, "-", R(0)), (R(1), "/", a)], R(2)),  # expand first
        ]
    # diff >= 3: x on both sides
    cc = rng.randint(1, a - 1) if a > 2 else 1
    d = rng.randint(0, 9)
    bb = (a - cc) * x + d
    if bb > 60:
        return None
    return f"Solve {a}*x+{d}={cc}*x+{bb}.", [
        ([(a, "-", cc), (bb, "-", d), (R(1), "/", R(0))], R(2)),
        ([(bb, "-", d), (a, "-", cc), (R(0), "/", R(1))], R(2)),
        ([(a, "*", x), (R(0), "+", d), (cc, "*", x), (R(2), "+", bb)], x),  # check both sides
    ]


def _sequence(rng: random.Random, diff: int) -> tuple[str, list[Path]] | None:
    a1, d = rng.randint(0, 29), rng.randint(1, 9)
    k = max(diff - 1, 1)  # terms beyond the three shown; iterating takes 1 + k steps
    n = 3 + k
    t = [a1 + i * d for i in range(3)]
    it1: list[Step] = [(t[1], "-", t[0]), (t[2], "+", R(0))]
    it2: list[Step] = [(t[2], "-", t[1]), (t[2], "+", R(0))]
    for _ in range(k - 1):
        it1.append((R(len(it1) - 1), "+", R(0)))
        it2.append((R(len(it2) - 1), "+", R(0)))
    formula: list[Step] = [(t[1], "-", t[0]), (n, "-", 1), (R(1), "*", R(0)), (a1, "+", R(2))]
    paths = [(it1, R(len(it1) - 1)), (it2, R(len(it2) - 1)), (formula, R(3))]
    return f"{t[0]},{t[1]},{t[2]},... Find term {n}.", paths


_NAMES = ("Ann", "Bob", "Tim", "Sue", "Max", "Eva")
_ITEMS = ("pens", "eggs", "cards", "cups", "coins", "books")


def _word(rng: random.Random, diff: int) -> tuple[str, list[Path]] | None:
    nm, it = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b, c, d = (rng.randint(1, 9) for _ in range(4))
    if diff == 1:
        if rng.random() < 0.5:
            return f"{nm} has {a} {it} and gets {b} more. How many {it}?", [
                ([(a, "+", b)], R(0)),
                ([(b, "+", a)], R(0)),
            ]
        a = a + b
        return f"{nm} has {a} {it} and gives away {b}. How many {it}?", [
            ([(a, "-", b)], R(0)),
            _check(([(a, "-", b)], R(0))),
        ]
    if diff == 2:
        rep: list[Step] = [(a, "+", c)] + [(R(i), "+", c) for i in range(b - 1)]
        paths = [([(b, "*", c), (a, "+", R(0))], R(1)), ([(c, "*", b), (R(0), "+", a)], R(1))]
        if b <= 3:
            paths.insert(1, (rep, R(len(rep) - 1)))  # repeated addition
        return f"{nm} has {a} {it} and buys {b} bags of {c}. How many {it}?", paths
    if diff == 3:
        return f"{nm} has {a} {it}, buys {b} bags of {c} and gives away {d}. How many {it}?", [
            ([(b, "*", c), (a, "+", R(0)), (R(1), "-", d)], R(2)),
            ([(a, "-", d), (b, "*", c), (R(0), "+", R(1))], R(2)),
            ([(b, "*", c), (R(0), "-", d), (a, "+", R(1))], R(2)),
        ]
    e, f = rng.randint(1, 9), rng.randint(1, 9)
    return f"{nm} buys {b} bags of {c} {it} and {e} bags of {f}, then gives away {d}. How many?", [
        ([(b, "*", c), (e, "*", f), (R(0), "+", R(1)), (R(2), "-", d)], R(3)),
        ([(e, "*", f), (b, "*", c), (R(0), "+", R(1)), (R(2), "-", d)], R(3)),
        ([(b, "*", c), (R(0), "-", d), (e, "*", f), (R(1), "+", R(2))], R(3)),
    ]


def _modular(rng: random.Random, diff: int) -> tuple[str, list[Path]] | None:
    m = rng.randint(2, 9)
    if diff == 1:
        a = rng.randint(m, 2 * m - 1)
        return f"Find {a} mod {m}.", [([(a, "-", m)], R(0)), _check(([(a, "-", m)], R(0)))]
    if diff == 2:
        a = rng.randint(2 * m, 60)
        q = a // m
        paths = [([(m, "*", q), (a, "-", R(0))], R(1)), ([(q, "*", m), (a, "-", R(0))], R(1))]
        if q <= 4:  # repeated subtraction
            rep: list[Step] = [(a, "-", m)] + [(R(i), "-", m) for i in range(q - 1)]
            paths.insert(1, (rep, R(q - 1)))
        return f"Find {a} mod {m}.", paths
    x, y = rng.randint(2, 9), rng.randint(2, 9)
    c = rng.randint(1, 9) if diff >= 4 else 0
    v = x * y + c
    q = v // m
    head: list[Step] = [(x, "*", y)] + ([(R(0), "+", c)] if c else [])
    h = R(len(head) - 1)
    prompt = f"Find ({x}*{y}+{c}) mod {m}." if c else f"Find {x}*{y} mod {m}."
    n = len(head)
    return prompt, [
        (head + [(m, "*", q), (h, "-", R(n))], R(n + 1)),
        (head + [(q, "*", m), (h, "-", R(n))], R(n + 1)),
        (head + [(h, "-", m * q)], R(n)),  # nearest multiple of m known by heart
    ]


GENERATORS = {
    "arithmetic": _arithmetic,
    "algebra": _algebra,
    "sequence": _sequence,
    "word": _word,
    "modular": _modular,
}
# Difficulty mix: mostly 1-3 steps; 4-step problems were hard for the tiny model (0.25).
_DIFF_WEIGHTS = (0.3, 0.3, 0.25, 0.15)


def _wrong_traces(paths: list[Path], answer: int, rng: random.Random, n: int) -> list[str]:
    """Arithmetic slips: one step's result is off by a little, later steps follow it."""
    out: list[str] = []
    cands = [p for p in paths if isinstance(p[1], R)]
    for _ in range(20):
        if len(out) >= n or not cands:
            break
        p = rng.choice(cands)
        k = rng.randrange(p[1].i + 1)
        res = run_path(p, slip=(k, rng.choice((-2, -1, 1, 2))))
        if res is None or res[1] == answer:
            continue
        t = render(*res)
        if t not in out:
            out.append(t)
    return out


def _small(run: tuple[list[tuple], int]) -> bool:
    rows, answer = run
    return answer <= MAX_VALUE and all(max(a, b, r) <= MAX_VALUE for a, _, b, r in rows)


def make_math(rng: random.Random, idx: int, subdomain: str | None = None) -> Problem:
    """One math problem (subdomain cycles with idx unless given) with teacher traces."""
    sub = subdomain or SUBDOMAINS[idx % len(SUBDOMAINS)]
    while True:
        diff = rng.choices(range(1, 5), weights=_DIFF_WEIGHTS)[0]
        made = GENERATORS[sub](rng, diff)
        if made is None:
            continue
        prompt, paths = made
        # Commuted operands are only a wording variant: a fallback for problems with few paths.
        runs = [run_path(p) for p in paths] + [run_path(_commute(paths[0]))]
        runs = [r if r is not None and _small(r) else None for r in runs]
        if runs[0] is None:
            continue
        answer = runs[0][1]
        traces: list[str] = []
        rows_of: list[list[tuple]] = []
        for j, r in enumerate(runs):
            if r is None or r[1] != answer or (j == len(paths) and len(traces) >= 3):
                continue
            t = render(*r)
            if t not in traces:
                traces.append(t)
                rows_of.append(r[0])
        if len(traces) > MAX_TRACES:
            keep = sorted(rng.sample(range(len(traces)), MAX_TRACES))
            traces, rows_of = [traces[i] for i in keep], [rows_of[i] for i in keep]
        return Problem(
            id="",
            domain="math",
            subdomain=sub,
            difficulty=len(paths[0][0]),
            prompt=prompt + SUFFIX,
            answer=str(answer),
            traces=traces,
            claims=[claims_of(rows, rng) for rows in rows_of],
            wrong_traces=_wrong_traces(paths, answer, rng, n=2),
        )
